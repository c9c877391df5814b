//! Claude's clients as they are today, and what a newcomer found (issue 47): the home's tokens
//! file served by default, the first sandbox after a start warm.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{self, LOG_TO, Server};
use crate::oauth::attempt;
use crate::remote_harness::{Remote, meta2026, raw};

/// Item 8: `token add` writes the home's tokens file, and a server started afterwards serves
/// with it, without CODE_SANDBOX_TOKENS; emptied, the file still keeps the server closed.
#[tokio::test(flavor = "multi_thread")]
async fn the_homes_tokens_file_is_served_by_default() {
    let home = common::private_home();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .args(["token", "add", "alice"])
        .env("CODE_SANDBOX_HOME", &home)
        .env_remove("CODE_SANDBOX_TOKENS")
        .output()
        .expect("token add");
    let advice = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{advice}");
    assert!(
        advice.lines().all(|l| !l.starts_with(' ')),
        "token add's advice has an indented line: {advice}"
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(
        home.join("tokens").exists(),
        "token add wrote the home's tokens file"
    );

    let r = Remote::start_in(home.clone(), &[], &[]).await;
    assert!(r.log_text().contains("1 principal"), "{}", r.log_text());
    let (status, _, _) = attempt(&r.url, None).await;
    assert_eq!(status, 401, "no token, no service");
    let (status, _, body) = attempt(&r.url, Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    r.terminate().await;

    // Every token removed: the file remains, and the server will not start open.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .args(["token", "remove", "alice"])
        .env("CODE_SANDBOX_HOME", &home)
        .env_remove("CODE_SANDBOX_TOKENS")
        .output()
        .expect("token remove");
    assert!(out.status.success());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .env("CODE_SANDBOX_HOME", &home)
        .env("CODE_SANDBOX_TRANSPORT", "http")
        .env("CODE_SANDBOX_LISTEN", "127.0.0.1:0")
        .env_remove("CODE_SANDBOX_TOKENS")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("serve");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "served with an empty tokens file: {said}");
    assert!(said.contains("holds no token"), "{said}");
}

/// A home sharing the installed runtime and its compiled interpreter, but with no warm image
/// yet: a server started there builds it (about a minute).
fn home_without_warm_image() -> std::path::PathBuf {
    crate::warm::home_sharing_the_runtime(false).0
}

/// Item 4: once the log says the warm image is ready, the next sandbox (the first of this
/// start included) has pandas imported already: on a start that builds the image, and on
/// starts that find it built.
#[tokio::test]
async fn the_first_sandbox_after_the_warm_image_is_ready_starts_from_it() {
    let building = home_without_warm_image();
    let homes = [Some(building.clone()), None, None];
    for (round, home) in homes.iter().enumerate() {
        let log = common::private_home().join("server.log");
        let log_s = log.display().to_string();
        let home_s = home.as_ref().map(|h| h.display().to_string());
        let mut envs = vec![(LOG_TO, log_s.as_str()), ("RUST_LOG", "info")];
        if let Some(h) = &home_s {
            envs.push(("CODE_SANDBOX_HOME", h));
        }
        let s = Server::start_with(&envs).await;
        let began = Instant::now();
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("warm image ready") || text.contains("warm image shipped") {
                break;
            }
            // A bound on a hang, not on speed: the build shares two cores with the other
            // tests (and, in CI, with the Windows build beside them).
            assert!(
                began.elapsed() < Duration::from_secs(600),
                "no warm image: {text}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let sb = s.create().await;
        let v = s
            .run_ok(
                &sb,
                "import sys\n('pandas' in sys.modules, 'matplotlib.pyplot' in sys.modules)",
            )
            .await;
        assert_eq!(v["result"], "(True, True)", "start {round}: {v}");
        let (_, v, _) = s
            .call_json(
                "create_run_close",
                json!({"code": "import sys\n'pandas' in sys.modules"}),
            )
            .await;
        assert_eq!(v["result"], "True", "start {round}, a second sandbox: {v}");
        s.stop().await;
    }
    let _ = std::fs::remove_dir_all(building);
}

/// Item 6: without pip, a first start from source says so once, in the words the
/// troubleshooting page quotes.
#[test]
fn a_missing_pip_is_said_once_as_the_guide_quotes_it() {
    let home = std::env::temp_dir().join(format!("mcs-nopip-{}", uuid::Uuid::new_v4().simple()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .arg("install-runtime")
        .env("CODE_SANDBOX_HOME", &home)
        .env("PATH", "")
        .output()
        .expect("run install-runtime");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    let wheel = &mcp_code_sandbox::runtime::manifest().wheel;
    let quoted = format!(
        "could not run pip to download {}=={}: No such file or directory (os error 2)",
        wheel.name, wheel.version
    );
    assert!(said.contains(&quoted), "{said}");
    assert_eq!(said.matches("(os error 2)").count(), 1, "{said}");
    let guide = std::fs::read_to_string(common::repo_root().join("docs/troubleshooting.md")).unwrap();
    assert!(guide.contains(&quoted), "the guide quotes another message");
    let _ = std::fs::remove_dir_all(home);
}

/// Item 1: the two requests Claude's clients send today that a strict server refuses, as they
/// are sent, and what stays refused.
#[tokio::test(flavor = "multi_thread")]
async fn claudes_clients_quirks_are_accepted_and_nothing_else() {
    let r = Remote::start(&["alice"], &[]).await;
    let t = r.token("alice").to_string();
    // Claude Code: server/discover, then initialize still carrying the 2026-07-28 header.
    let (status, v) = raw(
        &r.url,
        &t,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "server/discover"),
        ],
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta2026()}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = raw(
        &r.url,
        &t,
        &[("MCP-Protocol-Version", "2026-07-28")],
        json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "claude-code", "version": "2"}}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["protocolVersion"], "2025-11-25", "{v}");

    // Claude's connectors: a 2025-11-25 header on a stateless 2026-07-28 call.
    let (status, v) = raw(
        &r.url,
        &t,
        &[("MCP-Protocol-Version", "2025-11-25")],
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "create_run_close", "arguments": {"code": "6 * 7"}, "_meta": meta2026()}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["structuredContent"]["result"], "42", "{v}");
    // ... naming a sandbox, which that revision would also want in `Mcp-Param-Sandbox-Id`.
    let (status, v) = raw(
        &r.url,
        &t,
        &[("MCP-Protocol-Version", "2025-11-25")],
        json!({"jsonrpc": "2.0", "id": 30, "method": "tools/call", "params": {"name": "create_sandbox", "arguments": {}, "_meta": meta2026()}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let id = v["result"]["structuredContent"]["sandbox_id"].clone();
    let (status, v) = raw(
        &r.url,
        &t,
        &[("MCP-Protocol-Version", "2025-11-25")],
        json!({"jsonrpc": "2.0", "id": 31, "method": "tools/call", "params": {"name": "execute_code", "arguments": {"code": "6 * 8", "sandbox_id": id}, "_meta": meta2026()}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["structuredContent"]["result"], "48", "{v}");

    // Still refused: a 2026 header whose body says otherwise, and a mismatched Mcp-Method.
    let mut later = meta2026();
    later["io.modelcontextprotocol/protocolVersion"] = json!("2027-01-01");
    let (status, v) = raw(
        &r.url,
        &t,
        &[("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "create_run_close")],
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "create_run_close", "arguments": {"code": "1"}, "_meta": later}}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    let (status, v) = raw(
        &r.url,
        &t,
        &[("MCP-Protocol-Version", "2025-11-25"), ("Mcp-Method", "tools/list")],
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "create_run_close", "arguments": {"code": "1"}, "_meta": meta2026()}}),
    )
    .await;
    assert_eq!(status, 400, "a client's own Mcp-Method that disagrees: {v}");
    assert_eq!(v["error"]["code"], -32020, "{v}");
    r.terminate().await;
}
