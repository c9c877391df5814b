//! The E2B backend behind the interpreter trait: creating, resuming, running code in and
//! closing remote sandboxes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;

use super::client::{E2bError, RemoteState};
use super::entry::{Activity, Entry, InUse};
use super::fleet::Fleet;
use super::kept;
use super::stream::Collector;
use crate::config::Settings;
use crate::sandbox::timeouts::MAX_CALL;
use crate::sandbox::{
    CreateOptions, ExecOptions, Execution, InstallOutcome, Interpreter, LimitKind, Limits, Package, PyError,
    SandboxError, SandboxFiles, SandboxInfo, SandboxState, SandboxStatus, Usage,
};

/// How long an idle E2B sandbox lives; every use extends it again.
const LIFETIME_S: u64 = 15 * 60;

pub struct E2bBackend {
    pub(super) fleet: Arc<Fleet>,
}

impl E2bBackend {
    pub fn build(settings: Arc<Settings>) -> Result<Arc<dyn Interpreter>, SandboxError> {
        Ok(Arc::new(E2bBackend {
            fleet: Fleet::new(settings)?,
        }))
    }

    /// The sandbox, ready to use and marked in use until the guard drops: a paused one is
    /// connected (resumed) first, in a place among the running ones.
    pub(super) async fn entry(&self, id: &str) -> Result<InUse, SandboxError> {
        let e = self.fleet.lookup(id)?;
        if !e.paused {
            return Ok(InUse::new(e));
        }
        let claim = InUse::new(e.clone());
        self.fleet.make_room(Some(id)).await?;
        drop(claim);
        let remote = match self.fleet.client.connect(&e.remote.id, LIFETIME_S).await {
            Ok(r) => r,
            Err(E2bError::Gone(404)) => {
                self.fleet.lock().remove(id);
                return Err(SandboxError::NotFound(id.to_string()));
            }
            Err(err) => return Err(err.into()),
        };
        let resumed = Arc::new(Entry {
            remote,
            created_at: e.created_at,
            executions: AtomicU64::new(e.executions.load(Ordering::SeqCst)),
            limits: e.limits.clone(),
            paused: false,
            activity: e.activity.clone(),
        });
        self.fleet.lock().replace(id, resumed.clone());
        Ok(InUse::new(resumed))
    }

    /// Runs code and collects the stream, bounded by `timeout` and the client's cancellation.
    async fn run(
        &self,
        e: &Entry,
        code: &str,
        timeout: Duration,
        opts: &ExecOptions,
    ) -> Result<Execution, SandboxError> {
        let started = std::time::Instant::now();
        let mut collector = Collector::new(self.fleet.settings.output_limit_bytes);
        collector.sink = opts.output.clone();
        let cancel = opts.cancel.clone().unwrap_or_default();
        let work = async {
            let resp = self.fleet.client.execute(&e.remote, code).await?;
            let mut body = resp.bytes_stream();
            while let Some(chunk) = body.next().await {
                match chunk {
                    Ok(bytes) => collector.feed(&bytes).map_err(E2bError::Protocol)?,
                    // The connection broke: whatever arrived is kept, and finish() says it was cut.
                    Err(_) => break,
                }
                if collector.ended {
                    break;
                }
            }
            Ok::<(), E2bError>(())
        };
        // E2B ends a sandbox when its lifetime runs out, even mid-run: a background run of
        // hours keeps extending it while it goes.
        let keep_alive = async {
            let every = Duration::from_secs(LIFETIME_S / 3);
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tick.tick().await;
                if let Err(err) = self.fleet.client.extend(&e.remote.id, LIFETIME_S).await {
                    tracing::warn!("could not extend E2B sandbox {} during a run: {err}", e.remote.id);
                }
            }
        };
        let outcome = tokio::select! {
            _ = cancel.cancelled() => Stopped::Cancelled,
            never = keep_alive => never,
            r = tokio::time::timeout(timeout, work) => match r {
                Err(_) => Stopped::Timeout,
                Ok(Err(e)) => return Err(e.into()),
                Ok(Ok(())) => Stopped::Finished,
            },
        };
        let mut ex = collector.finish();
        match outcome {
            Stopped::Timeout => {
                ex.limit = Some(LimitKind::Timeout);
                ex.error = Some(PyError {
                    name: "TimeoutError".into(),
                    value: format!(
                        "no answer within {:.0} s; the remote code may still be running",
                        timeout.as_secs_f64()
                    ),
                    traceback: String::new(),
                });
            }
            Stopped::Cancelled => {
                ex.error = Some(PyError {
                    name: "Cancelled".into(),
                    value: "the call was cancelled; the remote code may still be running".into(),
                    traceback: String::new(),
                });
            }
            Stopped::Finished => {}
        }
        ex.duration_ms = started.elapsed().as_millis() as u64;
        Ok(ex)
    }
}

/// How a remote execution ended, as far as this side can tell.
enum Stopped {
    Finished,
    Timeout,
    Cancelled,
}

#[async_trait]
impl Interpreter for E2bBackend {
    fn backend(&self) -> &'static str {
        "e2b"
    }

    async fn create(&self, opts: CreateOptions) -> Result<SandboxInfo, SandboxError> {
        self.fleet.make_room(None).await?;
        let remote = self.fleet.client.create(LIFETIME_S).await?;
        let limits = Limits {
            timeout_seconds: self.fleet.settings.sandbox_timeout_seconds(opts.timeout_seconds),
            memory_mb: opts.memory_mb.unwrap_or(0),
            disk_bytes: 0,
            output_bytes: self.fleet.settings.output_limit_bytes as u64,
            fuel_per_call: None,
        };
        let id = remote.id.clone();
        let entry = Arc::new(Entry {
            remote,
            created_at: chrono::Utc::now(),
            executions: AtomicU64::new(0),
            limits: limits.clone(),
            paused: false,
            activity: Arc::new(Activity::new()),
        });
        self.fleet.lock().insert(id.clone(), entry);
        crate::sandbox::events::opened(&id);
        Ok(SandboxInfo {
            sandbox_id: id,
            backend: "e2b".into(),
            python_version: "3 (E2B code interpreter)".into(),
            workspace: crate::sandbox::paths::WORKSPACE.into(),
            limits,
            notes: Vec::new(),
        })
    }

    async fn close(&self, id: &str) -> Result<(), SandboxError> {
        let e = self.fleet.lookup(id)?;
        self.fleet.lock().remove(id);
        crate::sandbox::events::closed(id);
        self.fleet.client.kill(&e.remote.id).await?;
        Ok(())
    }

    async fn status(&self, id: &str) -> Result<SandboxStatus, SandboxError> {
        let e = self.fleet.lookup(id)?;
        let state = if e.activity.in_use() {
            SandboxState::Busy
        } else if e.paused {
            // Paused by this server: no need to ask E2B.
            SandboxState::Paused
        } else {
            match self.fleet.client.state(&e.remote.id).await? {
                RemoteState::Paused => SandboxState::Paused,
                RemoteState::Running => SandboxState::Running,
            }
        };
        Ok(SandboxStatus {
            sandbox_id: id.to_string(),
            state,
            created_at: e.created_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            executions: e.executions.load(Ordering::SeqCst),
            last_used_at: e
                .activity
                .last_used_at()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            disk_bytes: 0,
            limits: e.limits.clone(),
            checkpoints: Vec::new(),
        })
    }

    async fn list(&self) -> Vec<SandboxStatus> {
        let mut all = self.fleet.lock().all();
        all.sort_by_cached_key(|e| e.activity.idle_for());
        let ids: Vec<String> = all.iter().map(|e| e.remote.id.clone()).collect();
        let mut out = Vec::new();
        for id in ids {
            if let Ok(s) = self.status(&id).await {
                out.push(s);
            }
        }
        out
    }

    async fn suspend(&self, id: &str) -> Result<bool, SandboxError> {
        let e = self.fleet.lookup(id)?;
        if e.paused {
            return Ok(true);
        }
        if e.activity.in_use() {
            return Ok(false);
        }
        self.fleet.pause(&e).await?;
        Ok(true)
    }

    async fn recently_used(&self) -> Vec<String> {
        let mut used: Vec<Arc<Entry>> = self
            .fleet
            .lock()
            .all()
            .into_iter()
            .filter(|e| e.activity.used_here())
            .collect();
        used.sort_by_cached_key(|e| e.activity.idle_for());
        used.into_iter().map(|e| e.remote.id.clone()).collect()
    }

    fn usage(&self, id: &str) -> Result<Usage, SandboxError> {
        let e = self.fleet.lookup(id)?;
        Ok(Usage {
            memory_mb: e.limits.memory_mb,
            live: !e.paused,
            disk_bytes: 0,
        })
    }

    async fn execute(&self, id: &str, code: &str, opts: ExecOptions) -> Result<Execution, SandboxError> {
        let e = self.entry(id).await?;
        // Keep the sandbox alive while it is used; a sandbox that is already gone says so here.
        self.fleet.client.extend(&e.remote.id, LIFETIME_S).await?;
        let timeout = e.limits.timeout_for(&opts);
        let ex = self.run(&e, code, timeout, &opts).await?;
        e.executions.fetch_add(1, Ordering::SeqCst);
        Ok(ex)
    }

    async fn install_package(&self, id: &str, name: &str) -> Result<InstallOutcome, SandboxError> {
        // Only plain names reach the remote shell.
        let req =
            crate::wheels::resolve::parse_request(name).map_err(|e| SandboxError::Package(Box::new(e)))?;
        let spec = req.to_string();
        if spec.contains(['\'', '"', '`', '$', '\n']) {
            return Err(SandboxError::Package(
                format!("'{name}' is not a plain package name").into(),
            ));
        }
        let e = self.entry(id).await?;
        self.fleet.client.extend(&e.remote.id, LIFETIME_S).await?;
        // Through the kernel, so the package lands where the kernel imports from.
        let code = format!("%pip install --disable-pip-version-check '{spec}'");
        let ex = self.run(&e, &code, MAX_CALL, &ExecOptions::default()).await?;
        if let Some(err) = ex.error {
            return Err(SandboxError::Package(
                format!("pip failed: {}: {}\n{}", err.name, err.value, ex.stderr).into(),
            ));
        }
        let installed: Vec<Package> = ex
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix("Successfully installed "))
            .flat_map(|l| l.split_whitespace())
            .filter_map(|p| p.rsplit_once('-'))
            .map(|(n, v)| Package {
                name: crate::wheels::normalize(n),
                version: v.to_string(),
            })
            .collect();
        if installed.is_empty() && !ex.stdout.contains("Requirement already satisfied") {
            return Err(SandboxError::Package(
                format!("pip did not install '{name}':\n{}{}", ex.stdout, ex.stderr).into(),
            ));
        }
        Ok(InstallOutcome {
            already_available: installed.is_empty(),
            installed,
            available: None,
            built_in: None,
            built_with: None,
        })
    }

    fn files(&self) -> &dyn SandboxFiles {
        self
    }

    async fn shutdown(&self) {
        if !self.fleet.settings.persist {
            let ids = self.fleet.lock().ids();
            for id in ids {
                let _ = self.close(&id).await;
            }
            return;
        }
        // Paused, not killed: E2B keeps memory and files, and the next start connects again.
        let mut record = Vec::new();
        let all = self.fleet.lock().all();
        for e in all {
            if !e.paused
                && let Err(err) = self.fleet.client.pause(&e.remote.id).await
            {
                tracing::warn!("could not pause E2B sandbox {}: {err}", e.remote.id);
                continue;
            }
            record.push(kept::Kept {
                id: e.remote.id.clone(),
                created_at: e.created_at,
                executions: e.executions.load(Ordering::SeqCst),
                limits: e.limits.clone(),
                paused_at: chrono::Utc::now(),
                last_used: Some(e.activity.last_used_at()),
            });
        }
        if let Err(err) = kept::store(&self.fleet.settings.home_dir(), &record) {
            tracing::warn!("could not record the paused E2B sandboxes: {err}");
        }
    }
}
