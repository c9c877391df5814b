//! Deleting a sandbox's folders, whatever tree the guest built in them.
//!
//! `std::fs::remove_dir_all` recurses once per level and holds a descriptor per level, so a
//! guest that nests folders a few thousand deep (cheap with renames) overflows a worker
//! thread's stack, which aborts the whole server, or runs out of descriptors and leaves the
//! tree behind. This walk keeps one descriptor for the folder it is in and climbs back with
//! `..`, which is sound because nothing else changes the tree meanwhile: the guest's Store is
//! dropped before its folders are removed. Links are removed, never followed (every open is
//! `O_NOFOLLOW`). The call stack stays flat; what is still to visit lives on the heap, one name
//! per folder, bounded by what the disk quota let the guest create.

use std::io;
use std::path::Path;

/// Removes `path` and everything below it. A missing path is not an error.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    remove_tree_unless(path, &|| false)
}

/// [`remove_tree`], giving up (`Interrupted`) as soon as `stop` says so: a server that is
/// shutting down leaves the rest of a deep tree to the next start rather than be killed for it.
pub fn remove_tree_unless(path: &Path, stop: &dyn Fn() -> bool) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(md) if !md.is_dir() => return std::fs::remove_file(path),
        Ok(_) => {}
    }
    imp::empty_folder(path, stop)?;
    match imp::remove_dir(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Removes everything below `path`, keeping the folder itself.
pub fn empty_folder(path: &Path) -> io::Result<()> {
    imp::empty_folder(path, &|| false)
}

fn stopped() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "the deletion was stopped")
}

#[cfg(unix)]
mod imp {
    use super::*;
    use rustix::fs::{AtFlags, CWD, Mode, OFlags, openat, unlinkat};
    use rustix::io::Errno;
    use std::ffi::{CString, OsString};
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::ffi::{OsStrExt, OsStringExt};

    pub fn remove_dir(path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }

    fn open_dir_at<Fd: AsFd>(dir: Fd, name: &[u8]) -> io::Result<OwnedFd> {
        let c = CString::new(name)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a name holds a NUL byte"))?;
        Ok(openat(
            dir,
            c.as_c_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }

    /// Deletes every non-folder entry and every empty folder of `dir`; returns the names of
    /// the folders that still hold something.
    fn sweep(dir: &OwnedFd) -> io::Result<Vec<OsString>> {
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::read_from(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(OsString::from_vec(name.to_vec()));
            }
        }
        let mut full = Vec::new();
        for name in names {
            let c =
                CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            match unlinkat(dir, c.as_c_str(), AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => continue,
                // `unlink` of a folder: EISDIR on Linux, EPERM on macOS.
                Err(Errno::ISDIR) | Err(Errno::PERM) => {}
                Err(e) => return Err(e.into()),
            }
            match unlinkat(dir, c.as_c_str(), AtFlags::REMOVEDIR) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(Errno::NOTEMPTY) | Err(Errno::EXIST) => full.push(name),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(full)
    }

    fn cname(name: &OsString) -> io::Result<CString> {
        CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    }

    pub fn empty_folder(path: &Path, stop: &dyn Fn() -> bool) -> io::Result<()> {
        let mut cur = open_dir_at(CWD, path.as_os_str().as_bytes())?;
        // One level per folder from the root down to the current one: the name it has in its
        // parent (none for the root) and its folders still to empty.
        let mut pending: Vec<(Option<OsString>, Vec<OsString>)> = vec![(None, sweep(&cur)?)];
        while let Some((_, todo)) = pending.last_mut() {
            if stop() {
                return Err(stopped());
            }
            match todo.pop() {
                Some(name) => match open_dir_at(&cur, name.as_bytes()) {
                    Ok(child) => {
                        cur = child;
                        let inside = sweep(&cur)?;
                        pending.push((Some(name), inside));
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    // Not a folder after all (a link): remove the name itself.
                    Err(_) => unlinkat(&cur, cname(&name)?.as_c_str(), AtFlags::empty())?,
                },
                None => {
                    // This folder is empty now: climb to its parent and remove it there.
                    let Some((Some(name), _)) = pending.pop() else {
                        break;
                    };
                    cur = open_dir_at(&cur, b"..")?;
                    match unlinkat(&cur, cname(&name)?.as_c_str(), AtFlags::REMOVEDIR) {
                        Ok(()) | Err(Errno::NOENT) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(not(unix))]
mod imp {
    use super::*;

    /// A folder whose last entries were just deleted: Windows (and Wine) keep an entry some
    /// other handle still holds as "delete pending" for a moment (see `host::retry`).
    pub use crate::host::retry::remove_dir;

    /// Windows' `remove_dir_all` walks handles without recursing on the call stack, and
    /// removes a link (a symlink or junction) without following it. A link to a folder is
    /// removed as a folder, which Windows requires.
    pub fn empty_folder(path: &Path, stop: &dyn Fn() -> bool) -> io::Result<()> {
        for entry in std::fs::read_dir(path)? {
            if stop() {
                return Err(stopped());
            }
            let entry = entry?;
            let kind = entry.file_type()?;
            let p = entry.path();
            if kind.is_dir() {
                empty_folder(&p, stop)?;
                remove_dir(&p)?;
            } else if !kind.is_symlink() {
                crate::host::retry::remove_file(&p)?;
            } else if std::fs::remove_file(&p).is_err() {
                remove_dir(&p)?;
            }
        }
        Ok(())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::{remove_tree, remove_tree_unless};

    fn scratch(name: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("remove-tree-{name}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    #[test]
    fn removes_a_tree_far_deeper_than_the_stack_or_descriptors_allow() {
        let root = scratch("deep");
        // 20,000 levels, built with relative steps (the full path is far over PATH_MAX).
        let keep = std::env::current_dir().unwrap();
        let mut dir = std::fs::File::open(&root).unwrap();
        for i in 0..20_000 {
            use std::os::unix::io::AsRawFd;
            let name = std::ffi::CString::new(format!("d{}", i % 7)).unwrap();
            unsafe {
                assert_eq!(libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o700), 0);
                let fd = libc::openat(dir.as_raw_fd(), name.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
                assert!(fd >= 0);
                if i % 1000 == 0 {
                    let f = std::ffi::CString::new("file").unwrap();
                    let ffd = libc::openat(fd, f.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o600);
                    libc::close(ffd);
                }
                use std::os::unix::io::FromRawFd;
                dir = std::fs::File::from_raw_fd(fd);
            }
        }
        drop(dir);
        assert_eq!(std::env::current_dir().unwrap(), keep);
        // Run on a small thread stack, as a worker thread would.
        let r = root.clone();
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || remove_tree(&r))
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        assert!(!root.exists());
    }

    #[test]
    fn a_stopped_deletion_ends_at_once_and_leaves_the_rest() {
        let root = scratch("stopped");
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::fs::write(root.join("a/b/c/f"), b"x").unwrap();
        let e = remove_tree_unless(&root, &|| true).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
        assert!(root.join("a/b/c/f").is_file(), "nothing below was touched");
        remove_tree(&root).unwrap();
        assert!(!root.exists());
    }

    #[test]
    fn removes_wide_trees_links_and_odd_names_without_following_links() {
        let root = scratch("wide");
        let outside = scratch("outside");
        std::fs::write(outside.join("precious"), b"keep me").unwrap();
        for i in 0..300 {
            let d = root.join(format!("dir {i}\u{e9}\n"));
            std::fs::create_dir_all(d.join("sub")).unwrap();
            std::fs::write(d.join("sub").join("f"), b"x").unwrap();
        }
        std::os::unix::fs::symlink(&outside, root.join("link-to-outside")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("dir 1\u{e9}\n").join("sub").join("link")).unwrap();
        std::fs::write(root.join("plain"), b"y").unwrap();
        remove_tree(&root).unwrap();
        assert!(!root.exists());
        assert_eq!(std::fs::read(outside.join("precious")).unwrap(), b"keep me");
        remove_tree(&outside).unwrap();
        remove_tree(&outside).unwrap();
    }
}
