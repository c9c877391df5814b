//! The log level a session asked for with `logging/setLevel`. Log notifications go only to a
//! session that asked, and only at or above its level; they carry what a user would want to
//! see (a sandbox created for a call, an interpreter reset), never code, file contents or
//! secrets.
//!
//! rmcp marks logging deprecated (SEP-2577 drops it after 2026-07-28), but clients of 2025-11-25
//! use it and that revision's conformance requirements include it.
#![allow(deprecated)]

use std::sync::Mutex;

use rmcp::RoleServer;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::Peer;

use crate::lock::Locked as _;

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

    /// Whether a message at `level` goes out.
    pub fn wants(&self, level: LoggingLevel) -> bool {
        self.0.locked().is_some_and(|asked| rank(level) >= rank(asked))
    }
}

/// Sends `text` as a log notification when the session asked for `level` or below.
pub fn log(asked: &LogLevel, peer: &Peer<RoleServer>, level: LoggingLevel, text: String) {
    if !asked.wants(level) {
        return;
    }
    let peer = peer.clone();
    tokio::spawn(async move {
        let message = LoggingMessageNotificationParam::new(level, serde_json::Value::String(text))
            .with_logger("mcp-code-sandbox");
        let _ = peer.notify_logging_message(message).await;
    });
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
