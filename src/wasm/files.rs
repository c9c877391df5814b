//! Host-side file tools for wasm sandboxes.
//!
//! Every operation goes through a `cap_std::fs::Dir` opened on the sandbox's workspace, never
//! `std::fs` on a joined path: cap-std resolves each component inside the directory and
//! refuses absolute or `..` symlinks, so a link the guest planted cannot lead a host read or
//! write outside. Reads refuse links outright and never block on a FIFO (`host::open`).

use std::io::Write;
use std::sync::Arc;

use async_trait::async_trait;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};

use super::registry::Registry;
use crate::disk::dir_read::{self, not_found_or};
use crate::disk::quota::{DiskQuota, ENTRY_COST};
use crate::sandbox::blocking;
use crate::sandbox::paths::WorkspacePath;
use crate::sandbox::{Listing, SandboxError, SandboxFiles};

pub struct WasmFiles {
    registry: Arc<Registry>,
}

impl WasmFiles {
    pub fn new(registry: Arc<Registry>) -> Self {
        WasmFiles { registry }
    }

    fn root(&self, id: &str) -> Result<Dir, SandboxError> {
        Ok(self.root_and_quota(id)?.0)
    }

    fn root_and_quota(&self, id: &str) -> Result<(Dir, Arc<DiskQuota>), SandboxError> {
        let sb = self.registry.get(id)?;
        let root = Dir::open_ambient_dir(&sb.dirs.workspace, ambient_authority())
            .map_err(SandboxError::io("could not open the sandbox's workspace"))?;
        Ok((root, sb.quota.clone()))
    }
}

/// Folders of `path` that do not exist yet.
fn missing_folders(root: &Dir, path: &WorkspacePath) -> u64 {
    let mut missing = 0;
    let mut p = path.clone();
    while !p.is_root() && root.symlink_metadata(p.relative()).is_err() {
        missing += 1;
        p = p.parent();
    }
    missing
}

fn write_blocking(
    root: Dir,
    quota: &DiskQuota,
    path: WorkspacePath,
    bytes: Vec<u8>,
) -> Result<u64, SandboxError> {
    let parent = path.parent();
    // The new file and any new folders are charged up front; the old file is released once
    // the new one has replaced it.
    let reserved = bytes.len() as u64 + ENTRY_COST * (1 + missing_folders(&root, &parent));
    quota.reserve(reserved)?;
    let written = write_reserved(root, quota, &path, &bytes);
    if written.is_err() {
        quota.release(reserved);
    }
    written
}

fn write_reserved(
    root: Dir,
    quota: &DiskQuota,
    path: &WorkspacePath,
    bytes: &[u8],
) -> Result<u64, SandboxError> {
    let rel = path.relative();
    let parent = path.parent();
    let dir = if parent.is_root() {
        root
    } else {
        root.create_dir_all(parent.relative())
            .map_err(|e| SandboxError::Io {
                context: format!("could not create the folder '{}'", parent.relative()),
                source: e,
            })?;
        root.open_dir(parent.relative())
            .map_err(not_found_or(&parent, "could not open"))?
    };
    let name = path.file_name().unwrap_or_default().to_string();
    let old = dir.symlink_metadata(&name).ok();
    if old.as_ref().is_some_and(|md| md.is_dir()) {
        return Err(SandboxError::IsDirectory { path: rel });
    }
    // Written aside and renamed over: readers see the old file or the new one, and a file
    // hard-linked elsewhere keeps its bytes (the name gets a new inode).
    let tmp = format!(
        ".{}.{}.part",
        name.chars().take(64).collect::<String>(),
        uuid::Uuid::new_v4().simple()
    );
    let result = (|| {
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        let mut f = dir.open_with(&tmp, &opts)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        dir.rename(&tmp, &dir, &name)
    })();
    if let Err(e) = result {
        let _ = dir.remove_file(&tmp);
        return Err(SandboxError::Io {
            context: format!("could not write '{rel}'"),
            source: e,
        });
    }
    if let Some(old) = old {
        quota.forget_entry(&old);
    }
    Ok(bytes.len() as u64)
}

#[async_trait]
impl SandboxFiles for WasmFiles {
    async fn list(&self, id: &str, path: &WorkspacePath) -> Result<Listing, SandboxError> {
        let root = self.root(id)?;
        let path = path.clone();
        blocking(move || dir_read::list(root, path)).await
    }

    async fn read(&self, id: &str, path: &WorkspacePath, limit: u64) -> Result<Vec<u8>, SandboxError> {
        let root = self.root(id)?;
        let path = path.clone();
        blocking(move || dir_read::read(root, path, limit)).await
    }

    async fn copy_out(
        &self,
        id: &str,
        path: &WorkspacePath,
        limit: u64,
        mut out: std::fs::File,
    ) -> Result<u64, SandboxError> {
        let root = self.root(id)?;
        let path = path.clone();
        blocking(move || dir_read::copy(&root, &path, limit, &mut out)).await
    }

    /// A write is a use (reads are not: a client listing resources must not make every kept
    /// sandbox the default for calls without an id).
    async fn write(&self, id: &str, path: &WorkspacePath, bytes: Vec<u8>) -> Result<u64, SandboxError> {
        if let Ok(sb) = self.registry.get(id) {
            sb.touch();
        }
        let (root, quota) = self.root_and_quota(id)?;
        let path = path.clone();
        blocking(move || write_blocking(root, &quota, path, bytes)).await
    }
}
