//! One downstream server: starting it (a child process or an HTTP session), its tools, and
//! starting it again when it died, at its next use.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    Implementation, Tool,
};
use rmcp::service::{NotificationContext, Peer, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};

use super::child::{self, LineWatch, MAX_DEPTH, Skip, Skipped};
use super::config::{Policy, Reach};
use crate::host::lock::Locked;
use crate::sandbox::events::{Severity, server_log};

/// Largest message read from a stdio server (rmcp's own default); a longer one is skipped
/// unread, so a server that floods costs a bounded buffer.
pub const MAX_MESSAGE: usize = 16 << 20;

/// Where a server stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Not asked yet (HTTP servers connect at first use) or starting now.
    Starting,
    Ready {
        tools: usize,
    },
    Down {
        why: String,
    },
}

/// A live connection.
struct Conn {
    peer: Peer<RoleClient>,
    tools: Arc<[Tool]>,
    /// Set when the server says its tools changed: they are listed again at the next use.
    stale: Arc<std::sync::atomic::AtomicBool>,
    /// Told when the server sent a message that is not decoded (too large, too deep).
    skipped: Arc<Skipped>,
    /// Dropping it ends the session.
    _service: RunningService<RoleClient, Client>,
    /// A stdio server's process, killed when dropped.
    _child: Option<tokio::process::Child>,
}

enum State {
    Idle,
    Ready(Box<Conn>),
    /// Why, and when a start last failed (a server that cannot start is not retried on every
    /// listing, only after [`RETRY_AFTER`]).
    Down(String, Option<Instant>),
}

/// How long a server that failed to start is reported down before a use tries again.
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// How long listing the tools again after a change may take before the old list stands.
const RELIST: Duration = Duration::from_secs(10);

pub struct Link {
    pub name: String,
    reach: Result<Reach, String>,
    pub policy: Policy,
    state: Mutex<State>,
    /// Held by the one start going, which runs on a task of its own: a caller that stops
    /// waiting does not cut a start short.
    connecting: Arc<tokio::sync::Mutex<()>>,
    /// How long a start may take before the server is reported down with the reason.
    start_time: Duration,
    /// Bumped when a start ends, well or not; callers waiting for one watch it.
    started: tokio::sync::watch::Sender<u64>,
    /// Told when the tools this server offers may have changed.
    changed: Arc<dyn Fn() + Send + Sync>,
}

/// The client side of our session with a downstream server. It declares no capabilities, and
/// rmcp's defaults decline what a server may still ask of its client (sampling: method not
/// found; elicitation: declined; roots: none); it hears when the server's tools change.
#[derive(Clone)]
struct Client {
    stale: Arc<std::sync::atomic::AtomicBool>,
    changed: Arc<dyn Fn() + Send + Sync>,
    /// Its link, to list the tools again when the server says they changed.
    link: std::sync::Weak<Link>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mcp-code-sandbox", env!("CARGO_PKG_VERSION")),
        )
    }

    /// Lists the tools again at once, so the next `tools/list` our client makes describes
    /// them (off the connection's task: the listing is a request on the same connection).
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.stale.store(true, std::sync::atomic::Ordering::SeqCst);
        let Some(link) = self.link.upgrade() else { return };
        let changed = self.changed.clone();
        tokio::spawn(async move {
            match link.live() {
                Some(live) => {
                    let (_, tools) = link.fresh(live.clone(), Instant::now() + RELIST).await;
                    // `fresh` says so itself when the listing came back.
                    if Arc::ptr_eq(&tools, &live.1) {
                        changed();
                    }
                }
                None => changed(),
            }
        });
    }
}

impl Link {
    pub fn new(
        name: String,
        reach: Result<Reach, String>,
        policy: Policy,
        start_time: Duration,
        changed: Arc<dyn Fn() + Send + Sync>,
    ) -> Arc<Link> {
        // A setting's problem is told to the guest and the model: never with its credentials.
        let reach = reach.map_err(|why| crate::telemetry::redact::urls(&why));
        let state = match &reach {
            Ok(_) => State::Idle,
            Err(why) => State::Down(why.clone(), None),
        };
        Arc::new(Link {
            name,
            reach,
            policy,
            state: Mutex::new(state),
            connecting: Arc::default(),
            start_time,
            started: tokio::sync::watch::Sender::new(0),
            changed,
        })
    }

    pub fn is_stdio(&self) -> bool {
        matches!(self.reach, Ok(Reach::Stdio { .. }))
    }

    pub fn standing(&self) -> Standing {
        match &*self.state.locked() {
            State::Idle => Standing::Starting,
            State::Ready(c) => Standing::Ready {
                tools: c.tools.iter().filter(|t| self.policy.permits(&t.name)).count(),
            },
            State::Down(why, _) => Standing::Down { why: why.clone() },
        }
    }

    /// The tools of a live connection, at once; `None` when the server is not ready.
    pub fn ready_tools(&self) -> Option<Arc<[Tool]>> {
        self.live().map(|(_, tools)| tools)
    }

    /// The live connection, if there is one that still works.
    fn live(&self) -> Option<(Peer<RoleClient>, Arc<[Tool]>)> {
        match &*self.state.locked() {
            State::Ready(c) if !c.peer.is_transport_closed() => Some((c.peer.clone(), c.tools.clone())),
            _ => None,
        }
    }

    /// `live` with its tools listed again if the server said they changed (the old list
    /// stands if listing fails).
    async fn fresh(
        &self,
        live: (Peer<RoleClient>, Arc<[Tool]>),
        deadline: Instant,
    ) -> (Peer<RoleClient>, Arc<[Tool]>) {
        let stale = match &*self.state.locked() {
            State::Ready(c) => c.stale.swap(false, std::sync::atomic::Ordering::SeqCst),
            _ => false,
        };
        if !stale {
            return live;
        }
        match tokio::time::timeout_at(deadline.into(), live.0.list_all_tools()).await {
            Ok(Ok(tools)) => {
                let tools: Arc<[Tool]> = tools.into();
                if let State::Ready(c) = &mut *self.state.locked() {
                    c.tools = tools.clone();
                }
                (self.changed)();
                (live.0, tools)
            }
            _ => live,
        }
    }

    /// The server's session and tools, starting it (again) if it is not running; waiting
    /// for the start until `deadline` at most (the start itself goes on: see [`Link::kick`]).
    pub async fn session(
        self: &Arc<Self>,
        deadline: Instant,
    ) -> Result<(Peer<RoleClient>, Arc<[Tool]>), String> {
        if let Some(live) = self.live() {
            return Ok(self.fresh(live, deadline).await);
        }
        self.reach.clone()?;
        if let State::Down(why, Some(at)) = &*self.state.locked()
            && at.elapsed() < RETRY_AFTER
        {
            return Err(why.clone());
        }
        let asked = Instant::now();
        let mut ends = self.started.subscribe();
        self.kick();
        loop {
            if let Some(live) = self.live() {
                return Ok(live);
            }
            if let State::Down(why, Some(at)) = &*self.state.locked()
                && *at >= asked
            {
                return Err(why.clone());
            }
            if tokio::time::timeout_at(deadline.into(), ends.changed())
                .await
                .is_err()
            {
                return Err(format!(
                    "the {} server is still starting; try again shortly",
                    self.name
                ));
            }
        }
    }

    /// Starts the server on a task of its own, unless it is live or a start is going. The
    /// start is given [`Link::start_time`], then reported down with the reason.
    pub fn kick(self: &Arc<Self>) {
        // A start that failed lately is not tried again on every listing or call.
        if let State::Down(_, Some(at)) = &*self.state.locked()
            && at.elapsed() < RETRY_AFTER
        {
            return;
        }
        let Ok(one) = self.connecting.clone().try_lock_owned() else {
            return;
        };
        if self.live().is_some() {
            return;
        }
        let Ok(reach) = self.reach.clone() else {
            return;
        };
        let me = self.clone();
        tokio::spawn(async move {
            let _one = one;
            let was_running = matches!(&*me.state.locked(), State::Ready(_));
            if was_running {
                tracing::warn!(target: "mcp_code_sandbox::downstream", server = %me.name, "the server's connection ended; starting it again");
                server_log(
                    &me.name,
                    Severity::Warning,
                    format!("code mode's server {} went down; starting it again", me.name),
                );
            }
            let result = match tokio::time::timeout(me.start_time, me.connect(&reach)).await {
                Ok(r) => r,
                Err(_) => Err(format!(
                    "the {} server did not finish starting within {} s (CODE_SANDBOX_MCP_START_SECONDS)",
                    me.name,
                    me.start_time.as_secs()
                )),
            };
            match result {
                Ok(conn) => {
                    tracing::info!(target: "mcp_code_sandbox::downstream", server = %me.name, tools = conn.tools.len(), "ready");
                    if was_running {
                        server_log(
                            &me.name,
                            Severity::Info,
                            format!(
                                "code mode's server {} is back, with {} tools",
                                me.name,
                                conn.tools.len()
                            ),
                        );
                    }
                    *me.state.locked() = State::Ready(Box::new(conn));
                }
                Err(why) => {
                    // The reason reaches the guest, the model, log notifications and the log.
                    let why = crate::telemetry::redact::urls(&why);
                    tracing::warn!(target: "mcp_code_sandbox::downstream", server = %me.name, "could not start: {why}");
                    server_log(
                        &me.name,
                        Severity::Warning,
                        format!("code mode's server {} is down: {why}", me.name),
                    );
                    *me.state.locked() = State::Down(why, Some(Instant::now()));
                }
            }
            (me.changed)();
            me.started.send_modify(|n| *n += 1);
        });
    }

    async fn connect(self: &Arc<Self>, reach: &Reach) -> Result<Conn, String> {
        let stale = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let client = Client {
            stale: stale.clone(),
            changed: self.changed.clone(),
            link: Arc::downgrade(self),
        };
        let skipped = Arc::new(Skipped::default());
        let (service, child) = match reach {
            Reach::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let (child, stdout, stdin) = child::spawn(&self.name, command, args, env, cwd.as_deref())?;
                let watched = LineWatch::new(stdout, MAX_MESSAGE, skipped.clone());
                let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(watched, stdin)
                    .with_max_line_length(MAX_MESSAGE);
                let service = client
                    .serve(transport)
                    .await
                    .map_err(|e| format!("it started but did not complete MCP's handshake: {e}"))?;
                (service, Some(child))
            }
            Reach::Http { url, headers } => {
                let mut custom = std::collections::HashMap::new();
                for (k, v) in headers {
                    let name = http::HeaderName::try_from(k.as_str())
                        .map_err(|_| format!("its header name {k:?} is not valid"))?;
                    let value = http::HeaderValue::try_from(v.as_str())
                        .map_err(|_| format!("its header {k} has a value that is not valid"))?;
                    custom.insert(name, value);
                }
                let config =
                    rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                        url.as_str(),
                    )
                    .custom_headers(custom);
                let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
                let service = client
                    .serve(transport)
                    .await
                    .map_err(|e| format!("{url} did not complete MCP's handshake: {e}"))?;
                (service, None)
            }
        };
        // A listing past what is read is skipped unread: say so instead of waiting it out.
        let tools = tokio::select! {
            tools = service.peer().list_all_tools() => tools.map_err(|e| format!("it did not list its tools: {e}"))?,
            _ = skipped.notified() => return Err(match skipped.why() {
                Some(Skip::TooDeep) => format!("its list of tools is JSON nested deeper than {MAX_DEPTH} levels, which cannot be decoded"),
                _ => format!("its list of tools is over {} MiB, more than code mode reads from a server", MAX_MESSAGE >> 20),
            }),
        };
        Ok(Conn {
            peer: service.peer().clone(),
            tools: tools.into(),
            stale,
            skipped,
            _child: child,
            _service: service,
        })
    }

    /// Calls `tool` with `args`, by `deadline`. The outer error is the server being down; a
    /// dropped call (the guest's turn ended) tells the server it was cancelled.
    pub async fn call(
        self: &Arc<Self>,
        tool: &str,
        args: serde_json::Map<String, serde_json::Value>,
        deadline: Instant,
    ) -> Result<Result<CallToolResult, Called>, String> {
        let (peer, _) = self.session(deadline).await?;
        let skipped = match &*self.state.locked() {
            State::Ready(c) => c.skipped.clone(),
            _ => Arc::default(),
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        let answer = tokio::select! {
            a = tokio::time::timeout_at(deadline.into(), peer.call_tool_once(params)) => a,
            // The answer was skipped unread; without this the call would wait for its deadline.
            _ = skipped.notified() => return Ok(Err(match skipped.why() {
                Some(Skip::TooDeep) => Called::TooDeep,
                _ => Called::TooLarge,
            })),
        };
        match answer {
            Err(_) => Ok(Err(Called::Timeout)),
            Ok(Ok(CallToolResponse::Complete(r))) => Ok(Ok(r)),
            Ok(Ok(_)) => Ok(Err(Called::Protocol(
                "the server answered with a task or a request for input, which code mode does not follow"
                    .into(),
            ))),
            Ok(Err(rmcp::ServiceError::McpError(e))) => Ok(Err(Called::Refused(e.message.to_string()))),
            Ok(Err(e)) if peer.is_transport_closed() => Err(crate::telemetry::redact::urls(&format!(
                "the {} server's connection ended during the call ({e}); it is started again at the next call",
                self.name
            ))),
            Ok(Err(e)) => Ok(Err(Called::Protocol(crate::telemetry::redact::urls(
                &e.to_string(),
            )))),
        }
    }

    /// Ends the session (and the child process).
    pub fn stop(&self) {
        let mut state = self.state.locked();
        if matches!(*state, State::Ready(_)) {
            *state = State::Down("the server was stopped".into(), None);
        }
    }
}

/// A call that reached the server but brought no result.
#[derive(Debug)]
pub enum Called {
    Timeout,
    /// The server sent a message past [`MAX_MESSAGE`], skipped unread.
    TooLarge,
    /// The server's answer is JSON nested past [`MAX_DEPTH`], which is not decoded.
    TooDeep,
    /// A JSON-RPC error: an unknown tool, arguments the server refused.
    Refused(String),
    Protocol(String),
}
