//! Resuming here a kept sandbox another replica wrote to the store: once this replica holds
//! its lease, its folders are brought back (beside where they go, then moved into place, so a
//! failed pull leaves nothing half-made), and it is listed as a sandbox kept from before a
//! restart: its state comes back at its first call. A saved state that did not come back
//! whole makes the next call say its variables were lost; its files are there.

use std::collections::BTreeMap;
use std::path::Path;

use super::folders::{Dirs, LOST};
use super::record::Meta;
use super::registry::Registry;
use crate::sandbox::{Limits, SandboxError};
use crate::store::lease::Claim;
use crate::store::{StoreError, pull, space};

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
    let store = pusher.store();
    let key = space::key(principal);
    let away = |e: StoreError| SandboxError::StoreAway {
        id: id.to_string(),
        message: e.to_string(),
    };
    let Some((m, version)) = pull::manifest(store, &space::manifest_path(store, &key, id))
        .await
        .map_err(away)?
    else {
        return Ok(false);
    };
    match pusher
        .held()
        .take(id, space::lease_path(store, &key, id))
        .await
        .map_err(away)?
    {
        Claim::Ours => {}
        Claim::Held { holder } => {
            return Err(SandboxError::OnAnotherReplica {
                id: id.to_string(),
                replica: holder,
            });
        }
    }
    let dirs = Dirs::of(registry.layout(), id);
    let staged = Dirs::of(registry.layout(), &format!(".pull-{id}"));
    let dest = BTreeMap::from([
        ("workspace", staged.workspace.clone()),
        ("scratch", staged.scratch.clone()),
    ]);
    remove(&staged); // an earlier pull of it, cut off
    let chunk = |sha: &str| space::chunk_path(store, &key, sha);
    let pulled = match pull::files(store, &m, version, &chunk, &dest).await {
        Ok(p) => p,
        Err(e) => {
            remove(&staged);
            pusher.held().release(id).await;
            return Err(away(e));
        }
    };
    note_damage(&staged, &pulled.damaged);
    place(&staged, &dirs).map_err(SandboxError::io(format!(
        "could not place sandbox {id}'s folders"
    )))?;
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
    pusher.adopted(id, pulled.generation, pulled.version);
    super::store_push::assign(id, principal);
    registry.adopt(id, dirs.clone(), meta, dirs.claim());
    Ok(true)
}

/// Files that did not come back whole are named in the log; a saved state among them makes
/// the sandbox start fresh, saying why.
fn note_damage(staged: &Dirs, damaged: &[String]) {
    if damaged.is_empty() {
        return;
    }
    tracing::warn!(
        "files that did not come back from the store whole: {}",
        damaged.join(", ")
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
/// on this replica, which the store's newer generation supersedes), with an empty `/tmp`.
fn place(staged: &Dirs, dirs: &Dirs) -> std::io::Result<()> {
    for (from, to) in [
        (&staged.workspace, &dirs.workspace),
        (&staged.scratch, &dirs.scratch),
    ] {
        std::fs::create_dir_all(from)?;
        if to.exists() {
            std::fs::remove_dir_all(to)?;
        }
        crate::host_retry::rename(from, to)?;
    }
    for d in [&dirs.tmp, &dirs.site_packages] {
        std::fs::create_dir_all(d)?;
    }
    Ok(())
}

fn remove(dirs: &Dirs) {
    for d in [&dirs.workspace, &dirs.scratch] {
        let _ = std::fs::remove_dir_all(d as &Path);
    }
}
