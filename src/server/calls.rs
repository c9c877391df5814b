//! Every tool call passes here: in remote mode it is handed the backend as its principal sees
//! it, and each call leaves one structured log line (who, what, which sandbox, how long, how
//! it ended), never its code, tokens or file contents.

use crate::telemetry::log_safe::Field;
use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::SandboxServer;
use super::default_sandbox::DefaultChange;
use super::notices::{Audience, CallLog};
use super::services::CallServices;
use crate::downstream::{Allowed, CallTools};
use crate::egress::{Egress, HostRule};
use crate::sandbox::call_scope::{self, CallScope, Notify};
use crate::sandbox::{GuestServices, Interpreter};
use crate::tenancy::Principal;

/// How a call ended, as the log line says it.
/// How a call ended, for its log line and the metrics.
pub use crate::telemetry::metrics::CallOutcome as Outcome;

/// The client's address, in each HTTP request's extensions: the peer's, or the one a trusted
/// proxy's PROXY header names. Limits per address count it, and each call's log line says it.
#[derive(Clone, Copy, Debug)]
pub struct ClientAddr(pub std::net::IpAddr);

/// The client's address the HTTP layer attached to the request, if any.
fn client_of(context: &RequestContext<RoleServer>) -> Option<std::net::IpAddr> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<ClientAddr>())
        .map(|c| c.0)
}

/// The principal the HTTP layer attached to the request, if any.
pub fn principal_of(context: &RequestContext<RoleServer>) -> Option<Principal> {
    principal_in(&context.extensions)
}

/// The principal the HTTP layer attached to a request or notification, if any.
fn principal_in(extensions: &rmcp::model::Extensions) -> Option<Principal> {
    extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .cloned()
}

impl SandboxServer {
    /// This server as the call's principal sees it: in remote mode a copy whose backend is
    /// that principal's view; over stdio, itself.
    pub(super) fn for_caller(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<SandboxServer, ErrorData> {
        let Some(tenancy) = &self.tenancy else {
            return Ok(self.clone());
        };
        let who = principal_of(context).ok_or_else(|| {
            ErrorData::invalid_request(
                "this request carries no principal; send it through the server's /mcp endpoint",
                None,
            )
        })?;
        // A principal's `hosts=` narrows the server's list. An entry that is not a pattern is
        // logged and left out, which narrows further, never widens.
        let hosts_narrowed = who.hosts.as_ref().map(|list| {
            list.iter()
                .filter_map(|h| match HostRule::parse(h) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        tracing::warn!("principal {}: {e}", Field(&who.name));
                        None
                    }
                })
                .collect()
        });
        Ok(SandboxServer {
            mcp_allowed: Allowed::Only(who.mcp_servers.clone()),
            hosts_narrowed,
            backend: tenancy.view(who),
            ..self.clone()
        })
    }

    /// What one execution's code may reach beyond its sandbox, if anything: `in_call` when the
    /// execution answers this call (its progress then names the tool it waits for), not for a
    /// background run.
    pub(super) fn guest_services(&self, in_call: bool) -> Option<Arc<dyn GuestServices>> {
        let tools = self
            .code_mode
            .as_ref()
            .and_then(|g| CallTools::for_call(g, self.mcp_allowed.clone(), in_call));
        let net = self
            .net
            .as_ref()
            .map(|policy| Egress::new(policy.clone(), self.hosts_narrowed.clone()));
        if tools.is_none() && net.is_none() {
            return None;
        }
        Some(Arc::new(CallServices { tools, net }))
    }

    pub(super) async fn dispatch(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        let tool = request.name.to_string();
        let mut sandbox = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("sandbox_id"))
            .and_then(|v| v.as_str())
            .map(str::to_string);
        let who = principal_of(&context);
        let client = client_of(&context).map_or_else(|| "-".to_string(), |ip| ip.to_string());
        let remote = who.as_ref().map(|p| p.name.clone());
        let principal = remote
            .clone()
            .unwrap_or_else(|| Arc::from(crate::tenancy::names::LOCAL));
        let ct = context.ct.clone();
        let scope = CallScope::new(notifier(&context), ct.clone(), remote);
        // A 2026-07-28 call may ask for log lines of what it causes (a session that set a level
        // hears of them anyway).
        let call_log = context
            .meta
            .log_level()
            .filter(|_| !self.log_level.is_set())
            .map(|level| (CallLog::start(self.audience(who), level), context.peer.clone()));
        let result = match self.for_caller(&context) {
            Ok(server) => {
                let as_task = wants_task(&request, &context);
                let router = server.tool_router.clone();
                let call: futures_util::future::BoxFuture<'_, Result<CallToolResponse, ErrorData>> =
                    if as_task {
                        Box::pin(async { Ok(server.execute_as_task(request, &context).await) })
                    } else {
                        let tcc =
                            rmcp::handler::server::tool::ToolCallContext::new(&server, request, context);
                        Box::pin(async move { router.call(tcc).await })
                    };
                // A bug that panics must still answer the call, or the client waits forever.
                let call = std::panic::AssertUnwindSafe(call);
                let backend = server.backend.clone();
                let (r, acted) = call_scope::scope(
                    scope,
                    ACTED_ON.scope(std::cell::RefCell::new(Acted::default()), async {
                        let r = futures_util::FutureExt::catch_unwind(call).await;
                        (r, ACTED_ON.with(|a| a.take()))
                    }),
                )
                .await;
                sandbox = acted.on.or(sandbox);
                self.change_default(acted.default, backend.as_ref());
                match r {
                    Ok(r) => within_budget(r, &tool, &self.settings),
                    Err(panic) => Ok(CallToolResponse::Complete(panicked(&tool, panic.as_ref()))),
                }
            }
            Err(e) => Err(e),
        };
        if let Some((log, peer)) = call_log {
            log.send(&peer).await;
        }
        let outcome = match &result {
            _ if ct.is_cancelled() => Outcome::Cancelled,
            Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => Outcome::ToolError,
            Ok(_) => Outcome::Ok,
            Err(_) => Outcome::Rejected,
        };
        crate::telemetry::metrics::call(
            &tool,
            self.tool_router.has_route(&tool),
            outcome,
            &principal,
            started.elapsed().as_secs_f64(),
        );
        tracing::info!(
            target: "mcp_code_sandbox::call",
            principal = %Field(&principal),
            client = %client,
            tool = %Field(&tool),
            sandbox = %Field(sandbox.as_deref().unwrap_or("-")),
            duration_ms = started.elapsed().as_millis() as u64,
            outcome = %outcome,
            "call"
        );
        result
    }
}

impl SandboxServer {
    /// Who hears of events as `who` (none: the local user) in this server: its sandboxes, and
    /// the servers its code may use (a remote principal: its tokens line's, as in `for_caller`).
    pub(super) fn audience(&self, who: Option<Principal>) -> Audience {
        match who {
            Some(p) => Audience::new(Some(p.name), self.tenancy.clone(), Allowed::Only(p.mcp_servers)),
            None => Audience::new(None, self.tenancy.clone(), self.mcp_allowed.clone()),
        }
    }

    /// [`Self::audience`] for whoever sent the request or notification with `extensions`.
    pub(super) fn audience_in(&self, extensions: &rmcp::model::Extensions) -> Audience {
        self.audience(principal_in(extensions))
    }

    /// Applies what a call did to the session's default sandbox. A sandbox named by an id only
    /// becomes the default if it is open to this caller: a mistyped id must not replace a
    /// default that still works. (`usage` is a lookup in local bookkeeping, cheap on every
    /// call; listing the sandboxes would cost a sort of all of them.)
    fn change_default(&self, change: Option<DefaultChange>, backend: &dyn Interpreter) {
        match change {
            Some(DefaultChange::Use(id)) if backend.usage(&id).is_ok() => {
                self.default_sandbox.set(&id);
            }
            Some(DefaultChange::Closed(id)) => self.default_sandbox.forget(&id),
            _ => {}
        }
    }
}

/// The last guard on the result budget. Each tool shapes its own result to fit, so this is a
/// bug when it happens; the client then gets an error that says so rather than a result it
/// refuses or cuts where the model cannot tell.
fn within_budget(
    r: Result<CallToolResponse, ErrorData>,
    tool: &str,
    settings: &crate::config::Settings,
) -> Result<CallToolResponse, ErrorData> {
    let budget = settings.result_budget();
    match r {
        Ok(CallToolResponse::Complete(result)) => {
            let size = super::reply::size_of(&result);
            if size <= budget {
                return Ok(CallToolResponse::Complete(result));
            }
            tracing::error!(tool = %Field(tool), size, budget, "a result over the budget was replaced");
            Ok(CallToolResponse::Complete(super::reply::fail(format!(
                "{tool}'s result was {size} bytes, over {}; this is a bug in the server, please report it. Ask for less at once (a part of the file, fewer figures, less output)",
                settings.result_limit()
            ))))
        }
        other => other,
    }
}

/// Whether the call may be answered with an MCP task (`execute_code`, from a client that
/// declared the extension; see `tasks.rs`).
fn wants_task(request: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> bool {
    request.name == "execute_code" && context.client_capabilities().is_some_and(|c| c.supports_tasks())
}

/// Sends MCP progress notifications for the call, when the client gave a progress token.
fn notifier(context: &RequestContext<RoleServer>) -> Option<Notify> {
    let token = context.meta.get_progress_token()?;
    let peer = context.peer.clone();
    Some(Arc::new(move |progress: f64, message: String| {
        let param = ProgressNotificationParam::new(token.clone(), progress).with_message(message);
        let peer = peer.clone();
        tokio::spawn(async move {
            let _ = peer.notify_progress(param).await;
        });
    }))
}

/// The result of a call whose handler panicked: an error the client can show, and a log line.
fn panicked(tool: &str, panic: &(dyn std::any::Any + Send)) -> CallToolResult {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    tracing::error!("{tool} panicked: {what}");
    super::reply::fail(format!(
        "{tool} stopped on an internal error ({what}); the server keeps running. Try the call again; if it happens again, please report it"
    ))
}

/// What the tool call running on a task did: the sandbox its log line names, and what it did to
/// the session's default sandbox.
#[derive(Default)]
struct Acted {
    on: Option<String>,
    default: Option<DefaultChange>,
}

tokio::task_local! {
    static ACTED_ON: std::cell::RefCell<Acted>;
}

/// Records the sandbox the current tool call acts on (its log line names it), without making
/// it the default: a run looked up, a sandbox made and closed in one call. Outside a call,
/// nothing.
pub(super) fn acted_on(id: &str) {
    let _ = ACTED_ON.try_with(|a| a.borrow_mut().on = Some(id.to_string()));
}

/// The current call created or used `id`: once the call ends, calls without an id act on it.
pub(super) fn used(id: &str) {
    let _ = ACTED_ON.try_with(|a| {
        let mut a = a.borrow_mut();
        a.on = Some(id.to_string());
        a.default = Some(DefaultChange::Use(id.to_string()));
    });
}

/// The current call closed `id`: if it was the default, there is none now.
pub(super) fn closed(id: &str) {
    let _ = ACTED_ON.try_with(|a| a.borrow_mut().default = Some(DefaultChange::Closed(id.to_string())));
}
