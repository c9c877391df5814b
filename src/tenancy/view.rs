//! One principal's view of the shared backend: another principal's sandbox does not exist
//! here (the same error as an unknown id, so ids cannot be probed), quotas are checked before
//! anything is made, and every call that runs code waits for a fair slot.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::gate::{Admitted, Refused};
use super::shared::{Principal, Tenancy};
use crate::sandbox::paths::WorkspacePath;
use crate::sandbox::{
    Admission, Checkpoint, CreateOptions, ExecOptions, Execution, InstallOutcome, Interpreter, Listing,
    SandboxError, SandboxFiles, SandboxInfo, SandboxStatus, Usage,
};
use crate::telemetry::metrics::QuotaKind;

/// Smallest memory limit a sandbox is shrunk to when a principal's memory quota is nearly used.
const MIN_SANDBOX_MB: u64 = 256;

pub struct View {
    t: Arc<Tenancy>,
    who: Principal,
}

impl Tenancy {
    /// The backend as `who` sees it.
    pub fn view(self: &Arc<Self>, who: Principal) -> Arc<dyn Interpreter> {
        Arc::new(View::new(self.clone(), who))
    }
}

impl View {
    pub fn new(t: Arc<Tenancy>, who: Principal) -> Self {
        View { t, who }
    }

    /// Refuses a sandbox this principal does not own exactly as an unknown one is refused.
    fn check(&self, id: &str) -> Result<(), SandboxError> {
        match self.t.owners.owner_of(id) {
            Some(p) if p == self.who.name => {
                self.join_budget(id);
                Ok(())
            }
            Some(_) => Err(SandboxError::NotFound(id.to_string())),
            None => Err(self.unknown(id)),
        }
    }

    /// [`Self::check`], and for an id this replica has no record of, a resume from the team's
    /// store when this principal keeps it there (under its own prefix only, so another
    /// principal's sandbox stays as unknown as on disk).
    async fn found(&self, id: &str) -> Result<(), SandboxError> {
        let unknown = match self.check(id) {
            Err(e @ (SandboxError::NotFound(_) | SandboxError::OnAnotherReplica { .. })) => e,
            // Owned here but its copy on this disk may have been let go (the store holds it).
            Ok(()) => {
                if self.t.inner.hold_or_resume(id, &self.who.name).await? {
                    self.join(id);
                }
                return Ok(());
            }
            other => return other,
        };
        if self.t.owners.owner_of(id).is_some() {
            return Err(unknown);
        }
        if !self.t.inner.resume_from_store(id, &self.who.name).await? {
            return Err(unknown);
        }
        self.t.owners.add(id, &self.who.name);
        self.check(id)
    }

    /// The refusal of an id this replica has no record of: on another replica's id, where it
    /// lives (the proxy sent this request elsewhere while that replica is away).
    fn unknown(&self, id: &str) -> SandboxError {
        match crate::sandbox::replica::replica_of(id) {
            Some(r) if Some(r) != self.t.replica.as_deref() => SandboxError::OnAnotherReplica {
                id: id.to_string(),
                replica: r.to_string(),
            },
            _ => SandboxError::NotFound(id.to_string()),
        }
    }

    /// Puts the sandbox's disk inside this principal's budget, once (a sandbox kept from before
    /// a restart joins at its first use), so guest writes, checkpoints and forks are held to it.
    fn join_budget(&self, id: &str) {
        if !self.t.joined(id) {
            self.join(id);
        }
    }

    /// Names this principal as `id`'s owner to the backend, and holds its disk to the
    /// principal's budget (again, for a sandbox brought back from the store).
    fn join(&self, id: &str) {
        self.t.inner.keep_for(id, &self.who.name);
        self.t.inner.join_disk_group(
            id,
            &format!("principal {}", self.who.name),
            self.who.quota.disk_mb.saturating_mul(1 << 20),
        );
    }

    /// This principal's open sandboxes with what they hold, oldest first.
    fn owned(&self) -> Vec<(String, Usage)> {
        self.t
            .owners
            .owned_by(&self.who.name)
            .into_iter()
            .filter_map(|id| self.t.inner.usage(&id).ok().map(|u| (id, u)))
            .collect()
    }

    /// Refuses calls that add files once the principal's sandboxes hold its disk quota.
    fn check_disk(&self, owned: &[(String, Usage)]) -> Result<(), SandboxError> {
        let used: u64 = owned.iter().map(|(_, u)| u.disk_bytes).sum();
        let limit = self.who.quota.disk_mb.saturating_mul(1 << 20);
        if used >= limit {
            crate::telemetry::metrics::quota_refused(QuotaKind::Disk);
            return Err(SandboxError::Quota(format!(
                "your sandboxes hold {} MiB on disk, all of your {} MiB disk quota; delete files (with execute_code, e.g. os.remove) or close sandboxes you no longer need, then try again",
                used >> 20,
                self.who.quota.disk_mb
            )));
        }
        Ok(())
    }

    /// Checks that one more sandbox fits, and returns the memory to ask the backend for: what
    /// was asked; nothing (the default) when nothing was asked and the default fits; else what
    /// is left of the quota, if that is enough.
    fn room_for(&self, asked: Option<u64>, owned: &[(String, Usage)]) -> Result<Option<u64>, SandboxError> {
        let q = self.who.quota;
        if owned.len() >= q.sandboxes {
            crate::telemetry::metrics::quota_refused(QuotaKind::Sandboxes);
            return Err(SandboxError::Quota(format!(
                "you have {} sandboxes (live and kept), the most your quota allows; close one of yours you no longer need with close_sandbox (get_sandbox_status lists them, least recently used last)",
                owned.len()
            )));
        }
        self.check_disk(owned)?;
        // Suspended sandboxes hold no memory: only live ones count.
        let used: u64 = owned
            .iter()
            .filter(|(_, u)| u.live)
            .map(|(_, u)| u.memory_mb)
            .sum();
        let left = q.memory_mb.saturating_sub(used);
        let wanted = asked.unwrap_or(self.t.default_memory_mb);
        if wanted <= left {
            // Nothing asked stays nothing, so the backend may hand out a ready spare.
            return Ok(asked);
        }
        if asked.is_none() && left >= MIN_SANDBOX_MB {
            return Ok(Some(left));
        }
        // Only offer a smaller sandbox when one that small can run at all.
        let instead = if left >= MIN_SANDBOX_MB {
            format!("close one of your sandboxes, or ask for memory_mb of at most {left}")
        } else {
            "close one of your sandboxes (close_sandbox; get_sandbox_status lists them), or wait for a call running in one to end, so it can be suspended".to_string()
        };
        crate::telemetry::metrics::quota_refused(QuotaKind::Memory);
        Err(SandboxError::Quota(format!(
            "your sandboxes may hold {} MiB of memory together and {used} MiB is taken by your live sandboxes, so {wanted} MiB more does not fit; {instead}",
            q.memory_mb
        )))
    }

    /// Suspends this principal's idle live sandboxes, least recently used first, until the
    /// memory asked for fits its quota; what to ask the backend for, or `None` when nothing
    /// more can be suspended.
    async fn suspend_own(&self, asked: Option<u64>) -> Option<Option<u64>> {
        if asked.is_some_and(|mb| mb > self.who.quota.memory_mb) {
            // More than the whole quota: suspending would not help.
            return None;
        }
        let mut live = Vec::new();
        for (id, u) in self.owned() {
            if u.live
                && let Ok(s) = self.t.inner.status(&id).await
            {
                live.push((s.last_used_at, id));
            }
        }
        live.sort();
        for (_, id) in live {
            if !matches!(self.t.inner.suspend(&id).await, Ok(true)) {
                continue;
            }
            if let Ok(fits) = self.room_for(asked, &self.owned()) {
                return Some(fits);
            }
        }
        None
    }

    /// Waits for the sandbox's turn (bounded), or gives up when the caller cancels.
    async fn turn(
        &self,
        id: &str,
        cancel: Option<&CancellationToken>,
    ) -> Result<super::queue::Turn, SandboxError> {
        let wait = self.t.queues.turn(id);
        match cancel {
            Some(ct) => tokio::select! {
                r = wait => r,
                _ = ct.cancelled() => Err(SandboxError::InvalidArgument("the call was cancelled while it waited for its sandbox".into())),
            },
            None => wait.await,
        }
    }

    /// Waits for a fair call slot, or gives up when the caller cancels.
    async fn admit(&self, cancel: Option<&CancellationToken>) -> Result<Admitted, SandboxError> {
        let wait = self.t.gate.admit(&self.who.name);
        let refused = |r: Refused| match r {
            Refused::QueueFull(n) => {
                crate::telemetry::metrics::quota_refused(QuotaKind::Waiting);
                SandboxError::Quota(format!(
                    "you already have {n} calls waiting for a free slot; wait for some to finish before sending more"
                ))
            }
        };
        match cancel {
            Some(ct) => tokio::select! {
                r = wait => r.map_err(refused),
                _ = ct.cancelled() => Err(SandboxError::InvalidArgument("the call was cancelled while it waited for a slot".into())),
            },
            None => wait.await.map_err(refused),
        }
    }

    /// Makes a sandbox through `make` (create or fork) within the quotas, and records it as ours.
    async fn make<F, Fut>(&self, asked: Option<u64>, make: F) -> Result<SandboxInfo, SandboxError>
    where
        F: FnOnce(Option<u64>) -> Fut,
        Fut: std::future::Future<Output = Result<SandboxInfo, SandboxError>>,
    {
        let lock = self.t.create_lock(&self.who.name);
        let _one_at_a_time = lock.lock().await;
        let owned = self.owned();
        let memory_mb = match self.room_for(asked, &owned) {
            Ok(m) => m,
            // Suspended sandboxes hold no memory: make room as the server does, least
            // recently used first, and refuse only when none of ours can be suspended.
            Err(e @ SandboxError::Quota(_)) if owned.len() < self.who.quota.sandboxes => {
                self.suspend_own(asked).await.ok_or(e)?
            }
            Err(e) => return Err(e),
        };
        let _slot = self.admit(None).await?;
        let mut info = make(memory_mb).await?;
        self.t.owners.add(&info.sandbox_id, &self.who.name);
        self.join_budget(&info.sandbox_id);
        if let (None, Some(shrunk)) = (asked, memory_mb) {
            info.notes.push(format!(
                "memory limit {shrunk} MiB: what is left of your {} MiB memory quota",
                self.who.quota.memory_mb
            ));
        }
        Ok(info)
    }
}

#[async_trait]
impl Interpreter for View {
    fn backend(&self) -> &'static str {
        self.t.inner.backend()
    }
    fn python_version(&self) -> String {
        self.t.inner.python_version()
    }

    async fn create(&self, opts: CreateOptions) -> Result<SandboxInfo, SandboxError> {
        let inner = self.t.inner.clone();
        self.make(opts.memory_mb, |memory_mb| async move {
            inner.create(CreateOptions { memory_mb, ..opts }).await
        })
        .await
    }

    async fn close(&self, id: &str) -> Result<(), SandboxError> {
        self.found(id).await?;
        let r = self.t.inner.close(id).await;
        self.t.owners.retain(|s| self.t.inner.exists(s));
        r
    }

    async fn status(&self, id: &str) -> Result<SandboxStatus, SandboxError> {
        self.found(id).await?;
        self.t.inner.status(id).await
    }

    async fn list(&self) -> Vec<SandboxStatus> {
        let mut out = Vec::new();
        for (id, _) in self.owned() {
            if let Ok(s) = self.t.inner.status(&id).await {
                out.push(s);
            }
        }
        // Most recently used first, as the backend lists them (RFC 3339 in UTC sorts as time).
        out.sort_by(|a, b| b.last_used_at.cmp(&a.last_used_at));
        out
    }

    async fn recently_used(&self) -> Vec<String> {
        let mine: std::collections::HashSet<String> = self.owned().into_iter().map(|(id, _)| id).collect();
        self.t
            .inner
            .recently_used()
            .await
            .into_iter()
            .filter(|id| mine.contains(id))
            .collect()
    }

    async fn locate(&self, id: &str) -> Result<(), SandboxError> {
        self.found(id).await
    }

    fn usage(&self, id: &str) -> Result<Usage, SandboxError> {
        self.check(id)?;
        self.t.inner.usage(id)
    }

    async fn execute(&self, id: &str, code: &str, opts: ExecOptions) -> Result<Execution, SandboxError> {
        self.found(id).await?;
        // Not refused over the disk quota: running code is how files get deleted. The
        // sandbox's own disk quota still bounds what it writes. The sandbox's turn first,
        // then a slot: waiting for a busy sandbox holds no slot from anyone else.
        // A background run was admitted under the server's own budget for runs, and takes
        // no slot meant for interactive calls.
        let _turn = self.turn(id, opts.cancel.as_ref()).await?;
        let _slot = match opts.admission {
            Admission::Interactive => Some(self.admit(opts.cancel.as_ref()).await?),
            Admission::Background => None,
        };
        self.t.inner.execute(id, code, opts).await
    }

    async fn install_package(&self, id: &str, name: &str) -> Result<InstallOutcome, SandboxError> {
        self.found(id).await?;
        self.check_disk(&self.owned())?;
        let _turn = self.turn(id, None).await?;
        let _slot = self.admit(None).await?;
        self.t.inner.install_package(id, name).await
    }

    async fn fork(&self, id: &str) -> Result<SandboxInfo, SandboxError> {
        self.found(id).await?;
        let memory_mb = self.t.inner.usage(id)?.memory_mb;
        let inner = self.t.inner.clone();
        let id = id.to_string();
        // A fork keeps its original's memory limit: it holds the same state.
        self.make(Some(memory_mb), |_| async move { inner.fork(&id).await })
            .await
    }

    async fn checkpoint(&self, id: &str, name: Option<&str>) -> Result<Checkpoint, SandboxError> {
        self.found(id).await?;
        self.check_disk(&self.owned())?;
        let _turn = self.turn(id, None).await?;
        let _slot = self.admit(None).await?;
        self.t.inner.checkpoint(id, name).await
    }

    async fn restore(&self, id: &str, checkpoint: &str) -> Result<Checkpoint, SandboxError> {
        self.found(id).await?;
        let _turn = self.turn(id, None).await?;
        let _slot = self.admit(None).await?;
        self.t.inner.restore(id, checkpoint).await
    }

    fn files(&self) -> &dyn SandboxFiles {
        self
    }
    fn mounts(&self) -> crate::sandbox::mounts::Mounts {
        self.t.inner.mounts()
    }

    /// The shared backend shuts down once, with the server, not per principal.
    async fn shutdown(&self) {}
}

#[async_trait]
impl SandboxFiles for View {
    async fn list(&self, id: &str, path: &WorkspacePath) -> Result<Listing, SandboxError> {
        self.found(id).await?;
        self.t.inner.files().list(id, path).await
    }

    async fn read(&self, id: &str, path: &WorkspacePath, limit: u64) -> Result<Vec<u8>, SandboxError> {
        self.found(id).await?;
        self.t.inner.files().read(id, path, limit).await
    }

    async fn write(&self, id: &str, path: &WorkspacePath, bytes: Vec<u8>) -> Result<u64, SandboxError> {
        self.found(id).await?;
        self.check_disk(&self.owned())?;
        self.t.inner.files().write(id, path, bytes).await
    }

    async fn copy_out(
        &self,
        id: &str,
        path: &WorkspacePath,
        limit: u64,
        out: std::fs::File,
    ) -> Result<u64, SandboxError> {
        self.found(id).await?;
        self.t.inner.files().copy_out(id, path, limit, out).await
    }
}
