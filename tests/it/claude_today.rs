//! Claude's clients as they are today, and what a newcomer found (issue 47): the home's tokens
//! file served by default, the first sandbox after a start warm.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{self, LOG_TO, Server};
use crate::oauth::attempt;
use crate::remote_harness::Remote;

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
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
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

/// Item 4: once the log says the warm image is ready, the next sandbox (the first of this
/// start included) has pandas imported already.
#[tokio::test]
async fn the_first_sandbox_after_the_warm_image_is_ready_starts_from_it() {
    for round in 0..3 {
        let log = common::private_home().join("server.log");
        let log_s = log.display().to_string();
        let s = Server::start_with(&[(LOG_TO, &log_s), ("RUST_LOG", "info")]).await;
        let began = Instant::now();
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("warm image ready") || text.contains("warm image shipped") {
                break;
            }
            assert!(
                began.elapsed() < Duration::from_secs(180),
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
