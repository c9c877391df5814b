//! Renames and removals of the server's own files that another process may hold for a
//! moment. On Windows an antivirus scanner or the search indexer opens a file just written
//! (a saved state, a checkpoint, a sandbox's record) without letting it be renamed or
//! deleted, and a folder whose last entry was just deleted stays "not empty" while that entry
//! is "delete pending": the call fails with access denied, a sharing violation or "not empty",
//! and succeeds a moment later. So those failures are waited out here, for up to
//! [`PATIENCE`], instead of losing a checkpoint or a kept sandbox to them. Elsewhere no such
//! failure is passing, and every call is made once.

use std::io;
use std::path::Path;
use std::time::Duration;

/// How long a file another process holds is waited for.
pub const PATIENCE: Duration = Duration::from_secs(2);

const PAUSE: Duration = Duration::from_millis(50);

/// `std::fs::rename`, waiting out another process holding either name.
pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    retry(|| std::fs::rename(from, to), held)
}

/// `std::fs::remove_file`, waiting out another process holding the file.
pub fn remove_file(path: &Path) -> io::Result<()> {
    retry(|| std::fs::remove_file(path), held)
}

/// `std::fs::remove_dir`, waiting out entries still being deleted and other holders.
pub fn remove_dir(path: &Path) -> io::Result<()> {
    retry(|| std::fs::remove_dir(path), |e| held(e) || pending(e))
}

/// Runs `op` until it succeeds, fails for good, or has failed `passing` for [`PATIENCE`].
fn retry<T>(mut op: impl FnMut() -> io::Result<T>, passing: impl Fn(&io::Error) -> bool) -> io::Result<T> {
    let mut waited = Duration::ZERO;
    loop {
        match op() {
            Err(e) if waited < PATIENCE && passing(&e) => {
                std::thread::sleep(PAUSE);
                waited += PAUSE;
            }
            done => return done,
        }
    }
}

/// Access denied, a sharing or a lock violation: another process has the file open.
#[cfg(windows)]
fn held(e: &io::Error) -> bool {
    const ERROR_ACCESS_DENIED: i32 = 5;
    const ERROR_SHARING_VIOLATION: i32 = 32;
    const ERROR_LOCK_VIOLATION: i32 = 33;
    matches!(
        e.raw_os_error(),
        Some(ERROR_ACCESS_DENIED | ERROR_SHARING_VIOLATION | ERROR_LOCK_VIOLATION)
    )
}

#[cfg(not(windows))]
fn held(_: &io::Error) -> bool {
    false
}

/// A folder still listing an entry that is being deleted.
#[cfg(windows)]
fn pending(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::DirectoryNotEmpty
}

#[cfg(not(windows))]
fn pending(_: &io::Error) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(times: usize, kind: io::ErrorKind) -> impl FnMut() -> io::Result<usize> {
        let mut calls = 0;
        move || {
            calls += 1;
            if calls <= times {
                Err(io::Error::from(kind))
            } else {
                Ok(calls)
            }
        }
    }

    #[test]
    fn a_passing_failure_is_waited_out_and_any_other_is_returned_at_once() {
        let busy = |e: &io::Error| e.kind() == io::ErrorKind::PermissionDenied;
        let got = retry(failing(3, io::ErrorKind::PermissionDenied), busy);
        assert_eq!(got.expect("succeeds once the holder lets go"), 4);
        let got = retry(failing(3, io::ErrorKind::NotFound), busy);
        assert_eq!(got.expect_err("fails for good").kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_holder_that_never_lets_go_fails_after_the_patience() {
        let start = std::time::Instant::now();
        let got = retry(failing(usize::MAX, io::ErrorKind::PermissionDenied), |_| true);
        assert_eq!(got.expect_err("gives up").kind(), io::ErrorKind::PermissionDenied);
        assert!(start.elapsed() >= PATIENCE, "waited {:?}", start.elapsed());
    }

    #[test]
    fn the_file_calls_do_what_std_does() {
        let tmp = std::env::temp_dir().join(format!("host-retry-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(tmp.join("d")).expect("mkdir");
        std::fs::write(tmp.join("a"), "a").expect("write");
        rename(&tmp.join("a"), &tmp.join("b")).expect("rename");
        assert_eq!(std::fs::read_to_string(tmp.join("b")).expect("moved"), "a");
        assert_eq!(
            remove_file(&tmp.join("a")).expect_err("gone").kind(),
            io::ErrorKind::NotFound
        );
        remove_file(&tmp.join("b")).expect("remove");
        remove_dir(&tmp.join("d")).expect("rmdir");
        remove_dir(&tmp).expect("rmdir");
        assert!(!tmp.exists());
    }
}
