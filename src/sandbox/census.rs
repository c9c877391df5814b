//! How many sandboxes a server holds, by state, for the metrics: counted from the server's own
//! bookkeeping, never by asking each sandbox, so a scrape stays cheap with thousands kept.

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// With an interpreter in memory.
    pub live: u64,
    /// Saved by this process (idle too long, or for a principal's memory quota); the next use
    /// brings it back.
    pub suspended: u64,
    /// Saved by an earlier process (before a restart) and not used since.
    pub kept: u64,
}

impl Census {
    /// Counts sandboxes given as (live, used by this process).
    pub fn of(sandboxes: impl IntoIterator<Item = (bool, bool)>) -> Census {
        let mut c = Census::default();
        for (live, used_here) in sandboxes {
            match (live, used_here) {
                (true, _) => c.live += 1,
                (false, true) => c.suspended += 1,
                (false, false) => c.kept += 1,
            }
        }
        c
    }

    /// As the metrics label them.
    pub fn by_state(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("live", self.live),
            ("suspended", self.suspended),
            ("kept", self.kept),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_sandbox_is_live_whoever_used_it_and_a_saved_one_is_kept_until_used_here() {
        let c = Census::of([
            (true, true),
            (true, false),
            (false, true),
            (false, false),
            (false, false),
        ]);
        assert_eq!(
            c,
            Census {
                live: 2,
                suspended: 1,
                kept: 2
            }
        );
    }
}
