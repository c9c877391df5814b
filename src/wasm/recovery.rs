//! Taking over what servers that are gone (stopped, crashed or killed) left in the home: with
//! persistence, sandboxes used within the retention period are listed again under their ids,
//! to be restored on first use; the rest are removed. Folders a running server owns (it holds
//! their lock) are left alone.

use super::folders::{Dirs, Owner};
use super::record::Meta;
use super::registry::Registry;
use crate::sandbox::Limits;
use crate::sandbox::retention::Why;

/// Lists or removes every sandbox folder no running server owns.
///
/// `clamp` bounds the limits read from a kept sandbox's metadata to what a request could have
/// asked for: that file is on disk, where it could have been edited. Sandboxes `leave` names
/// are neither taken over nor removed: they belong to another server's principals.
pub fn recover(registry: &Registry, clamp: &dyn Fn(Limits) -> Limits, leave: &dyn Fn(&str) -> bool) {
    let Ok(rd) = std::fs::read_dir(registry.layout().sandboxes_dir()) else {
        return;
    };
    for entry in rd.flatten() {
        let id = entry.file_name().to_string_lossy().into_owned();
        if !id.starts_with("sbx-") || registry.is_open(&id) || leave(&id) {
            continue;
        }
        let dirs = Dirs::of(registry.layout(), &id);
        let owner = match dirs.owner() {
            Owner::Running => continue,
            Owner::Taken(lock) => Some(lock),
            Owner::Dead => None,
        };
        if let Some(retain) = registry.persist {
            match Meta::read(&dirs) {
                Some(m) if (chrono::Utc::now() - m.last_used).to_std().unwrap_or_default() < retain => {
                    // Without the lock (an older server's folders), another server may be
                    // taking them over too: left alone.
                    if owner.is_some() {
                        registry.adopt(
                            &id,
                            dirs,
                            Meta {
                                limits: clamp(m.limits),
                                ..m
                            },
                            owner,
                        );
                    }
                    continue;
                }
                Some(_) => {
                    tracing::info!("removing {id}: unused for longer than CODE_SANDBOX_RETAIN_DAYS");
                    registry.record_gone(&id, Why::Retention);
                }
                None => tracing::info!("removing {id}, left by a server that is gone"),
            }
        } else {
            tracing::info!("removing {id}, left by a server that is gone");
        }
        registry.remove_unlisted(&id, dirs);
    }
}
