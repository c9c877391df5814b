//! Host safety: deep trees that must not crash removal, a memory budget for all sandboxes
//! together, interpreters whose own machinery the code broke, and the smaller cases of
//! issue 12. After each case the server must answer `1+1`, another sandbox must be untouched,
//! and the host folders and memory must be back where they were.

use crate::common;

use std::time::Duration;

use common::Server;
use serde_json::json;

/// Wraps a folder in a new one, over and over: `depth` levels with short paths throughout.
fn deep_tree_code(depth: usize) -> String {
    format!(
        "import os\nos.mkdir('d')\nopen('d/leaf.txt', 'w').write('x')\nfor i in range({depth}):\n    os.mkdir('n')\n    os.rename('d', 'n/d')\n    os.rename('n', 'd')\nos.symlink('..', 'd/loop')\n'built'"
    )
}

/// A new sandbox holding a tree `depth` folders deep.
async fn deep_tree_sandbox(s: &Server, depth: usize) -> String {
    let id = s.create().await;
    let (err, v, _) = s
        .call_json(
            "execute_code",
            json!({"sandbox_id": id, "code": deep_tree_code(depth), "timeout_seconds": 240}),
        )
        .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], "'built'");
    id
}

/// The invariants every case ends with.
async fn still_sound(s: &Server, other: &str, gone: &[&str]) {
    let (err, v) = s.exec(other, "witness + 1").await;
    assert!(!err, "the other sandbox is untouched: {v}");
    assert_eq!(v["result"], "42");
    let id = s.create().await;
    let v = s.run_ok(&id, "1+1").await;
    assert_eq!(v["result"], "2");
    for g in gone {
        // The folders leave the home at once; their deletion from the trash runs in the
        // background, and on a loaded machine it may still be under way.
        assert!(!s.workspace(g).exists(), "the folder of {g} left the home");
        assert!(
            !s.home.join("scratch").join(g).exists(),
            "the scratch of {g} left the home"
        );
        assert!(
            emptied(&s.home, g).await,
            "the folders of {g} are deleted from the trash"
        );
    }
    s.call_json("close_sandbox", json!({"sandbox_id": id})).await;
}

/// Whether a server's trash (`trash/<server>/<id>`) still holds something of sandbox `id`.
fn in_trash(home: &std::path::Path, id: &str) -> bool {
    std::fs::read_dir(home.join("trash"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join(id).exists())
}

/// Waits (up to two minutes: a deep tree on a busy disk) for the trash to hold nothing of `id`.
async fn emptied(home: &std::path::Path, id: &str) -> bool {
    for _ in 0..480 {
        if !in_trash(home, id) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

async fn witness(s: &Server) -> String {
    let id = s.create().await;
    s.run_ok(&id, "witness = 41").await;
    id
}

#[tokio::test]
async fn a_very_deep_tree_is_removed_by_close_and_by_create_run_close() {
    let s = Server::start().await;
    let other = witness(&s).await;

    let id = deep_tree_sandbox(&s, 12_000).await;
    let _ = s.ok("close_sandbox", json!({"sandbox_id": id})).await;
    still_sound(&s, &other, &[&id]).await;

    let v = s
        .ok(
            "create_run_close",
            json!({"code": deep_tree_code(12_000), "timeout_seconds": 240}),
        )
        .await;
    let gone = v["sandbox_id"].as_str().unwrap().to_string();
    still_sound(&s, &other, &[&gone]).await;
    s.stop().await;
}

/// A server on `home` that deletes sandboxes idle for `idle` seconds, logging at info to a file
/// of its own (read by the test, so a failure can say what the server did).
#[cfg(target_os = "linux")]
async fn idle_server_logged(home: &std::path::Path, idle: &str, name: &str) -> (Server, std::path::PathBuf) {
    let log = std::env::temp_dir().join(format!("mcs-{name}-{}.log", std::process::id()));
    let log_s = log.to_str().unwrap().to_string();
    let s = Server::start_with(&[
        ("CODE_SANDBOX_HOME", home.to_str().unwrap()),
        ("CODE_SANDBOX_IDLE_SECONDS", idle),
        ("RUST_LOG", "info"),
        (common::LOG_TO, &log_s),
    ])
    .await;
    (s, log)
}

/// Waits (up to a minute) for the process to exit; whether it did.
#[cfg(target_os = "linux")]
async fn exited(pid: u32) -> bool {
    for _ in 0..600 {
        if !process_alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Closes the client (stdin), waits for the server to exit, and checks it ended its shutdown
/// itself (the client kills a server that takes more than a few seconds) with the folders of
/// `id` gone from the home.
#[cfg(target_os = "linux")]
async fn stop_cleanly(s: Server, log: &std::path::Path, id: &str) {
    let (home, pid) = (s.home.clone(), s.pid.expect("pid"));
    s.stop().await;
    let gone = exited(pid).await;
    let said = std::fs::read_to_string(log).unwrap_or_default();
    assert!(gone, "the server exited after its client left:\n{said}");
    assert!(
        said.contains("shut down in"),
        "the server finished its shutdown before the client lost patience; it said:\n{said}"
    );
    assert!(
        !home.join("sandboxes").join(id).exists(),
        "the deep tree left the home; the server said:\n{said}"
    );
    assert!(!home.join("scratch").join(id).exists(), "its scratch too");
    let _ = std::fs::remove_file(log);
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn deep_trees_are_removed_on_idle_expiry_on_shutdown_and_after_a_kill() {
    // Idle expiry. The server's log is kept: if shutdown leaves the tree, it says why.
    let home = common::private_home();
    let (s, log) = idle_server_logged(&home, "2", "deep").await;
    let id = deep_tree_sandbox(&s, 5_000).await;
    let mut removed = false;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if !s.workspace(&id).exists() {
            removed = true;
            break;
        }
    }
    assert!(removed, "idle expiry removed the deep tree");
    assert!(emptied(&home, &id).await, "and deleted it from the trash");
    let (err, _, text) = s
        .call_json("execute_code", json!({"sandbox_id": id, "code": "1"}))
        .await;
    assert!(err && text.contains("CODE_SANDBOX_IDLE_SECONDS"), "{text}");

    // Shutdown (stdin closes): the tree leaves the home before the process exits, and is
    // deleted by then or by the next start.
    let id = deep_tree_sandbox(&s, 5_000).await;
    stop_cleanly(s, &log, &id).await;
    let s = Server::start_with(&[("CODE_SANDBOX_HOME", home.to_str().unwrap())]).await;
    assert!(emptied(&home, &id).await, "the next start emptied the trash");
    s.stop().await;

    // kill -9, then the next start cleans up (in a home of its own, so no other test's
    // server cleans up first).
    let envs = [("CODE_SANDBOX_HOME", home.to_str().unwrap())];
    let s = Server::start_with(&envs).await;
    let id = deep_tree_sandbox(&s, 5_000).await;
    let pid = s.pid.expect("pid");
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    // Until it has exited: only then are its owner locks released (tearing down a server's
    // address space can take seconds on a loaded machine).
    assert!(exited(pid).await, "the killed server has exited");
    assert!(s.workspace(&id).exists(), "the killed server left its folder");
    // Its lock on the folder must be free before the next server looks (a server never takes
    // a folder whose owner still holds it).
    let lock = home.join("scratch").join(&id).join("owner.lock");
    let mut free = false;
    for _ in 0..240 {
        let f = std::fs::File::open(&lock).expect("the owner lock file");
        if f.try_lock().is_ok() {
            free = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(free, "the killed server's lock on its folder was released");
    let s2 = Server::start_with(&envs).await;
    let other = witness(&s2).await;
    still_sound(&s2, &other, &[&id]).await;
    s2.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_deletion_under_way_when_the_server_stops_is_cut_short_and_finished_by_the_next_start() {
    // The idle reaper begins deleting a deep tree; the client leaves at that moment. The
    // server must not keep the client waiting for the whole tree (it would be killed half-way)
    // nor leave it where the sandbox's files were: the tree is in the trash, and the next
    // start deletes what is left.
    let home = common::private_home();
    let (s, log) = idle_server_logged(&home, "1", "reap").await;
    let id = deep_tree_sandbox(&s, 20_000).await;
    let deleting = format!("deleting sandbox {id}");
    let mut begun = false;
    for _ in 0..400 {
        if std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(&deleting)
        {
            begun = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(begun, "the idle reaper began deleting the sandbox");
    stop_cleanly(s, &log, &id).await;
    let s = Server::start_with(&[("CODE_SANDBOX_HOME", home.to_str().unwrap())]).await;
    assert!(emptied(&home, &id).await, "the next start emptied the trash");
    let trash: Vec<_> = std::fs::read_dir(home.join("trash"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        trash.len(),
        2,
        "only the running server's trash and lock: {trash:?}"
    );
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

#[cfg(target_os = "linux")]
fn process_alive(pid: u32) -> bool {
    // A zombie counts as gone: it holds no files.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

/// The server's anonymous resident memory (guest memories are anonymous mappings): unlike the
/// whole RSS it leaves out the compiled interpreter's file pages, which a busy machine may
/// have faulted in or not, so what it measures is memory given back or kept.
#[cfg(target_os = "linux")]
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kb: u64 = status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .expect("RssAnon");
    kb / 1024
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn all_sandboxes_together_stay_within_the_memory_budget() {
    let s = Server::start_with(&[("CODE_SANDBOX_TOTAL_MEMORY_MB", "700")]).await;
    let pid = s.pid.expect("pid");
    let other = witness(&s).await;
    let before = rss_mib(pid);

    // Asking for more than WebAssembly or the budget allows is clamped, and said so.
    let (err, v, text) = s.call_json("create_sandbox", json!({"memory_mb": 16384})).await;
    assert!(!err, "{text}");
    assert_eq!(v["limits"]["memory_mb"], 700, "{v}");
    assert!(text.contains("clamped"), "{text}");
    let big = v["sandbox_id"].as_str().unwrap().to_string();
    s.call_json("close_sandbox", json!({"sandbox_id": big})).await;

    // Three sandboxes each hold 300 MB, one after another: together they may not pass 700
    // MiB, so each growth first suspends the idle sandboxes before it (losslessly).
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(s.create_with(json!({"memory_mb": 1024})).await);
    }
    let hold = "blob = bytearray(300_000_000)\nlen(blob)";
    for id in &ids {
        let v = s.run_ok(id, hold).await;
        assert_eq!(v["result"], "300000000", "{v}");
    }
    let peak = rss_mib(pid);
    eprintln!(
        "server RSS: {before} MiB before, {peak} MiB after three sandboxes held 300 MB (budget 700 MiB)"
    );
    assert!(
        peak < before + 700 + 100,
        "resident memory {peak} MiB stays within the budget"
    );
    // Each still has its data: brought back in turn, suspending the others.
    for id in &ids {
        let v = s.run_ok(id, "len(blob)").await;
        assert_eq!(v["result"], "300000000", "{v}");
        assert_eq!(v["state_lost"], false);
    }

    // Only when nothing idle is left is memory refused: one sandbox keeps its 300 MB while it
    // runs, and a fresh one asks for 300 MB more.
    let fresh = s.create_with(json!({"memory_mb": 1024})).await;
    let busy = ids[0].clone();
    let holder = s.call_json(
        "execute_code",
        json!({"sandbox_id": busy, "code": "import time\ntime.sleep(6)\nlen(blob)"}),
    );
    let asker = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        s.exec(&fresh, "more = bytearray(300_000_000)").await
    };
    let ((err, _, text), (refused, v)) = tokio::join!(holder, asker);
    assert!(!err, "{text}");
    assert!(refused, "the budget refused the growth: {v}");
    assert_eq!(v["error"]["name"], "MemoryError", "{v}");
    assert!(
        v["error"]["value"]
            .as_str()
            .unwrap()
            .contains("server-wide memory budget"),
        "the error says which limit: {v}"
    );
    // Memory comes back when sandboxes close: then it fits.
    for id in &ids {
        let (e, _, text) = s.call_json("close_sandbox", json!({"sandbox_id": id})).await;
        assert!(!e, "{text}");
    }
    let v = s.run_ok(&fresh, "more = bytearray(300_000_000)\nlen(more)").await;
    assert_eq!(v["result"], "300000000", "after closing the others it fits: {v}");
    for id in [&fresh] {
        s.call_json("close_sandbox", json!({"sandbox_id": id})).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = rss_mib(pid);
    eprintln!("server RSS after closing them: {after} MiB");
    // The three sandboxes held 300 MB: most of it is given back (what stays is the spare
    // sandbox started meanwhile and the allocator's own keeping).
    assert!(
        peak.saturating_sub(after) >= 250,
        "memory is given back: {before} MiB before, {peak} MiB with the sandboxes, {after} MiB after closing them"
    );
    still_sound(&s, &other, &[]).await;
    s.stop().await;
}

#[tokio::test]
async fn code_that_breaks_the_interpreters_machinery_gets_a_fresh_one() {
    let s = Server::start().await;
    let other = witness(&s).await;
    for breaker in [
        "import sys; sys.displayhook = None",
        "import builtins; builtins.__import__ = None",
        "import sys; sys.modules.clear()",
        "import sys; sys.stderr.close()",
        "import builtins; del builtins.__code_sandbox_after__",
    ] {
        let id = s.create().await;
        let (_, v) = s.exec(&id, &format!("kept = 1\n{breaker}")).await;
        assert_eq!(v["state_lost"], true, "{breaker}: {v}");
        assert!(
            v["notes"]
                .to_string()
                .contains("broke the interpreter's own machinery"),
            "{breaker}: {v}"
        );
        let (_, st, _) = s.call_json("get_sandbox_status", json!({"sandbox_id": id})).await;
        assert_eq!(st["state"], "reset", "{breaker}: the status says so: {st}");
        let (err, v) = s.exec(&id, "1+1").await;
        assert!(!err, "{breaker}: {v}");
        assert_eq!(v["result"], "2", "{breaker}");
        assert_eq!(v["state_lost"], true);
        assert!(
            v["notes"].to_string().contains("machinery"),
            "{breaker}: the reason is kept: {v}"
        );
        let (err, v) = s.exec(&id, "import json; 1/0").await;
        assert!(err);
        assert_eq!(
            v["error"]["name"], "ZeroDivisionError",
            "{breaker}: errors work again: {v}"
        );
        assert_eq!(v["state_lost"], false);
        s.call_json("close_sandbox", json!({"sandbox_id": id})).await;
    }
    // Replacing a hook with a working one of your own is not breaking anything.
    let id = s.create().await;
    let v = s
        .run_ok(&id, "import sys\nseen = []\nsys.displayhook = seen.append\nx = 5")
        .await;
    assert_eq!(v["state_lost"], false, "{v}");
    let (_, v) = s.exec(&id, "x").await;
    assert_eq!(v["state_lost"], false, "{v}");
    still_sound(&s, &other, &[]).await;
    s.stop().await;
}

/// Starts a call without waiting for it.
#[cfg(unix)]
fn spawn_call(
    s: &Server,
    tool: &'static str,
    args: serde_json::Value,
) -> tokio::task::JoinHandle<Result<rmcp::model::CallToolResult, rmcp::ServiceError>> {
    let client = s.client.peer().clone();
    let args = args.as_object().cloned().unwrap_or_default();
    tokio::spawn(async move {
        client
            .call_tool(rmcp::model::CallToolRequestParams::new(tool).with_arguments(args))
            .await
    })
}

#[cfg(unix)]
#[tokio::test]
async fn smaller_cases_each_end_cleanly() {
    let uploads = std::env::temp_dir().join(format!("uploads-{}", std::process::id()));
    std::fs::create_dir_all(&uploads).unwrap();
    let fifo = uploads.join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let s = Server::start_with(&[("CODE_SANDBOX_UPLOAD_DIRS", uploads.to_str().unwrap())]).await;
    let other = witness(&s).await;

    // A FIFO in an allowed folder is refused at once.
    let (err, _, text) = s
        .call_json(
            "upload_file",
            json!({"sandbox_id": other, "source_path": fifo.to_str().unwrap()}),
        )
        .await;
    assert!(err && text.contains("not a regular file"), "{text}");

    // close_sandbox never guesses on a blank id.
    let newest = s.create().await;
    let (err, _, text) = s.call_json("close_sandbox", json!({"sandbox_id": ""})).await;
    assert!(err && text.contains("never guesses"), "{text}");
    let (err, _, _) = s
        .call_json("get_sandbox_status", json!({"sandbox_id": newest}))
        .await;
    assert!(!err, "the newest sandbox is still open");

    // A call cut short by closing its sandbox does not claim the files remain, and an install
    // queued behind the close does not report success.
    let running = spawn_call(
        &s,
        "execute_code",
        json!({"sandbox_id": newest, "code": "import time; time.sleep(20)"}),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let install = spawn_call(
        &s,
        "install_package",
        json!({"sandbox_id": newest, "package_name": "humanize"}),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = s.ok("close_sandbox", json!({"sandbox_id": newest})).await;
    let r = running.await.unwrap().expect("the running call answers");
    let t = common::text_of(&r);
    assert!(t.contains("was closed during this call"), "{t}");
    assert!(!t.contains("remain"), "{t}");
    let r = install.await.unwrap().expect("the install answers");
    assert_eq!(r.is_error, Some(true), "{:?}", r.content);
    assert!(common::text_of(&r).contains("no open sandbox"), "{:?}", r.content);

    still_sound(&s, &other, &[&newest]).await;
    s.stop().await;
    let _ = std::fs::remove_dir_all(&uploads);
}
