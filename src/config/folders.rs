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

    /// Host folders `save_file` may write into that exist, canonicalised, in the order named.
    pub fn save_roots(&self) -> Vec<PathBuf> {
        self.save_folders()
            .into_iter()
            .filter_map(|f| match f {
                SaveFolder::Present(p) => Some(p),
                SaveFolder::Missing { .. } => None,
            })
            .collect()
    }

    /// Every folder `save_file` may write into, in the order named: those there, and those to
    /// be made on the first save. A user names a results folder before anything was saved,
    /// so one not made yet still turns `save_file` on.
    pub fn save_folders(&self) -> Vec<SaveFolder> {
        named(self.save_dirs.as_deref(), &self.save_dir)
            .into_iter()
            .filter_map(|p| match std::fs::canonicalize(&p) {
                Ok(c) if c.is_dir() => Some(SaveFolder::Present(c)),
                Ok(_) => None,
                Err(_) => Some(SaveFolder::missing(p)),
            })
            .collect()
    }

    /// Says once, at start, what becomes of each save folder that is not there.
    pub fn log_save_folders(&self) {
        for f in self.save_folders() {
            match f {
                SaveFolder::Present(_) => {}
                SaveFolder::Missing {
                    named,
                    parent: Some(_),
                } => tracing::info!(
                    "CODE_SANDBOX_SAVE_DIRS: '{}' does not exist yet; it is made on the first save into it",
                    named.display()
                ),
                SaveFolder::Missing { named, parent: None } => tracing::warn!(
                    "CODE_SANDBOX_SAVE_DIRS: '{}' does not exist, nor does the folder that would hold it; saves into it fail until the user makes it",
                    named.display()
                ),
            }
        }
    }

    /// The server's own folder as the allowed folders are named (canonical, as far as it
    /// exists yet), for the checks that keep it out of them.
    pub fn home_canonical(&self) -> PathBuf {
        let home = self.home_dir();
        let mut existing = home.as_path();
        let mut rest = Vec::new();
        while let Some(parent) = existing.parent() {
            if let Ok(c) = std::fs::canonicalize(existing) {
                return rest.iter().rev().fold(c, |p: PathBuf, part| p.join(part));
            }
            rest.extend(existing.file_name());
            existing = parent;
        }
        home
    }

    /// Refuses a folder the settings share that lies inside the server's own folder, which
    /// holds every sandbox's files (and a team server's tokens): sandboxes and the file tools
    /// would reach one another's. A folder that *holds* the server's folder is fine: that part
    /// of it is hidden (the log says so).
    pub fn folders_outside_home(&self) -> Result<(), String> {
        let home = self.home_canonical();
        // A save folder not made yet is checked where it would be made.
        let saves = self.save_folders().into_iter().filter_map(|f| match f {
            SaveFolder::Present(p) => Some(p),
            missing => missing.would_be(),
        });
        let lists = [
            ("CODE_SANDBOX_READ_DIRS", self.read_roots()),
            ("CODE_SANDBOX_SAVE_DIRS", saves.collect()),
            ("CODE_SANDBOX_UPLOAD_DIRS", self.upload_roots()),
        ];
        for (setting, roots) in lists {
            for root in roots {
                if root.starts_with(&home) {
                    return Err(format!(
                        "{setting} names {}, inside this server's own folder {} (CODE_SANDBOX_HOME), which holds every sandbox's files: sandboxes could reach one another's. Name a folder outside it, or move the server's folder with CODE_SANDBOX_HOME",
                        root.display(),
                        home.display()
                    ));
                }
                if home.starts_with(&root) {
                    tracing::info!(
                        "{setting}: {} holds this server's own folder {}; nothing in that folder can be opened through it",
                        root.display(),
                        home.display()
                    );
                }
            }
        }
        Ok(())
    }
}

/// A folder `save_file` may write into, as the settings name it.
#[derive(Clone, Debug, PartialEq)]
pub enum SaveFolder {
    /// There, canonical.
    Present(PathBuf),
    /// Not there yet: `named` absolute; `parent` the canonical folder that would hold it, when
    /// that exists (then it is made on the first save into it).
    Missing { named: PathBuf, parent: Option<PathBuf> },
}

impl SaveFolder {
    fn missing(p: PathBuf) -> SaveFolder {
        let named = std::path::absolute(&p).unwrap_or(p);
        let parent = named
            .parent()
            .and_then(|d| std::fs::canonicalize(d).ok())
            .filter(|d| d.is_dir());
        SaveFolder::Missing { named, parent }
    }

    /// Where a folder not made yet would be, canonical (its parent is).
    pub fn would_be(&self) -> Option<PathBuf> {
        match self {
            SaveFolder::Missing {
                named,
                parent: Some(parent),
            } => Some(parent.join(named.file_name()?)),
            _ => None,
        }
    }
}

/// A setting's folders (the platform's path-list separator) and a flag's, as named.
fn named(listed: Option<&str>, flags: &[PathBuf]) -> Vec<PathBuf> {
    let sep = if cfg!(windows) { ';' } else { ':' };
    listed
        .unwrap_or("")
        .split(sep)
        .map(|s| PathBuf::from(s.trim()))
        .chain(flags.iter().cloned())
        .filter(|p| !p.as_os_str().is_empty())
        .collect()
}

/// A setting's folders and a flag's, canonical; a folder that cannot be found is logged and
/// left out, so it grants nothing.
fn folder_list(listed: Option<&str>, flags: &[PathBuf]) -> Vec<PathBuf> {
    named(listed, flags)
        .into_iter()
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
