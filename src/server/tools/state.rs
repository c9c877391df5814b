//! The state tools: fork_sandbox, checkpoint_sandbox, restore_sandbox.

use rmcp::model::CallToolResult;
use rmcp::model::JsonObject;
use rmcp::{tool, tool_router};

use super::shared::{ToolResult, attempt};
use crate::server::SandboxServer;
use crate::server::args::*;
use crate::server::calls::used;
use crate::server::outputs::*;
use crate::server::reply::{fail, ok, parse};
use crate::server::schema;

fn checkpoint_reply(
    sandbox_id: String,
    checkpoint: crate::sandbox::Checkpoint,
    text: String,
) -> CallToolResult {
    ok(
        &CheckpointResult {
            sandbox_id,
            checkpoint,
        },
        text,
    )
}

#[tool_router(router = state_tools, vis = "pub(super)")]
impl SandboxServer {
    #[tool(
        description = "Make a new sandbox that is a copy of another: its variables, imports and files. The two are independent from then on (the copy gets random generators of its own). Use it to try something risky without losing the original.",
        input_schema = schema::input::<SandboxIdArgs>(),
        output_schema = schema::output::<ForkResult>()
    )]
    async fn fork_sandbox(&self, args: JsonObject) -> ToolResult {
        let a: SandboxIdArgs = attempt!(parse("fork_sandbox", args));
        let (id, _) = attempt!(self.resolve(a.sandbox_id, false).await);
        attempt!(self.runs.check_idle(&id));
        let info = attempt!(self.backend.fork(&id).await);
        self.history.copy(&id, &info.sandbox_id);
        used(&info.sandbox_id);
        let text = format!(
            "Sandbox {} is a copy of {id} (variables, imports and files).",
            info.sandbox_id
        );
        Ok(ok(
            &ForkResult {
                sandbox_id: info.sandbox_id,
                forked_from: id,
                limits: info.limits,
            },
            text,
        ))
    }

    #[tool(
        description = "Save a sandbox's variables, imports and files as they are now, to return to later with restore_sandbox. Checkpoints count towards the sandbox's disk quota and are deleted with it; /tmp is not saved.",
        input_schema = schema::input::<CheckpointArgs>(),
        output_schema = schema::output::<CheckpointResult>()
    )]
    async fn checkpoint_sandbox(&self, args: JsonObject) -> ToolResult {
        let a: CheckpointArgs = attempt!(parse("checkpoint_sandbox", args));
        let (id, _) = attempt!(self.resolve(a.sandbox_id, false).await);
        attempt!(self.runs.check_idle(&id));
        let cp = attempt!(self.backend.checkpoint(&id, a.name.as_deref()).await);
        let text = format!(
            "Saved checkpoint '{}' of sandbox {id} ({} bytes). restore_sandbox with checkpoint '{}' returns to it.",
            cp.name, cp.bytes, cp.name
        );
        Ok(checkpoint_reply(id, cp, text))
    }

    #[tool(
        description = "Roll a sandbox back to a checkpoint: its variables, imports and files become what they were then (what came after is lost). Never guesses: an empty sandbox_id is an error.",
        input_schema = schema::input::<RestoreArgs>(),
        output_schema = schema::output::<CheckpointResult>()
    )]
    async fn restore_sandbox(&self, args: JsonObject) -> ToolResult {
        let a: RestoreArgs = attempt!(parse("restore_sandbox", args));
        if a.sandbox_id.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return Ok(fail(
                "sandbox_id is empty; restore_sandbox never guesses which sandbox to roll back. Give the id (get_sandbox_status lists them), or omit it for this session's default sandbox (the one it created or used last)",
            ));
        }
        if a.checkpoint.trim().is_empty() {
            return Ok(fail(
                "checkpoint is empty; give a checkpoint's name (get_sandbox_status lists them)",
            ));
        }
        let (id, _) = attempt!(self.resolve(a.sandbox_id, false).await);
        attempt!(self.runs.check_idle(&id));
        let cp = attempt!(self.backend.restore(&id, &a.checkpoint).await);
        let text = format!(
            "Sandbox {id} is back at checkpoint '{}' (saved {}).",
            cp.name, cp.created_at
        );
        Ok(checkpoint_reply(id, cp, text))
    }
}
