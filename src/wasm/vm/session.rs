//! One interpreter: a Store, its instance, and the turns run in it.
//!
//! The Store owns everything the guest can reach (its WASI context with exactly the
//! preopens below, its memory limiter, its captured output), so dropping the Store is the
//! whole cleanup. Any trap or timeout drops it: the guest's re-entry guard makes a trapped
//! instance unusable anyway (docs/RUNTIME-INTERFACE.md, "Turns").

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wasmtime::{Instance, Memory, Store, Trap, TypedFunc, UpdateDeadline, Val};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use super::door::Inbox;
use super::engine::{CompiledRuntime, Image};
use super::guest_fs::GuestFs;
use super::memory_budget::{GuestLimiter, MemoryBudget};
use super::output::{Capture, Captured};
use super::saved_state::{GlobalValue, SavedState};

const WASM_PAGE: u64 = 64 << 10;
use super::state::GuestState;
use crate::disk_quota::DiskQuota;

// Guest paths. The workspace (the working folder and HOME) is the one every tool names.
use crate::sandbox::paths::WORKSPACE;
const STDLIB_DIR: &str = "/usr/local/lib";
pub const SITE_PACKAGES: &str = "/usr/local/site-packages";

pub const PRELUDE: &str = include_str!("../../../runtime/guest/prelude.py");
/// An interpreter started from a warm image has run the prelude already; it only needs
/// generators of its own (the prelude defines the hook).
const REBIRTH: &str = "if True: __code_sandbox_rebirth__()";
/// Lets go of files the interpreter keeps open on its own (matplotlib's font cache).
const RELEASE: &str = "if True: __code_sandbox_release__()";

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

/// Why a turn ended the interpreter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    Timeout,
    Fuel,
    StackOverflow,
    /// `os._exit(n)`.
    Exit(i32),
    /// `exit()`/`quit()`: the guest asked to stop.
    Quit(i32),
    /// The client cancelled the call, or the sandbox was closed under it.
    Cancelled,
    Trap(String),
}

/// Everything one turn produced.
#[derive(Debug)]
pub struct TurnOutput {
    /// The turn's exit code (0 ok, 1 exception, n for `sys.exit(n)`), or why the session ended.
    pub status: Result<i32, Ended>,
    pub stdout: Captured,
    pub stderr: Captured,
    pub messages: Vec<Vec<u8>>,
    pub dropped_messages: usize,
    pub duration: Duration,
    /// The server-wide memory budget refused the guest memory during the turn.
    pub memory_budget_full: bool,
}

impl TurnOutput {
    /// Folds the host's after-call turn (figures and the health check) into this one. The
    /// code's own status stands whatever happened there, and that turn's own output is kept
    /// only when it ran cleanly.
    pub fn absorb_after_call(&mut self, after: TurnOutput) {
        self.messages.extend(after.messages);
        self.dropped_messages += after.dropped_messages;
        self.duration += after.duration;
        self.memory_budget_full |= after.memory_budget_full;
        if after.status == Ok(0) {
            self.stdout.text.push_str(&after.stdout.text);
            self.stderr.text.push_str(&after.stderr.text);
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the call's time limit was reached")]
struct DeadlineReached;

/// Files a guest holds open: how many, and the paths of those in its own folders.
#[derive(Debug)]
pub struct OpenFiles {
    pub count: usize,
    pub names: Vec<String>,
}

fn open_names(names: &[String]) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!(" ({})", names.join(", "))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("could not prepare the sandbox folders: {0}")]
    Folders(String),
    #[error("could not start the interpreter: {0}")]
    Start(String),
    #[error(
        "the interpreter holds {} file(s) open{}, and open files cannot be saved; close them (a `with` block closes a file) and try again",
        .0.count, open_names(&.0.names)
    )]
    OpenFiles(OpenFiles),
    #[error("could not read the image's initial memory: {0}")]
    Image(#[from] super::engine::EngineError),
    /// The server-wide memory budget could not give the interpreter its memory, even after
    /// suspending every idle sandbox: nothing is lost, the caller may try again later.
    #[error(
        "the server-wide memory budget (CODE_SANDBOX_TOTAL_MEMORY_MB) has no room for this interpreter right now, and every other sandbox holding memory is running a call; try again when one finishes"
    )]
    BudgetFull,
}

pub struct Session {
    /// The image this interpreter started from: its saved states apply to that image only.
    runtime: Arc<CompiledRuntime>,
    pub(super) store: Store<GuestState>,
    pub(super) instance: Instance,
    /// The host folders the guest sees as its workspace and /tmp, to name its open files.
    folders: (PathBuf, PathBuf),
    /// When the guest's monotonic clock began, and what it started from (see [`Monotonic`]).
    clock_start: Instant,
    clock_offset: Duration,
    memory: Memory,
    host_alloc: TypedFunc<i32, i32>,
    turn: TypedFunc<(i32, i32), i32>,
    stdout: Capture,
    stderr: Capture,
    metered: bool,
}

fn wasi_context(
    interp: &CompiledRuntime,
    cfg: &SessionConfig,
    stdout: &Capture,
    stderr: &Capture,
    clock_start: Instant,
    offset: Duration,
) -> Result<WasiP1Ctx, SessionError> {
    let folders = |e: wasmtime::Error| SessionError::Folders(format!("{e:#}"));
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
    let files = &interp.files;
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
    Ok(b.build_p1())
}

/// The descriptor table's starting point, in the order `wasi_context` preopens: the
/// read-only stdlib, mpl-data and site-packages, then the workspace and /tmp, which count
/// towards the disk quota.
fn watched_folders(interp: &CompiledRuntime, cfg: &SessionConfig) -> Result<GuestFs, SessionError> {
    let open = |p: &PathBuf, watched: bool| {
        cap_std::fs::Dir::open_ambient_dir(p, cap_std::ambient_authority())
            .map(|d| (d, watched))
            .map_err(|e| SessionError::Folders(format!("{}: {e}", p.display())))
    };
    let preopens = vec![
        open(&interp.files.lib_dir, false)?,
        open(&interp.files.mpl_data, false)?,
        open(&cfg.site_packages, false)?,
        open(&cfg.workspace, true)?,
        open(&cfg.tmp, true)?,
    ];
    Ok(GuestFs::new(cfg.quota.clone(), preopens))
}

fn classify(err: wasmtime::Error) -> Ended {
    if err.is::<DeadlineReached>() {
        return Ended::Timeout;
    }
    if let Some(exit) = err.downcast_ref::<I32Exit>() {
        return Ended::Exit(exit.0);
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => Ended::Fuel,
        Some(Trap::Interrupt) => Ended::Timeout,
        Some(Trap::StackOverflow) => Ended::StackOverflow,
        _ => Ended::Trap(format!("{err:#}")),
    }
}

impl Session {
    /// Instantiates a fresh interpreter and runs the prelude in it (or, from a warm image, only
    /// reseeds its generators).
    pub async fn start(interp: &Arc<CompiledRuntime>, cfg: &SessionConfig) -> Result<Session, SessionError> {
        let offset = match interp.image {
            Image::Plain => Duration::ZERO,
            Image::Warm { clock_offset, .. } => clock_offset,
        };
        let mut session = Self::instantiate(interp, cfg, offset).await?;
        let first = match interp.image {
            Image::Plain => PRELUDE,
            Image::Warm { .. } => REBIRTH,
        };
        session.first_turn(first).await?;
        Ok(session)
    }

    /// Starts an interpreter in a saved state of the same image. `reseed` gives it generators
    /// of its own (a fork); a restore keeps the saved ones.
    pub async fn start_from(
        interp: &Arc<CompiledRuntime>,
        cfg: &SessionConfig,
        saved: &SavedState,
        reseed: bool,
    ) -> Result<Session, SessionError> {
        if saved.header.image != interp.id {
            return Err(SessionError::Start(
                "the saved state belongs to another image".into(),
            ));
        }
        let offset = Duration::from_nanos(saved.header.clock_ns);
        let mut session = Self::instantiate(interp, cfg, offset).await?;
        let start = |e: wasmtime::Error| SessionError::Start(format!("{e:#}"));
        let have = session.memory.data_size(&session.store) as u64;
        if saved.header.memory_bytes > have {
            // memory.grow counts WebAssembly pages of 64 KiB.
            let grow = (saved.header.memory_bytes - have).div_ceil(WASM_PAGE);
            // Async: the budget may first suspend idle sandboxes to make room.
            if let Err(e) = session.memory.grow_async(&mut session.store, grow).await {
                return Err(if session.store.data_mut().limits.take_budget_refusal() {
                    SessionError::BudgetFull
                } else {
                    start(e)
                });
            }
        }
        let data = session.memory.data_mut(&mut session.store);
        for (at, page) in saved.pages() {
            let Some(dst) = data.get_mut(at..at + page.len()) else {
                return Err(SessionError::Start(
                    "the saved state does not fit the memory".into(),
                ));
            };
            dst.copy_from_slice(page);
        }
        for (name, value) in &saved.header.globals {
            let global = session
                .instance
                .get_global(&mut session.store, name)
                .ok_or_else(|| SessionError::Start(format!("the image has no global {name}")))?;
            let v = match *value {
                GlobalValue::I32(v) => Val::I32(v),
                GlobalValue::I64(v) => Val::I64(v),
                GlobalValue::F32(v) => Val::F32(v),
                GlobalValue::F64(v) => Val::F64(v),
            };
            global.set(&mut session.store, v).map_err(start)?;
        }
        session.first_turn(if reseed { REBIRTH } else { "None" }).await?;
        Ok(session)
    }

    /// This interpreter's state between turns, as the pages that differ from its image's
    /// initial memory. Refused while the guest holds files open: a new Store could not give it
    /// the same descriptors.
    pub async fn capture(&mut self) -> Result<SavedState, SessionError> {
        if self.store.data().fs.opened() > 0 {
            // If the code broke the hook, the count below still tells the user what to close.
            let _ = self
                .turn(RELEASE, Duration::from_secs(5), None, &CancellationToken::new())
                .await;
        }
        let opened = self.store.data().fs.opened();
        if opened > 0 {
            let names = self
                .store
                .data()
                .fs
                .open_paths()
                .into_iter()
                .filter_map(|p| self.guest_path(&p))
                .collect();
            return Err(SessionError::OpenFiles(OpenFiles { count: opened, names }));
        }
        let names: Vec<String> = self
            .instance
            .exports(&mut self.store)
            .filter(|e| e.name().starts_with("__wizer_global_"))
            .map(|e| e.name().to_string())
            .collect();
        let mut globals = Vec::new();
        for name in names {
            let Some(g) = self.instance.get_global(&mut self.store, &name) else {
                continue;
            };
            let v = match g.get(&mut self.store) {
                Val::I32(v) => GlobalValue::I32(v),
                Val::I64(v) => GlobalValue::I64(v),
                Val::F32(v) => GlobalValue::F32(v),
                Val::F64(v) => GlobalValue::F64(v),
                _ => return Err(SessionError::Start(format!("global {name} cannot be saved"))),
            };
            globals.push((name, v));
        }
        let clock = self.clock_offset + self.clock_start.elapsed();
        let clock_ns = u64::try_from(clock.as_nanos()).unwrap_or(u64::MAX);
        let base = self.runtime.base_memory().await?;
        Ok(SavedState::diff(
            &self.runtime.id,
            self.memory.data(&self.store),
            &base,
            clock_ns,
            globals,
        ))
    }

    /// Where the guest sees a host path in its writable folders.
    fn guest_path(&self, host: &std::path::Path) -> Option<String> {
        for (root, guest) in [(&self.folders.0, WORKSPACE), (&self.folders.1, "/tmp")] {
            let root = root.canonicalize().unwrap_or_else(|_| root.clone());
            if let Ok(rest) = host.strip_prefix(&root) {
                return Some(
                    format!("{guest}/{}", rest.display())
                        .trim_end_matches('/')
                        .to_string(),
                );
            }
        }
        None
    }

    pub fn runtime(&self) -> &Arc<CompiledRuntime> {
        &self.runtime
    }

    async fn first_turn(&mut self, code: &str) -> Result<(), SessionError> {
        let out = self
            .turn(code, Duration::from_secs(30), None, &CancellationToken::new())
            .await;
        match out.status {
            Ok(0) => Ok(()),
            other => Err(SessionError::Start(format!(
                "the interpreter's first turn failed ({other:?}): {}",
                out.stderr.text
            ))),
        }
    }

    /// A Store with the sandbox's folders and limits, and the image instantiated in it.
    async fn instantiate(
        interp: &Arc<CompiledRuntime>,
        cfg: &SessionConfig,
        clock_offset: Duration,
    ) -> Result<Session, SessionError> {
        let stdout = Capture::new(cfg.output_bytes);
        let stderr = Capture::new(cfg.output_bytes);
        let clock_start = Instant::now();
        let wasi = wasi_context(interp, cfg, &stdout, &stderr, clock_start, clock_offset)?;
        let limits = GuestLimiter::new(cfg.memory_bytes, cfg.memory_budget.clone());
        let fs = watched_folders(interp, cfg)?;
        let state = GuestState {
            wasi,
            fs,
            limits,
            inbox: Inbox::default(),
            deadline: Instant::now() + Duration::from_secs(30),
        };
        let mut store = Store::new(&interp.engine, state);
        store.limiter_async(|s| &mut s.limits);
        store.epoch_deadline_callback(|ctx| {
            if Instant::now() >= ctx.data().deadline {
                Err(DeadlineReached.into())
            } else {
                // Yielding every tick lets other sandboxes' calls and the protocol run.
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store.set_epoch_deadline(1);
        if interp.metered {
            store
                .set_fuel(u64::MAX)
                .map_err(|e| SessionError::Start(format!("{e:#}")))?;
        }
        let start = |e: wasmtime::Error| SessionError::Start(format!("{e:#}"));
        let instance = match interp.pre.instantiate_async(&mut store).await {
            Ok(i) => i,
            Err(_) if store.data_mut().limits.take_budget_refusal() => {
                return Err(SessionError::BudgetFull);
            }
            Err(e) => return Err(start(e)),
        };
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or_else(|| SessionError::Start("the module exports no memory".into()))?;
        let host_alloc = instance
            .get_typed_func::<i32, i32>(&mut store, "host_alloc")
            .map_err(start)?;
        let turn = instance
            .get_typed_func::<(i32, i32), i32>(&mut store, "turn")
            .map_err(start)?;
        Ok(Session {
            folders: (cfg.workspace.clone(), cfg.tmp.clone()),
            runtime: interp.clone(),
            instance,
            clock_start,
            clock_offset,
            store,
            memory,
            host_alloc,
            turn,
            stdout,
            stderr,
            metered: interp.metered,
        })
    }

    /// The guest's monotonic clock now, as [`Monotonic`] reports it (without an offset).
    pub fn clock_elapsed(&self) -> Duration {
        self.clock_start.elapsed()
    }

    /// Size of the guest's linear memory, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.memory.data_size(&self.store)
    }

    /// Output written so far in the running turn, for progress reports.
    pub fn live_output(&self) -> (Capture, Capture) {
        (self.stdout.clone(), self.stderr.clone())
    }

    /// Runs one turn of source under a time limit and, when metered, a fuel budget.
    pub async fn turn(
        &mut self,
        code: &str,
        timeout: Duration,
        fuel: Option<u64>,
        cancel: &CancellationToken,
    ) -> TurnOutput {
        let started = Instant::now();
        let deadline = started + timeout;
        self.store.data_mut().deadline = deadline;
        self.store.data_mut().inbox = Inbox::default();
        self.store.data_mut().limits.take_budget_refusal();
        self.store.set_epoch_deadline(1);
        if self.metered {
            let _ = self.store.set_fuel(fuel.unwrap_or(u64::MAX));
        }
        let status = match i32::try_from(code.len()) {
            Err(_) => Err(Ended::Trap("source too large".into())),
            Ok(len) => {
                let run = run_turn(
                    &mut self.store,
                    self.memory,
                    &self.host_alloc,
                    &self.turn,
                    code.as_bytes(),
                    len,
                );
                // Epoch checks stop busy guests; this stops guests blocked in a host call
                // (a long sleep), which epoch checks never interrupt.
                let bounded = tokio::time::timeout_at(deadline.into(), run);
                tokio::select! {
                    _ = cancel.cancelled() => Err(Ended::Cancelled),
                    r = bounded => match r {
                        Err(_) => Err(Ended::Timeout),
                        Ok(Ok(rc)) if (256..512).contains(&rc) => Err(Ended::Quit(rc & 0xff)),
                        Ok(Ok(rc)) => Ok(rc),
                        Ok(Err(e)) => Err(classify(e)),
                    },
                }
            }
        };
        let inbox = self.store.data_mut().inbox.take();
        let memory_budget_full = self.store.data_mut().limits.take_budget_refusal();
        TurnOutput {
            status,
            stdout: self.stdout.take(),
            stderr: self.stderr.take(),
            messages: inbox.messages,
            dropped_messages: inbox.dropped,
            duration: started.elapsed(),
            memory_budget_full,
        }
    }
}

async fn run_turn(
    store: &mut Store<GuestState>,
    memory: Memory,
    host_alloc: &TypedFunc<i32, i32>,
    turn: &TypedFunc<(i32, i32), i32>,
    code: &[u8],
    len: i32,
) -> wasmtime::Result<i32> {
    if len == 0 {
        return turn.call_async(&mut *store, (0, 0)).await;
    }
    let ptr = host_alloc.call_async(&mut *store, len).await?;
    if ptr == 0 {
        // The guest reports "no memory for this turn's code" itself and lives on.
        return turn.call_async(&mut *store, (0, len)).await;
    }
    memory.write(&mut *store, ptr as u32 as usize, code)?;
    turn.call_async(&mut *store, (ptr, len)).await
}
