//! Stopping the local backend: every kept sandbox's interpreter saved beside its files, its
//! saves written to a team's store (waiting for a store that is away, as long as the drain
//! allows: the disk may go with the pod), deletions under way given a moment to end.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::context::Context;
use super::persist;
use super::spare::Spare;
use crate::host::lock::Locked;

/// At shutdown, how long a running call may hold a sandbox before it is left unsaved.
const SAVE_WAIT: Duration = Duration::from_secs(3);
/// At shutdown, how long (from its start) deletions under way may go on: clients send SIGTERM
/// about 3 s after they let go of the server, and SIGKILL a few seconds later.
const DELETE_WAIT: Duration = Duration::from_secs(2);
/// At shutdown, how long the last saves may take to reach the object store, at least.
const STORE_WAIT: Duration = Duration::from_secs(5);

/// What a shutdown carries from the drain's wait for the store to the last saves.
#[derive(Default)]
pub struct Stopping {
    /// Until when the drain allows the store to be waited for.
    store_deadline: Mutex<Option<Instant>>,
}

impl Stopping {
    /// With a team's store, while the server still answers `/readyz`: saves every kept
    /// sandbox now and waits, at most `bound` in all, for them to reach the store; the
    /// shutdown's last saves after it get what is left of `bound`.
    pub async fn wait_for_store(&self, ctx: &Context, bound: Duration) {
        if super::store_push::pusher().is_none() || ctx.registry.persist.is_none() {
            return;
        }
        let deadline = Instant::now() + bound;
        *self.store_deadline.locked() = Some(deadline);
        save_all(ctx).await;
        super::store_push::settle(deadline.saturating_duration_since(Instant::now())).await;
    }

    pub async fn shutdown(&self, ctx: &Context, spare: &Spare) {
        let began = Instant::now();
        let keep = ctx.registry.persist.is_some();
        tracing::info!(
            "shutting down: {} sandbox(es) to {}",
            ctx.registry.all().len(),
            if keep { "save" } else { "remove" }
        );
        let warm_stopped = ctx.programs.stop();
        spare.stop(&ctx.registry).await;
        if keep {
            save_all(ctx).await;
            // As long as the drain's wait for the store had left, if it waited.
            let left = self
                .store_deadline
                .locked()
                .map_or(STORE_WAIT, |d| d.saturating_duration_since(Instant::now()));
            super::store_push::flush(left.max(STORE_WAIT)).await;
        } else {
            ctx.registry.close_all().await;
        }
        // Deletions begun before the stop (an idle sandbox's) get a bounded time to end: the
        // folders already left the home, and what is not deleted by then stays in the trash for
        // the next start, rather than this process being killed by a client that waited.
        let bound = DELETE_WAIT.saturating_sub(began.elapsed());
        tokio::join!(ctx.registry.finish_removals(bound), warm_stopped);
        tracing::info!("shut down in {} ms", began.elapsed().as_millis());
    }
}

/// Kept for the next start: each interpreter's state is saved beside its files, all at once
/// (the client may not wait long).
async fn save_all(ctx: &Context) {
    let saves: Vec<_> = ctx
        .registry
        .all()
        .into_iter()
        .map(|sb| {
            tokio::spawn(async move {
                let Ok(mut slot) = tokio::time::timeout(SAVE_WAIT, sb.slot.lock()).await else {
                    tracing::warn!(
                        "sandbox {} is still running code; its files are kept, its variables are not",
                        sb.id
                    );
                    return;
                };
                if let Err(e) = persist::save(&sb, &mut slot, true).await {
                    tracing::warn!("could not save sandbox {}: {e}", sb.id);
                }
            })
        })
        .collect();
    for s in saves {
        let _ = s.await;
    }
}
