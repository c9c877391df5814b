//! Tool-call streams, watched: a client that hangs up during a tool call cancels it, and
//! shutdown knows which calls still owe an answer.
//!
//! A client that hangs up during a tool call cancels it. rmcp keeps a session's call running
//! when its response stream drops (so a client could resume it), which would leave a guest
//! burning a call slot for up to five minutes for no one; here the stream of a `tools/call`
//! is watched, and if it is dropped before its end the call is cancelled in its session, as
//! if the client had sent `notifications/cancelled`.
//!
//! A second request with the id of one still in flight in the same session is answered with
//! an error at once: rmcp would hand it the first one's result and leave the first without an
//! answer.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use crate::host::lock::Locked;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde::Deserialize;
use tokio::sync::Notify;

/// The two fields needed to know a request is a tool call, and which.
#[derive(Deserialize)]
struct Head {
    id: Option<serde_json::Value>,
    method: Option<String>,
}

/// Tool calls whose answer has not gone out yet: shutdown waits for these (counting at the
/// handler would end sessions between a result and its delivery).
#[derive(Default)]
pub struct InFlight {
    running: AtomicUsize,
    idle: Notify,
    /// (session, request id) of each call still owed an answer.
    ids: std::sync::Mutex<std::collections::HashSet<(String, String)>>,
}

struct Running(Arc<InFlight>, (String, String));

impl Drop for Running {
    fn drop(&mut self) {
        self.0.ids.locked().remove(&self.1);
        if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl InFlight {
    /// Counts a call in; `None` when a call with the same id is still in flight in the session.
    fn enter(self: &Arc<Self>, session: &str, id: &serde_json::Value) -> Option<Running> {
        self.admit((session.to_string(), id.to_string()))
    }

    /// Counts in the request of `key`; `None` when one with that key is still in flight.
    fn admit(self: &Arc<Self>, key: (String, String)) -> Option<Running> {
        if !self.ids.locked().insert(key.clone()) {
            return None;
        }
        self.running.fetch_add(1, Ordering::SeqCst);
        Some(Running(self.clone(), key))
    }

    /// Counts in a request that belongs to no session: its key is its own, so no two collide.
    fn enter_stateless(self: &Arc<Self>) -> Option<Running> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        // Session ids are never empty, so this key names no session's request.
        self.admit((String::new(), SEQ.fetch_add(1, Ordering::Relaxed).to_string()))
    }

    pub fn count(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Returns once every call has answered.
    pub async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// What the watcher needs: the sessions (to cancel in) and the count of open calls.
pub type Watch = (Arc<LocalSessionManager>, Arc<InFlight>);

pub async fn watch(State((sessions, in_flight)): State<Watch>, req: Request, next: Next) -> Response {
    if req.method() != http::Method::POST {
        return next.run(req).await;
    }
    // A 2026-07-28 client sends no session: its calls are counted all the same, so a drain
    // waits for them, but only a session's own calls can be cancelled in it.
    let session = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (parts, body) = req.into_parts();
    // rmcp buffers the body too, under the same limit; a body over it gets rmcp's 413.
    let bytes = match axum::body::to_bytes(body, crate::config::MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            let mut r = Response::new(Body::from(format!(
                "the request is over the {} byte limit, or it was cut off\n",
                crate::config::MAX_REQUEST_BYTES
            )));
            *r.status_mut() = http::StatusCode::PAYLOAD_TOO_LARGE;
            return r;
        }
    };
    // A request (it has a method and an id); notifications and responses pass as they are.
    let request = serde_json::from_slice::<Head>(&bytes)
        .ok()
        .and_then(|h| Some((h.id?, h.method? == "tools/call")));
    let Some((id, is_tool_call)) = request else {
        return next.run(Request::from_parts(parts, Body::from(bytes))).await;
    };
    let entered = match &session {
        Some(session) => in_flight.enter(session, &id),
        None => in_flight.enter_stateless(),
    };
    let Some(running) = entered else {
        let answer = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": -32600,
                "message": format!("a request with id {id} is still running in this session; give each request an id of its own"),
            }
        });
        let mut r = Response::new(Body::from(answer.to_string()));
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        return r;
    };
    let response = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    let (parts, body) = response.into_parts();
    let watched = Watched {
        inner: body,
        on_hangup: session
            .filter(|_| is_tool_call)
            .map(|session| (sessions, session, id.clone())),
        id,
        running: Some(running),
    };
    Response::from_parts(parts, Body::new(watched))
}

struct Watched {
    inner: Body,
    /// Taken when the stream ends normally.
    on_hangup: Option<(Arc<LocalSessionManager>, String, serde_json::Value)>,
    /// The request's id, to see its answer go by.
    id: serde_json::Value,
    /// Released once the answer is out (or the stream is gone).
    running: Option<Running>,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => {
                self.on_hangup = None;
                self.running = None;
            }
            Poll::Ready(Some(Ok(frame))) => {
                // Once the answer has gone out, a client that stops reading has not hung up
                // on anything.
                let answered = frame.data_ref().is_some_and(|data| is_answer(data, &self.id));
                if answered {
                    self.on_hangup = None;
                    self.running = None;
                }
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Whether an SSE frame carries the JSON-RPC response (result or error) to request `id`.
fn is_answer(frame: &[u8], id: &serde_json::Value) -> bool {
    #[derive(Deserialize)]
    struct Reply {
        id: Option<serde_json::Value>,
        result: Option<serde::de::IgnoredAny>,
        error: Option<serde::de::IgnoredAny>,
    }
    frame
        .split(|b| *b == b'\n')
        .filter_map(|line| line.strip_prefix(b"data:"))
        .filter_map(|data| serde_json::from_slice::<Reply>(data).ok())
        .any(|r| r.id.as_ref() == Some(id) && (r.result.is_some() || r.error.is_some()))
}

impl Drop for Watched {
    fn drop(&mut self) {
        let Some((sessions, session, id)) = self.on_hangup.take() else {
            return;
        };
        let cancel = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "the client closed the connection"}
        });
        let Ok(message) = serde_json::from_value::<ClientJsonRpcMessage>(cancel) else {
            return;
        };
        // Drop cannot wait; the runtime is there as long as connections are served.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = sessions.accept_message(&session.into(), message).await;
            });
        }
    }
}
