//! Guest memory, bounded per sandbox and for all sandboxes together.
//!
//! A WebAssembly memory only grows, and the host gives its pages back only when the Store is
//! dropped, so a few data-heavy sandboxes could otherwise hold more than the machine has. Each
//! Store's limiter takes every growth from one server-wide [`MemoryBudget`] first and gives it
//! all back when the Store goes away; a growth that does not fit is refused, which the guest's
//! allocator sees as an ordinary failure and Python raises as `MemoryError`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Most memory a 32-bit WebAssembly memory can address (65,536 pages of 64 KiB).
pub const WASM32_MAX_BYTES: u64 = 4 << 30;

/// Bytes all sandboxes' guest memories may hold together.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
}

impl MemoryBudget {
    pub fn new(limit: u64) -> Arc<MemoryBudget> {
        Arc::new(MemoryBudget {
            limit,
            used: AtomicU64::new(0),
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }

    fn take(&self, bytes: u64) -> bool {
        self.used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.limit)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                Some(used.saturating_sub(bytes))
            });
    }
}

/// Half of the machine's memory: the default server-wide budget.
pub fn half_of_machine() -> u64 {
    #[cfg(unix)]
    {
        // SAFETY: sysconf only reads system constants.
        let (pages, size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && size > 0 {
            return (pages as u64).saturating_mul(size as u64) / 2;
        }
    }
    8 << 30
}

/// One Store's limiter: its own memory limit, and its share of the server-wide budget.
#[derive(Debug)]
pub struct GuestLimiter {
    per_memory: u64,
    budget: Arc<MemoryBudget>,
    /// Bytes this Store took from the budget, given back on drop.
    held: u64,
    /// The last growth allowed, given back if the growth itself then fails.
    last_growth: u64,
    /// A growth was refused because the server-wide budget was full (not this sandbox's
    /// own limit), since the flag was last cleared.
    refused_by_budget: bool,
}

/// Limits on tables and instances: the interpreter is one instance with one table and one memory.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;
const MAX_INSTANCES: usize = 1;
const MAX_TABLES: usize = 1;
const MAX_MEMORIES: usize = 1;

impl GuestLimiter {
    pub fn new(per_memory: u64, budget: Arc<MemoryBudget>) -> GuestLimiter {
        GuestLimiter {
            per_memory,
            budget,
            held: 0,
            last_growth: 0,
            refused_by_budget: false,
        }
    }

    /// Whether the server-wide budget refused a growth since the last call, clearing the flag.
    pub fn take_budget_refusal(&mut self) -> bool {
        std::mem::take(&mut self.refused_by_budget)
    }
}

impl wasmtime::ResourceLimiter for GuestLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired as u64 > self.per_memory {
            return Ok(false);
        }
        let growth = desired.saturating_sub(current) as u64;
        if !self.budget.take(growth) {
            self.refused_by_budget = true;
            return Ok(false);
        }
        self.held += growth;
        self.last_growth = growth;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        let growth = std::mem::take(&mut self.last_growth);
        self.budget.give_back(growth);
        self.held = self.held.saturating_sub(growth);
        Ok(())
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

impl Drop for GuestLimiter {
    fn drop(&mut self) {
        self.budget.give_back(self.held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn stores_share_the_budget_and_give_it_back_when_dropped() {
        let budget = MemoryBudget::new(100);
        let mut a = GuestLimiter::new(80, budget.clone());
        let mut b = GuestLimiter::new(80, budget.clone());
        assert!(a.memory_growing(0, 60, None).unwrap());
        assert!(!b.memory_growing(0, 60, None).unwrap(), "only 40 are left");
        assert!(b.take_budget_refusal());
        assert!(!b.take_budget_refusal(), "the flag clears");
        assert!(b.memory_growing(0, 40, None).unwrap());
        assert!(!a.memory_growing(60, 90, None).unwrap(), "over a's own limit");
        assert!(
            !a.take_budget_refusal(),
            "refused by its own limit, not the budget"
        );
        assert_eq!(budget.used(), 100);
        drop(a);
        assert_eq!(budget.used(), 40);
        b.memory_grow_failed(wasmtime::Error::msg("no")).unwrap();
        assert_eq!(budget.used(), 0);
        drop(b);
        assert_eq!(budget.used(), 0);
    }
}
