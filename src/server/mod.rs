//! The MCP server: the tools, over stdio or (through [`crate::remote`]) HTTP, backed by whatever
//! [`Interpreter`] the factory chose.

mod annotations;
mod args;
mod build;
mod calls;
mod completion;
mod default_sandbox;
mod describe;
mod exec_result;
mod figures;
mod file_part;
mod handler;
mod history;
mod log_level;
mod methods;
mod mime;
mod notebook;
mod notices;
mod outputs;
mod reply;
mod request_id;
mod resources;
mod run_budget;
mod run_output;
mod run_pool;
mod runs;
mod save;
mod save_folder;
mod schema;
mod services;
mod stdio;
mod tasks;
mod tools;
mod upload;
mod view;

pub use args::HEADER_ARGUMENTS;
pub use calls::ClientAddr;
pub use handler::SandboxServer;
pub use stdio::StdioTransport;
