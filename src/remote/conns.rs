//! Serving HTTP connections with limits against slow and idle clients: the whole request
//! head within a time (hyper's header-read timeout, which also closes a keep-alive connection
//! left idle that long), the body within a time (tower-http's body timeout), a cap on open
//! connections, and a smaller one on connections that have not yet had a request answered
//! other than 401 or 403. Without these an unauthenticated client trickling one header line
//! at a time could hold a descriptor forever, and enough of them starve the server.

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
    let unproven = Arc::new(tokio::sync::Semaphore::new(limits.max_unproven()));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    let mut warned = false;
    loop {
        let (io, _) = tokio::select! {
            c = listener.accept() => c,
            _ = &mut shutdown => break,
        };
        let admitted = open
            .clone()
            .try_acquire_owned()
            .ok()
            .zip(unproven.clone().try_acquire_owned().ok());
        let Some((permit, probation)) = admitted else {
            if !warned {
                tracing::warn!(
                    "closing new connections: {} are open (CODE_SANDBOX_HTTP_MAX_CONNECTIONS is {}), {} of them not yet answered but for 401/403 (at most {})",
                    limits.max_connections - open.available_permits(),
                    limits.max_connections,
                    limits.max_unproven() - unproven.available_permits(),
                    limits.max_unproven()
                );
                warned = true;
            }
            drop(io);
            continue;
        };
        warned = false;
        // The connection leaves probation with its first answer that is not 401 or 403.
        let probation = Arc::new(std::sync::Mutex::new(Some(probation)));
        let service = TowerToHyperService::new(
            tower::ServiceBuilder::new()
                .map_response(move |r: axum::response::Response| {
                    if !matches!(
                        r.status(),
                        http::StatusCode::UNAUTHORIZED | http::StatusCode::FORBIDDEN
                    ) {
                        probation.locked().take();
                    }
                    r
                })
                .service(app.clone()),
        );
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(io), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection ended: {e}");
            }
            drop(permit);
        });
    }
    graceful.shutdown().await;
}
