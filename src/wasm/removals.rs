//! Removing the folders of closed sandboxes: the closes under way, which shutdown waits for,
//! and the folders that could not be removed yet, retried later and counted meanwhile.

use std::sync::{Arc, Mutex};

use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::folders::Dirs;
use crate::disk_quota::DiskQuota;
use crate::lock::Locked;
use crate::sandbox::SandboxError;

#[derive(Default)]
pub struct Removals {
    /// Closes under way: a deletion the idle reaper began just before the server stopped
    /// must not be cut off half-way through a tree.
    under_way: TaskTracker,
    /// Folders of closed sandboxes that could not be removed yet: still counted against the
    /// host budget until [`Removals::retry`] removes them.
    leftovers: Mutex<Vec<Leftover>>,
}

struct Leftover {
    id: String,
    dirs: Dirs,
    quota: Option<Arc<DiskQuota>>,
}

impl Removals {
    /// Held from the moment a sandbox leaves the list until its folders are gone.
    pub fn token(&self) -> TaskTrackerToken {
        self.under_way.token()
    }

    /// Waits for every removal under way; none may begin after.
    pub async fn wait(&self) {
        self.under_way.close();
        self.under_way.wait().await;
    }

    /// Removes a closed sandbox's folders and gives its disk back to the host budget; a
    /// folder that cannot be removed stays counted and is queued for another try.
    pub fn remove_or_keep(
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
                self.leftovers.locked().push(Leftover {
                    id: id.to_string(),
                    dirs,
                    quota,
                });
                Err(SandboxError::RemovalPending(message))
            }
        }
    }

    /// Tries again to remove folders that could not be removed before; returns how many remain.
    pub fn retry(&self) -> usize {
        let pending: Vec<Leftover> = std::mem::take(&mut *self.leftovers.locked());
        for l in pending {
            match remove_dirs(&l.dirs) {
                Ok(()) => {
                    tracing::info!("removed the folders of {} on a later try", l.id);
                    if let Some(q) = &l.quota {
                        q.release(q.used());
                    }
                }
                Err(_) => self.leftovers.locked().push(l),
            }
        }
        self.leftovers.locked().len()
    }
}

/// Removes both folders of a sandbox, whatever the guest built in them (see `remove_tree`).
pub fn remove_dirs(dirs: &Dirs) -> std::io::Result<()> {
    let mut first_error = None;
    for d in [&dirs.workspace, &dirs.scratch] {
        if let Err(e) = super::remove_tree::remove_tree(d) {
            first_error.get_or_insert(std::io::Error::new(e.kind(), format!("{}: {e}", d.display())));
        }
    }
    first_error.map_or(Ok(()), Err)
}
