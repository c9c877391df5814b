//! Collecting what no one needs from the store: sandboxes no replica wrote for the retention
//! period (their manifests, taken under their lease so no replica is serving one), then chunks
//! no manifest names, once older than the grace period. One replica sweeps at a time (a lease
//! of its own); a sweep interrupted is simply done again.
//!
//! Why a chunk younger than the grace period is never deleted: a push writes (or finds) its
//! chunks before the manifest naming them, so for a moment they are named by nothing. A push
//! trusts a chunk it did not just write only while it is younger than half the grace period
//! (else it writes it again), and writes the manifest only while every chunk it wrote or
//! trusted is still within half the grace period (else it writes them again first: a slow
//! push), so such a chunk is always younger than the grace period here.
//! Chunks are listed before manifests are read: a manifest written after the listing names
//! only chunks the listing missed or younger ones.

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::TryStreamExt;
use object_store::ObjectStoreExt;
use object_store::path::Path;

use super::held::Held;
use super::lease::Claim;
use super::location::{Store, StoreError};
use super::space::{lease_path, manifest_path};

/// The lease's name among the sandboxes' ids: one sweeper at a time.
const SWEEPER: &str = "(sweep)";

/// What one sweep did.
#[derive(Debug, Default, PartialEq)]
pub struct Swept {
    pub manifests: usize,
    /// Sandboxes deleted for being unused for the retention period.
    pub retired: Vec<String>,
    pub chunks_deleted: usize,
    /// Chunks no manifest names but younger than the grace period.
    pub chunks_young: usize,
}

/// How often a replica offers to sweep: a quarter of the grace period, at most hourly.
pub fn every(grace: Duration) -> Duration {
    (grace / 4).clamp(Duration::from_secs(1), Duration::from_secs(3600))
}

/// Sweeps now and then for as long as `held` lives (the pusher's).
pub fn start(held: std::sync::Arc<Held>, store: Store, timing: super::Timing) {
    let weak = std::sync::Arc::downgrade(&held);
    drop(held);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every(timing.grace));
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(held) = weak.upgrade() else { break };
            match once(&store, &held, timing.grace, timing.retain).await {
                Ok(Some(s)) if s.chunks_deleted > 0 || !s.retired.is_empty() => tracing::info!(
                    "swept {}: {} unused sandboxes deleted, {} chunks no manifest names deleted ({} kept until older than the grace period)",
                    store.shown,
                    s.retired.len(),
                    s.chunks_deleted,
                    s.chunks_young
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!("sweeping {} stopped: {e}; it is tried again later", store.shown),
            }
        }
    });
}

/// One sweep of every principal's prefix, if no other replica is sweeping (`None` then).
pub async fn once(
    store: &Store,
    held: &Held,
    grace: Duration,
    retain: Option<Duration>,
) -> Result<Option<Swept>, StoreError> {
    let lease = store.path(&["sweep", "lease.json"]);
    if let Claim::Held { .. } = held.take(SWEEPER, lease).await? {
        return Ok(None);
    }
    let mut swept = Swept::default();
    let result = async {
        let principals = store.path(&["principals"]);
        let listed = store
            .objects
            .list_with_delimiter(Some(&principals))
            .await
            .map_err(|e| store.failed("the list of principals", e))?;
        for space in listed.common_prefixes {
            if let Some(key) = space.filename() {
                sweep_space(store, held, key, grace, retain, &mut swept).await?;
            }
        }
        Ok(())
    }
    .await;
    held.release(SWEEPER).await;
    result.map(|()| Some(swept))
}

/// One principal's prefix: its manifests read (retiring those past retention), then its
/// chunks no manifest names and older than `grace` deleted.
async fn sweep_space(
    store: &Store,
    held: &Held,
    key: &str,
    grace: Duration,
    retain: Option<Duration>,
    swept: &mut Swept,
) -> Result<(), StoreError> {
    let chunks = list(store, &store.path(&["principals", key, "chunks"])).await?;
    let mut named = HashSet::new();
    for object in list(store, &store.path(&["principals", key, "sandboxes"])).await? {
        if object.location.filename() != Some("manifest.json") {
            continue;
        }
        // A manifest under a name this server would not make still names chunks: they are
        // kept, and it is never retired.
        let id = sandbox_of(&object.location);
        let shown = id.clone().unwrap_or_else(|| object.location.to_string());
        let m = match read_manifest(store, &object.location).await? {
            Found::Manifest(m) => m,
            Found::Gone => continue,
            Found::Damaged => {
                // What it names is unknown, so nothing of this principal is deleted.
                tracing::warn!(
                    "{shown}: its manifest in {} cannot be read; its principal's chunks are kept",
                    store.shown
                );
                return Ok(());
            }
        };
        swept.manifests += 1;
        if let Some(id) = id
            && past(m.written_at, retain)
            && retire(store, held, key, &id).await?
        {
            swept.retired.push(id);
            continue;
        }
        named.extend(m.chunks().into_iter().map(String::from));
    }
    let old = Utc::now() - chrono::Duration::from_std(grace).unwrap_or_default();
    for chunk in chunks {
        let Some(sha) = chunk.location.filename() else {
            continue;
        };
        if named.contains(sha) {
            continue;
        }
        if chunk.last_modified > old {
            swept.chunks_young += 1;
            continue;
        }
        match store.objects.delete(&chunk.location).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => swept.chunks_deleted += 1,
            Err(e) => return Err(store.failed("a chunk to delete", e)),
        }
    }
    Ok(())
}

/// Every object under `prefix`.
async fn list(store: &Store, prefix: &Path) -> Result<Vec<object_store::ObjectMeta>, StoreError> {
    store
        .objects
        .list(Some(prefix))
        .try_collect()
        .await
        .map_err(|e| store.failed("a listing", e))
}

/// The sandbox id in `.../sandboxes/<id>/manifest.json`.
fn sandbox_of(path: &Path) -> Option<String> {
    let parts: Vec<_> = path.parts().collect();
    let id = parts.get(parts.len().checked_sub(2)?)?.as_ref().to_string();
    super::space::plausible_id(&id).then_some(id)
}

/// What a listed manifest turned out to be.
enum Found {
    Manifest(super::manifest::Manifest),
    /// Deleted since it was listed (closed): it names nothing.
    Gone,
    Damaged,
}

async fn read_manifest(store: &Store, path: &Path) -> Result<Found, StoreError> {
    match super::pull::manifest(store, path).await {
        Ok(Some((m, _))) => Ok(Found::Manifest(m)),
        Ok(None) => Ok(Found::Gone),
        Err(StoreError::Damaged { .. }) => Ok(Found::Damaged),
        Err(e) => Err(e),
    }
}

/// Whether a sandbox last written at `at` is past the retention period.
fn past(at: DateTime<Utc>, retain: Option<Duration>) -> bool {
    retain.is_some_and(|r| Utc::now() - chrono::Duration::from_std(r).unwrap_or(chrono::Duration::MAX) > at)
}

/// Deletes sandbox `id`'s manifest, holding its lease so that no replica serves it meanwhile;
/// whether it was deleted (not when a replica holds it: it is in use after all).
async fn retire(store: &Store, held: &Held, key: &str, id: &str) -> Result<bool, StoreError> {
    if held.holds(id) {
        return Ok(false);
    }
    if let Claim::Held { .. } = held.take(id, lease_path(store, key, id)).await? {
        return Ok(false);
    }
    let deleted = match store.objects.delete(&manifest_path(store, key, id)).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(true),
        Err(e) => Err(store.failed("a manifest to delete", e)),
    };
    held.release(id).await;
    if deleted.is_ok() {
        tracing::info!(
            "{id}: deleted from {}: no replica wrote it for the retention period",
            store.shown
        );
    }
    deleted
}

#[cfg(test)]
mod tests;
