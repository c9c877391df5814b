//! Tool arguments, with the JSON schemas clients see.

use schemars::{JsonSchema, Schema};
use serde::Deserialize;

use crate::sandbox::timeouts::{MAX_CALL_SECONDS, MAX_RUN_SECONDS};

/// The `Mcp-Param-*` header a 2026-07-28 client mirrors `sandbox_id` into.
pub const SANDBOX_ID_HEADER: &str = "Sandbox-Id";
/// Likewise for `run_id` (a run's id names its sandbox).
pub const RUN_ID_HEADER: &str = "Run-Id";
/// Every argument marked `x-mcp-header`, by name, with its header's name; the same in every
/// tool that takes it.
pub const HEADER_ARGUMENTS: [(&str, &str); 2] =
    [("sandbox_id", SANDBOX_ID_HEADER), ("run_id", RUN_ID_HEADER)];

/// Marks `sandbox_id` with `x-mcp-header`, so a proxy in front of replicas can route a call to
/// the replica its sandbox lives on from a header, without reading the body. The revision
/// admits the mark only on a property of one primitive type, so the optional id is declared a
/// plain string (clients that find an invalid mark drop the whole tool); omitting it still
/// means the default sandbox, and the server still takes a null.
fn sandbox_id_header(schema: &mut Schema) {
    mirror_in_header(schema, SANDBOX_ID_HEADER);
}

fn run_id_header(schema: &mut Schema) {
    mirror_in_header(schema, RUN_ID_HEADER);
}

fn mirror_in_header(schema: &mut Schema, name: &str) {
    schema.insert("type".into(), "string".into());
    schema.insert("x-mcp-header".into(), name.into());
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct CreateSandboxArgs {
    /// Default time limit for each call in this sandbox, in seconds (default 30).
    #[schemars(range(min = 1, max = MAX_CALL_SECONDS))]
    pub timeout_seconds: Option<u64>,
    /// Memory limit for the interpreter, in MiB (default 1024).
    pub memory_mb: Option<u64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct SandboxIdArgs {
    /// Which sandbox; omitted means the one this session created or used last, never an older one (an error if it is closed).
    #[schemars(transform = sandbox_id_header)]
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct StatusArgs {
    /// Which sandbox; omitted lists them all, most recently used first.
    #[schemars(transform = sandbox_id_header)]
    pub sandbox_id: Option<String>,
    /// When listing: start at this position (from `next_offset` of the last page).
    pub offset: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExecuteCodeArgs {
    /// Python source to run. State (variables, imports) persists between calls in the same
    /// sandbox. The value of a final expression is returned as `result`.
    pub code: String,
    /// Which sandbox; omitted means the one this session created or used last (a new one if that is closed or there is none; never an older one).
    #[schemars(transform = sandbox_id_header)]
    pub sandbox_id: Option<String>,
    /// Time limit for this call in seconds (default: the sandbox's; at most 300). With
    /// `background`, the run's limit (default and most: the server's CODE_SANDBOX_BACKGROUND_TIMEOUT, 3600 unless set).
    #[schemars(range(min = 1, max = MAX_RUN_SECONDS))]
    pub timeout_seconds: Option<u64>,
    /// Run in the background and return at once with a `run_id`; follow it with get_run.
    /// Use it for work that may take more than about 50 seconds (training, a grid search, a
    /// large file): clients stop waiting for a single call after about a minute.
    #[serde(default)]
    pub background: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetRunArgs {
    /// The run, as execute_code with background returned it.
    #[schemars(transform = run_id_header)]
    pub run_id: String,
    /// Wait up to this many seconds (at most 50) for new output or the end before answering.
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
    /// Output already read: `stdout_offset` from the last get_run (default 0, from the start).
    pub stdout_offset: Option<u64>,
    /// Likewise for stderr.
    pub stderr_offset: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CancelRunArgs {
    /// The run to stop.
    #[schemars(transform = run_id_header)]
    pub run_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateRunCloseArgs {
    /// Python source to run in a fresh sandbox that is closed afterwards.
    pub code: String,
    /// Time limit in seconds (default: the server's, 30 unless CODE_SANDBOX_TIMEOUT says otherwise).
    #[schemars(range(min = 1, max = MAX_CALL_SECONDS))]
    pub timeout_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct InstallPackageArgs {
    /// A plain package name, like `tabulate`.
    pub package_name: String,
    /// Which sandbox; omitted means the one this session created or used last (a new one if that is closed or there is none; never an older one).
    #[schemars(transform = sandbox_id_header)]
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct ListFilesArgs {
    /// Folder to list, relative to /home/user (default: the workspace itself).
    pub path: Option<String>,
    /// Entries are sorted by name; start at this position (from `next_offset` of the last page).
    pub offset: Option<u64>,
    /// Which sandbox; omitted means the one this session created or used last (a new one if that is closed or there is none; never an older one).
    #[schemars(transform = sandbox_id_header)]
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// File to read, relative to /home/user or absolute inside it.
    pub file_path: String,
    /// Byte to start at (default 0): a file larger than one result comes in parts, and each
    /// answer's `next_offset` is where the next part starts.
    pub offset: Option<u64>,
    /// Which sandbox; omitted means the one this session created or used last (a new one if that is closed or there is none; never an older one).
    #[schemars(transform = sandbox_id_header)]
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// File to write, relative to /home/user or absolute inside it. Folders are created.
    pub file_path: String,
    /// Text to write (UTF-8). The file is replaced atomically.
    pub content: String,
    /// Which sandbox; omitted means the one this session created or used last (a new one if that is closed or there is none; never an older one).
    #[schemars(transform = sandbox_id_header)]
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct UploadFileArgs {
    /// A host file to copy in; it must lie inside a folder listed in CODE_SANDBOX_UPLOAD_DIRS.
    pub source_path: Option<String>,
    /// The file's bytes, base64-encoded (instead of source_path).
    pub content_base64: Option<String>,
    /// Where to put it in the sandbox (default: the source's file name in /home/user).
    pub destination_path: Option<String>,
    /// Which sandbox; omitted means the one this session created or used last (a new one if that is closed or there is none; never an older one).
    #[schemars(transform = sandbox_id_header)]
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SaveFileArgs {
    /// The file in the sandbox: relative to /home/user, absolute inside it, or in a shared folder under /mnt.
    pub path: String,
    /// Where to save it on the user's computer: a file path inside one of the folders save_file may write into (CODE_SANDBOX_SAVE_DIRS); a relative path is taken inside the first of them. Its folder must exist, but for a save folder the user named that is not there yet: that one is made.
    pub destination: String,
    /// Replace a file already there (default false: an existing file is refused and left as it is).
    pub overwrite: Option<bool>,
    /// Which sandbox; omitted means the one this session created or used last, never an older one.
    #[schemars(transform = sandbox_id_header)]
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CheckpointArgs {
    /// Which sandbox; omitted means the one this session created or used last, never an older one (an error if it is closed).
    #[schemars(transform = sandbox_id_header)]
    pub sandbox_id: Option<String>,
    /// A name for the checkpoint (letters, digits, '.', '_', '-'); omitted: checkpoint-1, -2, ...
    pub name: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RestoreArgs {
    /// The checkpoint's name, as checkpoint_sandbox returned it (get_sandbox_status lists them).
    pub checkpoint: String,
    /// Which sandbox; omitted means the one this session created or used last, never an older one (an error if it is closed). An empty id is an error.
    #[schemars(transform = sandbox_id_header)]
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadTableArgs {
    /// The table's `handle` from the result that showed it (it names the sandbox too).
    pub handle: String,
    /// First row to return (of the sorted rows when `sort_by` is given).
    pub offset: Option<u64>,
    /// Rows to return, at most 500 (default 100).
    pub limit: Option<u64>,
    /// A column name to sort by (stable; missing values last).
    pub sort_by: Option<String>,
    /// Sort from largest to smallest.
    #[serde(default)]
    pub descending: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExportNotebookArgs {
    /// Which sandbox; omitted means the one this session created or used last.
    #[schemars(transform = sandbox_id_header)]
    pub sandbox_id: Option<String>,
    /// Where to write the notebook, relative to /home/user (default `session.ipynb`).
    pub path: Option<String>,
}
