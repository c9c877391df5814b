//! The seventeen tools, by family: [`sandboxes`] (create, close, status), [`code`] (run code,
//! install packages), [`runs`] (follow and stop background runs; [`run_start`] starts them), [`files`] (list, read,
//! write, upload) [`state`] (fork, checkpoint, restore) and [`views`] (read_table for the result view, export_notebook). Each tool parses its arguments, resolves the sandbox, calls the backend through
//! the traits, and shapes the reply; the work itself lives in the backend.

mod code;
mod files;
mod places;
mod run_start;
mod runs;
mod sandboxes;
mod shared;
mod state;
mod views;

use rmcp::handler::server::router::tool::ToolRouter;

use super::SandboxServer;

/// Every tool, the families' routers combined.
pub fn router() -> ToolRouter<SandboxServer> {
    SandboxServer::sandbox_tools()
        + SandboxServer::code_tools()
        + SandboxServer::run_tools()
        + SandboxServer::file_tools()
        + SandboxServer::state_tools()
        + SandboxServer::view_tools()
}
