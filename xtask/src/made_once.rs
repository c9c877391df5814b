//! A folder made from a pinned list, once (npm's `node_modules` from its lock file, a venv from
//! `requirements.txt`, a folder of wheels): a stamp inside it holds the SHA-256 of the list it
//! was made from, so a later call knows it is current without running anything, and a lock
//! file beside the list makes parallel tests and processes make it once while the rest wait.

use std::fs::File;
use std::path::Path;

use sha2::{Digest, Sha256};

/// Runs `make` unless `stamp` already holds the SHA-256 of `list`, then writes the stamp.
/// `lock` is taken first; `io` turns a file error at `path` into the caller's error.
pub fn made_once<E>(
    lock: &Path,
    stamp: &Path,
    list: &[u8],
    io: &dyn Fn(&Path, std::io::Error) -> E,
    make: impl FnOnce() -> Result<(), E>,
) -> Result<(), E> {
    let want = hex::encode(Sha256::digest(list));
    let current = || std::fs::read_to_string(stamp).is_ok_and(|s| s.trim() == want);
    if current() {
        return Ok(());
    }
    let guard = File::create(lock).map_err(|e| io(lock, e))?;
    guard.lock().map_err(|e| io(lock, e))?;
    if current() {
        return Ok(());
    }
    // A stamp left from an older list must not outlive a make that fails.
    let _ = std::fs::remove_file(stamp);
    make()?;
    std::fs::write(stamp, &want).map_err(|e| io(stamp, e))
}
