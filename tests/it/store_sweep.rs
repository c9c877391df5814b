//! What leaves the team's store and a replica's disk, against SeaweedFS: past the disk bound a
//! kept sandbox's copy on this disk goes (the store keeps it, and naming it brings it back);
//! the sweep deletes the chunks of deleted files and of closed sandboxes once past the grace
//! period, and never one a manifest names.

use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::json;

use crate::common::{LOG_TO, private_home};
use crate::persistence::start;
use crate::store::{Bucket, SECRET_KEY, documents_valid, seaweed, space, try_manifest};

/// Waits (at most a minute) until `done` is true, saying what it waited for.
async fn until<F: std::future::Future<Output = bool>>(what: &str, mut done: impl FnMut() -> F) {
    let began = Instant::now();
    while !done().await {
        assert!(began.elapsed() < Duration::from_secs(60), "never: {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("{what}: {:?}", began.elapsed());
}

/// The chunk naming the workspace file `path` in `id`'s manifest (one chunk: a small file).
async fn chunk_of(store: &Arc<dyn ObjectStore>, space: &str, id: &str, path: &str) -> Option<Key> {
    let m = try_manifest(store, space, id).await?;
    let entry = m["trees"]["workspace"]
        .as_array()?
        .iter()
        .find(|e| e["path"] == path)?;
    let sha = entry["chunks"][0].as_str()?;
    Some(Key::from(format!("{space}/chunks/{}/{sha}", &sha[..2])))
}

async fn exists(store: &Arc<dyn ObjectStore>, key: &Key) -> bool {
    store.head(key).await.is_ok()
}

#[tokio::test]
async fn a_copy_past_the_disk_bound_is_let_go_and_comes_back_and_the_sweep_takes_only_what_no_manifest_names()
{
    let weed = seaweed().await;
    let store = weed.client();
    let home = private_home();
    let log = home.join("server.log");
    let prefix = format!("team-{}", uuid::Uuid::new_v4().simple());
    let local = space(&prefix, "local");
    let mut envs: Vec<(&str, String)> = weed.settings(&prefix);
    envs.extend([
        (LOG_TO, log.display().to_string()),
        ("RUST_LOG", "info".into()),
        // Every kept sandbox is past this bound, and one is kept two seconds after its call.
        ("CODE_SANDBOX_KEEP_MB", "1".into()),
        ("CODE_SANDBOX_IDLE_SECONDS", "2".into()),
        ("CODE_SANDBOX_STORE_GRACE_SECONDS", "8".into()),
    ]);
    let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let s = start(&home, &envs).await;
    let id = s.create().await;
    // Over the 1 MiB bound once suspended: 2 MB of data besides its saved state.
    let code = "import os\nx = 7\nopen('keep.txt', 'w').write('kept')\n\
                open('gone.txt', 'w').write('to go ' * 1000)\nopen('big.bin', 'wb').write(os.urandom(2_000_000))";
    s.run_ok(&id, code).await;
    let began = Instant::now();
    let gone = loop {
        if let Some(key) = chunk_of(&store, &local, &id, "gone.txt").await {
            break key;
        }
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "gone.txt never reached the store"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    s.run_ok(&id, "import os\nos.remove('gone.txt')").await;

    let said = |what: String| {
        let log = log.clone();
        move || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let found = text.contains(&what);
            async move { found }
        }
    };
    until(
        "the copy on this disk is let go",
        said(format!("{id}: its copy on this disk is let go (evicted)")),
    )
    .await;
    assert!(!s.workspace(&id).exists(), "its folder left this disk");
    until("the deleted file's chunk is swept", || {
        let (store, gone) = (store.clone(), gone.clone());
        async move { !exists(&store, &gone).await }
    })
    .await;
    let kept = chunk_of(&store, &local, &id, "keep.txt")
        .await
        .expect("keep.txt is named");
    assert!(exists(&store, &kept).await, "a chunk a manifest names stays");

    // Named again, it comes back from the store: variables and files.
    let (failed, v, text) = s
        .call_json(
            "execute_code",
            json!({"sandbox_id": id, "code": "x, open('keep.txt').read(), os.path.exists('gone.txt')"}),
        )
        .await;
    let server_log = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !failed,
        "it did not come back: {text}\nthe server's log:\n{}",
        server_log()
    );
    assert_eq!(v["result"], "(7, 'kept', False)", "{v}");
    assert_eq!(v["state_lost"], false, "{v}");
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains(&format!("{id}: resumed from the store"))
    );
    let read = s
        .ok("read_file", json!({"sandbox_id": id, "file_path": "keep.txt"}))
        .await;
    assert!(read.to_string().contains("kept"), "{read}");

    // The manifest, the sandbox's lease and the sweeper's, as the published schemas say.
    let (manifests, leases) = documents_valid(&store, &prefix).await;
    assert!(
        manifests == 1 && leases >= 1,
        "{manifests} manifests, {leases} leases"
    );

    // Closed: its manifest goes at once, its chunks with the next sweep past the grace period.
    s.ok("close_sandbox", json!({"sandbox_id": id})).await;
    until("the closed sandbox's manifest and chunks leave the store", || {
        let (store, local, id) = (store.clone(), local.clone(), id.clone());
        async move {
            let chunks: Vec<_> = futures_util::TryStreamExt::try_collect::<Vec<_>>(
                store.list(Some(&Key::from(format!("{local}/chunks")))),
            )
            .await
            .unwrap_or_default();
            try_manifest(&store, &local, &id).await.is_none() && chunks.is_empty()
        }
    })
    .await;
    let (err, _, text) = s
        .call_json("execute_code", json!({"sandbox_id": id, "code": "x"}))
        .await;
    assert!(
        err && text.contains("no open sandbox"),
        "a closed sandbox is not brought back: {text}"
    );
    assert!(!std::fs::read_to_string(&log).unwrap().contains(SECRET_KEY));
    let _ = std::fs::remove_dir_all(&home);
}
