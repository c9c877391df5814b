//! Writing a kept sandbox's folders to the store as a new generation: the chunks it lacks
//! first, then the manifest, replacing the one this server last read or wrote only if the
//! store still holds that version (so a server that lost track never writes over a newer one).
//! Pushes are queued per sandbox and coalesced: a sandbox saved again while its push waits is
//! pushed once, as it is then.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use object_store::{ObjectStoreExt, PutOptions, PutPayload, UpdateVersion};

use super::chunks::{Chunks, Tree};
use super::held::{Held, Hold};
use super::lease::Claim;
use super::location::{Store, StoreError};
use super::manifest::{CHUNK_BYTES, Manifest};
use super::space::{lease_path, manifest_path};
use crate::lock::Locked;

/// What a push wrote.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pushed {
    pub generation: u64,
    pub files: usize,
    pub chunks_written: usize,
    pub bytes_written: u64,
}

/// Asked once a push is written: whether the sandbox's lease may be handed back now (it was
/// suspended, and is still).
pub type ReleaseIf = Box<dyn Fn() -> bool + Send + Sync>;

/// The manifest of a sandbox this replica last wrote or read: the next push replaces exactly
/// that version, and may name its chunks without asking the store (a manifest names them, so
/// no sweep deletes them while it is current).
#[derive(Clone, Default)]
struct Base {
    generation: u64,
    version: Option<UpdateVersion>,
    chunks: Arc<HashSet<String>>,
}

impl Base {
    fn of(m: &Manifest, version: UpdateVersion) -> Base {
        Base {
            generation: m.generation,
            version: Some(version),
            chunks: Arc::new(m.chunks().into_iter().map(String::from).collect()),
        }
    }
}

/// A sandbox's folders waiting to be pushed, under its principal's prefix.
struct Queued {
    space: String,
    trees: Vec<Tree>,
    release_if: Option<ReleaseIf>,
}

pub struct Pusher {
    store: Store,
    /// The leases of the sandboxes this replica writes; their holder names the writer.
    held: Arc<Held>,
    chunks: Chunks,
    /// The manifest this server last wrote or read, by sandbox.
    versions: Mutex<HashMap<String, Base>>,
    queue: Mutex<BTreeMap<String, Queued>>,
    /// Sandboxes whose last save the store does not have yet (queued, under way, or waiting
    /// to be retried).
    unsettled: Mutex<HashSet<String>>,
    /// Sandboxes another replica wrote a newer generation of than this replica's copy: none of
    /// theirs is pushed until the copy is replaced by the store's ([`Pusher::adopted`]).
    superseded: Mutex<HashSet<String>>,
    backoff: super::retry::Backoff,
    wake: tokio::sync::Notify,
    /// Pushes queued or under way; `flush` waits for zero.
    busy: tokio::sync::watch::Sender<usize>,
}

impl Pusher {
    /// A pusher writing as `writer` (the replica's name, or the host's), holding leases of
    /// `timing.lease` on what it writes, with its worker.
    pub fn start(store: Store, writer: String, timing: &super::Timing) -> Arc<Self> {
        let me = Arc::new(Pusher {
            held: Held::start(store.clone(), writer, timing.lease),
            chunks: Chunks::new(store.clone(), timing.grace),
            store,
            versions: Mutex::default(),
            queue: Mutex::default(),
            unsettled: Mutex::default(),
            superseded: Mutex::default(),
            backoff: Default::default(),
            wake: tokio::sync::Notify::new(),
            busy: tokio::sync::watch::channel(0).0,
        });
        tokio::spawn(me.clone().work());
        me
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn held(&self) -> &Arc<Held> {
        &self.held
    }

    /// Remembers the generation a replica brought back from the store (and so holds), so its
    /// next push replaces exactly that one.
    pub fn adopted(&self, m: &Manifest, version: UpdateVersion) {
        self.superseded.locked().remove(&m.sandbox);
        self.versions
            .locked()
            .insert(m.sandbox.clone(), Base::of(m, version));
    }

    /// Whether another replica wrote a newer generation of `id` than this replica's copy.
    pub fn superseded(&self, id: &str) -> bool {
        self.superseded.locked().contains(id)
    }

    /// The generation of `id` this replica last wrote or read.
    pub fn known_generation(&self, id: &str) -> Option<u64> {
        self.versions.locked().get(id).map(|b| b.generation)
    }

    /// Whether a save of `id` waits to be written (or is being written).
    pub fn pending(&self, id: &str) -> bool {
        self.unsettled.locked().contains(id)
    }

    /// The sandboxes whose last save waits to be written, by id.
    pub fn waiting(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.unsettled.locked().iter().cloned().collect();
        ids.sort();
        ids
    }

    /// Whether the store holds `id` as this replica last saved it (nothing of it waits to
    /// be written), so its copy on this disk may go.
    pub fn settled(&self, id: &str) -> bool {
        !self.unsettled.locked().contains(id) && self.versions.locked().contains_key(id)
    }

    /// Queues sandbox `id`'s folders, for the prefix `space`; returns at once. Once written,
    /// its lease is handed back if `release_if` says so.
    pub fn schedule(&self, id: &str, space: &str, trees: Vec<Tree>, release_if: Option<ReleaseIf>) {
        if self.superseded(id) {
            tracing::warn!("{id}: not written to the store: another replica wrote a newer generation");
            return;
        }
        let queued = Queued {
            space: space.to_string(),
            trees,
            release_if,
        };
        self.unsettled.locked().insert(id.to_string());
        let new = self.queue.locked().insert(id.to_string(), queued).is_none();
        if new {
            self.count(1);
        }
        self.wake.notify_one();
    }

    /// Pushes queued, under way or waiting to be retried: `change` more, said to `/metrics`.
    fn count(&self, change: isize) {
        self.busy.send_modify(|n| *n = n.saturating_add_signed(change));
        crate::metrics::store_pending(*self.busy.borrow());
    }

    /// Queues `id`'s failed push again after its backoff, unless a newer one was queued
    /// meanwhile (which replaces it). It stays counted as pending until then.
    fn retry_later(self: &Arc<Self>, id: String, q: Queued, e: &StoreError) {
        let (wait, n) = self.backoff.failed(&id);
        tracing::warn!(
            "{id}: not written to {} ({e}); trying again in {} s (failure {n} in a row); its files stay on this disk",
            self.store.shown,
            wait.as_secs()
        );
        let me = self.clone();
        tokio::spawn(async move {
            // The backoff, cut short once the store answers again.
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = me.held.back() => {}
            }
            let requeued = match me.queue.locked().entry(id) {
                std::collections::btree_map::Entry::Occupied(_) => false,
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(q);
                    true
                }
            };
            if requeued {
                me.wake.notify_one();
            } else {
                me.count(-1);
            }
        });
    }

    /// Waits until every queued push is done, at most `bound`; whether all were. Pushes waiting
    /// out a backoff are tried every second meanwhile: at a shutdown, the store coming back a
    /// moment before the end must not be missed.
    pub async fn flush(&self, bound: std::time::Duration) -> bool {
        let mut rx = self.busy.subscribe();
        let done = async {
            loop {
                tokio::select! {
                    r = rx.wait_for(|n| *n == 0) => return r.is_ok(),
                    () = tokio::time::sleep(std::time::Duration::from_secs(1)) => self.held.retry_now(),
                }
            }
        };
        tokio::time::timeout(bound, done).await.unwrap_or(false)
    }

    async fn work(self: Arc<Self>) {
        loop {
            let next = self.queue.locked().pop_first();
            let Some((id, q)) = next else {
                self.wake.notified().await;
                continue;
            };
            let pushed = self.push(&id, &q.space, &q.trees).await;
            match pushed {
                Ok(p) => {
                    self.held.answered();
                    crate::metrics::store_sent(p.bytes_written);
                    self.settle(&id);
                    self.backoff.succeeded(&id);
                    crate::metrics::store_push(true);
                    if q.release_if.as_ref().is_some_and(|f| f()) {
                        self.held.release(&id).await;
                    }
                    tracing::info!(
                        "{id}: generation {} in {} ({} files, {} new chunks, {} bytes sent)",
                        p.generation,
                        self.store.shown,
                        p.files,
                        p.chunks_written,
                        p.bytes_written
                    );
                }
                Err(e @ (StoreError::HeldBy { .. } | StoreError::Superseded { .. })) => {
                    self.settle(&id);
                    crate::metrics::store_push(false);
                    tracing::warn!("{id}: not written to the store: {e}");
                }
                Err(e) => {
                    crate::metrics::store_push(false);
                    if !matches!(e, StoreError::Local { .. }) {
                        self.held.failed();
                    }
                    self.retry_later(id, q, &e);
                    continue;
                }
            }
            self.count(-1);
        }
    }

    /// `id`'s push ended (written, or another replica serves it), unless it was queued again.
    fn settle(&self, id: &str) {
        if !self.queue.locked().contains_key(id) {
            self.unsettled.locked().remove(id);
        }
    }

    /// Writes `trees` as sandbox `id`'s next generation under the prefix `space`, once this
    /// replica holds its lease.
    pub async fn push(&self, id: &str, space: &str, trees: &[Tree]) -> Result<Pushed, StoreError> {
        if self.superseded(id) {
            return Err(StoreError::Superseded {
                writer: "another replica".into(),
                generation: self.known_generation(id).unwrap_or(0),
            });
        }
        // A lapsed lease is taken again first: another replica may hold it now.
        if self.held.fresh(id) != Hold::Fresh
            && let Claim::Held { holder } = self.held.take(id, lease_path(&self.store, space, id)).await?
        {
            return Err(StoreError::HeldBy { holder });
        }
        let base = self.current(space, id).await?;
        let mut pushed = Pushed::default();
        let mut listed = BTreeMap::new();
        for tree in trees {
            let mut entries = Vec::new();
            // A workspace or its packages can hold thousands of files: walked off the async threads.
            let walk = tree.clone();
            let files = tokio::task::spawn_blocking(move || super::chunks::files_of(&walk))
                .await
                .map_err(|e| StoreError::Local {
                    path: tree.root.clone(),
                    source: std::io::Error::other(e),
                })??;
            for (rel, path) in files {
                let (entry, sent) = self.chunks.put_file(space, &rel, &path, &base.chunks).await?;
                pushed.chunks_written += sent.chunks;
                pushed.bytes_written += sent.bytes;
                entries.push(entry);
            }
            pushed.files += entries.len();
            listed.insert(tree.name.to_string(), entries);
        }
        let format = super::manifest::escape_if_needed(&mut listed);
        let manifest = Manifest {
            format,
            sandbox: id.to_string(),
            generation: base.generation + 1,
            written_by: self.held.me().to_string(),
            written_at: chrono::Utc::now(),
            chunk_bytes: CHUNK_BYTES as u64,
            trees: listed,
        };
        pushed.generation = manifest.generation;
        self.put_manifest(space, &manifest, base.version).await?;
        Ok(pushed)
    }

    /// The manifest the store holds for `id` (an empty base when it has none).
    async fn current(&self, space: &str, id: &str) -> Result<Base, StoreError> {
        if let Some(base) = self.versions.locked().get(id).cloned() {
            return Ok(base);
        }
        let path = manifest_path(&self.store, space, id);
        match self.store.read(&path, "a manifest", u64::MAX).await? {
            Some((bytes, version)) => Ok(match serde_json::from_slice::<Manifest>(&bytes) {
                Ok(m) => Base::of(&m, version),
                // A damaged manifest is replaced: its chunks are not trusted.
                Err(_) => Base {
                    version: Some(version),
                    ..Base::default()
                },
            }),
            None => Ok(Base::default()),
        }
    }

    async fn put_manifest(
        &self,
        space: &str,
        manifest: &Manifest,
        version: Option<UpdateVersion>,
    ) -> Result<(), StoreError> {
        let body = serde_json::to_vec_pretty(manifest).unwrap_or_default();
        let opts = PutOptions {
            mode: self.store.put_mode(version),
            ..Default::default()
        };
        let id = manifest.sandbox.as_str();
        let path = manifest_path(&self.store, space, id);
        match self
            .store
            .objects
            .put_opts(&path, PutPayload::from(body), opts)
            .await
        {
            Ok(done) => {
                let v = UpdateVersion {
                    e_tag: done.e_tag,
                    version: done.version,
                };
                self.adopted(manifest, v);
                Ok(())
            }
            Err(object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. }) => {
                Err(self.replaced_meanwhile(space, manifest).await)
            }
            // Kept: the next try replaces the same version, so it can never write over a
            // generation another replica wrote meanwhile.
            Err(e) => Err(self.store.failed("the manifest", e)),
        }
    }

    /// The store no longer holds the manifest this push replaces. If this replica wrote it
    /// (an earlier try whose answer was lost), it is the base of the next try; else another
    /// replica wrote a newer generation, and this replica's copy is never written over it.
    async fn replaced_meanwhile(&self, space: &str, ours: &Manifest) -> StoreError {
        let id = ours.sandbox.as_str();
        let path = manifest_path(&self.store, space, id);
        let current = match super::pull::manifest(&self.store, &path).await {
            Ok(Some(current)) => current,
            Ok(None) => {
                // Closed elsewhere, or damaged and deleted: the next try creates it.
                self.versions.locked().remove(id);
                return self.store.changed("the manifest");
            }
            Err(e) => return e,
        };
        let (m, version) = current;
        if m.written_by == self.held.me() && m.generation == ours.generation {
            self.adopted(&m, version);
            return self
                .store
                .changed("the manifest (an earlier try of this push was written)");
        }
        tracing::warn!(
            "{id}: {} wrote generation {} after this replica's copy (generation {}); this replica no longer writes its copy",
            m.written_by,
            m.generation,
            ours.generation - 1
        );
        self.superseded.locked().insert(id.to_string());
        if self.queue.locked().remove(id).is_some() {
            self.count(-1);
        }
        StoreError::Superseded {
            writer: format!("replica {}", m.written_by),
            generation: m.generation,
        }
    }

    /// Deletes sandbox `id` from the store (closed, or past retention): its manifest and its
    /// lease. Its chunks stay for a sweep: other generations, forks and checkpoints may share
    /// them.
    pub async fn delete(&self, id: &str, space: &str) {
        if self.queue.locked().remove(id).is_some() {
            self.count(-1);
        }
        self.unsettled.locked().remove(id);
        self.versions.locked().remove(id);
        self.superseded.locked().remove(id);
        if let Err(e) = self
            .store
            .objects
            .delete(&manifest_path(&self.store, space, id))
            .await
            && !matches!(e, object_store::Error::NotFound { .. })
        {
            tracing::warn!("{id}: its manifest could not be deleted from the store: {e}");
        }
        self.held.release(id).await;
    }
}

#[cfg(test)]
mod tests;
