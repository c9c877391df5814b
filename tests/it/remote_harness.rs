//! Remote mode under test: the real binary with `--transport http` on a loopback port of its
//! own, principals made with its own `token add`, and clients that speak streamable HTTP
//! (rmcp's, and raw requests where a test needs to misbehave).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::{self, Server};

pub struct Remote {
    child: tokio::process::Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    pub home: PathBuf,
    pub tokens: HashMap<String, String>,
    /// Everything the server wrote to stderr so far.
    pub log: Arc<Mutex<Vec<String>>>,
}

/// Makes a token with the binary's own `token add`, as an operator would.
pub fn add_token(file: &Path, name: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .args(["token", "add", name])
        .env("CODE_SANDBOX_TOKENS", file)
        .output()
        .expect("run token add");
    assert!(
        out.status.success(),
        "token add failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8").trim().to_string()
}

impl Remote {
    /// A server with these principals (each line may carry quota words after the name, e.g.
    /// `carol sandboxes=2`) in a home of its own.
    pub async fn start(principals: &[&str], envs: &[(&str, &str)]) -> Remote {
        Remote::start_in(common::private_home(), principals, envs).await
    }

    pub async fn start_in(home: PathBuf, principals: &[&str], envs: &[(&str, &str)]) -> Remote {
        let file = home.join("tokens");
        let mut tokens = HashMap::new();
        for p in principals {
            let mut words = p.split_whitespace();
            let name = words.next().expect("a name");
            let token = match std::fs::read_to_string(home.join(format!("token-{name}"))) {
                // A restart keeps the principals it had.
                Ok(t) => t,
                Err(_) => {
                    let t = add_token(&file, name);
                    std::fs::write(home.join(format!("token-{name}")), &t).expect("keep the token");
                    let extra: Vec<&str> = words.collect();
                    if !extra.is_empty() {
                        let text = std::fs::read_to_string(&file).expect("tokens file");
                        let lines: Vec<String> = text
                            .lines()
                            .map(|l| {
                                if l.split_whitespace().next() == Some(name) {
                                    format!("{l} {}", extra.join(" "))
                                } else {
                                    l.to_string()
                                }
                            })
                            .collect();
                        std::fs::write(&file, lines.join("\n") + "\n").expect("quota words");
                    }
                    t
                }
            };
            tokens.insert(name.to_string(), token);
        }
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"));
        cmd.env("CODE_SANDBOX_HOME", &home)
            .env("RUST_LOG", "info,rmcp=warn")
            .env("CODE_SANDBOX_PERSIST", "false")
            .env("CODE_SANDBOX_TRANSPORT", "http")
            .env("CODE_SANDBOX_LISTEN", "127.0.0.1:0")
            .env_remove("INTERPRETER_TYPE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if !principals.is_empty() {
            cmd.env("CODE_SANDBOX_TOKENS", &file);
        }
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn the server");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sink = log.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            let mut tx = Some(tx);
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("[server] {line}");
                let url = line
                    .split("serving MCP at ")
                    .nth(1)
                    .map(|u| u.split_whitespace().next().unwrap_or("").to_string());
                // Into the log first: a test that reads the log once started finds this line.
                sink.lock().unwrap().push(line);
                if let Some(url) = url
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(url);
                }
            }
        });
        let url = tokio::time::timeout(Duration::from_secs(60), rx)
            .await
            .expect("the server printed its address in time")
            .expect("the server printed its address before exiting");
        Remote {
            child,
            url,
            home,
            tokens,
            log,
        }
    }

    pub fn token(&self, name: &str) -> &str {
        self.tokens
            .get(name)
            .map(String::as_str)
            .expect("a known principal")
    }

    /// An rmcp client session as `name`, wrapped in the stdio tests' helpers.
    pub async fn client(&self, name: &str) -> Server {
        self.client_with_token(self.token(name)).await
    }

    /// An rmcp client session presenting `token` (an OAuth access token, say).
    pub async fn client_with_token(&self, token: &str) -> Server {
        let config = StreamableHttpClientTransportConfig::with_uri(self.url.clone()).auth_header(token);
        let transport = StreamableHttpClientTransport::with_client(http(), config);
        let client = tokio::time::timeout(Duration::from_secs(60), ().serve(transport))
            .await
            .expect("initialize in time")
            .expect("initialize");
        Server {
            client,
            home: self.home.clone(),
            pid: None,
        }
    }

    /// `host:port` of the server, for raw TCP clients.
    pub fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_string()
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// SIGTERM, then the exit status (bounded).
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        // SAFETY: kill only sends a signal to the child we started.
        #[cfg(unix)]
        unsafe {
            libc::kill(self.pid() as i32, libc::SIGTERM);
        }
        // Windows has no SIGTERM for a console-less child: it is stopped outright.
        #[cfg(windows)]
        let _ = self.child.start_kill();
        tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("the server exited within 60 s of SIGTERM")
            .expect("wait")
    }
}

/// An HTTP client (reqwest is built without a default TLS provider; ring is installed once).
pub fn http() -> reqwest::Client {
    static PROVIDER: std::sync::Once = std::sync::Once::new();
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::new()
}

/// A raw JSON-RPC POST to `/mcp`, as a client that does its own HTTP would send it.
pub fn post(url: &str, token: Option<&str>, body: &Value) -> reqwest::RequestBuilder {
    let mut r = http()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .json(body);
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    r
}

pub fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    })
}

/// Opens a session with raw requests; its id.
pub async fn raw_session(url: &str, token: &str) -> String {
    let r = post(url, Some(token), &initialize())
        .send()
        .await
        .expect("initialize");
    assert_eq!(
        r.status(),
        200,
        "initialize: {}",
        r.text().await.unwrap_or_default()
    );
    let sid = r
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .expect("ascii")
        .to_string();
    let _ = r.bytes().await;
    let r = post(
        url,
        Some(token),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .header("mcp-session-id", &sid)
    .send()
    .await
    .expect("initialized");
    assert!(r.status().is_success(), "initialized: {}", r.status());
    sid
}

/// A raw POST to `/mcp` with exactly these headers; the status and the body's JSON-RPC message.
pub async fn raw(
    url: &str,
    token: &str,
    headers: &[(&str, &str)],
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let mut r = http()
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let resp = r.json(&body).send().await.expect("POST /mcp");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(xtask::answer::message(&text)).unwrap_or(serde_json::Value::Null),
    )
}

pub fn meta2026() -> serde_json::Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "claude", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}
