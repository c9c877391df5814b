//! Kept sandboxes in object storage across replicas (issue 58): two replicas of the team
//! server share a real S3 store (SeaweedFS), each with a disk of its own. A replica killed
//! outright loses none of a completed call: the other resumes its sandboxes from the store,
//! with their variables and files, once the dead one's lease has run out; another principal
//! never finds them.

use std::path::Path;
use std::time::{Duration, Instant};

use object_store::ObjectStoreExt;
use object_store::path::Path as Key;
use serde_json::json;

use crate::common::private_home;
use crate::remote_harness::Remote;
use crate::store::{Bucket, SECRET_KEY, documents_valid, seaweed, space, try_manifest};

const LEASE_SECONDS: &str = "5";

/// Seconds unused before a replica suspends a sandbox (and so hands it back to the store),
/// in the second half of the test.
const IDLE_SECONDS: &str = "10";

async fn replica(home: &Path, name: &str, store: &[(&'static str, String)], idle: Option<&str>) -> Remote {
    let mut envs: Vec<(&str, &str)> = store.iter().map(|(k, v)| (*k, v.as_str())).collect();
    envs.extend([
        ("CODE_SANDBOX_REPLICA", name),
        ("CODE_SANDBOX_PERSIST", "true"),
        ("CODE_SANDBOX_STORE_LEASE_SECONDS", LEASE_SECONDS),
    ]);
    envs.extend(idle.map(|s| ("CODE_SANDBOX_IDLE_SECONDS", s)));
    Remote::start_in(home.to_path_buf(), &["alice", "bob"], &envs).await
}

/// The same principals and tokens on a second replica's disk, as a team's Secret gives them.
pub fn same_tokens(from: &Path, to: &Path) {
    for f in ["tokens", "token-alice", "token-bob"] {
        std::fs::copy(from.join(f), to.join(f)).expect("copy the tokens");
    }
}

/// Waits until the store's manifest of `id` names `file` in a generation past `after`; the
/// time it took and the generation.
pub async fn stored(
    store: &std::sync::Arc<dyn object_store::ObjectStore>,
    space: &str,
    id: &str,
    after: u64,
) -> (Duration, u64) {
    let began = Instant::now();
    loop {
        if let Some(m) = try_manifest(store, space, id).await
            && m["generation"].as_u64().unwrap_or(0) > after
        {
            return (began.elapsed(), m["generation"].as_u64().unwrap());
        }
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "{id}: no generation past {after} in the store"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_replica_killed_outright_loses_no_completed_call_another_resumes_it_no_one_else_finds_it_and_a_stale_copy_is_never_served()
 {
    let weed = seaweed().await;
    let store = weed.client();
    let prefix = format!("team-{}", uuid::Uuid::new_v4().simple());
    let settings = weed.settings(&prefix);
    let alices = space(&prefix, "alice");
    let (home0, home1) = (private_home(), private_home());

    let r0 = replica(&home0, "r0", &settings, None).await;
    let alice = r0.client("alice").await;
    let id = alice.create().await;
    assert!(id.starts_with("sbx-r0-"), "{id}");
    alice
        .run_ok(&id, "x = 41\nopen('note.txt', 'w').write('kept')")
        .await;
    let (first, g1) = stored(&store, &alices, &id, 0).await;
    alice.run_ok(&id, "x += 1").await;
    let (second, _) = stored(&store, &alices, &id, g1).await;
    eprintln!("a completed call reached the store in {first:?}, then {second:?}");
    // SIGKILL: no shutdown, no save, no lease handed back.
    let pid = r0.pid() as libc::pid_t;
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    drop(alice);
    drop(r0);

    same_tokens(&home0, &home1);
    let r1 = replica(&home1, "r1", &settings, Some(IDLE_SECONDS)).await;
    // Bob is told what an id no one has gets: nothing about alice's sandbox.
    let bob = r1.client("bob").await;
    let made_up = format!("sbx-r0-{}", "0".repeat(32));
    let mut said = Vec::new();
    for asked in [&id, &made_up] {
        let (err, _, text) = bob
            .call_json("execute_code", json!({"sandbox_id": asked, "code": "x"}))
            .await;
        assert!(err, "bob ran code in {asked}");
        said.push(text.replace(asked.as_str(), "ID"));
    }
    assert_eq!(said[0], said[1]);

    let alice = r1.client("alice").await;
    let began = Instant::now();
    let mut told_where = false;
    let v = loop {
        let (err, v, text) = alice
            .call_json(
                "execute_code",
                json!({"sandbox_id": id, "code": "x, open('note.txt').read()"}),
            )
            .await;
        if !err {
            break v;
        }
        // Until r0's lease runs out, r1 says where the sandbox lives.
        assert!(
            text.contains("lives on replica r0") && text.contains("retry"),
            "{text}"
        );
        told_where = true;
        assert!(began.elapsed() < Duration::from_secs(30), "never resumed: {text}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(v["result"], "(42, 'kept')", "{v}");
    assert_eq!(v["state_lost"], false, "{v}");
    // Its history came too: the notebook r1 exports holds the cells run on r0.
    let nb = alice.ok("export_notebook", json!({"sandbox_id": id})).await;
    let nb = alice
        .ok("read_file", json!({"sandbox_id": id, "file_path": nb["path"]}))
        .await;
    let cells = nb["content"].as_str().expect("the notebook's text");
    assert!(cells.contains("x = 41") && cells.contains("x += 1"), "{cells}");
    eprintln!(
        "resumed on r1 {:?} after r0 was killed (told it lived on r0 first: {told_where})",
        began.elapsed()
    );
    assert!(
        r1.log_text().contains(&format!("{id}: resumed from the store")),
        "{}",
        r1.log_text()
    );

    // r1 holds it now and writes it from here on.
    let lease = store
        .get(&Key::from(format!("{alices}/sandboxes/{id}/lease.json")))
        .await
        .expect("a lease")
        .bytes()
        .await
        .unwrap();
    let lease: serde_json::Value = serde_json::from_slice(&lease).unwrap();
    assert_eq!(lease["holder"], "r1");
    let (_, g) = stored(&store, &alices, &id, 0).await;
    alice.run_ok(&id, "x += 1").await;
    let (_, after) = stored(&store, &alices, &id, g).await;
    let m = try_manifest(&store, &alices, &id).await.unwrap();
    assert_eq!((m["written_by"].as_str(), after > g), (Some("r1"), true), "{m}");

    // r0 back, with its old copy on disk: while r1 serves the sandbox r0 never does (it says
    // where it lives); once r1 has suspended it (and so handed it back), r0 brings r1's latest
    // generation from the store, not its own stale copy.
    let r0 = replica(&home0, "r0", &settings, None).await;
    let alice0 = r0.client("alice").await;
    let began = Instant::now();
    let mut told_r1 = false;
    let v = loop {
        let (err, v, text) = alice0
            .call_json("execute_code", json!({"sandbox_id": id, "code": "x"}))
            .await;
        if !err {
            break v;
        }
        assert!(text.contains("lives on replica r1"), "{text}");
        told_r1 = true;
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "r1 never handed it back: {text}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(told_r1, "r0 served the sandbox while r1 held it");
    assert_eq!(
        (v["result"].as_str(), v["state_lost"].as_bool()),
        (Some("43"), Some(false)),
        "{v}"
    );
    eprintln!(
        "back on r0 {:?} after it asked (r1 suspends after {IDLE_SECONDS} s unused)",
        began.elapsed()
    );

    // What the replicas wrote is what the published schemas say: the manifest and r0's lease.
    let (manifests, leases) = documents_valid(&store, &prefix).await;
    assert!(
        manifests >= 1 && leases >= 1,
        "{manifests} manifests, {leases} leases"
    );

    // Closed: it leaves the store, and the lease goes with it.
    alice0.ok("close_sandbox", json!({"sandbox_id": id})).await;
    let began = Instant::now();
    while try_manifest(&store, &alices, &id).await.is_some() {
        assert!(began.elapsed() < Duration::from_secs(10), "the manifest stayed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for r in [&r0, &r1] {
        assert!(!r.log_text().contains(SECRET_KEY));
    }
    let _ = r0.terminate().await;
    let _ = r1.terminate().await;
    for h in [home0, home1] {
        let _ = std::fs::remove_dir_all(h);
    }
}
