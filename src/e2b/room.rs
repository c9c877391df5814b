//! E2B sandboxes follow the local backend's rules: at most `CODE_SANDBOX_MAX_SANDBOXES` run at
//! once (past it the least recently used idle one is paused, which E2B does losslessly, and
//! resumed on its next use), and paused ones, which E2B bills for storage, are bounded by
//! `CODE_SANDBOX_RETAIN_DAYS` and `CODE_SANDBOX_KEEP_MB`, least recently used killed first.
//!
//! E2B does not report what a paused sandbox stores; each counts as its memory snapshot: its
//! `memory_mb`, or [`ASSUMED_MB`] when the template sets it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{E2bBackend, Entry};
use crate::sandbox::SandboxError;
use crate::sandbox::last_use::LastUse;
use crate::sandbox::retention::{RECENT, Why};

/// What a paused sandbox of the template's own size is counted as, in MiB.
const ASSUMED_MB: u64 = 512;
/// How often paused sandboxes are checked against their budget and retention.
const EVERY: Duration = Duration::from_secs(60);

/// How a sandbox is being used; shared by the entries that stand for it as it is paused and
/// resumed.
pub struct Activity {
    last_use: LastUse,
    in_flight: AtomicUsize,
}

impl Activity {
    /// A sandbox made now, by this process.
    pub fn new() -> Activity {
        let last_use = LastUse::now();
        last_use.touch();
        Activity {
            last_use,
            in_flight: AtomicUsize::new(0),
        }
    }

    /// A sandbox kept from an earlier run, last used at `at`.
    pub fn kept(at: chrono::DateTime<chrono::Utc>) -> Activity {
        Activity {
            last_use: LastUse::kept(at),
            in_flight: AtomicUsize::new(0),
        }
    }

    fn touch(&self) {
        self.last_use.touch();
    }

    pub fn idle_for(&self) -> Duration {
        self.last_use.idle_for()
    }

    pub fn last_used_at(&self) -> chrono::DateTime<chrono::Utc> {
        self.last_use.at()
    }

    pub fn in_use(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) > 0
    }

    pub fn used_here(&self) -> bool {
        self.last_use.here()
    }
}

/// An entry in use by a call: never paused for another's sake until it drops.
pub(super) struct InUse(Arc<Entry>);

impl InUse {
    pub fn new(entry: Arc<Entry>) -> InUse {
        entry.activity.in_flight.fetch_add(1, Ordering::SeqCst);
        entry.activity.touch();
        InUse(entry)
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        self.0.activity.touch();
        self.0.activity.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl std::ops::Deref for InUse {
    type Target = Entry;
    fn deref(&self) -> &Entry {
        &self.0
    }
}

impl E2bBackend {
    /// Pauses least recently used idle sandboxes until fewer than the cap other than `me`
    /// are running.
    pub(super) async fn make_room(&self, me: Option<&str>) -> Result<(), SandboxError> {
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
    pub(super) async fn pause(&self, e: &Arc<Entry>) -> Result<(), SandboxError> {
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

/// Starts the periodic [`E2bBackend::tidy`]; it ends with the backend.
pub fn start_housekeeping(backend: &Arc<E2bBackend>) {
    let weak: Weak<E2bBackend> = Arc::downgrade(backend);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(EVERY);
        loop {
            tick.tick().await;
            let Some(b) = weak.upgrade() else { break };
            b.tidy().await;
        }
    });
}
