//! The MCP server: the tools, over stdio or (through [`crate::remote`]) HTTP, backed by whatever
//! [`Interpreter`] the factory chose.

mod annotations;
mod args;
mod calls;
mod exec_result;
mod figures;
mod mime;
mod outputs;
mod reply;
mod request_id;
mod resources;
mod schema;
mod stdio;
mod tools;
mod upload;

pub use stdio::StdioTransport;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListResourceTemplatesResult,
    ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use rmcp::{ServerHandler, tool_handler};

use crate::config::Settings;
use crate::sandbox::Interpreter;
use crate::tenancy::Tenancy;

#[derive(Clone)]
pub struct SandboxServer {
    backend: Arc<dyn Interpreter>,
    settings: Arc<Settings>,
    tool_router: Arc<ToolRouter<SandboxServer>>,
    /// Remote mode: each call acts through its principal's view of the backend.
    tenancy: Option<Arc<Tenancy>>,
    /// Whether `upload_file` may read `source_path` from this machine's disk.
    host_uploads: bool,
}

impl SandboxServer {
    /// The server for one local client over stdio: every sandbox is that client's.
    pub fn new(backend: Arc<dyn Interpreter>, settings: Arc<Settings>) -> Self {
        let mut tool_router = Self::tool_router();
        let open_world = backend.backend() != "wasm";
        for route in tool_router.map.values_mut() {
            annotations::annotate(&mut route.attr, open_world);
        }
        SandboxServer {
            backend,
            settings,
            tool_router: Arc::new(tool_router),
            tenancy: None,
            host_uploads: true,
        }
    }

    /// The server for remote mode: each call sees only its principal's sandboxes, and host
    /// uploads are off unless the operator turned them on.
    pub fn remote(backend: Arc<dyn Interpreter>, settings: Arc<Settings>, tenancy: Arc<Tenancy>) -> Self {
        let host_uploads = settings.http_host_uploads;
        SandboxServer {
            tenancy: Some(tenancy),
            host_uploads,
            ..SandboxServer::new(backend, settings)
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

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.dispatch(request, context).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.for_caller(&context)?
            .resources(request.and_then(|r| r.cursor))
            .await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            resources::template(),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Ok(self.for_caller(&context)?.resource(&request.uri).await?.into())
    }
}
