//! Data the tools return, shared by all backends.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Limits in force for a sandbox.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Limits {
    /// Default wall-clock limit of one call, in seconds.
    pub timeout_seconds: u64,
    /// Memory the interpreter may use, in MiB.
    pub memory_mb: u64,
    /// Disk quota: bytes the sandbox's files, /tmp and installed packages may hold (0: set by
    /// the remote backend's template).
    pub disk_bytes: u64,
    /// Bytes of stdout and of stderr kept per call (head and tail).
    pub output_bytes: u64,
    /// WebAssembly fuel per call, when metering is on.
    pub fuel_per_call: Option<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct CreateOptions {
    pub timeout_seconds: Option<u64>,
    pub memory_mb: Option<u64>,
}

/// A sandbox's share of a principal's quotas.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Its memory limit (what it may grow to, so what it reserves while live).
    pub memory_mb: u64,
    /// Its interpreter is in memory (not suspended or paused): only then does its memory
    /// count against a principal's quota, since suspension gives it back losslessly.
    pub live: bool,
    /// Bytes its files, packages and checkpoints hold now (0 where the disk is remote).
    pub disk_bytes: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct SandboxInfo {
    pub sandbox_id: String,
    pub backend: String,
    pub python_version: String,
    /// The working folder inside the sandbox; relative paths start here.
    pub workspace: String,
    pub limits: Limits,
    /// What the sandbox got that differs from what was asked (a clamped limit).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct SandboxStatus {
    pub sandbox_id: String,
    pub state: SandboxState,
    /// RFC 3339.
    pub created_at: String,
    pub executions: u64,
    /// RFC 3339, to the millisecond: when it was last used (listings are newest first).
    pub last_used_at: String,
    pub disk_bytes: u64,
    pub limits: Limits,
    /// Saved points `restore_sandbox` can return to, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<Checkpoint>,
}

/// A saved point of a sandbox: its variables, imports and files.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Checkpoint {
    pub name: String,
    /// RFC 3339.
    pub created_at: String,
    /// What it holds on disk (counted in the sandbox's disk quota).
    pub bytes: u64,
}

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

/// Where a sandbox stands.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SandboxState {
    /// Idle, with a live interpreter.
    Ready,
    /// Running a call.
    Busy,
    /// Its interpreter was reset; the next call starts a fresh one.
    Reset,
    /// A remote sandbox that is up (E2B's word).
    Running,
    /// Suspended: its state is saved (a local sandbox's beside its files, a remote one by
    /// E2B) and its next use brings it back, variables and all.
    Paused,
}

impl SandboxState {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxState::Ready => "ready",
            SandboxState::Busy => "busy",
            SandboxState::Reset => "reset",
            SandboxState::Running => "running",
            SandboxState::Paused => "paused",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Package {
    pub name: String,
    pub version: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct InstallOutcome {
    pub installed: Vec<Package>,
    pub already_available: bool,
    /// With package_name `?`: what can be installed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available: Option<Vec<Package>>,
    /// With package_name `?`: the Python packages the runtime already has (importable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub built_in: Option<Vec<Package>>,
    /// With package_name `?`: C libraries and build tools the runtime was built with (not
    /// importable themselves).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub built_with: Option<Vec<Package>>,
}

/// Any error, kept with its source chain; a plain message converts into one too.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors a tool shows the user; each says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "no open sandbox has the id '{0}'. Call get_sandbox_status to list the open ones, or create_sandbox for a new one"
    )]
    NotFound(String),
    /// A named replica's id reached another replica (`sandbox::replica`).
    #[error(
        "sandbox '{id}' lives on replica {replica}, which this request did not reach (restarting?); retry shortly"
    )]
    OnAnotherReplica { id: String, replica: String },
    #[error(
        "sandbox '{id}' is kept in the team's store, which could not be reached to resume it here ({message}); nothing is lost: retry shortly"
    )]
    StoreAway { id: String, message: String },
    /// What the store holds of the sandbox cannot be read back (not an outage: retrying does
    /// not help).
    #[error(
        "sandbox '{id}' is kept in the team's store, but what the store holds of it cannot be read ({message}); it is left there as it is for the operator to look at. Create a new sandbox to go on"
    )]
    StoreDamaged { id: String, message: String },
    #[error(
        "sandbox '{id}' was deleted on {at} because {because}: its files and variables are gone. Create a new one with create_sandbox"
    )]
    Deleted {
        id: String,
        at: String,
        because: &'static str,
    },
    /// Every live interpreter is running a call, so none can be suspended to make room.
    #[error(
        "all {live} live sandboxes are running calls right now (CODE_SANDBOX_MAX_SANDBOXES={live}), so none could be suspended to make room. Try again when one finishes, or raise CODE_SANDBOX_MAX_SANDBOXES"
    )]
    AllBusy { live: usize },
    /// The memory budget has no room for an interpreter and nothing idle to suspend; nothing
    /// was lost, and the call may be tried again.
    #[error("{0}")]
    MemoryBusy(String),
    /// Too many calls already wait for this sandbox (remote mode).
    #[error(
        "sandbox '{id}' is running a call and {waiting} more are waiting for it, the most allowed; wait for them to finish, or use another sandbox"
    )]
    Queued { id: String, waiting: usize },
    #[error("{0}")]
    CallCapacity(String),
    /// A principal's own limit (remote mode): open sandboxes, memory, disk or waiting calls.
    #[error("{0}")]
    Quota(String),
    #[error("sandbox '{0}' is busy with another call; wait for it to finish, or use another sandbox")]
    Busy(String),
    /// A background run holds the sandbox.
    #[error(
        "sandbox '{sandbox_id}' is running background run {run_id} (for {seconds} s so far); follow it with get_run, stop it with cancel_run, or use another sandbox. Its files can still be listed and read"
    )]
    RunGoing {
        sandbox_id: String,
        run_id: String,
        seconds: u64,
    },
    #[error("the Python runtime is not ready yet: {0}")]
    NotReady(String),
    #[error("invalid path: {0}")]
    InvalidPath(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("'{path}' does not exist in the sandbox. Call list_files to see what is there")]
    FileNotFound { path: String },
    #[error("'{path}' is a folder, not a file. Call list_files with this path to see its contents")]
    IsDirectory { path: String },
    #[error("'{path}' is not a regular file (a link, pipe or device); it was not opened")]
    NotRegular { path: String },
    #[error("'{path}' is {size} bytes, over the {limit} byte limit for this operation")]
    TooLarge { path: String, size: u64, limit: u64 },
    #[error(
        "the sandbox's disk quota is full: {used} of {limit} bytes used, {wanted} more needed. Delete files in the sandbox, or raise CODE_SANDBOX_DISK_MB"
    )]
    DiskFull { limit: u64, used: u64, wanted: u64 },
    #[error(
        "the host disk is nearly full: sandboxes may not use the room kept free for the rest of the system ({wanted} more bytes were needed). Delete files in sandboxes or close some, or free disk space"
    )]
    HostDiskLow { wanted: u64 },
    #[error("{0}")]
    Unsupported(String),
    /// An install that could not be done; the message says why and what is available.
    #[error(transparent)]
    Package(BoxError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// Something the server saved (a checkpoint's state) is damaged, incomplete or not usable
    /// by this version; the cause is kept as the source.
    #[error("{what} cannot be used: {source}. Make a new one")]
    Damaged {
        what: String,
        #[source]
        source: BoxError,
    },
    /// The backend failed (the interpreter would not start, the remote service refused);
    /// the cause is kept as the source.
    #[error(transparent)]
    Backend(BoxError),
    /// The sandbox is closed, but its folder is still on disk (and still counted).
    #[error("{0}")]
    RemovalPending(String),
}

/// A worker thread that panicked or was cancelled: the backend's failure.
impl From<tokio::task::JoinError> for SandboxError {
    fn from(e: tokio::task::JoinError) -> Self {
        SandboxError::Backend(Box::new(e))
    }
}

/// Runs file work off the async threads (a backend's, or the server's own on the user's
/// folders), its panic or cancellation an error like any other.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, SandboxError> + Send + 'static,
) -> Result<T, SandboxError> {
    tokio::task::spawn_blocking(f).await?
}

impl SandboxError {
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> SandboxError {
        let context = context.into();
        move |source| SandboxError::Io { context, source }
    }
}
