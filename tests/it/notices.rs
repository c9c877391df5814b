//! What a 2025-11-25 session hears without asking, through rmcp's client over stdio: once it
//! set a level, log lines of its sandboxes created, suspended when idle, restored, and of the
//! packages fetched from an index for it; resource list changes as sandboxes come and go.
//! (Revision 2026-07-28's per-call levels and listen streams: tests/ts/rev2026.test.mjs.)
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
struct Heard {
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
    fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    async fn until(&self, what: &str, found: impl Fn(&[String]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !found(&self.logs()) {
            assert!(
                Instant::now() < deadline,
                "no log line for {what}: {:?}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_hears_its_sandboxes_suspended_restored_and_packages_fetched() {
    let wheels = pinned_wheels();
    let index = pypiserver(&wheels);
    let home = common::private_home();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"));
    cmd.env("CODE_SANDBOX_HOME", &home)
        .env("CODE_SANDBOX_PERSIST", "true")
        .env("CODE_SANDBOX_IDLE_SECONDS", "1")
        .env(
            "CODE_SANDBOX_INDEX_URL",
            format!("http://127.0.0.1:{}/simple/", index.port),
        )
        .env("RUST_LOG", "warn")
        .env_remove("INTERPRETER_TYPE");
    let heard = Heard::default();
    let client = heard
        .clone()
        .serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap())
        .await
        .expect("initialize");
    let call = |tool: &'static str, args: Value| {
        let client = &client;
        async move {
            let Value::Object(args) = args else { unreachable!() };
            let r = client
                .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
                .await
                .expect("the call answers");
            assert_ne!(r.is_error, Some(true), "{r:?}");
            r.structured_content.expect("structured content")
        }
    };

    // Nothing is said before the session asks; a list change is not a log line.
    let quiet = call("create_sandbox", json!({})).await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while *heard.resource_changes.lock().unwrap() == 0 {
        assert!(
            Instant::now() < deadline,
            "no resource list change for a new sandbox"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(heard.logs().is_empty(), "{:?}", heard.logs());
    call("close_sandbox", json!({"sandbox_id": quiet})).await;

    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Info))
        .await
        .expect("logging/setLevel");
    let sb = call("execute_code", json!({"code": "x = 41"})).await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
    heard
        .until("the sandbox created", |l| {
            l.contains(&format!("Info sandbox {sb} was created"))
        })
        .await;
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
    let other = call("create_sandbox", json!({})).await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
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
