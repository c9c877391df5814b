//! Code mode: sandbox code calls the user's other MCP servers through `mcp_tools`. The
//! servers are the official reference servers from the npm registry (memory, filesystem,
//! everything; pinned in tests/mcp-servers) and a Python one from the package index
//! (mcp-server-time, pinned with hashes), started by the real binary as a user's config says.

use crate::common::{self, Server, error_of, run};

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ServerResult};
use rmcp::service::{NotificationContext, PeerRequestOptions};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

/// The reference servers' folder, installed once.
fn modules() -> PathBuf {
    common::ensure_npm("tests/mcp-servers")
        .join("node_modules")
        .join("@modelcontextprotocol")
}

fn python_server() -> PathBuf {
    let dir = common::repo_root().join("tests/mcp-servers");
    let venv = xtask::pyvenv::ensure(&dir, &|m| common::progress(m)).unwrap_or_else(|e| panic!("{e}"));
    xtask::pyvenv::tool(&venv, "mcp-server-time")
}

/// A folder for one test's servers file and the data its servers keep.
struct Setup {
    dir: PathBuf,
    file: PathBuf,
}

impl Setup {
    /// The servers file, with `extra` entries merged in.
    fn new(extra: Value) -> Setup {
        let m = modules();
        let dir = std::env::temp_dir().join(format!("mcs-code-mode-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("files")).unwrap();
        let js = |pkg: &str| m.join(pkg).join("dist/index.js").display().to_string();
        let mut servers = json!({
            "memory": {
                "command": "node",
                "args": [js("server-memory")],
                "env": {"MEMORY_FILE_PATH": dir.join("memory.jsonl").display().to_string()}
            },
            "files": {
                "command": "node",
                "args": [js("server-filesystem"), dir.join("files").display().to_string()]
            },
            "everything": {
                "command": "node",
                "args": [js("server-everything"), "stdio"],
                "env": {"FROM_THE_ENTRY": "given"},
                "deny": ["toggle-*"]
            },
            "time": {"command": python_server().display().to_string(), "args": []}
        });
        if let Value::Object(more) = extra {
            for (k, v) in more {
                servers[k] = v;
            }
        }
        let file = dir.join("servers.json");
        std::fs::write(&file, json!({"mcpServers": servers}).to_string()).unwrap();
        Setup { dir, file }
    }

    async fn serve(&self, more_env: &[(&str, &str)]) -> Server {
        let file = self.file.display().to_string();
        let mut env = vec![
            ("CODE_SANDBOX_MCP_SERVERS", file.as_str()),
            ("CODE_SANDBOX_TEST_SECRET", "never-downstream"),
        ];
        env.extend_from_slice(more_env);
        Server::start_with(&env).await
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn code_calls_the_reference_servers_and_their_data_feeds_pandas_across_calls() {
    let setup = Setup::new(json!({}));
    let server = setup.serve(&[]).await;
    let sb = server.create().await;

    let v = run(&server, &sb, "import mcp_tools\nsorted(mcp_tools.servers())").await;
    assert_eq!(v["result"], "['everything', 'files', 'memory', 'time']", "{v}");

    // State written through a server in one call ...
    let v = run(
        &server,
        &sb,
        "import mcp_tools\nmcp_tools.memory.create_entities(entities=[\
         {'name': n, 'entityType': 'city', 'observations': [f'population {p}']} \
         for n, p in [('Oslo', 700), ('Bergen', 290), ('Tromso', 77)]])\n'stored'",
    )
    .await;
    assert_eq!(v["result"], "'stored'", "{v}");
    let calls = v["tool_calls"].as_array().expect("tool_calls in the result");
    assert_eq!(calls.len(), 1, "{v}");
    assert_eq!(calls[0]["server"], "memory");
    assert_eq!(calls[0]["tool"], "create_entities");
    assert_eq!(calls[0]["ok"], true);
    assert!(calls[0]["bytes"].as_u64().unwrap() > 50);

    // ... read by the next, its structured result going straight into pandas.
    let v = run(
        &server,
        &sb,
        "import mcp_tools, pandas as pd\n\
         graph = mcp_tools.memory.read_graph()\n\
         df = pd.DataFrame(graph['entities'])\n\
         df['population'] = df['observations'].map(lambda o: int(o[0].split()[1]))\n\
         int(df['population'].sum()), list(df.sort_values('population')['name'])",
    )
    .await;
    assert_eq!(v["result"], "(1067, ['Tromso', 'Bergen', 'Oslo'])", "{v}");

    // help() shows what a tool does and takes, from its input schema.
    let v = run(
        &server,
        &sb,
        "import mcp_tools, pydoc\npydoc.render_doc(mcp_tools.everything.get_sum, renderer=pydoc.plaintext)",
    )
    .await;
    let help = v["result"].as_str().unwrap();
    assert!(help.contains("get_sum(*, a, b)"), "{help}");
    assert!(help.contains("a (float, required)"), "{help}");

    // Text that is JSON comes back parsed; the Python server answers too.
    let v = run(
        &server,
        &sb,
        "import mcp_tools\nt = mcp_tools.time.get_current_time(timezone='Europe/Oslo')\n(type(t).__name__, t['timezone'])",
    )
    .await;
    assert_eq!(v["result"], "('dict', 'Europe/Oslo')", "{v}");

    // Images and other content come back as a list of dicts.
    let v = run(
        &server,
        &sb,
        "import mcp_tools\nc = mcp_tools.everything.get_tiny_image()\nsorted({p['type'] for p in c})",
    )
    .await;
    assert!(v["result"].as_str().unwrap().contains("'image'"), "{v}");

    // A child server sees the env its entry gives and what it needs to run, never ours.
    let v = run(
        &server,
        &sb,
        "import mcp_tools\nenv = mcp_tools.everything.get_env()\n(env.get('FROM_THE_ENTRY'), 'CODE_SANDBOX_TEST_SECRET' in env, 'CODE_SANDBOX_MCP_SERVERS' in env, 'PATH' in env)",
    )
    .await;
    assert_eq!(v["result"], "('given', False, False, True)", "{v}");
    server.stop().await;
}

#[tokio::test]
async fn errors_say_what_happened_as_python_exceptions() {
    let setup = Setup::new(json!({
        "me": {"command": env!("CARGO_BIN_EXE_mcp-code-sandbox")},
        "nothing": {"command": "/nonexistent/mcp-server"}
    }));
    // 6 MB of text: the server returns it twice (as text and as structured content).
    std::fs::write(setup.dir.join("files/big.txt"), "x".repeat(6_000_000)).unwrap();
    // 20 MB: past what is read from a server at all.
    std::fs::write(setup.dir.join("files/huge.txt"), "y".repeat(20_000_000)).unwrap();
    let server = setup.serve(&[("CODE_SANDBOX_MCP_CALLS", "5")]).await;
    let sb = server.create().await;
    let cases = [
        // A tool's own error result.
        (
            "mcp_tools.time.get_current_time(timezone='Nowhere/Atlantis')",
            "ToolError",
            "Atlantis",
        ),
        // A tool the user's deny list leaves out.
        (
            "mcp_tools.call('everything', 'toggle-simulated-logging')",
            "PermissionError",
            "CODE_SANDBOX_MCP_SERVERS",
        ),
        // A result past what code mode carries.
        (
            &format!(
                "mcp_tools.files.read_text_file(path={:?})",
                setup.dir.join("files/big.txt").display().to_string()
            ),
            "ResultTooLarge",
            "10000000 bytes",
        ),
        (
            &format!(
                "mcp_tools.files.read_text_file(path={:?})",
                setup.dir.join("files/huge.txt").display().to_string()
            ),
            "ResultTooLarge",
            "ask the tool for less",
        ),
        // An entry that would start this server itself.
        (
            "mcp_tools.me",
            "ConnectionError",
            "would start this server itself",
        ),
        // A server that cannot start.
        (
            "mcp_tools.call('nothing', 'x')",
            "ConnectionError",
            "could not be started",
        ),
        ("mcp_tools.nowhere", "AttributeError", "no MCP server 'nowhere'"),
    ];
    for (expr, name, says) in cases {
        let v = run(&server, &sb, &format!("import mcp_tools\n{expr}")).await;
        let (got, value) = error_of(&v);
        assert_eq!(got, name, "{expr}: {v}");
        assert!(value.contains(says), "{expr}: {value}");
    }
    // Guest code can send only the module's own operations: no other JSON-RPC (resources,
    // prompts) passes, and a broken frame is told so.
    let v = run(
        &server,
        &sb,
        "import _host, json
[json.loads(_host.call(f))['error']['kind'] for f in (b'{\"mcp\":1,\"op\":\"resources/read\",\"uri\":\"file:///etc/passwd\"}', b'{\"mcp\":1,', b'{\"mcp\":1,\"op\":\"call\",\"server\":\"everything\",\"tool\":\"echo\",\"args\":[1]}')]",
    )
    .await;
    assert_eq!(
        v["result"], "['protocol', 'protocol', 'invalid_arguments']",
        "{v}"
    );
    // We declare no sampling or elicitation, so a server offers no tools that need them.
    let v = run(
        &server,
        &sb,
        "import mcp_tools
[t for t in mcp_tools.servers()['everything'] if 'sampling' in t or 'elicitation' in t]",
    )
    .await;
    assert_eq!(v["result"], "[]", "{v}");

    // The call budget: CODE_SANDBOX_MCP_CALLS per execute_code call, then a clear error.
    let v = run(
        &server,
        &sb,
        "import mcp_tools\nfor i in range(6):\n    mcp_tools.everything.echo(message=str(i))",
    )
    .await;
    let (got, value) = error_of(&v);
    assert_eq!(got, "CallLimitReached", "{v}");
    assert!(value.contains("CODE_SANDBOX_MCP_CALLS"), "{value}");
    assert_eq!(v["tool_calls"].as_array().unwrap().len(), 5, "{v}");
    // The next call has a budget of its own.
    let v = run(
        &server,
        &sb,
        "import mcp_tools\nmcp_tools.everything.echo(message='again')",
    )
    .await;
    assert!(v["result"].as_str().unwrap().contains("again"), "{v}");

    // The model is told which servers its code may call, with their tool counts.
    let said = common::tool_description(&server.client, "execute_code").await;
    assert!(said.contains("import mcp_tools"), "{said}");
    assert!(said.contains("memory (9 tools)"), "{said}");
    assert!(
        said.contains("me (unavailable: it would start this server itself"),
        "{said}"
    );
    server.stop().await;
}

/// The pids of `server`'s children whose command line mentions `what`.
#[cfg(target_os = "linux")]
fn children_running(server: &Server, what: &str) -> Vec<i32> {
    let parent = server.pid.expect("the server's pid") as i32;
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains(what) {
            found.push(pid);
        }
    }
    found
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_server_killed_mid_call_raises_connection_error_and_is_started_again() {
    let setup = Setup::new(json!({}));
    let server = Arc::new(setup.serve(&[]).await);
    let sb = server.create().await;
    run(
        &server,
        &sb,
        "import mcp_tools\nmcp_tools.everything.echo(message='up')",
    )
    .await;
    let pids = children_running(&server, "server-everything");
    assert_eq!(pids.len(), 1, "one everything server: {pids:?}");

    let (s, id) = (server.clone(), sb.clone());
    let call = tokio::spawn(async move {
        run(
            &s,
            &id,
            "import mcp_tools\nkept = 42\nmcp_tools.everything.trigger_long_running_operation(duration=60, steps=60)",
        )
        .await
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    unsafe { libc::kill(pids[0], libc::SIGKILL) };
    let v = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .unwrap()
        .unwrap();
    let (name, value) = error_of(&v);
    assert_eq!(name, "ConnectionError", "{v}");
    assert!(value.contains("started again"), "{value}");

    let v = run(
        &server,
        &sb,
        "import mcp_tools\nmcp_tools.everything.echo(message='back'), kept",
    )
    .await;
    assert!(v["result"].as_str().unwrap().contains("back"), "{v}");
    assert!(v["result"].as_str().unwrap().ends_with("42)"), "{v}");
    let again = children_running(&server, "server-everything");
    assert_eq!(again.len(), 1, "{again:?}");
    assert_ne!(again[0], pids[0]);

    // At shutdown every server it started stops with it.
    let all: Vec<i32> = [
        "server-everything",
        "server-memory",
        "server-filesystem",
        "mcp-server-time",
    ]
    .iter()
    .flat_map(|s| children_running(&server, s))
    .collect();
    assert_eq!(all.len(), 4, "{all:?}");
    let Ok(server) = Arc::try_unwrap(server) else {
        panic!("the server is still shared")
    };
    server.stop().await;
    for _ in 0..100 {
        if all.iter().all(|&pid| gone_or_zombie(pid)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left: Vec<i32> = all.iter().copied().filter(|&pid| !gone_or_zombie(pid)).collect();
    assert!(left.is_empty(), "still running after shutdown: {left:?}");
}

/// Whether `pid` has exited (it may linger as a zombie until its parent reaps it).
#[cfg(target_os = "linux")]
fn gone_or_zombie(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()) == Some("Z"),
    }
}

#[tokio::test]
async fn a_hanging_tool_stops_at_the_deadline_and_the_sandbox_keeps_its_state() {
    let setup = Setup::new(json!({}));
    let server = setup.serve(&[]).await;
    let sb = server.create().await;
    run(&server, &sb, "kept = 'still here'").await;
    let (err, v, text) = server
        .call_json(
            "execute_code",
            json!({"sandbox_id": sb, "timeout_seconds": 4,
                   "code": "import mcp_tools\nmcp_tools.everything.trigger_long_running_operation(duration=600, steps=2)"}),
        )
        .await;
    assert!(err, "a Python exception is an error result: {text}");
    let (name, value) = error_of(&v);
    assert_eq!(name, "TimeoutError", "{v}");
    assert!(value.contains("time limit"), "{value}");
    assert_eq!(v["state_lost"], false, "{v}");
    assert_eq!(v["tool_calls"][0]["ok"], false, "{v}");
    let v = run(&server, &sb, "kept").await;
    assert_eq!(v["result"], "'still here'");
    server.stop().await;
}

#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    list_changed: Arc<Mutex<usize>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(&self, params: ProgressNotificationParam, _cx: NotificationContext<RoleClient>) {
        self.progress.lock().unwrap().push(params);
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        *self.list_changed.lock().unwrap() += 1;
    }
}

#[tokio::test]
async fn two_sandboxes_call_at_once_and_progress_names_the_tool() {
    let setup = Setup::new(json!({}));
    common::ensure_runtime();
    let rec = Recorder::default();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"));
    cmd.env("CODE_SANDBOX_HOME", common::runtime_home())
        .env("CODE_SANDBOX_PERSIST", "false")
        .env("CODE_SANDBOX_MCP_SERVERS", &setup.file)
        .env("RUST_LOG", "warn");
    let client = rec
        .clone()
        .serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    let code = "import mcp_tools\nmcp_tools.everything.trigger_long_running_operation(duration=5, steps=5)";
    let mut handles = Vec::new();
    for _ in 0..2 {
        let Value::Object(args) = json!({"code": code, "sandbox_id": Value::Null}) else {
            unreachable!()
        };
        let sb = client
            .call_tool(rmcp::model::CallToolRequestParams::new("create_sandbox"))
            .await
            .unwrap()
            .structured_content
            .unwrap()["sandbox_id"]
            .clone();
        let mut args = args;
        args.insert("sandbox_id".into(), sb);
        let request = rmcp::model::ClientRequest::CallToolRequest(rmcp::model::Request::new(
            rmcp::model::CallToolRequestParams::new("execute_code").with_arguments(args),
        ));
        handles.push(
            client
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await
                .unwrap(),
        );
    }
    for h in handles {
        let resp = tokio::time::timeout(Duration::from_secs(90), h.await_response())
            .await
            .unwrap()
            .unwrap();
        let ServerResult::CallToolResult(r) = resp else {
            panic!("unexpected {resp:?}")
        };
        let v = r.structured_content.unwrap();
        assert!(
            v["result"].as_str().unwrap_or_default().contains("completed"),
            "{v}"
        );
    }
    let seen = rec.progress.lock().unwrap().clone();
    assert!(
        seen.iter().any(|p| p
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("everything server's tool trigger-long-running-operation")),
        "{seen:?}"
    );
    // The servers finished starting after the client connected: it heard the list change.
    assert!(*rec.list_changed.lock().unwrap() >= 1);
    let _ = client.cancel().await;
}

#[tokio::test]
async fn a_streamable_http_server_is_reached_and_without_servers_the_import_says_how() {
    // The everything server over streamable HTTP, on a free loopback port.
    let port = common::free_port();
    let mut http = tokio::process::Command::new("node")
        .arg(modules().join("server-everything/dist/index.js"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let setup = Setup::new(json!({"web": {"url": format!("http://127.0.0.1:{port}/mcp")}}));
    let server = setup.serve(&[]).await;
    let sb = server.create().await;
    let v = run(
        &server,
        &sb,
        "import mcp_tools\nmcp_tools.web.get_sum(a=2, b=40), len(mcp_tools.servers()['web']) > 5",
    )
    .await;
    assert_eq!(v["result"], "('The sum of 2 and 40 is 42.', True)", "{v}");
    server.stop().await;
    let _ = http.kill().await;

    // No servers file: nothing changes, and the import says what would turn it on.
    let plain = Server::start().await;
    let sb = plain.create().await;
    let v = run(&plain, &sb, "import mcp_tools").await;
    let (name, value) = error_of(&v);
    assert_eq!(name, "ImportError", "{v}");
    assert!(value.contains("CODE_SANDBOX_MCP_SERVERS"), "{value}");
    let said = common::tool_description(&plain.client, "execute_code").await;
    assert!(!said.contains("mcp_tools"), "{said}");
    plain.stop().await;
}

#[tokio::test]
async fn in_remote_mode_only_a_principal_whose_token_names_a_server_reaches_it() {
    let setup = Setup::new(json!({}));
    let file = setup.file.display().to_string();
    let remote = crate::remote_harness::Remote::start(
        &["alice mcp=memory", "bob"],
        &[("CODE_SANDBOX_MCP_SERVERS", file.as_str())],
    )
    .await;
    let alice = remote.client("alice").await;
    let sb = alice.create().await;
    let v = run(
        &alice,
        &sb,
        "import mcp_tools\nmcp_tools.memory.create_entities(entities=[{'name': 'a', 'entityType': 't', 'observations': []}])\nsorted(mcp_tools.servers())",
    )
    .await;
    assert_eq!(v["result"], "['memory']", "{v}");
    // Another server of the same file is not hers.
    let v = run(
        &alice,
        &sb,
        "import mcp_tools\nmcp_tools.call('everything', 'echo', message='x')",
    )
    .await;
    let (name, value) = error_of(&v);
    assert_eq!(name, "PermissionError", "{v}");
    assert!(value.contains("mcp=everything"), "{value}");
    let said = common::tool_description(&alice.client, "execute_code").await;
    assert!(
        said.contains("memory (") && !said.contains("everything ("),
        "{said}"
    );

    // Bob's line names none: his code reaches nothing, and he is not told of any.
    let bob = remote.client("bob").await;
    let sb = bob.create().await;
    let v = run(&bob, &sb, "import mcp_tools").await;
    let (name, value) = error_of(&v);
    assert_eq!(name, "ImportError", "{v}");
    assert!(value.contains("mcp=NAME"), "{value}");
    let said = common::tool_description(&bob.client, "execute_code").await;
    assert!(!said.contains("mcp_tools"), "{said}");
    remote.terminate().await;
}
