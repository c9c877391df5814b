//! E2B sandboxes follow the local backend's rules: at most `CODE_SANDBOX_MAX_SANDBOXES` run at
//! once (past it the least recently used idle one is paused, which E2B does losslessly, and
//! resumed on its next use), and paused ones, which E2B bills for storage, are bounded by
//! `CODE_SANDBOX_RETAIN_DAYS` and `CODE_SANDBOX_KEEP_MB`, least recently used killed first.
//!
//! E2B does not report what a paused sandbox stores; each counts as its memory snapshot: its
//! `memory_mb`, or [`ASSUMED_MB`] when the template sets it.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::client::{Client, Remote};
use super::entry::{Activity, Entry};
use super::kept;
use crate::config::Settings;
use crate::host::lock::Locked;
use crate::sandbox::open_set::OpenSet;
use crate::sandbox::retention::{Gone, RECENT, Why};
use crate::sandbox::{Limits, SandboxError};

/// What a paused sandbox of the template's own size is counted as, in MiB.
const ASSUMED_MB: u64 = 512;
/// How often paused sandboxes are checked against their budget and retention.
const EVERY: Duration = Duration::from_secs(60);

/// The E2B sandboxes of this server, running and paused, and what bounds them.
pub struct Fleet {
    pub client: Client,
    pub settings: Arc<Settings>,
    open: Mutex<OpenSet<Entry>>,
    /// Sandboxes this server deleted by itself (retention, eviction), so naming one says why.
    gone: Arc<Gone>,
}

impl Fleet {
    /// The fleet, with the sandboxes an earlier run paused and kept; those past the retention
    /// period are killed in the background. Starts its housekeeping.
    pub fn new(settings: Arc<Settings>) -> Result<Arc<Fleet>, SandboxError> {
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
                        executions: std::sync::atomic::AtomicU64::new(k.executions),
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
        let fleet = Arc::new(Fleet {
            client,
            settings,
            open: Mutex::new(open),
            gone,
        });
        start_housekeeping(&fleet);
        Ok(fleet)
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, OpenSet<Entry>> {
        self.open.locked()
    }

    pub fn lookup(&self, id: &str) -> Result<Arc<Entry>, SandboxError> {
        self.lock().get(id).ok_or_else(|| {
            self.gone
                .error(id)
                .unwrap_or_else(|| SandboxError::NotFound(id.to_string()))
        })
    }

    /// Pauses least recently used idle sandboxes until fewer than the cap other than `me`
    /// are running.
    pub async fn make_room(&self, me: Option<&str>) -> Result<(), SandboxError> {
        let max = self.settings.max_sandboxes.max(1);
        loop {
            let running: Vec<Arc<Entry>> = self
                .lock()
                .all()
                .into_iter()
                .filter(|e| !e.paused && Some(e.remote.id.as_str()) != me)
                .collect();
            if running.len() < max {
                return Ok(());
            }
            let Some(victim) = running
                .into_iter()
                .filter(|e| !e.activity.in_use())
                .max_by_key(|e| e.activity.idle_for())
            else {
                return Err(SandboxError::AllBusy { live: max });
            };
            self.pause(&victim).await?;
        }
    }

    /// Pauses a running sandbox; its next use resumes it.
    pub async fn pause(&self, e: &Arc<Entry>) -> Result<(), SandboxError> {
        self.client.pause(&e.remote.id).await?;
        tracing::info!(
            "paused E2B sandbox {} to make room for another; its next use resumes it",
            e.remote.id
        );
        self.lock().replace(&e.remote.id, Arc::new(e.paused()));
        Ok(())
    }

    /// Kills paused sandboxes past the retention period, then least recently used ones past
    /// the disk budget (never one used within the hour).
    async fn tidy(&self) {
        let mut paused: Vec<Arc<Entry>> = self
            .lock()
            .all()
            .into_iter()
            .filter(|e| e.paused && !e.activity.in_use())
            .collect();
        paused.sort_by_cached_key(|e| std::cmp::Reverse(e.activity.idle_for()));
        let retain = Duration::from_secs(self.settings.retain_days.saturating_mul(86_400));
        let cost = |e: &Entry| match e.limits.memory_mb {
            0 => ASSUMED_MB << 20,
            mb => mb << 20,
        };
        let mut total: u64 = paused.iter().map(|e| cost(e)).sum();
        let budget = self.settings.keep_bytes();
        for e in paused {
            let idle = e.activity.idle_for();
            let why = if self.settings.persist && idle >= retain {
                Why::Retention
            } else if total > budget && idle >= RECENT {
                Why::Evicted
            } else {
                continue;
            };
            tracing::info!(
                "killing paused E2B sandbox {} ({}, unused for {} h)",
                e.remote.id,
                why.as_str(),
                idle.as_secs() / 3600
            );
            self.gone.record(&e.remote.id, why);
            self.lock().remove(&e.remote.id);
            if let Err(err) = self.client.kill(&e.remote.id).await {
                tracing::warn!("could not kill E2B sandbox {}: {err}", e.remote.id);
            }
            total = total.saturating_sub(cost(&e));
        }
    }
}

/// Starts the periodic [`Fleet::tidy`]; it ends with the backend.
fn start_housekeeping(fleet: &Arc<Fleet>) {
    let weak: Weak<Fleet> = Arc::downgrade(fleet);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(EVERY);
        loop {
            tick.tick().await;
            let Some(b) = weak.upgrade() else { break };
            b.tidy().await;
        }
    });
}
