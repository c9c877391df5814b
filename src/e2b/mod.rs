//! The remote E2B backend: full Linux sandboxes in E2B's cloud behind the same two traits, so
//! the tools behave the same way on either backend.
//!
//! [`backend`] implements the interpreter trait and [`files`] the file tools, both through
//! [`fleet`] (the sandboxes this server holds, running and paused, and what bounds them), each
//! one an [`entry`]; [`client`] and [`stream`] speak E2B's protocol, [`kept`] remembers paused
//! sandboxes across restarts.

mod backend;
mod client;
mod entry;
mod files;
mod fleet;
mod kept;
mod stream;

pub use backend::E2bBackend;
pub use client::{Client, E2bError, Remote, RemoteState};
