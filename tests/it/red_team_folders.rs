//! What a red team broke in the user's folders (issue 64), against the release binary: a save
//! folder swapped for a link while `save_file` copies, saves held whole in memory, a FIFO in a
//! shared folder, a shared folder that holds the server's own, and a folder past the listing's
//! limit.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Server, link_dir, runtime_home};

/// A fresh folder for a test's host folders, canonical.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mcs-rtf-{tag}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::canonicalize(d).unwrap()
}

/// A line of the server's `/proc/<pid>/status` (`VmRSS`, `Threads`), as a number.
fn status_of(s: &Server, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{}/status", s.pid.expect("a pid"))).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {text}"))
}

async fn save(s: &Server, id: &str, path: &str, dest: &Path) -> (bool, Value, String) {
    s.call_json(
        "save_file",
        json!({"sandbox_id": id, "path": path, "destination": dest.to_str().unwrap()}),
    )
    .await
}

/// Every name under `dir`, however deep.
fn everything_in(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        out.push(e.path());
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(everything_in(&e.path()));
        }
    }
    out
}

#[tokio::test]
async fn a_save_lands_in_the_folder_it_checked_while_that_folder_is_swapped_for_a_link() {
    let root = scratch("swap");
    let allowed = root.join("allowed");
    let out = allowed.join("out");
    let outside = root.join("outside");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let s = Server::start_with(&[("CODE_SANDBOX_SAVE_DIRS", allowed.to_str().unwrap())]).await;
    let id = s.create().await;
    s.run_ok(&id, "open('big.bin', 'wb').write(b'\\x01' * (48 << 20))")
        .await;
    // Something writing in the save folder swaps `out` for a link to a folder outside, and
    // back, as fast as it can.
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (out, outside, stop) = (out.clone(), outside.clone(), stop.clone());
        std::thread::spawn(move || {
            let aside = out.with_extension("real");
            let mut swaps = 0u32;
            while !stop.load(Ordering::Relaxed) {
                std::fs::rename(&out, &aside).unwrap();
                std::os::unix::fs::symlink(&outside, &out).unwrap();
                std::thread::sleep(Duration::from_micros(300));
                std::fs::remove_file(&out).unwrap();
                std::fs::rename(&aside, &out).unwrap();
                std::thread::sleep(Duration::from_micros(300));
                swaps += 1;
            }
            swaps
        })
    };
    let mut saved = Vec::new();
    for i in 0..10 {
        let dest = out.join(format!("big-{i}.bin"));
        let (err, v, text) = save(&s, &id, "big.bin", &dest).await;
        if err {
            // Refused as outside, as changed, or as missing (caught mid-swap): either way
            // nothing was written.
            assert!(
                ["outside the folders", "changed while", "cannot be used"]
                    .iter()
                    .any(|said| text.contains(said)),
                "{text}"
            );
        } else {
            // The folder where the file was written: `out`, or `out` under its other name.
            let moved = out.with_extension("real").join(format!("big-{i}.bin"));
            let at = v["destination"].as_str().unwrap_or_default();
            assert!(
                at == dest.to_str().unwrap() || at == moved.to_str().unwrap(),
                "{v}"
            );
            saved.push(dest);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    eprintln!(
        "{} of 10 saves made while the folder was swapped {swaps} times",
        saved.len()
    );
    assert!(!saved.is_empty(), "no save went through");
    assert_eq!(everything_in(&outside), Vec::<PathBuf>::new(), "written outside");
    for dest in &saved {
        assert_eq!(
            std::fs::metadata(dest).map(|m| m.len()).ok(),
            Some(48 << 20),
            "{dest:?}"
        );
    }
    let left: Vec<_> = everything_in(&allowed)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(".saving-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    s.stop().await;
    let _ = std::fs::remove_dir_all(root);
}

#[tokio::test]
async fn saves_at_once_of_a_large_file_stream_it_instead_of_holding_it() {
    let root = scratch("memory");
    let s = Server::start_with(&[("CODE_SANDBOX_SAVE_DIRS", root.to_str().unwrap())]).await;
    let id = s.create().await;
    s.run_ok(
        &id,
        "with open('big.bin', 'wb') as f:\n    for _ in range(96):\n        f.write(b'\\x02' * (1 << 20))",
    )
    .await;
    let before = status_of(&s, "VmRSS");
    let peak = Arc::new(std::sync::atomic::AtomicU64::new(before));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done, pid) = (peak.clone(), done.clone(), s.pid.unwrap());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/status"))
                    && let Some(kb) = text
                        .lines()
                        .find_map(|l| l.strip_prefix("VmRSS:"))
                        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                {
                    peak.fetch_max(kb, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let dests: Vec<PathBuf> = (0..6).map(|i| root.join(format!("copy-{i}.bin"))).collect();
    let saves = dests.iter().map(|d| save(&s, &id, "big.bin", d));
    for (err, v, text) in futures_util::future::join_all(saves).await {
        assert!(!err, "{text}");
        assert_eq!(v["bytes_written"], 96u64 << 20, "{v}");
    }
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let grew_mib = peak.load(Ordering::Relaxed).saturating_sub(before) / 1024;
    eprintln!("six 96 MiB saves at once: the server grew by {grew_mib} MiB");
    assert!(
        grew_mib < 64,
        "six saves of 96 MiB grew the server by {grew_mib} MiB"
    );
    s.stop().await;
    let _ = std::fs::remove_dir_all(root);
}

#[tokio::test]
async fn a_fifo_in_a_shared_folder_fails_at_once_and_holds_no_thread() {
    let root = scratch("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(root.join("pipe"))
        .status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    std::fs::write(root.join("plain.txt"), "plain").unwrap();
    let name = root.file_name().unwrap().to_str().unwrap().to_string();
    let s = Server::start_with(&[("CODE_SANDBOX_READ_DIRS", root.to_str().unwrap())]).await;
    let id = s.create().await;
    let plain = s
        .run_ok(&id, &format!("open('/mnt/{name}/plain.txt').read()"))
        .await;
    assert_eq!(plain["result"], "'plain'");
    let before = status_of(&s, "Threads");
    for _ in 0..12 {
        let (err, v, text) = s
            .call_json(
                "execute_code",
                json!({"sandbox_id": id, "timeout": 2, "code": format!("open('/mnt/{name}/pipe').read()")}),
            )
            .await;
        assert!(err, "{text}");
        assert!(v["limit"].is_null(), "stopped by a limit, not refused: {v}");
        assert!(
            text.contains("OSError") && text.contains("Not supported"),
            "{text}"
        );
    }
    let (err, _, text) = s
        .call_json(
            "read_file",
            json!({"sandbox_id": id, "file_path": format!("/mnt/{name}/pipe")}),
        )
        .await;
    assert!(err && text.contains("not a regular file"), "{text}");
    // Idle threads of the pool end after a while; none is left blocked.
    let began = Instant::now();
    loop {
        let now = status_of(&s, "Threads");
        if now <= before + 2 {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(20),
            "{before} threads before, {now} after"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    s.stop().await;
    let _ = std::fs::remove_dir_all(root);
}

#[tokio::test]
async fn the_servers_own_folder_is_hidden_in_a_shared_folder_and_a_folder_inside_it_is_refused() {
    let root = scratch("home");
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    for d in ["runtime", "cache", "wheels"] {
        link_dir(&runtime_home().join(d), &home.join(d)).unwrap();
    }
    std::fs::write(home.join("secret.txt"), "every sandbox's files").unwrap();
    std::fs::write(root.join("fine.txt"), "fine").unwrap();
    // Relative, so it stays inside the shared folder and is followed there.
    std::os::unix::fs::symlink("home", root.join("peek")).unwrap();
    let dirs = root.to_str().unwrap();
    let s = Server::start_with(&[
        ("CODE_SANDBOX_HOME", home.to_str().unwrap()),
        ("CODE_SANDBOX_READ_DIRS", dirs),
        ("CODE_SANDBOX_SAVE_DIRS", dirs),
        ("CODE_SANDBOX_UPLOAD_DIRS", dirs),
    ])
    .await;
    let name = root.file_name().unwrap().to_str().unwrap().to_string();
    let id = s.create().await;
    let v = s
        .run_ok(
            &id,
            &format!(
                r"import os
def tried(f):
    try:
        f()
        return 'opened'
    except PermissionError:
        return 'refused'
m = '/mnt/{name}'
[tried(lambda: open(m + '/home/secret.txt').read()), tried(lambda: open(m + '/peek/secret.txt').read()),
 tried(lambda: os.listdir(m + '/home')), tried(lambda: os.listdir(m + '/peek/sandboxes')), open(m + '/fine.txt').read()]"
            ),
        )
        .await;
    assert_eq!(
        v["result"], "['refused', 'refused', 'refused', 'refused', 'fine']",
        "{v}"
    );
    for (tool, args) in [
        (
            "read_file",
            json!({"sandbox_id": id, "file_path": format!("/mnt/{name}/peek/secret.txt")}),
        ),
        (
            "list_files",
            json!({"sandbox_id": id, "path": format!("/mnt/{name}/home")}),
        ),
        (
            "save_file",
            json!({"sandbox_id": id, "path": "x.txt", "destination": home.join("x.txt").to_str().unwrap()}),
        ),
        (
            "upload_file",
            json!({"sandbox_id": id, "source_path": home.join("secret.txt").to_str().unwrap()}),
        ),
    ] {
        if tool == "save_file" {
            s.run_ok(&id, "open('x.txt', 'w').write('x')").await;
        }
        let (err, _, text) = s.call_json(tool, args).await;
        assert!(err && text.contains("server's own folder"), "{tool}: {text}");
    }
    assert!(!home.join("x.txt").exists());
    // A file that is not there is said to be missing, not hidden.
    let (err, _, text) = s
        .call_json(
            "read_file",
            json!({"sandbox_id": id, "file_path": format!("/mnt/{name}/missing.txt")}),
        )
        .await;
    assert!(err && !text.contains("server's own folder"), "{text}");
    s.stop().await;

    // A shared folder inside the server's own is refused at start, saying what to change.
    let inside = home.join("sandboxes");
    std::fs::create_dir_all(&inside).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .env("CODE_SANDBOX_HOME", &home)
        .env("CODE_SANDBOX_READ_DIRS", &inside)
        .stdin(std::process::Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("the server ends at once")
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("CODE_SANDBOX_READ_DIRS") && said.contains("inside this server's own folder"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(root);
}

#[tokio::test]
async fn a_folder_past_the_listing_limit_lists_the_first_by_name_and_says_its_real_total() {
    let root = scratch("many");
    let many = root.join("many");
    std::fs::create_dir_all(&many).unwrap();
    for i in 0..100_050u32 {
        std::fs::File::create(many.join(format!("f{i:06}"))).unwrap();
    }
    let s = Server::start_with(&[("CODE_SANDBOX_READ_DIRS", many.to_str().unwrap())]).await;
    let id = s.create().await;
    let (err, v, text) = s
        .call_json(
            "list_files",
            json!({"sandbox_id": id, "path": "/mnt/many", "offset": 99_990}),
        )
        .await;
    assert!(!err, "{text}");
    assert_eq!(
        (v["total"].as_u64(), v["listed_only"].as_u64()),
        (Some(100_050), Some(100_000)),
        "{v}"
    );
    let names: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let first: Vec<String> = (99_990..100_000).map(|i| format!("f{i:06}")).collect();
    assert_eq!(names, first);
    assert!(text.contains("first 100000 of the 100050 entries"), "{text}");
    s.stop().await;
    let _ = std::fs::remove_dir_all(root);
}
