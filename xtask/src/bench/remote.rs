//! The remote-mode rows of `cargo xtask bench`: the `1+1` round trip over streamable HTTP
//! beside stdio (interleaved, so both see the same machine), and calls per second with 8 and
//! 40 sessions at once.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::harness::{call, new_sandbox, private_home, spawn, wait_for_warm};
use super::table::{Row, median};

pub(crate) type Client = RunningService<RoleClient, ()>;

/// Calls per session in the throughput runs.
const CALLS: usize = 25;

pub(crate) fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[(v.len() * 99 / 100).min(v.len() - 1)]
}

/// A server in remote mode with one principal; its URL and token. `extra` settings override
/// the defaults below.
pub(crate) async fn start_http(
    bin: &Path,
    home: &Path,
    extra: &[(&str, &str)],
) -> anyhow::Result<(tokio::process::Child, String, String)> {
    let tokens = home.join("tokens");
    let _ = std::fs::remove_file(&tokens);
    let out = std::process::Command::new(bin)
        .args(["token", "add", "bench"])
        .env("CODE_SANDBOX_TOKENS", &tokens)
        .output()?;
    anyhow::ensure!(out.status.success(), "token add failed");
    let token = String::from_utf8(out.stdout)?.trim().to_string();
    let mut child = tokio::process::Command::new(bin)
        .env("CODE_SANDBOX_HOME", home)
        .env("RUST_LOG", "warn")
        .env("CODE_SANDBOX_PERSIST", "false")
        .env("CODE_SANDBOX_TRANSPORT", "http")
        .env("CODE_SANDBOX_LISTEN", "127.0.0.1:0")
        .env("CODE_SANDBOX_TOKENS", &tokens)
        .env("CODE_SANDBOX_MAX_SANDBOXES", "64")
        .env("CODE_SANDBOX_PRINCIPAL_SANDBOXES", "64")
        .env("CODE_SANDBOX_MEMORY_MB", "256")
        .env("CODE_SANDBOX_PRINCIPAL_MEMORY_MB", "16384")
        .envs(extra.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let url = loop {
        let Some(line) = lines.next_line().await? else {
            anyhow::bail!("the HTTP server exited before listening");
        };
        if let Some(u) = line.split("serving MCP at ").nth(1) {
            break u.split_whitespace().next().unwrap_or_default().to_string();
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, url, token))
}

pub(crate) async fn connect(url: &str, token: &str) -> anyhow::Result<Client> {
    // reqwest is built without a default TLS provider (as in the server); plain HTTP still
    // needs one installed to build a client.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(token.to_string());
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    Ok(().serve(transport).await?)
}

/// `sessions` clients at once, each in its own sandbox, `CALLS` calls each; calls per second.
async fn throughput(url: &str, token: &str, sessions: usize) -> anyhow::Result<f64> {
    let mut clients = Vec::new();
    for _ in 0..sessions {
        let c = connect(url, token).await?;
        let id = new_sandbox(&c).await?;
        call(&c, "execute_code", json!({"sandbox_id": id, "code": "0"})).await?;
        clients.push((c, id));
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (c, id) in clients {
        tasks.push(tokio::spawn(async move {
            for i in 0..CALLS {
                call(
                    &c,
                    "execute_code",
                    json!({"sandbox_id": id, "code": format!("{i} + 1")}),
                )
                .await?;
            }
            let _ = c.cancel().await;
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok((sessions * CALLS) as f64 / started.elapsed().as_secs_f64())
}

/// The same load over one stdio connection with `n` calls in flight (its limit of calls
/// running at once is 8 by default, so n stays at or below it).
async fn stdio_throughput(c: &Client, n: usize) -> anyhow::Result<f64> {
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(new_sandbox(c).await?);
    }
    let started = Instant::now();
    let runs = ids.iter().map(|id| async move {
        for i in 0..CALLS {
            call(
                c,
                "execute_code",
                json!({"sandbox_id": id, "code": format!("{i} + 1")}),
            )
            .await?;
        }
        anyhow::Ok(())
    });
    for r in futures_util::future::join_all(runs).await {
        r?;
    }
    Ok((n * CALLS) as f64 / started.elapsed().as_secs_f64())
}

/// The rows, and a note with the p99s and throughputs (which are not medians).
pub async fn rows(bin: &Path, home: &Path) -> anyhow::Result<(Vec<Row>, String)> {
    let h = private_home(home, "http")?;
    let (mut server, url, token) = start_http(bin, &h, &[]).await?;
    let stdio = spawn(bin, home).await?;
    let http = connect(&url, &token).await?;
    wait_for_warm(&stdio).await?;
    wait_for_warm(&http).await?;
    let (sid, hid) = (new_sandbox(&stdio).await?, new_sandbox(&http).await?);
    let (mut over_stdio, mut over_http) = (Vec::new(), Vec::new());
    for _ in 0..300 {
        let t = Instant::now();
        call(&stdio, "execute_code", json!({"sandbox_id": sid, "code": "1+1"})).await?;
        over_stdio.push(t.elapsed());
        let t = Instant::now();
        call(&http, "execute_code", json!({"sandbox_id": hid, "code": "1+1"})).await?;
        over_http.push(t.elapsed());
    }
    let (s99, h99) = (p99(over_stdio.clone()), p99(over_http.clone()));
    let (s50, h50) = (median(over_stdio), median(over_http));
    let mut rows = vec![Row {
        what: "execute_code(\"1+1\") round trip over HTTP (remote mode, bearer token)".into(),
        ours: h50,
        baseline: Some(("the same over stdio, interleaved".into(), s50)),
        runs: 300,
    }];
    let stdio8 = stdio_throughput(&stdio, 8).await?;
    let http8 = throughput(&url, &token, 8).await?;
    let http40 = throughput(&url, &token, 40).await?;
    let per_call = |rate: f64| Duration::from_secs_f64(1.0 / rate);
    rows.push(Row {
        what: format!("throughput, 8 HTTP sessions x {CALLS} calls (time per call)"),
        ours: per_call(http8),
        baseline: Some((
            "8 calls in flight over one stdio connection".into(),
            per_call(stdio8),
        )),
        runs: 8 * CALLS,
    });
    rows.push(Row {
        what: format!("throughput, 40 HTTP sessions x {CALLS} calls (time per call)"),
        ours: per_call(http40),
        baseline: Some(("8 HTTP sessions".into(), per_call(http8))),
        runs: 40 * CALLS,
    });
    let note = format!(
        "Remote mode: `1+1` round trip p99 {:.3} ms over HTTP, {:.3} ms over stdio (medians {:.3} / {:.3} ms). \
         Throughput: {http8:.0} calls/s with 8 HTTP sessions, {http40:.0} calls/s with 40 (calls wait their fair turn \
         for the 8 call slots), {stdio8:.0} calls/s with 8 calls in flight over stdio.",
        h99.as_secs_f64() * 1e3,
        s99.as_secs_f64() * 1e3,
        h50.as_secs_f64() * 1e3,
        s50.as_secs_f64() * 1e3,
    );
    let _ = stdio.cancel().await;
    let _ = http.cancel().await;
    let _ = server.kill().await;
    let _ = std::fs::remove_dir_all(&h);
    Ok((rows, note))
}
