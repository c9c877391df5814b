//! The sandboxes of this server, live or kept: their folders, limits, and interpreters.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::vm::{MemoryBudget, Session, SessionConfig};
use crate::disk_quota::{DiskQuota, tree_cost};
use crate::runtime::Layout;
use crate::sandbox::last_use::LastUse;
use crate::sandbox::open_set::OpenSet;
use crate::sandbox::retention::{Gone, Why};
use crate::sandbox::{Limits, SandboxError, SandboxState, SandboxStatus};

/// Host folders of one sandbox. The workspace is what users see; scratch holds the private
/// /tmp and the installed packages.
#[derive(Clone, Debug)]
pub struct Dirs {
    pub workspace: PathBuf,
    pub scratch: PathBuf,
    pub tmp: PathBuf,
    pub site_packages: PathBuf,
}

/// The interpreter of a sandbox, or none after a reset.
#[derive(Default)]
pub struct Slot {
    pub session: Option<Session>,
    /// The last interpreter ended abnormally; the next call reports `state_lost`.
    pub lost: bool,
    /// Why, when the host reset it (not a timeout or crash the call itself reported).
    pub lost_reason: Option<String>,
    /// The interpreter is suspended: its state is saved in the sandbox's folder and is
    /// restored before the next use.
    pub saved: bool,
}

pub struct Sandbox {
    pub id: String,
    pub dirs: Dirs,
    /// Shared by the guest's file calls and the host-side file tools.
    pub quota: Arc<DiskQuota>,
    pub limits: Limits,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub executions: AtomicU64,
    pub busy: AtomicBool,
    /// A call's future was dropped while the guest ran: the interpreter is mid-turn.
    pub abandoned: AtomicBool,
    /// Cancelled when the sandbox closes, stopping a call that is running in it.
    pub closing: CancellationToken,
    /// Cancelled when the server shuts down (a child of the registry's), stopping a running
    /// call so its client gets an answer before the process ends.
    pub stopping: CancellationToken,
    pub slot: tokio::sync::Mutex<Slot>,
    /// When it was last used, and whether by this process (only such a sandbox is the default
    /// for a call without an id).
    last_use: LastUse,
    /// The executions count when the state was last saved, so unchanged sandboxes are not
    /// saved again.
    pub saved_executions: AtomicU64,
    /// An exclusive lock on the sandbox's `owner.lock`, held while this server owns it: another
    /// server on the same home never opens, saves over or deletes it.
    _owner: Option<std::fs::File>,
}

/// What is kept beside a sandbox's saved state, to list it again after a restart.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Meta {
    pub limits: Limits,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub executions: u64,
    pub last_used: chrono::DateTime<chrono::Utc>,
}

impl Slot {
    /// Drops the interpreter for a reason the next call reports with `state_lost`.
    pub fn reset(&mut self, why: String) {
        self.session = None;
        self.lost = true;
        self.lost_reason = Some(why);
    }
}

impl Sandbox {
    /// The host folders and limits an interpreter of this sandbox gets.
    pub fn session_config(&self, memory: &Arc<MemoryBudget>) -> SessionConfig {
        SessionConfig {
            workspace: self.dirs.workspace.clone(),
            tmp: self.dirs.tmp.clone(),
            site_packages: self.dirs.site_packages.clone(),
            quota: self.quota.clone(),
            memory_bytes: self.limits.memory_mb << 20,
            memory_budget: memory.clone(),
            output_bytes: self.limits.output_bytes as usize,
        }
    }

    pub fn idle_for(&self) -> std::time::Duration {
        self.last_use.idle_for()
    }

    /// Marks a use by this process: the sandbox becomes the default for calls without an id.
    pub fn touch(&self) {
        self.last_use.touch();
    }

    /// Whether its interpreter is in memory (one whose lock is held counts: it is running,
    /// starting, or being suspended).
    pub fn is_live(&self) -> bool {
        self.slot.try_lock().map_or(true, |slot| slot.session.is_some())
    }

    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst)
    }

    pub fn last_used_at(&self) -> chrono::DateTime<chrono::Utc> {
        self.last_use.at()
    }

    /// What the sandbox holds on disk: its files, packages and checkpoints (the disk quota's
    /// count) and its saved state.
    pub fn kept_bytes(&self) -> u64 {
        let state = std::fs::metadata(self.saved_dir().join(STATE)).map_or(0, |m| m.len());
        self.quota.used().saturating_add(state)
    }

    /// Where the interpreter's state and the metadata are saved.
    pub fn saved_dir(&self) -> PathBuf {
        self.dirs.scratch.join("saved")
    }

    /// Records the sandbox's limits and use beside its files (atomically).
    pub fn write_meta(&self) -> std::io::Result<()> {
        let meta = Meta {
            limits: self.limits.clone(),
            created_at: self.created_at,
            executions: self.executions.load(Ordering::SeqCst),
            last_used: self.last_used_at(),
        };
        let dir = self.saved_dir();
        std::fs::create_dir_all(&dir)?;
        let tmp = dir.join(".meta.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(&meta).map_err(std::io::Error::other)?)?;
        std::fs::rename(&tmp, dir.join(META))
    }

    pub async fn status(&self) -> SandboxStatus {
        let state = if self.busy.load(Ordering::SeqCst) {
            SandboxState::Busy
        } else {
            match self.slot.try_lock() {
                Err(_) => SandboxState::Busy,
                Ok(slot) if slot.saved => SandboxState::Paused,
                Ok(slot) if slot.session.is_none() && slot.lost => SandboxState::Reset,
                Ok(_) => SandboxState::Ready,
            }
        };
        let disk_bytes = self.quota.used();
        SandboxStatus {
            sandbox_id: self.id.clone(),
            state,
            created_at: self.created_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            executions: self.executions.load(Ordering::SeqCst),
            last_used_at: self
                .last_used_at()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            disk_bytes,
            limits: self.limits.clone(),
            checkpoints: super::checkpoints::list(self),
        }
    }
}

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
    /// Folders of closed sandboxes that could not be removed yet: still counted against the
    /// host budget, retried by [`Registry::retry_leftovers`].
    leftovers: Mutex<Vec<Leftover>>,
}

struct Leftover {
    id: String,
    dirs: Dirs,
    quota: Option<Arc<DiskQuota>>,
}

const OWNER: &str = "owner.pid";
const OWNER_LOCK: &str = "owner.lock";
const META: &str = "meta.json";
/// Beside a sandbox's saved state: why its variables were lost (a call the shutdown stopped),
/// for the note its next call carries after a restart.
pub const LOST: &str = "lost.txt";
pub const STATE: &str = "state.bin";

/// Takes the exclusive lock on a sandbox's `owner.lock`; `None` when another process holds it.
fn take_ownership(scratch: &Path) -> Option<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(scratch.join(OWNER_LOCK))
        .ok()?;
    f.try_lock().ok()?;
    Some(f)
}

fn process_alive(pid: u32) -> bool {
    // A killed server stays a zombie until its parent reaps it; it holds nothing by then.
    #[cfg(target_os = "linux")]
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        && stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    {
        return false;
    }
    #[cfg(unix)]
    {
        // Signal 0 checks existence without sending anything.
        let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// 128 random bits: ids must be unguessable, since in remote mode they are all that names a
/// sandbox on the wire (ownership is checked too, but an id should not be the weak point).
fn new_id() -> String {
    let mut bytes = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut bytes);
    format!("sbx-{}", hex::encode(bytes))
}

fn make_dir(p: &Path) -> Result<(), SandboxError> {
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
            leftovers: Mutex::new(Vec::new()),
        })
    }

    /// Removes a closed sandbox's folders and gives its disk back to the host budget; a
    /// folder that cannot be removed stays counted and is queued for another try.
    fn remove_or_keep(
        &self,
        id: &str,
        dirs: Dirs,
        quota: Option<Arc<DiskQuota>>,
    ) -> Result<(), SandboxError> {
        match remove_dirs(&dirs) {
            Ok(()) => {
                if let Some(q) = &quota {
                    q.release(q.used());
                }
                Ok(())
            }
            Err(e) => {
                tracing::warn!("could not remove the folders of {id} (will retry): {e}");
                let message = format!(
                    "sandbox '{id}' is closed, but its folder could not be removed yet ({e}); the server retries every 30 s and counts its disk meanwhile"
                );
                self.leftovers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(Leftover {
                        id: id.to_string(),
                        dirs,
                        quota,
                    });
                Err(SandboxError::RemovalPending(message))
            }
        }
    }

    /// Tries again to remove folders that could not be removed before; returns how many remain.
    pub fn retry_leftovers(&self) -> usize {
        let pending: Vec<Leftover> =
            std::mem::take(&mut *self.leftovers.lock().unwrap_or_else(|p| p.into_inner()));
        for l in pending {
            match remove_dirs(&l.dirs) {
                Ok(()) => {
                    tracing::info!("removed the folders of {} on a later try", l.id);
                    if let Some(q) = &l.quota {
                        q.release(q.used());
                    }
                }
                Err(_) => self.leftovers.lock().unwrap_or_else(|p| p.into_inner()).push(l),
            }
        }
        self.leftovers.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
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
        let id = new_id();
        let scratch = self.layout.scratch_dir().join(&id);
        let dirs = Dirs {
            workspace: self.layout.sandboxes_dir().join(&id),
            tmp: scratch.join("tmp"),
            site_packages: scratch.join("site-packages"),
            scratch,
        };
        for d in [&dirs.workspace, &dirs.tmp, &dirs.site_packages] {
            if let Err(e) = make_dir(d) {
                let _ = remove_dirs(&dirs);
                return Err(e);
            }
        }
        // Stamped with our pid, so a later server can tell our folders from a dead one's, and
        // locked, so no other server touches them while we run.
        let _ = std::fs::write(dirs.scratch.join(OWNER), std::process::id().to_string());
        let owner = take_ownership(&dirs.scratch);
        Ok(Arc::new(Sandbox {
            saved_executions: AtomicU64::new(0),
            _owner: owner,
            id,
            dirs,
            quota: Arc::new(DiskQuota::within(limits.disk_bytes, self.host_disk.clone())),
            limits,
            created_at: chrono::Utc::now(),
            executions: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            closing: CancellationToken::new(),
            stopping: self.stopping.child_token(),
            slot: tokio::sync::Mutex::new(Slot::default()),
            last_use: LastUse::now(),
        }))
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
        let _ = self.remove_or_keep(&sb.id, sb.dirs.clone(), Some(sb.quota.clone()));
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
            self.delete(&id, why).await;
        }
    }

    /// Deletes a sandbox on the server's own initiative: closed, and remembered with why.
    pub async fn delete(self: &Arc<Self>, id: &str, why: Why) {
        // Recorded first: a call naming it while its folders go already hears why.
        self.gone.record(id, why);
        let _ = self.close(id).await;
    }

    /// Folders left by servers that are gone (stopped, crashed or killed). With persistence,
    /// sandboxes used within the retention period are listed again under their ids, to be
    /// restored on first use; the rest are removed. Folders a running server owns (it holds
    /// their lock) are left alone.
    ///
    /// `clamp` bounds the limits read from a kept sandbox's metadata to what a request could
    /// have asked for: that file is on disk, where it could have been edited.
    pub fn recover_leftovers(&self, clamp: &dyn Fn(Limits) -> Limits) {
        let Ok(rd) = std::fs::read_dir(self.layout.sandboxes_dir()) else {
            return;
        };
        for entry in rd.flatten() {
            let id = entry.file_name().to_string_lossy().into_owned();
            if !id.starts_with("sbx-") || self.lock().open.contains(&id) {
                continue;
            }
            let scratch = self.layout.scratch_dir().join(&id);
            let owner = if scratch.join(OWNER_LOCK).exists() {
                match take_ownership(&scratch) {
                    Some(lock) => Some(lock),
                    None => continue,
                }
            } else {
                let pid = std::fs::read_to_string(scratch.join(OWNER))
                    .ok()
                    .and_then(|s| s.trim().parse::<u32>().ok());
                let orphan = match pid {
                    Some(pid) => !process_alive(pid),
                    // A folder a starting server has not stamped yet is left for a minute.
                    None => entry
                        .metadata()
                        .and_then(|m| m.modified())
                        .map(|t| t.elapsed().unwrap_or_default().as_secs() > 60)
                        .unwrap_or(false),
                };
                if !orphan {
                    continue;
                }
                None
            };
            let dirs = Dirs {
                workspace: entry.path(),
                tmp: scratch.join("tmp"),
                site_packages: scratch.join("site-packages"),
                scratch,
            };
            if let Some(retain) = self.persist {
                let meta: Option<Meta> = std::fs::read(dirs.scratch.join("saved").join(META))
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok());
                match meta {
                    Some(m) if (chrono::Utc::now() - m.last_used).to_std().unwrap_or_default() < retain => {
                        if owner.is_some() {
                            let m = Meta {
                                limits: clamp(m.limits),
                                ..m
                            };
                            self.adopt(&id, dirs, m, owner);
                        }
                        continue;
                    }
                    Some(_) => {
                        tracing::info!("removing {id}: unused for longer than CODE_SANDBOX_RETAIN_DAYS");
                        self.gone.record(&id, Why::Retention);
                    }
                    None => tracing::info!("removing {id}, left by a server that is gone"),
                }
            } else {
                tracing::info!("removing {id}, left by a server that is gone");
            }
            let _ = self.remove_or_keep(&id, dirs, None);
        }
    }

    /// Lists a sandbox a stopped server kept, under its own id.
    /// (Its `owner.lock`, held from now on, is what keeps other servers away: no pid is
    /// stamped, which would be a write per kept sandbox on the way to the first answer.)
    fn adopt(&self, id: &str, dirs: Dirs, meta: Meta, owner: Option<std::fs::File>) {
        // Counted later, off the start-up path (`measure_kept`): a thousand kept sandboxes must
        // not delay the first answer.
        let quota = Arc::new(DiskQuota::within(meta.limits.disk_bytes, self.host_disk.clone()));
        let saved_dir = dirs.scratch.join("saved");
        let lost_why = std::fs::read_to_string(saved_dir.join(LOST)).ok();
        let saved = lost_why.is_none() && saved_dir.join(STATE).is_file();
        let slot = Slot {
            saved,
            lost: !saved,
            lost_reason: (!saved).then(|| {
                lost_why.map(|w| w.trim().to_string()).unwrap_or_else(|| {
                    "the server stopped before it could save the interpreter's state (its files are kept)"
                        .to_string()
                })
            }),
            ..Slot::default()
        };
        let sb = Arc::new(Sandbox {
            id: id.to_string(),
            dirs,
            quota,
            limits: meta.limits,
            created_at: meta.created_at,
            executions: AtomicU64::new(meta.executions),
            saved_executions: AtomicU64::new(meta.executions),
            busy: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            closing: CancellationToken::new(),
            stopping: self.stopping.child_token(),
            slot: tokio::sync::Mutex::new(slot),
            last_use: LastUse::kept(meta.last_used),
            _owner: owner,
        });
        tracing::debug!("sandbox {id} is back (saved by an earlier run)");
        let mut inner = self.lock();
        inner.unmeasured.push(sb.clone());
        inner.open.insert(sb.id.clone(), sb);
    }

    /// Counts the disk of the sandboxes kept from before a restart (their files, packages and
    /// checkpoints; the saved state is counted apart, see [`Sandbox::kept_bytes`]).
    pub fn measure_kept(&self) {
        let pending = std::mem::take(&mut self.lock().unmeasured);
        for sb in pending {
            let scratch = tree_cost(&sb.dirs.scratch).saturating_sub(tree_cost(&sb.saved_dir()));
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
            .lock()
            .unwrap_or_else(|p| p.into_inner())
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

    /// The sandboxes this process created or used, most recently used first.
    pub fn recently_used(&self) -> Vec<String> {
        self.by_last_use()
            .into_iter()
            .filter(|sb| sb.last_use.here())
            .map(|sb| sb.id.clone())
            .collect()
    }

    /// Forgets a sandbox and removes its folders (no interpreter running).
    pub fn remove(&self, id: &str) {
        let sb = self.lock().open.remove(id);
        if let Some(sb) = sb {
            let _ = self.remove_or_keep(&sb.id, sb.dirs.clone(), Some(sb.quota.clone()));
        }
    }

    /// Stops any running call, drops the interpreter, and deletes the folders.
    pub async fn close(self: &Arc<Self>, id: &str) -> Result<(), SandboxError> {
        let sb = self
            .lock()
            .open
            .remove(id)
            .ok_or_else(|| SandboxError::NotFound(id.to_string()))?;
        sb.closing.cancel();
        // Wait for the running call (now cancelled) to let go, then drop its Store.
        let mut slot = sb.slot.lock().await;
        slot.session = None;
        drop(slot);
        self.remove_closed(sb).await
    }

    /// Removes the folders of a sandbox no longer listed, off the async threads.
    async fn remove_closed(self: &Arc<Self>, sb: Arc<Sandbox>) -> Result<(), SandboxError> {
        let (id, dirs, quota) = (sb.id.clone(), sb.dirs.clone(), sb.quota.clone());
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.remove_or_keep(&id, dirs, Some(quota)))
            .await
            .map_err(|e| SandboxError::Backend(Box::new(e)))?
    }

    pub async fn close_all(self: &Arc<Self>) {
        let ids = self.lock().open.ids();
        for id in ids {
            let _ = self.close(&id).await;
        }
    }
}

/// Removes both folders of a sandbox, whatever the guest built in them (see `remove_tree`).
fn remove_dirs(dirs: &Dirs) -> std::io::Result<()> {
    let mut first_error = None;
    for d in [&dirs.workspace, &dirs.scratch] {
        if let Err(e) = super::remove_tree::remove_tree(d) {
            first_error.get_or_insert(std::io::Error::new(e.kind(), format!("{}: {e}", d.display())));
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn chattr(flag: &str, path: &Path) {
        let ok = std::process::Command::new("chattr")
            .arg(flag)
            .arg(path)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "chattr {flag} failed: this test needs root on a file system with immutable files"
        );
    }

    #[test]
    fn a_folder_that_cannot_be_removed_stays_counted_and_is_retried() {
        let home = std::env::temp_dir().join(format!("registry-{}", uuid::Uuid::new_v4().simple()));
        let reg = Arc::new(Registry::new(Layout::new(&home), None).unwrap());
        let sb = reg
            .reserve(Limits {
                timeout_seconds: 30,
                memory_mb: 256,
                disk_bytes: 1 << 30,
                output_bytes: 1 << 20,
                fuel_per_call: None,
            })
            .unwrap();
        let before = reg.host_disk.used();
        sb.quota.reserve(10_000).unwrap();
        let stuck = sb.dirs.workspace.join("deep").join("stuck");
        std::fs::create_dir_all(stuck.parent().unwrap()).unwrap();
        std::fs::write(&stuck, b"x").unwrap();
        chattr("+i", &stuck);

        reg.remove(&sb.id);
        assert!(stuck.exists(), "the immutable file is still there");
        assert_eq!(reg.host_disk.used(), before + 10_000, "its disk stays counted");
        assert_eq!(
            reg.retry_leftovers(),
            1,
            "a retry that cannot finish keeps it queued"
        );
        assert!(sb.dirs.workspace.exists());

        chattr("-i", &stuck);
        assert_eq!(reg.retry_leftovers(), 0);
        assert!(!sb.dirs.workspace.exists() && !sb.dirs.scratch.exists());
        assert_eq!(reg.host_disk.used(), before, "and is given back once removed");
        let _ = std::fs::remove_dir_all(&home);
    }
}
