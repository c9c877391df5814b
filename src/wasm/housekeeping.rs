//! The backend's background chores: sandboxes left idle are suspended (their state saved and
//! their memory given back) or, without persistence, closed; kept sandboxes past their disk
//! budget are evicted; changed sandboxes are saved now and then, so a crash loses little;
//! folders that could not be removed are retried.

use std::sync::Arc;
use std::time::Duration;

use super::registry::Registry;
use super::{keep, persist};
use crate::sandbox::retention::Why;

/// How long after start the disk of kept sandboxes is counted.
const MEASURE_AFTER: Duration = Duration::from_secs(2);
/// How often removing a folder that could not be removed is tried again.
const LEFTOVER_RETRY: Duration = Duration::from_secs(30);
/// How often sandboxes that ran code since their last save are saved (with persistence):
/// what a kill -9 can lose at most.
pub const BACKGROUND_SAVE: Duration = Duration::from_secs(60);

/// Starts the chores; they end with the registry (the task holds only a weak handle).
/// `keep_bytes`: the disk budget of kept sandboxes.
pub fn start(registry: &Arc<Registry>, idle: Option<Duration>, keep_bytes: u64) {
    let every = idle
        .map_or(LEFTOVER_RETRY, |i| (i / 2).min(LEFTOVER_RETRY))
        .max(Duration::from_millis(200));
    let weak = Arc::downgrade(registry);
    tokio::spawn(async move {
        // Sandboxes kept from before a restart are counted first, once the first calls (which
        // a person is waiting for) have had the machine to themselves.
        tokio::time::sleep(MEASURE_AFTER).await;
        if let Some(r) = weak.upgrade() {
            let _ = tokio::task::spawn_blocking(move || r.measure_kept()).await;
        }
        let mut tick = tokio::time::interval(every);
        let mut last_save = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            let Some(r) = weak.upgrade() else { break };
            match (idle, r.persist) {
                (Some(idle), Some(_)) => suspend_idle(&r, idle).await,
                (Some(idle), None) => r.reap_idle(idle, Why::Idle).await,
                (None, _) => {}
            }
            if let Some(retain) = r.persist {
                // Kept sandboxes unused for the whole retention period go, as at start-up.
                if super::store_push::pusher().is_some() {
                    keep::let_go_idle(&r, retain).await;
                } else {
                    r.reap_idle(retain, Why::Retention).await;
                }
                if last_save.elapsed() >= BACKGROUND_SAVE {
                    last_save = tokio::time::Instant::now();
                    save_changed(&r).await;
                }
            }
            keep::evict_over_budget(&r, keep_bytes).await;
            let r2 = r.clone();
            let _ = tokio::task::spawn_blocking(move || r2.retry_leftovers()).await;
        }
    });
}

async fn suspend_idle(r: &Registry, idle: Duration) {
    let why = format!("unused for over {} s, CODE_SANDBOX_IDLE_SECONDS", idle.as_secs());
    for sb in r.idle(idle) {
        super::live::suspend(&sb, &why).await;
    }
}

async fn save_changed(r: &Registry) {
    for sb in r.all() {
        let Ok(mut slot) = sb.slot.try_lock() else {
            continue;
        };
        if let Err(e) = persist::save(&sb, &mut slot, false).await {
            tracing::warn!("could not save sandbox {}: {e}", sb.id);
        }
    }
}
