//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! tests/conformance) against the real server in remote mode, on both protocol revisions'
//! frozen requirement sets: 2025-11-25 (initialize, sessions) and 2026-07-28 (stateless,
//! `server/discover`). What the server cannot pass without the suite's fixtures (tools such
//! as `test_simple_text`, prompts, `test://` resources) is listed, check by check where a
//! scenario has others, in expected-failures-<revision>.yml: any other failure, and any
//! listed one that starts passing, fails the test. Node 20 lacks `fs.globSync`, which the
//! suite imports: tests/conformance/node20-globsync.mjs supplies it from the pinned `glob`.
//!
//! Also here, through rmcp's client: completion of the `sandbox://` template (the caller's own
//! ids, paths inside the named sandbox) and log notifications at the level a session asked for.

use std::time::Duration;

use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, CompletionContext, Reference, ResourceTemplateReference,
};
use serde_json::json;

use crate::common;
use crate::remote_harness::Remote;

fn suite(remote: &Remote, revision: &str) -> (bool, String) {
    let dir = common::ensure_npm("tests/conformance");
    let out = std::process::Command::new("node")
        .args([
            "--import",
            "./node20-globsync.mjs",
            "node_modules/@modelcontextprotocol/conformance/dist/index.js",
            "server",
            "--url",
            &remote.url,
            "--requirements",
            revision,
            "--expected-failures",
            &format!("expected-failures-{revision}.yml"),
        ])
        .current_dir(&dir)
        .output()
        .expect("node runs the conformance suite");
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_official_conformance_suite_passes_on_both_revisions() {
    common::ensure_runtime();
    let remote = Remote::start(&[], &[]).await;
    for revision in ["2025-11-25", "2026-07-28"] {
        let (ok, text) = tokio::task::block_in_place(|| suite(&remote, revision));
        let summary = text.split("=== SUMMARY ===").nth(1).unwrap_or(&text);
        eprintln!("conformance {revision}:{summary}");
        assert!(ok, "the conformance suite failed on {revision} (summary above)");
        assert!(summary.contains("passed"), "no scenario ran on {revision}");
    }
}

fn complete(uri: &str, name: &str, value: &str, sandbox: Option<&str>) -> CompleteRequestParams {
    let mut p = CompleteRequestParams::new(
        Reference::Resource(ResourceTemplateReference::new(uri)),
        ArgumentInfo::new(name, value),
    );
    if let Some(id) = sandbox {
        p.context = Some(CompletionContext::with_arguments(
            [("sandbox_id".to_string(), id.to_string())].into_iter().collect(),
        ));
    }
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn completion_offers_only_the_callers_sandboxes_and_their_paths() {
    common::ensure_runtime();
    let remote = Remote::start(&["alice", "bob"], &[]).await;
    let alice = remote.client("alice").await;
    let bob = remote.client("bob").await;
    let a = alice.create().await;
    alice
        .run_ok(&a, "import os\nos.makedirs('data/raw')\nopen('data/raw/x.csv','w').write('1')\nopen('data/notes.txt','w').write('n')\nopen('dash.py','w').write('')")
        .await;
    let b = bob.create().await;
    let template = "sandbox://{sandbox_id}/{+path}";
    let ids = alice
        .client
        .complete(complete(template, "sandbox_id", "sbx-", None))
        .await
        .expect("complete")
        .completion
        .values;
    assert!(ids.contains(&a), "{ids:?}");
    assert!(!ids.contains(&b), "alice was offered bob's sandbox: {ids:?}");
    let paths = |typed: &'static str, s: String| {
        let c = &alice.client;
        async move {
            c.complete(complete(template, "path", typed, Some(&s)))
                .await
                .expect("complete")
                .completion
                .values
        }
    };
    assert_eq!(paths("d", a.clone()).await, ["dash.py", "data/"]);
    assert_eq!(paths("data/", a.clone()).await, ["data/notes.txt", "data/raw/"]);
    assert_eq!(paths("data/raw/x", a.clone()).await, ["data/raw/x.csv"]);
    assert!(paths("", b.clone()).await.is_empty(), "alice listed bob's files");
    let other = alice
        .client
        .complete(complete("file:///{path}", "path", "", None))
        .await
        .expect("complete");
    assert!(other.completion.values.is_empty());
}

/// Log notifications, as a client receives them.
#[derive(Clone, Default)]
struct Logs(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl rmcp::ClientHandler for Logs {
    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{:?} {}", params.level, params.data));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(deprecated)]
async fn log_notifications_come_only_at_the_level_a_session_asked_for() {
    use rmcp::ServiceExt as _;
    common::ensure_runtime();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"));
    cmd.env("CODE_SANDBOX_HOME", common::runtime_home())
        .env("CODE_SANDBOX_PERSIST", "false")
        .env("RUST_LOG", "warn")
        .env_remove("INTERPRETER_TYPE");
    let logs = Logs::default();
    let client = logs
        .clone()
        .serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap())
        .await
        .expect("initialize");
    let call = |code: &'static str| {
        let client = &client;
        async move {
            let args = json!({"code": code});
            let serde_json::Value::Object(args) = args else {
                unreachable!()
            };
            client
                .call_tool(rmcp::model::CallToolRequestParams::new("execute_code").with_arguments(args))
                .await
                .expect("execute_code")
        }
    };
    call("1").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        logs.0.lock().unwrap().is_empty(),
        "logs before any level was asked for"
    );
    client
        .set_level(rmcp::model::SetLevelRequestParams::new(
            rmcp::model::LoggingLevel::Warning,
        ))
        .await
        .expect("logging/setLevel");
    call("import sys\nsys.modules.clear()").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while logs.0.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = logs.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].starts_with("Warning") && seen[0].contains("interpreter was reset"),
        "{seen:?}"
    );
    let _ = client.cancel().await;
}
