//! Which sandboxes hold an interpreter in memory.
//!
//! Suspension is lossless (the state is saved beside the files and comes back on the next
//! use, in about 20 ms), so neither the cap on live interpreters
//! (`CODE_SANDBOX_MAX_SANDBOXES`) nor the server-wide memory budget is ever a reason to refuse
//! work while some live sandbox sits idle: the least recently used idle one is suspended to
//! make room. Only when every live interpreter is running a call is there a refusal.
//!
//! A sandbox whose interpreter lock is held counts as live: it is running a call, being
//! started or resumed, or being suspended. A caller that starts an interpreter holds its own
//! sandbox's lock first, so two callers making room at once each count the other, and the
//! cap holds without a lock of its own.

use std::sync::Arc;

use super::persist;
use super::record::Sandbox;
use super::registry::Registry;
use crate::sandbox::SandboxError;

/// Live interpreters other than `me`'s, and the idle ones among them, least recently used
/// first. (An idle-looking one whose lock is held just now is skipped by [`suspend`].)
fn census(registry: &Registry, me: Option<&str>) -> (usize, Vec<Arc<Sandbox>>) {
    let mut live = 0;
    let mut idle = Vec::new();
    for sb in registry.all() {
        if Some(sb.id.as_str()) == me || !sb.is_live() {
            continue;
        }
        live += 1;
        if !sb.is_busy() {
            idle.push(sb);
        }
    }
    idle.sort_by_cached_key(|sb| std::cmp::Reverse(sb.idle_for()));
    (live, idle)
}

/// Suspends the first of `idle` that can be; whether one was.
async fn suspend_first(idle: Vec<Arc<Sandbox>>, why: &str) -> bool {
    for sb in idle {
        if suspend(&sb, why).await {
            return true;
        }
    }
    false
}

/// Suspends `sb` if it is still live and idle; whether its interpreter is gone now. One
/// holding files open cannot be saved, so it stays.
pub async fn suspend(sb: &Arc<Sandbox>, why: &str) -> bool {
    let Ok(mut slot) = sb.slot.try_lock() else {
        return false;
    };
    if slot.session.is_none() {
        return true;
    }
    if let Err(e) = persist::save(sb, &mut slot, true).await {
        tracing::warn!("could not suspend sandbox {} ({why}): {e}", sb.id);
        return false;
    }
    let gone = slot.session.is_none();
    drop(slot);
    if gone {
        tracing::info!("suspended sandbox {} ({why}); its next use restores it", sb.id);
        suspended(&sb.id, why);
        // Its push may have been written while the slot was still held here, when it could
        // not tell the sandbox was suspended and so kept the lease.
        super::store_push::let_go_if_written(sb);
    }
    gone
}

/// Tells the sandbox's owner it was suspended, and why.
fn suspended(id: &str, why: &str) {
    use crate::sandbox::events::{Severity, sandbox_log};
    sandbox_log(
        id,
        Severity::Info,
        format!(
            "sandbox {id} was suspended ({why}); its variables and files are kept, and its next use restores it"
        ),
    );
}

/// The cap on live interpreters, over one registry.
pub struct Room {
    registry: Arc<Registry>,
    max: usize,
}

impl Room {
    pub fn new(registry: Arc<Registry>, max: usize) -> Room {
        Room {
            registry,
            max: max.max(1),
        }
    }

    /// Suspends least recently used idle sandboxes until fewer than the cap of interpreters
    /// other than `me`'s are live. The caller holds `me`'s interpreter lock, so others count it.
    pub async fn make(&self, me: &str) -> Result<(), SandboxError> {
        loop {
            let (live, idle) = census(&self.registry, Some(me));
            if live < self.max {
                return Ok(());
            }
            if !suspend_first(idle, "to make room for another, CODE_SANDBOX_MAX_SANDBOXES").await {
                return Err(SandboxError::AllBusy { live: self.max });
            }
        }
    }
}

/// Suspends the least recently used idle sandbox, to give its memory back to the server-wide
/// budget; whether one was.
pub async fn suspend_one(registry: &Registry) -> bool {
    let (_, idle) = census(registry, None);
    suspend_first(idle, "its memory was needed, CODE_SANDBOX_TOTAL_MEMORY_MB").await
}

/// The reclaimer of the server-wide memory budget: suspends one idle sandbox, on a task of its
/// own (the growing Store waits inside wasmtime; the suspension runs another Store).
pub fn reclaimer(registry: &Arc<Registry>) -> super::vm::Reclaim {
    // Weak: the budget lives inside every Store, which the registry's sandboxes hold.
    let weak = Arc::downgrade(registry);
    Arc::new(move || {
        let weak = weak.clone();
        Box::pin(async move {
            let Some(registry) = weak.upgrade() else {
                return false;
            };
            tokio::spawn(async move { suspend_one(&registry).await })
                .await
                .unwrap_or(false)
        })
    })
}
