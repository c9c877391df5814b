//! Sandboxes that outlive the server: saved at SIGTERM, back under the same id after a
//! restart, fresh with their files when the state is unusable, gone after the retention
//! period, and never touched by a second server on the same home.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::common::{Server, private_home};

pub async fn start(home: &Path, extra: &[(&str, &str)]) -> Server {
    let mut envs = vec![
        ("CODE_SANDBOX_HOME", home.to_str().unwrap()),
        ("CODE_SANDBOX_PERSIST", "true"),
    ];
    envs.extend_from_slice(extra);
    Server::start_with(&envs).await
}

/// Sends `signal` to the server and waits until it has exited.
#[cfg(unix)]
pub async fn signal_and_wait(s: Server, signal: i32) {
    let pid = s.pid.expect("the server's pid") as libc::pid_t;
    tokio::task::spawn_blocking(move || {
        // SAFETY: plain syscalls on our own child; waitpid reaps it.
        unsafe {
            libc::kill(pid, signal);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    })
    .await
    .unwrap();
    drop(s);
}

pub fn saved_dir(home: &Path, id: &str) -> PathBuf {
    home.join("scratch").join(id).join("saved")
}

/// A server with one sandbox holding `x = 41`, pandas imported, a plot drawn (matplotlib then
/// holds its font files open) and a file, stopped by SIGTERM.
#[cfg(unix)]
async fn saved_sandbox(home: &Path) -> String {
    let s = start(home, &[]).await;
    let id = s.create().await;
    s.run_ok(
        &id,
        "import pandas as pd\nimport matplotlib.pyplot as plt\nx = 41\ndf = pd.DataFrame({'a': [1, 2, 3]})\ndf.plot(title='a')\nplt.show()\nopen('kept.txt', 'w').write('files stay')",
    )
    .await;
    signal_and_wait(s, libc::SIGTERM).await;
    assert!(
        saved_dir(home, &id).join("state.bin").is_file(),
        "SIGTERM saved the state"
    );
    id
}

/// A saved state is the image's memory pages, globals and clock, which the compiler does not
/// change: one saved by the plain interpreter comes back under another compile of the same
/// image (fuel metering changes every function's code), so a faster or slower tier can take
/// over a sandbox at its next suspension.
#[cfg(unix)]
#[tokio::test]
async fn a_state_saved_under_one_compile_resumes_under_another() {
    let home = private_home();
    let plain = [("CODE_SANDBOX_WARM_IMAGE", "false")];
    let s = start(&home, &plain).await;
    let id = s.create().await;
    s.run_ok(&id, "import json\nx = {'kept': 41 + 1}").await;
    signal_and_wait(s, libc::SIGTERM).await;
    let metered = [
        ("CODE_SANDBOX_WARM_IMAGE", "false"),
        ("CODE_SANDBOX_FUEL", "10000000000"),
    ];
    crate::common::progress("compiling the fuel-metered interpreter once (about a minute)");
    let s = start(&home, &metered).await;
    let started = std::time::Instant::now();
    let v = loop {
        let (failed, v, text) = s
            .call_json("execute_code", json!({"sandbox_id": id, "code": "json.dumps(x)"}))
            .await;
        if !(failed && text.contains("not ready")) || started.elapsed().as_secs() > 600 {
            assert!(!failed, "{text}");
            break v;
        }
    };
    assert_eq!(v["result"], "'{\"kept\": 42}'", "{v}");
    assert_eq!(v["state_lost"], false, "{v}");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

#[cfg(unix)]
#[tokio::test]
async fn state_survives_a_sigterm_restart() {
    let home = private_home();
    let id = saved_sandbox(&home).await;
    let s = start(&home, &[]).await;
    let v = s.ok("get_sandbox_status", json!({"sandbox_id": id})).await;
    assert_eq!(v["state"], "paused", "listed again, not yet restored: {v}");
    let v = s
        .run_ok(&id, "(x, int(df.a.sum()), open('kept.txt').read())")
        .await;
    assert_eq!(v["result"], "(41, 6, 'files stay')");
    assert_eq!(v["state_lost"], false);
    let v = s.ok("get_sandbox_status", json!({"sandbox_id": id})).await;
    assert_eq!(v["state"], "ready");
    // Closing deletes it for good: the next start does not bring it back.
    s.ok("close_sandbox", json!({"sandbox_id": id})).await;
    signal_and_wait(s, libc::SIGTERM).await;
    let s = start(&home, &[]).await;
    let (err, _, _) = s.call_json("get_sandbox_status", json!({"sandbox_id": id})).await;
    assert!(err, "a closed sandbox stays closed");
    assert!(!home.join("sandboxes").join(&id).exists());
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

#[cfg(unix)]
#[tokio::test]
async fn a_damaged_state_comes_back_fresh_with_its_files_and_a_note() {
    let home = private_home();
    let id = saved_sandbox(&home).await;
    let state = saved_dir(&home, &id).join("state.bin");
    let bytes = std::fs::read(&state).unwrap();
    std::fs::write(&state, &bytes[..bytes.len() / 3]).unwrap();
    let s = start(&home, &[]).await;
    let v = s.run_ok(&id, "('x' in globals(), open('kept.txt').read())").await;
    assert_eq!(v["result"], "(False, 'files stay')");
    assert_eq!(v["state_lost"], true, "{v}");
    let (_, _, text) = s
        .call_json("execute_code", json!({"sandbox_id": id, "code": "1"}))
        .await;
    assert!(!text.contains("damaged"), "the note comes once: {text}");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

#[cfg(unix)]
#[tokio::test]
async fn a_kill_keeps_the_files_and_the_last_saved_state() {
    let home = private_home();
    let id = saved_sandbox(&home).await;
    let s = start(&home, &[]).await;
    s.run_ok(&id, "x = 99\nopen('later.txt', 'w').write('after the save')")
        .await;
    // A save that was cut off: a partial file beside the last complete state.
    std::fs::write(
        saved_dir(&home, &id).join(".state.bin.tmp"),
        b"MCSSTATE1\npartial",
    )
    .unwrap();
    signal_and_wait(s, libc::SIGKILL).await;
    let s = start(&home, &[]).await;
    let v = s.run_ok(&id, "import os\n(x, sorted(os.listdir('.')))").await;
    assert_eq!(
        v["result"], "(41, ['kept.txt', 'later.txt'])",
        "the variables of the last save, every file"
    );
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

#[cfg(unix)]
#[tokio::test]
async fn a_sandbox_unused_past_the_retention_period_is_deleted() {
    let home = private_home();
    let id = saved_sandbox(&home).await;
    let meta_path = saved_dir(&home, &id).join("meta.json");
    let mut meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["last_used"] = json!((chrono::Utc::now() - chrono::Duration::days(15)).to_rfc3339());
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    let s = start(&home, &[("CODE_SANDBOX_RETAIN_DAYS", "14")]).await;
    let (err, _, text) = s.call_json("get_sandbox_status", json!({"sandbox_id": id})).await;
    assert!(err, "{text}");
    assert!(
        text.contains("was deleted on") && text.contains("CODE_SANDBOX_RETAIN_DAYS"),
        "says why and when: {text}"
    );
    assert!(!home.join("sandboxes").join(&id).exists(), "its folders are gone");
    assert!(!home.join("scratch").join(&id).exists());
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

#[cfg(unix)]
#[tokio::test]
async fn two_servers_on_one_home_never_touch_each_others_sandboxes() {
    let home = private_home();
    let a = start(&home, &[]).await;
    let id = a.create().await;
    a.run_ok(&id, "x = 'mine'\nopen('a.txt', 'w').write('a')").await;
    let b = start(&home, &[]).await;
    let v = b.ok("get_sandbox_status", json!({})).await;
    assert_eq!(v["sandboxes"], json!([]), "b does not list a's sandbox: {v}");
    let (err, _, _) = b
        .call_json("execute_code", json!({"sandbox_id": id, "code": "x"}))
        .await;
    assert!(err, "nor run code in it");
    signal_and_wait(b, libc::SIGTERM).await;
    assert!(
        home.join("sandboxes").join(&id).join("a.txt").exists(),
        "b left it alone"
    );
    assert_eq!(a.run_ok(&id, "x").await["result"], "'mine'");
    signal_and_wait(a, libc::SIGTERM).await;
    let c = start(&home, &[]).await;
    assert_eq!(
        c.run_ok(&id, "x").await["result"],
        "'mine'",
        "once a is gone, the next server takes it over"
    );
    c.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

#[tokio::test]
async fn an_idle_sandbox_is_suspended_and_resumes_on_use() {
    let home = private_home();
    let s = start(&home, &[("CODE_SANDBOX_IDLE_SECONDS", "1")]).await;
    let id = s.create().await;
    s.run_ok(&id, "x = [1, 2, 3]").await;
    let mut state = String::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let v = s.ok("get_sandbox_status", json!({"sandbox_id": id})).await;
        state = v["state"].as_str().unwrap_or_default().to_string();
        if state == "paused" {
            break;
        }
    }
    assert_eq!(state, "paused", "suspended instead of closed");
    let v = s.run_ok(&id, "sum(x)").await;
    assert_eq!(v["result"], "6");
    assert_eq!(v["state_lost"], false);
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

#[tokio::test]
async fn closing_stdin_saves_too() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let home = private_home();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .env("CODE_SANDBOX_HOME", &home)
        .env("CODE_SANDBOX_PERSIST", "true")
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "execute_code", "arguments": {"code": "x = 7"}}});
    for msg in [
        init,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call,
    ] {
        stdin.write_all(format!("{msg}\n").as_bytes()).await.unwrap();
    }
    let mut id = String::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 2 {
            id = v["result"]["structuredContent"]["sandbox_id"]
                .as_str()
                .unwrap()
                .to_string();
            break;
        }
    }
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the server exits when its stdin closes")
        .unwrap();
    assert!(status.success());
    assert!(saved_dir(&home, &id).join("state.bin").is_file());
    let s = start(&home, &[]).await;
    assert_eq!(s.run_ok(&id, "x").await["result"], "7");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

/// Rewrites the JSON header of a saved state file (magic line, length, header, pages).
#[cfg(unix)]
fn edit_state_header(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let bytes = std::fs::read(path).unwrap();
    let magic = b"MCSSTATE1\n".len();
    let len = u64::from_le_bytes(bytes[magic..magic + 8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[magic + 8..magic + 8 + len]).unwrap();
    edit(&mut header);
    let new = serde_json::to_vec(&header).unwrap();
    let mut out = bytes[..magic].to_vec();
    out.extend_from_slice(&(new.len() as u64).to_le_bytes());
    out.extend_from_slice(&new);
    out.extend_from_slice(&bytes[magic + 8 + len..]);
    std::fs::write(path, out).unwrap();
}

/// Host-side tampering with saved sandboxes (defence in depth): another sandbox's state, a
/// clock at the end of time, limits far past what a request could ask for.
#[cfg(unix)]
#[tokio::test]
async fn tampered_saved_sandboxes_are_refused_or_clamped() {
    let home = private_home();
    let s = start(&home, &[]).await;
    let (a, b, c) = (s.create().await, s.create().await, s.create().await);
    for (id, v) in [(&a, "'a'"), (&b, "'b'"), (&c, "'c'")] {
        s.run_ok(id, &format!("x = {v}")).await;
    }
    signal_and_wait(s, libc::SIGTERM).await;
    // a's state copied over b's; c's clock set to i64::MAX; b's limits raised past any request.
    std::fs::copy(
        saved_dir(&home, &a).join("state.bin"),
        saved_dir(&home, &b).join("state.bin"),
    )
    .unwrap();
    edit_state_header(&saved_dir(&home, &c).join("state.bin"), |h| {
        h["clock_ns"] = json!(i64::MAX);
    });
    let meta_path = saved_dir(&home, &b).join("meta.json");
    let mut meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["limits"]["memory_mb"] = json!(100_000);
    meta["limits"]["timeout_seconds"] = json!(100_000);
    meta["limits"]["disk_bytes"] = json!(1_000_000_000_000_000u64);
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();

    let s = start(&home, &[("CODE_SANDBOX_MEMORY_MB", "256")]).await;
    let v = s.ok("get_sandbox_status", json!({"sandbox_id": b})).await;
    assert!(v["limits"]["memory_mb"].as_u64().unwrap() <= 4096, "{v}");
    assert!(v["limits"]["timeout_seconds"].as_u64().unwrap() <= 300, "{v}");
    assert!(v["limits"]["disk_bytes"].as_u64().unwrap() <= 1024 << 20, "{v}");
    for id in [&b, &c] {
        let (err, v, text) = s
            .call_json("execute_code", json!({"sandbox_id": id, "code": "x"}))
            .await;
        assert!(err || v["error"]["name"] == "NameError", "{text}");
        assert_eq!(v["state_lost"], true, "{id}: {text}");
        assert!(text.contains("saved state"), "says why: {text}");
        assert_ne!(v["result"], "'a'", "a's variables never appear in b");
    }
    // a itself is untouched.
    let v = s.run_ok(&a, "x").await;
    assert_eq!(v["result"], "'a'");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

/// SIGTERM while a call runs: the call is stopped and answers that the server is shutting
/// down; after the restart the sandbox says its variables were lost, and why, never a bare
/// NameError and never an older state passed off as current.
#[cfg(unix)]
#[tokio::test]
async fn sigterm_during_a_call_answers_it_and_the_restart_says_what_was_lost() {
    let home = private_home();
    let s = std::sync::Arc::new(start(&home, &[]).await);
    let id = s.create().await;
    s.run_ok(&id, "keep = 'before'\nopen('kept.txt', 'w').write('file')")
        .await;
    let running = {
        let (s, id) = (s.clone(), id.clone());
        tokio::spawn(async move {
            s.call_json(
                "execute_code",
                json!({"sandbox_id": id, "code": "import time\ntime.sleep(30)"}),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pid = s.pid.expect("pid") as libc::pid_t;
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let (err, v, text) = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the stopped call is answered")
        .unwrap();
    assert!(err, "a stopped call is an error result: {text}");
    assert_eq!(v["error"]["name"], "ServerShutdown", "{v}");
    assert_eq!(v["state_lost"], true, "{v}");
    assert!(text.contains("shutting down"), "says why: {text}");
    tokio::task::spawn_blocking(move || unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) })
        .await
        .unwrap();

    let s = start(&home, &[]).await;
    let (_, v, text) = s
        .call_json(
            "execute_code",
            json!({"sandbox_id": id, "code": "(open('kept.txt').read(), keep)"}),
        )
        .await;
    assert_eq!(v["state_lost"], true, "{text}");
    assert!(
        text.contains("server shut down while a call was running"),
        "{text}"
    );
    let v = s.run_ok(&id, "open('kept.txt').read()").await;
    assert_eq!(v["result"], "'file'", "files are kept");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}
