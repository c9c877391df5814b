//! The host folders the settings name for the file tools: what `upload_file` may read, what
//! sandboxes read in place, what `save_file` may write into. Each list is canonical, so the
//! prefix checks made on it later are exact.

use std::path::PathBuf;

use super::Settings;

impl Settings {
    /// Host folders `upload_file` may read from, canonicalised so later prefix checks are exact.
    pub fn upload_roots(&self) -> Vec<PathBuf> {
        folder_list(self.upload_dirs.as_deref(), &self.upload_dir)
    }

    /// Host folders sandboxes read in place, canonicalised; one that does not exist is left
    /// out (and said in the log).
    pub fn read_roots(&self) -> Vec<PathBuf> {
        folder_list(self.read_dirs.as_deref(), &self.read_dir)
    }

    /// Host folders `save_file` may write into, canonicalised.
    pub fn save_roots(&self) -> Vec<PathBuf> {
        folder_list(self.save_dirs.as_deref(), &self.save_dir)
    }
}

/// A setting's folders (the platform's path-list separator) and a flag's, canonical; a folder
/// that cannot be found is logged and left out, so it grants nothing.
fn folder_list(listed: Option<&str>, flags: &[PathBuf]) -> Vec<PathBuf> {
    let sep = if cfg!(windows) { ';' } else { ':' };
    listed
        .unwrap_or("")
        .split(sep)
        .map(|s| PathBuf::from(s.trim()))
        .chain(flags.iter().cloned())
        .filter(|p| !p.as_os_str().is_empty())
        .filter_map(|p| match std::fs::canonicalize(&p) {
            Ok(c) if c.is_dir() => Some(c),
            Ok(_) => {
                tracing::warn!(
                    "'{}' is not a folder; it is left out of the allowed folders",
                    p.display()
                );
                None
            }
            Err(e) => {
                tracing::warn!(
                    "the folder '{}' is left out of the allowed folders: {e}",
                    p.display()
                );
                None
            }
        })
        .collect()
}
