//! The remote E2B backend: full Linux sandboxes in E2B's cloud behind the same two traits, so
//! the ten tools behave the same way on either backend.

mod client;
mod kept;
mod room;
mod stream;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::{Value, json};

pub use self::client::{Client, E2bError, Remote, RemoteState};
use self::room::{Activity, InUse};
use self::stream::Collector;
use crate::config::{MAX_TIMEOUT, Settings};
use crate::sandbox::open_set::OpenSet;
use crate::sandbox::paths::WorkspacePath;
use crate::sandbox::retention::{Gone, Why};
use crate::sandbox::{
    CreateOptions, ExecOptions, Execution, FileEntry, FileKind, InstallOutcome, Interpreter, LimitKind,
    Limits, Package, PyError, SandboxError, SandboxFiles, SandboxInfo, SandboxState, SandboxStatus, Usage,
};

/// How long an idle E2B sandbox lives; every use extends it again.
const LIFETIME_S: u64 = 15 * 60;

impl From<E2bError> for SandboxError {
    fn from(e: E2bError) -> Self {
        SandboxError::Backend(Box::new(e))
    }
}

struct Entry {
    remote: Remote,
    created_at: chrono::DateTime<chrono::Utc>,
    executions: AtomicU64,
    limits: Limits,
    /// Paused (by an earlier run of the server, or to make room for another): connected, and
    /// so resumed, on first use.
    paused: bool,
    /// Its use, shared by the entries that stand for it as it is paused and resumed.
    activity: Arc<Activity>,
}

impl Entry {
    /// The same sandbox, paused: connecting again will resume it.
    fn paused(&self) -> Entry {
        Entry {
            remote: Remote {
                id: self.remote.id.clone(),
                token: None,
                domain: None,
            },
            created_at: self.created_at,
            executions: AtomicU64::new(self.executions.load(Ordering::SeqCst)),
            limits: self.limits.clone(),
            paused: true,
            activity: self.activity.clone(),
        }
    }
}

pub struct E2bBackend {
    client: Client,
    settings: Arc<Settings>,
    open: Arc<Mutex<OpenSet<Entry>>>,
    /// Sandboxes this server deleted by itself (retention, eviction), so naming one says why.
    gone: Arc<Gone>,
}

impl E2bBackend {
    pub fn build(settings: Arc<Settings>) -> Result<Arc<dyn Interpreter>, SandboxError> {
        let client = Client::from_settings(&settings)?;
        let gone = Arc::new(Gone::new(
            settings
                .persist
                .then(|| settings.home_dir().join("e2b").join("deleted.json")),
        ));
        let mut open = OpenSet::default();
        if settings.persist {
            let retain =
                chrono::Duration::days(i64::try_from(settings.retain_days).unwrap_or(i64::MAX / 86_400_000));
            let (keep, expired): (Vec<_>, Vec<_>) = kept::claim(&settings.home_dir())
                .into_iter()
                .partition(|k| chrono::Utc::now() - k.last_used.unwrap_or(k.paused_at) < retain);
            for k in keep {
                tracing::info!("E2B sandbox {} is back (paused by an earlier run)", k.id);
                open.insert(
                    k.id.clone(),
                    Arc::new(Entry {
                        remote: Remote {
                            id: k.id,
                            token: None,
                            domain: None,
                        },
                        created_at: k.created_at,
                        executions: AtomicU64::new(k.executions),
                        // Read from disk, where it could have been edited: no more than a
                        // request could have asked for.
                        limits: Limits {
                            timeout_seconds: settings.sandbox_timeout_seconds(Some(k.limits.timeout_seconds)),
                            output_bytes: k.limits.output_bytes.min(settings.output_limit_bytes as u64),
                            ..k.limits
                        },
                        paused: true,
                        activity: Arc::new(Activity::kept(k.last_used.unwrap_or(k.paused_at))),
                    }),
                );
            }
            let c = client.clone();
            let g = gone.clone();
            tokio::spawn(async move {
                for k in expired {
                    tracing::info!(
                        "deleting E2B sandbox {}: unused for longer than CODE_SANDBOX_RETAIN_DAYS",
                        k.id
                    );
                    g.record(&k.id, Why::Retention);
                    let _ = c.kill(&k.id).await;
                }
            });
        }
        let backend = Arc::new(E2bBackend {
            client,
            settings,
            open: Arc::new(Mutex::new(open)),
            gone,
        });
        room::start_housekeeping(&backend);
        Ok(backend)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OpenSet<Entry>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lookup(&self, id: &str) -> Result<Arc<Entry>, SandboxError> {
        self.lock().get(id).ok_or_else(|| {
            self.gone
                .error(id)
                .unwrap_or_else(|| SandboxError::NotFound(id.to_string()))
        })
    }

    /// The sandbox, ready to use and marked in use until the guard drops: a paused one is
    /// connected (resumed) first, in a place among the running ones.
    async fn entry(&self, id: &str) -> Result<InUse, SandboxError> {
        let e = self.lookup(id)?;
        if !e.paused {
            return Ok(InUse::new(e));
        }
        let claim = InUse::new(e.clone());
        self.make_room(Some(id)).await?;
        drop(claim);
        let remote = match self.client.connect(&e.remote.id, LIFETIME_S).await {
            Ok(r) => r,
            Err(E2bError::Gone(404)) => {
                self.lock().remove(id);
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
        self.lock().replace(id, resumed.clone());
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
        let mut collector = Collector::new(self.settings.output_limit_bytes);
        let cancel = opts.cancel.clone().unwrap_or_default();
        let work = async {
            let resp = self.client.execute(&e.remote, code).await?;
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
        let outcome = tokio::select! {
            _ = cancel.cancelled() => Stopped::Cancelled,
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

    fn guest_path(path: &WorkspacePath) -> String {
        path.guest()
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
        self.make_room(None).await?;
        let remote = self.client.create(LIFETIME_S).await?;
        let limits = Limits {
            timeout_seconds: self.settings.sandbox_timeout_seconds(opts.timeout_seconds),
            memory_mb: opts.memory_mb.unwrap_or(0),
            disk_bytes: 0,
            output_bytes: self.settings.output_limit_bytes as u64,
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
        self.lock().insert(id.clone(), entry);
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
        let e = self.lookup(id)?;
        self.lock().remove(id);
        self.client.kill(&e.remote.id).await?;
        Ok(())
    }

    async fn status(&self, id: &str) -> Result<SandboxStatus, SandboxError> {
        let e = self.lookup(id)?;
        let state = if e.activity.in_use() {
            SandboxState::Busy
        } else if e.paused {
            // Paused by this server: no need to ask E2B.
            SandboxState::Paused
        } else {
            match self.client.state(&e.remote.id).await? {
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
        let mut all = self.lock().all();
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
        let e = self.lookup(id)?;
        if e.paused {
            return Ok(true);
        }
        if e.activity.in_use() {
            return Ok(false);
        }
        self.pause(&e).await?;
        Ok(true)
    }

    async fn recently_used(&self) -> Vec<String> {
        let mut used: Vec<Arc<Entry>> = self
            .lock()
            .all()
            .into_iter()
            .filter(|e| e.activity.used_here())
            .collect();
        used.sort_by_cached_key(|e| e.activity.idle_for());
        used.into_iter().map(|e| e.remote.id.clone()).collect()
    }

    fn usage(&self, id: &str) -> Result<Usage, SandboxError> {
        let e = self.lookup(id)?;
        Ok(Usage {
            memory_mb: e.limits.memory_mb,
            live: !e.paused,
            disk_bytes: 0,
        })
    }

    async fn execute(&self, id: &str, code: &str, opts: ExecOptions) -> Result<Execution, SandboxError> {
        let e = self.entry(id).await?;
        // Keep the sandbox alive while it is used; a sandbox that is already gone says so here.
        self.client.extend(&e.remote.id, LIFETIME_S).await?;
        let timeout = opts
            .timeout
            .unwrap_or(Duration::from_secs(e.limits.timeout_seconds))
            .min(MAX_TIMEOUT);
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
        self.client.extend(&e.remote.id, LIFETIME_S).await?;
        // Through the kernel, so the package lands where the kernel imports from.
        let code = format!("%pip install --disable-pip-version-check '{spec}'");
        let ex = self.run(&e, &code, MAX_TIMEOUT, &ExecOptions::default()).await?;
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
        })
    }

    fn files(&self) -> &dyn SandboxFiles {
        self
    }

    async fn shutdown(&self) {
        if !self.settings.persist {
            let ids = self.lock().ids();
            for id in ids {
                let _ = self.close(&id).await;
            }
            return;
        }
        // Paused, not killed: E2B keeps memory and files, and the next start connects again.
        let mut record = Vec::new();
        let all = self.lock().all();
        for e in all {
            if !e.paused
                && let Err(err) = self.client.pause(&e.remote.id).await
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
        if let Err(err) = kept::store(&self.settings.home_dir(), &record) {
            tracing::warn!("could not record the paused E2B sandboxes: {err}");
        }
    }
}

fn entry_kind(t: &str) -> FileKind {
    match t {
        "FILE_TYPE_FILE" => FileKind::File,
        "FILE_TYPE_DIRECTORY" => FileKind::Directory,
        "FILE_TYPE_SYMLINK" => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

#[async_trait]
impl SandboxFiles for E2bBackend {
    async fn list(&self, id: &str, path: &WorkspacePath) -> Result<Vec<FileEntry>, SandboxError> {
        let e = self.entry(id).await?;
        let v = self
            .client
            .filesystem(
                &e.remote,
                "ListDir",
                json!({"path": Self::guest_path(path), "depth": 1}),
            )
            .await
            .map_err(|err| match err {
                E2bError::Gone(404) => SandboxError::FileNotFound {
                    path: path.relative(),
                },
                other => other.into(),
            })?;
        let mut out: Vec<FileEntry> = v
            .get("entries")
            .and_then(Value::as_array)
            .map(|a| a.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|en| {
                let name = en.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                FileEntry {
                    path: path.join(&name).relative(),
                    kind: entry_kind(en.get("type").and_then(Value::as_str).unwrap_or("")),
                    size: match en.get("size") {
                        Some(Value::String(s)) => s.parse().unwrap_or(0),
                        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
                        _ => 0,
                    },
                    name,
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn read(&self, id: &str, path: &WorkspacePath, limit: u64) -> Result<Vec<u8>, SandboxError> {
        let e = self.entry(id).await?;
        let bytes = self
            .client
            .read_file(&e.remote, &Self::guest_path(path))
            .await
            .map_err(|err| match err {
                E2bError::Gone(404) => SandboxError::FileNotFound {
                    path: path.relative(),
                },
                E2bError::Status { status: 400, .. } => SandboxError::IsDirectory {
                    path: path.relative(),
                },
                other => other.into(),
            })?;
        // envd sends the whole file; the limit still holds for what we hand on.
        if bytes.len() as u64 > limit {
            return Err(SandboxError::TooLarge {
                path: path.relative(),
                size: bytes.len() as u64,
                limit,
            });
        }
        Ok(bytes)
    }

    async fn write(&self, id: &str, path: &WorkspacePath, bytes: Vec<u8>) -> Result<u64, SandboxError> {
        let e = self.entry(id).await?;
        let n = bytes.len() as u64;
        self.client
            .write_file(&e.remote, &Self::guest_path(path), bytes)
            .await?;
        Ok(n)
    }
}
