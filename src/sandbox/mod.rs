//! What every backend offers: the interpreter trait and the file-operations trait beside it,
//! plus the plain data the tools return. The server speaks only to these traits, so a new
//! backend plugs in by implementing them and adding a line to [`crate::app::backend`].

pub mod call_scope;
pub mod census;
mod error;
pub mod events;
mod execution;
mod guest_services;
pub mod last_use;
pub mod listing;
pub mod mounts;
pub mod open_set;
pub mod paths;
pub mod png;
pub mod replica;
pub mod retention;
pub mod text_cap;
pub mod timeouts;
mod types;

pub use error::*;
pub use execution::*;
pub use guest_services::{GuestServices, NetUse, Refusal, ToolCall, answer_by};
pub use listing::{FileEntry, FileKind, Listing};
pub use types::*;

use async_trait::async_trait;

/// Runs code in sandboxes that keep their state between calls.
#[async_trait]
pub trait Interpreter: Send + Sync {
    /// `wasm`, `e2b`, ...
    fn backend(&self) -> &'static str;

    /// The Python its sandboxes run, as the host knows it (a notebook's metadata): never asked
    /// of a sandbox, whose code could answer anything, or hang.
    fn python_version(&self) -> String {
        "3".into()
    }

    async fn create(&self, opts: CreateOptions) -> Result<SandboxInfo, SandboxError>;
    async fn close(&self, id: &str) -> Result<(), SandboxError>;
    async fn status(&self, id: &str) -> Result<SandboxStatus, SandboxError>;
    async fn list(&self) -> Vec<SandboxStatus>;
    /// The sandboxes this server process created or used, most recently used first (never one
    /// only kept from before a restart: those are reached by their id).
    async fn recently_used(&self) -> Vec<String>;

    /// Suspends `id` if it is live and idle, losslessly (its next use brings it back); whether
    /// its interpreter is out of memory now. A backend that cannot suspend says false.
    async fn suspend(&self, _id: &str) -> Result<bool, SandboxError> {
        Ok(false)
    }

    /// Counts `id`'s disk against the budget named `group` (a principal's, of `limit_bytes`)
    /// from now on, inside the server-wide one. A backend without local disk ignores it.
    fn join_disk_group(&self, _id: &str, _group: &str, _limit_bytes: u64) {}

    /// Names `principal` as `id`'s owner, for where a shared store keeps it (under that
    /// principal's prefix). A backend without one ignores it.
    fn keep_for(&self, _id: &str, _principal: &str) {}

    /// Before `id`, open here, is used: with a shared store, this replica holds it (else the
    /// error says which replica does) and has its latest state. Without one, nothing to do.
    async fn hold(&self, _id: &str) -> Result<(), SandboxError> {
        Ok(())
    }

    /// Brings `id` here from the shared store when `principal` keeps it there and no live
    /// replica holds it; whether it is here now. Without a store, false.
    async fn resume_from_store(&self, _id: &str, _principal: &str) -> Result<bool, SandboxError> {
        Ok(false)
    }

    /// [`Interpreter::hold`], and for `principal`'s sandbox whose copy on this disk was let go
    /// (the store keeps it), brought back from the store; whether it was brought back.
    async fn hold_or_resume(&self, id: &str, principal: &str) -> Result<bool, SandboxError> {
        match self.hold(id).await {
            Err(SandboxError::NotFound(_)) if self.resume_from_store(id, principal).await? => Ok(true),
            held => held.map(|()| false),
        }
    }

    /// Whether the caller may act on `id`, which is here now: [`Interpreter::usage`]'s check,
    /// which a view over a shared store extends by resuming the sandbox from the store.
    async fn locate(&self, id: &str) -> Result<(), SandboxError> {
        self.usage(id).map(|_| ())
    }

    /// What `id` holds against a principal's quotas, from local bookkeeping only (it runs
    /// before calls, so it must not wait on a remote service).
    fn usage(&self, id: &str) -> Result<Usage, SandboxError>;

    /// Whether `id` still exists for this backend, held here or by another server sharing its
    /// storage: ownership records are dropped only for sandboxes that are gone, since a
    /// server that cannot hold a sandbox right now would otherwise give it to no one.
    fn exists(&self, id: &str) -> bool {
        self.usage(id).is_ok()
    }

    async fn execute(&self, id: &str, code: &str, opts: ExecOptions) -> Result<Execution, SandboxError>;

    async fn install_package(&self, id: &str, name: &str) -> Result<InstallOutcome, SandboxError>;

    /// A new sandbox with a copy of `id`'s variables, imports and files, independent from then on.
    async fn fork(&self, id: &str) -> Result<SandboxInfo, SandboxError> {
        let _ = id;
        Err(self.unsupported("fork_sandbox"))
    }

    /// Saves `id`'s variables, imports and files as they are now, under `name` (or a new one).
    async fn checkpoint(&self, id: &str, name: Option<&str>) -> Result<Checkpoint, SandboxError> {
        let _ = (id, name);
        Err(self.unsupported("checkpoint_sandbox"))
    }

    /// Puts `id`'s variables, imports and files back as they were at `checkpoint`.
    async fn restore(&self, id: &str, checkpoint: &str) -> Result<Checkpoint, SandboxError> {
        let _ = (id, checkpoint);
        Err(self.unsupported("restore_sandbox"))
    }

    /// The error for a tool this backend does not offer.
    fn unsupported(&self, tool: &str) -> SandboxError {
        SandboxError::Unsupported(format!(
            "{tool} is not available on the {} backend; it needs the local wasm backend (INTERPRETER_TYPE=wasm)",
            self.backend()
        ))
    }

    /// The file operations of the same sandboxes.
    fn files(&self) -> &dyn SandboxFiles;

    /// The user's folders sandboxes read in place at `/mnt` (none unless the backend
    /// preopens them).
    fn mounts(&self) -> mounts::Mounts {
        mounts::Mounts::default()
    }

    /// Stops every running call at once, each answering that the server is shutting down (the
    /// first step of a shutdown, so those answers reach their clients before it ends).
    fn stop_running(&self) {}

    /// Kept sandboxes whose last save a shared store does not hold yet.
    fn store_waiting(&self) -> usize {
        0
    }

    /// At shutdown, once calls have finished: waits (bounded by the settings) for kept
    /// sandboxes to reach a shared store that is away or slow, so work is not lost with this
    /// replica's disk.
    async fn settle_store(&self) {}

    /// Whether a call can start now, without first waiting for the backend to be prepared
    /// (the interpreter installed and compiled): what a load balancer's readiness probe asks.
    fn ready(&self) -> bool {
        true
    }

    /// Bytes of the interpreters' memory budget in use and in all, where this process holds
    /// the interpreters (for the metrics).
    fn memory_budget(&self) -> Option<(u64, u64)> {
        None
    }

    /// The sandboxes by state, where this process keeps them (for the metrics).
    fn census(&self) -> Option<census::Census> {
        None
    }

    /// Closes every sandbox (server shutdown).
    async fn shutdown(&self);
}

/// Host-side access to a sandbox's workspace. Paths are already checked [`paths::WorkspacePath`]s.
#[async_trait]
pub trait SandboxFiles: Send + Sync {
    async fn list(&self, id: &str, path: &paths::WorkspacePath) -> Result<Listing, SandboxError>;
    /// Reads a whole file, refusing one over `limit` bytes before reading it where the backend can.
    async fn read(&self, id: &str, path: &paths::WorkspacePath, limit: u64) -> Result<Vec<u8>, SandboxError>;
    /// Replaces the file atomically: readers see the old bytes or the new, never a mix.
    async fn write(&self, id: &str, path: &paths::WorkspacePath, bytes: Vec<u8>)
    -> Result<u64, SandboxError>;
    /// Copies a whole file into `out`, refusing one over `limit` bytes; how many bytes it held.
    /// Streamed, so memory does not grow with the file or the number of copies (no default:
    /// a wrapper that forgot to pass it on would read files whole again).
    async fn copy_out(
        &self,
        id: &str,
        path: &paths::WorkspacePath,
        limit: u64,
        out: std::fs::File,
    ) -> Result<u64, SandboxError>;
}
