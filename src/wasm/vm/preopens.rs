//! What the guest sees of the host: exactly the folders preopened for it (the read-only
//! stdlib, mpl-data and packages, the read-write workspace and /tmp), its environment, and a
//! monotonic clock that never runs backwards across a snapshot.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::engine::Program;
use super::guest_fs::{Folder, GuestFs};
use super::memory_budget::MemoryBudget;
use super::output::Capture;
use crate::disk::quota::DiskQuota;
// Guest paths. The workspace (the working folder and HOME) is the one every tool names.
use crate::sandbox::mounts::MOUNT_ROOT;
use crate::sandbox::paths::WORKSPACE;
const STDLIB_DIR: &str = "/usr/local/lib";
pub const SITE_PACKAGES: &str = "/usr/local/site-packages";

/// A sandbox folder could not be opened for the guest.
#[derive(Debug, thiserror::Error)]
#[error("could not prepare the sandbox folders: {0}")]
pub struct FoldersError(String);

fn shared_folder_gone(m: &crate::sandbox::mounts::Mount, why: &str) -> FoldersError {
    FoldersError(format!(
        "the shared folder {} ({}) cannot be opened: {why}. Put it back, or remove it from CODE_SANDBOX_READ_DIRS and restart the server",
        m.guest(),
        m.host.display()
    ))
}

/// The guest's monotonic clock: nanoseconds since the Store began, plus an offset (the warm-up's
/// own reading, for interpreters started from a warm image), so it never runs backwards.
struct Monotonic {
    start: Instant,
    offset: Duration,
}

impl wasmtime_wasi::HostMonotonicClock for Monotonic {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        u64::try_from((self.offset + self.start.elapsed()).as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Host folders and limits for one interpreter.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    pub workspace: PathBuf,
    pub tmp: PathBuf,
    pub site_packages: PathBuf,
    pub quota: Arc<DiskQuota>,
    pub memory_bytes: u64,
    /// The server-wide budget every sandbox's memory also counts against.
    pub memory_budget: Arc<MemoryBudget>,
    pub output_bytes: usize,
}

impl SessionConfig {
    /// Folders under `dir` (made here) and generous limits, for an interpreter outside any
    /// sandbox: the warm-up, and the bench's in-process baseline.
    pub fn throwaway(dir: &std::path::Path, memory_bytes: u64) -> std::io::Result<SessionConfig> {
        let cfg = SessionConfig {
            workspace: dir.join("workspace"),
            tmp: dir.join("tmp"),
            site_packages: dir.join("site-packages"),
            quota: Arc::new(DiskQuota::new(1 << 30)),
            memory_bytes,
            memory_budget: MemoryBudget::new(u64::MAX),
            output_bytes: 1 << 20,
        };
        for d in [&cfg.workspace, &cfg.tmp, &cfg.site_packages] {
            std::fs::create_dir_all(d)?;
        }
        Ok(cfg)
    }
}

pub fn wasi_context(
    program: &Program,
    cfg: &SessionConfig,
    stdout: &Capture,
    stderr: &Capture,
    clock_start: Instant,
    offset: Duration,
) -> Result<WasiP1Ctx, FoldersError> {
    let folders = |e: wasmtime::Error| FoldersError(format!("{e:#}"));
    let mut b = WasiCtxBuilder::new();
    b.stdout(stdout.clone()).stderr(stderr.clone());
    b.monotonic_clock(Monotonic {
        start: clock_start,
        offset,
    });
    // Not `allow_blocking_current_thread`: it would also run a guest's `time.sleep` on the
    // worker thread, where the call's deadline can no longer stop it.
    // argv[1:] is appended to sys.path on the first turn: that is how installed packages
    // become importable.
    b.args(&["/usr/local/bin/python.wasm", SITE_PACKAGES]);
    b.envs(&[
        ("HOME", WORKSPACE),
        ("PWD", WORKSPACE),
        ("TMPDIR", "/tmp"),
        ("PYTHONTZPATH", ""),
        ("LANG", "C.UTF-8"),
        ("MPLBACKEND", "Agg"),
        ("MPLCONFIGDIR", "/tmp/.matplotlib"),
    ]);
    let files = &program.files;
    b.preopened_dir(&files.lib_dir, STDLIB_DIR, FsPerms::ReadOnly)
        .map_err(folders)?;
    let mpl_guest = format!(
        "{STDLIB_DIR}/{}/matplotlib/mpl-data",
        crate::runtime::manifest().artifacts.stdlib_guest_name
    );
    b.preopened_dir(&files.mpl_data, &mpl_guest, FsPerms::ReadOnly)
        .map_err(folders)?;
    b.preopened_dir(&cfg.site_packages, SITE_PACKAGES, FsPerms::ReadOnly)
        .map_err(folders)?;
    b.preopened_dir(&cfg.workspace, WORKSPACE, FsPerms::ReadWrite)
        .map_err(folders)?;
    b.preopened_dir(&cfg.tmp, "/tmp", FsPerms::ReadWrite)
        .map_err(folders)?;
    // The user's shared folders last, read-only: a missing one fails the start with its name,
    // since leaving it out would change the layout the guest's memory expects.
    if let Some(index) = program.mounts.index() {
        b.preopened_dir(index, MOUNT_ROOT, FsPerms::ReadOnly)
            .map_err(folders)?;
    }
    for m in program.mounts.iter() {
        b.preopened_dir(&m.host, m.guest(), FsPerms::ReadOnly)
            .map_err(|e| shared_folder_gone(m, &format!("{e:#}")))?;
    }
    Ok(b.build_p1())
}

/// The descriptor table's starting point, in the order `wasi_context` preopens: the
/// read-only stdlib, mpl-data and site-packages, then the workspace and /tmp, which count
/// towards the disk quota, then the shared folders (read-only, never counted).
pub fn watched_folders(program: &Program, cfg: &SessionConfig) -> Result<GuestFs, FoldersError> {
    let open = |p: &PathBuf, folder: Folder| {
        cap_std::fs::Dir::open_ambient_dir(p, cap_std::ambient_authority())
            .map(|d| (d, folder))
            .map_err(|e| FoldersError(format!("{}: {e}", p.display())))
    };
    let mut preopens = vec![
        open(&program.files.lib_dir, Folder::ReadOnly)?,
        open(&program.files.mpl_data, Folder::ReadOnly)?,
        open(&cfg.site_packages, Folder::ReadOnly)?,
        open(&cfg.workspace, Folder::Counted)?,
        open(&cfg.tmp, Folder::Counted)?,
    ];
    if let Some(index) = program.mounts.index() {
        preopens.push(open(&index.to_path_buf(), Folder::ReadOnly)?);
    }
    for m in program.mounts.iter() {
        let d = cap_std::fs::Dir::open_ambient_dir(&m.host, cap_std::ambient_authority())
            .map_err(|e| shared_folder_gone(m, &e.to_string()))?;
        let hidden = m.hidden.as_deref().map(std::sync::Arc::from);
        preopens.push((d, Folder::Shared(hidden)));
    }
    Ok(GuestFs::new(cfg.quota.clone(), preopens))
}
