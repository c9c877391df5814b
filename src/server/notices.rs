//! Sandbox and code-mode events (see [`events`]) as MCP notifications: log lines to a
//! 2025-11-25 session that asked with `logging/setLevel` and to a 2026-07-28 call whose
//! `_meta` carries a level, and list changes to sessions and `subscriptions/listen` streams.
//! Each listener hears only of its own principal's sandboxes and of the servers its code may
//! use: an event names a sandbox id, which is another principal's business.
//!
//! rmcp marks logging deprecated (SEP-2577 drops `logging/setLevel` after 2026-07-28), but
//! 2025-11-25 clients use it, and 2026-07-28 keeps the per-request level.
#![allow(deprecated)]

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::Peer;
use tokio::sync::broadcast::error::RecvError;

use super::log_level::{LogLevel, reaches};
use crate::downstream::Allowed;
use crate::host::lock::Locked as _;
use crate::sandbox::events::{self, About, Event, Severity, What};
use crate::tenancy::Tenancy;

/// How often a session's listener checks that its client is still there when nothing happens.
const LIVENESS: Duration = Duration::from_secs(30);

/// Whose sandboxes a listener hears of.
#[derive(Clone)]
enum Whose {
    /// Over stdio: the one local user's, all of them.
    All,
    /// In remote mode: one principal's, by the tenancy's record of who owns what.
    Of(Arc<str>, Arc<Tenancy>),
    /// In remote mode without a principal (which the HTTP layer never lets through): none.
    None,
}

/// Who hears of an event: one principal's view (or, over stdio, the one local user).
#[derive(Clone)]
pub struct Audience {
    whose: Whose,
    mcp_allowed: Allowed,
}

impl Audience {
    pub fn new(principal: Option<Arc<str>>, tenancy: Option<Arc<Tenancy>>, mcp_allowed: Allowed) -> Self {
        let whose = match (principal, tenancy) {
            (_, None) => Whose::All,
            (Some(me), Some(t)) => Whose::Of(me, t),
            (None, Some(_)) => Whose::None,
        };
        Audience { whose, mcp_allowed }
    }

    pub fn hears(&self, e: &Event) -> bool {
        match (&e.about, &self.whose) {
            (About::Server(name), _) => self.mcp_allowed.admits(name),
            (About::Sandbox(_), Whose::All) => true,
            (About::Sandbox(_), Whose::None) => false,
            (About::Sandbox(id), Whose::Of(me, tenancy)) => {
                // A sandbox just made has no owner on record yet; the call that made it does.
                let owner = match e.what {
                    What::Opened => e.by.clone(),
                    _ => tenancy.owner_of(id).or_else(|| e.by.clone()),
                };
                owner.as_deref() == Some(&**me)
            }
        }
    }
}

/// The log line an event makes, if any (a sandbox closing says nothing: the client did it,
/// or a line said why before).
fn log_line(e: &Event) -> Option<(LoggingLevel, String)> {
    match (&e.what, &e.about) {
        (What::Log(Severity::Info, text), _) => Some((LoggingLevel::Info, text.clone())),
        (What::Log(Severity::Warning, text), _) => Some((LoggingLevel::Warning, text.clone())),
        (What::Opened, About::Sandbox(id)) => Some((LoggingLevel::Info, format!("sandbox {id} was created"))),
        _ => None,
    }
}

/// Sends one log notification; false once the client is gone.
pub async fn send_log(peer: &Peer<RoleServer>, level: LoggingLevel, text: String) -> bool {
    let message = LoggingMessageNotificationParam::new(level, serde_json::Value::String(text))
        .with_logger("mcp-code-sandbox");
    peer.notify_logging_message(message).await.is_ok()
}

type ToolChanges = tokio::sync::watch::Receiver<u64>;

/// The next change of code mode's tool lists, with the receiver to wait for the one after;
/// never, without code mode or once it is gone. A caller keeps this future across its
/// `select!` turns: the coalescing wait inside has seen the change already, so dropping the
/// future there would lose it.
async fn next_tool_change(tools: Option<ToolChanges>) -> ToolChanges {
    if let Some(mut t) = tools
        && crate::downstream::Gateway::next_change(&mut t).await
    {
        return t;
    }
    std::future::pending().await
}

/// Keeps a 2025-11-25 session told, until it goes away: tool list changes (code mode's servers
/// started, died, changed their tools), resource list changes (its sandboxes came or went),
/// and, once it asked for a level, log lines at or above it.
pub fn follow_session(
    audience: Audience,
    level: Arc<LogLevel>,
    tools: Option<ToolChanges>,
    peer: Peer<RoleServer>,
) {
    let mut rx = events::subscribe();
    tokio::spawn(async move {
        let mut tool_change = Box::pin(next_tool_change(tools));
        loop {
            let sent = tokio::select! {
                t = &mut tool_change => {
                    tool_change = Box::pin(next_tool_change(Some(t)));
                    peer.notify_tool_list_changed().await.is_ok()
                }
                event = rx.recv() => match event {
                    Ok(e) if audience.hears(&e) => {
                        let listed = !matches!(e.what, What::Opened | What::Closed)
                            || peer.notify_resource_list_changed().await.is_ok();
                        match log_line(&e) {
                            Some((l, text)) if level.wants(l) => listed && send_log(&peer, l, text).await,
                            _ => listed,
                        }
                    }
                    Ok(_) | Err(RecvError::Lagged(_)) => true,
                    Err(RecvError::Closed) => false,
                },
                _ = tokio::time::sleep(LIVENESS) => !peer.is_transport_closed(),
            };
            if !sent {
                break;
            }
        }
    });
}

/// Where a `subscriptions/listen` stream starts listening: made when the request is accepted,
/// before its acknowledgment goes out, so a change the client causes right after the
/// acknowledgment (a sandbox it creates) is never missed; the stream's task may start later.
pub struct ListenStart {
    events: tokio::sync::broadcast::Receiver<Event>,
    tools: Option<ToolChanges>,
}

/// Starts made and not yet taken by their streams. Any start serves any stream (each filters
/// by its own caller), so the order does not matter; a few at most are kept.
#[derive(Default)]
pub struct ListenStarts(std::sync::Mutex<std::collections::VecDeque<ListenStart>>);

const STARTS_KEPT: usize = 16;

impl ListenStarts {
    pub fn prepare(&self, tools: Option<ToolChanges>) {
        let mut starts = self.0.locked();
        starts.push_back(ListenStart {
            events: events::subscribe(),
            tools,
        });
        while starts.len() > STARTS_KEPT {
            starts.pop_front();
        }
    }

    pub fn take(&self, tools: impl FnOnce() -> Option<ToolChanges>) -> ListenStart {
        let prepared = self.0.locked().pop_front();
        prepared.unwrap_or_else(|| ListenStart {
            events: events::subscribe(),
            tools: tools(),
        })
    }
}

/// Serves one `subscriptions/listen` stream until the client ends it: the changes its filter
/// accepted (see the handler's `accepted_subscription_filter`).
pub async fn serve_listen(
    audience: Audience,
    start: ListenStart,
    subscription: rmcp::service::SubscriptionContext,
) {
    use rmcp::model::ServerNotification;
    let accepted = subscription.accepted().clone();
    let tools = start.tools.filter(|_| accepted.tools_list_changed == Some(true));
    let mut tool_change = Box::pin(next_tool_change(tools));
    let mut rx = Some(start.events).filter(|_| accepted.resources_list_changed == Some(true));
    loop {
        let sandbox_change = async {
            match rx.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        let note = tokio::select! {
            _ = subscription.cancelled() => return,
            t = &mut tool_change => {
                tool_change = Box::pin(next_tool_change(Some(t)));
                ServerNotification::ToolListChangedNotification(Default::default())
            }
            event = sandbox_change => match event {
                Ok(e) if matches!(e.what, What::Opened | What::Closed) && audience.hears(&e) => {
                    ServerNotification::ResourceListChangedNotification(Default::default())
                }
                Ok(_) | Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => {
                    rx = None;
                    continue;
                }
            },
        };
        if subscription.sink().send(note).await.is_err() {
            return;
        }
    }
}

/// Most log lines one call keeps for its client.
const CALL_LINES: usize = 1000;

/// The log lines one call's events make, for a 2026-07-28 call that asked for a level: what
/// happened to its principal's sandboxes and servers while it ran. Collected as they happen
/// (so a long call on a busy server misses none) and sent once the call is done, on its own
/// stream before its result.
pub struct CallLog {
    done: tokio::sync::oneshot::Sender<()>,
    lines: tokio::task::JoinHandle<Vec<(LoggingLevel, String)>>,
}

impl CallLog {
    /// Starts listening before the call runs, so nothing it causes is missed.
    pub fn start(audience: Audience, asked: LoggingLevel) -> Self {
        let mut rx = events::subscribe();
        let (done, mut ended) = tokio::sync::oneshot::channel();
        let lines = tokio::spawn(async move {
            let mut kept = Vec::new();
            let mut keep = |e: Event| {
                if let Some((l, text)) = log_line(&e)
                    && reaches(l, asked)
                    && audience.hears(&e)
                    && kept.len() < CALL_LINES
                {
                    kept.push((l, text));
                }
            };
            loop {
                tokio::select! {
                    biased;
                    e = rx.recv() => match e {
                        Ok(e) => keep(e),
                        Err(RecvError::Lagged(_)) => continue,
                        Err(RecvError::Closed) => break,
                    },
                    _ = &mut ended => {
                        while let Ok(e) = rx.try_recv() {
                            keep(e);
                        }
                        break;
                    }
                }
            }
            kept
        });
        CallLog { done, lines }
    }

    /// Sends what the call caused that its client asked to hear.
    pub async fn send(self, peer: &Peer<RoleServer>) {
        let _ = self.done.send(());
        for (level, text) in self.lines.await.unwrap_or_default() {
            if !send_log(peer, level, text).await {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(about: About, by: Option<&str>, what: What) -> Event {
        Event {
            about,
            by: by.map(Arc::from),
            what,
        }
    }

    #[test]
    fn a_local_user_hears_of_every_sandbox_and_only_allowed_servers() {
        let a = Audience::new(None, None, Allowed::Only(Arc::from(vec!["files".to_string()])));
        assert!(a.hears(&event(About::Sandbox("sbx-1".into()), None, What::Closed)));
        assert!(a.hears(&event(About::Server("files".into()), None, What::Opened)));
        assert!(!a.hears(&event(About::Server("mail".into()), None, What::Opened)));
    }
}
