//! With a team's store, a sandbox saved (and so written to the store) shortly after each call,
//! so a replica killed right after a call loses none of it: calls in quick succession are saved
//! once, after the last (but a second after the first at the latest), so a burst of calls does
//! not stop for saves.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::record::Sandbox;
use crate::host::lock::Locked;

/// Sandboxes with a save after a call on its way: when their last call ended.
static SOON: LazyLock<Mutex<HashMap<String, Instant>>> = LazyLock::new(Mutex::default);

/// How long after the last call of a burst its save starts.
const SETTLE: Duration = Duration::from_millis(200);
/// How long after the first call the save starts however many calls follow.
const AT_MOST: Duration = Duration::from_secs(1);

/// After a call that may have changed `sb`: saves it once its calls have paused.
pub fn after_call(sb: &Arc<Sandbox>) {
    if super::store_push::pusher().is_none() {
        return;
    }
    let first = Instant::now();
    if SOON.locked().insert(sb.id.clone(), first).is_some() {
        return;
    }
    let sb = sb.clone();
    tokio::spawn(async move {
        loop {
            let last = SOON.locked().get(&sb.id).copied().unwrap_or(first);
            let due = (last + SETTLE).min(first + AT_MOST);
            if Instant::now() >= due {
                break;
            }
            tokio::time::sleep_until(due).await;
        }
        SOON.locked().remove(&sb.id);
        if sb.closing.is_cancelled() || sb.stopping.is_cancelled() {
            return;
        }
        if let Err(e) = super::persist::save_running(&sb).await {
            tracing::warn!("could not save sandbox {} for the store: {e}", sb.id);
        }
    });
}
