//! Kept sandboxes never block new work: past the live maximum and the memory budget the least
//! recently used idle interpreters are suspended (losslessly), kept ones are bounded by disk,
//! and a call without an id never lands in a sandbox kept from before a restart.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Server, private_home};
use crate::persistence::{saved_dir, signal_and_wait, start};

/// A fixed shuffle of `0..n`, so a failure can be replayed.
fn shuffled(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for i in (1..n).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        order.swap(i, (seed % (i as u64 + 1)) as usize);
    }
    order
}

#[tokio::test]
async fn forty_sandboxes_with_eight_live_places_all_keep_their_variables() {
    let s = Server::start_with(&[("CODE_SANDBOX_MAX_SANDBOXES", "8")]).await;
    let mut ids = Vec::new();
    for i in 0..40 {
        let id = s.create().await;
        s.run_ok(&id, &format!("mine = {i}")).await;
        ids.push(id);
    }
    for i in shuffled(40) {
        let (err, v, text) = s
            .call_json("execute_code", json!({"sandbox_id": ids[i], "code": "mine"}))
            .await;
        assert!(!err, "sandbox {i}: {text}");
        assert!(!text.to_lowercase().contains("close"), "{text}");
        assert_eq!(v["result"], format!("{i}"), "sandbox {i}: {v}");
        assert_eq!(v["state_lost"], false, "sandbox {i}: {v}");
    }
    let v = s.ok("get_sandbox_status", json!({})).await;
    let listed = v["sandboxes"].as_array().unwrap();
    let live = listed.iter().filter(|s| s["state"] == "ready").count();
    assert!(live <= 8, "at most 8 live interpreters: {live}");
    assert!(
        listed.iter().filter(|s| s["state"] == "paused").count() >= 40 - 8,
        "the rest are suspended"
    );
    s.stop().await;
}

#[tokio::test]
async fn when_every_live_sandbox_is_running_a_new_one_is_refused_saying_so() {
    let s = Server::start_with(&[
        ("CODE_SANDBOX_MAX_SANDBOXES", "8"),
        ("CODE_SANDBOX_MAX_CONCURRENT_CALLS", "8"),
    ])
    .await;
    let mut ids = Vec::new();
    for _ in 0..8 {
        ids.push(s.create().await);
    }
    let long = ids.iter().map(|id| {
        s.call_json(
            "execute_code",
            json!({"sandbox_id": id, "code": "import time\ntime.sleep(6)\n'done'"}),
        )
    });
    let ninth = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        s.call_json("create_sandbox", json!({})).await
    };
    let (runs, (err, _, text)) = tokio::join!(futures_util::future::join_all(long), ninth);
    assert!(err, "the ninth was refused: {text}");
    assert!(
        text.contains("all 8 live sandboxes are running calls"),
        "says why: {text}"
    );
    assert!(text.contains("CODE_SANDBOX_MAX_SANDBOXES"), "{text}");
    assert!(!text.contains("close"), "never suggests closing anything: {text}");
    for (err, v, text) in runs {
        assert!(!err, "{text}");
        assert_eq!(v["result"], "'done'");
    }
    let v = s.ok("get_sandbox_status", json!({})).await;
    assert_eq!(v["total"], 8, "nothing was closed");
    // Once they are idle, a ninth takes the place of the least recently used.
    let ninth = s.create().await;
    s.run_ok(&ninth, "1").await;
    s.stop().await;
}

/// Sets a kept sandbox's last use `hours` ago, as a server that stopped long ago left it.
fn last_used_hours_ago(home: &Path, id: &str, hours: i64) {
    let path = saved_dir(home, id).join("meta.json");
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    meta["last_used"] = json!((chrono::Utc::now() - chrono::Duration::hours(hours)).to_rfc3339());
    std::fs::write(&path, serde_json::to_vec(&meta).unwrap()).unwrap();
}

/// Waits until `id` is no longer listed (eviction runs in the background).
async fn wait_until_gone(s: &Server, id: &str) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let (err, _, _) = s.call_json("get_sandbox_status", json!({"sandbox_id": id})).await;
        if err {
            return;
        }
        assert!(Instant::now() < until, "{id} was never evicted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn past_the_disk_budget_the_oldest_kept_sandboxes_go_never_a_recent_one() {
    let home = private_home();
    let s = start(&home, &[]).await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let id = s.create().await;
        // 16 MiB each, so a few of them are what the budget below is about.
        s.run_ok(
            &id,
            &format!("n = {i}\nopen('data.bin', 'wb').write(bytes(16 * 2**20))"),
        )
        .await;
        ids.push(id);
    }
    signal_and_wait(s, libc::SIGTERM).await;
    // Four unused for hours (the oldest first), two used a moment ago.
    for (id, hours) in ids.iter().zip([5, 4, 3, 2]) {
        last_used_hours_ago(&home, id, hours);
    }

    // About 100 MiB kept, 75 allowed: the two oldest go, and that is enough.
    let s = start(&home, &[("CODE_SANDBOX_KEEP_MB", "75")]).await;
    for old in &ids[..2] {
        wait_until_gone(&s, old).await;
        assert!(
            !home.join("sandboxes").join(old).exists(),
            "its files are deleted"
        );
        assert!(!home.join("scratch").join(old).exists(), "and its state");
    }
    let (err, _, text) = s
        .call_json("execute_code", json!({"sandbox_id": ids[0], "code": "n"}))
        .await;
    assert!(err);
    assert!(
        text.contains("was deleted on") && text.contains("CODE_SANDBOX_KEEP_MB"),
        "says it was evicted, and when: {text}"
    );
    for (i, id) in ids.iter().enumerate().skip(2) {
        let v = s.run_ok(id, "(n, len(open('data.bin','rb').read()))").await;
        assert_eq!(v["result"], format!("({i}, 16777216)"), "{id} stays whole");
    }
    signal_and_wait(s, libc::SIGTERM).await;

    // 1 MiB allowed: every sandbox unused for an hour goes, the recently used never do.
    for (id, hours) in ids[2..4].iter().zip([3, 2]) {
        last_used_hours_ago(&home, id, hours);
    }
    let s = start(&home, &[("CODE_SANDBOX_KEEP_MB", "1")]).await;
    for old in &ids[2..4] {
        wait_until_gone(&s, old).await;
    }
    for (i, id) in ids.iter().enumerate().skip(4) {
        let v = s.run_ok(id, "n").await;
        assert_eq!(
            v["result"],
            format!("{i}"),
            "a recently used one is never evicted"
        );
    }
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

/// Start to the first `1+1` with no id, in a home with `kept` sandboxes kept from before.
async fn first_result(home: &Path) -> (Server, Duration, Value, String) {
    let started = Instant::now();
    let s = start(home, &[]).await;
    let (err, v, text) = s.call_json("execute_code", json!({"code": "1+1"})).await;
    let took = started.elapsed();
    assert!(!err, "{text}");
    (s, took, v, text)
}

#[tokio::test]
async fn after_a_restart_with_300_kept_sandboxes_the_first_call_is_not_held_up_and_lands_in_a_new_one() {
    let home = private_home();
    let s = start(&home, &[]).await;
    let mut kept = Vec::new();
    for i in 0..300 {
        let id = s.create().await;
        s.run_ok(&id, &format!("x = {i}")).await;
        kept.push(id);
    }
    signal_and_wait(s, libc::SIGTERM).await;
    let baseline_home = private_home();
    let (s, baseline, _, _) = first_result(&baseline_home).await;
    s.stop().await;

    let (s, took, v, text) = first_result(&home).await;
    assert_eq!(v["result"], "2");
    assert!(
        text.contains("Created sandbox"),
        "a call without an id gets a new sandbox, not one kept from before: {text}"
    );
    let new = v["sandbox_id"].as_str().unwrap().to_string();
    assert!(!kept.contains(&new));
    // Nothing kept was loaded to answer it: every kept sandbox is still suspended.
    let mut offset = 0;
    let mut paused = 0;
    loop {
        let page = s.ok("get_sandbox_status", json!({"offset": offset})).await;
        assert_eq!(page["total"], 301);
        for sb in page["sandboxes"].as_array().unwrap() {
            if sb["sandbox_id"] != new.as_str() {
                assert_eq!(sb["state"], "paused", "{sb}");
                paused += 1;
            }
        }
        match page["next_offset"].as_u64() {
            Some(n) => offset = n,
            None => break,
        }
    }
    assert_eq!(paused, 300);
    // The newest is listed first: it is the most recently used.
    let page = s.ok("get_sandbox_status", json!({})).await;
    assert_eq!(page["sandboxes"][0]["sandbox_id"], new.as_str());
    assert!(
        took < baseline * 3 + Duration::from_secs(1),
        "first result after {took:?} with 300 kept, {baseline:?} with none"
    );
    // A kept one, named, comes back with its variables; then it is the default.
    let v = s.run_ok(&kept[150], "x").await;
    assert_eq!(v["result"], "150");
    assert_eq!(v["state_lost"], false);
    let (_, v, _) = s.call_json("execute_code", json!({"code": "x + 1"})).await;
    assert_eq!(v["result"], "151", "the sandbox used last is the default");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
    let _ = std::fs::remove_dir_all(&baseline_home);
}

#[tokio::test]
async fn a_sandbox_that_needs_memory_suspends_an_idle_one_instead_of_failing() {
    let s = Server::start_with(&[
        ("CODE_SANDBOX_TOTAL_MEMORY_MB", "1000"),
        ("CODE_SANDBOX_MEMORY_MB", "700"),
    ])
    .await;
    let a = s.create().await;
    let b = s.create().await;
    s.run_ok(&a, "big = bytearray(500 * 2**20)\nbig[-1] = 7\nlen(big)")
        .await;
    // b's 500 MiB do not fit beside a's: a is idle, so it is suspended to make room.
    let v = s
        .run_ok(&b, "other = bytearray(500 * 2**20)\nother[-1] = 9\nlen(other)")
        .await;
    assert_eq!(v["result"], "524288000", "{v}");
    assert!(v["error"].is_null(), "no MemoryError: {v}");
    let status = s.ok("get_sandbox_status", json!({"sandbox_id": a})).await;
    assert_eq!(status["state"], "paused", "a gave its memory back: {status}");
    // And a comes back whole (b, idle now, makes room in turn).
    let v = s.run_ok(&a, "(len(big), big[-1])").await;
    assert_eq!(v["result"], "(524288000, 7)");
    assert_eq!(v["state_lost"], false);
    let v = s.run_ok(&b, "other[-1]").await;
    assert_eq!(v["result"], "9");
    s.stop().await;
}
