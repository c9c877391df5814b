//! What the host's file system says about a file beyond its size and time, in the one place
//! that knows which platform it is: who may write or read it (Unix permission bits), and marks
//! that change with every change to it (inode and change time), which a copy that keeps the
//! modification time (`cp -p`, `rsync -t`, `tar x`, a file renamed over) cannot fake.

use std::fs::Metadata;

/// The permission bits (`0o777`), or `None` where files have none (Windows keeps access in
/// ACLs, which a user's own profile folders already restrict).
pub fn mode(meta: &Metadata) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        Some(meta.permissions().mode() & 0o777)
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// Makes `opts` create a file only its owner may read or write (Unix mode 0600; elsewhere the
/// folder's ACL applies).
pub fn owner_only(opts: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600)
    }
    #[cfg(not(unix))]
    {
        opts
    }
}

/// Marks that differ after any write or replacement: (inode, change time in seconds and
/// nanoseconds) on Unix; zeros elsewhere, where callers also compare contents.
pub fn change_marks(meta: &Metadata) -> (u64, i64, i64) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (meta.ino(), meta.ctime(), meta.ctime_nsec())
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        (0, 0, 0)
    }
}
