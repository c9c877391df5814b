//! The sandboxes of this server, live or kept: listing, making and removing them, and the
//! disk budgets they share. (One sandbox is a [`Sandbox`]; taking over kept ones after a
//! restart is `recovery`'s.)

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::folders::Dirs;
use super::record::{Meta, Origin, Sandbox};
use super::removals::{Removals, remove_dirs};
use crate::disk::quota::{DiskQuota, tree_cost};
use crate::host::lock::Locked;
use crate::runtime::Layout;
use crate::sandbox::census::Census;
use crate::sandbox::events;
use crate::sandbox::open_set::OpenSet;
use crate::sandbox::retention::{Gone, Why};
use crate::sandbox::{Limits, SandboxError};

/// How long `close` waits for a sandbox's folders to be deleted before it answers and lets the
/// deletion end in the background: long enough that a close usually gives the disk back before
/// it answers, short enough that a tree the guest nested thousands deep does not hold it up.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

struct Inner {
    open: OpenSet<Sandbox>,
    /// Kept sandboxes listed after a restart whose disk use is not counted yet (see
    /// [`Registry::measure_kept`]).
    unmeasured: Vec<Arc<Sandbox>>,
}

pub struct Registry {
    layout: Layout,
    /// Keep sandboxes across restarts, for this long unused (`None`: delete them at exit).
    pub persist: Option<Duration>,
    /// Sandboxes the server deleted by itself, so naming one later says why.
    gone: Gone,
    /// Cancelled at shutdown: every sandbox's `stopping` is a child of it.
    stopping: CancellationToken,
    /// Disk budgets shared by groups of sandboxes (a principal's), inside the host budget.
    disk_groups: Mutex<std::collections::HashMap<String, Arc<DiskQuota>>>,
    /// What all sandboxes together may add to the host disk.
    host_disk: Arc<DiskQuota>,
    inner: Mutex<Inner>,
    /// Folders being removed, or left to remove later.
    removals: Removals,
    /// This replica's name, which new ids carry (`CODE_SANDBOX_REPLICA`).
    replica: Option<String>,
}

/// 128 random bits: ids must be unguessable, since in remote mode they are all that names a
/// sandbox on the wire (ownership is checked too, but an id should not be the weak point).
/// On a named replica the id carries the name (`sandbox::replica`).
fn new_id(replica: Option<&str>) -> String {
    let mut bytes = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut bytes);
    crate::sandbox::replica::sandbox_id(replica, &hex::encode(bytes))
}

pub(super) fn make_dir(p: &Path) -> Result<(), SandboxError> {
    std::fs::create_dir_all(p).map_err(SandboxError::io(format!("could not create {}", p.display())))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Private to this user: other local accounts must not read a sandbox's files.
        let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700));
    }
    Ok(())
}

impl Registry {
    /// `persist`: keep sandboxes across restarts, for this long unused.
    pub fn new(layout: Layout, persist: Option<Duration>) -> Result<Self, SandboxError> {
        Ok(Registry {
            removals: Removals::new(&layout),
            persist,
            gone: Gone::new(persist.map(|_| layout.home.join("deleted.json"))),
            stopping: CancellationToken::new(),
            disk_groups: Mutex::new(std::collections::HashMap::new()),
            host_disk: Arc::new(DiskQuota::host_budget(&layout.sandboxes_dir())),
            layout,
            inner: Mutex::new(Inner {
                open: OpenSet::default(),
                unmeasured: Vec::new(),
            }),
            replica: None,
        })
    }

    /// Names new sandboxes after replica `name`.
    pub fn on_replica(mut self, name: Option<String>) -> Self {
        self.replica = name;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.locked()
    }

    /// Makes the folders of a new sandbox and lists it. How many are kept is bounded by disk
    /// (`keep`), how many are live by `live`, not here.
    pub fn reserve(&self, limits: Limits) -> Result<Arc<Sandbox>, SandboxError> {
        let sb = self.prepare(limits)?;
        self.publish(sb.clone());
        Ok(sb)
    }

    /// Makes a sandbox's folders without listing it: a spare, warmed before anyone asks.
    pub fn prepare(&self, limits: Limits) -> Result<Arc<Sandbox>, SandboxError> {
        let id = new_id(self.replica.as_deref());
        let dirs = Dirs::of(&self.layout, &id);
        for d in [&dirs.workspace, &dirs.tmp, &dirs.site_packages] {
            if let Err(e) = make_dir(d) {
                let _ = remove_dirs(&dirs);
                return Err(e);
            }
        }
        let owner = dirs.claim();
        let quota = Arc::new(DiskQuota::within(limits.disk_bytes, self.host_disk.clone()));
        let stopping = self.stopping.child_token();
        Ok(Sandbox::new(
            id,
            dirs,
            quota,
            Origin::New(limits),
            owner,
            stopping,
        ))
    }

    /// Lists a prepared sandbox, as the newest and most recently used.
    pub fn publish(&self, sb: Arc<Sandbox>) {
        sb.touch();
        self.lock().open.insert(sb.id.clone(), sb.clone());
        if self.persist.is_some() {
            let _ = sb.write_meta();
        }
    }

    /// Takes a listed sandbox off the list without touching its folders (a spare that could
    /// not be handed out after all).
    pub fn unpublish(&self, id: &str) -> Option<Arc<Sandbox>> {
        self.lock().open.remove(id)
    }

    /// Deletes the folders of a sandbox that was never listed.
    pub fn discard(&self, sb: &Sandbox) {
        self.removals
            .remove_soon(&sb.id, &sb.dirs, Some(sb.quota.clone()));
    }

    pub fn get(&self, id: &str) -> Result<Arc<Sandbox>, SandboxError> {
        let inner = self.lock();
        match inner.open.get(id) {
            Some(sb) => Ok(sb),
            None => Err(self
                .gone
                .error(id)
                .unwrap_or_else(|| SandboxError::NotFound(id.to_string()))),
        }
    }

    /// Sandboxes unused for longer than `idle` (none busy).
    pub fn idle(&self, idle: std::time::Duration) -> Vec<Arc<Sandbox>> {
        self.all()
            .into_iter()
            .filter(|sb| !sb.busy.load(Ordering::SeqCst) && sb.idle_for() >= idle)
            .collect()
    }

    /// Closes sandboxes unused for longer than `idle` (none busy), remembering why.
    pub async fn reap_idle(self: &Arc<Self>, idle: std::time::Duration, why: Why) {
        let stale: Vec<String> = self.idle(idle).into_iter().map(|sb| sb.id.clone()).collect();
        for id in stale {
            tracing::info!("deleting sandbox {id}: unused for over {} s", idle.as_secs());
            events::sandbox_log(
                &id,
                events::Severity::Warning,
                format!("sandbox {id} was deleted: unused for over {} s", idle.as_secs()),
            );
            self.delete(&id, why).await;
        }
    }

    /// Deletes a sandbox on the server's own initiative: closed, and remembered with why.
    pub async fn delete(self: &Arc<Self>, id: &str, why: Why) {
        // Recorded first: a call naming it while its folders go already hears why.
        self.gone.record(id, why);
        let _ = self.close(id).await;
    }

    /// Lists a sandbox a stopped server kept, under its own id; its disk is counted later,
    /// by [`Registry::measure_kept`], off the start-up path.
    pub fn adopt(&self, id: &str, dirs: Dirs, meta: Meta, owner: Option<std::fs::File>) {
        let quota = Arc::new(DiskQuota::within(meta.limits.disk_bytes, self.host_disk.clone()));
        let stopping = self.stopping.child_token();
        let sb = Sandbox::new(id.to_string(), dirs, quota, Origin::Kept(meta), owner, stopping);
        tracing::debug!("sandbox {id} is back (saved by an earlier run)");
        let mut inner = self.lock();
        inner.unmeasured.push(sb.clone());
        inner.open.insert(sb.id.clone(), sb);
    }

    pub fn is_open(&self, id: &str) -> bool {
        self.lock().open.contains(id)
    }

    /// Remembers that the server deleted `id` by itself, and why.
    pub fn record_gone(&self, id: &str, why: Why) {
        self.gone.record(id, why);
    }

    /// Removes the folders of a sandbox that is not listed (left by an earlier server).
    pub fn remove_unlisted(&self, id: &str, dirs: Dirs) {
        self.removals.remove_soon(id, &dirs, None);
    }

    /// Deletes, in the background, what servers that are gone left in their trash.
    pub fn empty_stale_trash(&self) {
        self.removals.empty_stale();
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Counts the disk of the sandboxes kept from before a restart (their files, packages and
    /// checkpoints; the saved state is counted apart, see [`Sandbox::kept_bytes`]).
    pub fn measure_kept(&self) {
        let pending = std::mem::take(&mut self.lock().unmeasured);
        for sb in pending {
            let scratch = tree_cost(&sb.dirs.scratch).saturating_sub(tree_cost(&sb.dirs.saved()));
            sb.quota
                .settle(0, i128::from(tree_cost(&sb.dirs.workspace) + scratch));
        }
        let kept = self.all().len();
        if kept > 0 {
            tracing::info!("{kept} sandbox(es) listed");
        }
    }

    /// Counts `id`'s disk against the group's budget (made on first use, inside the host's).
    /// The first limit given for a group stays until the server restarts.
    pub fn join_disk_group(&self, id: &str, group: &str, limit: u64) -> Result<(), SandboxError> {
        let sb = self.get(id)?;
        let budget = self
            .disk_groups
            .locked()
            .entry(group.to_string())
            .or_insert_with(|| Arc::new(DiskQuota::principal(limit, self.host_disk.clone())))
            .clone();
        sb.quota.move_under(budget);
        Ok(())
    }

    /// Stops every running call: the server is shutting down.
    pub fn stop_running(&self) {
        self.stopping.cancel();
    }

    pub fn all(&self) -> Vec<Arc<Sandbox>> {
        self.lock().open.all()
    }

    /// Every sandbox, most recently used first.
    pub fn by_last_use(&self) -> Vec<Arc<Sandbox>> {
        let mut all = self.all();
        all.sort_by_cached_key(|sb| sb.idle_for());
        all
    }

    pub fn census(&self) -> Census {
        Census::of(self.all().iter().map(|sb| (sb.is_live(), sb.used_here())))
    }

    /// The sandboxes this process created or used, most recently used first.
    pub fn recently_used(&self) -> Vec<String> {
        self.by_last_use()
            .into_iter()
            .filter(|sb| sb.used_here())
            .map(|sb| sb.id.clone())
            .collect()
    }

    /// Forgets a sandbox and removes its folders (no interpreter running).
    pub fn remove(&self, id: &str) {
        let sb = self.lock().open.remove(id);
        if let Some(sb) = sb {
            self.removals
                .remove_soon(&sb.id, &sb.dirs, Some(sb.quota.clone()));
        }
    }

    /// Stops any running call, drops the interpreter, and deletes the folders: they leave the
    /// home at once; a deletion still going after [`CLOSE_WAIT`] (a deep tree) ends in the
    /// background.
    pub async fn close(self: &Arc<Self>, id: &str) -> Result<(), SandboxError> {
        // Counted from before the sandbox leaves the list (even if this future is dropped while
        // it waits for the interpreter): [`Registry::finish_removals`] sees every close.
        let waiting = self.removals.token();
        let sb = self
            .lock()
            .open
            .remove(id)
            .ok_or_else(|| SandboxError::NotFound(id.to_string()))?;
        events::closed(id);
        sb.closing.cancel();
        // Wait for the running call (now cancelled) to let go, then drop its Store.
        let mut slot = sb.slot.lock().await;
        slot.session = None;
        drop(slot);
        let deleting = self
            .removals
            .remove_soon(&sb.id, &sb.dirs, Some(sb.quota.clone()));
        drop(waiting);
        let Some(deleting) = deleting else {
            return Ok(());
        };
        match tokio::time::timeout(CLOSE_WAIT, deleting).await {
            Ok(ended) => ended?,
            Err(_) => {
                tracing::info!(
                    "sandbox {id} is closed; its folders are still being deleted, in the background"
                );
                Ok(())
            }
        }
    }

    /// At shutdown: waits up to `bound` for every close under way (the server's own deletions
    /// included) to finish deleting its folders, then leaves the rest to the next start; whether
    /// they all finished.
    pub async fn finish_removals(&self, bound: Duration) -> bool {
        self.removals.finish(bound).await
    }

    /// Tries again to remove folders that could not be removed before; returns how many remain.
    pub fn retry_leftovers(&self) -> usize {
        self.removals.retry()
    }

    /// Closes every sandbox, all at once: a client that lets go waits only seconds.
    pub async fn close_all(self: &Arc<Self>) {
        let ids = self.lock().open.ids();
        futures_util::future::join_all(ids.iter().map(|id| self.close(id))).await;
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
