//! Runs tests/ts/*.test.mjs: the server through the official MCP TypeScript SDK client (the
//! one inside Claude Desktop and Claude Code), which validates every result: over stdio
//! (client.test.mjs) and over streamable HTTP in remote mode (http.test.mjs).

use crate::common;

use std::path::Path;
use std::process::Command;

#[test]
fn the_typescript_sdk_accepts_every_result() {
    common::ensure_runtime();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ts");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the TypeScript SDK is not installed: run `npm ci --prefix tests/ts` (.ci/run does)"
    );
    let status = Command::new("node")
        .args([
            "--test",
            "--test-concurrency=1",
            "client.test.mjs",
            "http.test.mjs",
        ])
        .current_dir(&dir)
        .env("MCP_CODE_SANDBOX_BIN", env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .env("CODE_SANDBOX_HOME", common::runtime_home())
        .status()
        .expect("node runs (it is on every machine; see README)");
    assert!(
        status.success(),
        "the TypeScript SDK tests failed (see their output above)"
    );
}
