//! The shadowing WASI functions: check, call the original on a host buffer, measure.
//!
//! Everything read here comes from the guest, so nothing may trap on bad input: a pointer out
//! of range answers EFAULT, an over-long path ENAMETOOLONG, and a path that is not UTF-8 goes
//! to the original, which refuses it. Writes pass in pieces of at most [`CHUNK`] bytes, each
//! checked against the quota, so a write that does not fit stops where the quota does (a
//! short write, then ENOSPC), as on a full disk.

use std::sync::Arc;

use cap_std::fs::{Dir, File};
use wasmtime::{Caller, Linker};
use wasmtime_wasi::p1::WasiP1Ctx;

use super::GuestFs;
use super::errno::{FAULT, IO, MFILE, NAMETOOLONG, NOSPC, SUCCESS};
use super::names::{self, Use};
use super::scratch::{CHUNK, DATA, IOV, OUT, PATH_A, PATH_B, PATH_MAX};
use super::{Open, listing, open_twin, read_only_twin, shared_refusal, stat};
use crate::disk::quota::{self as quota, DiskQuota, ENTRY_COST};
use crate::host::names::NameRules;
use crate::wasm::vm::guest_memory;

/// Where the shadows find their parts in the Store's data: a projection, as wasmtime-wasi's
/// own `add_to_linker_async(linker, |s| &mut s.wasi)` takes, so this module needs nothing of
/// the Store's data type and can be tested with a bare WASI context.
pub type Project<T> = for<'a> fn(&'a mut T) -> (&'a mut WasiP1Ctx, &'a mut GuestFs);

/// One shadow call's view of the Store: the guest's memory through the caller, our state and
/// wasmtime-wasi's through the projection.
struct Ctx<'a, 'c, T: 'static> {
    caller: &'a mut Caller<'c, T>,
    project: Project<T>,
}

impl<'c, T: 'static> Ctx<'_, 'c, T> {
    fn fs(&mut self) -> &mut GuestFs {
        (self.project)(self.caller.data_mut()).1
    }

    fn caller(&mut self) -> &mut Caller<'c, T> {
        self.caller
    }
}
type Res = wasmtime::Result<i32>;

const MODULE: &str = "wasi_snapshot_preview1";
const LOOKUP_SYMLINK_FOLLOW: i32 = 1;
const O_CREAT: i32 = 1;
const O_DIRECTORY: i32 = 2;
const O_TRUNC: i32 = 8;

/// Calls wasmtime-wasi's own function on the sandbox's WASI context, with the host scratch
/// buffer as its memory: every pointer argument is an offset into that buffer.
/// (`sync` for the few wasmtime-wasi generates as plain functions.)
///
/// Like wiggle's own linker glue, it first grants the context the Store's host-call fuel:
/// wasmtime-wasi charges each copy out of guest memory against it and answers ENOMEM when it
/// runs out, so a run of shadowed calls with no unshadowed one between them would otherwise
/// fail for no reason of the guest's.
macro_rules! original {
    ($c:expr, sync $f:ident($($arg:expr),* $(,)?)) => {{
        let (wasi, mut memory) = original_parts($c);
        wasmtime_wasi::p1::wasi_snapshot_preview1::$f(wasi, &mut memory, $($arg),*)
    }};
    ($c:expr, $f:ident($($arg:expr),* $(,)?)) => {{
        let (wasi, mut memory) = original_parts($c);
        wasmtime_wasi::p1::wasi_snapshot_preview1::$f(wasi, &mut memory, $($arg),*).await
    }};
}

fn original_parts<'a, T: 'static>(c: &'a mut Ctx<'_, '_, T>) -> (&'a mut WasiP1Ctx, wiggle::GuestMemory<'a>) {
    use wasmtime::AsContextMut;
    use wasmtime_wasi::p1::wasi_snapshot_preview1::WasiSnapshotPreview1;
    let fuel = c.caller.as_context_mut().hostcall_fuel();
    let (wasi, fs) = (c.project)(c.caller.data_mut());
    wasi.set_hostcall_fuel(fuel);
    (wasi, wiggle::GuestMemory::Unshared(fs.scratch.bytes_mut()))
}

fn quota<T: Send>(c: &mut Ctx<'_, '_, T>) -> Arc<DiskQuota> {
    c.fs().quota().clone()
}

fn guest_read<T: Send>(c: &mut Ctx<'_, '_, T>, ptr: i32, len: usize) -> Option<Vec<u8>> {
    guest_memory::read(c.caller(), ptr, u32::try_from(len).ok()?)
}

fn scratch_write<T: Send>(c: &mut Ctx<'_, '_, T>, at: usize, bytes: &[u8]) -> Result<(), i32> {
    if c.fs().scratch.write(at, bytes) {
        Ok(())
    } else {
        Err(FAULT)
    }
}

fn scratch_out<T: Send>(c: &mut Ctx<'_, '_, T>) -> u32 {
    c.fs().scratch.u32_at(OUT)
}

/// Copies a guest path into the scratch buffer at `slot`; its text when it is UTF-8.
fn stage_path<T: Send>(
    c: &mut Ctx<'_, '_, T>,
    ptr: i32,
    len: i32,
    slot: usize,
) -> Result<Option<String>, i32> {
    let len = len as u32 as usize;
    if len > PATH_MAX {
        return Err(NAMETOOLONG);
    }
    let bytes = guest_read(c, ptr, len).ok_or(FAULT)?;
    scratch_write(c, slot, &bytes)?;
    Ok(String::from_utf8(bytes).ok())
}

/// The errno refusing a name under watched folder `fd` that the host would take for another
/// (`names.rs`); `None` for unwatched folders and names it takes as they are.
fn misnamed<T: Send>(c: &mut Ctx<'_, '_, T>, fd: i32, path: &Option<String>, use_: Use) -> Option<i32> {
    let dir = c.fs().dir(fd)?;
    names::refusal(&dir, path.as_deref()?, use_, NameRules::host())
}

/// `rc`, with an I/O error that only means the host could not name a long path said as
/// ENAMETOOLONG (`names::explained`).
fn explained<T: Send>(c: &mut Ctx<'_, '_, T>, fd: i32, path: &Option<String>, rc: i32) -> i32 {
    match (c.fs().dir(fd), path) {
        (Some(dir), Some(path)) => names::explained(&dir, path, rc),
        _ => rc,
    }
}

macro_rules! named {
    ($c:expr, $fd:expr, $path:expr, $use:expr) => {
        if let Some(errno) = misnamed($c, $fd, $path, $use) {
            return Ok(errno);
        }
    };
}

/// The (pointer, length) pairs of a guest `iovec` array.
fn guest_iovecs<T: Send>(c: &mut Ctx<'_, '_, T>, iovs: i32, count: i32) -> Option<Vec<(u32, u32)>> {
    let raw = guest_read(c, iovs, (count as u32 as usize).checked_mul(8)?)?;
    Some(
        raw.chunks_exact(8)
            .map(|v| {
                (
                    u32::from_le_bytes([v[0], v[1], v[2], v[3]]),
                    u32::from_le_bytes([v[4], v[5], v[6], v[7]]),
                )
            })
            .collect(),
    )
}

/// A write in flight on a watched file: reserved before, settled to the real growth after.
struct Growth {
    quota: Arc<DiskQuota>,
    file: Arc<File>,
    before: u64,
    reserved: u64,
}

impl Growth {
    /// Reserves what the write could add at most (`bound` of the file's current size); `None`
    /// when that does not fit.
    fn begin<T: Send>(
        c: &mut Ctx<'_, '_, T>,
        file: Arc<File>,
        bound: impl FnOnce(u64) -> u64,
    ) -> Option<Growth> {
        let quota = quota(c);
        let before = file.metadata().map(|m| m.len()).unwrap_or(0);
        let reserved = bound(before);
        quota.reserve(reserved).ok()?;
        Some(Growth {
            quota,
            file,
            before,
            reserved,
        })
    }

    fn end(self) {
        let after = self.file.metadata().map(|m| m.len()).unwrap_or(self.before);
        self.quota
            .settle(self.reserved, i128::from(after) - i128::from(self.before));
    }
}

/// `fd_write` (no offset: at the file position) and `fd_pwrite` (at `offset`), piece by piece.
async fn write_pieces<T: Send>(
    c: &mut Ctx<'_, '_, T>,
    fd: i32,
    iovs: i32,
    count: i32,
    offset: Option<u64>,
    out: i32,
) -> Res {
    let Some(list) = guest_iovecs(c, iovs, count) else {
        return Ok(FAULT);
    };
    let file = c.fs().file(fd);
    let mut total: u64 = 0;
    let mut failed = SUCCESS;
    'all: for (ptr, len) in list {
        let mut done = 0usize;
        while done < len as usize {
            let n = (len as usize - done).min(CHUNK);
            let Some(bytes) = guest_read(c, (ptr as usize + done) as i32, n) else {
                failed = FAULT;
                break 'all;
            };
            let at = offset.map(|o| o.saturating_add(total));
            let growth = match &file {
                None => None,
                Some(f) => {
                    // Where the piece lands: the offset, or the file position (an appending
                    // descriptor writes at the end instead, which the bound also covers).
                    let pos = match at {
                        Some(a) => a,
                        None => tell(c, fd).await?,
                    };
                    let end = pos.saturating_add(n as u64);
                    let bound = |before: u64| end.saturating_sub(before).max(n as u64);
                    match Growth::begin(c, f.clone(), bound) {
                        Some(g) => Some(g),
                        None => {
                            failed = NOSPC;
                            break 'all;
                        }
                    }
                }
            };
            let staged = scratch_write(c, DATA, &bytes).and_then(|()| scratch_write(c, IOV, &iovec(DATA, n)));
            let rc = match (staged, at) {
                (Err(e), _) => Ok(e),
                (Ok(()), None) => original!(c, fd_write(fd, IOV as i32, 1, OUT as i32)),
                (Ok(()), Some(at)) => original!(c, fd_pwrite(fd, IOV as i32, 1, at as i64, OUT as i32)),
            };
            if let Some(g) = growth {
                g.end();
            }
            let rc = rc?;
            if rc != SUCCESS {
                failed = rc;
                break 'all;
            }
            let wrote = scratch_out(c) as usize;
            total += wrote as u64;
            done += wrote;
            if wrote < n {
                break 'all;
            }
        }
    }
    // What was written counts even if a later piece failed, as with a short write.
    if total == 0 && failed != SUCCESS {
        return Ok(failed);
    }
    if !guest_memory::write_u32(c.caller(), out, total as u32) {
        return Ok(FAULT);
    }
    Ok(SUCCESS)
}

/// The file position of `fd` (0 if it has none).
async fn tell<T: Send>(c: &mut Ctx<'_, '_, T>, fd: i32) -> wasmtime::Result<u64> {
    let rc = original!(c, sync fd_tell(fd, OUT as i32))?;
    Ok(if rc == SUCCESS {
        c.fs().scratch.u64_at(OUT)
    } else {
        0
    })
}

fn iovec(ptr: usize, len: usize) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&(ptr as u32).to_le_bytes());
    b[4..].copy_from_slice(&(len as u32).to_le_bytes());
    b
}

async fn fd_filestat_set_size<T: Send>(c: &mut Ctx<'_, '_, T>, fd: i32, size: i64) -> Res {
    let growth = match c.fs().file(fd) {
        None => None,
        Some(f) => match Growth::begin(c, f, |before| (size as u64).saturating_sub(before)) {
            Some(g) => Some(g),
            None => return Ok(NOSPC),
        },
    };
    let rc = original!(c, fd_filestat_set_size(fd, size));
    if let Some(g) = growth {
        g.end();
    }
    rc
}

async fn fd_close<T: Send>(c: &mut Ctx<'_, '_, T>, fd: i32) -> Res {
    let rc = original!(c, fd_close(fd))?;
    if rc == SUCCESS
        && let Some(twin) = c.fs().remove(fd)
    {
        c.fs().forget(twin);
    }
    Ok(rc)
}

async fn fd_renumber<T: Send>(c: &mut Ctx<'_, '_, T>, from: i32, to: i32) -> Res {
    let rc = original!(c, fd_renumber(from, to))?;
    if rc == SUCCESS {
        c.fs().renumber(from, to);
    }
    Ok(rc)
}

async fn fd_readdir<T: Send>(
    c: &mut Ctx<'_, '_, T>,
    fd: i32,
    buf: i32,
    buf_len: i32,
    cookie: i64,
    used: i32,
) -> Res {
    let cap = buf_len as u32 as usize;
    let Some(dir) = c.fs().listable(fd) else {
        // Not a folder we hold: the original answers (EBADF, ENOTDIR).
        let rc = original!(
            c,
            fd_readdir(fd, DATA as i32, cap.min(CHUNK) as i32, cookie, OUT as i32)
        )?;
        if rc != SUCCESS {
            return Ok(rc);
        }
        let n = (scratch_out(c) as usize).min(CHUNK);
        let bytes = c.fs().scratch.read(DATA, n).to_vec();
        return Ok(guest_copy_out(c, buf, &bytes, used));
    };
    let entries = match c.fs().listings.get(fd as u32, &dir, cookie as u64) {
        Ok(e) => e,
        Err(_) if names::explained(&dir, "", IO) == NAMETOOLONG => return Ok(NAMETOOLONG),
        Err(_) => return Ok(IO),
    };
    let bytes = listing::encode(&entries, cookie as u64, cap);
    Ok(guest_copy_out(c, buf, &bytes, used))
}

/// Writes `bytes` at `buf` and their count at `used`; EFAULT if either is out of range.
fn guest_copy_out<T: Send>(c: &mut Ctx<'_, '_, T>, buf: i32, bytes: &[u8], used: i32) -> i32 {
    if !guest_memory::write(c.caller(), buf, bytes)
        || !guest_memory::write_u32(c.caller(), used, bytes.len() as u32)
    {
        return FAULT;
    }
    SUCCESS
}

/// Arguments of `path_open` that pass through unchanged.
struct OpenFlags {
    dirflags: i32,
    oflags: i32,
    base: i64,
    inheriting: i64,
    fdflags: i32,
}

async fn path_open<T: Send>(
    c: &mut Ctx<'_, '_, T>,
    dirfd: i32,
    path: i32,
    path_len: i32,
    f: OpenFlags,
    fd_out: i32,
) -> Res {
    if c.fs().is_full() {
        return Ok(MFILE);
    }
    let text = match stage_path(c, path, path_len, PATH_A) {
        Ok(t) => t,
        Err(e) => return Ok(e),
    };
    let creates = if f.oflags & O_CREAT != 0 {
        Use::Create
    } else {
        Use::Open
    };
    named!(c, dirfd, &text, creates);
    let watched = c.fs().dir(dirfd).map(|d| (d, text.clone()));
    let follow = f.dirflags & LOOKUP_SYMLINK_FOLLOW != 0;
    let shared = c.fs().shared(dirfd);
    if let (Some((dir, hidden)), Some(path)) = (&shared, &text)
        && let Some(refused) = shared_refusal(dir, path, follow, hidden.as_deref())
    {
        return Ok(refused);
    }
    // Only a create or a truncate changes what counts; plain opens skip the extra lookup.
    let before = match &watched {
        Some((dir, Some(path))) if f.oflags & (O_CREAT | O_TRUNC) != 0 => stat(dir, path, follow),
        _ => None,
    };
    let reserved = if watched.is_some() && f.oflags & O_CREAT != 0 && before.is_none() {
        ENTRY_COST
    } else {
        0
    };
    let quota = quota(c);
    if quota.reserve(reserved).is_err() {
        return Ok(NOSPC);
    }
    let rc = original!(
        c,
        path_open(
            dirfd,
            f.dirflags,
            PATH_A as i32,
            path_len,
            f.oflags,
            f.base,
            f.inheriting,
            f.fdflags,
            OUT as i32,
        )
    )?;
    if rc != SUCCESS {
        quota.release(reserved);
        return Ok(rc);
    }
    let fd = scratch_out(c) as i32;
    let twin = match &watched {
        // A folder opened to be listed gets a twin for fd_readdir. Only those: every import
        // opens files in the read-only trees, and they need no lookup of their own.
        None => Ok(match (c.fs().listable(dirfd), &text) {
            // In a shared folder every folder opened gets one: what is opened under it is checked.
            (Some(dir), Some(path)) if f.oflags & O_DIRECTORY != 0 || shared.is_some() => {
                read_only_twin(&dir, path, follow, shared.map(|(_, hidden)| hidden))
            }
            _ => Open::Unwatched,
        }),
        Some((dir, Some(path))) => open_twin(dir, path, follow),
        // The original accepted a path we could not read: never leave it unwatched.
        Some((_, None)) => Err(std::io::ErrorKind::InvalidData.into()),
    };
    let twin = match twin {
        Ok(t) if guest_memory::write_u32(c.caller(), fd_out, fd as u32) => t,
        Ok(_) | Err(_) => {
            // Without its twin (or its number) the descriptor is of no use: take it back.
            original!(c, fd_close(fd))?;
            quota.release(reserved);
            return Ok(if watched.is_some() { IO } else { FAULT });
        }
    };
    if f.oflags & O_TRUNC != 0
        && let (Some(old), Open::File(file)) = (&before, &twin)
        && old.is_file()
    {
        let now = file.metadata().map(|m| m.len()).unwrap_or(0);
        quota.settle(0, i128::from(now) - i128::from(old.len()));
    }
    c.fs().insert(fd, twin);
    Ok(SUCCESS)
}

/// Runs a call that adds one name (plus `extra` bytes) under folder `fd`, if it is watched.
async fn adding_entry<T: Send>(
    c: &mut Ctx<'_, '_, T>,
    fd: i32,
    extra: u64,
    call: impl AsyncFnOnce(&mut Ctx<'_, '_, T>) -> Res,
) -> Res {
    if c.fs().dir(fd).is_none() {
        return call(c).await;
    }
    let quota = quota(c);
    let cost = ENTRY_COST + extra;
    if quota.reserve(cost).is_err() {
        return Ok(NOSPC);
    }
    let rc = call(c).await?;
    if rc != SUCCESS {
        quota.release(cost);
    }
    Ok(rc)
}

/// The metadata of `path` under watched folder `fd`, before a call removes or replaces it.
fn watched_entry<T: Send>(
    c: &mut Ctx<'_, '_, T>,
    fd: i32,
    path: &Option<String>,
) -> Option<cap_std::fs::Metadata> {
    let dir: Arc<Dir> = c.fs().dir(fd)?;
    stat(&dir, path.as_deref()?, false)
}

macro_rules! staged {
    ($e:expr) => {
        match $e {
            Ok(t) => t,
            Err(errno) => return Ok(errno),
        }
    };
}

async fn path_create_directory<T: Send>(c: &mut Ctx<'_, '_, T>, fd: i32, path: i32, len: i32) -> Res {
    let text = staged!(stage_path(c, path, len, PATH_A));
    named!(c, fd, &text, Use::Create);
    adding_entry(c, fd, 0, async |c| {
        let rc = original!(c, path_create_directory(fd, PATH_A as i32, len))?;
        Ok(explained(c, fd, &text, rc))
    })
    .await
}

async fn path_symlink<T: Send>(
    c: &mut Ctx<'_, '_, T>,
    old: i32,
    old_len: i32,
    fd: i32,
    new: i32,
    new_len: i32,
) -> Res {
    staged!(stage_path(c, old, old_len, PATH_A));
    let new_text = staged!(stage_path(c, new, new_len, PATH_B));
    named!(c, fd, &new_text, Use::Create);
    adding_entry(c, fd, old_len as u32 as u64, async |c| {
        let rc = original!(
            c,
            path_symlink(PATH_A as i32, old_len, fd, PATH_B as i32, new_len)
        )?;
        Ok(explained(c, fd, &new_text, rc))
    })
    .await
}

#[allow(clippy::too_many_arguments)]
async fn path_link<T: Send>(
    c: &mut Ctx<'_, '_, T>,
    old_fd: i32,
    flags: i32,
    old: i32,
    old_len: i32,
    new_fd: i32,
    new: i32,
    new_len: i32,
) -> Res {
    staged!(stage_path(c, old, old_len, PATH_A));
    let new_text = staged!(stage_path(c, new, new_len, PATH_B));
    named!(c, new_fd, &new_text, Use::Create);
    adding_entry(c, new_fd, 0, async |c| {
        let rc = original!(
            c,
            path_link(
                old_fd,
                flags,
                PATH_A as i32,
                old_len,
                new_fd,
                PATH_B as i32,
                new_len
            )
        )?;
        Ok(explained(c, new_fd, &new_text, rc))
    })
    .await
}

async fn path_remove_directory<T: Send>(c: &mut Ctx<'_, '_, T>, fd: i32, path: i32, len: i32) -> Res {
    let text = staged!(stage_path(c, path, len, PATH_A));
    named!(c, fd, &text, Use::Remove);
    let rc = original!(c, path_remove_directory(fd, PATH_A as i32, len))?;
    let rc = explained(c, fd, &text, rc);
    if rc == SUCCESS && c.fs().dir(fd).is_some() {
        quota(c).release(ENTRY_COST);
    }
    Ok(rc)
}

async fn path_unlink_file<T: Send>(c: &mut Ctx<'_, '_, T>, fd: i32, path: i32, len: i32) -> Res {
    let text = staged!(stage_path(c, path, len, PATH_A));
    named!(c, fd, &text, Use::Remove);
    let before = watched_entry(c, fd, &text);
    let rc = original!(c, path_unlink_file(fd, PATH_A as i32, len))?;
    let rc = explained(c, fd, &text, rc);
    if rc == SUCCESS
        && let Some(md) = before
    {
        quota(c).forget_entry(&md);
    }
    Ok(rc)
}

async fn path_rename<T: Send>(
    c: &mut Ctx<'_, '_, T>,
    fd: i32,
    old: i32,
    old_len: i32,
    new_fd: i32,
    new: i32,
    new_len: i32,
) -> Res {
    let old_text = staged!(stage_path(c, old, old_len, PATH_A));
    let new_text = staged!(stage_path(c, new, new_len, PATH_B));
    named!(c, fd, &old_text, Use::Remove);
    named!(c, new_fd, &new_text, Use::Create);
    let source = watched_entry(c, fd, &old_text);
    let target = watched_entry(c, new_fd, &new_text);
    let rc = original!(
        c,
        path_rename(fd, PATH_A as i32, old_len, new_fd, PATH_B as i32, new_len)
    )?;
    let rc = explained(c, fd, &old_text, rc);
    let rc = explained(c, new_fd, &new_text, rc);
    if rc == SUCCESS
        && let Some(target) = target
        && source.is_none_or(|s| quota::key(&s) != quota::key(&target))
    {
        // The name that was there is gone, replaced by the moved one.
        quota(c).forget_entry(&target);
    }
    Ok(rc)
}

/// Registers `$f` under `$name`, unpacking the wasm parameters into its arguments.
macro_rules! shadow {
    ($linker:expr, $project:expr, $name:literal, $f:ident($($arg:ident: $ty:ty),*)) => {
        $linker.func_wrap_async(MODULE, $name, move |mut caller: Caller<'_, T>, ($($arg,)*): ($($ty,)*)| {
            Box::new(async move { $f(&mut Ctx { caller: &mut caller, project: $project }, $($arg),*).await })
        })?
    };
}

async fn fd_write<T: Send>(c: &mut Ctx<'_, '_, T>, fd: i32, iovs: i32, count: i32, out: i32) -> Res {
    write_pieces(c, fd, iovs, count, None, out).await
}

async fn fd_pwrite<T: Send>(
    c: &mut Ctx<'_, '_, T>,
    fd: i32,
    iovs: i32,
    count: i32,
    offset: i64,
    out: i32,
) -> Res {
    write_pieces(c, fd, iovs, count, Some(offset as u64), out).await
}

#[allow(clippy::too_many_arguments)]
async fn path_open_flat<T: Send>(
    c: &mut Ctx<'_, '_, T>,
    dirfd: i32,
    dirflags: i32,
    path: i32,
    len: i32,
    oflags: i32,
    base: i64,
    inheriting: i64,
    fdflags: i32,
    out: i32,
) -> Res {
    let flags = OpenFlags {
        dirflags,
        oflags,
        base,
        inheriting,
        fdflags,
    };
    path_open(c, dirfd, path, len, flags, out).await
}

/// Puts the shadows in place of wasmtime-wasi's functions in `linker`.
pub fn add_to_linker<T: Send + 'static>(linker: &mut Linker<T>, project: Project<T>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    shadow!(
linker, project, "fd_write", fd_write(fd: i32, iovs: i32, n: i32, out: i32));
    shadow!(
linker, project, "fd_pwrite", fd_pwrite(fd: i32, iovs: i32, n: i32, offset: i64, out: i32));
    shadow!(
linker, project, "fd_filestat_set_size", fd_filestat_set_size(fd: i32, size: i64));
    shadow!(
linker, project, "fd_readdir", fd_readdir(fd: i32, buf: i32, len: i32, cookie: i64, used: i32));
    shadow!(
linker, project, "fd_close", fd_close(fd: i32));
    shadow!(
linker, project, "fd_renumber", fd_renumber(from: i32, to: i32));
    shadow!(
        linker, project,
        "path_open",
        path_open_flat(d: i32, df: i32, p: i32, l: i32, of: i32, rb: i64, ri: i64, ff: i32, out: i32)
    );
    shadow!(
linker, project, "path_create_directory", path_create_directory(fd: i32, p: i32, l: i32));
    shadow!(
linker, project, "path_remove_directory", path_remove_directory(fd: i32, p: i32, l: i32));
    shadow!(
linker, project, "path_unlink_file", path_unlink_file(fd: i32, p: i32, l: i32));
    shadow!(
        linker, project,
        "path_link",
        path_link(ofd: i32, f: i32, o: i32, ol: i32, nfd: i32, n: i32, nl: i32)
    );
    shadow!(
linker, project, "path_symlink", path_symlink(o: i32, ol: i32, fd: i32, n: i32, nl: i32));
    shadow!(
linker, project, "path_rename", path_rename(fd: i32, o: i32, ol: i32, nfd: i32, n: i32, nl: i32));
    Ok(())
}
