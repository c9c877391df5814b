//! One push: the chunks the store lacks, then the manifest in place of exactly the version
//! this replica last wrote or read; and a sandbox's deletion from the store.

use std::time::Instant;

use object_store::{ObjectStoreExt, PutOptions, PutPayload, UpdateVersion};

use super::{Base, Pushed, Pusher, ROUNDS};
use crate::host::lock::Locked;
use crate::store::chunks::{Listed, Sent, Tree};
use crate::store::held::Hold;
use crate::store::lease::Claim;
use crate::store::location::StoreError;
use crate::store::manifest::{CHUNK_BYTES, Manifest};
use crate::store::space::{lease_path, manifest_path};

impl Pusher {
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
        let (mut listed, sent) = self.put_chunks(space, trees, &base).await?;
        let mut pushed = Pushed {
            files: sent.files,
            chunks_written: sent.chunks,
            bytes_written: sent.bytes,
            ..Pushed::default()
        };
        let format = crate::store::manifest::escape_if_needed(&mut listed);
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

    /// Writes the chunks of `trees` the store lacks, again while any written first would be
    /// past half the grace period (and so a sweep's to take) before the manifest names it: a
    /// push slower than that (a huge file, a slow store) must not leave a manifest naming a
    /// chunk the sweep deleted meanwhile.
    async fn put_chunks(
        &self,
        space: &str,
        trees: &[Tree],
        base: &Base,
    ) -> Result<(Listed, Sent), StoreError> {
        let mut total = Sent::default();
        for _ in 0..ROUNDS {
            let (listed, sent) = self.chunks.put_trees(space, trees, &base.chunks).await?;
            let in_time = sent.safe_until.is_none_or(|until| until > Instant::now());
            total.chunks += sent.chunks;
            total.bytes += sent.bytes;
            total.files = sent.files;
            if in_time {
                return Ok((listed, total));
            }
        }
        Err(StoreError::Slow {
            store: self.store.shown.clone(),
            half_grace: self.chunks.grace() / 2,
        })
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
        let current = match crate::store::pull::manifest(&self.store, &path).await {
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
