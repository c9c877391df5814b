//! Kept sandboxes handed to the object store (`CODE_SANDBOX_STORE`): after each save (one
//! follows each call: `save_soon`), the sandbox's workspace and its private folder (saved state,
//! installed packages, checkpoints, metadata; not its `/tmp` or the local lock) are pushed
//! under its principal's prefix. One pusher for the process, set when the backend starts,
//! like the tracing subscriber: saves happen deep in the backend.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::Duration;

use super::record::Sandbox;
use crate::host::lock::Locked;
use crate::store::chunks::Tree;
use crate::store::push::Pusher;
use crate::store::space;

static PUSHER: OnceLock<Arc<Pusher>> = OnceLock::new();
/// Where each sandbox's cells are kept for `export_notebook` (`<id>.jsonl`): pushed with it.
static HISTORY: OnceLock<std::path::PathBuf> = OnceLock::new();
/// Each sandbox's principal prefix, as the tenancy layer named its owner.
static SPACES: LazyLock<Mutex<HashMap<String, String>>> = LazyLock::new(Mutex::default);
/// The principal a sandbox nobody named an owner for belongs to: a stdio server's user.
const UNOWNED: &str = "local";

/// Opens the store `url` names and starts pushing to it as the team's replica (else as this
/// host), and sweeping it (sandboxes unwritten for `retain` go); the error says what to fix. A
/// second call (a second backend in one process) keeps the first.
pub fn install(
    url: &str,
    team: &crate::config::TeamSettings,
    retain: Option<Duration>,
    history: std::path::PathBuf,
) -> Result<(), crate::store::StoreError> {
    let _ = HISTORY.set(history);
    let store = crate::store::location::open(url)?;
    let timing = crate::store::Timing {
        lease: team.store_lease(),
        grace: team.store_grace(),
        retain,
    };
    let writer = team
        .replica
        .clone()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_else(|| "unnamed-host".into());
    tracing::info!(
        "kept sandboxes are written to {} after each call and save",
        store.shown
    );
    if PUSHER.get().is_none() {
        let pusher = Pusher::start(store.clone(), writer, &timing);
        crate::store::sweep::start(pusher.held().clone(), store, timing);
        let _ = PUSHER.set(pusher);
    }
    Ok(())
}

pub fn pusher() -> Option<&'static Arc<Pusher>> {
    PUSHER.get()
}

/// Names `principal` as the owner of `id`, so its pushes go under that principal's prefix.
pub fn assign(id: &str, principal: &str) {
    if PUSHER.get().is_some() {
        SPACES.locked().insert(id.to_string(), space::key(principal));
    }
}

/// The prefix `id`'s pushes go under.
pub fn space_of(id: &str) -> String {
    SPACES
        .locked()
        .get(id)
        .cloned()
        .unwrap_or_else(|| space::key(UNOWNED))
}

/// Queues `sb`'s folders for the store, when there is one. A suspended sandbox's lease is
/// handed back once they are written (if it is still suspended then), so that any replica
/// may resume it: a replica holds a sandbox only while it is live there.
pub fn after_save(sb: &Arc<Sandbox>, suspended: bool) {
    let Some(pusher) = PUSHER.get() else {
        return;
    };
    let mut trees = vec![
        Tree {
            name: "workspace",
            root: sb.dirs.workspace.clone(),
            skip: &[],
            only: None,
        },
        Tree {
            name: "scratch",
            root: sb.dirs.scratch.clone(),
            skip: &["tmp", "owner.lock", "owner.pid"],
            only: None,
        },
    ];
    if let Some(dir) = HISTORY.get() {
        trees.push(Tree {
            name: "history",
            root: dir.clone(),
            skip: &[],
            only: Some(crate::runtime::history_file(&sb.id)),
        });
    }
    let weak = Arc::downgrade(sb);
    let release_if: Option<crate::store::push::ReleaseIf> =
        suspended.then(|| Box::new(move || weak.upgrade().is_none_or(|sb| !sb.is_live())) as _);
    pusher.schedule(&sb.id, &space_of(&sb.id), trees, release_if);
}

/// Hands `sb`'s lease back if it is suspended and the store holds its last save; called once
/// a suspend has let go of the sandbox. The push that wrote the save hands it back itself
/// when it ends later; one that ended while the suspend still held the sandbox could not
/// tell, and another replica would wait on the lease for as long as this one runs.
pub fn let_go_if_written(sb: &Arc<Sandbox>) {
    let Some(pusher) = PUSHER.get() else {
        return;
    };
    if pusher.pending(&sb.id) || sb.is_live() || !pusher.held().holds(&sb.id) {
        return;
    }
    let (pusher, sb) = (pusher.clone(), sb.clone());
    tokio::spawn(async move {
        // Checked again as late as can be: a call may have brought it back meanwhile.
        if !sb.is_live() && !pusher.pending(&sb.id) {
            pusher.held().release(&sb.id).await;
        }
    });
}

/// With a store, the disk bound and the retention period let go of a kept sandbox's copy on
/// this disk, not of the sandbox: the store keeps it, and naming it brings it back. Whether
/// `sb`'s copy may go now: once the store holds its last save here (or a newer one another
/// replica wrote). A copy the store lacks is written first, and kept meanwhile. `None`: there
/// is no store, so the sandbox itself goes.
pub async fn copy_may_go(sb: &Arc<Sandbox>) -> Option<bool> {
    let pusher = PUSHER.get()?;
    if pusher.settled(&sb.id) {
        return Some(true);
    }
    if pusher.pending(&sb.id) {
        return Some(false);
    }
    // Neither written nor read since this server started.
    let path = space::manifest_path(pusher.store(), &space_of(&sb.id), &sb.id);
    match crate::store::pull::manifest(pusher.store(), &path).await {
        Ok(Some((m, _))) if m.written_by != pusher.held().me() => Some(true),
        Ok(_) => {
            after_save(sb, true);
            Some(false)
        }
        Err(e) => {
            tracing::warn!("{}: kept on this disk: {e}", sb.id);
            Some(false)
        }
    }
}

/// `id` was closed: its manifest and lease leave the store.
pub fn closed(id: &str) {
    let Some(pusher) = PUSHER.get() else {
        return;
    };
    let space = SPACES.locked().remove(id).unwrap_or_else(|| space::key(UNOWNED));
    let (pusher, id) = (pusher.clone(), id.to_string());
    tokio::spawn(async move { pusher.delete(&id, &space).await });
}

/// Kept sandboxes whose last save the store does not hold yet.
pub fn waiting() -> usize {
    PUSHER.get().map_or(0, |p| p.waiting().len())
}

/// Waits, at most `bound`, for queued pushes (at shutdown); whether all were written. Says
/// in the log that it waits, and by id what is left when it gives up.
pub async fn settle(bound: Duration) -> bool {
    let Some(pusher) = PUSHER.get() else {
        return true;
    };
    let waiting = pusher.waiting();
    if waiting.is_empty() {
        return true;
    }
    tracing::info!(
        "waiting up to {} s for {} kept sandbox(es) to reach {}",
        bound.as_secs(),
        waiting.len(),
        pusher.store().shown
    );
    if pusher.flush(bound).await {
        tracing::info!("every kept sandbox reached {}", pusher.store().shown);
        return true;
    }
    tracing::warn!(
        "not written to {} before the stop (their files stay on this disk; a replica resuming them from the store gets their last written generation): {}",
        pusher.store().shown,
        pusher.waiting().join(", ")
    );
    false
}

/// Waits, at most `bound`, for queued pushes (at shutdown); then hands this replica's leases
/// back, so other replicas may resume its sandboxes at once. Those left unwritten keep their
/// leases, which run out by themselves.
pub async fn flush(bound: Duration) {
    let Some(pusher) = PUSHER.get() else {
        return;
    };
    if settle(bound).await {
        pusher.held().release_all().await;
    }
}
