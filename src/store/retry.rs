//! How long a push that failed (the store away, slow or refusing) waits before it is tried
//! again: doubling from a second to a minute, per sandbox, back to a second once one works
//! (and cut short for all once the store answers again: see `Held::back`). Until then the sandbox's files stay on this replica's disk and its sandbox keeps working.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::host::lock::Locked;

const FIRST: Duration = Duration::from_secs(1);
const MOST: Duration = Duration::from_secs(60);

#[derive(Default)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// One more failure of `id`'s push: how long to wait, and how many in a row.
    pub fn failed(&self, id: &str) -> (Duration, u32) {
        let mut f = self.failures.locked();
        let n = f.entry(id.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        let wait = FIRST.saturating_mul(1 << (*n - 1).min(6)).min(MOST);
        (wait, *n)
    }

    pub fn succeeded(&self, id: &str) {
        self.failures.locked().remove(id);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn waits_double_up_to_a_minute_and_start_over_after_a_success() {
        let b = super::Backoff::default();
        let waits: Vec<u64> = (0..9).map(|_| b.failed("s").0.as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        b.succeeded("s");
        assert_eq!(b.failed("s"), (super::FIRST, 1));
    }
}
