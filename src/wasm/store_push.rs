//! Kept sandboxes handed to the object store (`CODE_SANDBOX_STORE`) after each save: the
//! sandbox's workspace and its private folder (saved state, installed packages, checkpoints,
//! metadata), not its `/tmp` or the local lock. One pusher for the process, set when the
//! backend starts, like the tracing subscriber: saves happen deep in the backend.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::record::Sandbox;
use crate::store::push::{Pusher, Tree};

static PUSHER: OnceLock<Arc<Pusher>> = OnceLock::new();

/// Opens the store `url` names and starts pushing to it as `replica` (else as this host);
/// the error says what to fix. A second call (a second backend in one process) keeps the first.
pub fn install(url: &str, replica: Option<String>) -> Result<(), crate::store::StoreError> {
    let store = crate::store::location::open(url)?;
    let writer = replica
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_else(|| "unnamed-host".into());
    tracing::info!("kept sandboxes are written to {} after each save", store.shown);
    let _ = PUSHER.set(Pusher::start(store, writer));
    Ok(())
}

/// Queues `sb`'s folders for the store, when there is one.
pub fn after_save(sb: &Sandbox) {
    let Some(pusher) = PUSHER.get() else {
        return;
    };
    let trees = vec![
        Tree {
            name: "workspace",
            root: sb.dirs.workspace.clone(),
            skip: &[],
        },
        Tree {
            name: "scratch",
            root: sb.dirs.scratch.clone(),
            skip: &["tmp", "owner.lock", "owner.pid"],
        },
    ];
    pusher.schedule(&sb.id, trees);
}

/// Waits, at most `bound`, for queued pushes (at shutdown); says what is left when it gives up.
pub async fn flush(bound: Duration) {
    if let Some(pusher) = PUSHER.get()
        && !pusher.flush(bound).await
    {
        tracing::warn!(
            "some kept sandboxes were not written to {} before the stop; their files stay on this disk",
            pusher.store().shown
        );
    }
}
