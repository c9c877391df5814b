//! The run tools: get_run and cancel_run, and starting a background run for execute_code.

use std::time::Duration;

use rmcp::model::JsonObject;
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};

use super::shared::{ToolResult, attempt};
use crate::sandbox::{LimitKind, SandboxError};
use crate::server::SandboxServer;
use crate::server::args::{CancelRunArgs, GetRunArgs};
use crate::server::calls::{acted_on, principal_of};
use crate::server::outputs::{ExecResult, RunResult, RunState};
use crate::server::reply::{fail, ok, parse, size_of};
use crate::server::runs::{Run, RunRecord, RunView, Stream, run_file, sandbox_of};
use crate::server::schema;

/// The longest `get_run` waits: under every client's own timeout.
const MAX_WAIT: u64 = 50;
/// What a run's record holds beside its result.
const RECORD_SLACK: u64 = 64 << 10;
/// Items of each list of a recorded result read back.
const MAX_ITEMS: usize = 100;

impl SandboxServer {
    /// What one stream's page of a run may hold: an eighth of the result budget each, since
    /// a page is both in the text and in the structured content, and a run's result, when it
    /// ended, takes the other half.
    fn run_page(&self) -> usize {
        (self.settings.result_budget() / 8).max(4096)
    }

    /// A run this server no longer holds in memory, read back from its files: after a restart
    /// (a record still `running` was cut off), or one ended long ago.
    async fn run_from_files(
        &self,
        run_id: &str,
        stdout_offset: u64,
        stderr_offset: u64,
    ) -> Result<RunResult, SandboxError> {
        let no_such = || SandboxError::InvalidArgument(no_such_run(run_id));
        let sandbox = sandbox_of(run_id).ok_or_else(no_such)?;
        let files = self.backend.files();
        let limit = crate::server::runs::KEEP as u64 * 2;
        // The files live in the sandbox, where its code may have rewritten them: the record is
        // read only as large as a server writes one (its result fits the transport's limit,
        // whatever budget was set when it was written), must name this run, and its fields
        // are cut to fit this answer before they are answered.
        let budget = self.settings.result_budget();
        let raw = files
            .read(
                sandbox,
                &run_file(run_id, "run.json"),
                self.settings.transport_budget() as u64 + RECORD_SLACK,
            )
            .await
            .map_err(|_| no_such())?;
        let mut record: RunRecord = serde_json::from_slice(&raw).map_err(|_| no_such())?;
        if record.run_id != run_id || record.sandbox_id != sandbox {
            return Err(no_such());
        }
        if record.state.is_going() {
            record.state = RunState::Interrupted;
        }
        let read = |name: &'static str| async move {
            files
                .read(sandbox, &run_file(run_id, name), limit)
                .await
                .unwrap_or_default()
        };
        let stdout = Stream::from_parts(record.stdout_dropped, read("stdout.txt").await);
        let stderr = Stream::from_parts(record.stderr_dropped, read("stderr.txt").await);
        let page = self.run_page();
        let (out, err) = (stdout.page(stdout_offset, page), stderr.page(stderr_offset, page));
        let ended = record.result.take().map(serde_json::Value::Object);
        let mut result = RunResult {
            run_id: record.run_id,
            state: record.state,
            started_at: record.started_at,
            elapsed_ms: record.elapsed_ms.unwrap_or(0),
            new_stdout: out.text.clone(),
            new_stderr: err.text.clone(),
            stdout_offset: out.next,
            stderr_offset: err.next,
            more_output: out.more || err.more,
            last_line: stdout.last_line(),
            queue_position: None,
            ended: None,
            sandbox_id: Some(record.sandbox_id),
        };
        if let Some(ended) = ended.and_then(|v| serde_json::from_value::<EndedFields>(v).ok()) {
            result.ended = Some(ended.into_exec().capped(budget / 8));
            result.sandbox_id = None;
        }
        Ok(result)
    }
}

/// A run held in memory as `get_run` and `cancel_run` show it (execute_code's fields apart).
fn run_result(run: &Run, view: &RunView, queue_position: Option<u64>) -> RunResult {
    RunResult {
        run_id: run.id.clone(),
        state: view.state,
        started_at: run.started_at.clone(),
        elapsed_ms: view.elapsed.as_millis() as u64,
        new_stdout: view.stdout.text.clone(),
        new_stderr: view.stderr.text.clone(),
        stdout_offset: view.stdout.next,
        stderr_offset: view.stderr.next,
        more_output: view.stdout.more || view.stderr.more,
        last_line: view.last_line.clone(),
        queue_position,
        ended: None,
        sandbox_id: Some(run.sandbox_id.clone()),
    }
}

/// The error for a run id this caller cannot see.
fn no_such_run(run_id: &str) -> String {
    format!(
        "no such run '{run_id}': check the run_id execute_code returned (runs belong to whoever started them)"
    )
}

/// A run's recorded result, read back into execute_code's fields.
#[derive(serde::Deserialize)]
struct EndedFields {
    sandbox_id: String,
    #[serde(default)]
    stdout: String,
    #[serde(default)]
    stderr: String,
    result: Option<String>,
    error: Option<crate::sandbox::PyError>,
    #[serde(default)]
    images: usize,
    #[serde(default)]
    duration_ms: u64,
    limit: Option<LimitKind>,
    #[serde(default)]
    state_lost: bool,
    #[serde(default)]
    notes: Vec<String>,
    #[serde(default)]
    saved_files: Vec<String>,
    #[serde(default)]
    tool_calls: Vec<crate::sandbox::ToolCall>,
    #[serde(default)]
    network: Vec<crate::sandbox::NetUse>,
    #[serde(default)]
    table: Option<crate::sandbox::Table>,
}

impl EndedFields {
    fn into_exec(self) -> ExecResult {
        ExecResult {
            sandbox_id: self.sandbox_id,
            stdout: self.stdout,
            stderr: self.stderr,
            result: self.result,
            table: self.table,
            error: self.error,
            images: self.images,
            duration_ms: self.duration_ms,
            limit: self.limit,
            state_lost: self.state_lost,
            notes: self.notes,
            saved_files: self.saved_files,
            run_id: None,
            state: None,
            started_at: None,
            tool_calls: self.tool_calls,
            network: self.network,
        }
    }
}

impl ExecResult {
    /// A result read back from a run's files, cut so that its text fields hold at most about
    /// `room` bytes in all and its lists at most [`MAX_ITEMS`] each (the files are the
    /// sandbox's, so they hold whatever its code wrote there).
    fn capped(mut self, room: usize) -> ExecResult {
        let each = (room / 4).max(1024);
        let cut = |text: &mut String| {
            if let Some(short) = crate::sandbox::text_cap::head_tail(text, each / 4, |n| {
                format!("[... {n} characters of the run's record not shown ...]")
            }) {
                *text = short;
            }
        };
        cut(&mut self.stdout);
        cut(&mut self.stderr);
        if let Some(r) = &mut self.result {
            cut(r);
        }
        if let Some(e) = &mut self.error {
            cut(&mut e.name);
            cut(&mut e.value);
            cut(&mut e.traceback);
        }
        for list in [&mut self.notes, &mut self.saved_files] {
            list.truncate(MAX_ITEMS);
            list.iter_mut().for_each(|t| {
                t.truncate(t.floor_char_boundary(2000));
            });
        }
        self.tool_calls.truncate(MAX_ITEMS);
        self.network.truncate(MAX_ITEMS);
        if size_of(&self.tool_calls) > each {
            self.tool_calls.clear();
        }
        if size_of(&self.network) > each {
            self.network.clear();
        }
        if self.table.as_ref().is_some_and(|t| size_of(t) > each) {
            self.table = None;
        }
        self
    }
}

/// The text beside a run's structured result: where it is and what it printed lately.
fn run_text(r: &RunResult, skipped_stdout: u64, skipped_stderr: u64) -> String {
    let mut text = format!(
        "Run {} is {} after {:.1} s.",
        r.run_id,
        r.state.as_str().replace('_', " "),
        r.elapsed_ms as f64 / 1000.0
    );
    for (name, skipped) in [("stdout", skipped_stdout), ("stderr", skipped_stderr)] {
        if skipped > 0 {
            text.push_str(&format!(
                "\n({skipped} bytes of {name} before this are no longer kept.)"
            ));
        }
    }
    if !r.state.is_going() {
        // Its result follows, with the output as execute_code shows it.
        return text;
    }
    if let Some(at) = r.queue_position {
        text.push_str(&format!(
            " It is number {at} in line for a background-run slot (CODE_SANDBOX_MAX_BACKGROUND_RUNS), or for room for its interpreter; it starts by itself."
        ));
    }
    if !r.new_stdout.is_empty() {
        text.push_str(&format!("\nNew stdout:\n{}", r.new_stdout));
    }
    if !r.new_stderr.is_empty() {
        text.push_str(&format!("\nNew stderr:\n{}", r.new_stderr));
    }
    text.push_str(&format!(
        "\nCall get_run again with stdout_offset={} and stderr_offset={} for what follows.",
        r.stdout_offset, r.stderr_offset
    ));
    text
}

#[tool_router(router = run_tools, vis = "pub(super)")]
impl SandboxServer {
    #[tool(
        description = "Follow a background run started by execute_code with background=true: its state (running, finished, cancelled, timed_out, interrupted), the output printed since the offsets you pass (pass back the offsets each answer gives), and, once it ended, everything execute_code returns (result, error, figures). wait_seconds (up to 50) waits for new output or the end before answering.",
        input_schema = schema::input::<GetRunArgs>(),
        output_schema = schema::output::<RunResult>()
    )]
    async fn get_run(&self, args: JsonObject, context: RequestContext<RoleServer>) -> ToolResult {
        let a: GetRunArgs = attempt!(parse("get_run", args));
        let (out_at, err_at) = (a.stdout_offset.unwrap_or(0), a.stderr_offset.unwrap_or(0));
        let caller = principal_of(&context).map(|p| p.name.to_string());
        let Some(run) = self.runs.get(&a.run_id, caller.as_deref()) else {
            let r = attempt!(self.run_from_files(&a.run_id, out_at, err_at).await);
            if let Some(id) = r
                .sandbox_id
                .as_deref()
                .or(r.ended.as_ref().map(|e| e.sandbox_id.as_str()))
            {
                acted_on(id);
            }
            let text = run_text(&r, 0, 0);
            return Ok(ok(&r, text));
        };
        acted_on(&run.sandbox_id);
        let wait = Duration::from_secs(a.wait_seconds.unwrap_or(0).min(MAX_WAIT));
        run.wait(wait, out_at, err_at, &context.ct).await;
        let view = run.view(out_at, err_at, self.run_page());
        let mut r = run_result(&run, &view, self.runs.queue_position(&run));
        let text = run_text(&r, view.stdout.skipped, view.stderr.skipped);
        let Some(mut ended) = view.result else {
            return Ok(ok(&r, text));
        };
        // Ended: execute_code's own answer (its figures included), with the run's fields.
        r.sandbox_id = None;
        let mut value = serde_json::to_value(&r).unwrap_or_default();
        if let (Some(obj), Some(serde_json::Value::Object(exec))) =
            (value.as_object_mut(), ended.structured_content.take())
        {
            for (k, v) in exec {
                obj.entry(k).or_insert(v);
            }
        }
        ended.structured_content = Some(value);
        ended.content.insert(0, rmcp::model::ContentBlock::text(text));
        Ok(ended)
    }

    #[tool(
        description = "Stop a background run at once. The sandbox keeps its variables when it can (as after a timeout) and is free for the next call.",
        input_schema = schema::input::<CancelRunArgs>(),
        output_schema = schema::output::<RunResult>()
    )]
    async fn cancel_run(&self, args: JsonObject, context: RequestContext<RoleServer>) -> ToolResult {
        let a: CancelRunArgs = attempt!(parse("cancel_run", args));
        let caller = principal_of(&context).map(|p| p.name.to_string());
        let Some(run) = self.runs.get(&a.run_id, caller.as_deref()) else {
            // One that ended before a restart can no longer be stopped; say how it ended.
            let r = attempt!(self.run_from_files(&a.run_id, u64::MAX, u64::MAX).await);
            let text = format!("Run {} already ended: {}.", r.run_id, r.state.as_str());
            return Ok(ok(&r, text));
        };
        acted_on(&run.sandbox_id);
        run.cancel.cancel();
        // The guest stops at its next epoch tick; wait (briefly) for the run to record it and
        // write its last files, so a close right after does not race them.
        tokio::select! {
            _ = run.settled(Duration::from_secs(10)) => {}
            _ = context.ct.cancelled() => {}
        }
        let r = run_result(&run, &run.view(u64::MAX, u64::MAX, 0), None);
        let text = format!(
            "Run {} is {} after {:.1} s; get_run shows its output and result.",
            r.run_id,
            r.state.as_str().replace('_', " "),
            r.elapsed_ms as f64 / 1000.0
        );
        Ok(ok(&r, text))
    }
}
