//! Serving HTTP connections with limits against slow and idle clients: the whole request
//! head within a time (hyper's header-read timeout, which also closes a keep-alive connection
//! left idle that long), the body within a time (tower-http's body timeout), a cap on open
//! connections, and a smaller one on connections that have not yet had a request answered
//! other than 401 or 403. Without these an unauthenticated client trickling one header line
//! at a time could hold a descriptor forever, and enough of them starve the server.
//!
//! A new connection past the unproven cap closes the oldest unproven one rather than being
//! refused: a real client sends its request at once and is answered, so it is never the
//! oldest for long, while refusing would let ten idle sockets lock out every client that
//! opens a new connection (which HTTP clients do whenever a response was not read to the end).

use std::sync::Arc;
use std::time::Duration;

use crate::lock::Locked;
use axum::Router;
use axum::serve::Listener;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;

/// What one connection may take.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// To send a request's head (and the longest a keep-alive connection may sit idle).
    pub header_read: Duration,
    /// To send a request's body.
    pub body_read: Duration,
    /// Connections open at once; past it new ones are closed at once.
    pub max_connections: usize,
}

/// The connections not yet answered but for 401 or 403, oldest first, each with the way to
/// close it.
#[derive(Default)]
struct Probation {
    next: u64,
    waiting: std::collections::BTreeMap<u64, tokio::sync::oneshot::Sender<()>>,
}

impl Probation {
    /// Admits a connection, closing the oldest on probation when `cap` are already there.
    /// Returns its number and what tells it to close; also whether one was evicted.
    fn admit(&mut self, cap: usize) -> (u64, tokio::sync::oneshot::Receiver<()>, bool) {
        let mut evicted = false;
        while self.waiting.len() >= cap.max(1) {
            let Some((_, close)) = self.waiting.pop_first() else {
                break;
            };
            let _ = close.send(());
            evicted = true;
        }
        let id = self.next;
        self.next += 1;
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.waiting.insert(id, tx);
        (id, rx, evicted)
    }

    /// The connection was answered, or ended: it no longer counts.
    fn release(&mut self, id: u64) {
        self.waiting.remove(&id);
    }
}

impl Limits {
    /// Connections that have not yet been answered with anything but 401 or 403: a quarter of
    /// all, so clients that authenticate always find room.
    fn max_unproven(&self) -> usize {
        (self.max_connections / 4).max(1)
    }
}

/// Adds the body-read limit to the app.
pub fn with_body_timeout(app: Router, limits: Limits) -> Router {
    app.layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
        limits.body_read,
    ))
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets open connections finish.
pub async fn serve<L>(
    mut listener: L,
    app: Router,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()>,
) where
    L: Listener,
{
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(limits.header_read))
        .keep_alive_timeout(limits.header_read)
        // rmcp's streamable HTTP may use extended CONNECT over HTTP/2, as axum's server allows.
        .enable_connect_protocol();
    let builder = Arc::new(builder);
    let open = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let probation = Arc::new(std::sync::Mutex::new(Probation::default()));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    let mut warned = false;
    loop {
        let (io, _) = tokio::select! {
            c = listener.accept() => c,
            _ = &mut shutdown => break,
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            if !warned {
                tracing::warn!(
                    "closing new connections: {} are open (CODE_SANDBOX_HTTP_MAX_CONNECTIONS)",
                    limits.max_connections
                );
                warned = true;
            }
            drop(io);
            continue;
        };
        let (id, evict, evicted) = probation.locked().admit(limits.max_unproven());
        if evicted && !warned {
            tracing::warn!(
                "closing the oldest connection not yet answered but for 401/403: {} are waiting (a quarter of CODE_SANDBOX_HTTP_MAX_CONNECTIONS, {})",
                limits.max_unproven(),
                limits.max_connections
            );
            warned = true;
        } else if !evicted {
            warned = false;
        }
        // The connection leaves probation with its first answer that is not 401 or 403.
        let answered = probation.clone();
        let service = TowerToHyperService::new(
            tower::ServiceBuilder::new()
                .map_response(move |r: axum::response::Response| {
                    if !matches!(
                        r.status(),
                        http::StatusCode::UNAUTHORIZED | http::StatusCode::FORBIDDEN
                    ) {
                        answered.locked().release(id);
                    }
                    r
                })
                .service(app.clone()),
        );
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(io), service)
            .into_owned();
        let conn = graceful.watch(conn);
        let ended = probation.clone();
        tokio::spawn(async move {
            tokio::select! {
                r = conn => if let Err(e) = r {
                    tracing::debug!("connection ended: {e}");
                },
                // Dropping the connection closes its socket.
                Ok(()) = evict => tracing::debug!("closed a connection left unanswered"),
            }
            ended.locked().release(id);
            drop(permit);
        });
    }
    graceful.shutdown().await;
}
