//! Where one sandbox lives on the host, named once: its two folders, the files kept beside its
//! saved state, its checkpoints, and the lock that says which server owns it.
//!
//! Every other module asks here for a path, so a file such as `state.bin` has one name, and
//! a sandbox taken over after a restart is laid out exactly as a new one.

use std::path::{Path, PathBuf};

use crate::runtime::Layout;
use crate::sandbox::Checkpoint;

/// The interpreter's saved state, in `saved/` and in each checkpoint.
pub const STATE: &str = "state.bin";
/// Beside a sandbox's saved state: why its variables were lost (a call the shutdown stopped),
/// for the note its next call carries after a restart.
pub const LOST: &str = "lost.txt";
/// Beside a sandbox's saved state after a resume from a team's store left files out: which,
/// for the note its next call carries (once).
pub const LEFT_OUT: &str = "left-out.txt";
/// Beside a sandbox's saved state while a background run goes: why the variables that come
/// back after a crash are older than the run.
pub const INTERRUPTED: &str = "interrupted.txt";
/// The sandbox's limits and use, to list it again after a restart.
pub const META: &str = "meta.json";
/// A checkpoint's copy of the workspace.
pub const CHECKPOINT_WORKSPACE: &str = "workspace";
/// A checkpoint's copy of the installed packages.
pub const CHECKPOINT_PACKAGES: &str = "site-packages";
/// What a checkpoint adds to the disk quota, as counted when it was made.
pub const CHECKPOINT_SIZE: &str = "bytes";
/// The pid of the server that made the folders (older servers left only this).
const OWNER: &str = "owner.pid";
/// Held exclusively by the server that owns the sandbox.
const OWNER_LOCK: &str = "owner.lock";

/// Host folders of one sandbox. The workspace is what users see; scratch holds the private
/// `/tmp`, the installed packages, the saved state and the checkpoints.
#[derive(Clone, Debug)]
pub struct Dirs {
    pub workspace: PathBuf,
    pub scratch: PathBuf,
    pub tmp: PathBuf,
    pub site_packages: PathBuf,
}

impl Dirs {
    pub fn of(layout: &Layout, id: &str) -> Dirs {
        let scratch = layout.scratch_dir().join(id);
        Dirs {
            workspace: layout.sandboxes_dir().join(id),
            tmp: scratch.join("tmp"),
            site_packages: scratch.join("site-packages"),
            scratch,
        }
    }

    /// Where the interpreter's state and the metadata are saved.
    pub fn saved(&self) -> PathBuf {
        self.scratch.join("saved")
    }

    /// The interpreter's saved state.
    pub fn state(&self) -> PathBuf {
        self.saved().join(STATE)
    }

    pub fn checkpoints(&self) -> PathBuf {
        self.scratch.join("checkpoints")
    }

    /// The sandbox's checkpoints, oldest first.
    pub fn list_checkpoints(&self) -> Vec<Checkpoint> {
        let mut out: Vec<(std::time::SystemTime, Checkpoint)> = std::fs::read_dir(self.checkpoints())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let md = e.path().join(STATE).metadata().ok()?;
                let bytes = std::fs::read_to_string(e.path().join(CHECKPOINT_SIZE))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()?;
                let when = md.modified().ok()?;
                let created: chrono::DateTime<chrono::Utc> = when.into();
                Some((
                    when,
                    Checkpoint {
                        name: e.file_name().to_string_lossy().into_owned(),
                        created_at: created.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                        bytes,
                    },
                ))
            })
            .collect();
        out.sort_by_key(|(t, _)| *t);
        out.into_iter().map(|(_, c)| c).collect()
    }

    /// Stamps the folders with this process's pid, so a later server can tell ours from a
    /// dead one's, and takes their lock, so no other server touches them while we run.
    pub fn claim(&self) -> Option<std::fs::File> {
        let _ = std::fs::write(self.scratch.join(OWNER), std::process::id().to_string());
        take_ownership(&self.scratch)
    }

    /// Who owns folders found at start: ours to take over (with their lock), another running
    /// server's, or a dead server's. A folder a starting server has not stamped yet is left
    /// for a minute.
    pub fn owner(&self) -> Owner {
        if self.scratch.join(OWNER_LOCK).exists() {
            return match take_ownership(&self.scratch) {
                Some(lock) => Owner::Taken(lock),
                None => Owner::Running,
            };
        }
        let pid = std::fs::read_to_string(self.scratch.join(OWNER))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        let orphan = match pid {
            Some(pid) => !process_alive(pid),
            None => std::fs::metadata(&self.workspace)
                .and_then(|m| m.modified())
                .map(|t| t.elapsed().unwrap_or_default().as_secs() > 60)
                .unwrap_or(false),
        };
        if orphan { Owner::Dead } else { Owner::Running }
    }
}

/// Whether a sandbox's folder is in the home, whoever holds it (another server may). The id
/// comes from a file on disk, so only a plain sandbox name is looked up.
pub fn in_home(layout: &Layout, id: &str) -> bool {
    let plain = id.starts_with("sbx-")
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    plain && layout.sandboxes_dir().join(id).is_dir()
}

/// Who owns a sandbox's folders found at start.
pub enum Owner {
    /// Nobody held the lock; it is ours now.
    Taken(std::fs::File),
    /// A running server holds them.
    Running,
    /// Left by a server that is gone, from before the lock existed.
    Dead,
}

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
