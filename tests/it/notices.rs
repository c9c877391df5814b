//! What a client hears without asking, through rmcp's client. On 2025-11-25 over stdio, once a
//! session set a level: log lines of its sandboxes created, suspended when idle, restored, and
//! of the packages fetched from an index for it; resource list changes as sandboxes come and
//! go. On 2026-07-28 over stdio and HTTP: log lines only for a call whose `_meta` asks, and
//! listen streams (code mode's tool list changes, sandboxes coming and going), completion,
//! each principal hearing only of its own sandboxes. (The same through the
//! TypeScript SDK v2, with code mode's tool list changes: tests/ts/rev2026.test.mjs.)
// rmcp marks logging deprecated (SEP-2577); 2025-11-25 clients use it, which is what this tests.
#![allow(deprecated)]

use crate::common;
use crate::index::{pinned_wheels, pypiserver};

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, LoggingLevel, SetLevelRequestParams};
use serde_json::{Value, json};

/// Log lines and list changes, as the client receives them.
#[derive(Clone, Default)]
pub(crate) struct Heard {
    logs: Arc<Mutex<Vec<String>>>,
    resource_changes: Arc<Mutex<usize>>,
}

impl rmcp::ClientHandler for Heard {
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let text = params.data.as_str().unwrap_or_default().to_string();
        self.logs
            .lock()
            .unwrap()
            .push(format!("{:?} {text}", params.level));
    }

    async fn on_resource_list_changed(&self, _context: rmcp::service::NotificationContext<rmcp::RoleClient>) {
        *self.resource_changes.lock().unwrap() += 1;
    }
}

impl Heard {
    pub(crate) fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// Waits for the line that says `sb` was created.
    async fn created(&self, sb: &str) {
        self.until("the sandbox created", |l| {
            l.contains(&format!("Info sandbox {sb} was created"))
        })
        .await;
    }

    pub(crate) async fn until(&self, what: &str, found: impl Fn(&[String]) -> bool) {
        let seen = || format!("no log line for {what}: {:?}", self.logs());
        eventually(Duration::from_secs(20), || found(&self.logs()), seen).await;
    }

    /// Waits for a resource list change.
    async fn a_resource_change(&self, what: &str) {
        let heard = || *self.resource_changes.lock().unwrap() > 0;
        eventually(Duration::from_secs(10), heard, || what.to_string()).await;
    }
}

/// Waits until `ok`, failing with `why()` after `within`.
async fn eventually(within: Duration, ok: impl Fn() -> bool, why: impl Fn() -> String) {
    let deadline = Instant::now() + within;
    while !ok() {
        assert!(Instant::now() < deadline, "{}", why());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The server over stdio, sharing the installed runtime unless `home` is given.
pub(crate) fn stdio_server(
    home: Option<&std::path::Path>,
    envs: &[(&str, &str)],
) -> rmcp::transport::TokioChildProcess {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"));
    cmd.env(
        "CODE_SANDBOX_HOME",
        home.map_or_else(common::runtime_home, |h| h.to_path_buf()),
    )
    .env("CODE_SANDBOX_PERSIST", "false")
    .env("RUST_LOG", "warn")
    .env_remove("INTERPRETER_TYPE");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    rmcp::transport::TokioChildProcess::new(cmd).expect("spawn the server")
}

/// The id in a result's structured content.
fn id_of(v: Value) -> String {
    v["sandbox_id"].as_str().expect("a sandbox id").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn log_notifications_come_only_at_the_level_a_session_asked_for() {
    common::ensure_runtime();
    let heard = Heard::default();
    let client = heard
        .clone()
        .serve(stdio_server(None, &[]))
        .await
        .expect("initialize");
    call_at(&client, "execute_code", json!({"code": "1"}), None).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        heard.logs().is_empty(),
        "logs before any level was asked for: {:?}",
        heard.logs()
    );
    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Warning))
        .await
        .expect("logging/setLevel");
    call_at(
        &client,
        "execute_code",
        json!({"code": "import sys\nsys.modules.clear()"}),
        None,
    )
    .await;
    heard.until("the reset", |l| !l.is_empty()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = heard.logs();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].starts_with("Warning") && seen[0].contains("interpreter was reset"),
        "{seen:?}"
    );
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_hears_its_sandboxes_suspended_restored_and_packages_fetched() {
    let wheels = pinned_wheels();
    let index = pypiserver(&wheels);
    let home = common::private_home();
    let index_url = format!("http://127.0.0.1:{}/simple/", index.port);
    let envs = [
        ("CODE_SANDBOX_PERSIST", "true"),
        ("CODE_SANDBOX_IDLE_SECONDS", "1"),
        ("CODE_SANDBOX_INDEX_URL", index_url.as_str()),
    ];
    let heard = Heard::default();
    let client = heard
        .clone()
        .serve(stdio_server(Some(&home), &envs))
        .await
        .expect("initialize");
    let call = |tool: &'static str, args: Value| call_at(&client, tool, args, None);

    // Nothing is said before the session asks; a list change is not a log line.
    let quiet = id_of(call("create_sandbox", json!({})).await);
    heard
        .a_resource_change("no resource list change for a new sandbox")
        .await;
    assert!(heard.logs().is_empty(), "{:?}", heard.logs());
    call("close_sandbox", json!({"sandbox_id": quiet})).await;

    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Info))
        .await
        .expect("logging/setLevel");
    let sb = id_of(call("execute_code", json!({"code": "x = 41"})).await);
    heard.created(&sb).await;
    heard
        .until("the sandbox suspended when idle", |l| {
            l.iter().any(|s| {
                s.starts_with(&format!("Info sandbox {sb} was suspended (unused for over 1 s"))
                    && s.contains("its next use restores it")
            })
        })
        .await;
    let v = call("execute_code", json!({"sandbox_id": sb, "code": "x + 1"})).await;
    assert_eq!(v["result"], "42", "{v}");
    heard
        .until("the sandbox restored", |l| {
            l.contains(&format!("Info sandbox {sb} was restored from its saved state"))
        })
        .await;

    // An install that fetches from the index says which files it fetched.
    call(
        "install_package",
        json!({"sandbox_id": sb, "package_name": "requests"}),
    )
    .await;
    heard
        .until("the wheels fetched", |l| {
            l.iter().any(|s| {
                s.starts_with("Info fetched requests-2.34.2-") && s.ends_with(" from the package index")
            })
        })
        .await;

    // At warning, info lines stop: a new sandbox is not said.
    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Warning))
        .await
        .expect("logging/setLevel");
    let before = heard.logs().len();
    let other = id_of(call("create_sandbox", json!({})).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = heard.logs();
    assert!(
        !after[before..].iter().any(|s| s.contains(&other)),
        "{:?}",
        &after[before..]
    );
    // No line carries code or file contents.
    assert!(!after.iter().any(|s| s.contains("x = 41")), "{after:?}");
    let _ = client.cancel().await;
    let _ = std::fs::remove_dir_all(&home);
}

/// A client on 2026-07-28 (`server/discover`, per-request `_meta`) through rmcp.
async fn discover_client<T, E, A>(
    transport: T,
) -> (rmcp::service::RunningService<rmcp::RoleClient, Heard>, Heard)
where
    T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _};
    let heard = Heard::default();
    let mode = ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    let client = tokio::time::timeout(
        Duration::from_secs(60),
        heard.clone().serve_with_lifecycle(transport, mode),
    )
    .await
    .expect("discover in time")
    .expect("discover");
    let version = client.peer_info().map(|i| i.protocol_version.clone());
    assert_eq!(version, Some(rmcp::model::ProtocolVersion::V_2026_07_28));
    (client, heard)
}

/// `tool` with `args`, its `_meta` asking for log lines at `level` (if any); the structured result.
pub(crate) async fn call_at(
    client: &rmcp::service::RunningService<rmcp::RoleClient, Heard>,
    tool: &'static str,
    args: Value,
    level: Option<LoggingLevel>,
) -> Value {
    let Value::Object(args) = args else { unreachable!() };
    let mut params = CallToolRequestParams::new(tool).with_arguments(args);
    if let Some(level) = level {
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.set_log_level(level);
        params.meta = Some(meta);
    }
    let r = client.call_tool(params).await.expect("the call answers");
    assert_ne!(r.is_error, Some(true), "{r:?}");
    r.structured_content.expect("structured content")
}

/// The next notification of a listen stream within a few seconds, if any.
async fn next_note(
    sub: &mut rmcp::service::Subscription,
    wait: Duration,
) -> Option<rmcp::model::ServerNotification> {
    tokio::time::timeout(wait, sub.next()).await.ok()?.ok()?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_principal_hears_only_of_its_own_on_both_revisions_and_transports() {
    use rmcp::model::{ServerNotification, SubscriptionFilter};
    common::ensure_runtime();
    // Over stdio, with a code-mode server whose tool `learn` adds a tool.
    let dir = common::private_home();
    let servers = dir.join("servers.json");
    let script = common::repo_root().join("tests/mcp-servers/misbehaving.py");
    let file =
        json!({"mcpServers": {"srv": {"command": xtask::pyvenv::PYTHON, "args": [script, "changing"]}}});
    std::fs::write(&servers, file.to_string()).unwrap();
    let servers = servers.display().to_string();
    let (client, heard) = discover_client(stdio_server(
        None,
        &[("CODE_SANDBOX_MCP_SERVERS", servers.as_str())],
    ))
    .await;
    let mut tools_sub = client
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("subscriptions/listen");
    // The server may still be starting: wait until code can call it, then learn a tool.
    let learned = call_at(
        &client,
        "execute_code",
        json!({"code": "import mcp_tools, time\nfor _ in range(100):\n    if 'srv' in mcp_tools.servers(): break\n    time.sleep(0.1)\nmcp_tools.srv.learn()"}),
        None,
    )
    .await;
    assert!(learned.to_string().contains("learned"), "{learned}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match next_note(&mut tools_sub, Duration::from_secs(10)).await {
            Some(ServerNotification::ToolListChangedNotification(_)) => {}
            other => panic!("no tool list change on the listen stream: {other:?}"),
        }
        let listed = client.list_all_tools().await.expect("tools/list");
        let said = listed
            .iter()
            .find(|t| t.name == "execute_code")
            .and_then(|t| t.description.clone())
            .unwrap_or_default();
        if said.contains("srv (3 tools)") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the listing never showed the new tool: {said}"
        );
    }
    let mut sub = client
        .listen(SubscriptionFilter::builder().resources_list_changed().build())
        .await
        .expect("subscriptions/listen");
    assert_eq!(sub.acknowledged().resources_list_changed, Some(true));
    let quiet = id_of(call_at(&client, "create_sandbox", json!({}), None).await);
    assert!(heard.logs().is_empty(), "{:?}", heard.logs());
    assert!(matches!(
        next_note(&mut sub, Duration::from_secs(10)).await,
        Some(ServerNotification::ResourceListChangedNotification(_))
    ));
    let sb = id_of(call_at(&client, "create_sandbox", json!({}), Some(LoggingLevel::Info)).await);
    heard.created(&sb).await;
    assert!(
        !heard.logs().iter().any(|l| l.contains(&quiet)),
        "{:?}",
        heard.logs()
    );
    let v = call_at(
        &client,
        "execute_code",
        json!({"sandbox_id": sb, "code": "6 * 7"}),
        None,
    )
    .await;
    assert_eq!(v["result"], "42");
    let _ = client.cancel().await;
    let _ = std::fs::remove_dir_all(&dir);

    // Over HTTP with two principals: bob hears nothing of alice's sandboxes.
    let remote = crate::remote_harness::Remote::start(&["alice", "bob"], &[]).await;
    let over_http = |name: &str| {
        let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            remote.url.clone(),
        )
        .auth_header(remote.token(name));
        rmcp::transport::StreamableHttpClientTransport::with_client(crate::remote_harness::http(), config)
    };
    let (alice, alice_heard) = discover_client(over_http("alice")).await;
    let (bob, bob_heard) = discover_client(over_http("bob")).await;
    let filter = SubscriptionFilter::builder().resources_list_changed().build();
    let mut alice_sub = alice.listen(filter.clone()).await.expect("alice listens");
    let mut bob_sub = bob.listen(filter).await.expect("bob listens");
    let a = id_of(call_at(&alice, "create_sandbox", json!({}), Some(LoggingLevel::Debug)).await);
    assert!(next_note(&mut alice_sub, Duration::from_secs(10)).await.is_some());
    alice_heard.created(&a).await;
    let ids = |who: &'static str| {
        let client = if who == "alice" { &alice } else { &bob };
        async move {
            let asked =
                crate::conformance::complete("sandbox://{sandbox_id}/{+path}", "sandbox_id", "", None);
            client
                .complete(asked)
                .await
                .expect("completion/complete")
                .completion
                .values
        }
    };
    assert_eq!(ids("alice").await, vec![a.clone()]);
    assert!(ids("bob").await.is_empty());
    assert!(
        next_note(&mut bob_sub, Duration::from_secs(1)).await.is_none(),
        "bob heard of alice's sandbox"
    );
    call_at(
        &bob,
        "execute_code",
        json!({"code": "1"}),
        Some(LoggingLevel::Debug),
    )
    .await;
    assert!(
        !bob_heard.logs().iter().any(|l| l.contains(&a)),
        "{:?}",
        bob_heard.logs()
    );
    assert!(next_note(&mut bob_sub, Duration::from_secs(10)).await.is_some());
    let _ = alice.cancel().await;
    let _ = bob.cancel().await;

    // 2025-11-25 sessions over HTTP, each with a level set: the same separation.
    let session = |name: &str| {
        let heard = Heard::default();
        let transport = over_http(name);
        async move {
            let client = heard.clone().serve(transport).await.expect("initialize");
            client
                .set_level(SetLevelRequestParams::new(LoggingLevel::Info))
                .await
                .expect("logging/setLevel");
            (client, heard)
        }
    };
    let (alice, alice_heard) = session("alice").await;
    let (bob, bob_heard) = session("bob").await;
    let a = id_of(call_at(&alice, "create_sandbox", json!({}), None).await);
    alice_heard.created(&a).await;
    alice_heard
        .a_resource_change("alice's session heard no resource list change")
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(bob_heard.logs().is_empty(), "{:?}", bob_heard.logs());
    assert_eq!(*bob_heard.resource_changes.lock().unwrap(), 0);
    let _ = alice.cancel().await;
    let _ = bob.cancel().await;
}
