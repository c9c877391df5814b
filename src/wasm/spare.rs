//! The spare: one sandbox whose interpreter is already started, so `create_sandbox` answers
//! in about a millisecond instead of waiting for the interpreter's first turn.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::call::after_call_source;
use super::context::Context;
use super::record::Sandbox;
use super::registry::Registry;
use super::vm::Image;
use crate::sandbox::Limits;

/// Let the call that took the last spare run first: on two cores, warming beside it would
/// slow it down.
const DELAY: Duration = Duration::from_millis(30);
const WARM_UP: &str = "0";
/// At shutdown, how long to wait for a spare being warmed.
const STOP_WAIT: Duration = Duration::from_millis(500);
const FORGET_WARM_UP: &str = "__import__('builtins').__dict__.pop('_', None) and None";

/// A spare sandbox and the image its interpreter started from.
type Held = (Arc<Sandbox>, Image);

#[derive(Default)]
pub struct Spare {
    slot: Arc<tokio::sync::Mutex<Option<Held>>>,
    /// Set at shutdown, so no new interpreter starts while the process winds down.
    stopping: Arc<AtomicBool>,
}

impl Spare {
    /// Starts a spare interpreter with `limits` in the background, unless one is ready.
    pub fn warm(&self, ctx: &Arc<Context>, limits: Limits) {
        let (slot, stopping, ctx) = (self.slot.clone(), self.stopping.clone(), ctx.clone());
        tokio::spawn(async move {
            tokio::time::sleep(DELAY).await;
            let mut slot = slot.lock().await;
            if slot.is_some() || stopping.load(Ordering::SeqCst) {
                return;
            }
            let Ok(start) = ctx.programs.for_memory(limits.memory_mb).await else {
                return;
            };
            let Ok(sb) = ctx.registry.prepare(limits) else {
                return;
            };
            match start.session(&sb.session_config(&ctx.memory)).await {
                Ok(mut session) => {
                    // Walk the paths a first call takes (compile, echo, door, figure check) so
                    // their pages are faulted in now, not while the user waits; leave no `_`.
                    let quiet = CancellationToken::new();
                    let after_call = after_call_source(Duration::from_secs(10));
                    for code in [WARM_UP, &after_call, FORGET_WARM_UP] {
                        session.turn(code, Duration::from_secs(10), None, &quiet).await;
                    }
                    if stopping.load(Ordering::SeqCst) {
                        // The server stopped meanwhile without waiting for this one.
                        drop(session);
                        ctx.registry.discard(&sb);
                        return;
                    }
                    sb.slot.lock().await.session = Some(session);
                    *slot = Some((sb, start.program.image));
                }
                Err(e) => {
                    tracing::warn!("could not warm a spare sandbox: {e}");
                    ctx.registry.discard(&sb);
                }
            }
        });
    }

    /// The spare, if it has the limits asked for and started from `image`; one being warmed
    /// is waited for, which is sooner than starting another interpreter beside it. A spare
    /// from an older image (the plain one, before the warm one was ready) is removed.
    pub async fn take(&self, limits: &Limits, image: Image, registry: &Registry) -> Option<Arc<Sandbox>> {
        let mut slot = self.slot.lock().await;
        match slot.take() {
            Some((sb, had)) if sb.limits == *limits && had == image => Some(sb),
            Some((sb, had)) if had != image => {
                sb.slot.lock().await.session = None;
                registry.discard(&sb);
                None
            }
            other => {
                *slot = other;
                None
            }
        }
    }

    /// Keeps a spare that could not be handed out after all.
    pub async fn put_back(&self, sb: Arc<Sandbox>, image: Image) {
        *self.slot.lock().await = Some((sb, image));
    }

    /// Stops warming and removes the spare (server shutdown).
    pub async fn stop(&self, registry: &Registry) {
        self.stopping.store(true, Ordering::SeqCst);
        // A spare being warmed holds the slot through a few turns of its interpreter, longer on
        // a busy machine: shutdown does not wait long for it (it discards itself when done).
        let Ok(mut slot) = tokio::time::timeout(STOP_WAIT, self.slot.lock()).await else {
            return;
        };
        if let Some((sb, _)) = slot.take() {
            sb.slot.lock().await.session = None;
            registry.discard(&sb);
        }
    }
}
