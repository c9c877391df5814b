//! Code mode's allow and deny rules hold under every spelling of a tool's name (issue 35, red
//! team finding 1): against a downstream server of our own that looks names up loosely, as
//! real servers do, a denied tool never runs, and a name the server did not list never leaves
//! the host.

use serde_json::json;

use crate::common::{self, Server, error_of, run};

#[tokio::test]
async fn a_denied_tool_never_runs_under_another_spelling() {
    let dir = std::env::temp_dir().join(format!("mcs-loose-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let ran = dir.join("ran.log");
    let script = common::repo_root().join("tests/mcp-servers/misbehaving.py");
    let file = dir.join("servers.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"srv": {
            "command": xtask::pyvenv::PYTHON,
            "args": [script.display().to_string(), "loose", ran.display().to_string()],
            "deny": ["delete_all", "*admin*"]
        }}})
        .to_string(),
    )
    .unwrap();
    let server = Server::start_with(&[("CODE_SANDBOX_MCP_SERVERS", file.to_str().unwrap())]).await;
    let sb = server.create().await;

    // The allowed tool works, so the server is up and reachable.
    let v = run(&server, &sb, "import mcp_tools\nmcp_tools.srv.read_notes()").await;
    assert_eq!(v["result"], "{'ran': 'read_notes'}", "{v}");

    for spelling in [
        "DELETE_ALL",
        "delete_all ",
        "\\tdelete_all",
        "delete\\u200b_all",
        "ADMIN_RESET",
        "delete_all",
        "admin_reset",
    ] {
        let v = run(
            &server,
            &sb,
            &format!("import mcp_tools\nmcp_tools.call('srv', '{spelling}')"),
        )
        .await;
        let (name, value) = error_of(&v);
        assert_eq!(name, "PermissionError", "{spelling}: {v}");
        assert!(value.contains("CODE_SANDBOX_MCP_SERVERS"), "{spelling}: {value}");
    }

    // A name the server did not list is refused before it is sent, naming the close match.
    let v = run(
        &server,
        &sb,
        "import mcp_tools\nmcp_tools.call('srv', 'READ_NOTES')",
    )
    .await;
    let (name, value) = error_of(&v);
    assert_eq!(name, "UnknownTool", "{v}");
    assert!(value.contains("\"read_notes\""), "{value}");
    let v = run(
        &server,
        &sb,
        "import mcp_tools\nissubclass(mcp_tools.UnknownTool, LookupError)",
    )
    .await;
    assert_eq!(v["result"], "True", "{v}");

    // As an attribute, a denied tool says it is denied; the listing and help still hide it.
    let v = run(&server, &sb, "import mcp_tools\nmcp_tools.srv.delete_all()").await;
    let (name, value) = error_of(&v);
    assert_eq!(name, "PermissionError", "{v}");
    assert!(value.contains("CODE_SANDBOX_MCP_SERVERS"), "{value}");
    let v = run(
        &server,
        &sb,
        "import mcp_tools\n(mcp_tools.servers(), dir(mcp_tools.srv))",
    )
    .await;
    assert_eq!(v["result"], "({'srv': ['read_notes']}, ['read_notes'])", "{v}");

    let log = std::fs::read_to_string(&ran).unwrap_or_default();
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        ["read_notes\t'read_notes'"],
        "the server ran: {log}"
    );
    server.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
