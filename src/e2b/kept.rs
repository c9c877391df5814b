//! The E2B sandboxes a stopped server paused, recorded in `CODE_SANDBOX_HOME` so the next
//! start lists them again (and connects, which resumes them, on first use).
//!
//! The record is claimed by renaming it before it is read, so of two servers starting on one
//! home only one takes the sandboxes over.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sandbox::Limits;

#[derive(Serialize, Deserialize)]
pub struct Kept {
    pub id: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub executions: u64,
    pub limits: Limits,
    pub paused_at: chrono::DateTime<chrono::Utc>,
    /// When it was last used (records from before this field: `paused_at` stands in).
    #[serde(default)]
    pub last_used: Option<chrono::DateTime<chrono::Utc>>,
}

fn file(home: &Path) -> PathBuf {
    home.join("e2b").join("paused.json")
}

/// Takes the record over (it is gone from disk afterwards); empty when there is none.
pub fn claim(home: &Path) -> Vec<Kept> {
    let from = file(home);
    let claimed = from.with_extension(format!("claimed-{}", std::process::id()));
    if std::fs::rename(&from, &claimed).is_err() {
        return Vec::new();
    }
    let kept = std::fs::read(&claimed)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let _ = std::fs::remove_file(&claimed);
    kept
}

/// Records the sandboxes paused at shutdown (written aside and renamed).
pub fn store(home: &Path, kept: &[Kept]) -> std::io::Result<()> {
    let path = file(home);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_vec(kept).map_err(std::io::Error::other)?)?;
    std::fs::rename(&tmp, &path)
}
