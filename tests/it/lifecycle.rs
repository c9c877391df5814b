//! Lifecycle: many sandboxes, idle sandboxes, shutdown and leftovers of a killed server.

use crate::common;

use std::time::Duration;

use common::Server;
use serde_json::json;

/// docs/THREAT-MODEL.md: a flood of create_sandbox calls. Past the live maximum the least
/// recently used idle interpreters are suspended; nothing is refused and nothing is lost.
#[tokio::test]
async fn creating_far_more_sandboxes_than_live_places_never_refuses() {
    let s = Server::start_with(&[("CODE_SANDBOX_MAX_SANDBOXES", "3")]).await;
    let first = s.create().await;
    s.run_ok(&first, "x = 'first'").await;
    for n in 1..300 {
        let (err, _, text) = s.call_json("create_sandbox", json!({})).await;
        assert!(!err, "create {n} was refused: {text}");
    }
    let v = s.ok("get_sandbox_status", json!({})).await;
    assert_eq!(v["total"], 300, "{}", v["total"]);
    let listed = v["sandboxes"].as_array().unwrap();
    assert_eq!(listed.len(), 100, "one page of the most recently used");
    assert_eq!(v["next_offset"], 100);
    let ready = listed.iter().filter(|s| s["state"] == "ready").count();
    assert!(ready <= 3, "at most 3 live interpreters, saw {ready}");
    // The first one was suspended long ago; it comes back with its variable.
    let v = s.run_ok(&first, "x").await;
    assert_eq!(v["result"], "'first'");
    assert_eq!(v["state_lost"], false);
    s.stop().await;
}

#[tokio::test]
async fn idle_sandboxes_are_closed_and_say_so() {
    let s = Server::start_with(&[("CODE_SANDBOX_IDLE_SECONDS", "2")]).await;
    let id = s.create().await;
    s.exec(&id, "x = 1").await;
    let ws = s.workspace(&id);
    assert!(ws.exists());
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (err, _, text) = s
        .call_json("execute_code", json!({"sandbox_id": id, "code": "x"}))
        .await;
    assert!(err);
    assert!(
        text.contains("was deleted on") && text.contains("CODE_SANDBOX_IDLE_SECONDS"),
        "says why and when: {text}"
    );
    assert!(!ws.exists(), "its folder is removed");
    s.stop().await;
}

#[tokio::test]
async fn closing_stdin_removes_every_sandbox_folder() {
    let s = Server::start().await;
    let a = s.create().await;
    let b = s.create().await;
    s.exec(&a, "open('f', 'w').write('x')").await;
    let (wa, wb) = (s.workspace(&a), s.workspace(&b));
    assert!(wa.exists() && wb.exists());
    s.stop().await;
    for _ in 0..50 {
        if !wa.exists() && !wb.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!wa.exists() && !wb.exists(), "shutdown removes the folders");
}

#[tokio::test]
async fn a_killed_servers_leftovers_are_cleaned_at_the_next_start() {
    common::ensure_runtime();
    let home = common::runtime_home();
    // A server that dies without cleaning up: make its folders by hand, stamped with a pid
    // that cannot be running.
    let id = format!("sbx-dead{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let ws = home.join("sandboxes").join(&id);
    let scratch = home.join("scratch").join(&id);
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::create_dir_all(scratch.join("tmp")).unwrap();
    std::fs::write(ws.join("sub/.big.abc.part"), b"partial write").unwrap();
    std::fs::write(scratch.join("owner.pid"), "4194304").unwrap();
    // A live server's folder (this test's own pid) is left alone.
    let live = format!("sbx-live{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    std::fs::create_dir_all(home.join("sandboxes").join(&live)).unwrap();
    std::fs::create_dir_all(home.join("scratch").join(&live)).unwrap();
    std::fs::write(
        home.join("scratch").join(&live).join("owner.pid"),
        std::process::id().to_string(),
    )
    .unwrap();

    let s = Server::start().await;
    let fresh = s.create().await;
    let v = s.run_ok(&fresh, "1+1").await;
    assert_eq!(v["result"], "2");
    assert!(
        !ws.exists() && !scratch.exists(),
        "the dead server's folders are gone"
    );
    assert!(
        home.join("sandboxes").join(&live).exists(),
        "a live server's folder is kept"
    );
    s.stop().await;
    let _ = std::fs::remove_dir_all(home.join("sandboxes").join(&live));
    let _ = std::fs::remove_dir_all(home.join("scratch").join(&live));
}

/// Sends `tool` and kills the server with SIGKILL `delay` into the call.
async fn kill_during(s: Server, delay: Duration, tool: &str, args: serde_json::Value) {
    let pid = s.pid.expect("the server's pid") as libc::pid_t;
    let serde_json::Value::Object(obj) = args else {
        unreachable!()
    };
    let params = rmcp::model::CallToolRequestParams::new(tool.to_string()).with_arguments(obj);
    let call = s.client.call_tool(params);
    let kill = async {
        tokio::time::sleep(delay).await;
        // SAFETY: plain syscalls on our own child; waitpid reaps it so its pid reads as dead.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    };
    let (_, ()) = tokio::join!(call, kill);
    drop(s);
}

#[tokio::test]
async fn a_kill_mid_write_leaves_the_old_file_or_the_new_one_and_the_next_start_is_clean() {
    let uploads = std::env::temp_dir().join(format!("mcs-up-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&uploads).unwrap();
    let big = "N".repeat(24 << 20);
    std::fs::write(uploads.join("data.txt"), &big).unwrap();
    let home = common::private_home();
    let envs = [
        ("CODE_SANDBOX_UPLOAD_DIRS", uploads.to_str().unwrap()),
        ("CODE_SANDBOX_HOME", home.to_str().unwrap()),
    ];
    let mut dead = Vec::new();
    for (round, delay_ms) in [0u64, 10, 40, 120, 300].into_iter().enumerate() {
        let s = Server::start_with(&envs).await;
        let id = s.create().await;
        let ws = s.workspace(&id);
        let _ = s
            .ok(
                "write_file",
                json!({"sandbox_id": id, "file_path": "data.txt", "content": "OLD"}),
            )
            .await;
        let delay = Duration::from_millis(delay_ms);
        match round % 3 {
            0 => {
                let args = json!({"sandbox_id": id, "file_path": "data.txt", "content": big});
                kill_during(s, delay, "write_file", args).await
            }
            1 => {
                let source = uploads.join("data.txt");
                let args = json!({"sandbox_id": id, "source_path": source.to_str().unwrap(), "destination_path": "data.txt"});
                kill_during(s, delay, "upload_file", args).await
            }
            _ => {
                let args = json!({"sandbox_id": id, "package_name": "faker"});
                kill_during(s, delay, "install_package", args).await
            }
        }
        let now = std::fs::read(ws.join("data.txt")).unwrap();
        assert!(
            now == b"OLD" || now == big.as_bytes(),
            "round {round}: a partial file of {} bytes",
            now.len()
        );
        dead.push((ws, home.join("scratch").join(&id)));
    }
    let s = Server::start_with(&[("CODE_SANDBOX_HOME", home.to_str().unwrap())]).await;
    let id = s.create().await;
    let (err, v) = s.exec(&id, "1+1").await;
    assert!(!err && v["result"] == "2", "{v}");
    for (ws, scratch) in &dead {
        assert!(!ws.exists(), "{} was left behind", ws.display());
        assert!(!scratch.exists(), "{} was left behind", scratch.display());
    }
    s.stop().await;
    let _ = std::fs::remove_dir_all(&uploads);
    let _ = std::fs::remove_dir_all(&home);
}

#[tokio::test]
async fn a_client_that_disconnects_mid_call_stops_the_guest_and_the_server() {
    let s = Server::start().await;
    let id = s.create().await;
    let ws = s.workspace(&id);
    let pid = s.pid.expect("pid") as libc::pid_t;
    let params = rmcp::model::CallToolRequestParams::new("execute_code".to_string()).with_arguments(
        json!({"sandbox_id": id, "code": "while True: pass", "timeout_seconds": 300})
            .as_object()
            .unwrap()
            .clone(),
    );
    let call = s.client.call_tool(params);
    let leave = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // The client goes away while the busy loop runs: its stdin closes.
    tokio::select! {
        _ = call => panic!("the busy loop cannot finish on its own"),
        () = leave => {}
    }
    s.stop().await;
    // The loop had 300 s to run; the server ends long before that, and cleans up.
    let gone = exited(pid).await;
    assert!(gone, "the server kept running its guest after the client left");
    assert!(!ws.exists(), "the sandbox folder was removed");
}

#[tokio::test]
async fn sigterm_and_sigint_close_every_sandbox_and_exit() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let s = Server::start().await;
        let a = s.create().await;
        let b = s.create().await;
        s.exec(&a, "open('f', 'w').write('x')").await;
        let (wa, wb) = (s.workspace(&a), s.workspace(&b));
        let pid = s.pid.expect("pid") as libc::pid_t;
        // One sandbox is busy when the signal comes.
        let params = rmcp::model::CallToolRequestParams::new("execute_code".to_string()).with_arguments(
            json!({"sandbox_id": b, "code": "while True: pass", "timeout_seconds": 300})
                .as_object()
                .unwrap()
                .clone(),
        );
        let call = s.client.call_tool(params);
        let send = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            // SAFETY: a signal to our own child.
            unsafe { libc::kill(pid, signal) };
        };
        let (_, ()) = tokio::join!(call, send);
        let gone = exited(pid).await;
        assert!(gone, "signal {signal}: the server did not exit");
        assert!(
            !wa.exists() && !wb.exists(),
            "signal {signal}: the folders are removed"
        );
        drop(s);
    }
}

/// Waits (up to a minute, a hang guard) for the server process to end.
async fn exited(pid: libc::pid_t) -> bool {
    for _ in 0..600 {
        let mut status = 0;
        // SAFETY: reaps our own child if it exited (the transport may have reaped it already,
        // then it no longer exists); WNOHANG never blocks.
        if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid
            || unsafe { libc::kill(pid, 0) } != 0
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn a_first_call_long_after_start_finds_the_runtime_ready() {
    let s = Server::start().await;
    // The background load finishes before anyone asks for it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let id = s.create().await;
    let (err, v) = s.exec(&id, "1+1").await;
    assert!(!err && v["result"] == "2", "{v}");
    s.stop().await;
}
