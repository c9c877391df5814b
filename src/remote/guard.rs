//! What every request to `/mcp` passes before rmcp sees it: the `Host` must be one of the
//! server's names and the `Origin` (when a browser sends one) allowed, both against DNS
//! rebinding; the bearer token names the principal; and a session stays with the principal
//! that opened it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderMap, StatusCode, header};

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::auth::{Auth, plain, retry_later};
use super::body_budget::{self, BodyBudget};
use super::conns::{ClientAddr, Prover};
use crate::host::lock::Locked;
use crate::tenancy::Principal;

const SESSION_HEADER: &str = "mcp-session-id";
/// A session binding unused this long is forgotten (rmcp ends idle sessions well before).
const BINDING_IDLE: Duration = Duration::from_secs(3600);

/// Who may call, from where.
pub struct Guard {
    /// Who a request comes from.
    pub auth: Auth,
    /// Host names (lowercase, maybe with `:port`) the server answers to besides IP literals.
    hosts: Vec<String>,
    port: u16,
    /// Origins allowed besides same-origin, lowercase `scheme://host[:port]`.
    origins: Vec<String>,
    scheme: &'static str,
    /// Session id → (principal, last use).
    sessions: Mutex<HashMap<String, (Arc<str>, Instant)>>,
    /// rmcp's live sessions, to forget bindings of sessions it ended (idle expiry).
    live: std::sync::OnceLock<Arc<LocalSessionManager>>,
    /// Sessions one principal, and all together, may have open.
    caps: SessionCaps,
    draining: AtomicBool,
    /// Request bodies in flight.
    bodies: BodyBudget,
}

/// How many MCP sessions may be open at once.
#[derive(Clone, Copy, Debug)]
pub struct SessionCaps {
    pub per_principal: usize,
    pub total: usize,
}

impl Guard {
    pub fn new(
        auth: Auth,
        listen: SocketAddr,
        extra_hosts: &[String],
        origins: &[String],
        tls: bool,
        caps: SessionCaps,
    ) -> Self {
        let mut hosts: Vec<String> = extra_hosts
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        let ip = listen.ip();
        if ip.is_loopback() || ip.is_unspecified() {
            hosts.push("localhost".into());
        }
        Guard {
            auth,
            hosts,
            port: listen.port(),
            origins: origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .filter(|o| !o.is_empty())
                .collect(),
            scheme: if tls { "https" } else { "http" },
            sessions: Mutex::new(HashMap::new()),
            live: std::sync::OnceLock::new(),
            caps,
            draining: AtomicBool::new(false),
            bodies: BodyBudget::new(std::time::Duration::from_secs(120)),
        }
    }

    /// A request body waits for room in the bodies' budget as long as it may take to arrive.
    pub fn with_body_wait(mut self, wait: std::time::Duration) -> Self {
        self.bodies = BodyBudget::new(wait);
        self
    }

    /// rmcp's session manager, whose live sessions the caps count.
    pub fn watch_sessions(&self, sessions: Arc<LocalSessionManager>) {
        let _ = self.live.set(sessions);
    }

    /// Whether `who` may open one more session; the refusal otherwise.
    async fn room_for_session(&self, who: &Principal) -> Result<(), Response> {
        let live: Option<std::collections::HashSet<String>> = match self.live.get() {
            Some(m) => Some(m.sessions.read().await.keys().map(|k| k.to_string()).collect()),
            None => None,
        };
        let mut s = self.sessions.locked();
        if let Some(live) = live {
            s.retain(|id, _| live.contains(id));
        }
        let mine = s.values().filter(|(p, _)| *p == who.name).count();
        let refuse = |text: String| retry_later(StatusCode::TOO_MANY_REQUESTS, &text, "30");
        if mine >= self.caps.per_principal {
            return Err(refuse(format!(
                "you have {mine} MCP sessions open, the most allowed (CODE_SANDBOX_PRINCIPAL_SESSIONS); end one with an HTTP DELETE carrying its Mcp-Session-Id, or wait for idle ones to expire"
            )));
        }
        if s.len() >= self.caps.total {
            return Err(refuse(format!(
                "the server has {} MCP sessions open, the most allowed (CODE_SANDBOX_MAX_SESSIONS); try again later",
                s.len()
            )));
        }
        Ok(())
    }

    /// From now on new requests are turned away (the server is shutting down).
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the server is shutting down.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// The `Host` (or HTTP/2 authority) if it names this server. An IP literal cannot be
    /// the product of DNS rebinding, so any with the right port passes; a name, or an IP
    /// literal with another port (a proxy or a Kubernetes Service in front), must be listed.
    fn host_ok(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        let (name, port) = split_host_port(&host);
        let port_ok = port.is_none_or(|p| p == self.port);
        let ip = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok();
        if ip && port_ok {
            return true;
        }
        self.hosts.iter().any(|allowed| {
            let (aname, aport) = split_host_port(allowed);
            match aport {
                Some(ap) => aname == name && Some(ap) == port,
                // A name without a port: any port (a reverse proxy may present 443).
                None => aname == name && (port_ok || allowed != "localhost"),
            }
        })
    }

    fn origin_ok(&self, origin: &str, host: &str) -> bool {
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        if self.origins.contains(&origin) {
            return true;
        }
        // A page served by this very server: our scheme, and an authority that is the request's
        // own or another of this server's names (`localhost` beside `127.0.0.1`), which DNS
        // rebinding cannot produce.
        origin
            .strip_prefix(self.scheme)
            .and_then(|r| r.strip_prefix("://"))
            .is_some_and(|authority| authority == host.to_ascii_lowercase() || self.host_ok(authority))
    }

    /// Checks that the session (if the request names one) is `who`'s.
    fn session_ok(&self, headers: &HeaderMap, who: &Principal) -> bool {
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return true;
        };
        let mut s = self.sessions.locked();
        match s.get_mut(id) {
            Some((owner, used)) if *owner == who.name => {
                *used = Instant::now();
                true
            }
            Some(_) => false,
            // Unknown to us: rmcp answers 404 for it.
            None => true,
        }
    }

    fn bind(&self, id: &str, who: &Principal) {
        let mut s = self.sessions.locked();
        s.retain(|_, (_, used)| used.elapsed() < BINDING_IDLE);
        s.insert(id.to_string(), (who.name.clone(), Instant::now()));
    }

    fn unbind(&self, id: &str) {
        self.sessions.locked().remove(id);
    }
}

fn split_host_port(s: &str) -> (&str, Option<u16>) {
    // `[::1]:8765`, `host:8765`, `host`, `::1` (a bare IPv6 literal has several colons).
    if let Some(rest) = s.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((ip, tail)) => (ip, tail.strip_prefix(':').and_then(|p| p.parse().ok())),
            None => (s, None),
        };
    }
    match s.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') => (name, port.parse().ok()),
        _ => (s, None),
    }
}

/// The axum middleware in front of rmcp's service.
pub async fn check(State(guard): State<Arc<Guard>>, mut req: Request, next: Next) -> Response {
    if guard.draining.load(Ordering::SeqCst) {
        let why = "the server is shutting down; try again in a moment";
        return retry_later(StatusCode::SERVICE_UNAVAILABLE, why, "5");
    }
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default();
    if !guard.host_ok(&host) {
        return plain(
            StatusCode::FORBIDDEN,
            &format!(
                "Host '{host}' is not a name of this server; reach it by its address, or add the name to CODE_SANDBOX_ALLOWED_HOSTS"
            ),
        );
    }
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !guard.origin_ok(origin, &host) {
            return plain(
                StatusCode::FORBIDDEN,
                &format!(
                    "Origin '{origin}' may not call this server; its operator can allow it in CODE_SANDBOX_ALLOWED_ORIGINS"
                ),
            );
        }
    }
    let from = req.extensions().get::<ClientAddr>().map(|c| c.0);
    let who = match guard.auth.principal(req.headers(), from).await {
        Ok(p) => p,
        Err(denied) => return guard.auth.response(denied),
    };
    // Nothing of the caller's credentials goes further: not to tools, not to E2B, not to
    // code mode's servers, not into sandboxes.
    req.headers_mut().remove(header::AUTHORIZATION);
    if !guard.session_ok(req.headers(), &who) {
        return plain(
            StatusCode::FORBIDDEN,
            "this session belongs to another principal; open your own with an initialize request",
        );
    }
    let asked_session = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let deleting = req.method() == http::Method::DELETE;
    if asked_session.is_none()
        && req.method() == http::Method::POST
        && let Err(refused) = guard.room_for_session(&who).await
    {
        return refused;
    }
    if let Some(prover) = req.extensions().get::<Prover>() {
        prover.prove(&who.name);
    }
    req.extensions_mut().insert(who.clone());
    let (req, held) = match body_budget::read_request(&guard.bodies, &who.name, req).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    // Claude's clients as they are: see `quirks`. After authentication, so no stranger makes
    // the server read a body it would refuse.
    let req = match super::quirks::mend(req, crate::config::MAX_REQUEST_BYTES).await {
        Ok(r) => r,
        Err(why) => return plain(StatusCode::BAD_REQUEST, &why),
    };
    let mut response = next.run(req).await;
    if deleting && response.status() == StatusCode::ACCEPTED {
        // The session is ended by the time rmcp answers; clients (the Python SDK among them)
        // expect 200 for a DELETE that ended it, and report 202 as a failure.
        *response.status_mut() = StatusCode::OK;
    }
    match (&asked_session, response.headers().get(SESSION_HEADER)) {
        (None, Some(new)) => {
            if let Ok(id) = new.to_str() {
                guard.bind(id, &who);
            }
        }
        (Some(id), _) if deleting && response.status().is_success() => guard.unbind(id),
        _ => {}
    }
    body_budget::hold(response, held)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod credentials;
