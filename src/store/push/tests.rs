//! The pusher against a local folder store.

use super::*;
use crate::store::manifest::CHUNK_BYTES;
use std::path::{Path, PathBuf};

fn file_url(dir: &Path) -> url::Url {
    url::Url::from_directory_path(dir).expect("an absolute folder")
}

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("mcs-push-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[tokio::test]
async fn a_second_push_sends_only_what_changed_and_advances_the_generation() {
    let root = scratch();
    let (work, bucket) = (root.join("work"), root.join("bucket"));
    std::fs::create_dir_all(work.join("sub")).unwrap();
    std::fs::create_dir_all(work.join("tmp")).unwrap();
    std::fs::write(work.join("big.bin"), vec![3u8; CHUNK_BYTES + 10]).unwrap();
    std::fs::write(work.join("sub/a.txt"), "a").unwrap();
    std::fs::write(work.join("tmp/skip.txt"), "not kept").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("/etc/passwd", work.join("link")).unwrap();
    let store = super::super::location::open(file_url(&bucket).as_str()).unwrap();
    let pusher = Pusher::start(
        store,
        "test".into(),
        &crate::store::Timing::with_lease(std::time::Duration::from_secs(30)),
    );
    let trees = [Tree {
        name: "workspace",
        root: work.clone(),
        skip: &["tmp"],
        only: None,
    }];
    let first = pusher.push("sbx-1", "p", &trees).await.unwrap();
    assert_eq!((first.generation, first.files, first.chunks_written), (1, 2, 3));
    std::fs::write(work.join("sub/a.txt"), "changed").unwrap();
    let second = pusher.push("sbx-1", "p", &trees).await.unwrap();
    assert_eq!(
        (second.generation, second.chunks_written, second.bytes_written),
        (2, 1, 7)
    );
    let bytes = std::fs::read(bucket.join("principals/p/sandboxes/sbx-1/manifest.json")).unwrap();
    let m: Manifest = serde_json::from_slice(&bytes).unwrap();
    let paths: Vec<_> = m.trees["workspace"].iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["big.bin", "sub/a.txt"], "no link, nothing skipped");
    assert_eq!(m.chunks().len(), 3);
    let _ = std::fs::remove_dir_all(root);
}

/// The store away: the push waits and is tried again; once the store is back it lands.
#[tokio::test]
async fn a_push_the_store_refused_is_tried_again_until_it_lands() {
    let root = scratch();
    let (work, bucket) = (root.join("work"), root.join("bucket"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("f"), "x").unwrap();
    let store = super::super::location::open(file_url(&bucket).as_str()).unwrap();
    // The store's folder is a file now: every write fails.
    std::fs::remove_dir_all(&bucket).unwrap();
    std::fs::write(&bucket, "in the way").unwrap();
    let pusher = Pusher::start(
        store,
        "test".into(),
        &crate::store::Timing::with_lease(std::time::Duration::from_secs(30)),
    );
    let tree = Tree {
        name: "workspace",
        root: work.clone(),
        skip: &[],
        only: None,
    };
    pusher.schedule("sbx-3", "p", vec![tree], None);
    assert!(!pusher.flush(std::time::Duration::from_millis(1500)).await);
    std::fs::remove_file(&bucket).unwrap();
    std::fs::create_dir_all(&bucket).unwrap();
    assert!(pusher.flush(std::time::Duration::from_secs(20)).await);
    assert!(
        bucket
            .join("principals/p/sandboxes/sbx-3/manifest.json")
            .is_file()
    );
    let _ = std::fs::remove_dir_all(root);
}

#[tokio::test]
async fn flush_waits_for_what_was_scheduled() {
    let root = scratch();
    std::fs::write(root.join("f"), "x").unwrap();
    let store = super::super::location::open(file_url(&root.join("b")).as_str()).unwrap();
    let pusher = Pusher::start(
        store,
        "test".into(),
        &crate::store::Timing::with_lease(std::time::Duration::from_secs(30)),
    );
    let tree = || Tree {
        name: "workspace",
        root: root.clone(),
        skip: &["b"],
        only: None,
    };
    pusher.schedule("sbx-2", "p", vec![tree()], None);
    pusher.schedule("sbx-2", "p", vec![tree()], None);
    assert!(pusher.flush(std::time::Duration::from_secs(10)).await);
    assert!(
        root.join("b/principals/p/sandboxes/sbx-2/manifest.json")
            .is_file()
    );
    let _ = std::fs::remove_dir_all(root);
}

/// A push slower than half the sweep's grace period never writes a manifest naming chunks a
/// sweep may have deleted meanwhile: it writes them again, and gives up saying what to raise.
#[tokio::test]
async fn a_push_slower_than_half_the_grace_period_writes_no_manifest() {
    let root = scratch();
    let (work, bucket) = (root.join("work"), root.join("bucket"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("a.txt"), "a").unwrap();
    let store = super::super::location::open(file_url(&bucket).as_str()).unwrap();
    // No grace at all: every chunk is past it the moment it is written.
    let timing = crate::store::Timing {
        grace: std::time::Duration::ZERO,
        ..crate::store::Timing::with_lease(std::time::Duration::from_secs(30))
    };
    let pusher = Pusher::start(store, "test".into(), &timing);
    let trees = [Tree {
        name: "workspace",
        root: work.clone(),
        skip: &[],
        only: None,
    }];
    let err = pusher.push("sbx-1", "p", &trees).await.unwrap_err();
    assert!(matches!(err, StoreError::Slow { .. }), "{err}");
    assert!(
        err.to_string().contains("CODE_SANDBOX_STORE_GRACE_SECONDS"),
        "{err}"
    );
    assert!(!bucket.join("principals/p/sandboxes/sbx-1/manifest.json").exists());
    let _ = std::fs::remove_dir_all(root);
}
