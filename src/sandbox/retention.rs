//! What a backend deletes on its own, for every backend alike: sandboxes idle too long, past
//! the retention period, or evicted to keep kept sandboxes within their budget. Deletions are
//! remembered, so naming one later says what happened and when, instead of "no such sandbox".
//!
//! With persistence the record is kept in `CODE_SANDBOX_HOME/<file>` (written aside and
//! renamed), so it holds across restarts; it keeps the newest [`KEEP`] entries.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::host::lock::Locked;
use crate::sandbox::SandboxError;

/// Most deletions remembered.
const KEEP: usize = 10_000;

/// A kept sandbox used this recently is never evicted, whatever its budget says: it may
/// belong to a conversation still going on.
pub const RECENT: std::time::Duration = std::time::Duration::from_secs(3600);

/// Why the server deleted a sandbox by itself.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// Unused for `CODE_SANDBOX_IDLE_SECONDS` without persistence.
    Idle,
    /// Unused for `CODE_SANDBOX_RETAIN_DAYS`.
    Retention,
    /// Among the least recently used when kept sandboxes passed `CODE_SANDBOX_KEEP_MB`.
    Evicted,
}

impl Why {
    /// How a log line says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Why::Idle => "idle",
            Why::Retention => "retention",
            Why::Evicted => "evicted",
        }
    }
}

impl Why {
    fn because(self) -> &'static str {
        match self {
            Why::Idle => "it sat unused for CODE_SANDBOX_IDLE_SECONDS",
            Why::Retention => "it was unused for CODE_SANDBOX_RETAIN_DAYS",
            Why::Evicted => {
                "kept sandboxes passed their disk budget (CODE_SANDBOX_KEEP_MB) and it was among the least recently used"
            }
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    at: DateTime<Utc>,
    why: Why,
}

pub struct Gone {
    file: Option<PathBuf>,
    entries: Mutex<HashMap<String, Entry>>,
}

impl Gone {
    /// `file`: where the record lives across restarts (with persistence), read now.
    pub fn new(file: Option<PathBuf>) -> Gone {
        let entries = file
            .as_ref()
            .and_then(|f| std::fs::read(f).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        Gone {
            file,
            entries: Mutex::new(entries),
        }
    }

    pub fn record(&self, id: &str, why: Why) {
        let mut entries = self.entries.locked();
        entries.insert(id.to_string(), Entry { at: Utc::now(), why });
        if entries.len() > KEEP {
            let mut by_age: Vec<(String, DateTime<Utc>)> =
                entries.iter().map(|(k, e)| (k.clone(), e.at)).collect();
            by_age.sort_by_key(|(_, at)| *at);
            for (k, _) in by_age.into_iter().take(entries.len() - KEEP) {
                entries.remove(&k);
            }
        }
        if let Some(file) = &self.file
            && let Err(e) = write(file, &entries)
        {
            tracing::warn!("could not record deleted sandboxes in {}: {e}", file.display());
        }
    }

    /// The error for a sandbox the server deleted, if it did.
    pub fn error(&self, id: &str) -> Option<SandboxError> {
        let entries = self.entries.locked();
        let e = entries.get(id)?;
        Some(SandboxError::Deleted {
            id: id.to_string(),
            at: e.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            because: e.why.because(),
        })
    }
}

fn write(file: &std::path::Path, entries: &HashMap<String, Entry>) -> std::io::Result<()> {
    let tmp = file.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(entries).map_err(std::io::Error::other)?)?;
    crate::host::retry::rename(&tmp, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deletion_is_told_with_its_reason_and_survives_a_restart() {
        let dir = std::env::temp_dir().join(format!("gone-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("deleted.json");
        let g = Gone::new(Some(file.clone()));
        assert!(g.error("sbx-a").is_none());
        g.record("sbx-a", Why::Evicted);
        let again = Gone::new(Some(file));
        let e = again.error("sbx-a").expect("remembered").to_string();
        assert!(e.contains("sbx-a") && e.contains("CODE_SANDBOX_KEEP_MB"), "{e}");
        assert!(e.contains("was deleted on 20"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
