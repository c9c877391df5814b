//! Long calls report progress; a client's cancellation stops the guest.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientRequest, ProgressNotificationParam, Request, ServerResult};
use rmcp::service::{NotificationContext, PeerRequestOptions};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::json;

#[derive(Clone, Default)]
pub struct Recorder {
    pub seen: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(&self, params: ProgressNotificationParam, _cx: NotificationContext<RoleClient>) {
        self.seen.lock().unwrap().push(params);
    }
}

async fn start(recorder: Recorder) -> rmcp::service::RunningService<RoleClient, Recorder> {
    common::ensure_runtime();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"));
    cmd.env("CODE_SANDBOX_HOME", common::runtime_home())
        .env("CODE_SANDBOX_PERSIST", "false")
        .env("RUST_LOG", "warn");
    recorder
        .serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

pub fn exec_request(code: &str) -> ClientRequest {
    let serde_json::Value::Object(args) = json!({"code": code}) else {
        unreachable!()
    };
    ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new("execute_code").with_arguments(args),
    ))
}

#[tokio::test]
async fn a_three_second_run_reports_progress_with_its_output() {
    let rec = Recorder::default();
    let client = start(rec.clone()).await;
    let code =
        "import time\nfor i in range(3):\n    print(f'step {i}', flush=True)\n    time.sleep(1)\n'done'";
    let handle = client
        .send_cancellable_request(exec_request(code), PeerRequestOptions::no_options())
        .await
        .unwrap();
    let token = handle.progress_token.clone();
    let resp = tokio::time::timeout(Duration::from_secs(60), handle.await_response())
        .await
        .unwrap()
        .unwrap();
    let ServerResult::CallToolResult(r) = resp else {
        panic!("unexpected {resp:?}")
    };
    assert_eq!(r.structured_content.unwrap()["result"], "'done'");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let seen = rec.seen.lock().unwrap().clone();
    assert!(
        seen.len() >= 2,
        "at least two progress notifications for a 3 s run: {seen:?}"
    );
    assert!(seen.iter().all(|p| p.progress_token == token));
    assert!(
        seen.windows(2).all(|w| w[1].progress > w[0].progress),
        "progress increases"
    );
    assert!(
        seen.iter()
            .any(|p| p.message.as_deref().unwrap_or("").contains("step")),
        "the messages carry the output so far: {seen:?}"
    );
    let _ = client.cancel().await;
}

#[tokio::test]
async fn cancelling_a_call_stops_the_guest() {
    let client = start(Recorder::default()).await;
    let create = client
        .call_tool(CallToolRequestParams::new("create_sandbox").with_arguments(Default::default()))
        .await
        .unwrap();
    let id = create.structured_content.unwrap()["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
    let serde_json::Value::Object(args) =
        json!({"sandbox_id": id, "code": "while True: pass", "timeout_seconds": 120})
    else {
        unreachable!()
    };
    let req = ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new("execute_code").with_arguments(args),
    ));
    let handle = client
        .send_cancellable_request(req, PeerRequestOptions::no_options())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    handle.cancel(None).await.unwrap();
    // The sandbox is usable again long before the 120 s limit: the busy loop was stopped.
    let serde_json::Value::Object(args) = json!({"sandbox_id": id, "code": "1+1"}) else {
        unreachable!()
    };
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        client.call_tool(CallToolRequestParams::new("execute_code").with_arguments(args)),
    )
    .await
    .expect("the sandbox is free again")
    .unwrap();
    let v = r.structured_content.unwrap();
    assert_eq!(v["result"], "2");
    assert_eq!(v["state_lost"], true, "the cancelled interpreter was reset");
    let _ = client.cancel().await;
}
