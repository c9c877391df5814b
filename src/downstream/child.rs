//! A stdio server's process: started with only the environment it needs, its stderr into our
//! log under its name, its stdout watched for messages too large to read.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// What a child server keeps of this process's environment besides what its entry gives: what
/// programs need to run at all (the same list MCP's own SDKs pass), never our settings or keys.
#[cfg(unix)]
const KEPT_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR",
];
#[cfg(windows)]
const KEPT_ENV: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
    "PROGRAMFILES",
    "COMSPEC",
];

/// Longest stderr line logged as it is; the rest of a longer one is cut.
const LOG_LINE: usize = 2000;

/// Starts `command`; the child is killed when its handle drops.
pub fn spawn(
    server: &str,
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&Path>,
) -> Result<(Child, ChildStdout, ChildStdin), String> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).env_clear();
    for key in KEPT_ENV {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    cmd.envs(env);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("its command {command:?} could not be started: {e}"))?;
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err("its standard input and output could not be connected".into());
    };
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(log_stderr(server.to_string(), stderr));
    }
    Ok((child, stdout, stdin))
}

/// The child's stderr, line by line into our log under its name; a line without an end is cut,
/// so a server that floods stderr costs a bounded buffer.
async fn log_stderr(server: String, mut stderr: tokio::process::ChildStderr) {
    let mut buf = vec![0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' {
                emit(&server, &line);
                line.clear();
            } else if line.len() < LOG_LINE {
                line.push(b);
            }
        }
    }
    if !line.is_empty() {
        emit(&server, &line);
    }
}

fn emit(server: &str, line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    if !text.is_empty() {
        tracing::info!(target: "mcp_code_sandbox::downstream", "[{server}] {text}");
    }
}

/// A stdio server's output as rmcp reads it, watched for a line past `limit`: rmcp skips such
/// a line without telling anyone, and the call it answered would wait for its deadline.
pub struct LineWatch<R> {
    inner: R,
    limit: usize,
    run: usize,
    oversized: Arc<tokio::sync::Notify>,
}

impl<R> LineWatch<R> {
    pub fn new(inner: R, limit: usize, oversized: Arc<tokio::sync::Notify>) -> Self {
        LineWatch {
            inner,
            limit,
            run: 0,
            oversized,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineWatch<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let this = &mut *self;
        for &b in &buf.filled()[before..] {
            if b == b'\n' {
                this.run = 0;
            } else {
                this.run += 1;
                if this.run == this.limit + 1 {
                    this.oversized.notify_waiters();
                }
            }
        }
        polled
    }
}
