//! The integration tests: one binary, so the crate and wasmtime are linked once and the
//! helpers in `common` are shared. Every test starts the real `mcp-code-sandbox` binary and
//! runs real Python in the real runtime.

mod background_budget;
mod bundle;
mod checkpoints;
mod claude_limits;
mod claude_today;
mod code_mode;
mod code_mode_hostile;
mod code_mode_names;
mod common;
mod conformance;

mod core_tools;
mod default_sandbox;
// haproxy and kubectl (Debian's packages, installed the first time) and a Linux venv.
#[cfg(target_os = "linux")]
mod deploy;
mod docs;
mod docs_drift;
mod e2b;
mod figures;
mod first_start;
mod host_kernels;
mod host_safety;
mod index;
mod isolation;
// Signals (SIGTERM, SIGKILL, SIGINT) to the server: Unix only.
#[cfg(unix)]
mod keeping;
mod layers;
// Signals (SIGTERM, SIGKILL, SIGINT) to the server: Unix only.
#[cfg(unix)]
mod lifecycle;
mod limits;
mod native_answers;
mod network;
mod notices;
mod oauth;
mod packages;
mod persistence;
mod prepare;
mod progress;
mod protocol;
mod red_team;
mod red_team_auth;
// FIFOs, symlinks and /proc: Linux only.
#[cfg(target_os = "linux")]
mod red_team_folders;
mod red_team_server;
mod registry;
mod remote;
mod remote_harness;
mod runs;
mod save_folder;
// SeaweedFS's wheel on PyPI is Linux's (the URL checks are unit tests, run everywhere).
#[cfg(target_os = "linux")]
mod store;
#[cfg(target_os = "linux")]
mod store_red_team;
#[cfg(target_os = "linux")]
mod store_replicas;
#[cfg(target_os = "linux")]
mod store_sweep;
mod team_server;
mod threats;
mod ts_sdk;
mod user_folders;
mod views;
mod warm;
mod workflows;
