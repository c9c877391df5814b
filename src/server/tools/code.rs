//! The code tools: execute_code, install_package, create_run_close; and shaping an
//! execution into a result within the budget.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolResult, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};

use super::shared::{ToolResult, attempt};
use crate::sandbox::call_scope;
use crate::sandbox::paths::WorkspacePath;
use crate::sandbox::timeouts;
use crate::sandbox::{Admission, CreateOptions, ExecOptions, Execution, ProgressFn, SandboxError};
use crate::server::SandboxServer;
use crate::server::args::*;
use crate::server::calls::acted_on;
use crate::server::exec_result::{Keep, OVERFLOW_DIR, RawFigure, shape};
use crate::server::figures;
use crate::server::outputs::*;
use crate::server::reply::{add_note, fail, ok, parse};
use crate::server::runs::Run;
use crate::server::schema;

/// Largest source `execute_code` accepts: refused before the interpreter sees it.
const MAX_CODE: usize = 10 << 20;

/// The code and time limit a request gave, checked; the time limit to run with.
fn checked(code: &str, timeout_seconds: Option<u64>) -> Result<Option<Duration>, SandboxError> {
    if code.len() > MAX_CODE {
        return Err(SandboxError::InvalidArgument(format!(
            "the code is {} bytes, over the {} byte limit; write large data to a file with write_file or upload_file and read it from the code",
            code.len(),
            MAX_CODE
        )));
    }
    timeouts::asked(timeout_seconds)
}

impl SandboxServer {
    /// execute_code's arguments checked, its sandbox found, and its code started as a run
    /// that goes on by itself: for a client that speaks MCP tasks.
    pub(in crate::server) async fn execute_as_run(
        &self,
        args: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<Arc<Run>, SandboxError> {
        let a: ExecuteCodeArgs = parse("execute_code", args).map_err(SandboxError::InvalidArgument)?;
        let timeout = if a.background {
            Some(self.background_limit(&a)?)
        } else {
            checked(&a.code, a.timeout_seconds)?
        };
        let (id, _) = self.resolve(a.sandbox_id, true).await?;
        let admission = if a.background {
            Admission::Background
        } else {
            Admission::Interactive
        };
        self.launch(&id, a.code, timeout, admission, context).await
    }

    /// A background run's code checked, and the time limit it runs under.
    fn background_limit(&self, a: &ExecuteCodeArgs) -> Result<Duration, SandboxError> {
        checked(&a.code, None)?;
        timeouts::asked_for_run(a.timeout_seconds, self.settings.background_timeout_seconds)
    }
}

impl SandboxServer {
    /// What follows every execution, a call's or a background run's: its cell in the
    /// sandbox's history, and a log line if the interpreter was reset.
    pub(super) fn ran(&self, id: &str, code: &str, ex: &Execution) {
        self.history
            .record(id, &crate::server::history::Cell::new(code, ex));
        if ex.state_lost {
            crate::sandbox::events::sandbox_log(
                id,
                crate::sandbox::events::Severity::Warning,
                format!(
                    "sandbox {id}: the interpreter was reset; variables and imports are gone, files remain"
                ),
            );
        }
    }

    /// Options of a call that runs code: its time limit, the client's cancellation, progress,
    /// and the downstream tools its code may call.
    fn exec_options(&self, timeout: Option<Duration>, context: &RequestContext<RoleServer>) -> ExecOptions {
        ExecOptions {
            timeout,
            cancel: Some(context.ct.clone()),
            progress: progress_reporter(),
            tools: self.guest_services(true),
            ..ExecOptions::default()
        }
    }
}

/// Reports a run's progress through the call's scope, when the client listens.
fn progress_reporter() -> Option<ProgressFn> {
    let scope = call_scope::current().filter(|s| s.reports())?;
    Some(Arc::new(move |elapsed: f64, last_line: String| {
        let mut message = format!("running for {elapsed:.0} s");
        if !last_line.is_empty() {
            message.push_str(&format!("; last output: {last_line}"));
        }
        scope.report(message);
    }))
}

/// How much of the result budget an execution's result may take.
pub(super) enum Share {
    Whole,
    /// Half: a background run's result, which get_run sends with new output beside it.
    BesideRunPage,
}

/// A fresh folder for one call's overflow: sortable by time, unique within the process.
fn overflow_folder() -> WorkspacePath {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    WorkspacePath::root()
        .join(OVERFLOW_DIR)
        .join(&format!("{stamp}-{n}"))
}

impl SandboxServer {
    /// Shapes an execution into a result within the budget, saving what did not fit in the
    /// sandbox (when `keep`) so the result can point at it.
    pub(super) async fn exec_result(
        &self,
        id: String,
        mut ex: Execution,
        notes: Vec<String>,
        keep: bool,
        share: Share,
    ) -> CallToolResult {
        let budget = match share {
            Share::Whole => self.settings.result_budget(),
            // get_run answers it beside a page of each stream.
            Share::BesideRunPage => self.settings.result_budget() / 2,
        };
        let keep = if keep {
            Keep::In {
                sandbox_id: id.clone(),
                folder: overflow_folder(),
            }
        } else {
            Keep::Nowhere
        };
        let images = std::mem::take(&mut ex.images);
        let sid = id.clone();
        // Decoding and re-encoding figures is CPU work: off the protocol's threads, and within
        // the process's bound on figures decoded at once (shape bounds the time it spends).
        let permit = match images.is_empty() {
            true => None,
            false => figures::DECODING.acquire().await.ok(),
        };
        let shaped = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let figures = images.into_iter().map(RawFigure::new).collect();
            shape(sid, ex, figures, notes, &keep, budget)
        })
        .await;
        let shaped = match shaped {
            Ok(s) => s,
            Err(e) => return fail(format!("the result could not be prepared: {e}")),
        };
        let mut result = shaped.result;
        for f in shaped.overflow {
            if let Err(e) = self.backend.files().write(&id, &f.path, f.bytes).await {
                add_note(
                    &mut result,
                    &format!("{} could not be saved: {e}", f.path.guest()),
                );
            }
        }
        result
    }
}

#[tool_router(router = code_tools, vis = "pub(super)")]
impl SandboxServer {
    #[tool(
        description = "Run Python code in a sandbox. Variables, imports and files persist between calls. Returns stdout, stderr, the value of a final expression, any error with its traceback, and matplotlib figures as images. For work that may take more than about 50 seconds (training, a grid search, a large file), pass background=true: it returns a run_id at once, and get_run follows the run.",
        input_schema = schema::input::<ExecuteCodeArgs>(),
        output_schema = schema::output::<ExecResult>()
    )]
    async fn execute_code(&self, args: JsonObject, context: RequestContext<RoleServer>) -> ToolResult {
        let a: ExecuteCodeArgs = attempt!(parse("execute_code", args));
        if a.background {
            let limit = attempt!(self.background_limit(&a));
            let (id, notes) = attempt!(self.resolve(a.sandbox_id, true).await);
            return Ok(self.start_run(id, a.code, limit, notes, &context).await);
        }
        let timeout = attempt!(checked(&a.code, a.timeout_seconds));
        let (id, notes) = attempt!(self.resolve(a.sandbox_id, true).await);
        attempt!(self.runs.check_idle(&id));
        let ex = attempt!(
            self.backend
                .execute(&id, &a.code, self.exec_options(timeout, &context))
                .await
        );
        self.ran(&id, &a.code, &ex);
        Ok(self.exec_result(id, ex, notes, true, Share::Whole).await)
    }

    #[tool(
        description = "Install a pure-Python package into a sandbox from the local wheel cache; its dependencies come along. Many packages (numpy, pandas, matplotlib, scipy, scikit-learn, ...) are built in already. Pass package_name '?' to list what can be installed.",
        input_schema = schema::input::<InstallPackageArgs>(),
        output_schema = schema::output::<InstallResult>()
    )]
    async fn install_package(&self, args: JsonObject) -> ToolResult {
        let a: InstallPackageArgs = attempt!(parse("install_package", args));
        let (id, _) = attempt!(self.resolve(a.sandbox_id, true).await);
        attempt!(self.runs.check_idle(&id));
        let out = attempt!(self.backend.install_package(&id, &a.package_name).await);
        let list = |ps: &[crate::sandbox::Package]| {
            ps.iter()
                .map(|p| format!("{} {}", p.name, p.version))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let text = if let Some(av) = &out.available {
            let mut text = format!(
                "Installable ({}): {}\nAlready built in ({} Python packages, importable now): {}",
                av.len(),
                list(av),
                out.built_in.as_ref().map_or(0, Vec::len),
                out.built_in.as_deref().map(list).unwrap_or_default()
            );
            if let Some(with) = out.built_with.as_deref().filter(|w| !w.is_empty()) {
                text.push_str(&format!(
                    "\nBuilt with ({} C libraries and build tools, not importable themselves): {}",
                    with.len(),
                    list(with)
                ));
            }
            text
        } else if out.already_available {
            format!(
                "{} is already available in the sandbox; just import it.",
                a.package_name.trim()
            )
        } else {
            format!("Installed {}. Import it in execute_code.", list(&out.installed))
        };
        Ok(ok(
            &InstallResult {
                sandbox_id: id,
                outcome: out,
            },
            text,
        ))
    }

    #[tool(
        description = "Create a fresh sandbox, run code in it once, and close it. For one-off snippets that need no state.",
        input_schema = schema::input::<CreateRunCloseArgs>(),
        output_schema = schema::output::<ExecResult>()
    )]
    async fn create_run_close(&self, args: JsonObject, context: RequestContext<RoleServer>) -> ToolResult {
        let a: CreateRunCloseArgs = attempt!(parse("create_run_close", args));
        let timeout = attempt!(checked(&a.code, a.timeout_seconds));
        let info = attempt!(self.backend.create(CreateOptions::default()).await);
        let id = info.sandbox_id;
        acted_on(&id);
        let ex = self
            .backend
            .execute(&id, &a.code, self.exec_options(timeout, &context))
            .await;
        let result = match ex {
            Ok(ex) => {
                self.exec_result(id.clone(), ex, Vec::new(), false, Share::Whole)
                    .await
            }
            Err(e) => fail(e),
        };
        if let Err(e) = self.backend.close(&id).await {
            tracing::warn!("create_run_close could not close {id}: {e}");
        }
        Ok(result)
    }
}
