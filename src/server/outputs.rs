//! Structured results (each tool's `outputSchema`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::sandbox::{FileEntry, InstallOutcome, LimitKind, NetUse, PyError, SandboxStatus, Table, ToolCall};

#[derive(Debug, Serialize, JsonSchema)]
pub struct CloseResult {
    pub sandbox_id: String,
    pub closed: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct StatusResult {
    /// One sandbox, when an id was given or one is open.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxStatus>,
    /// The sandboxes, most recently used first, when no id was given (one page of them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandboxes: Option<Vec<SandboxStatus>>,
    /// When listing: how many sandboxes there are in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// When listing: where the next page starts, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
}

/// Where a background run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Waiting for one of the server's background-run slots (CODE_SANDBOX_MAX_BACKGROUND_RUNS),
    /// or for room for its sandbox's interpreter; it holds its sandbox meanwhile.
    Queued,
    Running,
    Finished,
    Cancelled,
    TimedOut,
    /// The server stopped before the run ended.
    Interrupted,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Finished => "finished",
            RunState::Cancelled => "cancelled",
            RunState::TimedOut => "timed_out",
            RunState::Interrupted => "interrupted",
        }
    }

    /// Not ended yet: queued or running.
    pub fn is_going(self) -> bool {
        matches!(self, RunState::Queued | RunState::Running)
    }
}

/// A background run as `get_run` and `cancel_run` show it; once it ended, with everything
/// `execute_code` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunResult {
    pub run_id: String,
    pub state: RunState,
    /// RFC 3339.
    pub started_at: String,
    pub elapsed_ms: u64,
    /// stdout printed since `stdout_offset` (one page of it).
    pub new_stdout: String,
    pub new_stderr: String,
    /// Pass these to the next get_run to read on from here.
    pub stdout_offset: u64,
    pub stderr_offset: u64,
    /// More output is already there past the offsets: call get_run again at once.
    pub more_output: bool,
    /// The last line printed so far.
    pub last_line: String,
    /// While queued: 1 when it starts next.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<u64>,
    /// When it ended: execute_code's fields (sandbox_id, stdout, stderr, result, error, images, ...).
    #[serde(flatten)]
    pub ended: Option<ExecResult>,
    /// The run's sandbox, while it goes (once it ended, among execute_code's fields).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ExecResult {
    pub sandbox_id: String,
    pub stdout: String,
    pub stderr: String,
    /// repr of the final expression, if the code ended with one.
    pub result: Option<String>,
    /// The final value as a table, when it is a DataFrame, Series or 2-D array: its first
    /// rows (at most 100), for views that page it with `read_table`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<Table>,
    pub error: Option<PyError>,
    /// How many images are attached as image content.
    pub images: usize,
    pub duration_ms: u64,
    /// Which limit stopped the code, if any.
    pub limit: Option<LimitKind>,
    /// True when the interpreter was reset, so variables and imports are gone.
    pub state_lost: bool,
    /// Remarks from the sandbox (a reset, a new sandbox, a dropped image).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Files in the sandbox holding what did not fit in this result (the whole output,
    /// figures past the budget), also linked as resources.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub saved_files: Vec<String>,
    /// With `background`: the run started, to follow with get_run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<RunState>,
    /// RFC 3339, with `background`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// Code mode: each call the code made to the user's other MCP servers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The hosts the code reached over the network, and the bytes received from each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<NetUse>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct InstallResult {
    pub sandbox_id: String,
    #[serde(flatten)]
    pub outcome: InstallOutcome,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListResult {
    pub sandbox_id: String,
    pub path: String,
    /// Entries in the folder in all.
    pub total: u64,
    /// Position of the first entry of this page, in name order.
    pub offset: u64,
    /// Where the next page starts, when there is one.
    pub next_offset: Option<u64>,
    /// When the folder holds more entries than a listing reaches: how many it reaches (the
    /// first by name); the rest are read with `os.scandir` in `execute_code`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listed_only: Option<u64>,
    pub entries: Vec<FileEntry>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadResult {
    pub sandbox_id: String,
    pub path: String,
    pub size: u64,
    /// Where this part starts, in bytes (0 for the whole file).
    pub offset: u64,
    /// Where the next part starts when this one is not all of the rest: pass it as `offset`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// The text, when the file is UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The bytes, base64-encoded, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_base64: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct WriteResult {
    pub sandbox_id: String,
    pub path: String,
    pub bytes_written: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SaveResult {
    pub sandbox_id: String,
    /// The file saved, as the sandbox sees it.
    pub path: String,
    /// Where it now is on the user's computer.
    pub destination: String,
    pub bytes_written: u64,
    /// Whether a file that was there was replaced.
    pub replaced: bool,
    /// The save folder this save made: named by the user but not there until now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder_made: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ForkResult {
    /// The new sandbox.
    pub sandbox_id: String,
    pub forked_from: String,
    pub limits: crate::sandbox::Limits,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CheckpointResult {
    pub sandbox_id: String,
    pub checkpoint: crate::sandbox::Checkpoint,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TableResult {
    pub sandbox_id: String,
    #[serde(flatten)]
    pub table: Table,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NotebookResult {
    pub sandbox_id: String,
    /// Where the notebook is, relative to /home/user.
    pub path: String,
    /// Cells written (every execute_code of the sandbox, oldest first, within the history's bounds).
    pub cells: u64,
}
