//! The runtime as an MCP Bundle ships it: unpacked beside the binary and used where it lies,
//! so a first start copies nothing into `CODE_SANDBOX_HOME` and unpacks nothing.
//!
//! The bundle's folder is not ours: an update, a disk error or a hand may have changed it since
//! it was unpacked. So its two pinned files are hashed at every start (in parallel; about half
//! a second), and anything that does not match is never used.

use std::path::{Path, PathBuf};

use super::{Layout, Manifest, RuntimeError, RuntimeFiles, file_digest};

/// Where a bundle keeps the runtime (and its compiled module), relative to the binary.
pub const BUNDLED_RUNTIME_DIR: &str = "runtime";

/// A file or folder shipped beside the running binary (an MCP Bundle puts the runtime and the
/// wheel cache there), if there is one. Whatever is found is still verified before use.
pub fn beside_binary(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    let path = exe.parent()?.join(name);
    path.exists().then_some(path)
}

/// The bundle's runtime folder, if this binary was shipped with one.
pub fn bundled_dir(m: &Manifest) -> Option<PathBuf> {
    let root = beside_binary(BUNDLED_RUNTIME_DIR)?.parent()?.to_path_buf();
    let dir = Layout::new(root).runtime_dir(m);
    dir.is_dir().then_some(dir)
}

/// The runtime shipped beside the binary, checked: `None` when there is none, an error when it
/// is incomplete or does not match the pins.
pub fn bundled(m: &Manifest) -> Option<Result<RuntimeFiles, RuntimeError>> {
    let dir = bundled_dir(m)?;
    // `runtime_dir` is `<root>/runtime/<name>-<version>`: a Layout rooted two levels up reads
    // it exactly as it reads an install in the home, marker included.
    let root = dir.parent()?.parent()?;
    let Some(files) = Layout::new(root).installed(m) else {
        return Some(Err(RuntimeError::Incomplete { dir }));
    };
    let stdlib = files.lib_dir.join(&m.artifacts.stdlib_guest_name);
    let checks = [
        (files.module.as_path(), m.artifacts.module_sha256.as_str()),
        (stdlib.as_path(), m.artifacts.stdlib_sha256.as_str()),
    ];
    let found = std::thread::scope(|s| {
        let hashing: Vec<_> = checks
            .iter()
            .map(|&(path, _)| s.spawn(move || file_digest(path)))
            .collect();
        hashing
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(RuntimeError::BadArchive("hashing panicked".into())))
            })
            .collect::<Vec<_>>()
    });
    for ((path, pinned), found) in checks.iter().zip(found) {
        match found {
            Ok((sha, _)) if sha == *pinned => {}
            Ok((sha, size)) => return Some(Err(mismatch(path, pinned, sha, size))),
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(files))
}

fn mismatch(path: &Path, pinned: &str, found_sha: String, found_size: u64) -> RuntimeError {
    RuntimeError::Altered {
        path: path.to_path_buf(),
        expected_sha: pinned.to_string(),
        found_sha,
        found_size,
    }
}
