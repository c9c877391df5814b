//! The MCP Bundle as a new Claude Desktop user gets it (tests/ts/bundle.test.mjs): unpacked and
//! started from its manifest by the official bundle library, with a fresh `CODE_SANDBOX_HOME`,
//! nothing on `PATH`, and here, on Linux, no network at all: the script runs in a network
//! namespace of its own, where the only interface is a loopback that is down.
//!
//! The bundle is built by `cargo xtask bundle` (`.ci/run` does it before the tests).

use std::path::{Path, PathBuf};
use std::process::Command;

fn bundle_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dist").join(format!(
        "mcp-code-sandbox-{}-{}-{}.mcpb",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH
    ))
}

#[test]
fn the_bundle_runs_offline_and_without_python_as_claude_desktop_starts_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bundle = bundle_path();
    assert!(
        bundle.is_file(),
        "{} is missing: build it with `cargo xtask bundle` (.ci/run does)",
        bundle.display()
    );
    for (dir, what, fix) in [
        (
            "tests/ts/node_modules/@modelcontextprotocol/sdk",
            "the TypeScript SDK",
            "npm ci --prefix tests/ts",
        ),
        (
            "xtask/mcpb/node_modules/@anthropic-ai/mcpb",
            "the MCP Bundle library",
            "npm ci --prefix xtask/mcpb",
        ),
    ] {
        assert!(
            root.join(dir).is_dir(),
            "{what} is not installed: run `{fix}` (.ci/run does)"
        );
    }
    let mut cmd = if cfg!(target_os = "linux") {
        let unshare = Path::new("/usr/bin/unshare");
        assert!(
            unshare.is_file(),
            "util-linux's unshare is needed to cut the network"
        );
        let mut c = Command::new(unshare);
        c.args(["--user", "--map-root-user", "--net", "--", "node"]);
        c
    } else {
        Command::new("node")
    };
    let status = cmd
        .args(["--test", "bundle.test.mjs"])
        .current_dir(root.join("tests/ts"))
        .env("BUNDLE", &bundle)
        .status()
        .expect("node runs (it is on every machine; see README)");
    assert!(status.success(), "the bundle test failed (see its output above)");
}
