//! One sandbox of the local backend, as the server holds it: its folders, limits, disk quota,
//! interpreter slot and use. Made in one place ([`Sandbox::new`]) whether it is new or taken
//! over after a restart.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio_util::sync::CancellationToken;

use super::folders::{Dirs, INTERRUPTED, LEFT_OUT, LOST, META};
use super::vm::{MemoryBudget, Session, SessionConfig};
use crate::disk::quota::DiskQuota;
use crate::sandbox::last_use::LastUse;
use crate::sandbox::{Limits, SandboxState, SandboxStatus};

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
    /// Said with the next call's result, once (files a resume left out).
    pub notes: Vec<String>,
}

pub struct Sandbox {
    pub id: String,
    pub dirs: Dirs,
    /// Shared by the guest's file calls and the host-side file tools.
    pub quota: Arc<DiskQuota>,
    pub limits: Limits,
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Made by this process (not taken over from a disk or a store): until it is first
    /// written to a team's store, no other replica can have it.
    pub made_here: bool,
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
    /// Held while its state file is written (taken with the slot held, so writes land in the
    /// order their states were captured): a save after a call writes after letting go of the
    /// interpreter, and another save must not write at the same time.
    pub writing: Arc<tokio::sync::Mutex<()>>,
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

/// What became of a sandbox's interpreter before a call: the one the last call left (or a
/// first one), or a new one because the last was lost, with why when the host knows it.
#[derive(Clone, Debug, PartialEq)]
pub enum Before {
    Kept,
    Lost {
        why: Option<String>,
    },
    /// Brought back from a state saved earlier than the last call (a background run was
    /// stopped, or cut off by a crash): the variables are those of the save, not fresh.
    Rewound {
        why: String,
    },
}

impl Slot {
    /// Drops the interpreter for a reason the next call reports with `state_lost`.
    pub fn reset(&mut self, why: String) {
        self.session = None;
        self.lost = true;
        self.lost_reason = Some(why);
    }

    /// The slot of a sandbox taken over after a restart: suspended when its saved state is
    /// there and no call was stopped mid-run, else empty and lost, with why.
    /// A background run cut off by the end of the server leaves its sandbox resumable from the
    /// state saved before the run, and lost all the same: its next call says why.
    pub fn kept(dirs: &Dirs) -> Slot {
        let lost_why = std::fs::read_to_string(dirs.saved().join(LOST)).ok();
        let interrupted = std::fs::read_to_string(dirs.saved().join(INTERRUPTED)).ok();
        let saved = lost_why.is_none() && dirs.state().is_file();
        let lost = !saved || interrupted.is_some();
        let left_out = std::fs::read_to_string(dirs.saved().join(LEFT_OUT)).ok();
        if left_out.is_some() {
            let _ = std::fs::remove_file(dirs.saved().join(LEFT_OUT));
        }
        Slot {
            saved,
            lost,
            notes: left_out.map(|n| n.trim().to_string()).into_iter().collect(),
            lost_reason: lost.then(|| {
                lost_why
                    .or(interrupted)
                    .map(|w| w.trim().to_string())
                    .unwrap_or_else(|| {
                        "the server stopped before it could save the interpreter's state (its files are kept)"
                            .to_string()
                    })
            }),
            ..Slot::default()
        }
    }

    /// Ends a resume: the interpreter is the saved one, older than the last call if a run was
    /// stopped since (reported once).
    pub fn take_after_resume(&mut self) -> Before {
        match self.take_before() {
            Before::Lost { why } => Before::Rewound {
                why: why.unwrap_or_else(|| "a background run was stopped".into()),
            },
            before => before,
        }
    }

    /// Ends a fresh start: whether the interpreter before it was lost, reported once.
    pub fn take_before(&mut self) -> Before {
        if std::mem::take(&mut self.lost) {
            Before::Lost {
                why: self.lost_reason.take(),
            }
        } else {
            Before::Kept
        }
    }

    /// The slot now holds `session`, current: nothing saved, nothing lost.
    pub fn replace(&mut self, session: Session) {
        self.session = Some(session);
        self.lost = false;
        self.lost_reason = None;
        self.saved = false;
    }
}

/// Where a sandbox comes from: made now with these limits, or kept by an earlier run of the
/// server with this record (its limits already bounded by today's settings).
pub enum Origin {
    New(Limits),
    Kept(Meta),
}

impl Meta {
    /// The metadata kept beside a sandbox's saved state, if it is there and readable.
    pub fn read(dirs: &Dirs) -> Option<Meta> {
        let bytes = std::fs::read(dirs.saved().join(META)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

impl Sandbox {
    /// The one place a sandbox is made. `owner` is the lock on its folders; `stopping` is
    /// cancelled at shutdown.
    pub fn new(
        id: String,
        dirs: Dirs,
        quota: Arc<DiskQuota>,
        origin: Origin,
        owner: Option<std::fs::File>,
        stopping: CancellationToken,
    ) -> Arc<Sandbox> {
        let made_here = matches!(origin, Origin::New(_));
        let (limits, created_at, executions, slot, last_use) = match origin {
            Origin::New(limits) => (limits, chrono::Utc::now(), 0, Slot::default(), LastUse::now()),
            Origin::Kept(m) => (
                m.limits,
                m.created_at,
                m.executions,
                Slot::kept(&dirs),
                LastUse::kept(m.last_used),
            ),
        };
        Arc::new(Sandbox {
            id,
            dirs,
            quota,
            limits,
            created_at,
            made_here,
            executions: AtomicU64::new(executions),
            saved_executions: AtomicU64::new(executions),
            writing: Arc::default(),
            busy: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            closing: CancellationToken::new(),
            stopping,
            slot: tokio::sync::Mutex::new(slot),
            last_use,
            _owner: owner,
        })
    }

    /// Whether this process created or used it (only such a sandbox is the default for a call
    /// without an id).
    pub fn used_here(&self) -> bool {
        self.last_use.here()
    }

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
        let state = std::fs::metadata(self.dirs.state()).map_or(0, |m| m.len());
        self.quota.used().saturating_add(state)
    }

    /// Records the sandbox's limits and use beside its files (atomically).
    pub fn write_meta(&self) -> std::io::Result<()> {
        let meta = Meta {
            limits: self.limits.clone(),
            created_at: self.created_at,
            executions: self.executions.load(Ordering::SeqCst),
            last_used: self.last_used_at(),
        };
        let dir = self.dirs.saved();
        std::fs::create_dir_all(&dir)?;
        let tmp = dir.join(".meta.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(&meta).map_err(std::io::Error::other)?)?;
        crate::host::retry::rename(&tmp, &dir.join(META))
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
            checkpoints: self.dirs.list_checkpoints(),
        }
    }
}
