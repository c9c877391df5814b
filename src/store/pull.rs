//! Bringing a kept sandbox's folders back from the store: its manifest read, each file put
//! together from its chunks, every chunk checked against the SHA-256 it is named by. A file
//! with a chunk missing or damaged is left out and named, never written half or wrong; a path
//! that could leave its folder is refused. The caller gets the folders and what was lost.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use object_store::{ObjectStoreExt, UpdateVersion};
use sha2::{Digest, Sha256};

use super::location::{Store, StoreError};
use super::manifest::{Entry, FORMAT, FORMAT_ESCAPED, Manifest};

/// Bytes a manifest may have: thousands of files fit in far less.
const MANIFEST_MAX: u64 = 64 << 20;

/// What a pull brought back.
#[derive(Debug)]
pub struct Pulled {
    pub generation: u64,
    /// The manifest's version, for the next conditional write.
    pub version: UpdateVersion,
    pub files: usize,
    pub bytes: u64,
    /// Files left out (`tree/path`): a chunk missing or not what its name says.
    pub damaged: Vec<String>,
}

/// The manifest at `path` and its version; `None` when the store has none.
pub async fn manifest(
    store: &Store,
    path: &object_store::path::Path,
) -> Result<Option<(Manifest, UpdateVersion)>, StoreError> {
    let Some((bytes, version)) = store.read(path, "a manifest", MANIFEST_MAX).await? else {
        return Ok(None);
    };
    let m: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| damaged(store, &format!("a manifest that is not one: {e}")))?;
    if m.format != FORMAT && m.format != FORMAT_ESCAPED {
        return Err(damaged(store, &format!("a manifest of format {}", m.format)));
    }
    Ok(Some((m, version)))
}

fn damaged(store: &Store, what: &str) -> StoreError {
    StoreError::Damaged {
        store: store.shown.clone(),
        what: what.to_string(),
    }
}

/// Writes every file of `m`'s trees into the folder `dest` gives for the tree's name (trees
/// it gives none for are skipped), fetching chunks under `chunks`.
pub async fn files(
    store: &Store,
    m: &Manifest,
    version: UpdateVersion,
    chunk_path: &(dyn Fn(&str) -> object_store::path::Path + Sync),
    dest: &BTreeMap<&str, PathBuf>,
) -> Result<Pulled, StoreError> {
    let mut pulled = Pulled {
        generation: m.generation,
        version,
        files: 0,
        bytes: 0,
        damaged: Vec::new(),
    };
    for (tree, entries) in &m.trees {
        let Some(root) = dest.get(tree.as_str()) else {
            continue;
        };
        for e in entries {
            let Some((path, shown)) = inside(root, &e.path, m.format) else {
                pulled.damaged.push(format!("{tree}/{}", e.path));
                continue;
            };
            let shown = format!("{tree}/{shown}");
            if file(store, e, &path, chunk_path).await? {
                pulled.files += 1;
                pulled.bytes += e.bytes;
            } else {
                pulled.damaged.push(shown);
            }
        }
    }
    Ok(pulled)
}

/// `rel` (a path of a manifest of `format`) under `root`, and as the file is named, if each
/// part is one plain name on this disk, so the path stays there.
fn inside(root: &Path, rel: &str, format: u32) -> Option<(PathBuf, String)> {
    let parts: Vec<String> = rel
        .split('/')
        .map(|p| super::manifest::unescape(p, format))
        .collect::<Option<_>>()?;
    let rules = crate::host::names::NameRules::host();
    let plain = |p: &String| {
        !p.is_empty()
            && p != "."
            && p != ".."
            && !p.contains(['/', '\0'])
            && (!rules.windows || !p.contains('\\'))
            && crate::host::names::check_component(p, rules).is_ok()
    };
    parts.iter().all(plain).then(|| {
        let path = parts.iter().fold(root.to_path_buf(), |p, s| p.join(s));
        (path, parts.join("/"))
    })
}

/// Writes one file from its chunks; whether every chunk was there and sound (if not, nothing
/// is left at `path`).
async fn file(
    store: &Store,
    e: &Entry,
    path: &Path,
    chunk_path: &(dyn Fn(&str) -> object_store::path::Path + Sync),
) -> Result<bool, StoreError> {
    let local = |source| StoreError::Local {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(local)?;
    }
    let mut out = std::fs::File::create(path).map_err(local)?;
    let mut written = 0u64;
    for sha in &e.chunks {
        let got = match store.objects.get(&chunk_path(sha)).await {
            Ok(got) => got.bytes().await.map_err(|e| store.failed("a chunk", e))?,
            Err(object_store::Error::NotFound { .. }) => return Ok(give_up(path)),
            Err(err) => return Err(store.failed("a chunk", err)),
        };
        if hex::encode(Sha256::digest(&got)) != *sha {
            return Ok(give_up(path));
        }
        out.write_all(&got).map_err(local)?;
        written += got.len() as u64;
    }
    if written != e.bytes {
        return Ok(give_up(path));
    }
    out.sync_all().map_err(local)?;
    Ok(true)
}

fn give_up(path: &Path) -> bool {
    let _ = std::fs::remove_file(path);
    false
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_plain_relative_paths_land_inside() {
        use crate::store::manifest::{FORMAT, FORMAT_ESCAPED};
        let root = std::path::Path::new("/r");
        let at = |rel, format| super::inside(root, rel, format).map(|(p, _)| p);
        assert_eq!(at("a/b.txt", FORMAT), Some(root.join("a").join("b.txt")));
        for bad in ["../x", "a/../../x", "/etc/passwd", "a//b", ""] {
            assert_eq!(at(bad, FORMAT), None, "{bad}");
        }
        for bad in ["%2E%2E/x", "a%2Fb/..", "a%00b", "%FF"] {
            assert_eq!(at(bad, FORMAT_ESCAPED), None, "{bad}");
        }
        // Linux and macOS name files `a:b` and `c\d` as they are; Windows cannot.
        let odd = at("a%3Ab/c%5Cd", FORMAT_ESCAPED);
        if cfg!(windows) {
            assert_eq!(odd, None);
        } else {
            assert_eq!(odd, Some(root.join("a:b").join("c\\d")));
        }
    }
}
