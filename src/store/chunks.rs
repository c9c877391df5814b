//! A file's chunks in the store: cut where its content says (FastCDC), so an insertion or a
//! change moves the cuts near it only and every other chunk keeps its name; each named by
//! its SHA-256 and written only if the store lacks it. Which chunks a push may trust the store
//! to hold is decided here too (see `sweep` for why).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use object_store::{ObjectStoreExt, PutPayload};
use sha2::{Digest, Sha256};

use super::location::{Store, StoreError};
use super::manifest::{CHUNK_BYTES, CHUNK_MIN, CHUNK_TYPICAL, Entry};
use super::space::chunk_path;
use crate::host::lock::Locked;

/// Chunks remembered as present before the expired are forgotten.
const PRESENT_MAX: usize = 200_000;

/// One folder to push: its name in the manifest, where it is, and top-level names left out
/// (or the one top-level name taken, when a folder many sandboxes share holds one of its).
#[derive(Clone, Debug)]
pub struct Tree {
    pub name: &'static str,
    pub root: PathBuf,
    pub skip: &'static [&'static str],
    pub only: Option<String>,
}

/// What writing a file's chunks sent, and until when every chunk it named that no current
/// manifest names is safe from a sweep.
#[derive(Debug, Default)]
pub struct Sent {
    pub chunks: usize,
    pub bytes: u64,
    pub files: usize,
    pub safe_until: Option<Instant>,
}

impl Sent {
    fn add(&mut self, other: Sent) {
        self.chunks += other.chunks;
        self.bytes += other.bytes;
        self.files += other.files;
        if let Some(until) = other.safe_until {
            self.safe_until_at_most(until);
        }
    }

    /// Notes a chunk safe only until `until`: what the whole is safe until is the earliest.
    fn safe_until_at_most(&mut self, until: Instant) {
        self.safe_until = Some(self.safe_until.map_or(until, |s| s.min(until)));
    }
}

/// Each tree's entries, by the tree's name in the manifest.
pub type Listed = BTreeMap<String, Vec<Entry>>;

/// Where one chunk of a file is, and its name.
struct Cut {
    offset: u64,
    length: usize,
    sha: String,
}

pub struct Chunks {
    store: Store,
    /// Chunks the store is known to hold (by space and SHA-256), each until when a sweep
    /// cannot have deleted it: half the grace period after it was last written.
    present: Mutex<HashMap<String, Instant>>,
    grace: Duration,
}

impl Chunks {
    pub fn new(store: Store, grace: Duration) -> Self {
        Chunks {
            store,
            present: Mutex::default(),
            grace,
        }
    }

    /// The sweep's grace period this push keeps its chunks within.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// Writes the chunks of every file of `trees` the store lacks (none of `named`, the chunks
    /// of the manifest this push replaces, is asked for); their entries.
    pub async fn put_trees(
        &self,
        space: &str,
        trees: &[Tree],
        named: &HashSet<String>,
    ) -> Result<(Listed, Sent), StoreError> {
        let mut listed = BTreeMap::new();
        let mut sent = Sent::default();
        for tree in trees {
            // A workspace or its packages can hold thousands of files: walked off the async threads.
            let walk = tree.clone();
            let files = tokio::task::spawn_blocking(move || files_of(&walk))
                .await
                .map_err(|e| StoreError::Local {
                    path: tree.root.clone(),
                    source: std::io::Error::other(e),
                })??;
            let mut entries = Vec::with_capacity(files.len());
            for (rel, path) in files {
                let (entry, one) = self.put_file(space, &rel, &path, named).await?;
                sent.add(one);
                entries.push(entry);
            }
            listed.insert(tree.name.to_string(), entries);
        }
        Ok((listed, sent))
    }

    /// Writes the chunks of the file at `path` the store lacks (none of `named`, the chunks
    /// of the manifest this push replaces, is asked for); its entry, as `rel`.
    pub async fn put_file(
        &self,
        space: &str,
        rel: &str,
        path: &Path,
        named: &HashSet<String>,
    ) -> Result<(Entry, Sent), StoreError> {
        let local = |source| StoreError::Local {
            path: path.to_path_buf(),
            source,
        };
        let owned = path.to_path_buf();
        let cuts = tokio::task::spawn_blocking(move || cuts(&owned))
            .await
            .map_err(|e| local(std::io::Error::other(e)))?
            .map_err(local)?;
        let mut entry = Entry {
            path: rel.to_string(),
            bytes: 0,
            chunks: Vec::new(),
        };
        let mut sent = Sent {
            files: 1,
            ..Sent::default()
        };
        for cut in cuts {
            entry.bytes += cut.length as u64;
            if !named.contains(&cut.sha) {
                let until = self.put_chunk(space, path, &cut, &mut sent).await?;
                sent.safe_until_at_most(until);
            }
            entry.chunks.push(cut.sha);
        }
        Ok((entry, sent))
    }

    /// Makes sure the store holds `cut` and keeps it for half the grace period at least: a
    /// chunk the sandbox's manifest does not name may be named by no manifest, so the sweep
    /// may delete it once older than the grace period; an old one is written again. Until when
    /// it is safe.
    async fn put_chunk(
        &self,
        space: &str,
        path: &Path,
        cut: &Cut,
        sent: &mut Sent,
    ) -> Result<Instant, StoreError> {
        let known = format!("{space}/{}", cut.sha);
        let now = Instant::now();
        let until = self.present.locked().get(&known).copied();
        if let Some(until) = until.filter(|until| *until > now) {
            return Ok(until);
        }
        let half = self.grace / 2;
        let at = chunk_path(&self.store, space, &cut.sha);
        let safe_for = match self.store.objects.head(&at).await {
            Ok(meta) => {
                let age = (chrono::Utc::now() - meta.last_modified)
                    .to_std()
                    .unwrap_or_default();
                half.checked_sub(age)
            }
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => return Err(self.store.failed("a chunk", e)),
        };
        if safe_for.is_none() {
            let data = read(path, cut).await?;
            self.store
                .objects
                .put(&at, PutPayload::from(data))
                .await
                .map_err(|e| self.store.failed("a chunk", e))?;
            sent.chunks += 1;
            sent.bytes += cut.length as u64;
        }
        let mut present = self.present.locked();
        if present.len() > PRESENT_MAX {
            present.retain(|_, until| *until > now);
        }
        let until = now + safe_for.unwrap_or(half);
        present.insert(known, until);
        Ok(until)
    }
}

/// The file's content-defined chunks, hashed.
fn cuts(path: &Path) -> std::io::Result<Vec<Cut>> {
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut out = Vec::new();
    for chunk in fastcdc::v2020::StreamCDC::new(file, CHUNK_MIN, CHUNK_TYPICAL, CHUNK_BYTES) {
        let chunk = chunk.map_err(std::io::Error::other)?;
        out.push(Cut {
            offset: chunk.offset,
            length: chunk.length,
            sha: hex::encode(Sha256::digest(&chunk.data)),
        });
    }
    Ok(out)
}

/// The bytes of `cut`, read again to be sent; a file changed since it was cut (the sandbox
/// kept running) fails this push, which is tried again, rather than store a chunk under a
/// name that is not its content's.
async fn read(path: &Path, cut: &Cut) -> Result<Vec<u8>, StoreError> {
    let (owned, offset, length) = (path.to_path_buf(), cut.offset, cut.length);
    let data = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        let mut f = std::fs::File::open(&owned)?;
        f.seek(SeekFrom::Start(offset))?;
        let mut data = vec![0; length];
        f.read_exact(&mut data)?;
        Ok(data)
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|r| r)
    .map_err(|source| StoreError::Local {
        path: path.to_path_buf(),
        source,
    })?;
    if hex::encode(Sha256::digest(&data)) != cut.sha {
        return Err(StoreError::Local {
            path: path.to_path_buf(),
            source: std::io::Error::other("it changed while it was being written to the store"),
        });
    }
    Ok(data)
}

/// Every regular file under the tree (links and special files are not followed or kept), by
/// its `/`-separated path, in a stable order.
pub fn files_of(tree: &Tree) -> Result<Vec<(String, PathBuf)>, StoreError> {
    let mut out = Vec::new();
    let mut todo = vec![(String::new(), tree.root.clone())];
    while let Some((rel, dir)) = todo.pop() {
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(StoreError::Local { path: dir, source }),
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let taken = tree.only.as_ref().is_none_or(|only| *only == name);
            if rel.is_empty() && (tree.skip.contains(&name.as_str()) || !taken) {
                continue;
            }
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            match e.file_type() {
                Ok(t) if t.is_dir() => todo.push((child, e.path())),
                Ok(t) if t.is_file() => out.push((child, e.path())),
                _ => {}
            }
        }
    }
    out.sort();
    Ok(out)
}
