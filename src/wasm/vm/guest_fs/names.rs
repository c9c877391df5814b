//! The guest's names against the host's file system (`crate::host::names` has the rules): a
//! name Windows would take for a device, a stream or another name is refused with `EINVAL`;
//! where the host folds case and normalization (Windows, macOS), creating a name whose twin
//! exists is `EEXIST` and removing a name that exists only as a twin is `ENOENT`, as on Linux,
//! so `A.txt` written after `a.txt` never replaces it and deleting `A.txt` never deletes
//! `a.txt`. Only watched folders (the workspace and /tmp) are checked.

use cap_std::fs::Dir;

use super::errno::{EXIST, INVAL, IO, NAMETOOLONG, NOENT};
use crate::host::names::{NameRules, check_path, collide};

/// What a call does with the name it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Opens what is there.
    Open,
    /// Creates the name (or replaces what it names).
    Create,
    /// Removes or renames away what it names.
    Remove,
}

/// The errno refusing `path` under `dir`, if the host would take it for something else.
pub fn refusal(dir: &Dir, path: &str, use_: Use, rules: NameRules) -> Option<i32> {
    if check_path(path, rules).is_err() {
        return Some(INVAL);
    }
    if !rules.folds || use_ == Use::Open {
        return None;
    }
    let (parent, name) = match path.trim_end_matches('/').rsplit_once('/') {
        Some((p, n)) => (p, n),
        None => ("", path.trim_end_matches('/')),
    };
    let listed = if parent.is_empty() {
        dir.entries()
    } else {
        dir.read_dir(parent)
    };
    let Ok(entries) = listed else { return None };
    let mut twin = false;
    for e in entries.flatten() {
        let n = e.file_name();
        let n = n.to_string_lossy();
        if n == name {
            return None;
        }
        twin |= collide(&n, name, rules);
    }
    match (twin, use_) {
        (true, Use::Create) => Some(EXIST),
        (true, Use::Remove) => Some(NOENT),
        _ => None,
    }
}

/// `rc` from a call on `path` under `dir`, with an I/O error the host gave only because it
/// could not spell out the folder's full name said as the path being too long (see
/// [`crate::host::open::name_too_long`]).
pub fn explained(dir: &Dir, path: &str, rc: i32) -> i32 {
    if rc != IO {
        return rc;
    }
    let parent = path.trim_end_matches('/').rsplit_once('/').map_or("", |(p, _)| p);
    if crate::host::open::name_too_long(dir, parent) {
        NAMETOOLONG
    } else {
        rc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    const FOLDING: NameRules = NameRules {
        windows: true,
        folds: true,
    };

    #[test]
    fn twins_are_refused_where_names_fold_and_left_alone_where_they_do_not() {
        let tmp = std::env::temp_dir().join(format!("names-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(tmp.join("sub")).expect("mkdir");
        std::fs::write(tmp.join("sub/a.txt"), "a").expect("write");
        let dir = Dir::open_ambient_dir(&tmp, ambient_authority()).expect("open");
        assert_eq!(refusal(&dir, "sub/A.txt", Use::Create, FOLDING), Some(EXIST));
        assert_eq!(refusal(&dir, "sub/A.txt", Use::Remove, FOLDING), Some(NOENT));
        assert_eq!(
            refusal(&dir, "sub/a.txt", Use::Create, FOLDING),
            None,
            "its own name"
        );
        assert_eq!(refusal(&dir, "sub/b.txt", Use::Create, FOLDING), None);
        assert_eq!(
            refusal(&dir, "sub/A.txt", Use::Create, NameRules::EXACT),
            None,
            "Linux"
        );
        assert_eq!(refusal(&dir, "sub/NUL.txt", Use::Open, FOLDING), Some(INVAL));
        assert_eq!(refusal(&dir, "sub/NUL.txt", Use::Open, NameRules::EXACT), None);
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
