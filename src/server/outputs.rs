//! Structured results (each tool's `outputSchema`).

use schemars::JsonSchema;
use serde::Serialize;

use crate::sandbox::{FileEntry, InstallOutcome, LimitKind, PyError, SandboxStatus};

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

#[derive(Debug, Serialize, JsonSchema)]
pub struct ExecResult {
    pub sandbox_id: String,
    pub stdout: String,
    pub stderr: String,
    /// repr of the final expression, if the code ended with one.
    pub result: Option<String>,
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
    pub entries: Vec<FileEntry>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadResult {
    pub sandbox_id: String,
    pub path: String,
    pub size: u64,
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
