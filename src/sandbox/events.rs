//! What happens to sandboxes and to code mode's servers that a client may want to hear of
//! without asking: a sandbox coming or going, suspended or brought back, a package fetched, a
//! server down. The server turns these into log notifications and list changes for the
//! sessions and calls that asked (see `server::notices`), each seeing only its own principal's.
//!
//! One channel for the process: the emitters sit deep (the registry, the package index, a
//! downstream link) and the listeners are sessions and calls that come and go. Like `tracing`,
//! it costs a lookup when nobody listens, and a slow listener loses old events, never blocks
//! the emitter.

use std::sync::{Arc, LazyLock};

use tokio::sync::broadcast;

use super::call_scope;

/// How many events a listener may fall behind before it misses the oldest.
const BACKLOG: usize = 256;

static BUS: LazyLock<broadcast::Sender<Event>> = LazyLock::new(|| broadcast::channel(BACKLOG).0);

/// How much a log event matters (the MCP levels the server uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Info,
    Warning,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// A line for a log notification.
    Log(Severity, String),
    /// A sandbox was created (or forked).
    Opened,
    /// A sandbox was closed or deleted.
    Closed,
}

/// What an event is about decides who may hear of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum About {
    /// A sandbox: its owner hears of it.
    Sandbox(String),
    /// One of code mode's servers: every caller its code may use hears of it.
    Server(String),
}

#[derive(Clone, Debug)]
pub struct Event {
    pub about: About,
    /// The principal of the tool call it happened in, if any: a sandbox just created has no
    /// owner on record yet, but its creator does.
    pub by: Option<Arc<str>>,
    pub what: What,
}

/// A receiver of every event from now on.
pub fn subscribe() -> broadcast::Receiver<Event> {
    BUS.subscribe()
}

fn emit(about: About, what: What) {
    if BUS.receiver_count() == 0 {
        return;
    }
    let by = call_scope::current().and_then(|s| s.principal());
    let _ = BUS.send(Event { about, by, what });
}

/// A log line about sandbox `id`.
pub fn sandbox_log(id: &str, severity: Severity, text: String) {
    emit(About::Sandbox(id.to_string()), What::Log(severity, text));
}

/// A log line about the sandbox the current tool call acts on (see
/// [`call_scope::acting_on`]); outside such a call, nothing.
pub fn call_log(severity: Severity, text: impl FnOnce() -> String) {
    if let Some(id) = call_scope::current().and_then(|s| s.sandbox()) {
        sandbox_log(&id, severity, text());
    }
}

/// A log line about code mode's server `name`.
pub fn server_log(name: &str, severity: Severity, text: String) {
    emit(About::Server(name.to_string()), What::Log(severity, text));
}

pub fn opened(id: &str) {
    emit(About::Sandbox(id.to_string()), What::Opened);
}

pub fn closed(id: &str) {
    emit(About::Sandbox(id.to_string()), What::Closed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_log_names_the_calls_sandbox_and_principal() {
        let mut rx = subscribe();
        call_log(Severity::Info, || "outside any call".into());
        let scope = call_scope::CallScope::new(None, Default::default(), Some(Arc::from("ana")));
        call_scope::scope(scope, async {
            call_log(Severity::Info, || "before it names a sandbox".into());
            call_scope::acting_on("sbx-1");
            call_log(Severity::Info, || "fetched x".into());
        })
        .await;
        // Other tests share the channel: look only at this test's lines.
        let mine: Vec<Event> = std::iter::from_fn(|| rx.try_recv().ok())
            .filter(|e| matches!(&e.what, What::Log(_, t) if t.contains("fetched x") || t.contains("outside") || t.contains("before it")))
            .collect();
        assert_eq!(mine.len(), 1, "{mine:?}");
        assert_eq!(mine[0].about, About::Sandbox("sbx-1".into()));
        assert_eq!(mine[0].by.as_deref(), Some("ana"));
    }
}
