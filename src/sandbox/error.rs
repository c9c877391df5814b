//! The errors a tool shows the user, each saying what to do next, and running blocking work
//! with its failure reported as one of them.

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
