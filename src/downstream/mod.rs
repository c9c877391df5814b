//! Code mode: the user's other MCP servers (`CODE_SANDBOX_MCP_SERVERS`), reached through
//! rmcp's client, whose tools guest code calls through the `mcp_tools` module.
//!
//! `config` reads the servers file, `link` is one server's session (`child` its process), `gateway` all of them,
//! and `frames` one execution's calls (the [`GuestServices`](crate::sandbox::GuestServices) a
//! backend carries frames to).

mod child;
mod config;
mod frames;
mod gateway;
mod glob;
mod link;
mod program;

pub use config::ConfigError;
pub use frames::{CallTools, MAX_BYTES};
pub use gateway::{Allowed, Gateway};
