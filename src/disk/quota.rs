//! A sandbox's disk quota: the bytes its folders may hold, shared by the guest's file calls
//! and the host-side file tools.
//!
//! The host file system has no per-folder limit we could use without privileges, so the
//! sandbox keeps its own count. Every way of adding bytes goes through a check first
//! ([`DiskQuota::reserve`]), and the count only moves by what really changed on disk, measured
//! with `fstat` before and after. Files count their logical size (a sparse file at 2**40 is
//! 2**40 bytes), and every name costs [`ENTRY_COST`], so ten million empty files hit the
//! quota as surely as one big file. A file deleted while the guest still holds it open keeps
//! counting until its last descriptor closes, since its blocks are only freed then.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::host::lock::Locked;
use cap_std::fs::Metadata;

/// What one directory entry (file, folder or link) costs, like a file system block.
pub const ENTRY_COST: u64 = 4096;

/// A file's identity on the host: the same inode through any name or descriptor.
pub type InodeKey = (u64, u64);

/// Which budget a quota is: budgets nest, a sandbox's inside its principal's inside the host's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Sandbox,
    /// All the sandboxes of one principal (remote mode).
    Principal,
    /// What this server leaves itself on the host disk.
    Host,
}

#[derive(Debug, thiserror::Error)]
#[error("{} of {limit} bytes is full ({used} bytes used, {wanted} more wanted)", match .scope {
    Scope::Sandbox => "the sandbox's disk quota",
    Scope::Principal => "your disk quota for all your sandboxes",
    Scope::Host => "the room this server leaves itself on the host disk",
})]
pub struct QuotaFull {
    pub limit: u64,
    pub used: u64,
    pub wanted: u64,
    /// Which budget ran out.
    pub scope: Scope,
}

impl From<QuotaFull> for crate::sandbox::SandboxError {
    fn from(q: QuotaFull) -> Self {
        match q.scope {
            Scope::Host => crate::sandbox::SandboxError::HostDiskLow { wanted: q.wanted },
            Scope::Principal => crate::sandbox::SandboxError::Quota({
                crate::telemetry::metrics::quota_refused(crate::telemetry::metrics::QuotaKind::Disk);
                format!(
                    "your sandboxes hold {} MiB on disk, and {} bytes more would pass your {} MiB disk quota; delete files (with execute_code, e.g. os.remove) or close sandboxes you no longer need, then try again",
                    q.used >> 20,
                    q.wanted,
                    q.limit >> 20
                )
            }),
            Scope::Sandbox => crate::sandbox::SandboxError::DiskFull {
                limit: q.limit,
                used: q.used,
                wanted: q.wanted,
            },
        }
    }
}

#[derive(Debug, Default)]
struct Usage {
    used: u64,
    /// Inodes the guest holds open, with how many of its descriptors point at each.
    open: HashMap<InodeKey, u32>,
}

#[derive(Debug)]
pub struct DiskQuota {
    limit: u64,
    scope: Scope,
    usage: Mutex<Usage>,
    /// The budget these bytes also count against (a principal's, the server-wide one), so
    /// that many sandboxes together cannot pass it either. Set again when a sandbox kept from
    /// before a restart is found to belong to a principal.
    parent: Mutex<Option<Arc<DiskQuota>>>,
}

impl DiskQuota {
    pub fn new(limit: u64) -> Self {
        DiskQuota {
            limit,
            scope: Scope::Sandbox,
            usage: Mutex::new(Usage::default()),
            parent: Mutex::new(None),
        }
    }

    pub fn within(limit: u64, parent: Arc<DiskQuota>) -> Self {
        DiskQuota {
            parent: Mutex::new(Some(parent)),
            ..DiskQuota::new(limit)
        }
    }

    /// One principal's budget for all its sandboxes, inside `parent` (the host's).
    pub fn principal(limit: u64, parent: Arc<DiskQuota>) -> Self {
        DiskQuota {
            scope: Scope::Principal,
            ..DiskQuota::within(limit, parent)
        }
    }

    /// The server-wide budget: what the disk under `root` has free now, less headroom for the
    /// rest of the system (a tenth of the free space, at least 256 MiB).
    pub fn host_budget(root: &std::path::Path) -> Self {
        DiskQuota {
            scope: Scope::Host,
            ..DiskQuota::new(host_room(root))
        }
    }

    /// The budget these bytes also count against, if any.
    pub fn parent(&self) -> Option<Arc<DiskQuota>> {
        self.parent.locked().clone()
    }

    /// Counts this quota's bytes against `parent` from now on instead of its old one. What it
    /// holds moves along, even past the new parent's limit: those bytes are on disk already,
    /// and the next reservation will be refused until enough are gone.
    pub fn move_under(&self, parent: Arc<DiskQuota>) {
        let u = self.usage();
        let mut slot = self.parent.locked();
        if let Some(old) = slot.as_ref() {
            if Arc::ptr_eq(old, &parent) {
                return;
            }
            old.settle(u.used, 0);
        }
        parent.settle(0, i128::from(u.used));
        *slot = Some(parent);
    }

    fn usage(&self) -> std::sync::MutexGuard<'_, Usage> {
        self.usage.locked()
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn used(&self) -> u64 {
        self.usage().used
    }

    /// Adds `bytes` if they fit. Callers settle or release the reservation once they know what
    /// the operation really did.
    pub fn reserve(&self, bytes: u64) -> Result<(), QuotaFull> {
        let mut u = self.usage();
        match u.used.checked_add(bytes) {
            Some(total) if total <= self.limit => {
                if let Some(parent) = self.parent() {
                    // A parent that is full says which budget it is.
                    parent.reserve(bytes)?;
                }
                u.used = total;
                Ok(())
            }
            _ => Err(QuotaFull {
                limit: self.limit,
                used: u.used,
                wanted: bytes,
                scope: self.scope,
            }),
        }
    }

    pub fn release(&self, bytes: u64) {
        self.settle(bytes, 0);
    }

    /// Replaces a reservation with what was measured: `grew` bytes more (negative: fewer).
    pub fn settle(&self, reserved: u64, grew: i128) {
        let mut u = self.usage();
        let before = u.used;
        let now = i128::from(u.used) - i128::from(reserved) + grew;
        u.used = now.clamp(0, i128::from(u64::MAX)) as u64;
        if let Some(parent) = self.parent() {
            // What this quota really moved by, so the two never drift apart.
            parent.settle(0, i128::from(u.used) - i128::from(before));
        }
    }

    pub fn opened(&self, key: InodeKey) {
        *self.usage().open.entry(key).or_insert(0) += 1;
    }

    /// One descriptor of `key` closed; true when it was the guest's last one.
    pub fn closed(&self, key: InodeKey) -> bool {
        let mut u = self.usage();
        match u.open.get_mut(&key) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => {
                u.open.remove(&key);
                true
            }
        }
    }

    pub fn is_open(&self, key: InodeKey) -> bool {
        self.usage().open.contains_key(&key)
    }

    /// Releases what removing one name of `md` frees now. A file's bytes go with its last
    /// name, unless the guest still holds it open: then the last close releases them.
    pub fn forget_entry(&self, md: &Metadata) {
        let freed = if md.is_symlink() {
            ENTRY_COST + md.len()
        } else if !md.is_file() || links(md) > 1 {
            ENTRY_COST
        } else if self.is_open(key(md)) {
            0
        } else {
            ENTRY_COST + md.len()
        };
        self.release(freed);
    }
}

fn host_room(root: &std::path::Path) -> u64 {
    match free_bytes(root) {
        Some(free) => free.saturating_sub((free / 10).max(256 << 20)),
        None => u64::MAX,
    }
}

/// What the disk under `root` has free for this user now; `None` where it cannot be told.
#[cfg(unix)]
pub fn free_bytes(root: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    // The folder may not exist yet: the nearest one that does is on the same disk.
    let existing = root.ancestors().find(|p| p.exists())?;
    let path = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs writes only into the zeroed struct we pass, for a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(not(unix))]
pub fn free_bytes(_root: &std::path::Path) -> Option<u64> {
    None
}

/// What the entries under `root` count against a quota (never following links).
pub fn tree_cost(root: &std::path::Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(md) = entry.path().symlink_metadata() else {
                continue;
            };
            total = total.saturating_add(ENTRY_COST);
            if md.is_dir() {
                stack.push(entry.path());
            } else {
                total = total.saturating_add(md.len());
            }
        }
    }
    total
}

/// The inode of `md`.
#[cfg(unix)]
pub fn key(md: &Metadata) -> InodeKey {
    use cap_std::fs::MetadataExt;
    (md.dev(), md.ino())
}

#[cfg(not(unix))]
pub fn key(_md: &Metadata) -> InodeKey {
    // Without inode numbers every file looks alike, so a delete while anything is open keeps
    // counting the bytes: the count errs on the full side, never on the empty one.
    (0, 0)
}

/// How many names `md` has.
#[cfg(unix)]
pub fn links(md: &Metadata) -> u64 {
    use cap_std::fs::MetadataExt;
    md.nlink()
}

#[cfg(not(unix))]
pub fn links(_md: &Metadata) -> u64 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_stop_at_the_limit_and_settle_to_what_happened() {
        let q = DiskQuota::new(10_000);
        q.reserve(6_000).expect("fits");
        let full = q.reserve(5_000).expect_err("over the limit");
        assert_eq!((full.used, full.wanted), (6_000, 5_000));
        // Reserved 6000 for a write that only grew the file by 100.
        q.settle(6_000, 100);
        assert_eq!(q.used(), 100);
        q.reserve(9_900).expect("exactly full fits");
        assert!(q.reserve(1).is_err());
        assert!(q.reserve(u64::MAX).is_err(), "no overflow");
        q.settle(0, -20_000);
        assert_eq!(q.used(), 0, "never below zero");
    }

    #[test]
    fn a_sandbox_also_counts_against_the_host_budget() {
        let host = Arc::new(DiskQuota {
            scope: Scope::Host,
            ..DiskQuota::new(10_000)
        });
        let a = DiskQuota::within(8_000, host.clone());
        let b = DiskQuota::within(8_000, host.clone());
        a.reserve(6_000).expect("fits both");
        let full = b.reserve(6_000).expect_err("the host budget is short");
        assert!(
            full.scope == Scope::Host && full.to_string().contains("host disk"),
            "{full}"
        );
        assert_eq!(b.used(), 0, "a refused reservation leaves nothing behind");
        a.settle(6_000, 1_000);
        assert_eq!((a.used(), host.used()), (1_000, 1_000));
        b.reserve(6_000).expect("room again");
        a.release(5_000);
        assert_eq!((a.used(), host.used()), (0, 6_000));
    }

    #[test]
    fn budgets_nest_sandbox_in_principal_in_host_and_a_sandbox_can_move_under_a_principal() {
        let host = Arc::new(DiskQuota {
            scope: Scope::Host,
            ..DiskQuota::new(1_000_000)
        });
        let alice = Arc::new(DiskQuota::principal(10_000, host.clone()));
        let a1 = DiskQuota::within(8_000, alice.clone());
        let a2 = DiskQuota::within(8_000, alice.clone());
        a1.reserve(7_000).unwrap();
        let full = a2.reserve(7_000).expect_err("alice's budget is short");
        assert_eq!(full.scope, Scope::Principal, "{full}");
        assert_eq!((alice.used(), host.used()), (7_000, 7_000));
        // A kept sandbox found to be alice's after a restart: its bytes move under her budget.
        let kept = DiskQuota::within(8_000, host.clone());
        kept.reserve(2_000).unwrap();
        assert_eq!(host.used(), 9_000);
        kept.move_under(alice.clone());
        assert_eq!(
            (alice.used(), host.used()),
            (9_000, 9_000),
            "counted once, in both"
        );
        let full = kept.reserve(2_000).expect_err("now within alice's budget");
        assert_eq!(full.scope, Scope::Principal);
        kept.release(2_000);
        assert_eq!((alice.used(), host.used()), (7_000, 7_000));
    }

    #[test]
    fn an_inode_counts_as_open_until_its_last_descriptor_closes() {
        let q = DiskQuota::new(1);
        q.opened((1, 2));
        q.opened((1, 2));
        assert!(!q.closed((1, 2)));
        assert!(q.is_open((1, 2)));
        assert!(q.closed((1, 2)));
        assert!(!q.is_open((1, 2)));
    }
}
