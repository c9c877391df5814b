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
