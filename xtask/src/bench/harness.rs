//! Driving the real server from the bench: starting it, calling tools through rmcp's client,
//! homes of its own, and what the kernel says a process holds.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// A client of the server under measurement.
pub type Client = RunningService<RoleClient, ()>;

/// A server over stdio on `home`, with `settings` over the bench's defaults; its client and
/// pid. By default measured servers start clean: none takes over another's saved sandboxes.
pub async fn serve(
    bin: &Path,
    home: &Path,
    settings: &[(&str, &str)],
) -> anyhow::Result<(Client, Option<u32>)> {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.env("CODE_SANDBOX_HOME", home)
        .env("RUST_LOG", "warn")
        .env("CODE_SANDBOX_PERSIST", "false");
    for (k, v) in settings {
        cmd.env(k, v);
    }
    let transport = TokioChildProcess::new(cmd)?;
    let pid = transport.id();
    Ok((().serve(transport).await?, pid))
}

pub async fn spawn(bin: &Path, home: &Path) -> anyhow::Result<Client> {
    Ok(serve(bin, home, &[]).await?.0)
}

/// Waits until new sandboxes start from the warm image (it loads in the background).
pub async fn wait_for_warm(c: &RunningService<RoleClient, ()>) -> anyhow::Result<()> {
    for _ in 0..100 {
        let v = call(
            c,
            "create_run_close",
            json!({"code": "import sys\n'pandas' in sys.modules"}),
        )
        .await?;
        if v["result"] == "True" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

pub async fn new_sandbox(c: &RunningService<RoleClient, ()>) -> anyhow::Result<String> {
    let v = call(c, "create_sandbox", json!({})).await?;
    Ok(v["sandbox_id"].as_str().unwrap_or_default().to_string())
}

/// A home of its own that shares the installed runtime and caches.
/// `n` runs of `once`, each timed (what every row's median is taken over).
pub async fn timed<F, Fut>(n: usize, mut once: F) -> anyhow::Result<Vec<std::time::Duration>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = std::time::Instant::now();
        once().await?;
        times.push(t.elapsed());
    }
    Ok(times)
}

pub fn private_home(home: &Path, tag: &str) -> anyhow::Result<PathBuf> {
    let h = std::env::temp_dir().join(format!("mcs-bench-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&h)?;
    for d in ["runtime", "cache", "wheels"] {
        let _ = std::os::unix::fs::symlink(home.join(d), h.join(d));
    }
    Ok(h)
}

/// Size of everything below `p`, in bytes.
pub fn tree_bytes(p: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![p.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

pub async fn call(c: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> anyhow::Result<Value> {
    let Value::Object(o) = args else {
        anyhow::bail!("args")
    };
    let r = c
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(o))
        .await?;
    if r.is_error == Some(true) {
        anyhow::bail!("{tool} failed: {:?}", r.content);
    }
    Ok(r.structured_content.unwrap_or(Value::Null))
}

/// A `KEY: N kB` line of one of a process's files under /proc, in bytes.
pub fn proc_bytes(pid: u32, file: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()?;
    let kb: u64 = text
        .lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

pub fn rss_bytes(pid: u32) -> Option<u64> {
    proc_bytes(pid, "status", "VmRSS:")
}

/// Private resident memory (clean and dirty): pages only this process holds, so an image
/// mapped copy-on-write by many sandboxes counts once, in the page cache, not per sandbox.
pub fn private_bytes(pid: u32) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let kb: u64 = rollup
        .lines()
        .filter(|l| l.starts_with("Private_Clean:") || l.starts_with("Private_Dirty:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    Some(kb * 1024)
}

/// A helper process (a web server, a package index) killed when the measurement is done.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port free now, for a helper server to listen on.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Waits (up to 10 s) until something listens on loopback `port`.
pub fn wait_for_port(port: u16) {
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// CPython's `http.server` serving `dir` on a free loopback port: the process and the port.
pub fn serve_folder(dir: &Path) -> anyhow::Result<(Killed, u16)> {
    let port = free_port()?;
    let web = Killed(
        std::process::Command::new("python3")
            .args(["-m", "http.server", &port.to_string(), "--bind", "127.0.0.1"])
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?,
    );
    wait_for_port(port);
    Ok((web, port))
}
