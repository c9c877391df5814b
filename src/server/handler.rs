//! The MCP server itself: one value per client session, holding the backend it acts on, and
//! its answers to the protocol's requests (tools through their router, resources).

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer};
use rmcp::{ServerHandler, tool_handler};

use crate::config::Settings;
use crate::downstream::{Allowed, Gateway};
use crate::egress::{HostRule, NetPolicy};
use crate::sandbox::Interpreter;
use crate::tenancy::Tenancy;

#[derive(Clone)]
pub struct SandboxServer {
    pub(super) backend: Arc<dyn Interpreter>,
    pub(super) settings: Arc<Settings>,
    pub(super) tool_router: Arc<ToolRouter<SandboxServer>>,
    /// Remote mode: each call acts through its principal's view of the backend.
    pub(super) tenancy: Option<Arc<Tenancy>>,
    /// Whether `upload_file` may read `source_path` from this machine's disk.
    pub(super) host_uploads: bool,
    /// Background runs, shared by every principal's view (each sees only its own).
    pub(super) runs: Arc<super::runs::Runs>,
    /// Code mode: the user's other MCP servers, when a servers file is set.
    pub(super) code_mode: Option<Arc<Gateway>>,
    /// Which of them this caller's code may use (a remote principal: its tokens line's).
    pub(super) mcp_allowed: Allowed,
    /// The hosts sandbox code may reach, when the user allows any.
    pub(super) net: Option<Arc<NetPolicy>>,
    /// A remote principal's `hosts=`, which narrows them.
    pub(super) hosts_narrowed: Option<Vec<HostRule>>,
    /// The sandbox calls without an id act on: this value's session's own.
    pub(super) default_sandbox: Arc<super::default_sandbox::DefaultSandbox>,
    /// Each sandbox's cells, for export_notebook.
    pub(super) history: Arc<super::history::History>,
    /// The log level this session asked for (`logging/setLevel`); none: no log notifications.
    pub(super) log_level: Arc<super::log_level::LogLevel>,
    /// Where accepted `subscriptions/listen` streams start (see `notices::ListenStart`).
    pub(super) listen_starts: Arc<super::notices::ListenStarts>,
}

const INSTRUCTIONS: &str = "Runs Python 3 in isolated sandboxes that keep state between calls. \
Use execute_code to run code (a sandbox is created on first use); variables and imports persist. \
For work that may take more than about 50 seconds, pass background=true and follow the run with get_run. \
numpy, pandas, scipy, matplotlib, scikit-learn, sympy and more are already installed. \
Files live in /home/user: write_file / upload_file put data in, read_file / list_files get results out. ";
const NO_NETWORK: &str =
    "The sandbox has no network and no access to the user's files except what is uploaded.";
const SOME_NETWORK: &str = "Sandbox code may reach only the hosts execute_code's description lists, and has no access \
to the user's files except what is uploaded.";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for SandboxServer {
    // `enable_logging` is deprecated by SEP-2577 in rmcp, still part of 2025-11-25 (see `log_level`).
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_tasks()
            .enable_completions()
            .enable_logging()
            .build();
        // MCP Apps: the result view (see `view`).
        let mut ui = rmcp::model::JsonObject::new();
        ui.insert("mimeTypes".into(), serde_json::json!([super::view::MIME_TYPE]));
        capabilities
            .extensions
            .get_or_insert_default()
            .insert("io.modelcontextprotocol/ui".into(), ui);
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("mcp-code-sandbox", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "{INSTRUCTIONS}{}",
                if self.net.is_some() {
                    SOME_NETWORK
                } else {
                    NO_NETWORK
                }
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = self.tool_router.list_all();
        let caller = self.for_caller(&context)?;
        // What code may call and reach depends on who asks, and changes as servers start.
        let mut said = super::describe::integers(self.backend.backend()).to_string();
        if let Some(gateway) = &self.code_mode {
            said += &gateway.describe(&caller.mcp_allowed);
        }
        if let Some(net) = &self.net {
            said += &super::describe::network(&net.rules, caller.hosts_narrowed.as_deref());
        }
        let index = super::describe::package_index(&self.settings, self.backend.backend());
        for t in tools.iter_mut() {
            super::view::annotate(t);
            let more = match t.name.as_ref() {
                "execute_code" => &said,
                "install_package" => &index,
                _ => continue,
            };
            let base = t.description.as_deref().unwrap_or_default();
            t.description = Some(format!("{base}{more}").into());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Tell a 2025-11-25 session what changes under it (code mode's servers, its sandboxes,
        // log lines once it asks for them), until it goes away.
        super::notices::follow_session(
            self.audience_in(&context.extensions),
            self.log_level.clone(),
            self.code_mode.as_ref().map(|g| g.changes()),
            context.peer,
        );
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.dispatch(request, context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.task_status(&request.task_id, &context)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.task_cancel(&request.task_id, &context)
    }

    /// `tasks/update`: a run never waits for input, so there is nothing to deliver; the task
    /// must still be the caller's.
    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.task_status(&request.task_id, &context).map(|_| ())
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
        Ok(self.resource_templates())
    }

    /// `subscriptions/listen` (2026-07-28): tool list changes, which code mode's servers cause
    /// when they start, stop or change their tools, and resource list changes, as the
    /// caller's sandboxes come and go.
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let mut accepted = rmcp::model::SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed.filter(|on| *on);
        accepted.resources_list_changed = requested.resources_list_changed.filter(|on| *on);
        self.listen_starts
            .prepare(self.code_mode.as_ref().map(|g| g.changes()));
        Some(accepted)
    }

    async fn listen(&self, subscription: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        let start = self
            .listen_starts
            .take(|| self.code_mode.as_ref().map(|g| g.changes()));
        super::notices::serve_listen(
            self.audience_in(&subscription.request_context().extensions),
            start,
            subscription,
        )
        .await;
        Ok(())
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, ErrorData> {
        Ok(self.for_caller(&context)?.completions(&request).await)
    }

    // Deprecated by SEP-2577 in rmcp, still part of 2025-11-25 (see `log_level`).
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.log_level.set(request.level);
        Ok(())
    }

    /// rmcp hands over a standard method whose params it could not take as a custom request.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        let header = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.headers.get("mcp-protocol-version"))
            .and_then(|v| v.to_str().ok());
        if super::methods::is_known_method(&request.method, request.params.as_ref(), header) {
            return Err(ErrorData::invalid_params(
                format!(
                    "invalid params for '{}': they do not have the fields and types the MCP specification gives this method",
                    request.method
                ),
                None,
            ));
        }
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("no method '{}' on this server", request.method),
            None,
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if let Some(view) = super::view::read(&request.uri) {
            return Ok(view.into());
        }
        Ok(self.for_caller(&context)?.resource(&request.uri).await?.into())
    }
}
