//! Each server's trash: where closed sandboxes' folders wait to be deleted (see `removals`).
//!
//! A server's trash is `trash/<uuid>`, and the server holds a lock on `trash/<uuid>.lock` while
//! it runs; the kernel lets go of it when the process ends, however it ends. So a starting server
//! tells a gone server's trash (the lock is free) from a running one's (two servers may share a
//! home), and takes the lock while it empties it, so two starting servers never delete the same
//! tree at once.

use std::fs::File;
use std::path::{Path, PathBuf};

/// This server's trash.
pub struct Trash {
    dir: PathBuf,
    lock_path: PathBuf,
    _lock: File,
}

impl Trash {
    /// Makes a trash of this server's own under `root`.
    pub fn make(root: &Path) -> std::io::Result<Trash> {
        private_dir(root, true)?;
        let name = uuid::Uuid::new_v4().simple().to_string();
        let lock_path = root.join(format!("{name}.lock"));
        let lock = File::create(&lock_path)?;
        lock.try_lock().map_err(std::io::Error::other)?;
        let dir = root.join(name);
        private_dir(&dir, false)?;
        Ok(Trash {
            dir,
            lock_path,
            _lock: lock,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes the trash when it is empty (the end of a shutdown); a trash still holding
    /// something stays, for the next start.
    pub fn put_away(&self) {
        if std::fs::remove_dir(&self.dir).is_ok() {
            let _ = std::fs::remove_file(&self.lock_path);
        }
    }
}

/// A gone server's trash, locked by us while we delete it.
pub struct Stale {
    pub dir: PathBuf,
    lock_path: PathBuf,
    _lock: File,
}

impl Stale {
    /// The trash folders under `root` whose lock nobody holds: their servers are gone.
    pub fn find(root: &Path) -> Vec<Stale> {
        let Ok(rd) = std::fs::read_dir(root) else {
            return Vec::new();
        };
        rd.flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| {
                let lock_path = root.join(format!("{}.lock", e.file_name().to_string_lossy()));
                // A trash folder without its lock file is a gone server's too (it removed the
                // lock file, then stopped before the folder): the new lock file marks it ours.
                let lock = std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&lock_path)
                    .ok()?;
                lock.try_lock().ok()?;
                Some(Stale {
                    dir: e.path(),
                    lock_path,
                    _lock: lock,
                })
            })
            .collect()
    }

    /// Its folder is deleted: the lock file goes too.
    pub fn emptied(self) {
        let _ = std::fs::remove_file(&self.lock_path);
    }
}

/// A folder only this user may enter (what it holds was sandboxes' files).
fn private_dir(path: &Path, may_exist: bool) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(may_exist);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(path)
}
