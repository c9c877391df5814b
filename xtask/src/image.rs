//! `cargo xtask image [--test]`: the OCI image a team deploys (deploy/kubernetes), built with
//! buildah (Debian's package) from `scratch`: no registry is reachable from here, and the
//! server needs little. The Linux bundle's server folder (the binary, the pinned runtime with
//! its warm image compiled for the baseline x86_64 CPU, the wheels), the shared libraries the
//! binary links, the CA roots, and a non-root user; it serves HTTP on 0.0.0.0:8765 with its
//! home on /data. The image is written to `dist/` as an OCI archive too.
//!
//! `--test` starts the server inside the image with `buildah run --isolation chroot` (podman
//! cannot start containers on these machines) and calls it from outside on loopback: health,
//! readiness, a tool call, and that the server runs as the image's user.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The image's non-root user.
pub const UID: u32 = 10001;
/// Where the server's folder lives in the image.
const SERVER_DIR: &str = "opt/mcp-code-sandbox";
/// The image's CA roots (Debian's bundle, which rustls' platform verifier reads on Linux).
const CA_BUNDLE: &str = "etc/ssl/certs/ca-certificates.crt";

fn say(msg: &str) {
    eprintln!("image: {msg}");
}

/// Debian's buildah, installed the first time.
fn buildah_path() -> anyhow::Result<PathBuf> {
    Ok(crate::debian::ensure_tool(
        "cargo xtask image",
        "buildah",
        "buildah",
    )?)
}

fn buildah(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(buildah_path()?)
        .arg("--storage-driver")
        .arg("vfs")
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| anyhow::anyhow!("could not run buildah (Debian's `buildah` package): {e}"))?;
    anyhow::ensure!(out.status.success(), "buildah {} failed", args.join(" "));
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

/// The image's name and tag.
pub fn name() -> String {
    format!("mcp-code-sandbox:{}", env!("CARGO_PKG_VERSION"))
}

/// The shared libraries `exe` links (and their loader), as `ldd` finds them here.
fn linked(exe: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let out = Command::new("ldd").arg(exe).output()?;
    anyhow::ensure!(out.status.success(), "ldd {} failed", exe.display());
    Ok(String::from_utf8(out.stdout)?
        .lines()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with('/')))
        .map(PathBuf::from)
        .collect())
}

/// Copies host file `from` to the same absolute path under `rootfs`, following links.
fn place(rootfs: &Path, from: &Path) -> anyhow::Result<()> {
    let to = rootfs.join(from.strip_prefix("/")?);
    std::fs::create_dir_all(to.parent().unwrap_or(rootfs))?;
    std::fs::copy(from, &to)?;
    Ok(())
}

/// The image's file tree, made under `target/image/rootfs` from the unpacked bundle.
fn rootfs(root: &Path, bundle: &Path) -> anyhow::Result<PathBuf> {
    let work = root.join("target/image");
    let unpacked = work.join("bundle");
    let rootfs = work.join("rootfs");
    let _ = std::fs::remove_dir_all(&rootfs);
    crate::bundle::unpack(bundle, &unpacked)?;
    let server = rootfs.join(SERVER_DIR);
    std::fs::create_dir_all(server.parent().unwrap_or(&rootfs))?;
    let ok = Command::new("cp")
        .arg("-a")
        .arg(unpacked.join("server"))
        .arg(&server)
        .status()?
        .success();
    anyhow::ensure!(ok, "copying the bundle's server folder failed");
    for lib in linked(&server.join("mcp-code-sandbox"))? {
        place(&rootfs, &lib)?;
    }
    place(&rootfs, &Path::new("/").join(CA_BUNDLE))?;
    let etc = rootfs.join("etc");
    std::fs::write(
        etc.join("passwd"),
        format!(
            "root:x:0:0:root:/:/sbin/nologin\nsandbox:x:{UID}:{UID}:mcp-code-sandbox:/data:/sbin/nologin\n"
        ),
    )?;
    std::fs::write(etc.join("group"), format!("root:x:0:\nsandbox:x:{UID}:\n"))?;
    // A /tmp anyone may use; /data is added apart, owned by the user (see `commit`).
    let tmp = rootfs.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o1777))?;
    Ok(rootfs)
}

/// Builds the image from the Linux bundle and writes `dist/<name>-oci.tar`; the archive's path.
pub async fn build(root: &Path, bin: &Path, home: &Path) -> anyhow::Result<PathBuf> {
    let bundle = crate::bundle::ensure_current(root, bin, home).await?;
    say("building the image's file tree from the Linux bundle");
    let tree = rootfs(root, &bundle)?;
    let ctr = buildah(&["from", "scratch"])?;
    let result = commit(&ctr, &tree);
    let _ = buildah(&["rm", &ctr]);
    result?;
    let archive = root.join(format!(
        "dist/mcp-code-sandbox-{}-linux-x86_64-oci.tar",
        env!("CARGO_PKG_VERSION")
    ));
    let _ = std::fs::remove_file(&archive);
    buildah(&["push", &name(), &format!("oci-archive:{}", archive.display())])?;
    say(&format!("{} built; {}", name(), archive.display()));
    Ok(archive)
}

fn commit(ctr: &str, tree: &Path) -> anyhow::Result<()> {
    let user = format!("{UID}:{UID}");
    buildah(&["copy", ctr, &format!("{}/", tree.display()), "/"])?;
    // The user's home: a volume mounted there keeps its own owner (fsGroup under Kubernetes).
    let empty = tree.with_file_name("data");
    std::fs::create_dir_all(&empty)?;
    buildah(&[
        "copy",
        "--chown",
        &user,
        ctr,
        &format!("{}/", empty.display()),
        "/data",
    ])?;
    let entry = format!("[\"/{SERVER_DIR}/mcp-code-sandbox\"]");
    // The MCP Registry takes an image as this server's only if its label names it.
    if let Ok(repo) = crate::registry::repository(None) {
        let label = format!(
            "io.modelcontextprotocol.server.name={}",
            crate::registry::server_name(&repo)
        );
        buildah(&["config", "--label", &label, ctr])?;
    }
    buildah(&[
        "config",
        "--user",
        &user,
        "--workingdir",
        "/data",
        "--env",
        "CODE_SANDBOX_HOME=/data",
        "--env",
        "CODE_SANDBOX_TRANSPORT=http",
        "--env",
        "CODE_SANDBOX_LISTEN=0.0.0.0:8765",
        "--port",
        "8765",
        "--entrypoint",
        &entry,
        "--label",
        "org.opencontainers.image.title=mcp-code-sandbox",
        "--label",
        "org.opencontainers.image.licenses=MIT",
        ctr,
    ])?;
    buildah(&["commit", "--rm=false", ctr, &name()])?;
    // The image this one replaced keeps no name: drop it, or each build keeps another copy.
    let _ = buildah(&["rmi", "--prune"]);
    Ok(())
}

/// Starts the server inside the image (chroot isolation, the host's network) on a loopback
/// port, and checks it from outside.
pub async fn test() -> anyhow::Result<()> {
    let ctr = buildah(&["from", &name()])?;
    let result = run_and_check(&ctr).await;
    let _ = buildah(&["rm", &ctr]);
    result
}

async fn run_and_check(ctr: &str) -> anyhow::Result<()> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let listen = format!("CODE_SANDBOX_LISTEN=127.0.0.1:{port}");
    let mut server = tokio::process::Command::new(buildah_path()?)
        .args([
            "--storage-driver",
            "vfs",
            "run",
            "--isolation",
            "chroot",
            "--env",
            &listen,
            ctr,
        ])
        // buildah run needs the command spelled out (it does not run the entrypoint).
        .arg("--")
        .arg(format!("/{SERVER_DIR}/mcp-code-sandbox"))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let checked = check(port).await;
    if let Some(pid) = server.id() {
        // SAFETY: kill only sends a signal to the process this one started.
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(60), server.wait()).await;
    say("the server in the image stopped (buildah reports the stop as \"exit status 1\"; that is expected)");
    checked
}

async fn check(port: u16) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let mut ready = false;
    for _ in 0..600 {
        if http
            .get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    anyhow::ensure!(ready, "the server in the image was not ready within 120 s");
    let health = http.get(format!("{base}/healthz")).send().await?;
    anyhow::ensure!(health.status().is_success(), "/healthz: {}", health.status());
    let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
        format!("{base}/mcp"),
    );
    let transport = rmcp::transport::StreamableHttpClientTransport::with_client(http.clone(), config);
    let client = rmcp::ServiceExt::serve((), transport).await?;
    let args = serde_json::json!({"code": "import pandas as pd\npd.Series([1, 2, 3]).sum()"});
    let serde_json::Value::Object(args) = args else {
        unreachable!()
    };
    let r = client
        .call_tool(rmcp::model::CallToolRequestParams::new("execute_code").with_arguments(args))
        .await?;
    let v = r.structured_content.unwrap_or_default();
    anyhow::ensure!(
        v["result"] == "np.int64(6)" || v["result"] == "6",
        "execute_code in the image: {v}"
    );
    let _ = client.cancel().await;
    let uid = server_uid(port)?;
    anyhow::ensure!(
        uid == UID,
        "the server runs as uid {uid}, not the image's user {UID}"
    );
    say(&format!(
        "the image serves on loopback port {port}: /healthz, /readyz, execute_code with pandas, as uid {uid}"
    ));
    Ok(())
}

/// The uid of the process listening on `port` (the server inside the container).
fn server_uid(port: u16) -> anyhow::Result<u32> {
    for e in std::fs::read_dir("/proc")?.flatten() {
        let Ok(cmd) = std::fs::read_to_string(e.path().join("cmdline")) else {
            continue;
        };
        let Ok(environ) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let wanted = format!("CODE_SANDBOX_LISTEN=127.0.0.1:{port}");
        let is_server = cmd.starts_with(&format!("/{SERVER_DIR}/mcp-code-sandbox"))
            && String::from_utf8_lossy(&environ).contains(&wanted);
        if !is_server {
            continue;
        }
        let status = std::fs::read_to_string(e.path().join("status"))?;
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|u| u.parse().ok());
        return uid.ok_or_else(|| anyhow::anyhow!("no Uid in /proc/.../status"));
    }
    anyhow::bail!("the server's process was not found")
}
