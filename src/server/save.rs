//! Writing a sandbox's file into the user's folders for `save_file`: only inside the folders
//! `CODE_SANDBOX_SAVE_DIRS` names (never in the server's own home), decided after links and
//! `..` are resolved; never over a file unless asked; never half-written.
//!
//! The checked folder is opened once, from its save folder down without following a link
//! ([`Target`]), and everything after goes through that handle: a folder swapped for a link
//! while a large file is copied (by a sync client, or by a sandbox whose folders lie there)
//! cannot send the file elsewhere. The bytes are streamed into a file beside the destination,
//! which is then renamed into place (linked, when nothing may be replaced), so a full disk or
//! a crash leaves the old file as it was and no partial one, and memory does not grow with the
//! size or number of saves.

use std::path::{Component, Path, PathBuf};

use cap_std::fs::{Dir, OpenOptions};

use crate::host::names::{self, NameRules};
use crate::sandbox::SandboxError;

/// Largest file `save_file` copies out.
pub const MAX_SAVE: u64 = 512 << 20;

/// Windows' rules and a folding disk's, on every platform: a saved file should open as the
/// same file wherever the folder is synced or copied to.
const EVERYWHERE: NameRules = NameRules {
    windows: true,
    folds: true,
};

/// What was written.
#[derive(Debug)]
pub struct Saved {
    pub path: PathBuf,
    pub bytes: u64,
    pub replaced: bool,
}

/// Where a save goes: its folder, open, and the file's name there.
#[derive(Debug)]
pub struct Target {
    folder: Dir,
    /// The folder's path, as resolved when it was opened: what the answer names.
    shown: PathBuf,
    name: String,
}

/// The file a save is being written to, beside its destination; removed unless placed.
pub struct Aside {
    folder: Dir,
    name: String,
    pub file: std::fs::File,
    placed: bool,
}

impl Drop for Aside {
    fn drop(&mut self) {
        if !self.placed {
            let _ = self.folder.remove_file(&self.name);
        }
    }
}

fn refuse(why: String) -> SandboxError {
    SandboxError::InvalidArgument(why)
}

/// A path as the user writes it: Windows' long-path prefix (`\\?\`, which canonical paths
/// carry there) left off.
pub fn shown(p: &Path) -> String {
    let s = p.display().to_string();
    match s.strip_prefix(r"\\?\") {
        Some(rest) if rest.starts_with(r"UNC\") => format!(r"\\{}", &rest[4..]),
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') => rest.to_string(),
        _ => s,
    }
}

/// Why nothing can be saved when no folder is named.
pub fn off() -> SandboxError {
    refuse(
        "save_file is off: no folder is allowed. The user can name folders in CODE_SANDBOX_SAVE_DIRS (\"Folders Claude may save into\" in Claude Desktop)".into(),
    )
}

fn listed(roots: &[PathBuf]) -> String {
    roots.iter().map(|r| shown(r)).collect::<Vec<_>>().join(", ")
}

/// The file `destination` names, once its folder and any link are resolved, if it lies in
/// one of `roots` and outside `home` (the server's own folder; all canonical); else why not.
pub fn destination(destination: &str, roots: &[PathBuf], home: &Path) -> Result<Target, SandboxError> {
    let Some(first) = roots.first() else {
        return Err(off());
    };
    if destination.contains('\0') || destination.trim().is_empty() {
        return Err(refuse("the destination is empty or holds a NUL character".into()));
    }
    let given = Path::new(destination);
    // `C:name` is relative to a drive's current folder, which a server has no say in.
    if !given.is_absolute() && matches!(given.components().next(), Some(Component::Prefix(_))) {
        return Err(refuse(format!(
            "'{destination}' is relative to a drive's current folder; give a full path inside one of {}",
            listed(roots)
        )));
    }
    let full = if given.is_absolute() {
        given.to_path_buf()
    } else {
        first.join(given)
    };
    let name = match full.file_name().and_then(|n| n.to_str()) {
        // A verbatim Windows path (`\\?\C:\...`) takes `/` as part of a name.
        Some(n) if !n.contains(['/', '\\']) => n.to_string(),
        _ => return Err(refuse(format!("'{destination}' does not end in a file name"))),
    };
    names::check_component(&name, EVERYWHERE)
        .map_err(|e| refuse(format!("{e}; choose another file name")))?;
    let parent = full.parent().unwrap_or(Path::new(""));
    let folder = std::fs::canonicalize(parent).map_err(|e| {
        refuse(format!(
            "the folder '{}' cannot be used ({e}); save into a folder that exists inside {}",
            parent.display(),
            listed(roots)
        ))
    })?;
    let dir = open_inside(&folder, destination, roots, home)?;
    let name = existing_name(&dir, &folder, &name)?;
    match dir.symlink_metadata(&name) {
        Ok(md) if md.file_type().is_symlink() => through_link(&folder.join(&name), destination, roots, home),
        Ok(md) if md.is_dir() => Err(refuse(format!(
            "'{destination}' is a folder; name a file inside it (like '{}')",
            shown(&folder.join(&name).join("result.csv"))
        ))),
        Ok(md) if !md.is_file() => Err(refuse(format!("'{destination}' is not a regular file"))),
        _ => Ok(Target {
            folder: dir,
            shown: folder,
            name,
        }),
    }
}

/// `folder` (canonical), opened from the save folder that holds it one name at a time, never
/// through a link: what is opened is the folder that was checked, or nothing.
fn open_inside(
    folder: &Path,
    destination: &str,
    roots: &[PathBuf],
    home: &Path,
) -> Result<Dir, SandboxError> {
    let Some(root) = roots.iter().find(|r| folder.starts_with(r)) else {
        return Err(refuse(format!(
            "'{destination}' is outside the folders save_file may write into ({}). Save inside one of them, or ask the user to add the folder to CODE_SANDBOX_SAVE_DIRS",
            listed(roots)
        )));
    };
    if folder.starts_with(home) {
        return Err(refuse(format!(
            "'{destination}' is inside the server's own folder ({}), where sandboxes are kept; save somewhere else in {}",
            shown(home),
            listed(roots)
        )));
    }
    let changed = |e: std::io::Error| {
        refuse(format!(
            "the folder '{}' changed while it was being opened ({e}); nothing was written. Try again",
            shown(folder)
        ))
    };
    let mut dir = Dir::open_ambient_dir(root, cap_std::ambient_authority()).map_err(changed)?;
    for part in folder.strip_prefix(root).unwrap_or(Path::new("")).components() {
        if let Component::Normal(part) = part {
            let part = part.to_string_lossy();
            let opened = crate::host::open::open_read(&dir, &part, false).map_err(changed)?;
            if !opened.metadata().map_err(changed)?.is_dir() {
                return Err(changed(std::io::ErrorKind::NotADirectory.into()));
            }
            dir = Dir::from_std_file(opened.into_std());
        }
    }
    Ok(dir)
}

/// The name as the folder spells it; refused when it differs only in case (or Unicode form)
/// from a file already there that this disk takes for the same one.
fn existing_name(dir: &Dir, folder: &Path, name: &str) -> Result<String, SandboxError> {
    let Ok(entries) = dir.entries() else {
        return Ok(name.to_string());
    };
    let mut twin = None;
    for e in entries.flatten() {
        let other = e.file_name().to_string_lossy().into_owned();
        if other == name {
            return Ok(other);
        }
        if names::collide(&other, name, EVERYWHERE) {
            twin = Some(other);
        }
    }
    match twin {
        // On a disk that keeps both, the new name is a file of its own.
        Some(other) if dir.symlink_metadata(name).is_ok() => Err(refuse(format!(
            "'{name}' differs only in case from '{other}', already in {}, and this disk takes them for one file. Save as '{other}' (with overwrite: true to replace it) or choose another name",
            shown(folder)
        ))),
        _ => Ok(name.to_string()),
    }
}

fn through_link(
    link: &Path,
    destination: &str,
    roots: &[PathBuf],
    home: &Path,
) -> Result<Target, SandboxError> {
    let target = std::fs::canonicalize(link)
        .map_err(|e| refuse(format!("'{destination}' is a link that leads nowhere ({e})")))?;
    if !roots.iter().any(|r| target.starts_with(r)) {
        return Err(refuse(format!(
            "'{destination}' is a link to '{}', outside the folders save_file may write into ({})",
            shown(&target),
            listed(roots)
        )));
    }
    let (Some(folder), Some(name)) = (target.parent(), target.file_name()) else {
        return Err(refuse(format!("'{destination}' is a link to a folder's root")));
    };
    let dir = open_inside(folder, destination, roots, home)?;
    let name = name.to_string_lossy().into_owned();
    if !dir.symlink_metadata(&name).is_ok_and(|md| md.is_file()) {
        return Err(refuse(format!(
            "'{destination}' is a link to '{}', which is not a file",
            shown(&target)
        )));
    }
    Ok(Target {
        folder: dir,
        shown: folder.to_path_buf(),
        name,
    })
}

impl Target {
    /// The file, as the answer names it.
    pub fn path(&self) -> PathBuf {
        self.shown.join(&self.name)
    }

    fn exists(&self) -> bool {
        self.folder.symlink_metadata(&self.name).is_ok()
    }

    fn already_there(&self, when: &str) -> SandboxError {
        refuse(format!(
            "'{}' {when} and was left as it is. Pass overwrite: true to replace it, or choose another name",
            shown(&self.path())
        ))
    }

    fn failed(&self, replaced: bool) -> impl Fn(std::io::Error) -> SandboxError + '_ {
        move |e| SandboxError::Io {
            context: format!(
                "could not save '{}' (nothing was changed{})",
                shown(&self.path()),
                if replaced {
                    ": the file there is as it was"
                } else {
                    ""
                }
            ),
            source: e,
        }
    }

    /// Starts the save: a new file beside the destination, in the folder opened. Refused at
    /// once when the destination is there and may not be replaced, before anything is copied.
    pub fn begin(&self, overwrite: bool) -> Result<Aside, SandboxError> {
        if !overwrite && self.exists() {
            return Err(self.already_there("already exists"));
        }
        let failed = self.failed(overwrite && self.exists());
        let folder = self.folder.try_clone().map_err(&failed)?;
        let name = format!(".saving-{}", uuid::Uuid::new_v4().simple());
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        let file = folder.open_with(&name, &opts).map_err(&failed)?.into_std();
        Ok(Aside {
            folder,
            name,
            file,
            placed: false,
        })
    }

    /// A copy into the file beside the destination that failed (a full disk, the source gone):
    /// said as a save that changed nothing.
    pub fn copy_failed(&self, e: SandboxError, overwrite: bool) -> SandboxError {
        match e {
            SandboxError::Io { source, .. } => self.failed(overwrite && self.exists())(source),
            e => e,
        }
    }

    /// Moves `aside`, holding `bytes`, into place: over the old file (which lends it its
    /// permissions) when `overwrite`, else only if the name is still free.
    pub fn finish(&self, mut aside: Aside, overwrite: bool, bytes: u64) -> Result<Saved, SandboxError> {
        let replaced = self.exists();
        if replaced && !overwrite {
            return Err(self.already_there("appeared while saving"));
        }
        let failed = self.failed(replaced);
        aside.file.sync_all().map_err(&failed)?;
        if replaced
            && let Ok(old) = crate::host::open::open_read(&self.folder, &self.name, false)
            && let Ok(md) = old.into_std().metadata()
        {
            aside.file.set_permissions(md.permissions()).map_err(&failed)?;
        }
        if overwrite {
            self.folder
                .rename(&aside.name, &self.folder, &self.name)
                .map_err(&failed)?;
            aside.placed = true;
        } else {
            // A second name for the file, which fails if the name was taken meanwhile; the
            // first goes with `aside`.
            match self.folder.hard_link(&aside.name, &self.folder, &self.name) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(self.already_there("appeared while saving"));
                }
                // A disk without hard links (FAT, some shares): checked, then renamed.
                Err(_) if !self.exists() => {
                    self.folder
                        .rename(&aside.name, &self.folder, &self.name)
                        .map_err(&failed)?;
                    aside.placed = true;
                }
                Err(_) => return Err(self.already_there("appeared while saving")),
            }
        }
        Ok(Saved {
            path: self.written_at(),
            bytes,
            replaced,
        })
    }

    /// Where the file now is: the opened folder's path as the system names it now (moved
    /// while the file was written, it is not where it was checked), else the checked path.
    fn written_at(&self) -> PathBuf {
        let now = self
            .folder
            .try_clone()
            .ok()
            .and_then(|d| crate::host::open::path_of(&d.into_std_file()));
        now.unwrap_or_else(|| self.shown.clone()).join(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn folder(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("save-unit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::canonicalize(d).unwrap()
    }

    fn nowhere() -> PathBuf {
        std::env::temp_dir().join("save-unit-no-home")
    }

    fn save(target: &Target, bytes: &[u8], overwrite: bool) -> Result<Saved, SandboxError> {
        let mut aside = target.begin(overwrite)?;
        aside.file.write_all(bytes).unwrap();
        target.finish(aside, overwrite, bytes.len() as u64)
    }

    #[test]
    fn paths_are_shown_without_the_long_path_prefix() {
        assert_eq!(shown(Path::new(r"\\?\C:\Users\me")), r"C:\Users\me");
        assert_eq!(shown(Path::new(r"\\?\UNC\host\share\x")), r"\\host\share\x");
        assert_eq!(shown(Path::new("/home/me")), "/home/me");
    }

    #[test]
    fn names_windows_refuses_are_refused_everywhere() {
        let root = folder("names");
        for bad in ["CON", "nul.txt", "a:b", "what?.csv", "trailing.", "com1.csv"] {
            let path = format!("{}{}{bad}", root.display(), std::path::MAIN_SEPARATOR);
            let err = destination(&path, std::slice::from_ref(&root), &nowhere())
                .unwrap_err()
                .to_string();
            assert!(err.contains("choose another file name"), "{bad}: {err}");
        }
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn nothing_is_replaced_unless_asked_and_nothing_is_left_aside() {
        let root = folder("replace");
        let target = destination("out.csv", std::slice::from_ref(&root), &nowhere()).unwrap();
        assert_eq!(target.path(), root.join("out.csv"));
        assert!(!save(&target, b"one", false).unwrap().replaced);
        let err = save(&target, b"two", false).unwrap_err().to_string();
        assert!(err.contains("overwrite: true"), "{err}");
        assert_eq!(std::fs::read(root.join("out.csv")).unwrap(), b"one");
        assert!(save(&target, b"three", true).unwrap().replaced);
        assert_eq!(std::fs::read(root.join("out.csv")).unwrap(), b"three");
        // A save begun and dropped (its copy failed) leaves nothing.
        drop(target.begin(true).unwrap());
        let names: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn the_servers_own_folder_is_never_a_destination() {
        let root = folder("home");
        let home = root.join("server-home");
        std::fs::create_dir_all(home.join("sandboxes")).unwrap();
        let inside = home.join("sandboxes").join("x.txt");
        let err = destination(inside.to_str().unwrap(), std::slice::from_ref(&root), &home)
            .unwrap_err()
            .to_string();
        assert!(err.contains("server's own folder"), "{err}");
        let _ = std::fs::remove_dir_all(root);
    }
}
