//! What a red team broke in the team store (issue 64), against the release binary and a real
//! S3 server (SeaweedFS): the longest replica name, a replica paused past its lease, file names
//! a plain manifest cannot say, the store away while new work starts and while a replica
//! drains, a store that accepts connections and never answers, and what the caller is told.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use object_store::ObjectStoreExt;
use object_store::path::Path as Key;
use serde_json::{Value, json};

use crate::common::{Server, private_home};
use crate::remote_harness::{Remote, http};
use crate::store::{Bucket, seaweed, space, try_manifest};
use crate::store_replicas::{same_tokens, stored};

/// A store (SeaweedFS, a prefix of the test's own) and two replicas' disks, removed at the end.
struct Team {
    weed: xtask::seaweed::Seaweed,
    store: std::sync::Arc<dyn object_store::ObjectStore>,
    settings: Vec<(&'static str, String)>,
    /// Alice's prefix in the bucket.
    alices: String,
    homes: [PathBuf; 2],
}

impl Team {
    async fn start() -> Team {
        let weed = seaweed().await;
        let prefix = format!("team-{}", uuid::Uuid::new_v4().simple());
        Team {
            store: weed.client(),
            settings: weed.settings(&prefix),
            alices: space(&prefix, "alice"),
            homes: [private_home(), private_home()],
            weed,
        }
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        for h in &self.homes {
            let _ = std::fs::remove_dir_all(h);
        }
    }
}

/// A replica named `name` over the store `settings` name, keeping sandboxes, with `extra`.
async fn replica(
    home: &Path,
    name: &str,
    settings: &[(&'static str, String)],
    extra: &[(&str, &str)],
) -> Remote {
    let mut envs: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
    envs.extend([
        ("CODE_SANDBOX_REPLICA", name),
        ("CODE_SANDBOX_PERSIST", "true"),
        ("CODE_SANDBOX_STORE_LEASE_SECONDS", "3"),
    ]);
    envs.extend(extra.iter().copied());
    Remote::start_in(home.to_path_buf(), &["alice", "bob"], &envs).await
}

fn signal(r: &Remote, signal: i32) {
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(r.pid() as libc::pid_t, signal) };
}

/// Runs `code` in `id` once this replica may serve it (another replica's lease has run out):
/// the result, never an error but "lives on replica".
async fn once_here(alice: &Server, id: &str, code: &str) -> Value {
    once_here_or(alice, id, code, String::new).await
}

/// [`once_here`], with `earlier` (the log of the replica that served it before) in the
/// failure: the part CI's summary of a long log leaves out.
async fn once_here_or(alice: &Server, id: &str, code: &str, earlier: impl Fn() -> String) -> Value {
    let began = Instant::now();
    loop {
        let (err, v, text) = alice
            .call_json("execute_code", json!({"sandbox_id": id, "code": code}))
            .await;
        if !err {
            return v;
        }
        let fail = |why: &str| format!("{why}: {text}\nthe replica before:\n{}", earlier());
        assert!(text.contains("lives on replica"), "{}", fail("refused"));
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "{}",
            fail("never served here")
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The lines of `log` about the store, its leases and the shutdown.
fn store_lines(log: &std::sync::Mutex<Vec<String>>) -> String {
    let log = log.lock().unwrap_or_else(|e| e.into_inner());
    let kept = ["store", "lease", "shutting down", "shut down", "signal"];
    log.iter()
        .filter(|l| kept.iter().any(|k| l.contains(k)))
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_replica_named_as_long_as_a_pod_may_be_makes_sandboxes_any_replica_resumes_and_the_sweep_keeps() {
    let t = Team::start().await;
    let (store, settings, alices) = (&t.store, &t.settings, &t.alices);
    let long = format!("mcp-code-sandbox-{}-0", "x".repeat(44));
    assert_eq!(long.len(), 63, "the longest DNS label");
    let (home0, home1) = (&t.homes[0], &t.homes[1]);
    let r0 = replica(home0, &long, settings, &[]).await;
    let alice = r0.client("alice").await;
    let id = alice.create().await;
    assert_eq!(id.len(), 100, "{id}");
    alice
        .run_ok(&id, "x = 41\nopen('kept.txt', 'w').write('kept' * 1000)")
        .await;
    stored(store, alices, &id, 0).await;
    signal(&r0, libc::SIGKILL);
    drop((alice, r0));

    // r1 sweeps every second, deleting unnamed chunks older than 2 s.
    same_tokens(home0, home1);
    let r1 = replica(
        home1,
        "r1",
        settings,
        &[("CODE_SANDBOX_STORE_GRACE_SECONDS", "2")],
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let m = try_manifest(store, alices, &id)
        .await
        .expect("the manifest stays");
    for tree in m["trees"].as_object().expect("trees").values() {
        for entry in tree.as_array().expect("entries") {
            for sha in entry["chunks"].as_array().expect("chunks") {
                let sha = sha.as_str().unwrap();
                let key = Key::from(format!("{alices}/chunks/{}/{sha}", &sha[..2]));
                assert!(store.head(&key).await.is_ok(), "{} lost its chunk", entry["path"]);
            }
        }
    }
    let alice = r1.client("alice").await;
    let v = once_here(&alice, &id, "x, len(open('kept.txt').read())").await;
    assert_eq!(v["result"], "(41, 4000)", "{v}");
    let _ = r1.terminate().await;
}

#[tokio::test]
async fn a_replica_paused_past_its_lease_answers_and_writes_only_the_newer_generation() {
    let t = Team::start().await;
    let (store, settings, alices) = (&t.store, &t.settings, &t.alices);
    let (home0, home1) = (&t.homes[0], &t.homes[1]);
    let r0 = replica(home0, "r0", settings, &[]).await;
    let alice0 = r0.client("alice").await;
    let id = alice0.create().await;
    alice0.run_ok(&id, "x = 1").await;
    let (_, g1) = stored(store, alices, &id, 0).await;

    // r0 stops for longer than its lease; r1 takes the sandbox over, changes it, and hands it
    // back at a rolling restart.
    signal(&r0, libc::SIGSTOP);
    same_tokens(home0, home1);
    let r1 = replica(home1, "r1", settings, &[]).await;
    let alice1 = r1.client("alice").await;
    once_here(&alice1, &id, "x = 2").await;
    let (_, g2) = stored(store, alices, &id, g1).await;
    drop(alice1);
    assert!(r1.terminate().await.success());
    // Its shutdown may have written one more generation.
    let g2 = try_manifest(store, alices, &id).await.unwrap()["generation"]
        .as_u64()
        .unwrap_or(g2);
    signal(&r0, libc::SIGCONT);

    // r0 answers from r1's generation, not its own interpreter, and writes on top of it.
    let (err, v, text) = alice0
        .call_json("execute_code", json!({"sandbox_id": id, "code": "x"}))
        .await;
    assert!(!err, "{text}");
    assert_eq!(v["result"], "2", "{v}");
    alice0.run_ok(&id, "x += 1").await;
    let (_, g3) = stored(store, alices, &id, g2).await;
    let m = try_manifest(store, alices, &id).await.unwrap();
    assert_eq!(m["written_by"], "r0", "{m}");
    assert!(g3 > g2, "{g3} after {g2}");
    let log = r0.log_text();
    assert!(
        log.contains("wrote generation") && log.contains("dropped for that one"),
        "{log}"
    );
    drop(alice0);
    assert!(r0.terminate().await.success());
    // What r0 wrote is r1's work plus its own.
    let r1 = replica(home1, "r1", settings, &[]).await;
    let alice1 = r1.client("alice").await;
    let v = once_here(&alice1, &id, "x").await;
    assert_eq!(v["result"], "3", "{v}");
    let _ = r1.terminate().await;
}

#[tokio::test]
async fn files_any_name_come_back_whole_and_one_that_cannot_is_named_in_the_answer() {
    let t = Team::start().await;
    let (store, settings, alices) = (&t.store, &t.settings, &t.alices);
    let (home0, home1) = (&t.homes[0], &t.homes[1]);
    let r0 = replica(home0, "r0", settings, &[]).await;
    let alice = r0.client("alice").await;
    let id = alice.create().await;
    alice
        .run_ok(
            &id,
            r"open('a:b.txt', 'w').write('colon')
open('c\\d.txt', 'w').write('backslash')
open('50%.txt', 'w').write('percent')
open('gone.txt', 'w').write('g' * 100)",
        )
        .await;
    stored(store, alices, &id, 0).await;
    let m = try_manifest(store, alices, &id).await.unwrap();
    assert_eq!(m["format"], 2, "{m}");
    // One file's chunk goes missing from the store.
    let gone = m["trees"]["workspace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "gone.txt")
        .expect("gone.txt is listed");
    let sha = gone["chunks"][0].as_str().unwrap();
    store
        .delete(&Key::from(format!("{alices}/chunks/{}/{sha}", &sha[..2])))
        .await
        .unwrap();
    signal(&r0, libc::SIGKILL);
    drop((alice, r0));

    same_tokens(home0, home1);
    let r1 = replica(home1, "r1", settings, &[]).await;
    let alice = r1.client("alice").await;
    let v = once_here(
        &alice,
        &id,
        r"import os
names = os.listdir('.')
('a:b.txt' in names, 'c\\d.txt' in names, 'gone.txt' in names, open('a:b.txt').read(), open('c\\d.txt').read(), open('50%.txt').read())",
    )
    .await;
    assert_eq!(
        v["result"], "(True, True, False, 'colon', 'backslash', 'percent')",
        "{v}"
    );
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("/home/user/gone.txt") && notes.contains("missing"),
        "{v}"
    );
    let again = alice.run_ok(&id, "1").await;
    assert!(
        again
            .get("notes")
            .is_none_or(|n| n.as_array().is_some_and(Vec::is_empty)),
        "said once: {again}"
    );

    // A manifest that is not one is said to be damaged, not the store away.
    let damaged = format!("sbx-r0-{}", "d".repeat(32));
    store
        .put(
            &Key::from(format!("{alices}/sandboxes/{damaged}/manifest.json")),
            "not a manifest".into(),
        )
        .await
        .unwrap();
    let (err, _, text) = alice
        .call_json("execute_code", json!({"sandbox_id": damaged, "code": "1"}))
        .await;
    assert!(err, "{text}");
    assert!(
        text.contains("cannot be read") && !text.contains("could not be reached"),
        "{text}"
    );
    assert!(
        !text.contains(&t.weed.endpoint) && !text.contains("principals/"),
        "{text}"
    );
    let _ = r1.terminate().await;
}

#[tokio::test]
async fn with_the_store_away_new_work_goes_on_and_a_drain_waits_for_it_to_come_back() {
    let mut t = Team::start().await;
    let settings = t.settings.clone();
    let (home0, home1) = (t.homes[0].clone(), t.homes[1].clone());
    let r0 = replica(
        &home0,
        "r0",
        &settings,
        &[
            ("CODE_SANDBOX_DRAIN_SECONDS", "5"),
            ("CODE_SANDBOX_STORE_DRAIN_SECONDS", "60"),
        ],
    )
    .await;
    let alice = r0.client("alice").await;
    t.weed.kill();
    // A new sandbox works though the store never had it, and so does a call without an id.
    let id = alice.create().await;
    alice.run_ok(&id, "m = 7").await;
    let (err, v, text) = alice.call_json("execute_code", json!({"code": "m * 2"})).await;
    assert!(!err, "{text}");
    assert_eq!(v["result"], "14", "{v}");
    drop(alice);

    // SIGTERM while the store is away: the drain waits, and says so.
    let readyz = format!("http://{}/readyz", r0.addr());
    let r0_log = r0.log.clone();
    let stopped = tokio::spawn(r0.terminate());
    let began = Instant::now();
    loop {
        let said = match http().get(&readyz).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if said.contains("waiting for 1 kept sandbox(es) to reach the store") {
            break;
        }
        assert!(began.elapsed() < Duration::from_secs(20), "/readyz said {said:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    t.weed.resume().await.expect("the store comes back");
    let status = stopped.await.unwrap();
    assert!(status.success(), "{status:?}");

    // Another replica (another disk) resumes the work done while the store was away.
    same_tokens(&home0, &home1);
    let r1 = replica(&home1, "r1", &settings, &[]).await;
    let alice = r1.client("alice").await;
    let v = once_here_or(&alice, &id, "m", || store_lines(&r0_log)).await;
    assert_eq!(v["result"], "7", "{v}");
    let _ = r1.terminate().await;
}

#[tokio::test]
async fn a_store_that_never_answers_holds_a_call_for_the_documented_bound_and_is_not_named() {
    // Accepts connections, reads, never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in silent.incoming().flatten() {
            held.push(conn);
        }
    });
    let settings = vec![
        ("CODE_SANDBOX_STORE", "s3://kept/team".to_string()),
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}")),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test-secret".into()),
    ];
    let home = private_home();
    let r0 = replica(
        &home,
        "r0",
        &settings,
        &[("CODE_SANDBOX_STORE_DRAIN_SECONDS", "1")],
    )
    .await;
    let alice = r0.client("alice").await;
    let elsewhere = format!("sbx-r1-{}", "e".repeat(32));
    let began = Instant::now();
    let (err, _, text) = alice
        .call_json("execute_code", json!({"sandbox_id": elsewhere, "code": "1"}))
        .await;
    let took = began.elapsed();
    eprintln!("a silent store answered in {took:?}: {text}");
    assert!(err, "{text}");
    assert!(took < Duration::from_secs(15), "held {took:?} (the bound is 8 s)");
    assert!(text.contains("could not be reached"), "{text}");
    for hidden in [
        port.to_string().as_str(),
        "127.0.0.1",
        "manifest.json",
        "principals",
    ] {
        assert!(!text.contains(hidden), "the caller sees '{hidden}': {text}");
    }
    // The log keeps what the caller does not see.
    assert!(r0.log_text().contains(&port.to_string()), "{}", r0.log_text());
    drop(alice);
    let _ = r0.terminate().await;
    let _ = std::fs::remove_dir_all(home);
}
