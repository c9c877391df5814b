//! The user's folders a sandbox reads in place (`CODE_SANDBOX_READ_DIRS`): each appears
//! read-only at `/mnt/<name>` in every sandbox, as a WASI preopen of the host folder itself,
//! so a 2 GB export costs no copy, no disk quota and nothing in a fork, checkpoint or kept
//! sandbox, and a file the user changes is seen changed.
//!
//! The names are fixed when the server starts. Images and saved states do not depend on
//! them: every interpreter re-reads its preopens after it starts or is restored, so a kept
//! sandbox comes back with its variables when the folders change. The file tools read these
//! folders host-side (`disk::dir_read`), through the same capability-checked reads as a workspace.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::paths::WorkspacePath;
use super::{FileEntry, FileKind, SandboxError};
use crate::host::names::{self, NameRules};

/// Where the folders appear in the guest.
pub const MOUNT_ROOT: &str = "/mnt";

/// One folder: its name under `/mnt` and the canonical host folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub name: String,
    pub host: PathBuf,
    /// The server's own home, when this folder holds it: it holds every sandbox's files (and
    /// a team server's tokens), so nothing in it opens, in a sandbox or through the file tools.
    pub hidden: Option<PathBuf>,
}

impl Mount {
    pub fn guest(&self) -> String {
        format!("{MOUNT_ROOT}/{}", self.name)
    }
}

/// The server's folders, in the order named; cheap to clone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mounts {
    list: Arc<[Mount]>,
    /// A host folder holding one empty folder per name, preopened at `/mnt` itself so the
    /// guest can list `/mnt` (each name is then the longer, real preopen).
    index: Option<PathBuf>,
}

/// A path under one of the folders.
#[derive(Clone, Debug)]
pub struct MountPath {
    pub mount: Mount,
    pub rel: WorkspacePath,
}

impl MountPath {
    pub fn guest(&self) -> String {
        match self.rel.is_root() {
            true => self.mount.guest(),
            false => format!("{}/{}", self.mount.guest(), self.rel.relative()),
        }
    }
}

/// A name the guest can use on every platform: characters Windows refuses become `_`.
fn plain_name(host: &Path) -> String {
    let raw = host
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let windows = NameRules {
        windows: true,
        folds: true,
    };
    let mut name: String = raw
        .chars()
        .map(|c| match c {
            '/' | '\\' | ':' | '<' | '>' | '"' | '|' | '?' | '*' => '_',
            c if c.is_control() => '_',
            c => c,
        })
        .collect();
    name = name.trim_end_matches(['.', ' ']).to_string();
    if name.is_empty() || name == "." || names::check_component(&name, windows).is_err() {
        name = format!(
            "folder{}",
            if name.is_empty() {
                String::new()
            } else {
                format!("-{name}")
            }
        );
    }
    name
}

impl Mounts {
    /// Names each canonical folder after itself, made unique (`data`, `data-2`, ...; compared
    /// without case, so the names also differ on a folding disk). A folder named twice is one.
    pub fn from_roots(roots: &[PathBuf]) -> Mounts {
        let mut out: Vec<Mount> = Vec::new();
        for host in roots {
            if out.iter().any(|m| &m.host == host) {
                continue;
            }
            let base = plain_name(host);
            let taken = |n: &str| out.iter().any(|m| m.name.to_lowercase() == n.to_lowercase());
            let mut name = base.clone();
            let mut i = 2;
            while taken(&name) {
                name = format!("{base}-{i}");
                i += 1;
            }
            out.push(Mount {
                name,
                host: host.clone(),
                hidden: None,
            });
        }
        Mounts {
            list: out.into(),
            index: None,
        }
    }

    /// Hides `home` (the server's own folder, canonical) in the folder that holds it.
    pub fn hiding(self, home: &Path) -> Mounts {
        let list: Vec<Mount> = self
            .iter()
            .cloned()
            .map(|m| Mount {
                hidden: home.starts_with(&m.host).then(|| home.to_path_buf()),
                ..m
            })
            .collect();
        Mounts {
            list: list.into(),
            ..self
        }
    }

    /// Makes (under `parent`) and uses the folder preopened at `/mnt` itself; without it the
    /// guest reaches each folder but cannot list `/mnt`.
    pub fn indexed_in(self, parent: &Path) -> std::io::Result<Mounts> {
        if self.is_empty() {
            return Ok(self);
        }
        let index = parent.join(format!("mnt-{}", self.tag()));
        for m in self.iter() {
            std::fs::create_dir_all(index.join(&m.name))?;
        }
        Ok(Mounts {
            index: Some(index),
            ..self
        })
    }

    pub fn index(&self) -> Option<&Path> {
        self.index.as_deref()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Mount> {
        self.list.iter()
    }

    /// A short name of the names (not the host folders): the index folder's.
    pub fn tag(&self) -> String {
        use sha2::{Digest, Sha256};
        let names = self.iter().map(Mount::guest).collect::<Vec<_>>().join(",");
        hex::encode(&Sha256::digest(names.as_bytes())[..6])
    }

    /// The guest paths, for messages.
    pub fn named(&self) -> String {
        match self.is_empty() {
            true => "none".into(),
            false => self.iter().map(Mount::guest).collect::<Vec<_>>().join(", "),
        }
    }

    /// `None` when `path` is not under `/mnt`; else the folder and the path inside it, or why
    /// not. `Some(Ok(None))` is `/mnt` itself.
    pub fn resolve(&self, path: &str) -> Option<Result<Option<MountPath>, SandboxError>> {
        let rest = path.strip_prefix(MOUNT_ROOT)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let rest = rest.trim_start_matches('/');
        let (name, inside) = rest.split_once('/').unwrap_or((rest, ""));
        if name.is_empty() {
            return Some(Ok(None));
        }
        let Some(mount) = self.iter().find(|m| m.name == name) else {
            return Some(Err(self.unknown(path)));
        };
        Some(WorkspacePath::parse(inside).map(|rel| {
            Some(MountPath {
                mount: mount.clone(),
                rel,
            })
        }))
    }

    fn unknown(&self, path: &str) -> SandboxError {
        let shown: String = path.chars().take(80).collect();
        SandboxError::InvalidPath(match self.is_empty() {
            true => format!(
                "'{shown}' is not a folder sandboxes may read: this server shares none. Upload the file (upload_file), or ask the user to add its folder to CODE_SANDBOX_READ_DIRS (\"Folders sandboxes may read\" in Claude Desktop)"
            ),
            false => format!(
                "'{shown}' is not a folder sandboxes may read; the shared folders are {}",
                self.named()
            ),
        })
    }

    /// `/mnt` itself: one folder entry per shared folder.
    pub fn entries(&self) -> Vec<FileEntry> {
        self.iter()
            .map(|m| FileEntry {
                name: m.name.clone(),
                path: m.guest(),
                kind: FileKind::Directory,
                size: 0,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_folders_own_made_unique_and_usable_everywhere() {
        let m = Mounts::from_roots(&[
            PathBuf::from("/home/me/Data"),
            PathBuf::from("/srv/data"),
            PathBuf::from("/srv/data"),
            PathBuf::from("/x/CON"),
            PathBuf::from("/y/a:b?"),
            PathBuf::from("/"),
        ]);
        let names: Vec<_> = m.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["Data", "data-2", "folder-CON", "a_b_", "folder"]);
        assert_eq!(
            m.named(),
            "/mnt/Data, /mnt/data-2, /mnt/folder-CON, /mnt/a_b_, /mnt/folder"
        );
    }

    #[test]
    fn paths_under_mnt_resolve_to_a_folder_or_say_which_exist() {
        let m = Mounts::from_roots(&[PathBuf::from("/home/me/data")]);
        assert!(m.resolve("/home/user/x").is_none());
        assert!(m.resolve("/mntx/y").is_none());
        assert!(matches!(m.resolve("/mnt"), Some(Ok(None))));
        let p = m.resolve("/mnt/data/a/b.csv").unwrap().unwrap().unwrap();
        assert_eq!(p.guest(), "/mnt/data/a/b.csv");
        assert_eq!(p.rel.relative(), "a/b.csv");
        let err = m.resolve("/mnt/other/x").unwrap().unwrap_err().to_string();
        assert!(err.contains("/mnt/data"), "{err}");
        assert!(m.resolve("/mnt/data/../../etc").unwrap().is_err());
        let none = Mounts::default()
            .resolve("/mnt/data")
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(none.contains("CODE_SANDBOX_READ_DIRS"), "{none}");
    }
}
