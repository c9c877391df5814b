//! The MCP Bundle as a new Claude Desktop user gets it (tests/ts/bundle.test.mjs): unpacked and
//! started from its manifest by the official bundle library, with a fresh `CODE_SANDBOX_HOME`,
//! nothing on `PATH`, and here, on Linux, no network at all: the script runs in a network
//! namespace of its own, where the only interface is a loopback that is down.
//!
//! The bundle is built the first time this test runs (through the code of `cargo xtask
//! bundle`), and again whenever the server binary is newer than it.

use std::path::Path;
use std::process::Command;

use serde_json::json;

#[test]
fn the_bundle_stays_within_its_size_budget_with_room_to_grow() {
    let bundle = crate::common::ensure_bundle();
    let mib =
        xtask::bundle::within_budget(&bundle, xtask::bundle::SIZE_ROOM).unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!(
        "bundle: {mib:.1} MiB of a {} MiB budget",
        xtask::bundle::SIZE_BUDGET >> 20
    );
}

#[test]
fn the_bundle_runs_offline_and_without_python_as_claude_desktop_starts_it() {
    let bundle = crate::common::ensure_bundle();
    let ts = crate::common::ensure_npm("tests/ts");
    crate::common::ensure_npm("xtask/mcpb");
    let mut cmd = if cfg!(target_os = "linux") {
        let unshare = Path::new("/usr/bin/unshare");
        assert!(
            unshare.is_file(),
            "util-linux's unshare is needed to cut the network"
        );
        // At a low priority: its first start compiles the runtime on every core for a minute,
        // and the tests running beside it measure things in seconds.
        let mut c = Command::new("nice");
        c.args(["-n", "15"])
            .arg(unshare)
            .args(["--user", "--map-root-user", "--net", "--", "node"]);
        c
    } else {
        Command::new("node")
    };
    let status = cmd
        .args(["--test", "bundle.test.mjs"])
        .current_dir(ts)
        .env("BUNDLE", &bundle)
        .status()
        .expect("node runs (it is on every machine; see README)");
    assert!(status.success(), "the bundle test failed (see its output above)");
}

/// A bundle whose runtime was damaged (a cut-off unpack, a disk error, tampering) on a machine
/// without Python: the damaged file is never used, and every call says to reinstall, while the
/// server keeps answering.
#[tokio::test]
async fn a_damaged_bundled_runtime_is_refused_with_what_to_do() {
    use rmcp::ServiceExt;
    use rmcp::transport::TokioChildProcess;

    let root = std::env::temp_dir().join(format!("mcs-damaged-{}", uuid::Uuid::new_v4().simple()));
    let server = root.join("server");
    let runtime = server.join("runtime");
    let empty_path = root.join("bin");
    for d in [&runtime, &empty_path] {
        std::fs::create_dir_all(d).unwrap();
    }
    let exe = server.join("mcp-code-sandbox");
    std::fs::copy(env!("CARGO_BIN_EXE_mcp-code-sandbox"), &exe).unwrap();
    // The installed runtime, whole but for its module, which is not the pinned one.
    crate::common::ensure_runtime();
    let m = mcp_code_sandbox::runtime::manifest();
    let installed = mcp_code_sandbox::runtime::Layout::new(crate::common::runtime_home())
        .installed(m)
        .expect("the runtime is installed");
    let tree = runtime.join(installed.dir.file_name().unwrap());
    std::fs::create_dir_all(&tree).unwrap();
    for name in ["INSTALLED", "MANIFEST"] {
        std::fs::copy(installed.dir.join(name), tree.join(name)).unwrap();
    }
    for name in ["lib", "mpl-data"] {
        crate::common::link_dir(&installed.dir.join(name), &tree.join(name)).unwrap();
    }
    let module = tree.join(&m.artifacts.module);
    std::fs::write(&module, b"\0asm not the runtime").unwrap();

    let home = root.join("home");
    let mut cmd = tokio::process::Command::new(&exe);
    cmd.env_clear()
        .env("CODE_SANDBOX_HOME", &home)
        .env("PATH", &empty_path)
        .env("RUST_LOG", "warn");
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let s = crate::common::Server {
        client,
        home,
        pid: None,
    };
    for _ in 0..2 {
        let r = s.call("execute_code", json!({"code": "1+1"})).await;
        assert_eq!(r.is_error, Some(true));
        let text = crate::common::text_of(&r);
        assert!(text.contains("is damaged"), "{text}");
        assert!(text.contains("Reinstall the extension"), "{text}");
    }
    assert!(module.is_file(), "the bundle's files are left as they are");
    assert!(
        !s.home
            .join("runtime")
            .read_dir()
            .is_ok_and(|mut d| d.next().is_some()),
        "nothing was installed in the home"
    );
    s.stop().await;
    let _ = std::fs::remove_dir_all(&root);
}
