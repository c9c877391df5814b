//! Making a server: every tool family's router combined and annotated, for one local client
//! over stdio or for remote mode.

use std::sync::Arc;

use super::annotations;
use super::handler::SandboxServer;
use super::tools;
use crate::config::Settings;
use crate::downstream::{Allowed, Gateway};
use crate::egress::NetPolicy;
use crate::sandbox::Interpreter;
use crate::tenancy::Tenancy;

impl SandboxServer {
    /// The server for one local client over stdio: every sandbox is that client's.
    pub fn new(backend: Arc<dyn Interpreter>, settings: Arc<Settings>) -> Self {
        let mut tool_router = tools::router();
        // Offered only where the user (or a team server's operator) named folders for it,
        // whether or not they exist yet (one is made on the first save into it).
        if settings.save_folders().is_empty() {
            tool_router.remove_route("save_file");
        }
        let open_world = backend.backend() != "wasm";
        for route in tool_router.map.values_mut() {
            annotations::annotate(&mut route.attr, open_world);
        }
        let runs = Arc::new(super::runs::Runs::new(settings.max_background_runs));
        // Kept sandboxes live `retain_days` unused, and so do their histories.
        let history = Arc::new(super::history::History::open(
            &settings.home_dir(),
            std::time::Duration::from_secs(settings.retain_days.max(1) * 86_400),
        ));
        history.follow();
        SandboxServer {
            history,
            log_level: Arc::default(),
            listen_starts: Arc::default(),
            backend,
            settings,
            tool_router: Arc::new(tool_router),
            tenancy: None,
            host_uploads: true,
            runs,
            code_mode: None,
            mcp_allowed: Allowed::All,
            net: None,
            hosts_narrowed: None,
            default_sandbox: Arc::default(),
        }
    }

    /// The server for a new remote MCP session: everything shared with the others but the
    /// default sandbox, which is each session's own.
    pub fn for_new_session(&self) -> Self {
        SandboxServer {
            default_sandbox: Arc::default(),
            log_level: Arc::default(),
            ..self.clone()
        }
    }

    /// Lets sandbox code reach the hosts the user allows (egress).
    pub fn with_network(self, net: Option<Arc<NetPolicy>>) -> Self {
        SandboxServer { net, ..self }
    }

    /// Lets sandbox code call the user's other MCP servers (code mode).
    pub fn with_code_mode(self, gateway: Option<Arc<Gateway>>) -> Self {
        SandboxServer {
            code_mode: gateway,
            ..self
        }
    }

    /// Each tool's arguments marked `x-mcp-header`, as (header name in lower case, argument):
    /// what a proxy may route by, and so what the remote server holds to the body.
    pub fn header_arguments(&self) -> std::collections::HashMap<String, Vec<(String, String)>> {
        let mut by_tool = std::collections::HashMap::new();
        for tool in self.tool_router.list_all() {
            let marked: Vec<(String, String)> = tool
                .input_schema
                .get("properties")
                .and_then(|p| p.as_object())
                .into_iter()
                .flatten()
                .filter_map(|(argument, schema)| {
                    let header = schema.get("x-mcp-header")?.as_str()?;
                    Some((
                        format!("mcp-param-{}", header.to_ascii_lowercase()),
                        argument.clone(),
                    ))
                })
                .collect();
            by_tool.insert(tool.name.to_string(), marked);
        }
        by_tool
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
