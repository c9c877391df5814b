//! Removing the folders of closed sandboxes.
//!
//! A guest can build a tree tens of thousands of folders deep, and deleting one takes seconds,
//! far more on a busy disk (12 s for 5000 levels was seen in CI). So a sandbox's folders are
//! first moved into this server's trash, one rename each: they leave `sandboxes/` and
//! `scratch/` at once, however deep, and a half-deleted tree is never left where a sandbox's
//! files are looked for. Then they are deleted, off the async threads. Shutdown waits a bounded
//! time for deletions under way (the client sends SIGTERM, then SIGKILL, a few seconds after it
//! lets go), and whatever a stopped or killed server left in its trash is deleted by the next
//! server to start (see `trash`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::folders::Dirs;
use super::remove_tree::remove_tree_unless;
use super::trash::{Stale, Trash};
use crate::disk::quota::DiskQuota;
use crate::host::lock::Locked;
use crate::runtime::Layout;
use crate::sandbox::SandboxError;

/// Shared with the blocking threads that delete, so a dropped caller does not end the count.
#[derive(Clone)]
pub struct Removals(Arc<Shared>);

struct Shared {
    /// `None` when the trash could not be made: folders are then deleted where they are.
    trash: Option<Trash>,
    /// Deletions under way, which shutdown waits for (within its bound).
    under_way: TaskTracker,
    /// Set when shutdown has waited long enough: deletions stop where they are.
    given_up: AtomicBool,
    /// Folders that could not be deleted yet: still counted against the host budget until
    /// [`Removals::retry`] deletes them.
    leftovers: Mutex<Vec<Leftover>>,
    /// Trash of servers that are gone, found at start: emptied by [`Removals::empty_stale`].
    stale: Mutex<Vec<Stale>>,
}

struct Leftover {
    id: String,
    paths: Vec<PathBuf>,
    quota: Option<Arc<DiskQuota>>,
}

impl Removals {
    /// Makes this server's trash and notes the trash of servers that are gone.
    pub fn new(layout: &Layout) -> Removals {
        let root = layout.trash_dir();
        let stale = Stale::find(&root);
        let trash = Trash::make(&root)
            .inspect_err(|e| {
                tracing::warn!(
                    "could not make a trash folder in {} ({e}); closed sandboxes are deleted in place",
                    root.display()
                )
            })
            .ok();
        Removals(Arc::new(Shared {
            trash,
            under_way: TaskTracker::new(),
            given_up: AtomicBool::new(false),
            leftovers: Mutex::new(Vec::new()),
            stale: Mutex::new(stale),
        }))
    }

    /// Counts a removal under way from before its folders are moved aside (a close waiting for
    /// the interpreter to let go).
    pub fn token(&self) -> TaskTrackerToken {
        self.0.under_way.token()
    }

    /// Moves a closed sandbox's folders into the trash at once and deletes them on a blocking
    /// thread (in this thread outside a runtime), giving its disk back to its budgets then.
    /// The handle, when there is one, says how the deletion ended.
    pub fn remove_soon(
        &self,
        id: &str,
        dirs: &Dirs,
        quota: Option<Arc<DiskQuota>>,
    ) -> Option<tokio::task::JoinHandle<Result<(), SandboxError>>> {
        let paths = self.move_aside(id, dirs);
        let me = self.clone();
        let id = id.to_string();
        self.in_background(move || me.delete(&id, paths, quota))
    }

    /// Deletes, in the background, the trash of servers that were stopped or killed before
    /// they had emptied it.
    pub fn empty_stale(&self) {
        let stale = std::mem::take(&mut *self.0.stale.locked());
        if stale.is_empty() {
            return;
        }
        let me = self.clone();
        self.in_background(move || {
            for s in stale {
                me.empty_one(s);
            }
        });
    }

    /// Runs `work` on a blocking thread, counted among the deletions under way, or in this
    /// thread outside a runtime (then there is no handle).
    fn in_background<R: Send + 'static>(
        &self,
        work: impl FnOnce() -> R + Send + 'static,
    ) -> Option<tokio::task::JoinHandle<R>> {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            work();
            return None;
        };
        let counted = self.0.under_way.token();
        Some(rt.spawn_blocking(move || {
            let _counted = counted;
            work()
        }))
    }

    fn empty_one(&self, s: Stale) {
        match self.remove_all(std::slice::from_ref(&s.dir)) {
            Ok(()) => {
                tracing::info!("deleted what a stopped server left in {}", s.dir.display());
                s.emptied();
            }
            Err(_) if self.given_up() => {}
            Err(e) => tracing::warn!(
                "could not empty {} ({e}); the next start tries again",
                s.dir.display()
            ),
        }
    }

    /// At shutdown: waits up to `bound` for the deletions under way, then stops those still
    /// going (what they had not deleted stays in the trash, for the next start), retries the
    /// leftovers and puts the trash away if it is empty. Returns whether all deletions ended.
    pub async fn finish(&self, bound: Duration) -> bool {
        self.0.under_way.close();
        let ended = tokio::time::timeout(bound, self.0.under_way.wait()).await.is_ok();
        if !ended {
            self.0.given_up.store(true, Ordering::SeqCst);
            if let Some(t) = &self.0.trash {
                tracing::info!(
                    "stopped deleting closed sandboxes' folders to exit in time; the next start finishes (they are in {})",
                    t.dir().display()
                );
            }
        }
        let me = self.clone();
        let left = tokio::task::spawn_blocking(move || {
            let left = me.retry();
            if let Some(t) = &me.0.trash {
                t.put_away();
            }
            left
        })
        .await
        .unwrap_or(0);
        if left > 0 {
            tracing::warn!("{left} sandbox folder(s) could not be removed; the next start tries again");
        }
        ended
    }

    /// Tries again to delete folders that could not be deleted before; returns how many remain.
    pub fn retry(&self) -> usize {
        let pending: Vec<Leftover> = std::mem::take(&mut *self.0.leftovers.locked());
        for l in pending {
            match self.remove_all(&l.paths) {
                Ok(()) => {
                    tracing::info!("removed the folders of {} on a later try", l.id);
                    if let Some(q) = &l.quota {
                        q.release(q.used());
                    }
                }
                Err(_) => self.0.leftovers.locked().push(l),
            }
        }
        self.0.leftovers.locked().len()
    }

    fn given_up(&self) -> bool {
        self.0.given_up.load(Ordering::SeqCst)
    }

    fn remove_all(&self, paths: &[PathBuf]) -> std::io::Result<()> {
        remove_paths(paths, &|| self.given_up())
    }

    /// Where a sandbox's folders go in the trash.
    fn move_aside(&self, id: &str, dirs: &Dirs) -> Vec<PathBuf> {
        let in_place = vec![dirs.workspace.clone(), dirs.scratch.clone()];
        let Some(trash) = &self.0.trash else {
            return in_place;
        };
        let entry = trash.dir().join(id);
        if std::fs::create_dir(&entry).is_err() {
            return in_place;
        }
        let mut paths = vec![entry.clone()];
        for (name, from) in [("workspace", &dirs.workspace), ("scratch", &dirs.scratch)] {
            match crate::host::retry::rename(from, &entry.join(name)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                // Another file system (a home whose folders are links), say: deleted in place.
                Err(_) => paths.push(from.clone()),
            }
        }
        paths
    }

    /// Deletes `paths` and gives the sandbox's disk back; what cannot be deleted stays counted
    /// and is queued for another try.
    fn delete(
        &self,
        id: &str,
        paths: Vec<PathBuf>,
        quota: Option<Arc<DiskQuota>>,
    ) -> Result<(), SandboxError> {
        match self.remove_all(&paths) {
            Ok(()) => {
                if let Some(q) = &quota {
                    q.release(q.used());
                }
                Ok(())
            }
            // Shutdown stopped it; the next start deletes the rest.
            Err(_) if self.given_up() => Ok(()),
            Err(e) => {
                tracing::warn!("could not remove the folders of {id} (will retry): {e}");
                let message = format!(
                    "sandbox '{id}' is closed, but its folder could not be removed yet ({e}); the server retries every 30 s and counts its disk meanwhile"
                );
                self.0.leftovers.locked().push(Leftover {
                    id: id.to_string(),
                    paths,
                    quota,
                });
                Err(SandboxError::RemovalPending(message))
            }
        }
    }
}

/// Deletes every path, whatever the guest built in it (see `remove_tree`), until `stop` says
/// so; the first error.
fn remove_paths(paths: &[PathBuf], stop: &dyn Fn() -> bool) -> std::io::Result<()> {
    let mut first_error = None;
    for p in paths {
        if let Err(e) = remove_tree_unless(p, stop) {
            first_error.get_or_insert(std::io::Error::new(e.kind(), format!("{}: {e}", p.display())));
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Deletes both folders of a sandbox where they are (a sandbox that never got going).
pub fn remove_dirs(dirs: &Dirs) -> std::io::Result<()> {
    remove_paths(&[dirs.workspace.clone(), dirs.scratch.clone()], &|| false)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::path::Path;

    fn put_away(r: &Removals) {
        r.0.trash.as_ref().expect("a trash").put_away();
    }

    fn home() -> PathBuf {
        let h = std::env::temp_dir().join(format!("removals-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&h).unwrap();
        h
    }

    fn sandbox_in(layout: &Layout, id: &str) -> Dirs {
        let dirs = Dirs::of(layout, id);
        std::fs::create_dir_all(dirs.workspace.join("a/b/c")).unwrap();
        std::fs::create_dir_all(&dirs.tmp).unwrap();
        std::fs::write(dirs.workspace.join("a/b/c/f.txt"), b"x").unwrap();
        dirs
    }

    fn trash_entries(home: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(home.join("trash"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn what_a_gone_server_left_in_its_trash_is_deleted_and_a_running_ones_is_not() {
        let home = home();
        let layout = Layout::new(&home);
        let running = Removals::new(&layout);
        // A server that stopped mid-deletion: its folders are in its trash, its lock is free.
        let gone = Removals::new(&layout);
        let left = sandbox_in(&layout, "sbx-left");
        let paths = gone.move_aside("sbx-left", &left);
        assert!(
            !left.workspace.exists() && !left.scratch.exists(),
            "moved aside at once"
        );
        assert!(paths[0].join("workspace/a/b/c/f.txt").is_file());
        drop(gone);
        // The running server is deleting one of its own meanwhile.
        let busy = sandbox_in(&layout, "sbx-busy");
        let busy_paths = running.move_aside("sbx-busy", &busy);
        assert_eq!(trash_entries(&home).len(), 4, "two servers' trash and locks");

        let next = Removals::new(&layout);
        next.empty_stale();
        assert!(!paths[0].exists(), "the gone server's trash is emptied");
        assert!(
            busy_paths[0].join("workspace/a/b/c/f.txt").is_file(),
            "the running one's is not touched"
        );
        put_away(&running);
        assert!(busy_paths[0].exists(), "a trash that still holds something stays");
        running.delete("sbx-busy", busy_paths, None).unwrap();
        put_away(&running);
        put_away(&next);
        assert_eq!(
            trash_entries(&home),
            Vec::<String>::new(),
            "every trash and lock is gone"
        );
        let _ = std::fs::remove_dir_all(&home);
    }

    #[tokio::test]
    async fn a_removal_moves_the_folders_away_before_it_deletes_them() {
        let home = home();
        let layout = Layout::new(&home);
        let r = Removals::new(&layout);
        let dirs = sandbox_in(&layout, "sbx-one");
        let quota = Arc::new(DiskQuota::within(
            1 << 20,
            Arc::new(DiskQuota::host_budget(&home)),
        ));
        quota.reserve(1000).unwrap();
        let handle = r
            .remove_soon("sbx-one", &dirs, Some(quota.clone()))
            .expect("in a runtime");
        assert!(
            !dirs.workspace.exists() && !dirs.scratch.exists(),
            "gone from the home at once"
        );
        handle.await.unwrap().unwrap();
        assert_eq!(quota.used(), 0, "its disk is given back once deleted");
        assert!(r.finish(Duration::from_secs(10)).await, "nothing left under way");
        assert_eq!(trash_entries(&home), Vec::<String>::new());
        let _ = std::fs::remove_dir_all(&home);
    }

    #[tokio::test]
    async fn shutdown_stops_a_long_deletion_and_leaves_the_rest_for_the_next_start() {
        let home = home();
        let layout = Layout::new(&home);
        let r = Removals::new(&layout);
        let dirs = sandbox_in(&layout, "sbx-big");
        for i in 0..3000 {
            let d = dirs.workspace.join(i.to_string()).join("sub");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("f"), b"x").unwrap();
        }
        let handle = r.remove_soon("sbx-big", &dirs, None).expect("in a runtime");
        assert!(
            !r.finish(Duration::from_millis(1)).await,
            "3000 folders take longer than that"
        );
        let ended = tokio::time::timeout(Duration::from_secs(10), handle).await;
        assert!(
            matches!(ended, Ok(Ok(Ok(())))),
            "the deletion stopped at once, quietly"
        );
        assert!(r.retry() == 0, "a stopped deletion is no failure to retry");
        drop(r);
        let entry = trash_entries(&home);
        assert_eq!(
            entry.len(),
            2,
            "the trash holding the rest stays, with its lock: {entry:?}"
        );

        let next = Removals::new(&layout);
        next.empty_stale();
        assert!(next.finish(Duration::from_secs(30)).await);
        assert_eq!(
            trash_entries(&home),
            Vec::<String>::new(),
            "the next start deleted the rest"
        );
        let _ = std::fs::remove_dir_all(&home);
    }
}
