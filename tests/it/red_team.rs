//! What a red team broke or degraded in runs, sandboxes, shared homes, code mode, logs, history
//! and views (issue 49), each reproduced against the real binary. The OAuth and connection
//! findings are in red_team_auth.rs.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{self, Server, error_of, run};
use crate::remote_harness::Remote;

const SLEEPER: &str = "import time\ntime.sleep(120)";

fn run_id(v: &Value) -> String {
    v["run_id"].as_str().expect("a run id").to_string()
}

/// Findings 1 and 7: bob knows alice's sandbox id. Every tool that names it answers him as it
/// answers an id that never existed, before anything is queued, and never says it is busy
/// or with which run; her own calls go on, and her runs stay hers.
#[tokio::test(flavor = "multi_thread")]
async fn another_principals_sandbox_is_unknown_to_every_tool_even_while_busy() {
    let r = Remote::start(
        &["alice", "bob sandboxes=10"],
        &[("CODE_SANDBOX_MAX_BACKGROUND_RUNS", "1")],
    )
    .await;
    let (alice, bob) = (r.client("alice").await, r.client("bob").await);
    let hers = alice.create().await;
    alice.run_ok(&hers, "x = 41").await;
    // Bob fills the background budget with a run of his own.
    let his = bob.create().await;
    let his_run = run_id(
        &bob.ok(
            "execute_code",
            json!({"sandbox_id": his, "code": SLEEPER, "background": true}),
        )
        .await,
    );
    let unknown = "sbx-0123abcd";
    let answer = |tool: &str, id: &str| -> Value {
        let mut args = match tool {
            "execute_code" => json!({"code": "1", "background": true}),
            "install_package" => json!({"package_name": "six"}),
            "restore_sandbox" => json!({"checkpoint": "c1"}),
            _ => json!({}),
        };
        if tool == "read_table" {
            args["handle"] = json!(format!("{id}:t1"));
        } else {
            args["sandbox_id"] = json!(id);
        }
        args
    };
    let tools = [
        "execute_code",
        "install_package",
        "fork_sandbox",
        "checkpoint_sandbox",
        "restore_sandbox",
        "export_notebook",
        "read_table",
    ];
    for tool in tools {
        let (err, _, text) = bob.call_json(tool, answer(tool, &hers)).await;
        let (_, _, never) = bob.call_json(tool, answer(tool, unknown)).await;
        assert!(err, "{tool} acted on alice's sandbox for bob: {text}");
        assert_eq!(
            text.replace(&hers, "ID"),
            never.replace(unknown, "ID"),
            "{tool}: bob can tell her sandbox from one that never existed"
        );
    }
    // Nothing of bob's was queued on her sandbox: her calls, fork, checkpoint and restore work.
    assert_eq!(alice.run_ok(&hers, "x + 1").await["result"], "42");
    alice
        .ok("checkpoint_sandbox", json!({"sandbox_id": hers, "name": "c1"}))
        .await;
    alice.ok("fork_sandbox", json!({"sandbox_id": hers})).await;
    alice
        .ok("restore_sandbox", json!({"sandbox_id": hers, "checkpoint": "c1"}))
        .await;

    // Busy with her own queued run, her sandbox still tells bob nothing.
    let her_run = run_id(
        &alice
            .ok(
                "execute_code",
                json!({"sandbox_id": hers, "code": "1", "background": true}),
            )
            .await,
    );
    for tool in tools {
        let (err, _, text) = bob.call_json(tool, answer(tool, &hers)).await;
        assert!(err, "{tool}: {text}");
        assert!(
            !text.contains("busy") && !text.contains(&her_run) && !text.contains("run-"),
            "{tool} told bob her sandbox is busy: {text}"
        );
    }
    // Her run is hers to cancel, and only hers.
    let (err, _, text) = bob.call_json("cancel_run", json!({"run_id": her_run})).await;
    assert!(err && text.contains("no such run"), "{text}");
    let v = alice.ok("cancel_run", json!({"run_id": her_run})).await;
    assert_eq!(v["state"], "cancelled", "{v}");
    bob.ok("cancel_run", json!({"run_id": his_run})).await;
    r.terminate().await;
}

/// Finding 3: a second remote-mode server on a home another one serves refuses to start,
/// saying which process holds it, and leaves the ownership records alone; a stdio server on
/// the home still does not show alice's kept sandbox to the machine's user.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_remote_server_refuses_a_home_another_serves() {
    let r = Remote::start(&["alice"], &[("CODE_SANDBOX_PERSIST", "true")]).await;
    let alice = r.client("alice").await;
    let hers = alice.create().await;
    alice.run_ok(&hers, "open('secret.txt', 'w').write('hers')").await;
    let owners = std::fs::read_to_string(r.home.join("owners.json")).expect("owners.json");
    assert!(owners.contains(&hers), "{owners}");

    let second = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
            .env("CODE_SANDBOX_HOME", &r.home)
            .env("CODE_SANDBOX_TRANSPORT", "http")
            .env("CODE_SANDBOX_LISTEN", "127.0.0.1:0")
            .env("CODE_SANDBOX_TOKENS", r.home.join("tokens"))
            .env_remove("INTERPRETER_TYPE")
            .output(),
    )
    .await
    .expect("the second server answers in time")
    .expect("run the second server");
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "a second server started: {said}");
    assert!(
        said.contains("another remote-mode server") && said.contains(&format!("pid {}", r.pid())),
        "{said}"
    );
    assert!(said.contains("CODE_SANDBOX_HOME"), "{said}");
    let after = std::fs::read_to_string(r.home.join("owners.json")).expect("owners.json");
    assert_eq!(after, owners, "the ownership records were rewritten");

    // The machine's own user, over stdio on the same home, is not shown her sandbox.
    let home = r.home.display().to_string();
    let local = Server::start_with(&[("CODE_SANDBOX_HOME", &home), ("CODE_SANDBOX_PERSIST", "true")]).await;
    let listed = local.ok("get_sandbox_status", json!({})).await;
    assert!(!listed.to_string().contains(&hers), "{listed}");
    let (err, _, text) = local
        .call_json(
            "read_file",
            json!({"sandbox_id": hers, "file_path": "secret.txt"}),
        )
        .await;
    assert!(err && !text.contains("hers"), "{text}");
    local.stop().await;
    r.terminate().await;
}

/// Finding 6: a servers-file URL holding a user, a password and an API key never reaches the
/// guest, the tool description, log notifications or the server's log, though the client
/// library's error quotes the URL inside parentheses.
// rmcp marks logging deprecated (SEP-2577); 2025-11-25 clients use it, which is what this tests.
#[allow(deprecated)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn code_mode_url_credentials_leave_the_server_nowhere() {
    use rmcp::ServiceExt as _;
    use rmcp::model::{LoggingLevel, SetLevelRequestParams};
    common::ensure_runtime();
    let dir = common::private_home();
    let file = dir.join("servers.json");
    let url = format!(
        "http://alice:hunter2@127.0.0.1:{}/mcp?api_key=s3cretkey",
        common::free_port()
    );
    std::fs::write(&file, json!({"mcpServers": {"leaky": {"url": url}}}).to_string()).unwrap();
    let heard = crate::notices::Heard::default();
    let log = dir.join("server.log");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"));
    cmd.env("CODE_SANDBOX_HOME", common::runtime_home())
        .env("CODE_SANDBOX_PERSIST", "false")
        .env("RUST_LOG", "info")
        .env("CODE_SANDBOX_MCP_SERVERS", &file)
        .env_remove("INTERPRETER_TYPE");
    let (cmd, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn the server");
    let client = heard.clone().serve(cmd).await.expect("initialize");
    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Info))
        .await
        .expect("logging/setLevel");
    let v = crate::notices::call_at(
        &client,
        "execute_code",
        json!({"code": "import mcp_tools\ntry:\n    mcp_tools.call('leaky', 'x')\nexcept Exception as e:\n    print(type(e).__name__, e)"}),
        None,
    )
    .await;
    let printed = v["stdout"].as_str().unwrap_or_default().to_string();
    assert!(printed.contains("Error"), "the guest was told why: {v}");
    heard
        .until("the server down", |l| l.iter().any(|x| x.contains("leaky")))
        .await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let described = serde_json::to_string(&tools).unwrap();
    assert!(described.contains("leaky"), "{described}");
    let logs = heard.logs().join("\n");
    for (place, text) in [
        ("guest", &printed),
        ("description", &described),
        ("notification", &logs),
    ] {
        for secret in ["hunter2", "s3cretkey", "alice:"] {
            assert!(!text.contains(secret), "{place} carries {secret}: {text}");
        }
    }
    let _ = client.cancel().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(logged.contains("leaky"), "{logged}");
    for secret in ["hunter2", "s3cretkey", "alice:"] {
        let lines: Vec<&str> = logged.lines().filter(|l| l.contains(secret)).collect();
        assert!(lines.is_empty(), "the server's log carries {secret}: {lines:?}");
    }
}

/// Finding 8: ids a client sends, and anything else a log line prints, cannot add a line,
/// a field or colour to the server's log.
#[tokio::test(flavor = "multi_thread")]
async fn log_lines_cannot_be_forged() {
    let r = Remote::start(&["alice"], &[]).await;
    let alice = r.client("alice").await;
    let forged = "sbx-1\n2026-12-05T00:00:00Z  INFO forged: principal=root\r\u{1b}[31m";
    let (err, _, _) = alice
        .call_json("get_sandbox_status", json!({"sandbox_id": forged}))
        .await;
    assert!(err);
    let sb = alice.create().await;
    alice
        .run_ok(
            &sb,
            "import sys; print('x\\n2026 INFO forged line\\x1b[0m', file=sys.stderr)",
        )
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = r.log_text();
    assert!(
        !log.lines()
            .any(|l| l.contains("INFO forged") && !l.contains("sandbox=")),
        "a forged line: {log}"
    );
    assert!(!log.contains('\u{1b}') && !log.contains('\r'), "{log}");
    let line = log
        .lines()
        .find(|l| l.contains("tool=get_sandbox_status"))
        .expect("the call's log line");
    assert!(line.contains("sandbox=\"sbx-1\\n"), "{line}");
    r.terminate().await;
}

/// Finding 9: a sandbox the server deletes (here: unused past the idle time, with nothing
/// kept) takes its history with it, and no cell holds a guest's 8 MB error.
#[tokio::test]
async fn history_goes_with_its_sandbox_and_its_cells_are_capped() {
    let home = common::private_home();
    let home_s = home.display().to_string();
    let s = Server::start_with(&[("CODE_SANDBOX_HOME", &home_s), ("CODE_SANDBOX_IDLE_SECONDS", "2")]).await;
    let sb = s.create().await;
    let forged = "import _host, json\n_host.call(json.dumps({'kind': 'error', 'name': 'E', 'value': 'v' * 8_000_000, 'traceback': 't' * 8_000_000}).encode())";
    s.exec(&sb, forged).await;
    let file = home.join("history").join(format!("{sb}.jsonl"));
    let size = std::fs::metadata(&file).expect("the cell was recorded").len();
    assert!(size < 1_000_000, "one cell holds {size} bytes");
    // Unused past the idle time, with persistence off, the sandbox is deleted: its history too.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while file.exists() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(!file.exists(), "the history outlived its sandbox");
    let (err, _, text) = s.call_json("get_sandbox_status", json!({"sandbox_id": sb})).await;
    assert!(err, "the sandbox is gone: {text}");
    s.stop().await;
}

/// Findings 10 to 13: a sort that never ends says what it cost; the host names a table's
/// sandbox; bytes that are not a PNG are not sent as one; a notebook's Python version comes
/// from the host, not from code that could hang or inject markup.
#[tokio::test]
async fn views_trust_nothing_the_guest_says_about_itself() {
    let s = Server::start().await;
    let other = s.create().await;
    s.run_ok(
        &other,
        "import pandas as pd\nsecret = pd.DataFrame({'pin': [1234]})\nsecret",
    )
    .await;
    let sb = s.create().await;
    // 11: a table message naming another sandbox.
    let v = run(
        &s,
        &sb,
        &format!(
            "import _host, json\n_host.call(json.dumps({{'kind': 'table', 'data': json.dumps({{'columns': ['pin'], 'dtypes': ['int64'], 'rows': [[0]], 'total_rows': 1, 'offset': 0, 'handle': '{other}:t1'}})}}).encode())"
        ),
    )
    .await;
    assert!(
        v["table"].is_null() || !v["table"]["handle"].to_string().contains(&other),
        "{v}"
    );
    // 12: bytes that are not a PNG.
    let v = run(
        &s,
        &sb,
        "import _host, json, base64\n_host.call(json.dumps({'kind': 'image', 'mime': 'image/png', 'data': base64.b64encode(b'<svg onload=alert(1)>').decode()}).encode())",
    )
    .await;
    assert_eq!(v["images"], 0, "{v}");
    assert!(v["notes"].to_string().contains("not a PNG"), "{v}");
    // 13: the notebook's version, with code that would hang if asked.
    run(
        &s,
        &sb,
        "import platform\nplatform.python_version = lambda: '<script>x</script>'\nimport time",
    )
    .await;
    let v = s.ok("export_notebook", json!({"sandbox_id": sb})).await;
    let nb = s
        .ok("read_file", json!({"sandbox_id": sb, "file_path": v["path"]}))
        .await;
    let doc: Value = serde_json::from_str(nb["content"].as_str().expect("text")).expect("JSON");
    let version = &doc["metadata"]["language_info"]["version"];
    let runtime = mcp_code_sandbox::runtime::manifest()
        .artifacts
        .python_version
        .as_str();
    assert_eq!(version, runtime, "the runtime's version, not the sandbox's say");
    // 10: a sort whose comparison never returns.
    let v = s
        .run_ok(
            &sb,
            "import pandas as pd\nclass Stuck:\n    def __lt__(self, o):\n        while True: pass\n    __gt__ = __lt__\ndf = pd.DataFrame({'a': [Stuck(), Stuck(), Stuck()]})\ndf",
        )
        .await;
    let handle = v["table"]["handle"].as_str().expect("a table").to_string();
    assert!(handle.starts_with(&format!("{sb}:")), "{handle}");
    let (err, _, text) = s
        .call_json("read_table", json!({"handle": handle, "sort_by": "a"}))
        .await;
    assert!(err, "{text}");
    assert!(text.contains("variables and imports are gone"), "{text}");
    assert!(!text.contains("timeout_seconds"), "{text}");
    let (_, v) = s.exec(&sb, "df").await;
    assert_eq!(error_of(&v).0, "NameError", "as it said, the state is gone: {v}");
    s.stop().await;
}

/// Finding 19: a run's files live in its sandbox, so its code can rewrite them. Read back
/// after a restart, a record is read only as large as the server writes one, must name the
/// run asked for, and its fields are cut to fit a result.
#[cfg(unix)]
#[tokio::test]
async fn a_run_record_the_sandbox_rewrote_is_checked_and_capped() {
    use crate::persistence::{signal_and_wait, start};
    let home = common::private_home();
    let s = start(&home, &[]).await;
    let id = s.create().await;
    let run = run_id(
        &s.ok(
            "execute_code",
            json!({"sandbox_id": id, "code": "print('done')", "background": true}),
        )
        .await,
    );
    let mut v = Value::Null;
    for _ in 0..120 {
        v = s.ok("get_run", json!({"run_id": run})).await;
        if v["state"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(v["state"], "finished", "{v}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    signal_and_wait(s, libc::SIGTERM).await;
    let s = start(&home, &[]).await;
    let v = s.ok("get_run", json!({"run_id": run})).await;
    assert_eq!(v["state"], "finished", "read back from its files: {v}");
    let rewrite = |change: &str| {
        format!(
            "import json\np = '.outputs/runs/{run}/run.json'\nr = json.load(open(p))\n{change}\njson.dump(r, open(p, 'w'))"
        )
    };
    s.run_ok(&id, &rewrite("r['result']['stdout'] = 'x' * 12_000_000"))
        .await;
    let (err, _, text) = s.call_json("get_run", json!({"run_id": run})).await;
    assert!(err && text.contains("no such run"), "a 12 MB record: {text}");
    s.run_ok(&id, &rewrite("r['result']['stdout'] = 'y' * 900_000"))
        .await;
    let r = s.call("get_run", json!({"run_id": run})).await;
    let size = serde_json::to_string(&r).unwrap().len();
    assert!(size < 1_000_000, "the answer is {size} bytes");
    let ended = r.structured_content.expect("a result")["stdout"].to_string();
    assert!(
        ended.contains("not shown"),
        "cut, saying so: {}",
        &ended[..200.min(ended.len())]
    );
    s.run_ok(
        &id,
        &rewrite("r['result']['stdout'] = 'z'\nr['run_id'] = 'run-sbx-other-0123abcd'"),
    )
    .await;
    let (err, _, text) = s.call_json("get_run", json!({"run_id": run})).await;
    assert!(
        err && text.contains("no such run"),
        "a record of another run: {text}"
    );
    s.stop().await;
}
