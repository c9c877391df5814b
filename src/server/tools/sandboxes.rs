//! The sandbox tools: create_sandbox, close_sandbox, get_sandbox_status.

use crate::sandbox::timeouts;
use crate::sandbox::{CreateOptions, SandboxStatus};

use super::shared::page_of;
use rmcp::model::JsonObject;
use rmcp::{tool, tool_router};

use super::shared::{ToolResult, attempt};
use crate::server::SandboxServer;
use crate::server::args::*;
use crate::server::calls::{closed, used};
use crate::server::outputs::*;
use crate::server::reply::{fail, ok, parse};
use crate::server::schema;

/// Most sandboxes one `get_sandbox_status` page lists: enough to find the one wanted, little
/// enough not to flood the model's context when hundreds are kept.
const STATUS_PAGE: usize = 100;

fn status_text(s: &SandboxStatus) -> String {
    let mut text = format!(
        "{}: {} (last used {}, created {}, {} executions, {} bytes on disk)",
        s.sandbox_id,
        s.state.as_str(),
        s.last_used_at,
        s.created_at,
        s.executions,
        s.disk_bytes
    );
    if !s.checkpoints.is_empty() {
        let names: Vec<&str> = s.checkpoints.iter().map(|c| c.name.as_str()).collect();
        text.push_str(&format!("; checkpoints: {}", names.join(", ")));
    }
    text
}

#[tool_router(router = sandbox_tools, vis = "pub(super)")]
impl SandboxServer {
    #[tool(
        description = "Create a new Python sandbox with its own interpreter and files. Returns its sandbox_id.",
        input_schema = schema::input::<CreateSandboxArgs>(),
        output_schema = schema::output::<crate::sandbox::SandboxInfo>()
    )]
    async fn create_sandbox(&self, args: JsonObject) -> ToolResult {
        let a: CreateSandboxArgs = attempt!(parse("create_sandbox", args));
        attempt!(timeouts::asked(a.timeout_seconds));
        let info = attempt!(
            self.backend
                .create(CreateOptions {
                    timeout_seconds: a.timeout_seconds,
                    memory_mb: a.memory_mb,
                })
                .await
        );
        used(&info.sandbox_id);
        let mut text = format!(
            "Created sandbox {} (Python {}, {} backend). Working folder: {}. Memory: {} MiB.",
            info.sandbox_id, info.python_version, info.backend, info.workspace, info.limits.memory_mb
        );
        for n in &info.notes {
            text.push_str(&format!("\n[note] {n}"));
        }
        Ok(ok(&info, text))
    }

    #[tool(
        description = "Close a sandbox and delete its files. Without sandbox_id it closes the sandbox this session created or used last, and once that is closed it closes nothing (never an older sandbox).",
        input_schema = schema::input::<SandboxIdArgs>(),
        output_schema = schema::output::<CloseResult>()
    )]
    async fn close_sandbox(&self, args: JsonObject) -> ToolResult {
        let a: SandboxIdArgs = attempt!(parse("close_sandbox", args));
        if a.sandbox_id.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return Ok(fail(
                "sandbox_id is empty; close_sandbox never guesses which sandbox to delete. Give the id (get_sandbox_status lists them), or omit it to close this session's default sandbox (the one it created or used last)",
            ));
        }
        let (id, _) = attempt!(self.resolve(a.sandbox_id, false).await);
        // A run that just ended may still be writing its files there.
        self.runs
            .settle_sandbox(&id, std::time::Duration::from_secs(5))
            .await;
        attempt!(self.backend.close(&id).await);
        self.history.remove(&id);
        closed(&id);
        Ok(ok(
            &CloseResult {
                sandbox_id: id.clone(),
                closed: true,
            },
            format!("Closed sandbox {id}."),
        ))
    }

    #[tool(
        description = "Status of one sandbox (given its id), or a list of all sandboxes, most recently used first, with their state (ready, busy, paused: saved, and brought back on its next use) and when each was last used. Long lists come in pages (offset, next_offset).",
        input_schema = schema::input::<StatusArgs>(),
        output_schema = schema::output::<StatusResult>()
    )]
    async fn get_sandbox_status(&self, args: JsonObject) -> ToolResult {
        let a: StatusArgs = attempt!(parse("get_sandbox_status", args));
        if let Some(id) = a.sandbox_id.filter(|s| !s.trim().is_empty()) {
            let s = attempt!(self.backend.status(&id).await);
            let text = status_text(&s);
            return Ok(ok(
                &StatusResult {
                    sandbox: Some(s),
                    sandboxes: None,
                    total: None,
                    next_offset: None,
                },
                text,
            ));
        }
        let all = self.backend.list().await;
        let total = all.len();
        let offset = a.offset.unwrap_or(0).min(total as u64) as usize;
        let (page, next_offset) = page_of(all, offset, STATUS_PAGE, 4096, self.settings.result_budget());
        let next = offset + page.len();
        let mut text = if total == 0 {
            "No sandbox is open.".to_string()
        } else {
            let mut t = format!("{total} sandbox(es), most recently used first");
            if offset > 0 {
                t.push_str(&format!(", from {offset}"));
            }
            t.push_str(":\n");
            t.push_str(&page.iter().map(status_text).collect::<Vec<_>>().join("\n"));
            t
        };
        if let Some(n) = next_offset {
            text.push_str(&format!(
                "\n... {} more: call get_sandbox_status with offset={n} for the next page",
                total - next
            ));
        }
        Ok(ok(
            &StatusResult {
                sandbox: None,
                sandboxes: Some(page),
                total: Some(total as u64),
                next_offset,
            },
            text,
        ))
    }
}
