//! Serving HTTP connections with limits against slow, idle and flooding clients: the whole
//! request head within a time (hyper's header-read timeout, which also closes a keep-alive
//! connection left idle that long), the body within a time (tower-http's body timeout), a cap
//! on open connections, and shares of it (`conn_table.rs`): a connection on which no request
//! was authenticated yet is on probation, which ends after the header-read time however often
//! it was answered (a health check or a 404 proves nothing), and such connections are capped
//! per client address and in all; proven ones are capped per principal. Without these one
//! client keeping a thousand connections busy with `GET /healthz` took every slot.
//!
//! Past a share the oldest connection of the same client closes rather than the new one
//! being refused: a real client sends its request at once and is answered, so it is never the
//! oldest for long, while refusing would let idle sockets lock out every client that opens a
//! new connection (which HTTP clients do whenever a response was not read to the end).

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::host::lock::Locked;
use axum::Router;
use axum::serve::Listener;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;

use super::conn_table::{ConnTable, Shares};

/// What one connection may take.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// To send a request's head (and the longest a keep-alive connection may sit idle, and an
    /// unproven one may stay open).
    pub header_read: Duration,
    /// To send a request's body.
    pub body_read: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

/// In each request's extensions: the guard calls it once the request is authenticated, and
/// the connection that carries it leaves probation then, counted as this principal's. At
/// once, not when the answer starts: a call that runs for minutes, or a body sent slowly,
/// holds its connection for that long, and probation must never cut it.
#[derive(Clone)]
pub struct Prover {
    table: Arc<Mutex<ConnTable>>,
    id: u64,
    shares: Shares,
}

impl Prover {
    pub fn prove(&self, who: &Arc<str>) {
        let evicted = self.table.locked().prove(self.id, who, self.shares);
        if evicted.count > 0 {
            tracing::warn!(
                "closing the oldest connection of a principal past its share of {} connections",
                self.shares.per_principal
            );
        }
    }
}

pub use crate::server::ClientAddr;

/// How long a new connection may wait for an unproven one to close and make room.
const ROOM_WAIT: Duration = Duration::from_secs(1);

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
    L: Listener<Addr = SocketAddr>,
{
    let builder = Arc::new(builder(limits));
    let open = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let shares = Shares::of(limits.max_connections);
    let table = Arc::new(Mutex::new(ConnTable::default()));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    let mut warned = false;
    loop {
        let (io, addr) = tokio::select! {
            c = listener.accept() => c,
            _ = &mut shutdown => break,
        };
        let Some(permit) = room(&open, &table, addr.ip()).await else {
            if !warned {
                tracing::warn!(
                    "closing new connections: {} are open, all proven (CODE_SANDBOX_HTTP_MAX_CONNECTIONS)",
                    limits.max_connections
                );
                warned = true;
            }
            drop(io);
            continue;
        };
        let (id, close, evicted) = table.locked().admit(addr.ip(), shares);
        if evicted.count > 0 && !warned {
            tracing::warn!(
                "closing the oldest connections of a client past its share of unproven connections ({} per address, {} in all: CODE_SANDBOX_HTTP_MAX_CONNECTIONS={})",
                shares.unproven_per_address,
                shares.unproven,
                limits.max_connections
            );
            warned = true;
        } else if evicted.count == 0 {
            warned = false;
        }
        // The connection leaves probation with its first authenticated request.
        let prover = Prover {
            table: table.clone(),
            id,
            shares,
        };
        let service = TowerToHyperService::new(
            tower::ServiceBuilder::new()
                .map_request(tag_client(addr.ip(), prover))
                .service(app.clone()),
        );
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(io), service)
            .into_owned();
        let conn = graceful.watch(conn);
        let ended = table.clone();
        let probation = limits.header_read;
        tokio::spawn(async move {
            let expired = async {
                tokio::time::sleep(probation).await;
                if !ended.locked().expire(id) {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                // A connection told to close answers nothing more, though a request waits on it.
                biased;
                // Dropping the connection closes its socket.
                _ = close.cancelled() => tracing::debug!("closed a connection past its client's share"),
                _ = expired => tracing::debug!("closed a connection whose probation ended unproven"),
                r = conn => if let Err(e) = r {
                    tracing::debug!("connection ended: {e}");
                },
            }
            ended.locked().remove(id);
            drop(permit);
        });
    }
    graceful.shutdown().await;
}

/// HTTP/1 and HTTP/2 with the timeouts of `limits`.
fn builder(limits: Limits) -> Builder<TokioExecutor> {
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
        // One connection's streams are bounded too (a listen stream each).
        .max_concurrent_streams(64)
        // rmcp's streamable HTTP may use extended CONNECT over HTTP/2, as axum's server allows.
        .enable_connect_protocol();
    builder
}

/// A connection slot: a free one, or one an unproven connection gives up.
async fn room(
    open: &Arc<tokio::sync::Semaphore>,
    table: &Mutex<ConnTable>,
    newcomer: IpAddr,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    if let Ok(p) = open.clone().try_acquire_owned() {
        return Some(p);
    }
    if !table.locked().make_room(newcomer) {
        return None;
    }
    tokio::time::timeout(ROOM_WAIT, open.clone().acquire_owned())
        .await
        .ok()?
        .ok()
}

/// Puts the client's address, and its connection's prover, into each request.
fn tag_client<B>(ip: IpAddr, prover: Prover) -> impl Fn(http::Request<B>) -> http::Request<B> + Clone {
    move |mut r| {
        r.extensions_mut().insert(ClientAddr(ip));
        r.extensions_mut().insert(prover.clone());
        r
    }
}
