//! The log level a session asked for with `logging/setLevel` (or a 2026-07-28 call in its
//! `_meta`). Log notifications go only to whoever asked, and only at or above its level; what
//! they say is in `notices`.
//!
//! rmcp marks logging deprecated (SEP-2577 drops it after 2026-07-28), but clients of 2025-11-25
//! use it and that revision's conformance requirements include it.
#![allow(deprecated)]

use std::sync::Mutex;

use rmcp::model::LoggingLevel;

use crate::host::lock::Locked as _;

#[derive(Default)]
pub struct LogLevel(Mutex<Option<LoggingLevel>>);

fn rank(l: LoggingLevel) -> u8 {
    match l {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl LogLevel {
    pub fn set(&self, level: LoggingLevel) {
        *self.0.locked() = Some(level);
    }

    pub fn is_set(&self) -> bool {
        self.0.locked().is_some()
    }

    /// Whether a message at `level` goes out.
    pub fn wants(&self, level: LoggingLevel) -> bool {
        self.0.locked().is_some_and(|asked| reaches(level, asked))
    }
}

/// Whether a message at `level` is at or above the level `asked` for.
pub fn reaches(level: LoggingLevel, asked: LoggingLevel) -> bool {
    rank(level) >= rank(asked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_until_asked_then_the_level_and_above() {
        let l = LogLevel::default();
        assert!(!l.wants(LoggingLevel::Emergency));
        l.set(LoggingLevel::Warning);
        assert!(!l.wants(LoggingLevel::Info));
        assert!(l.wants(LoggingLevel::Warning));
        assert!(l.wants(LoggingLevel::Error));
    }
}
