//! The local backend: CPython compiled to WASI, one wasmtime Store per sandbox.
//!
//! Read top-down: [`backend`] implements the two traits and hands work to [`call`] (one
//! `execute_code`), [`checkpoints`] (fork, checkpoint, restore), [`spare`] (a pre-started interpreter) and [`housekeeping`] (idle and
//! leftover cleanup); [`registry`] owns the open sandboxes and their folders, [`files`] the
//! host-side file tools, [`results`] turns a turn's output into a tool result,
//! [`programs`] installs and compiles the interpreter in the background, [`shutdown`]
//! saves what is kept when the server stops. [`vm`] is the one
//! part that touches wasmtime.
//!
//! Glossary: a *turn* is one run of source in the interpreter (a call is the code's turn plus
//! the after-call turn); the *door* is the guest's one custom import, its side channel to
//! the host; a *twin* is the host's own handle on a file the guest opened, used to measure it;
//! the *spare* is a sandbox started before anyone asks; a *slot* holds a sandbox's
//! interpreter (empty after a reset); to *settle* a disk reservation is to replace it with
//! what a write really added.

mod backend;
mod call;
mod checkpoints;
mod context;
mod errors;
mod files;
mod folders;
mod housekeeping;
mod install;
mod keep;
mod live;
mod persist;
mod programs;
mod record;
mod recovery;
mod registry;
mod removals;
mod remove_tree;
mod results;
mod sandbox_limits;
mod save_soon;
mod shutdown;
mod spare;
mod store_pull;
mod store_push;
mod trash;
mod vm;
mod warm_start;

pub use backend::WasmBackend;

/// The interpreter without the server around it: for `cargo xtask` (installing the runtime,
/// and the bench's in-process baselines).
pub mod direct {
    pub use super::call::after_call_source;
    pub use super::programs::{InstallError, install_and_load, prepare_warm_image};
    pub use super::vm::{
        Ended, Image, Program, Session, SessionConfig, Target, TurnOutput, WarmError, ship_warm_image,
        warm_image_cached,
    };
}
