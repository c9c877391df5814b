//! Writing a kept sandbox's folders to the store as a new generation: the chunks it lacks
//! first, then the manifest, replacing the one this server last read or wrote only if the
//! store still holds that version (so a server that lost track never writes over a newer one).
//! Pushes are queued per sandbox and coalesced: a sandbox saved again while its push waits is
//! pushed once, as it is then.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use object_store::UpdateVersion;

use super::chunks::{Chunks, Tree};
use super::held::Held;
use super::location::{Store, StoreError};
use super::manifest::Manifest;
use crate::host::lock::Locked;

/// How many times a push writes its chunks before giving up because each time some were
/// already past half the grace period when the last was written.
const ROUNDS: usize = 3;

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
        crate::telemetry::metrics::store_pending(*self.busy.borrow());
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
                    crate::telemetry::metrics::store_sent(p.bytes_written);
                    self.settle(&id);
                    self.backoff.succeeded(&id);
                    crate::telemetry::metrics::store_push(true);
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
                    crate::telemetry::metrics::store_push(false);
                    tracing::warn!("{id}: not written to the store: {e}");
                }
                Err(e) => {
                    crate::telemetry::metrics::store_push(false);
                    // Neither a local file nor a push slower than the grace period allows
                    // says the store is away.
                    if !matches!(e, StoreError::Local { .. } | StoreError::Slow { .. }) {
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
}

mod write;

#[cfg(test)]
mod tests;
