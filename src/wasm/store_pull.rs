//! A sandbox becoming live on this replica when a team's store keeps it: the replica takes
//! its lease first, and brings its folders back from the store when the store's generation is
//! newer than what this replica has (another replica served it since) or when this replica
//! has none at all (its replica is gone). Folders are pulled beside where they go, then moved
//! into place, so a failed pull leaves nothing half-made; a saved state that did not come
//! back whole makes the next call say its variables were lost, with its files kept.

use std::collections::BTreeMap;
use std::path::Path;

use super::folders::{Dirs, LEFT_OUT, LOST};
use super::record::{Meta, Slot};
use super::registry::Registry;
use crate::sandbox::{Limits, SandboxError};
use crate::store::held::Hold;
use crate::store::lease::Claim;
use crate::store::manifest::Manifest;
use crate::store::push::Pusher;
use crate::store::{StoreError, pull, space};

/// A store error, as the caller hears it: damaged (retrying will not help) or away.
fn away(id: &str) -> impl Fn(StoreError) -> SandboxError + '_ {
    move |e| match e {
        StoreError::Damaged { .. } => SandboxError::StoreDamaged {
            id: id.to_string(),
            message: e.to_string(),
        },
        e => SandboxError::StoreAway {
            id: id.to_string(),
            message: e.to_string(),
        },
    }
}

/// Takes `id`'s lease for this replica, or says which replica serves it.
async fn take_lease(pusher: &Pusher, key: &str, id: &str) -> Result<(), SandboxError> {
    let path = space::lease_path(pusher.store(), key, id);
    match pusher.held().take(id, path).await.map_err(away(id))? {
        Claim::Ours => Ok(()),
        Claim::Held { holder } => Err(SandboxError::OnAnotherReplica {
            id: id.to_string(),
            replica: holder,
        }),
    }
}

/// Brings `id` here from the store if `principal` keeps it there and no live replica holds
/// it; whether it is here now. `clamp` bounds the limits its record asks for, as for a
/// sandbox kept on disk.
pub async fn resume(
    registry: &Registry,
    id: &str,
    principal: &str,
    clamp: &(dyn Fn(Limits) -> Limits + Sync),
) -> Result<bool, SandboxError> {
    let Some(pusher) = super::store_push::pusher() else {
        return Ok(false);
    };
    if !space::plausible_id(id) || registry.is_open(id) {
        return Ok(false);
    }
    let key = space::key(principal);
    let path = space::manifest_path(pusher.store(), &key, id);
    let Some((m, version)) = pull::manifest(pusher.store(), &path).await.map_err(away(id))? else {
        return Ok(false);
    };
    take_lease(pusher, &key, id).await?;
    let dirs = Dirs::of(registry.layout(), id);
    if let Err(e) = bring_back(pusher, registry, &key, &m, version, &dirs).await {
        pusher.held().release(id).await;
        return Err(e);
    }
    let Some(meta) = Meta::read(&dirs) else {
        remove(&dirs);
        pusher.held().release(id).await;
        return Err(SandboxError::StoreAway {
            id: id.to_string(),
            message: "its record in the store is missing or damaged".into(),
        });
    };
    let meta = Meta {
        limits: clamp(meta.limits),
        ..meta
    };
    super::store_push::assign(id, principal);
    registry.adopt(id, dirs.clone(), meta, dirs.claim());
    Ok(true)
}

/// Before `id` (open here) is used: this replica holds its lease, and what it serves is the
/// store's latest generation. A suspended sandbox's lease is handed back once it is written
/// (see `store_push`), so another replica may resume it meanwhile; a lease that lapsed (this
/// process paused, or cut off) is taken again and the generations compared, and a live
/// interpreter older than the store's generation is dropped for the store's. A sandbox made
/// here that the store never had needs neither, so it works while the store is away.
pub async fn hold(registry: &Registry, id: &str) -> Result<(), SandboxError> {
    let Some(pusher) = super::store_push::pusher() else {
        return Ok(());
    };
    let hold = pusher.held().fresh(id);
    if hold == Hold::Fresh && !pusher.superseded(id) {
        return Ok(());
    }
    let sb = registry.get(id)?;
    if hold == Hold::NotHeld && sb.made_here && pusher.known_generation(id).is_none() {
        return Ok(());
    }
    // Known to be away: asking again would only hold the call up to the request bound.
    if hold == Hold::Lapsed && pusher.held().away() && !pusher.superseded(id) {
        return Ok(());
    }
    let key = super::store_push::space_of(id);
    let checked = check(pusher, &key, id).await;
    let (m, version) = match checked {
        Ok(Some(found)) => found,
        Ok(None) => return Ok(()),
        // Cut off from the store with a lease that lapsed: served as it is (the store's
        // conditional writes keep it from ever writing over a newer generation).
        Err(SandboxError::StoreAway { .. }) if hold == Hold::Lapsed && !pusher.superseded(id) => {
            tracing::warn!(
                "{id}: the store cannot be reached to confirm its lease; served from this replica's copy"
            );
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let stale = pusher.superseded(id)
        || match pusher.known_generation(id) {
            Some(known) => m.generation > known,
            // Since this server started, nothing of it was written or read here: the copy on
            // disk is as new as the store's if this replica wrote the store's.
            None => m.written_by != pusher.held().me(),
        };
    if !stale {
        pusher.adopted(&m, version);
        return Ok(());
    }
    let mut slot = sb.slot.lock().await;
    if slot.session.take().is_some() {
        tracing::warn!(
            "{id}: {} wrote generation {} while this replica was away; its interpreter here is dropped for that one",
            m.written_by,
            m.generation
        );
    }
    bring_back(pusher, registry, &key, &m, version, &sb.dirs).await?;
    *slot = Slot::kept(&sb.dirs);
    Ok(())
}

/// Takes `id`'s lease and reads its manifest, if the store has one.
async fn check(
    pusher: &Pusher,
    key: &str,
    id: &str,
) -> Result<Option<(Manifest, object_store::UpdateVersion)>, SandboxError> {
    take_lease(pusher, key, id).await?;
    let path = space::manifest_path(pusher.store(), key, id);
    pull::manifest(pusher.store(), &path).await.map_err(away(id))
}

/// Pulls `m`'s folders beside `dirs` and moves them into place; remembers the generation.
async fn bring_back(
    pusher: &Pusher,
    registry: &Registry,
    key: &str,
    m: &Manifest,
    version: object_store::UpdateVersion,
    dirs: &Dirs,
) -> Result<(), SandboxError> {
    let id = m.sandbox.as_str();
    let staged = Dirs::of(registry.layout(), &format!(".pull-{id}"));
    remove(&staged); // an earlier pull of it, cut off
    let cells = staged.scratch.with_extension("history");
    let _ = std::fs::remove_dir_all(&cells);
    let dest = BTreeMap::from([
        ("workspace", staged.workspace.clone()),
        ("scratch", staged.scratch.clone()),
        ("history", cells.clone()),
    ]);
    let chunk = |sha: &str| space::chunk_path(pusher.store(), key, sha);
    let pulled = match pull::files(pusher.store(), m, version, &chunk, &dest).await {
        Ok(p) => p,
        Err(e) => {
            remove(&staged);
            return Err(away(id)(e));
        }
    };
    note_damage(&staged, &pulled.damaged);
    place(&staged, dirs)?;
    place_history(&cells, &registry.layout().history_dir(), id);
    tracing::info!(
        "{id}: resumed from the store (generation {}, written by {}, {} files, {} bytes{})",
        pulled.generation,
        m.written_by,
        pulled.files,
        pulled.bytes,
        if pulled.damaged.is_empty() {
            ""
        } else {
            ", some damaged"
        }
    );
    pusher.adopted(m, pulled.version);
    Ok(())
}

/// Files that did not come back whole are named in the log and in the next call's result; a
/// saved state among them makes the sandbox start fresh, saying why.
fn note_damage(staged: &Dirs, damaged: &[String]) {
    if damaged.is_empty() {
        return;
    }
    tracing::warn!(
        "files that did not come back from the store whole: {}",
        damaged.join(", ")
    );
    let shown: Vec<String> = damaged
        .iter()
        .map(|d| match d.strip_prefix("workspace/") {
            Some(rel) => format!("{}/{rel}", crate::sandbox::paths::WORKSPACE),
            None => d.clone(),
        })
        .collect();
    let _ = std::fs::create_dir_all(staged.saved());
    let _ = std::fs::write(
        staged.saved().join(LEFT_OUT),
        format!(
            "These files did not come back whole from the team's store when this sandbox moved to another replica, and are missing: {}. Make them again if you need them.",
            shown.join(", ")
        ),
    );
    if damaged.iter().any(|d| d.starts_with("scratch/saved/")) {
        let _ = std::fs::create_dir_all(staged.saved());
        let _ = std::fs::remove_file(staged.state());
        let _ = std::fs::write(
            staged.saved().join(LOST),
            "its saved state did not come back whole from the team's store (its files are kept)",
        );
    }
}

/// Moves the staged folders where the sandbox's go (replacing any left from an earlier life
/// on this replica, which the store's newer generation supersedes), with an empty `/tmp`,
/// private to this user as a new sandbox's folders are.
fn place(staged: &Dirs, dirs: &Dirs) -> Result<(), SandboxError> {
    let io = |e| {
        SandboxError::io(format!(
            "could not place sandbox folders at {}",
            dirs.workspace.display()
        ))(e)
    };
    for (from, to) in [
        (&staged.workspace, &dirs.workspace),
        (&staged.scratch, &dirs.scratch),
    ] {
        std::fs::create_dir_all(from).map_err(io)?;
        if to.exists() {
            std::fs::remove_dir_all(to).map_err(io)?;
        }
        crate::host::retry::rename(from, to).map_err(io)?;
    }
    for d in [&dirs.workspace, &dirs.tmp, &dirs.site_packages] {
        super::registry::make_dir(d)?;
    }
    Ok(())
}

/// The sandbox's cells, if the store had them, in `dir`, where `export_notebook` reads them.
fn place_history(cells: &Path, dir: &Path, id: &str) {
    let file = crate::runtime::history_file(id);
    if cells.join(&file).is_file() {
        let _ = std::fs::create_dir_all(dir);
        if let Err(e) = crate::host::retry::rename(&cells.join(&file), &dir.join(&file)) {
            tracing::warn!("{id}: its cells came back from the store but could not be placed: {e}");
        }
    }
    let _ = std::fs::remove_dir_all(cells);
}

fn remove(dirs: &Dirs) {
    for d in [&dirs.workspace, &dirs.scratch] {
        let _ = std::fs::remove_dir_all(d as &Path);
    }
}
