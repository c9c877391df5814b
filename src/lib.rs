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
pub mod disk;
pub mod downstream;
pub mod e2b;
pub mod egress;
pub mod host;
pub mod outbound;
pub mod remote;
pub mod runtime;
pub mod sandbox;
pub mod server;
pub mod store;
pub mod telemetry;
pub mod tenancy;
pub mod wasm;
pub mod wheels;
