//! Background runs: work longer than a client waits for one call. Started by execute_code with
//! `background`, followed with get_run (offsets, waiting), stopped with cancel_run, written to
//! the sandbox as it goes, and reported `interrupted` after the server died under it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Server, private_home};
#[cfg(unix)]
use crate::persistence::signal_and_wait;
use crate::persistence::start;

/// Starts `code` in the background; the run id.
async fn start_run(s: &Server, sandbox: &str, code: &str) -> String {
    let v = s
        .ok(
            "execute_code",
            json!({"sandbox_id": sandbox, "code": code, "background": true}),
        )
        .await;
    assert_eq!(v["state"], "running", "{v}");
    assert!(v["started_at"].as_str().is_some_and(|t| !t.is_empty()), "{v}");
    v["run_id"].as_str().expect("a run id").to_string()
}

/// Follows a run to its end with `wait_seconds`, as a model would: the whole stdout read
/// through the offsets, and the last answer.
async fn follow(s: &Server, run: &str) -> (String, Value, usize) {
    let (mut stdout, mut out_at, mut err_at, mut polls) = (String::new(), 0u64, 0u64, 0usize);
    loop {
        let v = s
            .ok(
                "get_run",
                json!({"run_id": run, "wait_seconds": 30, "stdout_offset": out_at, "stderr_offset": err_at}),
            )
            .await;
        polls += 1;
        stdout.push_str(v["new_stdout"].as_str().unwrap_or_default());
        let (next_out, next_err) = (
            v["stdout_offset"].as_u64().unwrap(),
            v["stderr_offset"].as_u64().unwrap(),
        );
        assert!(
            next_out >= out_at && next_err >= err_at,
            "offsets never go back: {v}"
        );
        (out_at, err_at) = (next_out, next_err);
        if v["state"] != "running" && v["more_output"] == false {
            return (stdout, v, polls);
        }
    }
}

#[tokio::test]
async fn a_three_minute_run_streams_every_line_once_and_ends_with_its_result_and_figure() {
    let s = Server::start().await;
    let id = s.create().await;
    s.run_ok(&id, "x = 6").await;
    let code = "import time, matplotlib.pyplot as plt\nfor i in range(180):\n    print(f'line {i}', flush=True)\n    time.sleep(1)\nplt.plot([1, 2, 3])\nx * 7";
    let run = start_run(&s, &id, code).await;

    // While it goes: the sandbox is busy for code, free for files.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (err, _, text) = s
        .call_json("execute_code", json!({"sandbox_id": id, "code": "1"}))
        .await;
    assert!(err, "{text}");
    assert!(
        text.contains(&run) && text.contains("get_run"),
        "names the run: {text}"
    );
    let (err, _, text) = s
        .call_json(
            "install_package",
            json!({"sandbox_id": id, "package_name": "tabulate"}),
        )
        .await;
    assert!(err && text.contains(&run), "{text}");
    s.ok("list_files", json!({"sandbox_id": id})).await;
    // Its output reaches the sandbox while it runs (within seconds; a loaded machine may
    // take longer to start the run, so this waits up to a minute rather than a fixed time).
    let mut log = Value::Null;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        log = s
            .ok(
                "read_file",
                json!({"sandbox_id": id, "file_path": format!(".outputs/runs/{run}/stdout.txt")}),
            )
            .await;
        if !log["content"].as_str().unwrap_or_default().is_empty() {
            break;
        }
    }
    assert!(
        log["content"]
            .as_str()
            .unwrap_or_default()
            .starts_with("line 0\n"),
        "{log}"
    );

    let (stdout, last, polls) = follow(&s, &run).await;
    let expected: String = (0..180).map(|i| format!("line {i}\n")).collect();
    assert_eq!(stdout, expected, "every line once, in order");
    assert!(polls >= 6, "followed in several waits of at most 30 s: {polls}");
    assert_eq!(last["state"], "finished", "{last}");
    assert_eq!(last["result"], "42", "the final expression: {last}");
    assert_eq!(last["images"], 1, "the figure: {last}");
    assert_eq!(last["sandbox_id"], id.as_str());
    assert!(last["elapsed_ms"].as_u64().unwrap() >= 180_000, "{last}");
    // And the sandbox is free again, its variables intact.
    assert_eq!(s.run_ok(&id, "x").await["result"], "6");
    s.stop().await;
}

#[tokio::test]
async fn cancel_run_stops_a_run_and_the_sandbox_keeps_its_variables() {
    let home = private_home();
    let s = start(&home, &[]).await;
    let id = s.create().await;
    s.run_ok(&id, "kept = 'yes'").await;
    let run = start_run(&s, &id, "print('spinning', flush=True)\nwhile True: pass").await;
    let v = s.ok("get_run", json!({"run_id": run, "wait_seconds": 10})).await;
    assert_eq!(v["new_stdout"], "spinning\n", "{v}");
    let v = s.ok("cancel_run", json!({"run_id": run})).await;
    assert_eq!(v["state"], "cancelled", "{v}");
    // The run's own answer is execute_code's for stopped code: an error, with its fields.
    let (err, v, text) = s.call_json("get_run", json!({"run_id": run})).await;
    assert!(err, "{text}");
    assert_eq!(v["state"], "cancelled", "{v}");
    assert_eq!(v["new_stdout"], "spinning\n", "printed once: {v}");
    assert!(text.contains("back as it was when the run began"), "{text}");
    let v = s.run_ok(&id, "kept").await;
    assert_eq!(v["result"], "'yes'", "the variables from before the run: {v}");
    assert_eq!(
        v["state_lost"], true,
        "and the run's own are said to be gone: {v}"
    );
    let notes = v["notes"].to_string();
    assert!(notes.contains("back as it was when the run began"), "{notes}");
    assert!(!notes.contains("fresh interpreter"), "{notes}");
    s.stop().await;
}

#[cfg(unix)]
#[tokio::test]
async fn a_run_the_server_died_under_is_interrupted_with_its_output_and_the_sandbox_says_why() {
    let home = private_home();
    let s = start(&home, &[]).await;
    let id = s.create().await;
    s.run_ok(&id, "before = 41").await;
    let run = start_run(
        &s,
        &id,
        "import time\nbefore = 99\nfor i in range(600):\n    print(f'step {i}', flush=True)\n    time.sleep(0.5)",
    )
    .await;
    let v = s
        .ok(
            "get_run",
            json!({"run_id": run, "wait_seconds": 10, "stdout_offset": 30}),
        )
        .await;
    assert!(v["stdout_offset"].as_u64().unwrap() > 30, "{v}");
    // Its files are written about once a second.
    tokio::time::sleep(Duration::from_secs(2)).await;
    signal_and_wait(s, libc::SIGKILL).await;

    let s = start(&home, &[]).await;
    let v = s.ok("get_run", json!({"run_id": run})).await;
    assert_eq!(v["state"], "interrupted", "{v}");
    assert!(
        v["new_stdout"]
            .as_str()
            .unwrap_or_default()
            .starts_with("step 0\nstep 1\n"),
        "the output so far: {v}"
    );
    let (err, v) = s.exec(&id, "before").await;
    assert!(!err, "{v}");
    assert_eq!(
        v["result"], "41",
        "the sandbox is back as it was when the run began: {v}"
    );
    assert_eq!(v["state_lost"], true, "{v}");
    let notes = v["notes"].to_string();
    assert!(notes.contains(&run), "the note names the run: {notes}");
    assert!(
        !notes.contains("fresh interpreter"),
        "the variables came back: {notes}"
    );
    let (err, _, text) = s
        .call_json("get_run", json!({"run_id": "run-sbx-nothing-0123abcd"}))
        .await;
    assert!(err && text.contains("no such run"), "{text}");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

/// A graceful stop (SIGTERM, as a client quitting sends) keeps the README's promise as a
/// crash does: the sandbox comes back as it was when the run began (issue 35, finding 9).
#[cfg(unix)]
#[tokio::test]
async fn a_run_stopped_by_a_graceful_shutdown_brings_its_sandbox_back_as_it_was_when_it_began() {
    let home = private_home();
    let s = start(&home, &[]).await;
    let id = s.create().await;
    s.run_ok(&id, "before = 41").await;
    let run = start_run(&s, &id, "import time\nbefore = 99\ntime.sleep(120)").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    signal_and_wait(s, libc::SIGTERM).await;

    let s = start(&home, &[]).await;
    let v = s.ok("get_run", json!({"run_id": run})).await;
    assert_eq!(v["state"], "interrupted", "{v}");
    let (err, v) = s.exec(&id, "before").await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], "41", "back as it was when the run began: {v}");
    assert_eq!(v["state_lost"], true, "{v}");
    let notes = v["notes"].to_string();
    assert!(notes.contains(&run), "the note names the run: {notes}");
    assert!(!notes.contains("fresh interpreter"), "{notes}");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

#[tokio::test]
async fn a_background_run_asks_for_a_time_limit_within_the_servers() {
    let s = Server::start_with(&[("CODE_SANDBOX_BACKGROUND_TIMEOUT", "2")]).await;
    let id = s.create().await;
    let (err, _, text) = s
        .call_json(
            "execute_code",
            json!({"sandbox_id": id, "code": "1", "background": true, "timeout_seconds": 5}),
        )
        .await;
    assert!(err && text.contains("CODE_SANDBOX_BACKGROUND_TIMEOUT"), "{text}");
    let run = start_run(&s, &id, "while True: pass").await;
    let (_, v, _) = s
        .call_json("get_run", json!({"run_id": run, "wait_seconds": 20}))
        .await;
    assert_eq!(v["state"], "timed_out", "{v}");
    assert_eq!(v["limit"], "timeout", "{v}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_belongs_to_the_principal_that_started_it() {
    let r = crate::remote_harness::Remote::start(&["ana", "ben"], &[]).await;
    let (ana, ben) = (r.client("ana").await, r.client("ben").await);
    let id = ana.create().await;
    let run = start_run(
        &ana,
        &id,
        "import time\nprint('mine', flush=True)\ntime.sleep(30)",
    )
    .await;
    for tool in ["get_run", "cancel_run"] {
        let (err, _, text) = ben.call_json(tool, json!({"run_id": run})).await;
        assert!(
            err && text.contains("no such run"),
            "{tool} by another principal: {text}"
        );
    }
    let v = ana
        .ok("get_run", json!({"run_id": run, "wait_seconds": 10}))
        .await;
    assert_eq!(v["state"], "running", "ben's attempts left it alone: {v}");
    assert_eq!(v["new_stdout"], "mine\n");
    ana.ok("cancel_run", json!({"run_id": run})).await;
}

/// A client that declares MCP tasks (SEP-2663), as rmcp's client does when asked.
#[derive(Clone, Default)]
struct TasksClient;

impl rmcp::ClientHandler for TasksClient {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::builder().enable_tasks().build(),
            rmcp::model::Implementation::new("tasks-test", "1.0.0"),
        )
    }
}

#[tokio::test]
async fn a_client_that_speaks_tasks_gets_long_code_as_a_task_and_short_code_at_once() {
    use rmcp::ServiceExt;
    use rmcp::model::{CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, TaskStatus};

    crate::common::ensure_runtime();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"));
    cmd.env("CODE_SANDBOX_HOME", crate::common::runtime_home())
        .env("CODE_SANDBOX_PERSIST", "false")
        .env("RUST_LOG", "warn");
    let client = TasksClient
        .serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    assert!(
        client
            .peer_info()
            .is_some_and(|i| i.capabilities.supports_tasks()),
        "the server declares the tasks extension"
    );
    // A sandbox made first, so the short call below times only its code.
    let made = client
        .call_tool(CallToolRequestParams::new("create_sandbox").with_arguments(Default::default()))
        .await
        .unwrap();
    let id = made.structured_content.unwrap()["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
    let call = |code: &str| {
        let serde_json::Value::Object(args) = json!({"code": code, "sandbox_id": id}) else {
            unreachable!()
        };
        CallToolRequestParams::new("execute_code").with_arguments(args)
    };
    // Short code answers as usual.
    let CallToolResponse::Complete(r) = client.call_tool_once(call("6 * 7")).await.unwrap() else {
        panic!("short code answers at once")
    };
    assert_eq!(r.structured_content.unwrap()["result"], "42");

    // Longer code becomes a task, followed with tasks/get to its result.
    let code = "import time\nfor i in range(6):\n    print(i, flush=True)\n    time.sleep(1)\n'done'";
    let CallToolResponse::Task(created) = client.call_tool_once(call(code)).await.unwrap() else {
        panic!("long code answers with a task")
    };
    assert_eq!(created.task.status, TaskStatus::Working);
    let id = created.task.task_id.clone();
    let result = loop {
        let got = client.get_task(GetTaskParams::new(id.clone())).await.unwrap();
        match got.task.payload {
            rmcp::model::TaskPayload::Working => tokio::time::sleep(Duration::from_millis(500)).await,
            rmcp::model::TaskPayload::Completed { result } => break result,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(result["structuredContent"]["result"], "'done'", "{result:?}");
    assert_eq!(result["structuredContent"]["stdout"], "0\n1\n2\n3\n4\n5\n");

    // tasks/cancel stops one.
    let CallToolResponse::Task(created) = client.call_tool_once(call("while True: pass")).await.unwrap()
    else {
        panic!("a busy loop answers with a task")
    };
    let id = created.task.task_id.clone();
    client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    let status = loop {
        let got = client.get_task(GetTaskParams::new(id.clone())).await.unwrap();
        if got.task.task.status != TaskStatus::Working {
            break got.task.task.status;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(status, TaskStatus::Cancelled);
    // The same run, through the polling tools.
    let r = client
        .call_tool(
            CallToolRequestParams::new("get_run")
                .with_arguments(json!({"run_id": id}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(r.structured_content.unwrap()["state"], "cancelled");
    let _ = client.cancel().await;
}

#[tokio::test]
async fn closing_the_sandbox_under_a_run_cancels_it() {
    let s = Server::start().await;
    let id = s.create().await;
    let run = start_run(&s, &id, "print('busy', flush=True)\nwhile True: pass").await;
    s.ok("get_run", json!({"run_id": run, "wait_seconds": 10})).await;
    s.ok("close_sandbox", json!({"sandbox_id": id})).await;
    let state = loop {
        let (_, v, _) = s
            .call_json("get_run", json!({"run_id": run, "wait_seconds": 10}))
            .await;
        if v["state"] != "running" {
            break v["state"].clone();
        }
    };
    assert_eq!(state, "cancelled");
    s.stop().await;
}
