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
    // By full path: a bare name left to the system is not found under some hosts (program.rs).
    let program = super::program::locate(command).ok_or_else(|| {
        format!("its command {command:?} could not be started: it was not found in any folder of PATH")
    })?;
    let mut cmd = tokio::process::Command::new(&program);
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

/// Why a line of a server's output was not decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Longer than the limit: rmcp skips it unread.
    TooLarge,
    /// JSON nested deeper than the decoder goes ([`MAX_DEPTH`]): rmcp drops it.
    TooDeep,
}

/// Deepest nesting serde_json decodes (its recursion limit is 128 levels, the last refused).
pub const MAX_DEPTH: usize = 127;

/// Told when a line of a server's output will not be decoded, and why; without it, the call
/// the line answered would wait for its deadline.
#[derive(Default)]
pub struct Skipped {
    notify: tokio::sync::Notify,
    why: std::sync::Mutex<Option<Skip>>,
}

impl Skipped {
    fn tell(&self, why: Skip) {
        *crate::host::lock::Locked::locked(&self.why) = Some(why);
        self.notify.notify_waiters();
    }

    /// Resolves at the next skipped line (wait for it before asking [`Skipped::why`]).
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }

    pub fn why(&self) -> Option<Skip> {
        *crate::host::lock::Locked::locked(&self.why)
    }
}

/// A stdio server's output as rmcp reads it, watched for lines rmcp will not decode: past
/// `limit` bytes, or nested past [`MAX_DEPTH`].
pub struct LineWatch<R> {
    inner: R,
    limit: usize,
    run: usize,
    /// JSON nesting at this point of the line, outside strings.
    depth: usize,
    in_string: bool,
    escaped: bool,
    skipped: Arc<Skipped>,
}

impl<R> LineWatch<R> {
    pub fn new(inner: R, limit: usize, skipped: Arc<Skipped>) -> Self {
        LineWatch {
            inner,
            limit,
            run: 0,
            depth: 0,
            in_string: false,
            escaped: false,
            skipped,
        }
    }

    fn see(&mut self, b: u8) {
        if b == b'\n' {
            (self.run, self.depth, self.in_string, self.escaped) = (0, 0, false, false);
            return;
        }
        self.run += 1;
        if self.run == self.limit + 1 {
            self.skipped.tell(Skip::TooLarge);
        }
        if self.in_string {
            match b {
                _ if self.escaped => self.escaped = false,
                b'\\' => self.escaped = true,
                b'"' => self.in_string = false,
                _ => {}
            }
            return;
        }
        match b {
            b'"' => self.in_string = true,
            b'[' | b'{' => {
                self.depth += 1;
                if self.depth == MAX_DEPTH + 1 {
                    self.skipped.tell(Skip::TooDeep);
                }
            }
            b']' | b'}' => self.depth = self.depth.saturating_sub(1),
            _ => {}
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
            this.see(b);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(text: &str) -> Option<Skip> {
        let skipped = Arc::new(Skipped::default());
        let mut w = LineWatch::new(tokio::io::empty(), 1 << 20, skipped.clone());
        for b in text.bytes() {
            w.see(b);
        }
        skipped.why()
    }

    #[test]
    fn deep_lines_are_told_and_brackets_in_strings_are_not_nesting() {
        let deep = format!("{}{}", "[".repeat(400), "]".repeat(400));
        assert_eq!(watch(&deep), Some(Skip::TooDeep));
        let fine = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(watch(&fine), None);
        let quoted = format!("{{\"a\": \"{}\\\"\"}}", "[".repeat(400));
        assert_eq!(watch(&quoted), None);
        // Each line starts again.
        let lines = format!("{}\n{}", "[".repeat(100), "[".repeat(100));
        assert_eq!(watch(&lines), None);
    }
}
