//! What views and notebooks read: `read_table` (a page of a table a result showed, for the
//! MCP App view; hidden from the model) and `export_notebook` (the sandbox's session as a
//! Jupyter notebook in its workspace).

use std::time::Duration;

use rmcp::model::JsonObject;
use rmcp::{tool, tool_router};

use super::shared::{ToolResult, attempt};
use crate::sandbox::paths::WorkspacePath;
use crate::sandbox::{ExecOptions, SandboxError, Table};
use crate::server::SandboxServer;
use crate::server::args::*;
use crate::server::outputs::*;
use crate::server::reply::{fail, ok, parse};
use crate::server::schema;

/// Most rows one `read_table` page holds.
const MAX_ROWS: u64 = 500;
/// The guest's own work for a page (sorting a million rows included).
const TABLE_TIME: Duration = Duration::from_secs(30);

#[tool_router(router = view_tools, vis = "pub(super)")]
impl SandboxServer {
    #[tool(
        description = "A page of rows of a table a result showed (for the result view; hidden from the model).",
        input_schema = schema::input::<ReadTableArgs>(),
        output_schema = schema::output::<TableResult>()
    )]
    async fn read_table(&self, args: JsonObject) -> ToolResult {
        let a: ReadTableArgs = attempt!(parse("read_table", args));
        // Only a handle's own shape reaches guest code.
        let Some((id, local)) = Table::split_handle(&a.handle) else {
            return Ok(fail(format!(
                "'{}' is not a table handle; use the `handle` of a result's `table`",
                a.handle.chars().take(60).collect::<String>()
            )));
        };
        let (id, local) = (id.to_string(), local.to_string());
        attempt!(self.owned(&id).await);
        let limit = a.limit.unwrap_or(100).min(MAX_ROWS);
        let sort = match &a.sort_by {
            Some(c) => {
                attempt!(serde_json::to_string(c).map_err(|e| SandboxError::InvalidArgument(e.to_string())))
            }
            None => "None".into(),
        };
        let code = format!(
            "__code_sandbox_table__({:?}, {}, {limit}, {sort}, {})",
            local,
            a.offset.unwrap_or(0),
            if a.descending { "True" } else { "False" }
        );
        attempt!(self.runs.check_idle(&id));
        let opts = ExecOptions {
            timeout: Some(TABLE_TIME),
            ..ExecOptions::default()
        };
        let ex = attempt!(self.backend.execute(&id, &code, opts).await);
        if ex.limit.is_some() {
            // Stopping the guest mid-sort ends its interpreter: say so, not "pass a larger
            // timeout_seconds", which this tool does not take.
            return Ok(fail(format!(
                "reading table {} did not finish within {} s ({}), so the sandbox's interpreter was stopped: its variables and imports are gone, its files remain. Run the code that makes the table again; to sort it, sort by a column of plain numbers or text, or sort it in code",
                a.handle,
                TABLE_TIME.as_secs(),
                match &a.sort_by {
                    Some(c) => format!("sorting by {c} compares values with code that did not return"),
                    None => "the sandbox's code did not return".into(),
                }
            )));
        }
        if let Some(e) = ex.error {
            return Ok(fail(format!("{}: {}", e.name, e.value)));
        }
        let Some(table) = ex.table else {
            return Ok(fail(
                "the sandbox did not answer with the table's rows; run the code that shows it again",
            ));
        };
        let Some(table) = table.named_in(&id) else {
            return Ok(fail(
                "the sandbox answered with a table handle that is not its own; run the code that shows the table again",
            ));
        };
        let table = table.fitted(self.settings.result_budget() / 2);
        let mut text = format!(
            "Rows {}-{} of {} of table {}.",
            table.offset + 1,
            table.offset + table.rows.len() as u64,
            table.total_rows,
            table.handle
        );
        if table.columns_left_out > 0 {
            text.push_str(&format!(
                " The last {} columns are left out: the table is too wide for one result; select fewer columns in code to see them.",
                table.columns_left_out
            ));
        }
        Ok(ok(
            &TableResult {
                sandbox_id: id,
                table,
            },
            text,
        ))
    }

    #[tool(
        description = "Write the sandbox's session (every execute_code cell in order, with its output, figures and errors) as a Jupyter notebook in its workspace; read it with read_file.",
        input_schema = schema::input::<ExportNotebookArgs>(),
        output_schema = schema::output::<NotebookResult>()
    )]
    async fn export_notebook(&self, args: JsonObject) -> ToolResult {
        let a: ExportNotebookArgs = attempt!(parse("export_notebook", args));
        let path = attempt!(WorkspacePath::parse_file(
            a.path.as_deref().unwrap_or("session.ipynb")
        ));
        let (id, _) = attempt!(self.resolve(a.sandbox_id, false).await);
        attempt!(self.runs.check_idle(&id));
        // The Python the cells ran in, as the host knows it: code in the sandbox could answer
        // anything, or hang.
        let version = self.backend.python_version();
        let cells = self.history.cells(&id);
        let doc = crate::server::notebook::notebook(&cells, &version);
        let bytes = attempt!(
            serde_json::to_vec_pretty(&doc).map_err(|e| SandboxError::InvalidArgument(e.to_string()))
        );
        attempt!(self.backend.files().write(&id, &path, bytes).await);
        let text = format!(
            "Wrote {} cell(s) to {} (a Jupyter notebook); read it with read_file or open it in Jupyter.",
            cells.len(),
            path.guest()
        );
        Ok(ok(
            &NotebookResult {
                sandbox_id: id,
                path: path.relative(),
                cells: cells.len() as u64,
            },
            text,
        ))
    }
}
