//! Downstream servers that misbehave hold up nothing else (issue 35, red team findings 7 and
//! 8): one that never finishes starting, or lists 20 MB of tools, leaves the others usable at
//! once and is reported failed with its reason; an answer nested 400 levels deep is reported
//! as such at once, not as a timeout at the deadline.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{self, Server, error_of, run};

#[tokio::test]
async fn a_stuck_or_flooding_server_holds_up_no_other_and_says_why() {
    let dir = std::env::temp_dir().join(format!("mcs-hostile-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = common::repo_root()
        .join("tests/mcp-servers/misbehaving.py")
        .display()
        .to_string();
    let file = dir.join("servers.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {
            "fine": {"command": xtask::pyvenv::PYTHON, "args": [script, "loose", dir.join("ran.log").display().to_string()]},
            "stuck": {"command": xtask::pyvenv::PYTHON, "args": [script, "stuck"]},
            "huge": {"command": xtask::pyvenv::PYTHON, "args": [script, "huge-list"]},
            "deep": {"command": xtask::pyvenv::PYTHON, "args": [script, "deep"]}
        }})
        .to_string(),
    )
    .unwrap();
    let server = Server::start_with(&[
        ("CODE_SANDBOX_MCP_SERVERS", file.to_str().unwrap()),
        ("CODE_SANDBOX_MCP_START_SECONDS", "8"),
    ])
    .await;
    let sb = server.create().await;

    // The fine server answers while the stuck one is still starting.
    let v = run(&server, &sb, "import mcp_tools\nmcp_tools.fine.read_notes()").await;
    assert_eq!(v["result"], "{'ran': 'read_notes'}", "{v}");
    let v = run(&server, &sb, "import mcp_tools\nmcp_tools.servers()['stuck']").await;
    assert_eq!(v["result"], "'starting'", "{v}");

    // An answer nested too deep says so, at once.
    let started = Instant::now();
    let v = run(&server, &sb, "import mcp_tools\nmcp_tools.deep.deep()").await;
    let (name, value) = error_of(&v);
    assert_eq!(name, "RuntimeError", "{v}");
    assert!(value.contains("nested deeper than"), "{value}");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "it waited for the call's deadline instead: {:?}",
        started.elapsed()
    );

    // Past its start time the stuck server is failed, with the reason; the flooding one too.
    let code = "import mcp_tools, time\nfor _ in range(60):\n    s = mcp_tools.servers()\n    if s['stuck'] != 'starting' and s['huge'] != 'starting':\n        break\n    time.sleep(0.5)\n(s['stuck'], s['huge'], s['fine'])";
    let v = run(&server, &sb, code).await;
    let text = v["result"].as_str().unwrap_or_default();
    assert!(
        text.contains("failed: the stuck server did not finish starting within 8 s"),
        "{text}"
    );
    assert!(
        text.contains("failed: its list of tools is over 16 MiB"),
        "{text}"
    );
    assert!(
        text.contains("['delete_all', 'admin_reset', 'read_notes']"),
        "{text}"
    );
    let v = run(&server, &sb, "import mcp_tools\nmcp_tools.stuck").await;
    assert_eq!(error_of(&v).0, "ConnectionError", "{v}");
    server.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
