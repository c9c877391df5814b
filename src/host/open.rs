//! How the host opens a path inside a sandbox, where the guest decides what lies there: it
//! never blocks on a FIFO the guest made, and never follows a link the guest planted unless
//! the guest itself followed it. Each platform does this its own way, here and nowhere else:
//! Linux and macOS open with `O_NONBLOCK` and `O_NOFOLLOW` (a link fails the open); Windows
//! has no FIFOs in a folder, opens a link itself with `FILE_FLAG_OPEN_REPARSE_POINT` (a
//! symlink or junction is then refused here), and needs `FILE_FLAG_BACKUP_SEMANTICS` to open
//! a folder at all. cap-std keeps every open inside the sandbox's folder on all of them.

use std::io;

use cap_std::fs::{Dir, File, OpenOptions};

/// Opens `path` under `dir` for reading, following a final link only when `follow`.
pub fn open_read(dir: &Dir, path: &str, follow: bool) -> io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true);
    flags(&mut opts, follow);
    let file = dir.open_with(path, &opts)?;
    if !follow && file.metadata()?.file_type().is_symlink() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("'{path}' is a link, which is not followed here"),
        ));
    }
    Ok(file)
}

#[cfg(unix)]
fn flags(opts: &mut OpenOptions, follow: bool) {
    use cap_std::fs::OpenOptionsExt;
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    opts.custom_flags(libc::O_NONBLOCK | nofollow);
}

#[cfg(windows)]
fn flags(opts: &mut OpenOptions, follow: bool) {
    use cap_std::fs::OpenOptionsExt;
    const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
    const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
    let reparse = if follow { 0 } else { FILE_FLAG_OPEN_REPARSE_POINT };
    opts.custom_flags(FILE_FLAG_BACKUP_SEMANTICS | reparse);
}

#[cfg(not(any(unix, windows)))]
fn flags(_opts: &mut OpenOptions, _follow: bool) {}

/// Whether the host cannot spell out the full name of folder `parent` under `dir`.
///
/// On Windows, cap-std creates, removes, renames and lists by the folder's full name, which it
/// asks the system for (`GetFinalPathNameByHandleW`); Wine answers that only up to 260
/// characters, and Windows only up to 32,767. When that is what failed a guest's call, the
/// guest is told its path is too long (`ENAMETOOLONG`), not that the disk failed (`EIO`).
/// Opening a file goes relative to the folder's handle and is not limited this way.
#[cfg(windows)]
pub fn name_too_long(dir: &Dir, parent: &str) -> bool {
    const ERROR_BUFFER_OVERFLOW: i32 = 111;
    const ERROR_FILENAME_EXCED_RANGE: i32 = 206;
    const ERROR_MORE_DATA: i32 = 234;
    let parent = if parent.is_empty() { "." } else { parent };
    let Ok(folder) = dir.open_dir(parent) else {
        return false;
    };
    let file = folder.into_std_file();
    matches!(
        winx::file::get_file_path(&file).map_err(|e| e.raw_os_error()),
        Err(Some(
            ERROR_BUFFER_OVERFLOW | ERROR_FILENAME_EXCED_RANGE | ERROR_MORE_DATA
        ))
    )
}

/// Elsewhere the system works relative to the folder's descriptor, and a name too long is
/// already `ENAMETOOLONG`.
#[cfg(not(windows))]
pub fn name_too_long(_dir: &Dir, _parent: &str) -> bool {
    false
}

/// Whether what `path` under `dir` opens (a final link followed when `follow`) lies in the
/// folder `hidden`, wherever links inside `dir` lead: where the system cannot say where it is,
/// yes. What does not open is left to the caller's own open to report.
pub fn opens_into(dir: &Dir, path: &str, follow: bool, hidden: &std::path::Path) -> bool {
    let Ok(file) = open_read(dir, path, follow) else {
        return false;
    };
    path_of(&file.into_std()).is_none_or(|at| at.starts_with(hidden))
}

/// Where the file or folder `file` is, as the system names it now (links resolved): how a
/// shared folder's hidden part is told apart after an open, whatever path led there. `None`
/// when the system cannot say.
pub fn path_of(file: &std::fs::File) -> Option<std::path::PathBuf> {
    path_of_here(file)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn path_of_here(file: &std::fs::File) -> Option<std::path::PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

#[cfg(target_os = "macos")]
fn path_of_here(file: &std::fs::File) -> Option<std::path::PathBuf> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: F_GETPATH writes at most PATH_MAX bytes, NUL-terminated, into `buf`.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETPATH, buf.as_mut_ptr()) };
    if rc == -1 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0)?;
    Some(std::ffi::OsStr::from_bytes(&buf[..end]).into())
}

#[cfg(windows)]
fn path_of_here(file: &std::fs::File) -> Option<std::path::PathBuf> {
    winx::file::get_file_path(file).ok().map(Into::into)
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "macos", windows)))]
fn path_of_here(_file: &std::fs::File) -> Option<std::path::PathBuf> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    #[test]
    fn a_link_is_opened_only_when_followed() {
        let tmp = std::env::temp_dir().join(format!("host-open-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&tmp).expect("a temp dir");
        std::fs::write(tmp.join("real.txt"), "x").expect("write");
        let dir = Dir::open_ambient_dir(&tmp, ambient_authority()).expect("open");
        assert!(open_read(&dir, "real.txt", false).is_ok());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("real.txt", tmp.join("link")).expect("link");
            assert!(open_read(&dir, "link", false).is_err(), "not followed");
            assert!(open_read(&dir, "link", true).is_ok(), "followed when asked");
            // A FIFO does not block the open.
            let fifo = tmp.join("fifo");
            let made = std::process::Command::new("mkfifo").arg(&fifo).status();
            assert!(made.is_ok_and(|s| s.success()), "mkfifo");
            assert!(open_read(&dir, "fifo", false).is_ok());
        }
        let real = open_read(&dir, "real.txt", false).expect("open").into_std();
        let canonical = std::fs::canonicalize(tmp.join("real.txt")).expect("canonical");
        assert_eq!(path_of(&real), Some(canonical));
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
