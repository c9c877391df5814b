//! The backend's background chores: closing sandboxes left idle (when that is on) and
//! retrying the removal of folders that could not be removed before.

use std::sync::Arc;
use std::time::Duration;

use super::registry::Registry;

/// How often removing a folder that could not be removed is tried again.
const LEFTOVER_RETRY: Duration = Duration::from_secs(30);

/// Starts the chores; they end with the registry (the task holds only a weak handle).
pub fn start(registry: &Arc<Registry>, idle: Option<Duration>) {
    let every = idle
        .map_or(LEFTOVER_RETRY, |i| (i / 2).min(LEFTOVER_RETRY))
        .max(Duration::from_millis(200));
    let weak = Arc::downgrade(registry);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let Some(r) = weak.upgrade() else { break };
            if let Some(idle) = idle {
                r.reap_idle(idle).await;
            }
            let r2 = r.clone();
            let _ = tokio::task::spawn_blocking(move || r2.retry_leftovers()).await;
        }
    });
}
