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
use wasmtime::{Instance, Memory, Store, TypedFunc, UpdateDeadline, Val};

use super::door::Inbox;
use super::engine::{Image, Program};
use super::memory_budget::GuestLimiter;
use super::output::{Capture, Tee};
use super::preopen_reset::RESET;
use super::preopens::{FoldersError, SessionConfig, wasi_context, watched_folders};
use super::saved_state::{GlobalValue, SavedState};
use super::turn::{DeadlineReached, Ended, TurnOutput, classify, run_turn};

mod saved;

const WASM_PAGE: u64 = 64 << 10;
use super::state::GuestState;
use crate::sandbox::paths::WORKSPACE;
use crate::sandbox::{GuestServices, OutputKind, OutputSink};

/// The first turn of every interpreter: its hooks, the HTTP libraries' way to the host, and
/// the changes made to packages as they are imported (`UPGRADE`).
pub const PRELUDE: &str = concat!(
    include_str!("../../../runtime/guest/prelude.py"),
    include_str!("../../../runtime/guest/network.py"),
    include_str!("../../../runtime/guest/after_import.py"),
    include_str!("../../../runtime/guest/native_ints.py"),
    include_str!("../../../runtime/guest/package_data.py")
);
/// An interpreter started from a warm image has run the prelude already; it only needs
/// generators of its own (the prelude defines the hook).
const REBIRTH: &str = "if True: __code_sandbox_rebirth__()";
/// Lets go of files the interpreter keeps open on its own (matplotlib's font cache).
const RELEASE: &str = "if True: __code_sandbox_release__()";

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
    #[error(transparent)]
    Folders(#[from] FoldersError),
    #[error("could not start the interpreter: {0}")]
    Start(String),
    #[error(
        "the interpreter holds {} file(s) open{}, and open files cannot be saved; close them (a `with` block closes a file) and try again",
        .0.count, open_names(&.0.names)
    )]
    OpenFiles(OpenFiles),
    #[error("could not read the image's initial memory: {0}")]
    Image(#[from] super::compile::EngineError),
    /// The server-wide memory budget could not give the interpreter its memory, even after
    /// suspending every idle sandbox: nothing is lost, the caller may try again later.
    #[error(
        "the server-wide memory budget (CODE_SANDBOX_TOTAL_MEMORY_MB) has no room for this interpreter right now, and every other sandbox holding memory is running a call; try again when one finishes"
    )]
    BudgetFull,
}

pub struct Session {
    /// The image this interpreter started from: its saved states apply to that image only.
    program: Arc<Program>,
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
    /// Tools the next turn's code may call (code mode); that turn takes them.
    lent_tools: Option<Arc<dyn GuestServices>>,
}

impl Session {
    /// Instantiates a fresh interpreter and runs the prelude in it (or, from a warm image, only
    /// reseeds its generators).
    pub async fn start(program: &Arc<Program>, cfg: &SessionConfig) -> Result<Session, SessionError> {
        let offset = match program.image {
            Image::Plain => Duration::ZERO,
            Image::Warm { clock_offset, .. } => clock_offset,
        };
        let mut session = Self::instantiate(program, cfg, offset).await?;
        session.reread_preopens().await?;
        let first = match program.image {
            Image::Plain => PRELUDE,
            Image::Warm { .. } => REBIRTH,
        };
        session.first_turn(first).await?;
        Ok(session)
    }

    /// Starts an interpreter in a saved state of the same image. `reseed` gives it generators
    /// of its own (a fork); a restore keeps the saved ones.
    pub async fn start_from(
        program: &Arc<Program>,
        cfg: &SessionConfig,
        saved: &SavedState,
        reseed: bool,
    ) -> Result<Session, SessionError> {
        if !program.answers_to(&saved.header.image) {
            return Err(SessionError::Start(
                "the saved state belongs to another image".into(),
            ));
        }
        Self::restore(program, cfg, saved, None, reseed).await
    }

    /// Starts an interpreter of `program` in a state saved from another image of the same
    /// runtime, whose initial memory `base` is laid under the state's pages
    /// (`older_image`); it then runs, and is saved, as `program`'s.
    pub async fn start_over(
        program: &Arc<Program>,
        cfg: &SessionConfig,
        saved: &SavedState,
        base: &[u8],
    ) -> Result<Session, SessionError> {
        Self::restore(program, cfg, saved, Some(base), false).await
    }

    pub fn program(&self) -> &Arc<Program> {
        &self.program
    }

    /// Empties libc's table of preopened folders, which an image or a saved state brings from
    /// the interpreter it was taken in: the guest reads this Store's folders on its next path.
    async fn reread_preopens(&mut self) -> Result<(), SessionError> {
        let start = |e: wasmtime::Error| SessionError::Start(format!("{e:#}"));
        let reset = self
            .instance
            .get_typed_func::<(), ()>(&mut self.store, RESET)
            .map_err(start)?;
        reset.call_async(&mut self.store, ()).await.map_err(start)
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
        program: &Arc<Program>,
        cfg: &SessionConfig,
        clock_offset: Duration,
    ) -> Result<Session, SessionError> {
        let stdout = Capture::new(cfg.output_bytes, OutputKind::Stdout);
        let stderr = Capture::new(cfg.output_bytes, OutputKind::Stderr);
        let clock_start = Instant::now();
        let wasi = wasi_context(program, cfg, &stdout, &stderr, clock_start, clock_offset)?;
        let limits = GuestLimiter::new(cfg.memory_bytes, cfg.memory_budget.clone());
        let fs = watched_folders(program, cfg)?;
        let state = GuestState {
            wasi,
            fs,
            limits,
            inbox: Inbox::default(),
            deadline: Instant::now() + Duration::from_secs(30),
        };
        let mut store = Store::new(&program.engine, state);
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
        if program.metered {
            store
                .set_fuel(u64::MAX)
                .map_err(|e| SessionError::Start(format!("{e:#}")))?;
        }
        let start = |e: wasmtime::Error| SessionError::Start(format!("{e:#}"));
        let instance = match program.pre.instantiate_async(&mut store).await {
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
            program: program.clone(),
            instance,
            clock_start,
            clock_offset,
            store,
            memory,
            host_alloc,
            turn,
            stdout,
            stderr,
            metered: program.metered,
            lent_tools: None,
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

    /// Copies all output to `sink` until the returned value drops.
    pub fn tee_output(&self, sink: OutputSink) -> Tee {
        Capture::tee(&[&self.stdout, &self.stderr], sink)
    }

    /// Lets the next turn's code call `tools` (code mode); only that turn, not the after-call
    /// turn or any later one.
    pub fn lend_tools(&mut self, tools: Option<Arc<dyn GuestServices>>) {
        self.lent_tools = tools;
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
        self.store.data_mut().inbox = Inbox {
            tools: self.lent_tools.take().map(|t| (t, deadline)),
            ..Inbox::default()
        };
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
