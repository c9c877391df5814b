//! One E2B sandbox as this server holds it: its remote handle, limits and use. A paused
//! sandbox and the same sandbox resumed are two entries sharing one [`Activity`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use super::client::Remote;
use crate::sandbox::Limits;
use crate::sandbox::last_use::LastUse;

pub struct Entry {
    pub remote: Remote,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub executions: AtomicU64,
    pub limits: Limits,
    /// Paused (by an earlier run of the server, or to make room for another): connected, and
    /// so resumed, on first use.
    pub paused: bool,
    /// Its use, shared by the entries that stand for it as it is paused and resumed.
    pub activity: Arc<Activity>,
}

impl Entry {
    /// The same sandbox, paused: connecting again will resume it.
    pub fn paused(&self) -> Entry {
        Entry {
            remote: Remote {
                id: self.remote.id.clone(),
                token: None,
                domain: None,
            },
            created_at: self.created_at,
            executions: AtomicU64::new(self.executions.load(Ordering::SeqCst)),
            limits: self.limits.clone(),
            paused: true,
            activity: self.activity.clone(),
        }
    }
}

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

    pub fn touch(&self) {
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
pub struct InUse(Arc<Entry>);

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
