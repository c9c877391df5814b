//! Guest memory, bounded per sandbox and for all sandboxes together.
//!
//! A WebAssembly memory only grows, and the host gives its pages back only when the Store is
//! dropped, so a few data-heavy sandboxes could otherwise hold more than the machine has. Each
//! Store's limiter takes every growth from one server-wide [`MemoryBudget`] first and gives it
//! all back when the Store goes away. A growth that does not fit first asks the budget's
//! reclaimer to free memory held elsewhere (the backend suspends an idle sandbox, losslessly);
//! only when nothing more can be freed is it refused, which the guest's allocator sees as an
//! ordinary failure and Python raises as `MemoryError`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Most memory a 32-bit WebAssembly memory can address (65,536 pages of 64 KiB).
pub const WASM32_MAX_BYTES: u64 = 4 << 30;

/// Frees some of the budget held by other Stores; resolves to whether it freed anything.
pub type Reclaim = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>;

/// Bytes all sandboxes' guest memories may hold together.
pub struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
    reclaim: OnceLock<Reclaim>,
}

impl std::fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBudget")
            .field("limit", &self.limit)
            .field("used", &self.used)
            .finish_non_exhaustive()
    }
}

impl MemoryBudget {
    pub fn new(limit: u64) -> Arc<MemoryBudget> {
        Arc::new(MemoryBudget {
            limit,
            used: AtomicU64::new(0),
            reclaim: OnceLock::new(),
        })
    }

    /// What a growth that does not fit calls before it is refused (set once, by the backend).
    pub fn set_reclaim(&self, reclaim: Reclaim) {
        let _ = self.reclaim.set(reclaim);
    }

    /// Takes `bytes`, asking the reclaimer to free memory elsewhere for as long as it can.
    async fn take_or_reclaim(&self, bytes: u64) -> bool {
        loop {
            if self.take(bytes) {
                return true;
            }
            match self.reclaim.get() {
                Some(reclaim) if reclaim().await => continue,
                _ => return false,
            }
        }
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

    /// The bytes a growth to `desired` takes from the budget; `None` past this Store's own limit.
    fn growth(&self, current: usize, desired: usize) -> Option<u64> {
        (desired as u64 <= self.per_memory).then(|| desired.saturating_sub(current) as u64)
    }

    /// Books the budget's answer to a growth; whether the growth may go ahead.
    fn record(&mut self, growth: u64, granted: bool) -> bool {
        if granted {
            self.held += growth;
            self.last_growth = growth;
        } else {
            self.refused_by_budget = true;
        }
        granted
    }

    /// Whether the server-wide budget refused a growth since the last call, clearing the flag.
    pub fn take_budget_refusal(&mut self) -> bool {
        std::mem::take(&mut self.refused_by_budget)
    }
}

/// A sandbox's Store: a growth the budget cannot give waits while idle sandboxes are
/// suspended to free it.
#[async_trait::async_trait]
impl wasmtime::ResourceLimiterAsync for GuestLimiter {
    async fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let Some(growth) = self.growth(current, desired) else {
            return Ok(false);
        };
        let granted = self.budget.take_or_reclaim(growth).await;
        Ok(self.record(growth, granted))
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        wasmtime::ResourceLimiter::memory_grow_failed(self, error)
    }

    async fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        wasmtime::ResourceLimiter::table_growing(self, current, desired, maximum)
    }

    fn instances(&self) -> usize {
        wasmtime::ResourceLimiter::instances(self)
    }

    fn tables(&self) -> usize {
        wasmtime::ResourceLimiter::tables(self)
    }

    fn memories(&self) -> usize {
        wasmtime::ResourceLimiter::memories(self)
    }
}

/// Stores that never wait (the base-memory reader): the same rules without reclaiming.
impl wasmtime::ResourceLimiter for GuestLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let Some(growth) = self.growth(current, desired) else {
            return Ok(false);
        };
        let granted = self.budget.take(growth);
        Ok(self.record(growth, granted))
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

    #[test]
    fn a_growth_that_does_not_fit_waits_for_the_reclaimer() {
        use wasmtime::ResourceLimiterAsync;
        let budget = MemoryBudget::new(100);
        let idle = Arc::new(std::sync::Mutex::new(Some(GuestLimiter::new(80, budget.clone()))));
        assert!(
            wasmtime::ResourceLimiter::memory_growing(idle.lock().unwrap().as_mut().unwrap(), 0, 70, None)
                .unwrap()
        );
        let held = idle.clone();
        budget.set_reclaim(Arc::new(move || {
            // Suspending the idle Store drops it, which gives its memory back.
            let freed = held.lock().unwrap().take().is_some();
            Box::pin(async move { freed })
        }));
        let grow = |l: &mut GuestLimiter, from: usize, to: usize| {
            // Spelled out: the limiter is both kinds, and a sandbox's Store uses this one.
            let f = ResourceLimiterAsync::memory_growing(l, from, to, None);
            futures_util::FutureExt::now_or_never(f).expect("no reclaimer here waits")
        };
        let mut busy = GuestLimiter::new(80, budget.clone());
        assert!(grow(&mut busy, 0, 60).unwrap(), "the idle one made room");
        assert_eq!(budget.used(), 60);
        assert!(grow(&mut busy, 60, 80).unwrap(), "40 were free");
        assert_eq!(budget.used(), 80);
        let mut third = GuestLimiter::new(80, budget.clone());
        assert!(!grow(&mut third, 0, 50).unwrap(), "nothing idle is left: refused");
        assert!(third.take_budget_refusal());
    }
}
