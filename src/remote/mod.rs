//! Remote mode: the same tools over MCP streamable HTTP at `/mcp`, for several clients and
//! principals on one server.
//!
//! A request passes [`guard`] (Host, Origin, bearer token, session owner), then [`hangup`]
//! (a dropped tool-call stream cancels the call), then rmcp's streamable-HTTP service, whose
//! sessions each get a [`SandboxServer`] that acts through its caller's [`Tenancy`] view.

mod auth;
mod body_budget;
mod conn_table;
mod conns;
mod guard;
mod hangup;
pub mod home_lock;
mod metrics_http;
pub mod oauth;
mod proxy_protocol;
mod quirks;
mod route_headers;
mod tls;
pub mod token_edit;
pub mod tokens;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::serve::ListenerExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::config::{MAX_REQUEST_BYTES, Settings};
use crate::sandbox::Interpreter;
use crate::server::SandboxServer;
use crate::tenancy::{Principal, Quota, Tenancy};
use guard::Guard;
use hangup::InFlight;
use tokens::TokenBook;

/// How long the calls it stopped then have to send their answers, before sessions end.
const ANSWER_GRACE: Duration = Duration::from_secs(3);
/// How long connections may stay open once every session has ended.
const LINGER: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("'{0}' is not an address to listen on: {1}; give host:port, e.g. 127.0.0.1:8765")]
    Listen(String, #[source] std::io::Error),
    #[error(
        "refusing to listen on {0} without tokens: anyone who can reach it could run code here. Make a token with `mcp-code-sandbox token add NAME` (it writes the home's tokens file, which the server then serves with), or set CODE_SANDBOX_OAUTH_ISSUER and CODE_SANDBOX_PUBLIC_URL to sign users in through your identity provider, or listen on a loopback address such as 127.0.0.1:8765"
    )]
    OpenWithoutTokens(String),
    #[error(
        "the tokens file {0} holds no token, and the server never serves without tokens while a tokens file exists; add one with `mcp-code-sandbox token add NAME` (with CODE_SANDBOX_TOKENS set to that file if it is not the home's), delete the file to serve loopback only, or sign users in with OAuth (CODE_SANDBOX_OAUTH_ISSUER)"
    )]
    NoTokens(String),
    #[error(
        "the tokens file {0} may be written by other users (mode {1:o}), who could give themselves a token; run `chmod 600 {0}`, then start again"
    )]
    TokensOpen(String, u32),
    #[error(
        "CODE_SANDBOX_TRUSTED_PROXIES is for plain HTTP from a proxy that ends TLS itself; with CODE_SANDBOX_TLS_CERT set, unset one of them"
    )]
    ProxiedTls,
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error(transparent)]
    OAuth(#[from] oauth::SettingError),
    #[error(transparent)]
    Roots(#[from] crate::outbound::tls_roots::RootsError),
    #[error("the HTTP server stopped: {0}")]
    Serve(#[source] std::io::Error),
}

/// Answers are small writes followed by a wait for the next request: without TCP_NODELAY,
/// Nagle's algorithm meets the client's delayed ACK and every round trip takes ~40 ms.
fn no_delay(stream: &mut tokio::net::TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!("could not set TCP_NODELAY: {e}");
    }
}

/// Readiness, for a load balancer or Kubernetes: whether this server takes new work now. Not
/// while the interpreter is still being prepared (a first start), and not once a shutdown has
/// begun, so a proxy sends new sessions elsewhere while running calls finish here.
fn readyz(guard: Arc<Guard>, backend: Arc<dyn Interpreter>) -> axum::routing::MethodRouter {
    axum::routing::get(move || async move {
        use http::StatusCode;
        if guard.draining() {
            let waiting = backend.store_waiting();
            let text = match waiting {
                0 => "draining: the server is shutting down\n".to_string(),
                n => format!(
                    "draining: the server is shutting down, waiting for {n} kept sandbox(es) to reach the store\n"
                ),
            };
            (StatusCode::SERVICE_UNAVAILABLE, text)
        } else if !backend.ready() {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: the interpreter is still being prepared\n".to_string(),
            )
        } else {
            (StatusCode::OK, "ready\n".to_string())
        }
    })
}

/// The settings' refusals that need no backend (TLS behind a proxy, an address that does
/// not resolve, OAuth settings that do not hold, a listener open to others without tokens):
/// checked before the backend is made, so a server that will refuse to start never first
/// downloads and compiles the runtime.
pub async fn preflight(settings: &Settings) -> Result<(), RemoteError> {
    let addrs = listen_addrs(settings).await?;
    let oauth = oauth::OAuth::from_settings(&settings.oauth, Vec::new())?;
    token_book(settings, &addrs, oauth.is_some()).map(|_| ())
}

/// The addresses to listen on, once the listener's own settings agree with one another.
async fn listen_addrs(settings: &Settings) -> Result<Vec<SocketAddr>, RemoteError> {
    if settings.tls_cert.is_some() && !settings.team.trusted_proxies.is_empty() {
        return Err(RemoteError::ProxiedTls);
    }
    Ok(tokio::net::lookup_host(&settings.listen)
        .await
        .map_err(|e| RemoteError::Listen(settings.listen.clone(), e))?
        .collect())
}

/// Serves until `quit` resolves, then drains calls and shuts the backend down (which keeps
/// sandboxes as persistence says).
pub async fn serve(
    settings: Arc<Settings>,
    backend: Arc<dyn Interpreter>,
    code_mode: Option<Arc<crate::downstream::Gateway>>,
    network: Option<Arc<crate::egress::NetPolicy>>,
    quit: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), RemoteError> {
    let addrs = listen_addrs(&settings).await?;
    let oauth = oauth::OAuth::from_settings(
        &settings.oauth,
        crate::outbound::tls_roots::load(settings.ca_file.as_deref())?,
    )?;
    let (book, tokens) = token_book(&settings, &addrs, oauth.is_some())?;
    let tcp = tokio::net::TcpListener::bind(&addrs[..])
        .await
        .map_err(|e| RemoteError::Listen(settings.listen.clone(), e))?;
    let local_addr = tcp
        .local_addr()
        .map_err(|e| RemoteError::Listen(settings.listen.clone(), e))?;
    let principals = book.as_ref().map_or(1, TokenBook::principals);
    if let Some(o) = &oauth {
        let o = o.clone();
        tokio::spawn(async move { o.warm().await });
    }
    let auth = auth::Auth {
        book,
        open_until_tokens: tokens.is_none() && oauth.is_none(),
        oauth: oauth.clone(),
        local: local_principal(&settings),
        defaults: principal_defaults(&settings),
    };
    let body_wait = Duration::from_secs(settings.http_body_timeout_seconds.max(1));
    let guard = Guard::new(
        auth,
        local_addr,
        &settings.allowed_hosts,
        &settings.allowed_origins,
        settings.tls_cert.is_some(),
        guard::SessionCaps {
            per_principal: settings.principal_sessions.max(1),
            total: settings.max_sessions.max(1),
        },
    );
    let guard = Arc::new(guard.with_body_wait(body_wait));
    let home = settings.home_dir();
    let _ = std::fs::create_dir_all(&home);
    let tenancy = Tenancy::new(
        backend.clone(),
        Some(home.join("owners.json")),
        settings.max_concurrent_calls,
        settings.default_memory_mb,
        settings.team.replica.clone(),
    );
    let limits = conns::Limits {
        header_read: Duration::from_secs(settings.http_header_timeout_seconds.max(1)),
        body_read: Duration::from_secs(settings.http_body_timeout_seconds.max(1)),
        max_connections: settings.http_max_connections,
    };
    if let Some(addr) = &settings.team.metrics_listen {
        let metrics = crate::telemetry::metrics::install(settings.team.metrics_principals);
        let at = metrics_http::start(addr, limits, metrics, (backend.clone(), tenancy.clone()))
            .await
            .map_err(|e| RemoteError::Listen(addr.clone(), e))?;
        // Read by scripts and tests, like the MCP address below.
        eprintln!("mcp-code-sandbox: serving metrics at http://{at}/metrics");
    }
    let in_flight = Arc::new(InFlight::default());
    let template = SandboxServer::remote(backend.clone(), settings.clone(), tenancy)
        .with_code_mode(code_mode.clone())
        .with_network(network);
    let stop = CancellationToken::new();
    let parts = Parts {
        guard: guard.clone(),
        in_flight: in_flight.clone(),
        stop: stop.clone(),
        backend: backend.clone(),
    };
    let app = conns::with_body_timeout(router(template, &parts, oauth.as_ref()), limits);
    // The one line scripts and tests read to learn the address (port 0 picks one).
    eprintln!(
        "mcp-code-sandbox: serving MCP at {}://{local_addr}/mcp ({} backend, {})",
        if settings.tls_cert.is_some() {
            "https"
        } else {
            "http"
        },
        backend.backend(),
        match (&oauth, principals) {
            (Some(o), _) => format!("OAuth: tokens of {}", o.resource.issuer_text),
            _ if tokens.is_none() => "no tokens: loopback only".to_string(),
            (None, 1) => "1 principal".to_string(),
            (None, n) => format!("{n} principals"),
        }
    );
    let drained = drain_after(quit, parts, Duration::from_secs(settings.team.drain_seconds));
    // Once sessions are ended, a client that still holds its connection open gets a few
    // seconds before it is dropped, so shutdown cannot hang on it.
    let served = tokio::select! {
        r = listen(&settings, tcp, app, limits, drained) => r,
        _ = async { stop.cancelled().await; tokio::time::sleep(LINGER).await } => {
            tracing::warn!("dropping connections still open {LINGER:?} after shutdown");
            Ok(())
        }
    };
    backend.shutdown().await;
    if let Some(g) = &code_mode {
        g.shutdown();
    }
    served
}

/// What the routes, and the drain, share.
struct Parts {
    guard: Arc<Guard>,
    in_flight: Arc<InFlight>,
    /// Ends every session (and any call still running).
    stop: CancellationToken,
    backend: Arc<dyn Interpreter>,
}

/// A principal's quotas when its tokens line (or sign-in) names none.
fn principal_defaults(settings: &Settings) -> Quota {
    Quota {
        sandboxes: settings.principal_sandboxes,
        memory_mb: settings.principal_memory_mb,
        disk_mb: settings.principal_disk_mb,
    }
}

/// Without tokens there is one user, the machine's: the server-wide limits are theirs.
fn local_principal(settings: &Settings) -> Principal {
    Principal {
        name: crate::tenancy::names::LOCAL.into(),
        quota: Quota {
            sandboxes: settings.max_sandboxes,
            memory_mb: u64::MAX,
            disk_mb: u64::MAX,
        },
        // Code mode needs a tokens line naming the servers (`mcp=`): any local process can
        // reach a tokenless server, and the servers run with this machine's credentials.
        mcp_servers: Arc::from([]),
        hosts: None,
    }
}

/// The tokens the server serves with, and the file they came from (`None`: started without
/// one). `token add` writes `<home>/tokens`: a server started after it serves with those.
fn token_book(
    settings: &Settings,
    addrs: &[SocketAddr],
    oauth: bool,
) -> Result<(Option<TokenBook>, Option<std::path::PathBuf>), RemoteError> {
    let defaults = principal_defaults(settings);
    let tokens = settings.tokens_in_use();
    let book = match &tokens {
        Some(file) => {
            let book = TokenBook::open(file.clone(), defaults);
            if let Some(mode) = book.open_to_others() {
                return Err(RemoteError::TokensOpen(file.display().to_string(), mode));
            }
            if book.has_no_token() && !oauth {
                return Err(RemoteError::NoTokens(file.display().to_string()));
            }
            Some(book)
        }
        None if oauth => None,
        // Loopback without tokens: the home's tokens file is watched all the same, and from
        // the moment `token add` makes it nothing is served without a token.
        None if addrs.iter().all(|a| a.ip().is_loopback()) => {
            Some(TokenBook::open(settings.tokens_file(), defaults))
        }
        None => return Err(RemoteError::OpenWithoutTokens(settings.listen.clone())),
    };
    Ok((book, tokens))
}

/// The routes: `/mcp` behind the guard, the routing-header check and the hang-up watcher;
/// the health routes; where to sign in.
fn router(template: SandboxServer, parts: &Parts, oauth: Option<&Arc<oauth::OAuth>>) -> Router {
    let declared: route_headers::Declared = Arc::new(template.header_arguments());
    let sessions = Arc::new(LocalSessionManager::default());
    parts.guard.watch_sessions(sessions.clone());
    let config = StreamableHttpServerConfig::default()
        // Host and Origin are checked by the guard, with the names this server listens on.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(MAX_REQUEST_BYTES)
        .with_cancellation_token(parts.stop.clone());
    let mcp = StreamableHttpService::new(move || Ok(template.for_new_session()), sessions.clone(), config);
    let app = Router::new()
        .route_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(
            (sessions, parts.in_flight.clone()),
            hangup::watch,
        ))
        // After the guard, which mends a client's quirks (adding headers from the body).
        .layer(axum::middleware::from_fn_with_state(
            declared,
            route_headers::check,
        ))
        .layer(axum::middleware::from_fn_with_state(
            parts.guard.clone(),
            guard::check,
        ))
        // Liveness for process supervisors and load balancers: says nothing about sandboxes.
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
        .route("/readyz", readyz(parts.guard.clone(), parts.backend.clone()));
    // Where to sign in (RFC 9728): public, for clients that have no token yet.
    let app = match oauth {
        Some(o) => app
            .route(
                "/.well-known/oauth-protected-resource",
                oauth::metadata_route(o.clone()),
            )
            .route(
                "/.well-known/oauth-protected-resource/{*path}",
                oauth::metadata_route(o.clone()),
            ),
        None => app,
    };
    app.fallback(|| async {
        (
            http::StatusCode::NOT_FOUND,
            "not found: the MCP endpoint of this server is /mcp\n",
        )
    })
}

/// Once `quit` resolves: no new requests, running calls get `drain` to answer (then they are
/// stopped and answer that the server is shutting down), then every session ends.
async fn drain_after(quit: impl std::future::Future<Output = ()>, parts: Parts, drain: Duration) {
    quit.await;
    let in_flight = &parts.in_flight;
    tracing::info!(
        "shutting down: no new requests; letting {} running call(s) finish",
        in_flight.count()
    );
    parts.guard.drain();
    if tokio::time::timeout(drain, in_flight.idle()).await.is_err() {
        tracing::warn!(
            "stopping {} call(s) still running after {drain:?}; each answers that the server is shutting down",
            in_flight.count()
        );
        parts.backend.stop_running();
        let _ = tokio::time::timeout(ANSWER_GRACE, in_flight.idle()).await;
    }
    // Still answering /readyz (which says so) while kept sandboxes reach a store that is away.
    parts.backend.settle_store().await;
    parts.stop.cancel();
}

/// Serves `app` on `tcp` (TLS, or behind trusted proxies, as the settings say) until drained.
async fn listen(
    settings: &Settings,
    tcp: tokio::net::TcpListener,
    app: Router,
    limits: conns::Limits,
    drained: impl std::future::Future<Output = ()>,
) -> Result<(), RemoteError> {
    match (&settings.tls_cert, &settings.tls_key) {
        (Some(cert), Some(key)) => {
            let config = tls::server_config(cert, key)?;
            let listener = tls::TlsListener::new(tcp, config).map_err(RemoteError::Serve)?;
            conns::serve(listener, app, limits, drained).await;
        }
        _ if !settings.team.trusted_proxies.is_empty() => {
            let listener = proxy_protocol::ProxiedListener::new(tcp, settings.team.trusted_proxies.clone());
            conns::serve(listener.tap_io(no_delay), app, limits, drained).await
        }
        _ => conns::serve(tcp.tap_io(no_delay), app, limits, drained).await,
    }
    Ok(())
}
