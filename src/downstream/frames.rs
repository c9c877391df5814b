//! One `execute_code` call's access to the downstream tools: the frames of the guest's
//! `mcp_tools` module answered, within the call's deadline, call budget and size limits, and
//! the record of calls its result carries.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::child::MAX_DEPTH;
use super::gateway::{Allowed, Gateway};
use super::link::{Called, Link, Standing};
use crate::host::lock::Locked;
use crate::sandbox::call_scope::{self, CallScope};
use crate::sandbox::{GuestServices, Refusal, ToolCall, answer_by};

/// The guest module, sent to the guest when it first imports `mcp_tools`.
const MODULE_SOURCE: &str = include_str!("../../runtime/guest/mcp_tools.py");

/// Largest arguments or result carried between guest code and a downstream tool.
pub const MAX_BYTES: usize = 10_000_000;

/// How long a listing waits for servers still starting.
const LIST_WAIT: Duration = Duration::from_secs(30);

/// How often a long downstream call reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

#[derive(Deserialize)]
struct Frame {
    op: String,
    #[serde(default)]
    server: String,
    #[serde(default)]
    tool: String,
    #[serde(default)]
    args: Option<Value>,
}

pub struct CallTools {
    gateway: Arc<Gateway>,
    allowed: Allowed,
    /// Calls this execution may still make.
    left: AtomicUsize,
    log: Mutex<Vec<ToolCall>>,
    /// The tool call this execution runs in, for progress; `None` for a background run.
    scope: Option<Arc<CallScope>>,
}

impl CallTools {
    /// The tools one `execute_code` call may use, or `None` when this caller may use none.
    /// `in_call`: the execution answers the tool call running on this task, so its progress
    /// goes there (not so for a background run).
    pub fn for_call(gateway: &Arc<Gateway>, allowed: Allowed, in_call: bool) -> Option<Arc<CallTools>> {
        if !gateway.offers_any(&allowed) {
            return None;
        }
        Some(CallTools::new(gateway.clone(), allowed, in_call))
    }

    fn new(gateway: Arc<Gateway>, allowed: Allowed, in_call: bool) -> Arc<CallTools> {
        let left = AtomicUsize::new(gateway.max_calls);
        Arc::new(CallTools {
            gateway,
            allowed,
            left,
            log: Mutex::new(Vec::new()),
            scope: call_scope::current().filter(|_| in_call),
        })
    }

    /// Every server this caller may use, as it stands now: a server still starting is listed
    /// as such (and started if it was not), so one slow server holds up no other. With
    /// `only`, that one server, waiting (bounded) for its start.
    async fn list(&self, deadline: Instant, only: Option<&str>) -> Value {
        let wait = answer_by(deadline).min(Instant::now() + LIST_WAIT);
        let mut servers = serde_json::Map::new();
        for l in self.gateway.links(&self.allowed) {
            if only.is_some_and(|name| name != l.name) {
                continue;
            }
            let session = match (only, l.ready_tools()) {
                (_, Some(tools)) => Ok(tools),
                (Some(_), None) => l.session(wait).await.map(|(_, tools)| tools),
                (None, None) => {
                    l.kick();
                    match l.standing() {
                        Standing::Down { why } => Err(why),
                        _ => {
                            servers.insert(l.name.clone(), json!({"state": "starting", "tools": []}));
                            continue;
                        }
                    }
                }
            };
            let entry = match session {
                Ok(tools) => {
                    let (permitted, denied): (Vec<_>, Vec<_>) =
                        tools.iter().partition(|t| l.policy.permits(&t.name));
                    let tools: Vec<Value> = permitted
                        .into_iter()
                        .map(|t| {
                            json!({
                                "name": t.name,
                                "description": t.description,
                                "inputSchema": t.input_schema,
                            })
                        })
                        .collect();
                    // Names only, so reaching one as an attribute says it is denied (and by
                    // which setting) instead of that it does not exist; servers() hides them.
                    let denied: Vec<&str> = denied.into_iter().map(|t| t.name.as_ref()).collect();
                    json!({"state": "ready", "tools": tools, "denied": denied})
                }
                Err(_) if l.standing() == Standing::Starting => json!({"state": "starting", "tools": []}),
                Err(why) => json!({"state": "down", "error": why, "tools": []}),
            };
            servers.insert(l.name.clone(), entry);
        }
        json!({"ok": true, "servers": servers})
    }

    async fn call(
        &self,
        server: &str,
        tool: &str,
        args: Option<Value>,
        deadline: Instant,
    ) -> Result<Vec<u8>, Refusal> {
        let link = self.admitted(server, tool, deadline).await?;
        let (args, sent) = arguments(server, tool, args)?;
        self.spend_one()?;
        let started = Instant::now();
        let outcome = self
            .progress(server, tool, link.call(tool, args, answer_by(deadline)))
            .await;
        let (answer, received, ok) = self.answered(server, tool, outcome);
        let duration_ms = started.elapsed().as_millis() as u64;
        tracing::info!(
            target: "mcp_code_sandbox::downstream",
            server = %server,
            tool = %tool,
            duration_ms,
            ok,
            bytes = (sent + received) as u64,
            outcome = answer.as_ref().err().map_or("ok", |r| r.kind),
            "downstream call"
        );
        self.log.locked().push(ToolCall {
            server: server.to_string(),
            tool: tool.to_string(),
            duration_ms,
            ok,
            bytes: (sent + received) as u64,
        });
        answer
    }

    /// The link to `server` when this code may call its `tool`: the server is known, this
    /// caller may use it, the user's rules allow the tool, and the server lists it (a name
    /// the server did not list never leaves the host: a server that looks names up loosely
    /// would otherwise run a tool under a spelling no rule was written for).
    async fn admitted(&self, server: &str, tool: &str, deadline: Instant) -> Result<Arc<Link>, Refusal> {
        let Some(link) = self.gateway.link(server) else {
            let names: Vec<&str> = self
                .gateway
                .links(&self.allowed)
                .map(|l| l.name.as_str())
                .collect();
            return Err(Refusal::new(
                "unknown_tool",
                format!(
                    "there is no MCP server {server:?} for this code; there are: {}",
                    names.join(", ")
                ),
            ));
        };
        if !self.allowed.admits(server) {
            return Err(Refusal::new(
                "denied",
                format!(
                    "this token may not use the {server} server: its line in the tokens file (CODE_SANDBOX_TOKENS) needs mcp={server} (or a list naming it)"
                ),
            ));
        }
        if !link.policy.permits(tool) {
            return Err(Refusal::new(
                "denied",
                format!(
                    "the user does not allow code to call {server}.{tool}: the \"allow\"/\"deny\" lists of {server:?} in the CODE_SANDBOX_MCP_SERVERS file leave it out"
                ),
            ));
        }
        let listed = match link.session(answer_by(deadline)).await {
            Ok((_, tools)) => tools,
            Err(down) => return Err(Refusal::new("down", down)),
        };
        if !listed.iter().any(|t| t.name == tool) {
            return Err(unlisted(server, tool, &listed, &link.policy));
        }
        Ok(link.clone())
    }

    /// Takes one of this execute_code call's tool calls (CODE_SANDBOX_MCP_CALLS).
    fn spend_one(&self) -> Result<(), Refusal> {
        self.left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .map(|_| ())
            .map_err(|_| {
                Refusal::new(
                    "budget_exceeded",
                    format!(
                        "this execute_code call made its {} tool calls (CODE_SANDBOX_MCP_CALLS); make more in the next call, or do more per call",
                        self.gateway.max_calls
                    ),
                )
            })
    }

    /// What the guest gets for a downstream call's outcome: the frame or the refusal, the
    /// bytes received, and whether the tool succeeded.
    fn answered(
        &self,
        server: &str,
        tool: &str,
        outcome: Result<Result<rmcp::model::CallToolResult, Called>, String>,
    ) -> (Result<Vec<u8>, Refusal>, usize, bool) {
        let refused = |kind, why: String| (Err(Refusal::new(kind, why)), 0, false);
        let result = match outcome {
            Err(down) => return refused("down", down),
            Ok(Err(called)) => return refused_call(server, tool, called),
            Ok(Ok(result)) => result,
        };
        let ok = result.is_error != Some(true);
        match serde_json::to_vec(&result) {
            Ok(body) if body.len() > MAX_BYTES => {
                let n = body.len();
                (
                    Err(Refusal::new(
                        "too_large",
                        format!(
                            "the result of {server}.{tool} is {n} bytes, over the {MAX_BYTES} bytes code mode carries into the sandbox; ask the tool for less (a filter, a page, a narrower query)"
                        ),
                    )),
                    n,
                    false,
                )
            }
            Ok(body) => {
                let n = body.len();
                let mut frame =
                    format!(r#"{{"ok":true,"version":{},"result":"#, self.gateway.version()).into_bytes();
                frame.extend_from_slice(&body);
                frame.push(b'}');
                (Ok(frame), n, ok)
            }
            Err(e) => refused("protocol", format!("{server}.{tool}: {e}")),
        }
    }

    /// Runs `call`, telling a client that listens which tool the code is waiting for.
    async fn progress<T>(&self, server: &str, tool: &str, call: impl std::future::Future<Output = T>) -> T {
        let Some(scope) = self.scope.clone().filter(|s| s.reports()) else {
            return call.await;
        };
        let started = Instant::now();
        scope.report(format!("calling the {server} server's tool {tool}"));
        tokio::pin!(call);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        loop {
            tokio::select! {
                r = &mut call => return r,
                _ = tick.tick() => scope.report(format!(
                    "calling the {server} server's tool {tool}: {} s so far",
                    started.elapsed().as_secs()
                )),
            }
        }
    }
}

/// A tool's arguments as the server takes them (a JSON object), and their size, within what
/// code mode carries.
fn arguments(
    server: &str,
    tool: &str,
    args: Option<Value>,
) -> Result<(serde_json::Map<String, Value>, usize), Refusal> {
    let args = match args {
        None => serde_json::Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(Refusal::new(
                "invalid_arguments",
                "a tool's arguments are keywords (a JSON object)",
            ));
        }
    };
    let sent = serde_json::to_vec(&args).map(|v| v.len()).unwrap_or(usize::MAX);
    if sent > MAX_BYTES {
        return Err(Refusal::new(
            "too_large",
            format!(
                "the arguments for {server}.{tool} are {sent} bytes, over the {MAX_BYTES} bytes code mode carries; pass less (a path, an id) instead"
            ),
        ));
    }
    Ok((args, sent))
}

/// The refusal for a call that reached the server but brought no result.
fn refused_call(server: &str, tool: &str, called: Called) -> (Result<Vec<u8>, Refusal>, usize, bool) {
    let (kind, why) = match called {
        Called::Timeout => (
            "timeout",
            format!(
                "{server}.{tool} did not answer within this execute_code call's time limit; it was cancelled (ask for less, or give the call a longer timeout_seconds)"
            ),
        ),
        Called::TooLarge => (
            "too_large",
            format!(
                "the result of {server}.{tool} is over {} bytes, more than code mode reads from a server (and over the {MAX_BYTES} bytes it carries into the sandbox); ask the tool for less (a filter, a page, a narrower query)",
                super::link::MAX_MESSAGE
            ),
        ),
        Called::TooDeep => {
            tracing::warn!(target: "mcp_code_sandbox::downstream", server = %server, tool = %tool, "the answer is nested deeper than {MAX_DEPTH} levels and was not decoded");
            (
                "protocol",
                format!(
                    "the answer of {server}.{tool} is JSON nested deeper than {MAX_DEPTH} levels, which cannot be decoded; ask the tool for a flatter result"
                ),
            )
        }
        Called::Refused(why) => ("tool_error", format!("{server}.{tool}: {why}")),
        Called::Protocol(why) => ("protocol", format!("{server}.{tool}: {why}")),
    };
    (Err(Refusal::new(kind, why)), 0, false)
}

/// The refusal for a tool name `server` did not list, naming the permitted tools closest to it.
fn unlisted(
    server: &str,
    tool: &str,
    listed: &[rmcp::model::Tool],
    policy: &super::config::Policy,
) -> Refusal {
    let wanted = super::glob::folded(tool);
    let mut close: Vec<(f64, &str)> = listed
        .iter()
        .filter(|t| policy.permits(&t.name))
        .map(|t| {
            (
                strsim::jaro_winkler(&wanted, &super::glob::folded(&t.name)),
                t.name.as_ref(),
            )
        })
        .filter(|(score, _)| *score >= 0.8)
        .collect();
    close.sort_by(|a, b| b.0.total_cmp(&a.0));
    let close: Vec<String> = close.into_iter().take(3).map(|(_, n)| format!("{n:?}")).collect();
    let hint = if close.is_empty() {
        "mcp_tools.servers() lists the tools this code may call".to_string()
    } else {
        format!("did you mean {}?", close.join(" or "))
    };
    Refusal::new(
        "unknown_tool",
        format!("the {server} server lists no tool {tool:?}; name a tool exactly as it is listed ({hint})"),
    )
}

#[async_trait]
impl GuestServices for CallTools {
    async fn answer(&self, frame: &[u8], deadline: Instant) -> Vec<u8> {
        let frame: Frame = match serde_json::from_slice(frame) {
            Ok(f) => f,
            Err(e) => return Refusal::new("protocol", format!("the frame could not be read: {e}")).frame(),
        };
        match frame.op.as_str() {
            "source" => MODULE_SOURCE.as_bytes().to_vec(),
            "version" => json!({"ok": true, "version": self.gateway.version()})
                .to_string()
                .into_bytes(),
            "list" => {
                let only = (!frame.server.is_empty()).then_some(frame.server.as_str());
                self.list(deadline, only).await.to_string().into_bytes()
            }
            "call" => match self.call(&frame.server, &frame.tool, frame.args, deadline).await {
                Ok(frame) => frame,
                Err(r) => r.frame(),
            },
            other => Refusal::new("protocol", format!("unknown operation {other:?}")).frame(),
        }
    }

    fn calls(&self) -> Vec<ToolCall> {
        self.log.locked().clone()
    }
}
