//! Runs tests/ts/*.test.mjs: the server through the official MCP TypeScript SDK client (the
//! one inside Claude Desktop and Claude Code), which validates every result: over stdio
//! (client.test.mjs), over streamable HTTP in remote mode (http.test.mjs), and past its own
//! 60 s request timeout, where background runs carry the work (long.test.mjs), code mode's
//! results (code_mode.test.mjs), network results (network.test.mjs), signing in with OAuth as
//! Claude's connectors do (oauth.test.mjs), and revision 2026-07-28 through the SDK's v2
//! client over both transports (rev2026.test.mjs), and a first call from a source build while
//! the interpreter compiles (first_call.test.mjs).

use crate::common;

use std::process::Command;

#[test]
fn the_typescript_sdk_accepts_every_result() {
    common::ensure_runtime();
    let dir = common::ensure_npm("tests/ts");
    let servers = common::ensure_npm("tests/mcp-servers");
    let status = Command::new("node")
        .args([
            "--test",
            "--test-concurrency=1",
            "client.test.mjs",
            "http.test.mjs",
            "long.test.mjs",
            "code_mode.test.mjs",
            "network.test.mjs",
            "oauth.test.mjs",
            "rev2026.test.mjs",
            "first_call.test.mjs",
        ])
        .current_dir(&dir)
        .env("MCP_CODE_SANDBOX_BIN", env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .env("CODE_SANDBOX_HOME", common::runtime_home())
        .env(
            "MCP_SERVERS_MODULES",
            servers.join("node_modules").join("@modelcontextprotocol"),
        )
        .status()
        .expect("node runs (it is on every machine; see README)");
    assert!(
        status.success(),
        "the TypeScript SDK tests failed (see their output above)"
    );
}
