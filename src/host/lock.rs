//! Taking a lock whatever happened to the last holder.
//!
//! The server's mutexes guard plain bookkeeping (lists, counters, maps) that every step leaves
//! consistent, so a panic in one call must not turn every later call into a second panic:
//! a poisoned lock is taken as it is.

use std::sync::{Mutex, MutexGuard, PoisonError};

pub trait Locked<T> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
