//! A first start from a bundle, as Claude Desktop makes it: the runtime and the warm image the
//! bundle ships (compiled for the baseline CPU) are checked and used where they lie, so the
//! first call answers without compiling, pandas is imported already in the first sandbox, and
//! the home holds neither; a shipped image that does not match its record is never run: the
//! interpreter is compiled instead while calls are told how it goes (each answered within a
//! client's 60 s, the same call made again runs once it is done), and the warm image is
//! built into the home.
//!
//! The bundle here is laid out by hand (a copy of the binary, the installed runtime linked in,
//! the warm image as `cargo xtask bundle` ships it), so each test can damage its own copy; the
//! real bundle runs in `bundle.rs`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::ServerResult;
use rmcp::service::PeerRequestOptions;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

use crate::common;
use crate::progress::{Recorder, exec_request};

/// A bundle's `server/` folder, laid out as `cargo xtask bundle` lays it out.
struct FakeBundle {
    root: PathBuf,
    /// The warm image in the bundle's `runtime/` folder.
    compiled: PathBuf,
}

impl FakeBundle {
    async fn new() -> FakeBundle {
        // Building the bundle makes the baseline-CPU warm image in the shared cache (a minute
        // or two of both cores, once); every test then links that file.
        common::ensure_bundle();
        let home = common::runtime_home();
        let layout = mcp_code_sandbox::runtime::Layout::new(&home);
        let m = mcp_code_sandbox::runtime::manifest();
        let files = layout.installed(m).expect("the runtime is installed");
        let root = std::env::temp_dir().join(format!("mcs-bundle-{}", uuid::Uuid::new_v4().simple()));
        let runtime = root.join("server").join("runtime");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::copy(
            env!("CARGO_BIN_EXE_mcp-code-sandbox"),
            root.join("server").join("mcp-code-sandbox"),
        )
        .unwrap();
        let runtime_name = files.dir.file_name().unwrap();
        crate::common::link_dir(&files.dir, &runtime.join(runtime_name)).unwrap();
        crate::common::link_dir(&layout.wheels_dir(), &root.join("server").join("wheels")).unwrap();
        let plain = mcp_code_sandbox::wasm::direct::install_and_load(&layout, None, false, &|_| {})
            .expect("the interpreter loads");
        let compiled = mcp_code_sandbox::wasm::direct::ship_warm_image(
            &plain,
            &layout,
            &files,
            &mcp_code_sandbox::wasm::direct::Target::host().expect("a known platform"),
            &runtime,
            &layout.cache_dir(),
        )
        .await
        .expect("the baseline-CPU warm image is made");
        FakeBundle { root, compiled }
    }

    /// Replaces the warm image with a copy that has one byte changed, leaving its record as
    /// it was.
    fn damage_compiled(&self) {
        let mut bytes = std::fs::read(&self.compiled).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x55;
        std::fs::remove_file(&self.compiled).unwrap();
        std::fs::write(&self.compiled, bytes).unwrap();
    }

    fn exe(&self) -> PathBuf {
        self.root.join("server").join("mcp-code-sandbox")
    }

    /// The server as a bundle's manifest starts it: nothing on `PATH` (so no pip to fall back
    /// on), a home of its own; with its stderr collected as it comes.
    fn spawn(&self, home: &Path) -> (TokioChildProcess, Arc<Mutex<String>>) {
        let empty_path = self.root.join("bin");
        std::fs::create_dir_all(&empty_path).unwrap();
        let mut cmd = tokio::process::Command::new(self.exe());
        cmd.env_clear()
            .env("CODE_SANDBOX_HOME", home)
            .env("PATH", &empty_path)
            .env("RUST_LOG", "info");
        let (transport, stderr) = TokioChildProcess::builder(cmd)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        (transport, collect(stderr))
    }
}

impl Drop for FakeBundle {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The compiled modules a home holds: the interpreter (`python-*`) and warm images (`warm-*`).
fn compiled_in(home: &Path) -> Vec<String> {
    std::fs::read_dir(home.join("cache"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| (n.starts_with("python-") || n.starts_with("warm-")) && n.ends_with(".cwasm"))
        .collect()
}

/// Everything the server wrote to stderr, collected as it comes.
fn collect(stderr: Option<tokio::process::ChildStderr>) -> Arc<Mutex<String>> {
    let log = Arc::new(Mutex::new(String::new()));
    if let Some(mut stderr) = stderr {
        let log = log.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut buf = vec![0u8; 8192];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                log.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
    }
    log
}

#[tokio::test]
async fn a_first_start_from_a_bundle_answers_from_the_shipped_warm_image_and_copies_nothing() {
    let bundle = FakeBundle::new().await;
    let home = bundle.root.join("home");
    let (transport, log) = bundle.spawn(&home);
    let client = ().serve(transport).await.unwrap();
    let s = common::Server {
        client,
        home: home.clone(),
        pid: None,
    };
    // The very first call, made at once, answers: nothing to retry.
    let v = s
        .ok(
            "execute_code",
            json!({"code": "import sys\n(1 + 1, sys.version_info[:2])"}),
        )
        .await;
    assert_eq!(v["result"], "(2, (3, 15))");
    let plot = s
        .ok(
            "execute_code",
            json!({"code": "import pandas as pd, matplotlib.pyplot as plt\npd.DataFrame({'x': [1, 2, 3]}).plot()\nplt.show()"}),
        )
        .await;
    assert_eq!(plot["images"], 1, "{plot}");
    // A new sandbox starts from the warm image: pandas is there already.
    let sb = s.create().await;
    let v = s.run_ok(&sb, "import sys\n'pandas' in sys.modules").await;
    assert_eq!(v["result"], "True", "{v}");
    assert!(
        compiled_in(&home).is_empty(),
        "nothing was compiled into the home: {:?}",
        compiled_in(&home)
    );
    assert!(
        !home.join("runtime").exists(),
        "the runtime was used where the bundle keeps it, not copied into the home"
    );
    s.stop().await;
    let log = log.lock().unwrap().clone();
    assert!(
        log.contains("the warm image shipped with the bundle is in use"),
        "{log}"
    );
    assert!(!log.contains("compiling the interpreter"), "{log}");
    assert!(!log.contains("preparing the warm image"), "{log}");
}

#[tokio::test]
async fn a_damaged_shipped_warm_image_is_never_run_calls_answer_while_it_compiles_and_the_image_is_rebuilt() {
    let bundle = FakeBundle::new().await;
    bundle.damage_compiled();
    let home = bundle.root.join("home");
    let (transport, log) = bundle.spawn(&home);
    let rec = Recorder::default();
    let client = rec.clone().serve(transport).await.unwrap();
    // A minute of compiling on two cores, longer beside other tests: each call answers within
    // the 60 s Claude's clients wait (still being prepared), and one made again runs.
    let mut r = None;
    for _ in 0..15 {
        let handle = client
            .send_cancellable_request(exec_request("1+1"), PeerRequestOptions::no_options())
            .await
            .unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(60), handle.await_response())
            .await
            .expect("the call answers within a client's 60 s")
            .unwrap();
        let ServerResult::CallToolResult(answer) = resp else {
            panic!("unexpected {resp:?}")
        };
        if answer.is_error != Some(true) {
            r = Some(answer);
            break;
        }
        let text = common::text_of(&answer);
        assert!(text.contains("still being prepared"), "{text}");
    }
    let r = r.expect("a call ran once the interpreter was compiled");
    assert_eq!(r.structured_content.unwrap()["result"], "2");
    let seen = rec.seen.lock().unwrap().clone();
    assert!(
        seen.iter().any(|p| p
            .message
            .as_deref()
            .unwrap_or("")
            .contains("compiling the interpreter")),
        "the waiting call was told what is happening: {seen:?}"
    );
    assert!(
        seen.windows(2)
            .filter(|w| w[0].progress_token == w[1].progress_token)
            .all(|w| w[1].progress > w[0].progress),
        "progress increases within each call: {seen:?}"
    );
    assert!(
        compiled_in(&home).iter().any(|n| n.starts_with("python-")),
        "the interpreter was compiled into the home instead: {:?}",
        compiled_in(&home)
    );
    // Then the warm image is built into the home, in the background.
    for _ in 0..600 {
        if log.lock().unwrap().contains("warm image ready") {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(
        compiled_in(&home).iter().any(|n| n.starts_with("warm-")),
        "the warm image was built into the home: {:?}",
        compiled_in(&home)
    );
    let _ = client.cancel().await;
    let log = log.lock().unwrap().clone();
    assert!(
        log.contains("not using the warm image shipped") && log.contains("SHA-256"),
        "the log says why the shipped one was refused: {log}"
    );
    assert!(
        bundle.compiled.is_file(),
        "the bundle's files are left as they are"
    );
}
