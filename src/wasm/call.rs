//! One `execute_code` call in a sandbox, from its interpreter lock to its result: the code's
//! turn, the after-call turn (figures and the health check), progress, and what to do with
//! an interpreter the call left broken.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::context::Context;
use super::folders::{INTERRUPTED, LOST};
use super::persist;
use super::record::{Sandbox, Slot};
use super::results::{self, AfterCall};
use super::vm::{Session, TurnOutput};
use crate::sandbox::{ExecOptions, Execution, LimitKind, ProgressFn, SandboxError};

/// The after-call turn's source: figures the code left open drawn within `left`, then the
/// health check. A statement, not an expression, so a replaced displayhook echoes nothing.
pub fn after_call_source(left: Duration) -> String {
    format!("if True: __code_sandbox_after__({:.3})", left.as_secs_f64())
}
/// Past the call's own time, what figure drawing may take before the interpreter is stopped
/// (the guest stops starting new figures at the call's deadline itself).
const DRAWING_GRACE: Duration = Duration::from_secs(1);
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

/// Runs `code` in `sb`, starting a fresh interpreter first when the last one is gone.
pub async fn execute(
    ctx: &Context,
    sb: &Arc<Sandbox>,
    code: &str,
    opts: ExecOptions,
) -> Result<Execution, SandboxError> {
    let timeout = sb.limits.timeout_for(&opts);
    let mut call = CallGuard::default();
    let stop = stop_token(
        &mut call,
        opts.cancel.clone(),
        sb.closing.clone(),
        sb.stopping.clone(),
    );
    let mut slot = sb.slot.lock().await;
    if sb.closing.is_cancelled() {
        // Closed while this call waited for the interpreter.
        return Err(SandboxError::NotFound(sb.id.clone()));
    }
    if sb.abandoned.swap(false, Ordering::SeqCst) {
        slot.reset("the previous call was abandoned while its code ran".into());
    }
    let before = ctx.ensure_session(&mut slot, sb).await?;
    let restorable = save_before_run(ctx, sb, &mut slot, &opts).await;
    let notes = std::mem::take(&mut slot.notes);
    let Some(session) = slot.session.as_mut() else {
        return Err(SandboxError::Backend(
            "the interpreter could not be started".into(),
        ));
    };
    call.mark_busy(sb);
    if let Some(report) = opts.progress.clone() {
        call.tasks.push(report_progress(session, report));
    }
    let _tee = opts.output.clone().map(|sink| session.tee_output(sink));
    let run_marker = opts.background.as_deref().map(|run| RunUnderWay::mark(sb, run));
    let fuel = sb.limits.fuel_per_call;
    let started = Instant::now();
    session.lend_tools(opts.tools.clone());
    let mut out = session.turn(code, timeout, fuel, &stop).await;
    let mut after_call = AfterCall::Healthy;
    if out.status.is_ok() {
        let after = run_after_call(session, timeout.saturating_sub(started.elapsed()), fuel, &stop).await;
        after_call = results::after_call(&after);
        out.absorb_after_call(after);
    }
    call.finish();
    let ended = out.status.is_err();
    let limit = results::TimeLimit {
        seconds: timeout.as_secs_f64(),
        background: opts.background.is_some(),
    };
    let mut ex = results::execution(out, before, limit);
    ex.notes.extend(notes);
    if let Some(services) = &opts.tools {
        ex.tool_calls = services.calls();
        ex.network = services.network();
    }
    let memory_stuck = !ended
        && after_call.reset_reason().is_none()
        && ex.limit == Some(LimitKind::Memory)
        && !still_usable(session, fuel, &stop).await;
    let ending = Ending {
        after_call,
        ended,
        restorable,
        memory_stuck,
    };
    settle(&mut slot, sb, &mut ex, ending);
    if sb.stopping.is_cancelled() && !sb.closing.is_cancelled() && slot.session.is_none() {
        stopped_by_shutdown(&mut slot, sb, &mut ex, restorable, run_marker);
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
    if ctx.registry.persist.is_some() {
        super::save_soon::after_call(sb);
    }
    Ok(ex)
}

/// A background run starts from a saved state when the server keeps them: a crash, a
/// cancel_run or its time limit then bring the sandbox back as it was when the run began
/// (not as it was at some older save, nor empty). Whether there is one to go back to.
async fn save_before_run(ctx: &Context, sb: &Arc<Sandbox>, slot: &mut Slot, opts: &ExecOptions) -> bool {
    if opts.background.is_none() || ctx.registry.persist.is_none() {
        return false;
    }
    match persist::save(sb, slot, false).await {
        Ok(()) => sb.dirs.state().is_file(),
        Err(e) => {
            tracing::warn!("could not save sandbox {} before its background run: {e}", sb.id);
            false
        }
    }
}

/// How a call's code ended, for what becomes of its interpreter.
struct Ending {
    after_call: AfterCall,
    /// The guest was stopped (time, fuel, a trap, a cancel).
    ended: bool,
    /// A state saved when the background run began can be resumed.
    restorable: bool,
    /// Memory stayed full after a MemoryError.
    memory_stuck: bool,
}

/// Keeps, resets or drops the interpreter after a call, saying so in the result.
fn settle(slot: &mut Slot, sb: &Sandbox, ex: &mut Execution, ending: Ending) {
    if let Some(why) = ending.after_call.reset_reason() {
        ex.state_lost = true;
        ex.notes.push(format!(
            "The interpreter was reset because {why}: variables and imports are gone, files in the workspace remain. The next call starts in a fresh interpreter."
        ));
        slot.reset(why);
    } else if ending.ended && ending.restorable && !sb.stopping.is_cancelled() {
        let why = "the background run was stopped, so the interpreter is back as it was when the run began: what the run did to variables and imports is gone, the files it wrote are kept";
        ex.notes.retain(|n| !n.starts_with("The interpreter was reset"));
        ex.notes.push(results::sentence(why));
        // Its next use resumes the state saved when the run began, and says so.
        slot.reset(why.into());
        slot.saved = true;
    } else if ending.ended {
        slot.session = None;
        slot.lost = true;
    } else if ending.memory_stuck {
        slot.session = None;
        ex.state_lost = true;
        ex.notes.push(
            "Memory stayed full after the MemoryError, so the interpreter was reset: variables are gone, files remain. Use less memory, or create a sandbox with a larger memory_mb.".into(),
        );
    }
}

/// A call the shutdown stopped: its answer says so. A background run's sandbox comes back
/// as it was when the run began (the marker beside its saved state makes the next call after
/// the restart say so); another call's loses its variables.
fn stopped_by_shutdown(
    slot: &mut Slot,
    sb: &Sandbox,
    ex: &mut Execution,
    restorable: bool,
    run_marker: Option<RunUnderWay>,
) {
    let (what, after) = if restorable {
        (
            "background run",
            "the sandbox comes back as it was when the run began, with the files the run wrote",
        )
    } else {
        ("call", "the sandbox's variables are gone, its files are kept")
    };
    ex.state_lost = true;
    ex.error = Some(crate::sandbox::PyError {
        name: "ServerShutdown".into(),
        value: format!("the server is shutting down, so this {what} was stopped before it finished"),
        traceback: String::new(),
    });
    ex.notes.clear();
    ex.notes.push(format!(
        "The server is shutting down, so this {what} was stopped before it finished: {after}. Run the code again once the server is back."
    ));
    slot.reset(STOPPED_BY_SHUTDOWN.into());
    if restorable {
        slot.saved = true;
        if let Some(marker) = run_marker {
            marker.keep();
        }
    } else {
        record_stopped_by_shutdown(sb);
    }
}

/// One token that stops the guest when the client cancels the call or the sandbox closes.
fn stop_token(
    call: &mut CallGuard,
    cancel: Option<CancellationToken>,
    closing: CancellationToken,
    stopping: CancellationToken,
) -> CancellationToken {
    let cancel = cancel.unwrap_or_default();
    let stop = CancellationToken::new();
    let s = stop.clone();
    call.tasks.push(tokio::spawn(async move {
        tokio::select! {
            _ = cancel.cancelled() => s.cancel(),
            _ = closing.cancelled() => s.cancel(),
            _ = stopping.cancelled() => s.cancel(),
        }
    }));
    stop
}

/// Beside a sandbox's saved state while a background run goes: if the server dies before the
/// run ends, the sandbox comes back from the state saved before the run, and its next call
/// says so (`state_lost`) instead of passing the older variables off as current.
struct RunUnderWay(std::path::PathBuf);

impl RunUnderWay {
    fn mark(sb: &Sandbox, run: &str) -> RunUnderWay {
        let dir = sb.dirs.saved();
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(INTERRUPTED);
        let why = format!(
            "the server stopped during background run {run}, so the interpreter came back as it was before that run: what the run did to variables and imports is gone, the files it wrote are kept"
        );
        if let Err(e) = std::fs::write(&path, why) {
            tracing::warn!(
                "could not record background run {run} beside sandbox {}: {e}",
                sb.id
            );
        }
        RunUnderWay(path)
    }

    /// Leaves the marker for the next start: the run was cut off by the shutdown.
    fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for RunUnderWay {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Why a call the shutdown stopped lost its sandbox's variables.
const STOPPED_BY_SHUTDOWN: &str = "the server shut down while a call was running, which stops the interpreter: its variables are gone, its files are kept";

/// Records that the shutdown stopped a call in `sb`: its last saved state (older than the call)
/// must not come back as if current, and the next call after a restart says what happened.
fn record_stopped_by_shutdown(sb: &Sandbox) {
    let dir = sb.dirs.saved();
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join(LOST), STOPPED_BY_SHUTDOWN);
    let _ = crate::host::retry::remove_file(&sb.dirs.state());
}

fn report_progress(session: &Session, report: ProgressFn) -> tokio::task::JoinHandle<()> {
    let (stdout, _) = session.live_output();
    tokio::spawn(async move {
        let started = Instant::now();
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        loop {
            tick.tick().await;
            report(started.elapsed().as_secs_f64(), stdout.last_line());
        }
    })
}

/// Figures the code left open come back as images (and are closed), drawn within what is
/// left of the call's time; then the interpreter checks its own machinery. A statement, not
/// an expression, so a replaced displayhook echoes nothing.
async fn run_after_call(
    session: &mut Session,
    left: Duration,
    fuel: Option<u64>,
    stop: &CancellationToken,
) -> TurnOutput {
    let code = after_call_source(left);
    session.turn(&code, left + DRAWING_GRACE, fuel, stop).await
}

/// Live objects may hold every byte after a MemoryError, leaving no room even to parse
/// `del x`: if a trivial turn cannot run, the interpreter is of no more use.
async fn still_usable(session: &mut Session, fuel: Option<u64>, stop: &CancellationToken) -> bool {
    session
        .turn("None", Duration::from_secs(5), fuel, stop)
        .await
        .status
        == Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Layout;
    use crate::sandbox::Limits;
    use crate::wasm::registry::Registry;

    #[tokio::test]
    async fn a_dropped_call_clears_busy_stops_its_tasks_and_marks_the_interpreter() {
        let home = std::env::temp_dir().join(format!("callguard-{}", uuid::Uuid::new_v4().simple()));
        let registry = Registry::new(Layout::new(&home), None).unwrap();
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
