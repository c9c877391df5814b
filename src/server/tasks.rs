//! The MCP Tasks extension (SEP-2663) over background runs. A client that declares it gets
//! `execute_code` as a task whenever the code is still running after [`INLINE`]: the call
//! answers at once with the task, and `tasks/get`, `tasks/cancel` follow and stop the same run
//! `get_run` and `cancel_run` see (the task id is the run id). Code that ends sooner answers
//! as usual, so short calls cost no polling.

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CreateTaskResult, DetailedTask, GetTaskResult, Task,
    TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;

use super::SandboxServer;
use super::calls::principal_of;
use super::outputs::RunState;
use super::reply::fail;
use super::runs::Run;

/// How long a task-capable call waits for the code before answering with a task: most
/// snippets are done by then, and a client polls nothing for them.
const INLINE: Duration = Duration::from_secs(3);
/// How often a client is asked to poll.
const POLL_MS: u64 = 1000;

fn task_of(run: &Run, status: TaskStatus) -> Task {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    Task::new(run.id.clone(), status, run.started_at.clone(), now).with_poll_interval_ms(POLL_MS)
}

impl SandboxServer {
    /// `execute_code` for a client that speaks tasks.
    pub(super) async fn execute_as_task(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let args = request.arguments.unwrap_or_default();
        let args_background = args.get("background").and_then(serde_json::Value::as_bool) == Some(true);
        let run = match self.execute_as_run(args, context).await {
            Ok(run) => run,
            Err(e) => return CallToolResponse::Complete(fail(e)),
        };
        // `background: true` asks not to wait: the task answers at once.
        if args_background {
            return Self::created(&run);
        }
        run.wait(INLINE, u64::MAX, u64::MAX, &context.ct).await;
        if let Some(result) = run.view(u64::MAX, u64::MAX, 0).result {
            return CallToolResponse::Complete(result);
        }
        Self::created(&run)
    }

    fn created(run: &Run) -> CallToolResponse {
        CallToolResponse::Task(CreateTaskResult::new(
            task_of(run, TaskStatus::Working).with_status_message(format!(
                "running in sandbox {}; get_run shows its output",
                run.sandbox_id
            )),
        ))
    }

    fn task_run(
        &self,
        task_id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<std::sync::Arc<Run>, ErrorData> {
        let caller = principal_of(context).map(|p| p.name.to_string());
        self.runs.get(task_id, caller.as_deref()).ok_or_else(|| {
            ErrorData::invalid_params(
                format!("no such task '{task_id}' (tasks belong to whoever started them, and end with the server; get_run reads a run's files after a restart)"),
                None,
            )
        })
    }

    /// `tasks/get`: the run's state, and its answer once it ended.
    pub(super) fn task_status(
        &self,
        task_id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let run = self.task_run(task_id, context)?;
        let view = run.view(u64::MAX, u64::MAX, 0);
        let payload = match (view.state, view.result, run.failure()) {
            (RunState::Queued | RunState::Running, ..) | (_, None, _) => TaskPayload::Working,
            // The task could not do its work: a failure of the protocol's kind, not a result.
            (_, _, Some(why)) => TaskPayload::Failed {
                error: serde_json::json!({"code": rmcp::model::ErrorCode::INTERNAL_ERROR.0, "message": why})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            },
            (RunState::Cancelled, ..) => TaskPayload::Cancelled,
            (_, Some(result), None) => TaskPayload::Completed {
                result: serde_json::to_value(result)
                    .ok()
                    .and_then(|v| v.as_object().cloned())
                    .unwrap_or_default(),
            },
        };
        let status = payload.status();
        let task = task_of(&run, status).with_status_message(format!(
            "{} after {:.1} s; last output: {}",
            view.state.as_str(),
            view.elapsed.as_secs_f64(),
            view.last_line
        ));
        Ok(GetTaskResult::new(DetailedTask::new(task, payload)))
    }

    /// `tasks/cancel`: stops the run, as cancel_run does.
    pub(super) fn task_cancel(
        &self,
        task_id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.task_run(task_id, context)?.cancel.cancel();
        Ok(())
    }
}
