//! What one execution takes and gives back: its options (progress, output as it is written,
//! which budget it runs under) and its outcome (output, the value, figures, a table, the
//! error or the limit that stopped it).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Called about once a second while a call runs: seconds elapsed, and the last line of
/// output so far.
pub type ProgressFn = std::sync::Arc<dyn Fn(f64, String) + Send + Sync>;

/// Which of the guest's output streams bytes came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputKind {
    Stdout,
    Stderr,
}

/// Receives the guest's output as it is written (a background run streams it to its files).
pub type OutputSink = std::sync::Arc<dyn Fn(OutputKind, &[u8]) + Send + Sync>;

/// Which budget a call runs under, so background runs never hold the slots meant for
/// interactive calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Admission {
    /// Takes one of the `CODE_SANDBOX_MAX_CONCURRENT_CALLS` slots while it runs.
    #[default]
    Interactive,
    /// A background run the server already admitted under `CODE_SANDBOX_MAX_BACKGROUND_RUNS`.
    Background,
}

#[derive(Clone, Default)]
pub struct ExecOptions {
    pub timeout: Option<std::time::Duration>,
    /// Fires when the client cancels the call.
    pub cancel: Option<tokio_util::sync::CancellationToken>,
    /// Progress reports, when the client asked for them.
    pub progress: Option<ProgressFn>,
    /// The id of the background run this call is: it may run up to
    /// [`crate::sandbox::timeouts::MAX_RUN_SECONDS`], and a backend that keeps state across
    /// restarts records that a run was under way, so one cut off by a crash is reported.
    pub background: Option<String>,
    /// The budget the call was admitted under.
    pub admission: Admission,
    /// Every byte of output, as it is written.
    pub output: Option<OutputSink>,
    /// The other MCP servers' tools the code may call (code mode); `None`: no tools.
    pub tools: Option<std::sync::Arc<dyn super::GuestServices>>,
}

/// Which limit stopped a call.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LimitKind {
    Timeout,
    Fuel,
    Memory,
    Output,
}

impl LimitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Timeout => "timeout",
            LimitKind::Fuel => "fuel",
            LimitKind::Memory => "memory",
            LimitKind::Output => "output",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct PyError {
    pub name: String,
    pub value: String,
    pub traceback: String,
}

#[derive(Clone, Debug)]
pub struct Image {
    pub mime_type: String,
    pub data: Vec<u8>,
}

/// A table the code showed as its value (a pandas DataFrame or Series, a 2-D numpy array):
/// one page of its rows, as JSON values a view shows as text, and the handle `read_table`
/// pages it by.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Table {
    /// Column names as shown; the index comes first when it is not 0, 1, 2, ...
    pub columns: Vec<String>,
    /// The pandas dtype of each column.
    pub dtypes: Vec<String>,
    /// The rows of this page: numbers, booleans, null, or text.
    pub rows: Vec<Vec<serde_json::Value>>,
    pub total_rows: u64,
    /// Where this page starts among the (sorted) rows.
    pub offset: u64,
    /// Names the value in the sandbox for `read_table`; it expires when the variable is
    /// assigned anew or newer tables push it out.
    pub handle: String,
    /// Columns past the last one shown, left out because the table is too wide for a result.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub columns_left_out: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Table {
    /// The table within `room` bytes of JSON: as many rows as fit (a view pages the rest with
    /// `read_table`), and when even one row is too wide, as many columns as fit.
    pub fn fitted(mut self, room: usize) -> Table {
        let size = |t: &Table| serde_json::to_vec(t).map_or(usize::MAX, |v| v.len());
        while size(&self) > room && self.rows.len() > 1 {
            self.rows.truncate(self.rows.len() / 2);
        }
        while size(&self) > room && !self.columns.is_empty() {
            let keep = self.columns.len() / 2;
            self.columns_left_out += (self.columns.len() - keep) as u64;
            self.columns.truncate(keep);
            self.dtypes.truncate(keep);
            for row in &mut self.rows {
                row.truncate(keep);
            }
        }
        self
    }

    /// The handle as results carry it: `SANDBOX_ID:tN`, so `read_table` needs nothing else.
    /// The host names the sandbox, always: a guest's handle must be its own plain `tN`, and
    /// one that names a sandbox (or anything else) leaves the table without a handle
    /// (`None`), so guest code can never point the view at another sandbox.
    pub fn named_in(mut self, sandbox_id: &str) -> Option<Table> {
        if !is_local_handle(&self.handle) {
            return None;
        }
        self.handle = format!("{sandbox_id}:{}", self.handle);
        Some(self)
    }

    /// A result's handle split into the sandbox and the guest's own handle.
    pub fn split_handle(handle: &str) -> Option<(&str, &str)> {
        let (sandbox, local) = handle.rsplit_once(':')?;
        (is_local_handle(local) && !sandbox.is_empty()).then_some((sandbox, local))
    }
}

/// A guest's own handle: `t` and up to 11 digits.
fn is_local_handle(local: &str) -> bool {
    local.len() > 1
        && local.len() <= 12
        && local.starts_with('t')
        && local[1..].bytes().all(|b| b.is_ascii_digit())
}

/// The outcome of running code.
#[derive(Clone, Debug, Default)]
pub struct Execution {
    pub stdout: String,
    pub stderr: String,
    pub result: Option<String>,
    /// The value as a table, when it is one.
    pub table: Option<Table>,
    pub error: Option<PyError>,
    pub images: Vec<Image>,
    pub duration_ms: u64,
    pub limit: Option<LimitKind>,
    pub state_lost: bool,
    /// Things the model should know that are not Python output (a reset, a dropped image).
    pub notes: Vec<String>,
    /// The downstream tool calls the code made (code mode).
    pub tool_calls: Vec<super::ToolCall>,
    /// The hosts the code reached (egress).
    pub network: Vec<super::NetUse>,
}
