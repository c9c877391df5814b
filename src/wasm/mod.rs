//! The local backend: CPython compiled to WASI, one wasmtime Store per sandbox.

pub mod door;
pub mod engine;
mod files;
mod guest_fs;
mod guest_memory;
pub mod memory_budget;
pub mod output;
mod registry;
mod remove_tree;
mod results;
pub mod runtime_cell;
pub mod session;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use self::files::WasmFiles;
use self::memory_budget::{MemoryBudget, WASM32_MAX_BYTES};
use self::registry::{Registry, Sandbox};
use self::runtime_cell::RuntimeCell;
use self::session::{Session, SessionConfig};
use crate::config::{MAX_TIMEOUT, Settings};
use crate::runtime::Layout;
use crate::sandbox::{
    CreateOptions, ExecOptions, Execution, InstallOutcome, Interpreter, Limits, SandboxError, SandboxFiles,
    SandboxInfo, SandboxStatus,
};

/// Run after every call: sends open matplotlib figures as PNGs through the door.
const AFTER_CALL: &str = "__code_sandbox_after__()";
/// Past the call's own time, what figure drawing may take before the interpreter is stopped
/// (the guest stops starting new figures at the call's deadline itself).
const DRAWING_GRACE: Duration = Duration::from_secs(1);
const WARM_UP: &str = "0";
const SPARE_DELAY: Duration = Duration::from_millis(30);
const FORGET_WARM_UP: &str = "__import__('builtins').__dict__.pop('_', None) and None";
const INVALIDATE_CACHES: &str = "__import__('importlib').invalidate_caches()";
/// Smallest memory limit that still starts the interpreter (its image alone is 40 MiB).
const MIN_MEMORY_MB: u64 = 64;
/// How often removing a folder that could not be removed is tried again.
const LEFTOVER_RETRY: Duration = Duration::from_secs(30);
/// How often a long call reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// What a running call must undo however it ends (finished, failed, or its future dropped):
/// the sandbox's busy mark and the helper tasks watching it. A call dropped while the guest
/// ran leaves the interpreter mid-turn, so the sandbox is marked for a fresh one.
#[derive(Default)]
struct CallGuard {
    busy: Option<Arc<Sandbox>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Set once the guest's turns are over.
    done: bool,
}

impl CallGuard {
    fn mark_busy(&mut self, sb: &Arc<Sandbox>) {
        sb.busy.store(true, Ordering::SeqCst);
        self.busy = Some(sb.clone());
    }

    fn finish(mut self) {
        self.done = true;
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Some(sb) = self.busy.take() {
            if !self.done {
                sb.abandoned.store(true, Ordering::SeqCst);
            }
            sb.busy.store(false, Ordering::SeqCst);
        }
        for t in &self.tasks {
            t.abort();
        }
    }
}

pub struct WasmBackend {
    settings: Arc<Settings>,
    /// One sandbox with its interpreter already started, so `create_sandbox` answers in about
    /// a millisecond instead of waiting for the interpreter's first turn.
    spare: Arc<tokio::sync::Mutex<Option<Arc<Sandbox>>>>,
    /// Set at shutdown, so no new interpreter starts while the process winds down.
    stopping: Arc<std::sync::atomic::AtomicBool>,
    /// Bounds the calls running code at once, across sandboxes.
    calls: Arc<tokio::sync::Semaphore>,
    runtime: Arc<RuntimeCell>,
    registry: Arc<Registry>,
    files: WasmFiles,
    /// Guest memory of all sandboxes together.
    memory: Arc<MemoryBudget>,
}

impl WasmBackend {
    /// Sets up the backend and starts installing the runtime in the background.
    pub fn new(settings: Arc<Settings>) -> Result<Self, SandboxError> {
        let layout = Layout::new(settings.home_dir());
        let registry = Arc::new(Registry::new(layout.clone(), settings.max_sandboxes)?);
        registry.clean_leftovers();
        let runtime = RuntimeCell::new(layout, settings.fuel_per_call > 0);
        runtime.start();
        {
            // Housekeeping: close idle sandboxes (when that is on) and retry removing folders
            // that could not be removed before.
            let idle = (settings.idle_seconds > 0).then(|| Duration::from_secs(settings.idle_seconds));
            let every = idle
                .map_or(LEFTOVER_RETRY, |i| (i / 2).min(LEFTOVER_RETRY))
                .max(Duration::from_millis(200));
            let weak = Arc::downgrade(&registry);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                loop {
                    tick.tick().await;
                    let Some(r) = weak.upgrade() else { break };
                    if let Some(idle) = idle {
                        r.reap_idle(idle).await;
                    }
                    let r2 = r.clone();
                    let _ = tokio::task::spawn_blocking(move || r2.retry_leftovers()).await;
                }
            });
        }
        let total = settings
            .total_memory_mb
            .map_or_else(memory_budget::half_of_machine, |mb| mb.saturating_mul(1 << 20));
        tracing::info!("guest memory budget for all sandboxes: {} MiB", total >> 20);
        let backend = WasmBackend {
            memory: MemoryBudget::new(total),
            spare: Arc::default(),
            stopping: Arc::default(),
            calls: Arc::new(tokio::sync::Semaphore::new(settings.max_concurrent_calls.max(1))),
            files: WasmFiles::new(registry.clone()),
            settings,
            runtime,
            registry,
        };
        backend.warm_spare();
        Ok(backend)
    }

    /// Starts a spare interpreter in the background, unless one is ready.
    fn warm_spare(&self) {
        let spare = self.spare.clone();
        let runtime = self.runtime.clone();
        let registry = self.registry.clone();
        let (limits, _) = self.limits(&CreateOptions::default());
        let stopping = self.stopping.clone();
        let memory = self.memory.clone();
        tokio::spawn(async move {
            // Let the call that took the last spare run first: on two cores, warming beside
            // it would slow it down.
            tokio::time::sleep(SPARE_DELAY).await;
            let mut slot = spare.lock().await;
            if slot.is_some() || stopping.load(Ordering::SeqCst) {
                return;
            }
            let Ok(interp) = runtime.get().await else { return };
            let Ok(sb) = registry.prepare(limits) else { return };
            match Session::start(&interp, &Self::session_config(&sb, &memory)).await {
                Ok(mut session) => {
                    // Walk the paths a first call takes (compile, echo, door, figure check) so
                    // their pages are faulted in now, not while the user waits; leave no `_`.
                    let quiet = CancellationToken::new();
                    for code in [WARM_UP, AFTER_CALL, FORGET_WARM_UP] {
                        session.turn(code, Duration::from_secs(10), None, &quiet).await;
                    }
                    sb.slot.lock().await.session = Some(session);
                    *slot = Some(sb);
                }
                Err(e) => {
                    tracing::warn!("could not warm a spare sandbox: {e}");
                    registry.discard(&sb);
                }
            }
        });
    }

    /// The spare, if it has the limits asked for; one being warmed is waited for, which is
    /// sooner than starting another interpreter beside it.
    async fn take_spare(&self, limits: &Limits) -> Option<Arc<Sandbox>> {
        let mut slot = self.spare.lock().await;
        if slot.as_ref().is_some_and(|sb| sb.limits == *limits) {
            return slot.take();
        }
        None
    }

    /// The pinned cache, then the user's own folder of wheels.
    fn wheel_dirs(&self) -> Vec<std::path::PathBuf> {
        let mut dirs = vec![Layout::new(self.settings.home_dir()).wheels_dir()];
        dirs.extend(self.settings.wheel_dir.clone());
        dirs
    }

    /// The limits a new sandbox really gets, and notes on what was clamped.
    fn limits(&self, opts: &CreateOptions) -> (Limits, Vec<String>) {
        let mut notes = Vec::new();
        let asked = opts.memory_mb.unwrap_or(self.settings.default_memory_mb);
        let budget_mb = self.memory.limit() >> 20;
        let most = (WASM32_MAX_BYTES >> 20).min(budget_mb).max(MIN_MEMORY_MB);
        let memory_mb = asked.clamp(MIN_MEMORY_MB, most);
        if memory_mb != asked {
            let why = if asked < MIN_MEMORY_MB {
                format!("the smallest that runs the interpreter is {MIN_MEMORY_MB} MiB")
            } else if most == WASM32_MAX_BYTES >> 20 {
                "32-bit WebAssembly addresses at most 4096 MiB".to_string()
            } else {
                format!("all sandboxes together may hold {budget_mb} MiB (CODE_SANDBOX_TOTAL_MEMORY_MB)")
            };
            notes.push(format!("memory_mb {asked} was clamped to {memory_mb}: {why}."));
        }
        let limits = Limits {
            timeout_seconds: opts
                .timeout_seconds
                .unwrap_or(self.settings.default_timeout().as_secs())
                .clamp(1, MAX_TIMEOUT.as_secs()),
            memory_mb,
            disk_bytes: self.settings.disk_mb.saturating_mul(1 << 20),
            output_bytes: self.settings.output_limit_bytes as u64,
            fuel_per_call: (self.settings.fuel_per_call > 0).then_some(self.settings.fuel_per_call),
        };
        (limits, notes)
    }

    fn session_config(sb: &Sandbox, memory: &Arc<MemoryBudget>) -> SessionConfig {
        SessionConfig {
            workspace: sb.dirs.workspace.clone(),
            tmp: sb.dirs.tmp.clone(),
            site_packages: sb.dirs.site_packages.clone(),
            quota: sb.quota.clone(),
            memory_bytes: sb.limits.memory_mb << 20,
            memory_budget: memory.clone(),
            output_bytes: sb.limits.output_bytes as usize,
        }
    }
}

#[async_trait]
impl Interpreter for WasmBackend {
    fn backend(&self) -> &'static str {
        "wasm"
    }

    async fn create(&self, opts: CreateOptions) -> Result<SandboxInfo, SandboxError> {
        let interp = self.runtime.get().await?;
        let (limits, notes) = self.limits(&opts);
        let id = match self.take_spare(&limits).await {
            Some(sb) => {
                let id = sb.id.clone();
                if let Err((e, sb)) = self.registry.publish(sb) {
                    *self.spare.lock().await = Some(sb);
                    return Err(e);
                }
                id
            }
            None => {
                let sb = self.registry.reserve(limits.clone())?;
                match Session::start(&interp, &Self::session_config(&sb, &self.memory)).await {
                    Ok(session) => sb.slot.lock().await.session = Some(session),
                    Err(e) => {
                        self.registry.remove(&sb.id);
                        return Err(SandboxError::Backend(e.to_string()));
                    }
                }
                sb.id.clone()
            }
        };
        self.warm_spare();
        Ok(SandboxInfo {
            sandbox_id: id,
            backend: "wasm".into(),
            python_version: interp.files.python_version.clone(),
            workspace: crate::sandbox::paths::WORKSPACE.into(),
            limits,
            notes,
        })
    }

    async fn close(&self, id: &str) -> Result<(), SandboxError> {
        self.registry.close(id).await
    }

    async fn status(&self, id: &str) -> Result<SandboxStatus, SandboxError> {
        let sb = self.registry.get(id)?;
        Ok(sb.status().await)
    }

    async fn list(&self) -> Vec<SandboxStatus> {
        let mut out = Vec::new();
        for sb in self.registry.all() {
            out.push(sb.status().await);
        }
        out
    }

    async fn most_recent(&self) -> Option<String> {
        self.registry.most_recent()
    }

    async fn execute(&self, id: &str, code: &str, opts: ExecOptions) -> Result<Execution, SandboxError> {
        let sb = self.registry.get(id)?;
        let interp = self.runtime.get().await?;
        let _permit = self.calls.clone().try_acquire_owned().map_err(|_| {
            SandboxError::CallCapacity(format!(
                "{} calls are already running code, the most allowed; wait for one to finish (or raise CODE_SANDBOX_MAX_CONCURRENT_CALLS)",
                self.settings.max_concurrent_calls
            ))
        })?;
        let timeout = opts
            .timeout
            .unwrap_or(Duration::from_secs(sb.limits.timeout_seconds))
            .clamp(Duration::from_millis(100), MAX_TIMEOUT);
        // A call cancelled by the client and one whose sandbox is being closed stop alike.
        let cancel = match &opts.cancel {
            Some(c) => c.clone(),
            None => CancellationToken::new(),
        };
        let closing = sb.closing.clone();
        let stop = CancellationToken::new();
        let mut call = CallGuard::default();
        call.tasks.push({
            let stop = stop.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = cancel.cancelled() => stop.cancel(),
                    _ = closing.cancelled() => stop.cancel(),
                }
            })
        });
        let mut slot = sb.slot.lock().await;
        if sb.closing.is_cancelled() {
            // Closed while this call waited for the interpreter.
            return Err(SandboxError::NotFound(sb.id.clone()));
        }
        if sb.abandoned.swap(false, Ordering::SeqCst) {
            slot.session = None;
            slot.lost = true;
            slot.lost_reason = Some("the previous call was abandoned while its code ran".into());
        }
        let mut fresh = None;
        if slot.session.is_none() {
            let session = match Session::start(&interp, &Self::session_config(&sb, &self.memory)).await {
                Ok(s) => s,
                Err(e) => {
                    return Err(SandboxError::Backend(e.to_string()));
                }
            };
            slot.session = Some(session);
            if std::mem::take(&mut slot.lost) {
                fresh = Some(slot.lost_reason.take());
            }
        }
        let Some(session) = slot.session.as_mut() else {
            return Err(SandboxError::Backend(
                "the interpreter could not be started".into(),
            ));
        };
        call.mark_busy(&sb);
        let fuel = sb.limits.fuel_per_call;
        call.tasks.extend(opts.progress.clone().map(|report| {
            let (stdout, _) = session.live_output();
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let mut tick =
                    tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
                loop {
                    tick.tick().await;
                    report(started.elapsed().as_secs_f64(), stdout.last_line());
                }
            })
        }));
        let started = std::time::Instant::now();
        let mut out = session.turn(code, timeout, fuel, &stop).await;
        let mut after_call = results::AfterCall::Healthy;
        if out.status.is_ok() {
            // Figures the code left open come back as images (and are closed), drawn within
            // what is left of the call's time; then the interpreter checks its own machinery.
            // A statement, not an expression, so a replaced displayhook echoes nothing.
            let left = timeout.saturating_sub(started.elapsed());
            let after = session
                .turn(
                    &format!("if True: __code_sandbox_after__({:.3})", left.as_secs_f64()),
                    left + DRAWING_GRACE,
                    fuel,
                    &stop,
                )
                .await;
            after_call = results::after_call(&after);
            out.absorb_after_call(after);
        }
        call.finish();
        let ended = out.status.is_err();
        let mut ex = results::execution(out, fresh, timeout.as_secs_f64());
        let reset_reason = match after_call {
            results::AfterCall::Healthy => None,
            results::AfterCall::Ended(why) => Some(format!(
                "drawing the figures ended the interpreter ({why:?}; usually the call's time limit)"
            )),
            results::AfterCall::Broken(why) => {
                Some(format!("the code broke the interpreter's own machinery ({why})"))
            }
        };
        if let Some(why) = reset_reason {
            ex.state_lost = true;
            ex.notes.push(format!(
                "The interpreter was reset because {why}: variables and imports are gone, files in the workspace remain. The next call starts in a fresh interpreter."
            ));
            slot.session = None;
            slot.lost = true;
            slot.lost_reason = Some(why);
        } else if ended {
            slot.session = None;
            slot.lost = true;
        } else if ex.limit == Some(crate::sandbox::LimitKind::Memory) {
            // Live objects may hold every byte, leaving no room even to parse `del x`: if a
            // trivial turn cannot run, the interpreter is of no more use and is reset.
            let probe = session.turn("None", Duration::from_secs(5), fuel, &stop).await;
            if probe.status != Ok(0) {
                slot.session = None;
                ex.state_lost = true;
                ex.notes.push(
                    "Memory stayed full after the MemoryError, so the interpreter was reset: variables are gone, files remain. Use less memory, or create a sandbox with a larger memory_mb.".into(),
                );
            }
        }
        if sb.closing.is_cancelled() {
            ex.notes
                .retain(|n| !n.contains("files in the workspace remain") && !n.contains("The next call"));
            ex.notes.push(format!(
                "Sandbox {} was closed during this call: its interpreter and its files are gone.",
                sb.id
            ));
        }
        sb.executions.fetch_add(1, Ordering::SeqCst);
        sb.touch();
        Ok(ex)
    }

    async fn install_package(&self, id: &str, name: &str) -> Result<InstallOutcome, SandboxError> {
        let interp = self.runtime.get().await?;
        let wheel_dirs = self.wheel_dirs();
        let pkg = |(name, version): (String, String)| crate::sandbox::Package { name, version };
        if name.trim() == "?" {
            return Ok(InstallOutcome {
                installed: Vec::new(),
                already_available: false,
                available: Some(
                    crate::wheels::install::available(&wheel_dirs)
                        .into_iter()
                        .map(pkg)
                        .collect(),
                ),
                built_in: Some(interp.files.packages.iter().cloned().map(pkg).collect()),
            });
        }
        let sb = self.registry.get(id)?;
        // Holding the interpreter's lock keeps installs and runs in one sandbox in order.
        let mut slot = sb.slot.lock().await;
        if sb.closing.is_cancelled() {
            // Closed while this install waited: nothing may land in its folders.
            return Err(SandboxError::NotFound(sb.id.clone()));
        }
        let request = name.to_string();
        let runtime_packages = interp.files.packages.clone();
        let python = interp.files.python_version.clone();
        let dirs = sb.dirs.clone();
        let quota = sb.quota.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            crate::wheels::install::install(
                &request,
                &crate::wheels::install::Target {
                    python: &python,
                    wheel_dirs: &wheel_dirs,
                    runtime: &runtime_packages,
                    site_packages: &dirs.site_packages,
                    scratch: &dirs.scratch,
                    quota: &quota,
                },
            )
        })
        .await
        .map_err(|e| SandboxError::Backend(format!("the install task failed: {e}")))?
        .map_err(|e| SandboxError::Package(e.to_string()))?;
        if !outcome.installed.is_empty()
            && let Some(session) = slot.session.as_mut()
        {
            // Import finders cache folder listings: make the new packages visible at once.
            session
                .turn(
                    INVALIDATE_CACHES,
                    Duration::from_secs(10),
                    None,
                    &CancellationToken::new(),
                )
                .await;
        }
        drop(slot);
        Ok(InstallOutcome {
            installed: outcome.installed.into_iter().map(pkg).collect(),
            already_available: outcome.already_available,
            available: None,
            built_in: None,
        })
    }

    fn files(&self) -> &dyn SandboxFiles {
        &self.files
    }

    async fn shutdown(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(sb) = self.spare.lock().await.take() {
            sb.slot.lock().await.session = None;
            self.registry.discard(&sb);
        }
        self.registry.close_all().await;
        let registry = self.registry.clone();
        let left = tokio::task::spawn_blocking(move || registry.retry_leftovers())
            .await
            .unwrap_or(0);
        if left > 0 {
            tracing::warn!("{left} sandbox folder(s) could not be removed; the next start tries again");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dropped_call_clears_busy_stops_its_tasks_and_marks_the_interpreter() {
        let home = std::env::temp_dir().join(format!("callguard-{}", uuid::Uuid::new_v4().simple()));
        let registry = Registry::new(Layout::new(&home), 2).unwrap();
        let sb = registry
            .prepare(Limits {
                timeout_seconds: 30,
                memory_mb: 256,
                disk_bytes: 1 << 20,
                output_bytes: 1 << 20,
                fuel_per_call: None,
            })
            .unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let mut call = CallGuard::default();
        call.mark_busy(&sb);
        call.tasks.push(tokio::spawn(async move {
            let _keep = tx;
            std::future::pending::<()>().await;
        }));
        assert!(sb.busy.load(Ordering::SeqCst));
        drop(call);
        assert!(!sb.busy.load(Ordering::SeqCst), "busy is cleared");
        assert!(
            sb.abandoned.load(Ordering::SeqCst),
            "the interpreter is marked for a reset"
        );
        assert!(rx.await.is_err(), "the helper task was stopped");

        sb.abandoned.store(false, Ordering::SeqCst);
        let mut call = CallGuard::default();
        call.mark_busy(&sb);
        call.finish();
        assert!(!sb.busy.load(Ordering::SeqCst));
        assert!(
            !sb.abandoned.load(Ordering::SeqCst),
            "a finished call marks nothing"
        );
        registry.discard(&sb);
        let _ = std::fs::remove_dir_all(&home);
    }
}
