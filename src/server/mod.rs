//! The MCP server: the ten tools over stdio, backed by whatever [`Interpreter`] the factory chose.

mod args;
mod mime;
mod outputs;
mod reply;
mod resources;
mod tools;
mod upload;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    Implementation, ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use rmcp::{ServerHandler, tool_handler};

use crate::config::Settings;
use crate::sandbox::Interpreter;

#[derive(Clone)]
pub struct SandboxServer {
    backend: Arc<dyn Interpreter>,
    settings: Arc<Settings>,
    tool_router: ToolRouter<SandboxServer>,
}

impl SandboxServer {
    pub fn new(backend: Arc<dyn Interpreter>, settings: Arc<Settings>) -> Self {
        SandboxServer {
            backend,
            settings,
            tool_router: Self::tool_router(),
        }
    }
}

const INSTRUCTIONS: &str = "Runs Python 3 in isolated sandboxes that keep state between calls. \
Use execute_code to run code (a sandbox is created on first use); variables and imports persist. \
numpy, pandas, scipy, matplotlib, scikit-learn, sympy and more are already installed. \
Files live in /home/user: write_file / upload_file put data in, read_file / list_files get results out. \
The sandbox has no network and no access to the user's files except what is uploaded.";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for SandboxServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("mcp-code-sandbox", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(self.resources().await)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Ok(self.resource(&request.uri).await?.into())
    }
}
