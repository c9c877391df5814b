//! The guest's file calls, watched: the disk quota and the open-file cap.
//!
//! wasmtime-wasi implements the file calls but has no notion of a quota, and its descriptor
//! table is private. So the WASI functions that add or remove bytes, names or descriptors are
//! shadowed in the linker ([`shadow`]): each shadow checks, calls wasmtime-wasi's own
//! implementation directly (with a host [`scratch`] buffer as its memory), and then measures
//! what changed. To measure, every descriptor the guest opens in a writable folder gets a
//! host-side twin ([`Open`]) opened through a cap-std `Dir` on the same folder, so `fstat` on
//! the twin sees the guest's file through renames and deletes.

pub mod listing;
pub mod names;
pub mod scratch;
pub mod shadow;

use std::collections::HashMap;
use std::sync::Arc;

use cap_std::fs::{Dir, File, Metadata};

use crate::disk::quota::{self as quota, DiskQuota, ENTRY_COST};

/// Most descriptors one guest may hold open (files and folders), beyond stdio and preopens.
pub const MAX_OPEN: usize = 256;

/// WASI errno values (wasi_snapshot_preview1 `errno`).
pub mod errno {
    pub const SUCCESS: i32 = 0;
    pub const ACCES: i32 = 2;
    pub const EXIST: i32 = 20;
    pub const FAULT: i32 = 21;
    pub const INVAL: i32 = 28;
    pub const IO: i32 = 29;
    pub const MFILE: i32 = 33;
    pub const NAMETOOLONG: i32 = 37;
    pub const NOENT: i32 = 44;
    pub const NOSPC: i32 = 51;
    pub const NOTSUP: i32 = 58;
}

/// The host twin of one guest descriptor.
pub enum Open {
    /// A folder in the workspace or /tmp: paths opened under it are watched.
    Dir(Arc<Dir>),
    /// A file in the workspace or /tmp.
    File(Arc<File>),
    /// A folder in a read-only tree: kept only to list it (see [`listing`]).
    ReadOnlyDir(Arc<Dir>),
    /// A folder the user shares (under `/mnt`), or one in it: what is opened under it is
    /// checked first (see [`shared_refusal`]).
    SharedDir(Arc<Dir>, Hidden),
    /// Any other descriptor: counted towards the cap, nothing to measure.
    Unwatched,
}

/// The part of a shared folder sandboxes may not open: the server's own home, when the
/// folder holds it.
pub type Hidden = Option<Arc<std::path::Path>>;

/// What a preopened folder is to the watch.
pub enum Folder {
    /// The workspace or /tmp: what is written there counts towards the quota.
    Counted,
    /// The runtime's own trees: read-only, opened by every import, never checked.
    ReadOnly,
    /// A folder the user shares, read-only, which anything on the host may change.
    Shared(Hidden),
}

pub struct GuestFs {
    quota: Arc<DiskQuota>,
    open: HashMap<u32, Open>,
    pub listings: listing::Listings,
    preopens: usize,
    /// What the shadows hand the original functions as their memory.
    pub scratch: scratch::Scratch,
}

impl GuestFs {
    /// `preopens` lists the guest's preopened folders in descriptor order (from 3): each host
    /// folder, and whether it counts towards the quota.
    pub fn new(quota: Arc<DiskQuota>, preopens: Vec<(Dir, Folder)>) -> Self {
        let count = preopens.len();
        let open = preopens
            .into_iter()
            .enumerate()
            .map(|(i, (d, folder))| {
                let fd = 3 + i as u32;
                let d = Arc::new(d);
                let twin = match folder {
                    Folder::Counted => Open::Dir(d),
                    Folder::ReadOnly => Open::ReadOnlyDir(d),
                    Folder::Shared(hidden) => Open::SharedDir(d, hidden),
                };
                (fd, twin)
            })
            .collect();
        GuestFs {
            quota,
            open,
            listings: Default::default(),
            preopens: count,
            scratch: Default::default(),
        }
    }

    pub fn quota(&self) -> &Arc<DiskQuota> {
        &self.quota
    }

    pub fn dir(&self, fd: i32) -> Option<Arc<Dir>> {
        match self.open.get(&(fd as u32)) {
            Some(Open::Dir(d)) => Some(d.clone()),
            _ => None,
        }
    }

    /// Any folder the guest holds open, watched or not.
    pub fn listable(&self, fd: i32) -> Option<Arc<Dir>> {
        match self.open.get(&(fd as u32)) {
            Some(Open::Dir(d) | Open::ReadOnlyDir(d) | Open::SharedDir(d, _)) => Some(d.clone()),
            _ => None,
        }
    }

    /// A folder the user shares (or one in it) that the guest holds open, and its hidden part.
    pub fn shared(&self, fd: i32) -> Option<(Arc<Dir>, Hidden)> {
        match self.open.get(&(fd as u32)) {
            Some(Open::SharedDir(d, hidden)) => Some((d.clone(), hidden.clone())),
            _ => None,
        }
    }

    pub fn file(&self, fd: i32) -> Option<Arc<File>> {
        match self.open.get(&(fd as u32)) {
            Some(Open::File(f)) => Some(f.clone()),
            _ => None,
        }
    }

    /// Descriptors the guest holds beyond its preopens (files and folders it opened).
    pub fn opened(&self) -> usize {
        self.open.len().saturating_sub(self.preopens)
    }

    /// Host paths of the files and folders the guest holds open in its writable folders, as
    /// the system names them now (`host::open::path_of`).
    pub fn open_paths(&self) -> Vec<std::path::PathBuf> {
        let mut out: Vec<std::path::PathBuf> = self
            .open
            .iter()
            .filter(|(fd, _)| **fd as usize >= 3 + self.preopens)
            .filter_map(|(_, o)| match o {
                Open::File(f) => f.try_clone().ok(),
                Open::Dir(d) => d
                    .try_clone()
                    .ok()
                    .map(|d| cap_std::fs::File::from_std(d.into_std_file())),
                _ => None,
            })
            .filter_map(|f| crate::host::open::path_of(&f.into_std()))
            .collect();
        out.sort();
        out
    }

    pub fn is_full(&self) -> bool {
        self.open.len() >= self.preopens + MAX_OPEN
    }

    /// Records a descriptor the guest just opened.
    pub fn insert(&mut self, fd: i32, twin: Open) {
        if let Open::File(f) = &twin
            && let Ok(md) = f.metadata()
        {
            self.quota.opened(quota::key(&md));
        }
        if let Some(old) = self.open.insert(fd as u32, twin) {
            self.forget(old);
        }
    }

    /// The guest closed `fd` (or renumbered over it).
    pub fn remove(&mut self, fd: i32) -> Option<Open> {
        self.listings.forget(fd as u32);
        self.open.remove(&(fd as u32))
    }

    /// Moves a twin along with `fd_renumber`.
    pub fn renumber(&mut self, from: i32, to: i32) {
        self.listings.forget(from as u32);
        self.listings.forget(to as u32);
        let moved = self.open.remove(&(from as u32));
        if let Some(old) = self.open.remove(&(to as u32)) {
            self.forget(old);
        }
        if let Some(m) = moved {
            self.open.insert(to as u32, m);
        }
    }

    /// A twin goes away: a file deleted while open frees its bytes with its last descriptor.
    pub fn forget(&self, twin: Open) {
        let Open::File(f) = twin else { return };
        let Ok(md) = f.metadata() else { return };
        if self.quota.closed(quota::key(&md)) && quota::links(&md) == 0 {
            self.quota.release(md.len() + ENTRY_COST);
        }
    }
}

impl Drop for GuestFs {
    /// A dropped Store closes every guest descriptor, so deleted-but-open files are freed.
    fn drop(&mut self) {
        for (_, twin) in std::mem::take(&mut self.open) {
            self.forget(twin);
        }
    }
}

/// Metadata of `path` under `dir`, following a final link when `follow` says so.
pub fn stat(dir: &Dir, path: &str, follow: bool) -> Option<Metadata> {
    if follow {
        dir.metadata(path).ok()
    } else {
        dir.symlink_metadata(path).ok()
    }
}

/// The twin of something opened in a read-only tree: folders are kept to list them, and a
/// folder in a shared one is shared too (`shared`: its hidden part).
pub fn read_only_twin(dir: &Dir, path: &str, follow: bool, shared: Option<Hidden>) -> Open {
    match stat(dir, path, follow) {
        Some(md) if md.is_dir() => dir.open_dir(path).map_or(Open::Unwatched, |d| match shared {
            Some(hidden) => Open::SharedDir(Arc::new(d), hidden),
            None => Open::ReadOnlyDir(Arc::new(d)),
        }),
        _ => Open::Unwatched,
    }
}

/// Why the guest may not open `path` under `dir`, a folder the user shares, if it may not
/// (a WASI errno): a FIFO, socket or device, whose open would hold a host thread until another
/// process came (the call's time limit stops the guest, not that thread); or a place in the
/// server's own home (`hidden`), however the path got there. Checked before the open, through
/// an open that never blocks; what is absent is left to the open to report.
pub fn shared_refusal(dir: &Dir, path: &str, follow: bool, hidden: Option<&std::path::Path>) -> Option<i32> {
    let md = stat(dir, path, follow)?;
    if !(md.is_file() || md.is_dir() || md.file_type().is_symlink()) {
        return Some(errno::NOTSUP);
    }
    hidden
        .is_some_and(|h| crate::host::open::opens_into(dir, path, follow, h))
        .then_some(errno::ACCES)
}

/// Opens the host twin of what the guest just opened at `path` under `dir`: one open, then
/// `fstat` on it tells a folder from a file.
pub fn open_twin(dir: &Dir, path: &str, follow: bool) -> std::io::Result<Open> {
    // Never block on a FIFO, and open the very link the guest opened when it did not follow.
    let file = crate::host::open::open_read(dir, path, follow)?;
    if file.metadata()?.is_dir() {
        // Only re-labels the descriptor, which is already confined to the sandbox.
        return Ok(Open::Dir(Arc::new(Dir::from_std_file(file.into_std()))));
    }
    Ok(Open::File(Arc::new(file)))
}

#[cfg(test)]
mod tests;
