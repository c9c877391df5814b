//! Reading a folder's files for the file tools, through a `cap_std::fs::Dir`: each component
//! is resolved inside the folder, links are refused rather than followed, and a FIFO never
//! blocks a read (`host::open`). Shared by a sandbox's workspace and the folders it reads in
//! place, so both answer alike.

use std::io::Read;

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::sandbox::mounts::MountPath;
use crate::sandbox::paths::WorkspacePath;
use crate::sandbox::{FileEntry, FileKind, Listing, SandboxError};

/// Most entries a listing holds; `list_files` pages through them.
const MAX_ENTRIES: usize = 100_000;

pub fn not_found_or(path: &WorkspacePath, context: &str) -> impl FnOnce(std::io::Error) -> SandboxError {
    let shown = path.relative();
    let context = context.to_string();
    move |e| match e.kind() {
        std::io::ErrorKind::NotFound => SandboxError::FileNotFound { path: shown },
        _ => SandboxError::Io {
            context: format!("{context} '{shown}'"),
            source: e,
        },
    }
}

/// A folder's entries: the first [`MAX_ENTRIES`] by name, whatever order the disk gives them
/// in, and how many it holds in all. Only the names are held while it is read (the ones past
/// the cut are dropped as it goes), so a folder of millions costs no more memory than a listing.
pub fn list(root: Dir, path: WorkspacePath) -> Result<Listing, SandboxError> {
    let dir = if path.is_root() {
        root
    } else {
        let md = root
            .symlink_metadata(path.relative())
            .map_err(not_found_or(&path, "could not list"))?;
        if !md.is_dir() {
            return Err(SandboxError::InvalidArgument(format!(
                "'{}' is a file, not a folder; use read_file to read it",
                path.relative()
            )));
        }
        root.open_dir(path.relative())
            .map_err(not_found_or(&path, "could not list"))?
    };
    let mut first = std::collections::BinaryHeap::new();
    let mut total = 0u64;
    for entry in dir.entries().map_err(not_found_or(&path, "could not list"))? {
        let Ok(entry) = entry else { continue };
        total += 1;
        first.push(entry.file_name().to_string_lossy().into_owned());
        if first.len() > MAX_ENTRIES {
            first.pop();
        }
    }
    let entries = first
        .into_sorted_vec()
        .into_iter()
        .filter_map(|name| entry(&dir, &path, name))
        .collect();
    Ok(Listing { entries, total })
}

/// What a listing says of `name` in `dir`; `None` when it went meanwhile.
fn entry(dir: &Dir, path: &WorkspacePath, name: String) -> Option<FileEntry> {
    let md = dir.symlink_metadata(&name).ok()?;
    let ft = md.file_type();
    let kind = if ft.is_symlink() {
        FileKind::Symlink
    } else if ft.is_dir() {
        FileKind::Directory
    } else if ft.is_file() {
        FileKind::File
    } else {
        FileKind::Other
    };
    Some(FileEntry {
        path: path.join(&name).relative(),
        name,
        kind,
        size: if ft.is_file() { md.len() } else { 0 },
    })
}

/// The regular file at `path`, open for reading, if it holds at most `limit` bytes: folders,
/// links, FIFOs and devices are refused without blocking.
fn open_regular(
    root: &Dir,
    path: &WorkspacePath,
    limit: u64,
) -> Result<(cap_std::fs::File, u64), SandboxError> {
    let rel = path.relative();
    let md = root
        .symlink_metadata(&rel)
        .map_err(not_found_or(path, "could not read"))?;
    if md.is_dir() {
        return Err(SandboxError::IsDirectory { path: rel });
    }
    if !md.is_file() {
        return Err(SandboxError::NotRegular { path: rel });
    }
    // The guest may swap the file for a FIFO or a link after the check above.
    let file =
        crate::host::open::open_read(root, &rel, false).map_err(not_found_or(path, "could not open"))?;
    let md = file.metadata().map_err(not_found_or(path, "could not read"))?;
    if !md.is_file() {
        return Err(SandboxError::NotRegular { path: rel });
    }
    if md.len() > limit {
        return Err(SandboxError::TooLarge {
            path: rel,
            size: md.len(),
            limit,
        });
    }
    Ok((file, md.len()))
}

pub fn read(root: Dir, path: WorkspacePath, limit: u64) -> Result<Vec<u8>, SandboxError> {
    let (file, len) = open_regular(&root, &path, limit)?;
    let mut buf = Vec::with_capacity(len as usize);
    file.take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(not_found_or(&path, "could not read"))?;
    Ok(buf)
}

/// Streams the file at `path` into `out`; how many bytes it held. One that grew past
/// `limit` while it was copied is refused.
pub fn copy(
    root: &Dir,
    path: &WorkspacePath,
    limit: u64,
    out: &mut dyn std::io::Write,
) -> Result<u64, SandboxError> {
    let (file, _) = open_regular(root, path, limit)?;
    let copied = std::io::copy(&mut file.take(limit + 1), out)
        .map_err(SandboxError::io(format!("could not copy '{}'", path.relative())))?;
    if copied > limit {
        return Err(SandboxError::TooLarge {
            path: path.relative(),
            size: copied,
            limit,
        });
    }
    Ok(copied)
}

fn open(mp: &MountPath) -> Result<Dir, SandboxError> {
    Dir::open_ambient_dir(&mp.mount.host, ambient_authority()).map_err(SandboxError::io(format!(
        "could not open the shared folder {} ({}); it may have been moved or deleted",
        mp.mount.guest(),
        mp.mount.host.display()
    )))
}

/// Refuses `mp` when it lies in its folder's hidden part (the server's own home), wherever
/// links inside the folder lead: checked on what an open of it reaches.
fn not_hidden(root: &Dir, mp: &MountPath) -> Result<(), SandboxError> {
    let Some(hidden) = &mp.mount.hidden else {
        return Ok(());
    };
    let rel = if mp.rel.is_root() {
        ".".to_string()
    } else {
        mp.rel.relative()
    };
    if crate::host::open::opens_into(root, &rel, true, hidden) {
        return Err(SandboxError::InvalidPath(format!(
            "'{}' is inside this server's own folder, which sandboxes and the file tools cannot read; choose a file elsewhere in {}",
            mp.guest(),
            mp.mount.guest()
        )));
    }
    Ok(())
}

/// The shared folder of `mp`, open, once `mp` is known not to be hidden.
fn open_visible(mp: &MountPath) -> Result<Dir, SandboxError> {
    let root = open(mp)?;
    not_hidden(&root, mp)?;
    Ok(root)
}

/// Lists a folder under a shared folder; entries carry their full guest paths.
pub fn list_shared(mp: &MountPath) -> Result<Listing, SandboxError> {
    let mut entries = list(open_visible(mp)?, mp.rel.clone())?;
    for e in &mut entries.entries {
        e.path = format!("{}/{}", mp.mount.guest(), e.path);
    }
    Ok(entries)
}

/// Streams a file under a shared folder into `out`, up to `limit` bytes.
pub fn copy_shared(mp: &MountPath, limit: u64, mut out: std::fs::File) -> Result<u64, SandboxError> {
    copy(&open_visible(mp)?, &mp.rel, limit, &mut out)
}

/// Reads a file under a shared folder, up to `limit` bytes (checked before reading).
pub fn read_shared(mp: &MountPath, limit: u64) -> Result<Vec<u8>, SandboxError> {
    read(open_visible(mp)?, mp.rel.clone(), limit)
}
