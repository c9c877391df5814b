//! A team server past one machine: replicas named by `CODE_SANDBOX_REPLICA`, readiness for a
//! proxy or Kubernetes (`/readyz`), and a shutdown that drains.

#[cfg(unix)]
use std::time::Duration;

use serde_json::{Value, json};

use crate::common;
use crate::remote_harness::{Remote, http};
#[cfg(unix)]
use crate::remote_harness::{initialize, post};

const HEX: &str = "0123456789abcdef0123456789abcdef";

/// `/readyz`'s status and body.
#[cfg(unix)]
async fn readyz(r: &Remote) -> (u16, String) {
    let url = format!("http://{}/readyz", r.addr());
    match http().get(&url).send().await {
        Ok(resp) => (resp.status().as_u16(), resp.text().await.unwrap_or_default()),
        Err(e) => (0, e.to_string()),
    }
}

/// Waits (bounded) for `/readyz` to say ready: the interpreter is prepared at start.
#[cfg(unix)]
async fn ready(r: &Remote) {
    for _ in 0..600 {
        if readyz(r).await.0 == 200 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("/readyz never said ready: {:?}", readyz(r).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replicas_ids_carry_its_name_and_another_replicas_id_says_where_it_lives() {
    let r = Remote::start(&["alice"], &[("CODE_SANDBOX_REPLICA", "replica-1")]).await;
    let alice = r.client("alice").await;
    let id = alice.create().await;
    assert!(id.starts_with("sbx-replica-1-"), "{id}");
    assert_eq!(alice.run_ok(&id, "6 * 7").await["result"], "42");

    let elsewhere = format!("sbx-replica-2-{HEX}");
    let (err, _, text) = alice
        .call_json("execute_code", json!({"sandbox_id": elsewhere, "code": "1"}))
        .await;
    assert!(err, "{text}");
    assert!(
        text.contains(&format!("sandbox '{elsewhere}' lives on replica replica-2"))
            && text.contains("retry shortly"),
        "{text}"
    );
    // An id of this very replica that it does not know is simply unknown.
    let (err, _, text) = alice
        .call_json(
            "get_sandbox_status",
            json!({"sandbox_id": format!("sbx-replica-1-{HEX}")}),
        )
        .await;
    assert!(err && text.contains("no open sandbox has the id"), "{text}");
    let _ = r.terminate().await;
}

#[test]
fn a_replica_name_that_is_no_dns_label_is_refused_at_start() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .args(["--transport", "http", "--listen", "127.0.0.1:0"])
        .env("CODE_SANDBOX_HOME", crate::common::private_home())
        .env("CODE_SANDBOX_REPLICA", "Replica_1")
        .output()
        .expect("run the binary");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'Replica_1' is not a replica name"), "{err}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn readyz_says_ready_then_503_at_once_on_sigterm_while_a_running_call_finishes() {
    let r = Remote::start(&["alice"], &[("CODE_SANDBOX_DRAIN_SECONDS", "30")]).await;
    ready(&r).await;
    assert_eq!(readyz(&r).await, (200, "ready\n".to_string()));
    let alice = r.client("alice").await;
    let id = alice.create().await;
    let slow = {
        let id = id.clone();
        tokio::spawn(async move {
            alice
                .call_json(
                    "execute_code",
                    json!({"sandbox_id": id, "code": "import time; time.sleep(4); 'done'"}),
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(800)).await;
    // SAFETY: kill only sends a signal to the child the harness started.
    unsafe {
        libc::kill(r.pid() as i32, libc::SIGTERM);
    }
    let mut draining = None;
    for _ in 0..50 {
        let got = readyz(&r).await;
        if got.0 == 503 {
            draining = Some(got);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, body) = draining.expect("/readyz answered 503 within 2.5 s of SIGTERM");
    assert!(body.contains("draining"), "{body}");
    let health = http()
        .get(format!("http://{}/healthz", r.addr()))
        .send()
        .await
        .expect("/healthz answers while draining");
    assert_eq!(health.status().as_u16(), 200);
    // New work is turned away with a hint to retry (the proxy sends the retry elsewhere).
    let turned = post(&r.url, Some(r.token("alice")), &initialize())
        .send()
        .await
        .expect("an answer while draining");
    assert_eq!(turned.status().as_u16(), 503);
    assert_eq!(turned.headers()["retry-after"], "5");
    let said = turned.text().await.unwrap_or_default();
    assert!(said.contains("try again in a moment"), "{said}");
    let (err, v, text) = slow.await.expect("the call's task");
    assert!(!err, "the running call finished: {text}");
    assert_eq!(v["result"], "'done'");
    let _ = r.terminate().await;
}

/// The metrics address the server printed at start.
pub fn metrics_url(r: &Remote) -> String {
    let log = r.log_text();
    let at = log
        .split("serving metrics at ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no metrics address in the log: {log}"));
    at.to_string()
}

/// `text` parsed by the official Prometheus client library for Python (its OpenMetrics
/// parser, which is strict): sample name → [(labels, value)].
fn parsed(text: &str) -> serde_json::Map<String, Value> {
    let dir = common::repo_root().join("tests/prometheus");
    let venv = xtask::pyvenv::ensure(&dir, &|m| common::progress(m)).unwrap_or_else(|e| panic!("{e}"));
    let file = std::env::temp_dir().join(format!("metrics-{}.txt", uuid::Uuid::new_v4().simple()));
    std::fs::write(&file, text).expect("write the scrape");
    let script = r#"
import sys, json
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = {}
for family in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in family.samples:
        out.setdefault(s.name, []).append([s.labels, s.value])
print(json.dumps(out))
"#;
    let out = std::process::Command::new(venv.join("bin/python"))
        .args(["-c", script])
        .arg(&file)
        .output()
        .expect("run python");
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "prometheus_client could not parse the scrape: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// The value of sample `name` whose labels include all of `want`.
pub fn sample(m: &serde_json::Map<String, Value>, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    m.get(name)?.as_array()?.iter().find_map(|s| {
        let labels = s[0].as_object()?;
        want.iter()
            .all(|(k, v)| labels.get(*k).and_then(Value::as_str) == Some(*v))
            .then(|| s[1].as_f64())
            .flatten()
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_are_served_apart_from_mcp_and_agree_with_the_calls_made() {
    let r = Remote::start(
        &["alice", "bob sandboxes=1"],
        &[("CODE_SANDBOX_METRICS_LISTEN", "127.0.0.1:0")],
    )
    .await;
    let url = metrics_url(&r);
    let alice = r.client("alice").await;
    let id = alice.create().await;
    for i in 0..3 {
        alice.run_ok(&id, &format!("{i} + 1")).await;
    }
    let (err, _, _) = alice
        .call_json("execute_code", json!({"sandbox_id": id, "code": "1/0"}))
        .await;
    assert!(err, "a guest exception is a tool error");
    let bob = r.client("bob").await;
    bob.create().await;
    let (err, _, text) = bob.call_json("create_sandbox", json!({})).await;
    assert!(err && text.contains("the most your quota allows"), "{text}");
    // A tool the server does not have never becomes a label of its own.
    let params = rmcp::model::CallToolRequestParams::new("made_up_tool_name_1234".to_string());
    assert!(alice.client.call_tool(params).await.is_err());

    let (body, m) = scrape(&url).await;
    let calls = |tool: &str, outcome: &str| {
        sample(
            &m,
            "mcp_code_sandbox_calls_total",
            &[("tool", tool), ("outcome", outcome)],
        )
    };
    assert_eq!(calls("execute_code", "ok"), Some(3.0), "{body}");
    assert_eq!(calls("execute_code", "tool_error"), Some(1.0), "{body}");
    assert_eq!(calls("create_sandbox", "ok"), Some(2.0), "{body}");
    assert_eq!(calls("create_sandbox", "tool_error"), Some(1.0), "{body}");
    assert_eq!(calls("other", "rejected"), Some(1.0), "{body}");
    assert!(!body.contains("made_up_tool_name"), "{body}");
    assert!(
        !body.contains("principal="),
        "no principal labels unless asked: {body}"
    );
    assert_eq!(
        sample(
            &m,
            "mcp_code_sandbox_call_duration_seconds_count",
            &[("tool", "execute_code")]
        ),
        Some(4.0)
    );
    assert_eq!(
        sample(
            &m,
            "mcp_code_sandbox_quota_refusals_total",
            &[("quota", "sandboxes")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&m, "mcp_code_sandbox_sandboxes", &[("state", "live")]),
        Some(2.0),
        "{body}"
    );
    assert!(sample(&m, "mcp_code_sandbox_memory_budget_bytes", &[("of", "total")]).is_some_and(|v| v > 0.0));
    assert!(sample(&m, "mcp_code_sandbox_memory_budget_bytes", &[("of", "used")]).is_some_and(|v| v > 0.0));

    // Never on the MCP port, to principals or anyone.
    let on_mcp = http()
        .get(format!("http://{}/metrics", r.addr()))
        .send()
        .await
        .expect("get");
    assert_eq!(on_mcp.status().as_u16(), 404);
    let _ = r.terminate().await;
}

/// One scrape: its text, and its samples as the official client parses them.
pub async fn scrape(url: &str) -> (String, serde_json::Map<String, Value>) {
    let body = http()
        .get(url)
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("body");
    let m = parsed(&body);
    (body, m)
}

fn sandboxes(m: &serde_json::Map<String, Value>, state: &str) -> Option<f64> {
    sample(m, "mcp_code_sandbox_sandboxes", &[("state", state)])
}

/// Sandboxes are counted live, suspended (saved by this process) and kept (saved before a
/// restart, not used since), as an operator sizing replicas needs them.
#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_sandboxes_live_suspended_and_kept_across_a_restart() {
    let home = common::private_home();
    let envs = [
        ("CODE_SANDBOX_METRICS_LISTEN", "127.0.0.1:0"),
        ("CODE_SANDBOX_MAX_SANDBOXES", "1"),
        ("CODE_SANDBOX_PERSIST", "true"),
    ];
    let r = Remote::start_in(home.clone(), &["alice"], &envs).await;
    let alice = r.client("alice").await;
    let first = alice.create().await;
    alice.run_ok(&first, "x = 1").await;
    // One live interpreter at most: the second sandbox suspends the first.
    let second = alice.create().await;
    alice.run_ok(&second, "y = 2").await;
    let (body, m) = scrape(&metrics_url(&r)).await;
    assert_eq!(sandboxes(&m, "live"), Some(1.0), "{body}");
    assert_eq!(sandboxes(&m, "suspended"), Some(1.0), "{body}");
    assert_eq!(sandboxes(&m, "kept"), Some(0.0), "{body}");
    let _ = r.terminate().await;

    let r = Remote::start_in(home, &["alice"], &envs).await;
    let (body, m) = scrape(&metrics_url(&r)).await;
    assert_eq!(
        sandboxes(&m, "kept"),
        Some(2.0),
        "both kept over the restart: {body}"
    );
    assert_eq!(sandboxes(&m, "live"), Some(0.0), "{body}");
    let alice = r.client("alice").await;
    assert_eq!(alice.run_ok(&first, "x").await["result"], "1");
    let (body, m) = scrape(&metrics_url(&r)).await;
    assert_eq!(sandboxes(&m, "live"), Some(1.0), "{body}");
    assert_eq!(sandboxes(&m, "kept"), Some(1.0), "{body}");
    let _ = r.terminate().await;
}

/// OAuth refusals by reason, and calls by principal only when the operator asks for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_count_oauth_refusals_by_reason_and_label_principals_when_asked() {
    use crate::oauth::{Idp, attempt, server};
    common::ensure_runtime();
    let idp = Idp::start().await;
    let remote = server(
        &idp,
        &["ci"],
        "",
        &[
            ("CODE_SANDBOX_OAUTH_SCOPES", "mcp"),
            ("CODE_SANDBOX_METRICS_LISTEN", "127.0.0.1:0"),
            ("CODE_SANDBOX_METRICS_PRINCIPALS", "true"),
        ],
    )
    .await;
    let url = remote.url.clone();
    let other = idp.token("agent-a", "http://127.0.0.1:1/mcp", "mcp").await;
    assert_eq!(attempt(&url, Some(&other)).await.0, 401);
    let forged = idp
        .mint(
            json!({"sub": "agent-a", "aud": url, "scope": "mcp"}),
            "RS256",
            "stranger",
        )
        .await;
    assert_eq!(attempt(&url, Some(&forged)).await.0, 401);
    let narrow = idp.token("agent-noscope", &url, "other").await;
    assert_eq!(attempt(&url, Some(&narrow)).await.0, 403);
    let good = idp.token("agent-a", &url, "mcp").await;
    let agent = remote.client_with_token(&good).await;
    let sb = agent.create().await;
    agent.run_ok(&sb, "1 + 1").await;
    let ci = remote.client("ci").await;
    ci.create().await;

    let (body, m) = scrape(&metrics_url(&remote)).await;
    let refusals = |reason| sample(&m, "mcp_code_sandbox_oauth_refusals_total", &[("reason", reason)]);
    assert_eq!(refusals("invalid_token"), Some(2.0), "{body}");
    assert_eq!(refusals("insufficient_scope"), Some(1.0), "{body}");
    let by = |principal| {
        sample(
            &m,
            "mcp_code_sandbox_calls_total",
            &[
                ("tool", "create_sandbox"),
                ("outcome", "ok"),
                ("principal", principal),
            ],
        )
    };
    assert_eq!(by("agent-a"), Some(1.0), "{body}");
    assert_eq!(by("ci"), Some(1.0), "{body}");
    assert!(!body.contains(&good), "a token never appears in the metrics");
    let _ = remote.terminate().await;
}
