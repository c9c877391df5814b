//! E2B's HTTP API as the official SDKs speak it (the wire protocol of E2B's SDKs): the control
//! plane with `X-API-KEY`, and per-sandbox services (envd on 49983, the code interpreter on
//! 49999) with `E2b-Sandbox-Id`, `E2b-Sandbox-Port` and `X-Access-Token`.
//!
//! Nothing here retries a request that could run code twice, and the key never appears in
//! an error, a log line or a Debug print.

use crate::sandbox::SandboxError;
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::Settings;

pub const ENVD_PORT: u16 = 49983;
pub const INTERPRETER_PORT: u16 = 49999;
pub const TEMPLATE: &str = "code-interpreter-v1";

/// What E2B reports of a sandbox's life; anything it does not call paused is running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteState {
    Running,
    Paused,
}

#[derive(Debug, thiserror::Error)]
pub enum E2bError {
    #[error("E2B is not configured: {0}")]
    Config(String),
    #[error("E2B rejected the API key (401). Check E2B_API_KEY")]
    Unauthorized,
    #[error("the E2B sandbox is gone or timed out ({0}); create a new one")]
    Gone(u16),
    #[error("the E2B sandbox's disk is full (507); delete files or use a new sandbox")]
    DiskFull,
    #[error("E2B could not be reached: {0}. Check the network connection (and E2B_API_URL / E2B_DOMAIN)")]
    Unreachable(String),
    #[error("E2B answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("E2B sent something unexpected: {0}")]
    Protocol(String),
}

/// What `POST /sandboxes` returns.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Created {
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(default, rename = "envdAccessToken")]
    pub envd_access_token: Option<String>,
    #[serde(default)]
    pub domain: Option<String>,
}

/// Where one sandbox is reached, and with which token.
#[derive(Clone)]
pub struct Remote {
    pub id: String,
    pub token: Option<String>,
    pub domain: Option<String>,
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    api_url: String,
    key: String,
    domain: String,
    sandbox_url: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("api_url", &self.api_url)
            .field("key", &"<redacted>")
            .finish()
    }
}

fn trim_slash(s: &str) -> String {
    s.trim_end_matches('/').to_string()
}

fn unreachable(e: reqwest::Error) -> E2bError {
    // reqwest's Display can include the URL but never our headers, so the key stays out.
    E2bError::Unreachable(e.without_url().to_string())
}

impl Client {
    pub fn from_settings(s: &Settings) -> Result<Self, E2bError> {
        let key = s
            .e2b_api_key
            .clone()
            .filter(|k| !k.trim().is_empty())
            .ok_or_else(|| E2bError::Config("set E2B_API_KEY to your key (it starts with e2b_)".into()))?;
        let domain = s.e2b_domain.clone();
        let api_url = s
            .e2b_api_url
            .clone()
            .map(|u| trim_slash(&u))
            .unwrap_or_else(|| format!("https://api.{domain}"));
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(15))
            .http1_only()
            .build()
            .map_err(|e| E2bError::Config(format!("HTTP client: {e}")))?;
        Ok(Client {
            http,
            api_url,
            key,
            domain,
            sandbox_url: s.e2b_sandbox_url.clone().map(|u| trim_slash(&u)),
        })
    }

    fn sandbox_base(&self, r: &Remote, port: u16) -> String {
        match &self.sandbox_url {
            Some(u) => u.clone(),
            None => format!(
                "https://{port}-{}.{}",
                r.id,
                r.domain.as_deref().unwrap_or(&self.domain)
            ),
        }
    }

    /// A request to one sandbox's service, with the headers the SDKs send.
    fn to_sandbox(
        &self,
        method: reqwest::Method,
        r: &Remote,
        port: u16,
        path: &str,
    ) -> reqwest::RequestBuilder {
        let mut b = self
            .http
            .request(method, format!("{}{path}", self.sandbox_base(r, port)))
            .header("E2b-Sandbox-Id", &r.id)
            .header("E2b-Sandbox-Port", port.to_string());
        if let Some(t) = &r.token {
            b = b.header("X-Access-Token", t);
        }
        b
    }

    fn control(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.api_url))
            .header("X-API-KEY", &self.key)
    }

    /// Maps an HTTP status to an error, reading E2B's `{"code","message"}` body when present.
    pub async fn check(resp: reqwest::Response) -> Result<reqwest::Response, E2bError> {
        let status = resp.status().as_u16();
        if resp.status().is_success() {
            return Ok(resp);
        }
        let body = resp.text().await.unwrap_or_default();
        let message = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| body.chars().take(300).collect());
        Err(match status {
            401 | 403 => E2bError::Unauthorized,
            404 | 502 => E2bError::Gone(status),
            507 => E2bError::DiskFull,
            _ => E2bError::Status { status, message },
        })
    }

    /// The sandbox object E2B answers create and connect with.
    async fn sandbox(resp: reqwest::Response) -> Result<Remote, E2bError> {
        let c: Created = Self::check(resp)
            .await?
            .json()
            .await
            .map_err(|e| E2bError::Protocol(e.to_string()))?;
        Ok(Remote {
            id: c.sandbox_id,
            token: c.envd_access_token,
            domain: c.domain,
        })
    }

    pub async fn create(&self, timeout_s: u64) -> Result<Remote, E2bError> {
        let body = json!({"templateID": TEMPLATE, "timeout": timeout_s, "metadata": {}, "envVars": {}, "secure": true});
        let resp = self
            .control(reqwest::Method::POST, "/sandboxes")
            .json(&body)
            .send()
            .await
            .map_err(unreachable)?;
        Self::sandbox(resp).await
    }

    pub async fn state(&self, id: &str) -> Result<RemoteState, E2bError> {
        let resp = self
            .control(reqwest::Method::GET, &format!("/sandboxes/{id}"))
            .send()
            .await
            .map_err(unreachable)?;
        let v: Value = Self::check(resp)
            .await?
            .json()
            .await
            .map_err(|e| E2bError::Protocol(e.to_string()))?;
        Ok(match v.get("state").and_then(Value::as_str) {
            Some("paused") => RemoteState::Paused,
            _ => RemoteState::Running,
        })
    }

    pub async fn kill(&self, id: &str) -> Result<(), E2bError> {
        let resp = self
            .control(reqwest::Method::DELETE, &format!("/sandboxes/{id}"))
            .send()
            .await
            .map_err(unreachable)?;
        match Self::check(resp).await {
            Ok(_) | Err(E2bError::Gone(404)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Pauses the sandbox: E2B keeps its memory and files until it is connected again.
    pub async fn pause(&self, id: &str) -> Result<(), E2bError> {
        let resp = self
            .control(reqwest::Method::POST, &format!("/sandboxes/{id}/pause"))
            .send()
            .await
            .map_err(unreachable)?;
        Self::check(resp).await.map(|_| ())
    }

    /// Connects to a sandbox, resuming it if it is paused, with `timeout_s` to live.
    pub async fn connect(&self, id: &str, timeout_s: u64) -> Result<Remote, E2bError> {
        let resp = self
            .control(reqwest::Method::POST, &format!("/sandboxes/{id}/connect"))
            .json(&json!({"timeout": timeout_s}))
            .send()
            .await
            .map_err(unreachable)?;
        Self::sandbox(resp).await
    }

    /// Keeps the sandbox alive for `secs` from now (called on every use).
    pub async fn extend(&self, id: &str, secs: u64) -> Result<(), E2bError> {
        let resp = self
            .control(reqwest::Method::POST, &format!("/sandboxes/{id}/timeout"))
            .json(&json!({"timeout": secs}))
            .send()
            .await
            .map_err(unreachable)?;
        Self::check(resp).await.map(|_| ())
    }

    /// Starts running code; the caller reads the NDJSON stream.
    pub async fn execute(&self, r: &Remote, code: &str) -> Result<reqwest::Response, E2bError> {
        let body = json!({"code": code, "context_id": null, "language": null, "env_vars": {}});
        let resp = self
            .to_sandbox(reqwest::Method::POST, r, INTERPRETER_PORT, "/execute")
            .json(&body)
            .send()
            .await
            .map_err(unreachable)?;
        Self::check(resp).await
    }

    pub async fn read_file(&self, r: &Remote, path: &str) -> Result<Vec<u8>, E2bError> {
        let resp = self.open_file(r, path).await?;
        Ok(resp.bytes().await.map_err(unreachable)?.to_vec())
    }

    /// The answer to a file's download, its body not read yet: for copying it piece by piece.
    pub async fn open_file(&self, r: &Remote, path: &str) -> Result<reqwest::Response, E2bError> {
        let resp = self
            .to_sandbox(reqwest::Method::GET, r, ENVD_PORT, "/files")
            .query(&[("path", path), ("username", "user")])
            .send()
            .await
            .map_err(unreachable)?;
        Self::check(resp).await
    }

    /// The next piece of a download from [`Client::open_file`].
    pub async fn next_piece(resp: &mut reqwest::Response) -> Result<Option<bytes::Bytes>, E2bError> {
        resp.chunk().await.map_err(unreachable)
    }

    pub async fn write_file(&self, r: &Remote, path: &str, bytes: Vec<u8>) -> Result<(), E2bError> {
        let name = path.rsplit('/').next().unwrap_or("file").to_string();
        let part = reqwest::multipart::Part::bytes(bytes).file_name(name);
        let form = reqwest::multipart::Form::new().part("file", part);
        let resp = self
            .to_sandbox(reqwest::Method::POST, r, ENVD_PORT, "/files")
            .query(&[("path", path), ("username", "user")])
            .multipart(form)
            .send()
            .await
            .map_err(unreachable)?;
        Self::check(resp).await.map(|_| ())
    }

    /// A unary Connect-RPC call on envd's filesystem service.
    pub async fn filesystem(&self, r: &Remote, method: &str, body: Value) -> Result<Value, E2bError> {
        let basic = base64::engine::general_purpose::STANDARD.encode("user:");
        let resp = self
            .to_sandbox(
                reqwest::Method::POST,
                r,
                ENVD_PORT,
                &format!("/filesystem.Filesystem/{method}"),
            )
            .header("Content-Type", "application/json")
            .header("Connect-Protocol-Version", "1")
            .header("Authorization", format!("Basic {basic}"))
            .json(&body)
            .send()
            .await
            .map_err(unreachable)?;
        Self::check(resp)
            .await?
            .json()
            .await
            .map_err(|e| E2bError::Protocol(e.to_string()))
    }
}
impl From<E2bError> for SandboxError {
    fn from(e: E2bError) -> Self {
        SandboxError::Backend(Box::new(e))
    }
}
