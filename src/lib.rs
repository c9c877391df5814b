//! mcp-code-sandbox: an MCP server that runs Python in local WebAssembly sandboxes.
//!
//! Layers, each in its own module: [`server`] speaks MCP and shapes tool results;
//! [`sandbox`] defines the backend traits and the data they exchange; [`wasm`] and [`e2b`]
//! implement them; [`tenancy`] shares one backend between principals; [`remote`] serves MCP
//! over HTTP; [`runtime`] fetches and verifies the pinned CPython-on-WASI build; [`downstream`]
//! reaches the user's other MCP servers for code mode; [`egress`] makes guest code's requests
//! to the hosts the user allows.

pub mod app;
pub mod config;
pub mod dir_read;
pub mod disk_quota;
pub mod downstream;
pub mod e2b;
pub mod egress;
pub mod file_marks;
pub mod guest_names;
pub mod host_open;
pub mod host_retry;
pub mod internal_address;
pub mod lock;
pub mod log_safe;
pub mod metrics;
pub mod redact;
pub mod remote;
pub mod runtime;
pub mod sandbox;
pub mod server;
pub mod store;
pub mod tenancy;
pub mod tls_roots;
pub mod wasm;
pub mod wheels;
