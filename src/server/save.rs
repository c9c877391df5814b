//! Writing a sandbox's file into the user's folders for `save_file`: only inside the folders
//! `CODE_SANDBOX_SAVE_DIRS` names, decided after links and `..` are resolved; never over a
//! file unless asked; never half-written. The bytes go to a file beside the destination that
//! is renamed into place (linked, when nothing may be replaced), so a full disk or a crash
//! leaves the old file as it was and no partial one.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::guest_names::{self, NameRules};
use crate::sandbox::SandboxError;

/// Largest file `save_file` copies out (it passes through the server's memory once).
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

fn listed(roots: &[PathBuf]) -> String {
    roots.iter().map(|r| shown(r)).collect::<Vec<_>>().join(", ")
}

/// The file `destination` names, once its folder and any link are resolved, if it lies in
/// one of `roots` (canonical); else why not.
pub fn destination(destination: &str, roots: &[PathBuf]) -> Result<PathBuf, SandboxError> {
    let Some(first) = roots.first() else {
        return Err(refuse(
            "save_file is off: no folder is allowed. The user can name folders in CODE_SANDBOX_SAVE_DIRS (\"Folders Claude may save into\" in Claude Desktop)".into(),
        ));
    };
    if destination.contains('\0') || destination.trim().is_empty() {
        return Err(refuse("the destination is empty or holds a NUL character".into()));
    }
    let given = Path::new(destination);
    // `C:name` is relative to a drive's current folder, which a server has no say in.
    if !given.is_absolute() && matches!(given.components().next(), Some(std::path::Component::Prefix(_))) {
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
        Some(n) => n.to_string(),
        None => return Err(refuse(format!("'{destination}' does not end in a file name"))),
    };
    guest_names::check_component(&name, EVERYWHERE)
        .map_err(|e| refuse(format!("{e}; choose another file name")))?;
    let parent = full.parent().unwrap_or(Path::new(""));
    let folder = std::fs::canonicalize(parent).map_err(|e| {
        refuse(format!(
            "the folder '{}' cannot be used ({e}); save into a folder that exists inside {}",
            parent.display(),
            listed(roots)
        ))
    })?;
    let inside = |p: &Path| roots.iter().any(|r| p.starts_with(r));
    if !inside(&folder) {
        return Err(refuse(format!(
            "'{destination}' is outside the folders save_file may write into ({}). Save inside one of them, or ask the user to add the folder to CODE_SANDBOX_SAVE_DIRS",
            listed(roots)
        )));
    }
    let target = existing_name(&folder, &name)?;
    let path = folder.join(&target);
    match std::fs::symlink_metadata(&path) {
        Ok(md) if md.file_type().is_symlink() => through_link(&path, destination, &inside, roots),
        Ok(md) if md.is_dir() => Err(refuse(format!(
            "'{destination}' is a folder; name a file inside it (like '{}')",
            shown(&path.join("result.csv"))
        ))),
        Ok(md) if !md.is_file() => Err(refuse(format!("'{destination}' is not a regular file"))),
        _ => Ok(path),
    }
}

/// The name as the folder spells it; refused when it differs only in case (or Unicode form)
/// from a file already there that this disk takes for the same one.
fn existing_name(folder: &Path, name: &str) -> Result<String, SandboxError> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Ok(name.to_string());
    };
    let mut twin = None;
    for e in entries.flatten() {
        let other = e.file_name().to_string_lossy().into_owned();
        if other == name {
            return Ok(other);
        }
        if guest_names::collide(&other, name, EVERYWHERE) {
            twin = Some(other);
        }
    }
    match twin {
        // On a disk that keeps both, the new name is a file of its own.
        Some(other) if std::fs::symlink_metadata(folder.join(name)).is_ok() => Err(refuse(format!(
            "'{name}' differs only in case from '{other}', already in {}, and this disk takes them for one file. Save as '{other}' (with overwrite: true to replace it) or choose another name",
            shown(folder)
        ))),
        _ => Ok(name.to_string()),
    }
}

fn through_link(
    link: &Path,
    destination: &str,
    inside: &dyn Fn(&Path) -> bool,
    roots: &[PathBuf],
) -> Result<PathBuf, SandboxError> {
    let target = std::fs::canonicalize(link)
        .map_err(|e| refuse(format!("'{destination}' is a link that leads nowhere ({e})")))?;
    if !inside(&target) {
        return Err(refuse(format!(
            "'{destination}' is a link to '{}', outside the folders save_file may write into ({})",
            shown(&target),
            listed(roots)
        )));
    }
    if !target.is_file() {
        return Err(refuse(format!(
            "'{destination}' is a link to '{}', which is not a file",
            shown(&target)
        )));
    }
    Ok(target)
}

/// Writes `bytes` to `path` (from [`destination`]) beside it first, then into place.
pub fn write(path: &Path, bytes: &[u8], overwrite: bool) -> Result<Saved, SandboxError> {
    let replaced = path.exists();
    if replaced && !overwrite {
        return Err(refuse(format!(
            "'{}' already exists and was left as it is. Pass overwrite: true to replace it, or choose another name",
            shown(path)
        )));
    }
    let folder = path.parent().unwrap_or(Path::new("."));
    let failed = |e: std::io::Error| SandboxError::Io {
        context: format!(
            "could not save '{}' (nothing was changed{})",
            shown(path),
            if replaced {
                ": the file there is as it was"
            } else {
                ""
            }
        ),
        source: e,
    };
    let mut aside = tempfile::Builder::new()
        .prefix(".saving-")
        .tempfile_in(folder)
        .map_err(failed)?;
    aside.write_all(bytes).map_err(failed)?;
    aside.as_file().sync_all().map_err(failed)?;
    ordinary_permissions(aside.as_file(), replaced.then_some(path)).map_err(failed)?;
    let placed = match overwrite {
        true => aside.persist(path),
        false => aside.persist_noclobber(path),
    };
    placed.map_err(|e| match e.error.kind() {
        std::io::ErrorKind::AlreadyExists => refuse(format!(
            "'{}' appeared while saving and was left as it is. Pass overwrite: true to replace it",
            shown(path)
        )),
        _ => failed(e.error),
    })?;
    Ok(Saved {
        path: path.to_path_buf(),
        bytes: bytes.len() as u64,
        replaced,
    })
}

/// A saved file gets the permissions of the one it replaces, else the usual ones for a new
/// file (the file beside it was made private to the server's user).
fn ordinary_permissions(file: &std::fs::File, replacing: Option<&Path>) -> std::io::Result<()> {
    if let Some(old) = replacing.and_then(|p| std::fs::metadata(p).ok()) {
        return file.set_permissions(old.permissions());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("save-unit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::canonicalize(d).unwrap()
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
            let err = destination(&path, std::slice::from_ref(&root))
                .unwrap_err()
                .to_string();
            assert!(err.contains("choose another file name"), "{bad}: {err}");
        }
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn nothing_is_replaced_unless_asked_and_nothing_is_left_aside() {
        let root = folder("replace");
        let path = destination("out.csv", std::slice::from_ref(&root)).unwrap();
        assert_eq!(path, root.join("out.csv"));
        assert!(!write(&path, b"one", false).unwrap().replaced);
        let err = write(&path, b"two", false).unwrap_err().to_string();
        assert!(err.contains("overwrite: true"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"one");
        assert!(write(&path, b"three", true).unwrap().replaced);
        assert_eq!(std::fs::read(&path).unwrap(), b"three");
        let names: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let _ = std::fs::remove_dir_all(root);
    }
}
