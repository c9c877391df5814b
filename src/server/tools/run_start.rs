//! Starting a run: a background run from execute_code (under the run budget, queued when it
//! is full), or a call a client follows as an MCP task; and carrying it to its end.

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;

use super::code::Share;
use crate::sandbox::{Admission, ExecOptions, LimitKind, SandboxError};
use crate::server::SandboxServer;
use crate::server::calls::principal_of;
use crate::server::outputs::{ExecResult, RunState};
use crate::server::reply::{fail, ok};
use crate::server::run_budget::Entry;
use crate::server::run_pool::at_low_priority;
use crate::server::runs::{Run, run_file};

/// How often a run waiting for room for its interpreter tries again.
const ROOM_RETRY: Duration = Duration::from_millis(500);

impl SandboxServer {
    /// Starts `code` as a run in sandbox `id`, going on by itself: under `timeout` (a
    /// background run's own limit), else the sandbox's per-call limit. A background run
    /// (`Admission::Background`) waits for a slot of the run budget, queued; a call the client
    /// follows as a task is interactive and takes an interactive slot.
    pub(in crate::server) async fn launch(
        &self,
        id: &str,
        code: String,
        timeout: Option<Duration>,
        admission: Admission,
        context: &RequestContext<RoleServer>,
    ) -> Result<Arc<Run>, SandboxError> {
        let owner = principal_of(context).map(|p| p.name.to_string());
        let entry = match admission {
            Admission::Background => {
                let who: Arc<str> = Arc::from(owner.as_deref().unwrap_or(crate::tenancy::names::LOCAL));
                Some(self.runs.budget.enter(who).await?)
            }
            Admission::Interactive => None,
        };
        let run = self.runs.start(id, owner)?;
        if !matches!(entry, Some(Entry::Queued(_))) {
            run.set_going(RunState::Running);
        }
        let sink_run = run.clone();
        let opts = ExecOptions {
            timeout,
            cancel: Some(run.cancel.clone()),
            progress: None,
            background: Some(run.id.clone()),
            admission,
            output: Some(Arc::new(move |kind, bytes: &[u8]| sink_run.output(kind, bytes))),
            tools: self.guest_services(false),
        };
        let me = self.clone();
        let task_run = run.clone();
        tokio::spawn(async move { me.carry_out(task_run, code, opts, entry).await });
        Ok(run)
    }

    /// Starts `code` as a background run in `id` and answers at once.
    pub(super) async fn start_run(
        &self,
        id: String,
        code: String,
        timeout: Duration,
        mut notes: Vec<String>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let run = match self
            .launch(&id, code, Some(timeout), Admission::Background, context)
            .await
        {
            Ok(run) => run,
            Err(e) => return fail(e),
        };
        // The task has not run yet: a run that must wait for a slot is still queued.
        let state = run.state();
        let queued = match self.runs.queue_position(&run) {
            Some(at) => format!(
                "Queued background run {} (position {at}): the server's {} background-run slots (CODE_SANDBOX_MAX_BACKGROUND_RUNS) are in use, and it starts when one frees; the sandbox is held for it meanwhile.",
                run.id,
                self.runs.budget.capacity()
            ),
            None => format!("Started background run {}", run.id),
        };
        notes.push(format!(
            "{queued} (time limit {} s). Follow it with get_run(run_id=\"{}\", wait_seconds=30); its output also goes to {}/.",
            timeout.as_secs(),
            run.id,
            run_file(&run.id, "").guest().trim_end_matches('/')
        ));
        let res = ExecResult {
            sandbox_id: id,
            stdout: String::new(),
            stderr: String::new(),
            result: None,
            table: None,
            error: None,
            images: 0,
            duration_ms: 0,
            limit: None,
            state_lost: false,
            notes: notes.clone(),
            saved_files: Vec::new(),
            run_id: Some(run.id.clone()),
            state: Some(state),
            started_at: Some(run.started_at.clone()),
            tool_calls: Vec::new(),
            network: Vec::new(),
        };
        ok(&res, notes.join("\n"))
    }

    /// Runs it to the end, keeping its files up to date, and records how it ended. A queued
    /// run first waits for its slot (or its cancellation).
    async fn carry_out(self, run: Arc<Run>, code: String, opts: ExecOptions, entry: Option<Entry>) {
        let slot = match entry {
            Some(Entry::Queued(wait)) => {
                run.save(self.backend.files()).await;
                tokio::select! {
                    slot = wait => slot.ok(),
                    _ = run.cancel.cancelled() => None,
                }
            }
            Some(Entry::Now(slot)) => Some(slot),
            None => None,
        };
        if run.cancel.is_cancelled() {
            run.finish(
                RunState::Cancelled,
                fail("the run was cancelled before it started; nothing of it ran"),
                None,
            );
            run.save(self.backend.files()).await;
            run.settle();
            return;
        }
        run.set_going(RunState::Running);
        let files = self.backend.clone();
        let saver_run = run.clone();
        let saver = tokio::spawn(async move {
            loop {
                saver_run.save(files.files()).await;
                tokio::time::sleep(saver_run.save_interval()).await;
            }
        });
        let ex = self.execute_when_room(&run, &code, opts).await;
        // The slot is free as soon as the code stops, before the run's last files are written:
        // a run started once this one shows as ended must not find it taken.
        drop(slot);
        let state = match &ex {
            _ if run.cancel.is_cancelled() => RunState::Cancelled,
            // Stopped from outside: its sandbox was closed under it.
            Ok(ex) if ex.error.as_ref().is_some_and(|e| e.name == "Cancelled") => RunState::Cancelled,
            Ok(ex) if ex.limit == Some(LimitKind::Timeout) => RunState::TimedOut,
            Ok(ex) if ex.error.as_ref().is_some_and(|e| e.name == "ServerShutdown") => RunState::Interrupted,
            _ => RunState::Finished,
        };
        let failure = match &ex {
            Err(e) => Some(format!("the code could not run: {e}")),
            _ if run.cancel.is_cancelled() => None,
            _ if state == RunState::Cancelled => Some("its sandbox was closed while it ran".into()),
            _ if state == RunState::Interrupted => Some("the server stopped before the run ended".into()),
            _ => None,
        };
        let result = match ex {
            Ok(ex) => {
                self.ran(&run.sandbox_id, &code, &ex);
                self.exec_result(run.sandbox_id.clone(), ex, Vec::new(), true, Share::BesideRunPage)
                    .await
            }
            Err(e) => fail(e),
        };
        saver.abort();
        run.finish(state, result, failure);
        run.save(self.backend.files()).await;
        run.settle();
        tracing::info!(
            "background run {} ended: {} after {} s",
            run.id,
            state.as_str(),
            run.elapsed().as_secs()
        );
    }

    /// Runs the code, waiting (queued) while no interpreter can be made live for it: every
    /// live one is running a call, or the memory budget has no room. Those pass; the run must
    /// not end with nothing for them.
    async fn execute_when_room(
        &self,
        run: &Run,
        code: &str,
        opts: ExecOptions,
    ) -> Result<crate::sandbox::Execution, SandboxError> {
        loop {
            let attempt = match opts.admission {
                // A background run yields the cores to interactive calls (see run_pool.rs).
                Admission::Background => {
                    let (backend, id, code, opts) = (
                        self.backend.clone(),
                        run.sandbox_id.clone(),
                        code.to_string(),
                        opts.clone(),
                    );
                    at_low_priority(self.runs.budget.capacity(), async move {
                        backend.execute(&id, &code, opts).await
                    })
                    .await
                    .unwrap_or_else(|| {
                        Err(SandboxError::Backend(
                            "the run stopped on an internal error; the server keeps running. Run it again; if it happens again, please report it".into(),
                        ))
                    })
                }
                Admission::Interactive => self.backend.execute(&run.sandbox_id, code, opts.clone()).await,
            };
            match attempt {
                Err(SandboxError::AllBusy { .. } | SandboxError::MemoryBusy(_))
                    if !run.cancel.is_cancelled() =>
                {
                    run.set_going(RunState::Queued);
                    tokio::select! {
                        _ = tokio::time::sleep(ROOM_RETRY) => {}
                        _ = run.cancel.cancelled() => {}
                    }
                    run.set_going(RunState::Running);
                }
                other => return other,
            }
        }
    }
}
