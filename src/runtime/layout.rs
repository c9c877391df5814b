//! Where things live under `CODE_SANDBOX_HOME`. One place names every folder, so the
//! installer, the backend and the cleanup code cannot disagree.

use std::path::{Path, PathBuf};

use super::Manifest;

#[derive(Clone, Debug)]
pub struct Layout {
    pub home: PathBuf,
}

/// The unpacked, verified runtime.
#[derive(Clone, Debug)]
pub struct RuntimeFiles {
    pub dir: PathBuf,
    pub module: PathBuf,
    pub module_sha256: String,
    /// Folder holding the stdlib zip under its guest name; preopened read-only at /usr/local/lib.
    pub lib_dir: PathBuf,
    /// matplotlib's data, extracted from the stdlib zip (the only thing that must be).
    pub mpl_data: PathBuf,
    pub python_version: String,
    /// Lines `package NAME VERSION` of the runtime's MANIFEST that are Python distributions (a
    /// `.dist-info` in the stdlib zip): what is already importable.
    pub packages: Vec<(String, String)>,
    /// The other MANIFEST packages: C libraries and build tools the runtime was built with.
    pub libraries: Vec<(String, String)>,
}

/// The file of a sandbox's cells in [`Layout::history_dir`]: the id itself when it is plain, else its hash.
pub fn history_file(id: &str) -> String {
    if !id.is_empty()
        && id.len() <= 100
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        format!("{id}.jsonl")
    } else {
        use sha2::Digest as _;
        format!("{}.jsonl", hex::encode(sha2::Sha256::digest(id.as_bytes())))
    }
}

const MARKER: &str = "INSTALLED";

impl Layout {
    pub fn new(home: impl Into<PathBuf>) -> Self {
        Layout { home: home.into() }
    }
    pub fn runtime_dir(&self, m: &Manifest) -> PathBuf {
        self.home
            .join("runtime")
            .join(format!("{}-{}", m.wheel.name, m.wheel.version))
    }
    pub fn cache_dir(&self) -> PathBuf {
        self.home.join("cache")
    }
    pub fn downloads_dir(&self) -> PathBuf {
        self.home.join("downloads")
    }
    pub fn sandboxes_dir(&self) -> PathBuf {
        self.home.join("sandboxes")
    }
    /// Private `/tmp` folders, one per sandbox, kept apart from the workspaces users see.
    pub fn scratch_dir(&self) -> PathBuf {
        self.home.join("scratch")
    }
    pub fn wheels_dir(&self) -> PathBuf {
        self.home.join("wheels")
    }
    /// Each sandbox's cells, for `export_notebook` (`<id>.jsonl`).
    pub fn history_dir(&self) -> PathBuf {
        self.home.join("history")
    }
    /// Closed sandboxes' folders on their way out, one folder per server (see `wasm::removals`).
    pub fn trash_dir(&self) -> PathBuf {
        self.home.join("trash")
    }

    /// The marker is written last, after every member was verified, so its presence with the
    /// pinned digests means the folder is whole.
    pub(super) fn marker_text(m: &Manifest) -> String {
        format!(
            "{} {}\n{} {}\n",
            m.artifacts.module_sha256, m.artifacts.module, m.artifacts.stdlib_sha256, m.artifacts.stdlib
        )
    }

    pub(super) fn files_in(&self, dir: &Path, m: &Manifest) -> RuntimeFiles {
        let manifest_text = std::fs::read_to_string(dir.join("MANIFEST")).unwrap_or_default();
        let listed: Vec<(String, String)> = manifest_text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                match (it.next(), it.next(), it.next()) {
                    (Some("package"), Some(name), Some(version)) => {
                        Some((name.to_string(), version.to_string()))
                    }
                    _ => None,
                }
            })
            .collect();
        let (packages, libraries) = match distributions(&dir.join("lib").join(&m.artifacts.stdlib_guest_name))
        {
            Some(dists) => listed
                .into_iter()
                .partition(|(n, _)| dists.contains(&super::normalize(n))),
            // An unreadable zip fails later, at load; until then, call everything a package.
            None => (listed, Vec::new()),
        };
        RuntimeFiles {
            dir: dir.to_path_buf(),
            module: dir.join(&m.artifacts.module),
            module_sha256: m.artifacts.module_sha256.clone(),
            lib_dir: dir.join("lib"),
            mpl_data: dir.join("mpl-data"),
            python_version: m.artifacts.python_version.clone(),
            packages,
            libraries,
        }
    }

    /// The installed runtime, if it is complete and the pinned one.
    pub fn installed(&self, m: &Manifest) -> Option<RuntimeFiles> {
        let dir = self.runtime_dir(m);
        let marker = std::fs::read_to_string(dir.join(MARKER)).ok()?;
        if marker != Self::marker_text(m) {
            return None;
        }
        let files = self.files_in(&dir, m);
        let whole = files.module.is_file()
            && files.lib_dir.join(&m.artifacts.stdlib_guest_name).is_file()
            && files.mpl_data.is_dir();
        whole.then_some(files)
    }

    pub(super) fn marker_path(dir: &Path) -> PathBuf {
        dir.join(MARKER)
    }
}

/// The Python distributions in the stdlib zip: each `NAME-VERSION.dist-info/` folder's name.
fn distributions(zip: &Path) -> Option<std::collections::BTreeSet<String>> {
    let archive = zip::ZipArchive::new(std::fs::File::open(zip).ok()?).ok()?;
    Some(
        archive
            .file_names()
            .filter_map(|n| n.split('/').next())
            .filter_map(|top| top.strip_suffix(".dist-info"))
            .filter_map(|d| d.split_once('-').map(|(name, _)| super::normalize(name)))
            .collect(),
    )
}
