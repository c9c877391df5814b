//! The throwaway folder a warm-up runs in: removed however the build ends (finished, failed,
//! or cut off at shutdown with its future dropped), and ones a killed process left are swept
//! before a new build.

use std::path::PathBuf;

use crate::runtime::Layout;

/// A throwaway folder for a warm-up, removed however the build ends: finished, failed, or
/// cut off at shutdown (the future dropped mid-way).
pub(super) struct BuildDir(pub(super) PathBuf);

/// A warm-up folder this old belongs to no build still going (a build takes minutes): its
/// process was killed, and the folder is removed.
const STALE_BUILD: std::time::Duration = std::time::Duration::from_secs(3600);

impl BuildDir {
    /// A new folder, after removing those that killed processes left.
    pub(super) fn new(layout: &Layout) -> BuildDir {
        if let Ok(entries) = std::fs::read_dir(layout.scratch_dir()) {
            for e in entries.flatten() {
                let stale = e.file_name().to_string_lossy().starts_with("warm-build-")
                    && e.metadata()
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > STALE_BUILD);
                if stale {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        BuildDir(
            layout
                .scratch_dir()
                .join(format!("warm-build-{}", uuid::Uuid::new_v4().simple())),
        )
    }
}

impl Drop for BuildDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
