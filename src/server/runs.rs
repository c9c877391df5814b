//! Background runs: code that may take longer than a client waits for one request (the
//! TypeScript SDK gives up after 60 s). `execute_code` with `background: true` starts one and
//! returns at once; `get_run` reads what it has printed since an offset and, once it ends, its
//! whole result; `cancel_run` stops it.
//!
//! A run belongs to the principal that started it, and its sandbox is busy while it goes. Its
//! output is kept here (the last [`KEEP`] bytes of each stream) and written to the sandbox's
//! `.outputs/runs/<run id>/` about once a second, with a record of the run, so a client that
//! went away, or a server that restarted, still finds what it printed: a run whose record
//! still says `running` after a restart was cut off, and is reported `interrupted`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::host::lock::Locked;
use crate::sandbox::paths::WorkspacePath;
use crate::sandbox::{OutputKind, SandboxError, SandboxFiles};
use crate::server::outputs::RunState;
use crate::server::run_budget::RunBudget;
pub use crate::server::run_output::{KEEP, Page, Stream};

/// Finished runs remembered in memory (each may hold 2 x [`KEEP`]); older ones are read back
/// from their files, so a model starting run after run cannot grow the server's memory.
const REMEMBERED: usize = 16;
/// How often a run's files are brought up to date while it goes, for each MiB they hold:
/// rewriting them whole, a run that prints without end would otherwise rewrite 16 MiB a second.
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Where runs keep their files, inside the sandbox's workspace.
pub const RUNS_DIR: &str = ".outputs/runs";

/// What a run's `run.json` holds: enough to answer `get_run` after a restart.
#[derive(Serialize, Deserialize)]
pub struct RunRecord {
    pub run_id: String,
    pub sandbox_id: String,
    pub started_at: String,
    pub state: RunState,
    /// Milliseconds from start to end, once it ended.
    #[serde(default)]
    pub elapsed_ms: Option<u64>,
    /// Bytes of each stream no longer in its file.
    #[serde(default)]
    pub stdout_dropped: u64,
    #[serde(default)]
    pub stderr_dropped: u64,
    /// The final result's structured content, once it ended.
    #[serde(default)]
    pub result: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What is known of a run while it goes.
struct Progress {
    state: RunState,
    stdout: Stream,
    stderr: Stream,
    /// The whole answer of the finished run, as `execute_code` would have given it.
    result: Option<CallToolResult>,
    elapsed: Option<Duration>,
    /// Output or state changed since the files were last written.
    unsaved: bool,
    /// Why it could not do its work (the backend failed, its sandbox was closed under it, the
    /// server stopped): an MCP task says failed, where code that raised says completed.
    failure: Option<String>,
}

pub struct Run {
    pub id: String,
    pub sandbox_id: String,
    /// The principal that started it (remote mode); `None` over stdio.
    pub owner: Option<String>,
    pub started_at: String,
    started: Instant,
    pub cancel: CancellationToken,
    progress: Mutex<Progress>,
    /// Bumped at every change, so a waiting `get_run` wakes for new output or the end.
    version: watch::Sender<u64>,
    /// Set once the run's last files are written: nothing of it touches its sandbox after.
    settled: std::sync::atomic::AtomicBool,
}

impl Run {
    fn new(sandbox_id: &str, owner: Option<String>) -> Arc<Run> {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        Arc::new(Run {
            id: format!("run-{sandbox_id}-{}", &suffix[..8]),
            sandbox_id: sandbox_id.to_string(),
            owner,
            started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            started: Instant::now(),
            cancel: CancellationToken::new(),
            settled: std::sync::atomic::AtomicBool::new(false),
            progress: Mutex::new(Progress {
                state: RunState::Queued,
                stdout: Stream::default(),
                stderr: Stream::default(),
                result: None,
                elapsed: None,
                unsaved: true,
                failure: None,
            }),
            version: watch::Sender::new(0),
        })
    }

    /// Takes output as the guest writes it.
    pub fn output(&self, kind: OutputKind, bytes: &[u8]) {
        {
            let mut p = self.progress.locked();
            match kind {
                OutputKind::Stdout => p.stdout.push(bytes),
                OutputKind::Stderr => p.stderr.push(bytes),
            }
            p.unsaved = true;
        }
        self.version.send_modify(|v| *v += 1);
    }

    /// Records how the run ended and its answer (and, if it could not do its work, why).
    pub fn finish(&self, state: RunState, result: CallToolResult, failure: Option<String>) {
        let was_going = {
            let mut p = self.progress.locked();
            let was_going = p.state.is_going();
            p.state = state;
            p.result = Some(result);
            p.failure = failure;
            p.elapsed = Some(self.started.elapsed());
            p.unsaved = true;
            was_going
        };
        if was_going && !state.is_going() {
            crate::telemetry::metrics::run_ended(state.as_str());
        }
        self.version.send_modify(|v| *v += 1);
    }

    pub fn state(&self) -> RunState {
        self.progress.locked().state
    }

    pub fn failure(&self) -> Option<String> {
        self.progress.locked().failure.clone()
    }

    /// Moves the run between queued and running: it got a slot and room for its interpreter,
    /// or lost the room and waits again.
    pub fn set_going(&self, state: RunState) {
        {
            let mut p = self.progress.locked();
            if !p.state.is_going() || p.state == state {
                return;
            }
            p.state = state;
            p.unsaved = true;
        }
        self.version.send_modify(|v| *v += 1);
    }

    /// Marks the run's last files written.
    pub fn settle(&self) {
        self.settled.store(true, std::sync::atomic::Ordering::SeqCst);
        self.version.send_modify(|v| *v += 1);
    }

    /// Waits up to `wait` until the run has ended and written its last files, so that a close
    /// of its sandbox does not race them.
    pub async fn settled(&self, wait: Duration) {
        let mut rx = self.version.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        while !self.settled.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.progress
            .locked()
            .elapsed
            .unwrap_or_else(|| self.started.elapsed())
    }

    /// Waits up to `wait` for new output past the offsets, or the end; at once when either is
    /// already there, or when `cancelled` fires.
    pub async fn wait(
        &self,
        wait: Duration,
        stdout_offset: u64,
        stderr_offset: u64,
        cancelled: &CancellationToken,
    ) {
        let mut rx = self.version.subscribe();
        let news = |p: &Progress| {
            !p.state.is_going() || p.stdout.total() > stdout_offset || p.stderr.total() > stderr_offset
        };
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if news(&self.progress.locked()) {
                return;
            }
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => return,
                _ = cancelled.cancelled() => return,
            }
        }
    }

    /// What `get_run` shows: pages of both streams from the offsets, and the answer if ended.
    pub fn view(&self, stdout_offset: u64, stderr_offset: u64, page: usize) -> RunView {
        let p = self.progress.locked();
        RunView {
            state: p.state,
            elapsed: p.elapsed.unwrap_or_else(|| self.started.elapsed()),
            stdout: p.stdout.page(stdout_offset, page),
            stderr: p.stderr.page(stderr_offset, page),
            last_line: p.stdout.last_line(),
            result: p.result.clone(),
        }
    }

    /// The files to write if anything changed since the last time: (stdout, stderr, record).
    fn unsaved(&self) -> Option<(Vec<u8>, Vec<u8>, RunRecord)> {
        let mut p = self.progress.locked();
        if !std::mem::take(&mut p.unsaved) {
            return None;
        }
        let record = RunRecord {
            run_id: self.id.clone(),
            sandbox_id: self.sandbox_id.clone(),
            started_at: self.started_at.clone(),
            state: p.state,
            elapsed_ms: p.elapsed.map(|e| e.as_millis() as u64),
            stdout_dropped: p.stdout.dropped(),
            stderr_dropped: p.stderr.dropped(),
            result: p
                .result
                .as_ref()
                .and_then(|r| r.structured_content.clone())
                .and_then(|v| v.as_object().cloned()),
        };
        Some((p.stdout.bytes().to_vec(), p.stderr.bytes().to_vec(), record))
    }

    /// How long to wait before bringing the files up to date again: a second for each MiB
    /// they hold (at least one).
    pub fn save_interval(&self) -> Duration {
        let p = self.progress.locked();
        let mib = (p.stdout.bytes().len() + p.stderr.bytes().len()) >> 20;
        FLUSH_EVERY * (mib.max(1) as u32)
    }

    /// Brings the run's files in the sandbox up to date, if anything changed.
    pub async fn save(&self, files: &dyn SandboxFiles) {
        let Some((stdout, stderr, record)) = self.unsaved() else {
            return;
        };
        let json = serde_json::to_vec_pretty(&record).unwrap_or_default();
        for (name, bytes) in [("stdout.txt", stdout), ("stderr.txt", stderr), ("run.json", json)] {
            if let Err(e) = files
                .write(&self.sandbox_id, &run_file(&self.id, name), bytes)
                .await
            {
                tracing::warn!("background run {}: could not write {name}: {e}", self.id);
            }
        }
    }
}

/// A run as `get_run` shows it.
pub struct RunView {
    pub state: RunState,
    pub elapsed: Duration,
    pub stdout: Page,
    pub stderr: Page,
    pub last_line: String,
    pub result: Option<CallToolResult>,
}

/// A file of run `run_id`, in its sandbox's workspace.
pub fn run_file(run_id: &str, name: &str) -> WorkspacePath {
    WorkspacePath::root().join(RUNS_DIR).join(run_id).join(name)
}

/// The sandbox a run id names (`run-<sandbox id>-<8 hex>`), for finding its files.
pub fn sandbox_of(run_id: &str) -> Option<&str> {
    let rest = run_id.strip_prefix("run-")?;
    let (sandbox, suffix) = rest.rsplit_once('-')?;
    let plain = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    (suffix.len() == 8 && suffix.bytes().all(|b| b.is_ascii_hexdigit()) && plain(sandbox)).then_some(sandbox)
}

/// The runs this server started: going, and the last [`REMEMBERED`] that ended.
pub struct Runs {
    runs: Mutex<HashMap<String, Arc<Run>>>,
    /// Slots for runs, apart from the interactive ones.
    pub budget: RunBudget,
}

impl Runs {
    /// `max_going`: `CODE_SANDBOX_MAX_BACKGROUND_RUNS` (see [`RunBudget::new`]).
    pub fn new(max_going: Option<usize>) -> Runs {
        Runs {
            runs: Mutex::default(),
            budget: RunBudget::new(max_going),
        }
    }

    /// 1 for the queued run that started first, and so on; `None` for one not queued.
    pub fn queue_position(&self, run: &Run) -> Option<u64> {
        if run.state() != RunState::Queued {
            return None;
        }
        let ahead = self
            .runs
            .locked()
            .values()
            .filter(|r| r.state() == RunState::Queued && r.started < run.started)
            .count();
        Some(ahead as u64 + 1)
    }

    /// Starts a run in `sandbox_id` for `owner`, unless one is going there.
    pub fn start(&self, sandbox_id: &str, owner: Option<String>) -> Result<Arc<Run>, SandboxError> {
        let mut runs = self.runs.locked();
        if let Some(going) = runs
            .values()
            .find(|r| r.sandbox_id == sandbox_id && r.state().is_going())
        {
            return Err(busy_error(going));
        }
        let mut ended: Vec<_> = runs
            .values()
            .filter(|r| !r.state().is_going())
            .map(|r| (r.started, r.id.clone()))
            .collect();
        if ended.len() >= REMEMBERED {
            ended.sort();
            let forget = ended.len() + 1 - REMEMBERED;
            for (_, id) in ended.into_iter().take(forget) {
                runs.remove(&id);
            }
        }
        let run = Run::new(sandbox_id, owner);
        runs.insert(run.id.clone(), run.clone());
        crate::telemetry::metrics::run_started();
        Ok(run)
    }

    /// The run with this id, if this server started it and `caller` may see it.
    pub fn get(&self, run_id: &str, caller: Option<&str>) -> Option<Arc<Run>> {
        let run = self.runs.locked().get(run_id).cloned()?;
        (run.owner.as_deref() == caller).then_some(run)
    }

    /// Waits (up to `wait`) until no run of `sandbox_id` that has ended is still writing its
    /// files (one still going is stopped by the close itself).
    pub async fn settle_sandbox(&self, sandbox_id: &str, wait: Duration) {
        let runs: Vec<Arc<Run>> = self
            .runs
            .locked()
            .values()
            .filter(|r| r.sandbox_id == sandbox_id && !r.state().is_going())
            .cloned()
            .collect();
        for r in runs {
            r.settled(wait).await;
        }
    }

    /// An error naming the run going in `sandbox_id`, if one is.
    pub fn check_idle(&self, sandbox_id: &str) -> Result<(), SandboxError> {
        match self
            .runs
            .locked()
            .values()
            .find(|r| r.sandbox_id == sandbox_id && r.state().is_going())
        {
            Some(going) => Err(busy_error(going)),
            None => Ok(()),
        }
    }
}

fn busy_error(going: &Run) -> SandboxError {
    SandboxError::RunGoing {
        sandbox_id: going.sandbox_id.clone(),
        run_id: going.id.clone(),
        seconds: going.elapsed().as_secs(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_offsets_and_never_split_a_character() {
        let mut s = Stream::default();
        s.push("héllo\nwörld\n".as_bytes());
        let p = s.page(0, 2);
        assert_eq!(p.text, "h");
        assert!(p.more);
        let q = s.page(p.next, 100);
        assert_eq!(q.text, "éllo\nwörld\n");
        assert!(!q.more);
        assert_eq!(q.next, s.total());
        assert_eq!(s.last_line(), "wörld");
    }

    #[test]
    fn past_the_cap_the_oldest_output_goes_and_an_old_offset_says_so() {
        let mut s = Stream::default();
        s.push(&vec![b'a'; KEEP]);
        s.push(b"tail");
        assert_eq!(s.total(), KEEP as u64 + 4);
        let p = s.page(0, 16);
        assert_eq!(p.skipped, 4, "the first four bytes are gone");
        assert_eq!(p.text, "a".repeat(16));
    }

    #[test]
    fn a_run_id_names_its_sandbox() {
        assert_eq!(sandbox_of("run-sbx-0123abcd-89abcdef"), Some("sbx-0123abcd"));
        assert_eq!(sandbox_of("run--89abcdef"), None);
        assert_eq!(sandbox_of("run-sbx-1-xyz"), None);
        assert_eq!(sandbox_of("sbx-1"), None);
        assert_eq!(
            sandbox_of("run-sbx-1/../../etc-0123abcd"),
            None,
            "only plain ids name a folder"
        );
    }
}
