//! When a sandbox was last used, and whether by this server process: every backend lists
//! sandboxes by it, picks the default for calls without an id by it (never one only kept from
//! before a restart), and evicts by it.

use crate::host::lock::Locked;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub struct LastUse {
    at: Mutex<Instant>,
    here: AtomicBool,
}

impl LastUse {
    /// A sandbox made now; it counts as used here once [`LastUse::touch`]ed.
    pub fn now() -> LastUse {
        LastUse {
            at: Mutex::new(Instant::now()),
            here: AtomicBool::new(false),
        }
    }

    /// A sandbox kept from an earlier run, last used at `at`.
    pub fn kept(at: chrono::DateTime<chrono::Utc>) -> LastUse {
        let ago = (chrono::Utc::now() - at).to_std().unwrap_or_default();
        LastUse {
            at: Mutex::new(Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)),
            here: AtomicBool::new(false),
        }
    }

    /// A use by this process.
    pub fn touch(&self) {
        *self.at.locked() = Instant::now();
        self.here.store(true, Ordering::SeqCst);
    }

    pub fn idle_for(&self) -> Duration {
        self.at.locked().elapsed()
    }

    pub fn at(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now() - chrono::Duration::from_std(self.idle_for()).unwrap_or_default()
    }

    /// Created or used by this server process.
    pub fn here(&self) -> bool {
        self.here.load(Ordering::SeqCst)
    }
}
