//! The sweep against a local folder store, with objects' ages set by hand.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::*;
use crate::store::Timing;
use crate::store::chunks::Tree;
use crate::store::push::Pusher;

const DAY: Duration = Duration::from_secs(86_400);

struct Bucket {
    root: PathBuf,
    store: Store,
}

fn bucket() -> Bucket {
    let root = std::env::temp_dir().join(format!("mcs-sweep-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(root.join("bucket")).unwrap();
    let url = url::Url::from_directory_path(root.join("bucket")).expect("an absolute folder");
    let store = crate::store::location::open(url.as_str()).unwrap();
    Bucket { root, store }
}

impl Bucket {
    /// A sandbox's workspace holding `files`.
    fn work(&self, id: &str, files: &[(&str, &str)]) -> Vec<Tree> {
        let dir = self.root.join(id);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, body) in files {
            std::fs::write(dir.join(name), body).unwrap();
        }
        vec![Tree {
            name: "workspace",
            root: dir,
            skip: &[],
            only: None,
        }]
    }

    fn chunk(&self, body: &str) -> PathBuf {
        let sha = hex::encode(sha2::Sha256::digest(body.as_bytes()));
        self.root
            .join("bucket/principals/p/chunks")
            .join(&sha[..2])
            .join(sha)
    }

    fn manifest(&self, id: &str) -> PathBuf {
        self.root
            .join("bucket/principals/p/sandboxes")
            .join(id)
            .join("manifest.json")
    }

    /// `pusher` writes sandbox `id` holding `files`.
    async fn push(&self, pusher: &Pusher, id: &str, files: &[(&str, &str)]) {
        pusher.push(id, "p", &self.work(id, files)).await.unwrap();
    }

    /// Sandbox `id`'s manifest says it was last written `days` ago.
    fn written_days_ago(&self, id: &str, days: i64) {
        let mut m: crate::store::manifest::Manifest =
            serde_json::from_slice(&std::fs::read(self.manifest(id)).unwrap()).unwrap();
        m.written_at -= chrono::Duration::days(days);
        std::fs::write(self.manifest(id), serde_json::to_vec(&m).unwrap()).unwrap();
    }

    /// Every chunk made `age` old.
    fn age_chunks(&self, age: Duration) {
        let old = SystemTime::now() - age;
        for dir in std::fs::read_dir(self.root.join("bucket/principals/p/chunks")).unwrap() {
            for f in std::fs::read_dir(dir.unwrap().path()).unwrap() {
                let f = std::fs::File::options()
                    .write(true)
                    .open(f.unwrap().path())
                    .unwrap();
                f.set_modified(old).unwrap();
            }
        }
    }
}

use sha2::Digest;

fn timing(grace: Duration) -> Timing {
    Timing {
        lease: Duration::from_secs(30),
        grace,
        retain: Some(7 * DAY),
    }
}

#[tokio::test]
async fn unnamed_old_chunks_and_unused_sandboxes_go_and_nothing_a_manifest_names_does() {
    let b = bucket();
    let pusher = Pusher::start(b.store.clone(), "r0".into(), &timing(DAY));
    b.push(&pusher, "sbx-a", &[("keep", "kept"), ("edit", "v1")])
        .await;
    b.push(&pusher, "sbx-a", &[("keep", "kept"), ("edit", "v2")])
        .await;
    b.push(&pusher, "sbx-c", &[("old", "c only")]).await;
    // sbx-c was last written 30 days ago.
    b.written_days_ago("sbx-c", 30);
    pusher.held().release("sbx-c").await; // suspended long ago, no longer held
    b.age_chunks(2 * DAY);
    // A chunk a push has just written and not yet named.
    b.push(&pusher, "sbx-y", &[("new", "young")]).await;
    std::fs::remove_file(b.manifest("sbx-y")).unwrap();

    let swept = once(&b.store, pusher.held(), DAY, Some(7 * DAY))
        .await
        .unwrap()
        .expect("no one else sweeps");
    assert_eq!(swept.retired, ["sbx-c"]);
    assert_eq!(
        (swept.manifests, swept.chunks_deleted, swept.chunks_young),
        (2, 2, 1)
    );
    assert!(
        b.chunk("kept").is_file() && b.chunk("v2").is_file(),
        "named by sbx-a's manifest"
    );
    assert!(
        !b.chunk("v1").exists(),
        "named by no manifest since sbx-a's second push"
    );
    assert!(!b.chunk("c only").exists() && !b.manifest("sbx-c").exists());
    assert!(b.chunk("young").is_file(), "younger than the grace period");
    assert!(b.manifest("sbx-a").is_file());
    let _ = std::fs::remove_dir_all(&b.root);
}

#[tokio::test]
async fn one_replica_sweeps_at_a_time_and_a_sandbox_held_is_never_retired() {
    let b = bucket();
    let r0 = Pusher::start(b.store.clone(), "r0".into(), &timing(DAY));
    let r1 = Pusher::start(b.store.clone(), "r1".into(), &timing(DAY));
    r1.push("sbx-h", "p", &b.work("sbx-h", &[("f", "held")]))
        .await
        .unwrap();
    b.written_days_ago("sbx-h", 30);
    // r1 sweeps: r0 is told to leave it.
    let lease = b.store.path(&["sweep", "lease.json"]);
    assert!(matches!(
        r1.held().take(SWEEPER, lease).await.unwrap(),
        Claim::Ours
    ));
    assert_eq!(once(&b.store, r0.held(), DAY, Some(7 * DAY)).await.unwrap(), None);
    r1.held().release(SWEEPER).await;
    // r1 holds sbx-h (it is live there): r0's sweep keeps it, however old its manifest.
    let swept = once(&b.store, r0.held(), DAY, Some(7 * DAY))
        .await
        .unwrap()
        .unwrap();
    assert!(swept.retired.is_empty(), "{swept:?}");
    assert!(b.manifest("sbx-h").is_file() && b.chunk("held").is_file());
    let _ = std::fs::remove_dir_all(&b.root);
}

#[tokio::test]
async fn a_chunk_found_old_is_written_again_so_no_sweep_can_take_it_from_under_a_push() {
    let b = bucket();
    let first = Pusher::start(b.store.clone(), "r0".into(), &timing(DAY));
    b.push(&first, "sbx-1", &[("f", "shared")]).await;
    b.push(&first, "sbx-2", &[("f", "fresh")]).await;
    // A day old: past half the grace period (a sweep may take it once unnamed).
    b.age_chunks(DAY);
    let again = Pusher::start(b.store.clone(), "r1".into(), &timing(DAY));
    let pushed = again
        .push("sbx-3", "p", &b.work("sbx-3", &[("f", "shared")]))
        .await
        .unwrap();
    assert_eq!(pushed.chunks_written, 1, "written again");
    let age = std::fs::metadata(b.chunk("shared"))
        .unwrap()
        .modified()
        .unwrap()
        .elapsed()
        .unwrap();
    assert!(age < Duration::from_secs(600), "{age:?}");
    // A chunk the sandbox's own manifest names is not asked for or written.
    let pushed = first
        .push("sbx-2", "p", &b.work("sbx-2", &[("f", "fresh"), ("g", "new")]))
        .await
        .unwrap();
    assert_eq!(pushed.chunks_written, 1);
    let _ = std::fs::remove_dir_all(&b.root);
}

#[tokio::test]
async fn a_manifest_under_a_name_the_sweep_would_not_take_keeps_its_chunks() {
    let b = bucket();
    let pusher = Pusher::start(b.store.clone(), "r0".into(), &timing(DAY));
    let odd = format!("sbx-{}", "x".repeat(120));
    b.push(&pusher, &odd, &[("f", "odd")]).await;
    b.written_days_ago(&odd, 30);
    pusher.held().release(&odd).await;
    b.age_chunks(2 * DAY);
    let swept = once(&b.store, pusher.held(), DAY, Some(7 * DAY))
        .await
        .unwrap()
        .unwrap();
    assert!(swept.retired.is_empty(), "{swept:?}");
    assert_eq!(swept.chunks_deleted, 0, "{swept:?}");
    assert!(b.chunk("odd").is_file() && b.manifest(&odd).is_file());
    let _ = std::fs::remove_dir_all(&b.root);
}
