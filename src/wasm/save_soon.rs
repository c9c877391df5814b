//! With a team's store, a sandbox saved (and so written to the store) shortly after each call,
//! so a replica killed right after a call loses none of it: calls in quick succession are saved
//! once, after the last.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use super::record::Sandbox;
use crate::lock::Locked;

/// Sandboxes with a save after a call already on its way.
static SOON: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);

/// How long after a call its save starts.
const SETTLE: Duration = Duration::from_millis(200);

/// After a call that may have changed `sb`: saves it once the call has let go of it.
pub fn after_call(sb: &Arc<Sandbox>) {
    if super::store_push::pusher().is_none() || !SOON.locked().insert(sb.id.clone()) {
        return;
    }
    let sb = sb.clone();
    tokio::spawn(async move {
        tokio::time::sleep(SETTLE).await;
        SOON.locked().remove(&sb.id);
        if sb.closing.is_cancelled() || sb.stopping.is_cancelled() {
            return;
        }
        let mut slot = sb.slot.lock().await;
        if let Err(e) = super::persist::save(&sb, &mut slot, false).await {
            tracing::warn!("could not save sandbox {} for the store: {e}", sb.id);
        }
    });
}
