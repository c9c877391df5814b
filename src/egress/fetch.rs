//! One execution's HTTP requests on behalf of guest code: each checked against the allowlist
//! and the address it would reach, made by reqwest (never following a redirect itself: the
//! guest's library asks again, and that request is checked too), its body handed to the guest
//! in pieces within the call's byte budget and deadline, and recorded for the result.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use super::rules::HostRule;
use super::secrets::{self, Secret};
use crate::host::lock::Locked;
use crate::outbound::internal_address::is_internal;
use crate::sandbox::{NetUse, Refusal, answer_by};

/// A piece of a body handed to the guest at once.
const PIECE: usize = 256 << 10;
/// Responses one execution may hold open (its library reads one at a time).
const MAX_OPEN: usize = 8;
/// How long a name may take to resolve.
const RESOLVE_TIME: Duration = Duration::from_secs(10);

/// Clients kept for reuse (making one loads the platform's roots: milliseconds).
const KEPT_CLIENTS: usize = 64;

/// What the server allows, for every call.
pub struct NetPolicy {
    pub rules: Vec<HostRule>,
    pub roots: Vec<reqwest::Certificate>,
    pub max_bytes: u64,
    /// Secrets put in for the hosts they belong to (`CODE_SANDBOX_SECRETS`).
    pub secrets: Vec<Secret>,
    /// One client per name and the address it was checked to reach (an IP host: no name).
    pub clients: Mutex<HashMap<(Option<String>, SocketAddr), reqwest::Client>>,
}

impl NetPolicy {
    /// A client that connects `domain` (if any) to `addr` only, follows no redirect and
    /// trusts the platform's roots plus the extra ones.
    fn client(&self, domain: Option<&str>, addr: SocketAddr) -> Result<reqwest::Client, reqwest::Error> {
        let key = (domain.map(str::to_string), addr);
        if let Some(c) = self.clients.locked().get(&key) {
            return Ok(c.clone());
        }
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .http1_only()
            .tls_certs_merge(self.roots.iter().cloned());
        if let Some(d) = domain {
            // Connect to the address checked, not to whatever a second lookup returns.
            builder = builder.resolve(d, addr);
        }
        let client = builder.build()?;
        let mut kept = self.clients.locked();
        if kept.len() >= KEPT_CLIENTS {
            kept.clear();
        }
        kept.insert(key, client.clone());
        Ok(client)
    }
}

#[derive(Deserialize)]
struct Frame {
    op: String,
    #[serde(default)]
    id: u32,
    #[serde(default)]
    method: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
    /// Base64.
    #[serde(default)]
    body: String,
}

struct Open {
    response: reqwest::Response,
    host: String,
}

/// One execution's network use.
pub struct Egress {
    policy: Arc<NetPolicy>,
    /// A remote principal's `hosts=`: a request must match one of these too.
    narrow: Option<Vec<HostRule>>,
    received: AtomicU64,
    next: AtomicU32,
    open: Mutex<HashMap<u32, Open>>,
    used: Mutex<BTreeMap<String, u64>>,
}

impl Egress {
    pub fn new(policy: Arc<NetPolicy>, narrow: Option<Vec<HostRule>>) -> Egress {
        Egress {
            policy,
            narrow,
            received: AtomicU64::new(0),
            next: AtomicU32::new(1),
            open: Mutex::new(HashMap::new()),
            used: Mutex::new(BTreeMap::new()),
        }
    }

    /// Hosts contacted and the bytes received from each, for the result.
    pub fn uses(&self) -> Vec<NetUse> {
        self.used
            .locked()
            .iter()
            .map(|(host, bytes)| NetUse {
                host: host.clone(),
                bytes: *bytes,
            })
            .collect()
    }

    pub async fn answer(&self, frame: &[u8], deadline: Instant) -> Vec<u8> {
        let frame: Frame = match serde_json::from_slice(frame) {
            Ok(f) => f,
            Err(e) => return Refusal::new("protocol", format!("the frame could not be read: {e}")).frame(),
        };
        let stop = answer_by(deadline);
        match frame.op.as_str() {
            "open" => match self.open(frame, stop).await {
                Ok(v) => v.to_string().into_bytes(),
                Err(r) => r.frame(),
            },
            "read" => match self.read(frame.id, stop).await {
                Ok(mut piece) => {
                    piece.insert(0, b'D');
                    piece
                }
                Err(r) => {
                    let mut out = b"E".to_vec();
                    out.extend(r.frame());
                    out
                }
            },
            "secrets" => {
                let names: serde_json::Map<String, Value> = self
                    .policy
                    .secrets
                    .iter()
                    .map(|s| (s.name.clone(), Value::String(s.placeholder())))
                    .collect();
                json!({"ok": true, "secrets": names}).to_string().into_bytes()
            }
            "close" => {
                self.open.locked().remove(&frame.id);
                b"{\"ok\":true}".to_vec()
            }
            other => Refusal::new("protocol", format!("unknown operation {other:?}")).frame(),
        }
    }

    fn rule_for(&self, url: &reqwest::Url) -> Result<&HostRule, Refusal> {
        let shown = url.host_str().unwrap_or_default();
        let rule = self.policy.rules.iter().find(|r| r.permits(url)).ok_or_else(|| {
            Refusal::new(
                "denied",
                format!(
                    "{}://{shown}{} is not an allowed host: the user lists the hosts sandbox code may reach in CODE_SANDBOX_ALLOW_HOSTS",
                    url.scheme(),
                    url.port().map(|p| format!(":{p}")).unwrap_or_default()
                ),
            )
        })?;
        if let Some(narrow) = &self.narrow
            && !narrow.iter().any(|r| r.permits(url))
        {
            return Err(Refusal::new(
                "denied",
                format!(
                    "{shown} is not among the hosts this token may reach (hosts= in its tokens-file line)"
                ),
            ));
        }
        Ok(rule)
    }

    /// The address to connect to: one the rule allows, never an internal one reached by name.
    async fn address(
        &self,
        url: &reqwest::Url,
        rule: &HostRule,
        stop: Instant,
    ) -> Result<SocketAddr, Refusal> {
        let port = url.port_or_known_default().unwrap_or(443);
        let shown = url.host_str().unwrap_or_default().to_string();
        let candidates: Vec<IpAddr> = match url.host() {
            Some(url::Host::Ipv4(ip)) => vec![IpAddr::V4(ip)],
            Some(url::Host::Ipv6(ip)) => vec![IpAddr::V6(ip)],
            Some(url::Host::Domain(d)) => {
                let until = stop.min(Instant::now() + RESOLVE_TIME);
                let found = tokio::time::timeout_at(until.into(), tokio::net::lookup_host((d, port)))
                    .await
                    .map_err(|_| Refusal::new("timeout", format!("{d} did not resolve in time")))?
                    .map_err(|e| Refusal::new("failed", format!("{d} could not be resolved: {e}")))?;
                found.map(|a| a.ip()).collect()
            }
            None => return Err(Refusal::new("invalid_arguments", "the URL has no host")),
        };
        candidates
            .iter()
            .copied()
            .find(|ip| !is_internal(*ip) || rule.names_address(*ip))
            .map(|ip| SocketAddr::new(ip, port))
            .ok_or_else(|| {
                Refusal::new(
                    "denied",
                    format!(
                        "{shown} is (or resolves to) an internal address ({}), which sandbox code may reach only when CODE_SANDBOX_ALLOW_HOSTS lists that address itself",
                        candidates.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                    ),
                )
            })
    }

    async fn open(&self, f: Frame, stop: Instant) -> Result<Value, Refusal> {
        let url = reqwest::Url::parse(&f.url)
            .map_err(|e| Refusal::new("invalid_arguments", format!("{:?} is not a URL: {e}", f.url)))?;
        let rule = self.rule_for(&url)?;
        let addr = self.address(&url, rule, stop).await?;
        if self.open.locked().len() >= MAX_OPEN {
            return Err(Refusal::new(
                "too_many",
                format!("{MAX_OPEN} responses are open; read or close one first"),
            ));
        }
        let host = url.host_str().unwrap_or_default().to_string();
        let domain = match url.host() {
            Some(url::Host::Domain(d)) => Some(d),
            _ => None,
        };
        let client = self
            .policy
            .client(domain, addr)
            .map_err(|e| Refusal::new("failed", format!("the HTTP client could not be made: {e}")))?;
        let method = reqwest::Method::from_bytes(f.method.as_bytes()).map_err(|_| {
            Refusal::new(
                "invalid_arguments",
                format!("{:?} is not an HTTP method", f.method),
            )
        })?;
        let body = base64::engine::general_purpose::STANDARD
            .decode(f.body.as_bytes())
            .map_err(|_| Refusal::new("protocol", "the body is not base64"))?;
        let mut headers = f.headers;
        let url = secrets::substitute(&self.policy.secrets, &url, &mut headers, &body)
            .map_err(|why| Refusal::new("denied", why))?;
        let mut request = client.request(method, url).body(body);
        for (k, v) in &headers {
            let lower = k.to_ascii_lowercase();
            if matches!(
                lower.as_str(),
                "host" | "content-length" | "connection" | "transfer-encoding"
            ) {
                continue;
            }
            request = request.header(k.as_str(), v.as_str());
        }
        let response = tokio::time::timeout_at(stop.into(), request.send())
            .await
            .map_err(|_| {
                Refusal::new(
                    "timeout",
                    format!("{host} did not answer within this execute_code call's time limit"),
                )
            })?
            // Without the URL: its query may hold a secret's value now.
            .map_err(|e| {
                Refusal::new(
                    "failed",
                    format!("the request to {host} failed: {}", error_chain(&e.without_url())),
                )
            })?;
        tracing::info!(target: "mcp_code_sandbox::egress", host = %host, status = response.status().as_u16(), "guest request");
        self.used.locked().entry(host.clone()).or_insert(0);
        let status = response.status();
        let headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        self.open.locked().insert(id, Open { response, host });
        Ok(json!({
            "ok": true,
            "id": id,
            "status": status.as_u16(),
            "reason": status.canonical_reason().unwrap_or(""),
            "headers": headers,
        }))
    }

    async fn read(&self, id: u32, stop: Instant) -> Result<Vec<u8>, Refusal> {
        let Some(mut open) = self.open.locked().remove(&id) else {
            return Err(Refusal::new("protocol", "no such response (it was closed)"));
        };
        let mut piece = Vec::new();
        while piece.len() < PIECE {
            let chunk = tokio::time::timeout_at(stop.into(), open.response.chunk())
                .await
                .map_err(|_| {
                    Refusal::new(
                        "timeout",
                        format!(
                            "{} did not send its body within this execute_code call's time limit",
                            open.host
                        ),
                    )
                })?
                .map_err(|e| {
                    Refusal::new(
                        "failed",
                        format!(
                            "reading from {} failed: {}",
                            open.host,
                            error_chain(&e.without_url())
                        ),
                    )
                })?;
            let Some(chunk) = chunk else { break };
            let total = self.received.fetch_add(chunk.len() as u64, Ordering::SeqCst) + chunk.len() as u64;
            *self.used.locked().entry(open.host.clone()).or_insert(0) += chunk.len() as u64;
            if total > self.policy.max_bytes {
                return Err(Refusal::new(
                    "too_large",
                    format!(
                        "this execute_code call received more than {} bytes from the network (CODE_SANDBOX_NET_BYTES); ask for less, or fetch it in parts over several calls",
                        self.policy.max_bytes
                    ),
                ));
            }
            piece.extend_from_slice(&chunk);
        }
        if !piece.is_empty() {
            self.open.locked().insert(id, open);
        }
        Ok(piece)
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
