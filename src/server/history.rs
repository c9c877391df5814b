//! Each sandbox's session as cells: the code of every `execute_code` and what it showed,
//! kept so `export_notebook` can write the session as a notebook. One JSON-lines file per
//! sandbox under `CODE_SANDBOX_HOME/history/`, beside the sandbox rather than inside it (the
//! guest cannot rewrite it, and it costs the sandbox's disk nothing). It survives restarts,
//! a fork copies it, and it goes with its sandbox however that goes: closed, or deleted by the
//! server when idle or evicted ([`History::follow`] hears of each), or past retention (a file
//! is written at each cell, so it is never younger than its sandbox's last use: files untouched
//! for as long as kept sandboxes live are removed at start). Not by asking the backend which
//! sandboxes it holds: other servers on the same home (Claude Desktop's and Claude Code's
//! both) hold sandboxes this one does not know. Bounded: at most [`MAX_CELLS`] cells and [`MAX_BYTES`] per
//! sandbox, the oldest cells going first; every field of a cell is capped (the guest sends its
//! own errors and tables, of any size).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::sandbox::{Execution, PyError, Table};

pub const MAX_CELLS: usize = 1000;
pub const MAX_BYTES: u64 = 32 << 20;
/// Text kept of one cell's stdout, stderr or value (head and tail).
const MAX_TEXT: usize = 100_000;
/// Figures kept of one cell, and the largest kept.
const MAX_FIGURES: usize = 10;
const MAX_FIGURE_BYTES: usize = 2 << 20;
/// Figures' bytes kept of one cell in all.
const MAX_FIGURES_BYTES: usize = 4 << 20;
/// A table kept with its cell, at most (as JSON); a larger one is left out.
const MAX_TABLE_BYTES: usize = 200_000;

/// One executed cell.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cell {
    pub code: String,
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    #[serde(default)]
    pub result: Option<String>,
    #[serde(default)]
    pub table: Option<Table>,
    /// PNGs, base64.
    #[serde(default)]
    pub figures: Vec<String>,
    #[serde(default)]
    pub error: Option<PyError>,
    /// RFC 3339.
    pub at: String,
}

fn capped(text: &str) -> String {
    if text.len() <= MAX_TEXT {
        return text.to_string();
    }
    let mut head = MAX_TEXT / 2;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - MAX_TEXT / 2;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[... {} bytes omitted ...]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

impl Cell {
    pub fn new(code: &str, ex: &Execution) -> Cell {
        Cell {
            code: capped(code),
            stdout: capped(&ex.stdout),
            // The traceback is the error output: not a second time as stderr.
            stderr: capped(&match &ex.error {
                Some(e) if !e.traceback.is_empty() => ex.stderr.replacen(e.traceback.as_str(), "", 1),
                _ => ex.stderr.clone(),
            }),
            result: ex.result.as_deref().map(capped),
            table: ex
                .table
                .clone()
                .filter(|t| serde_json::to_vec(t).map_or(0, |b| b.len()) <= MAX_TABLE_BYTES),
            figures: figures(ex),
            error: ex.error.as_ref().map(|e| PyError {
                name: capped(&e.name.chars().take(200).collect::<String>()),
                value: capped(&e.value),
                traceback: capped(&e.traceback),
            }),
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        }
    }
}

/// The cell's figures as base64, within the per-figure and per-cell bounds.
fn figures(ex: &Execution) -> Vec<String> {
    let mut room = MAX_FIGURES_BYTES;
    ex.images
        .iter()
        .filter(|i| i.mime_type == "image/png" && i.data.len() <= MAX_FIGURE_BYTES)
        .take(MAX_FIGURES)
        .take_while(|i| match room.checked_sub(i.data.len()) {
            Some(left) => {
                room = left;
                true
            }
            None => false,
        })
        .map(|i| base64::engine::general_purpose::STANDARD.encode(&i.data))
        .collect()
}

pub struct History {
    dir: PathBuf,
    /// Cells in each file written since start (counted once, then kept up to date); also
    /// makes one writer at a time (appends and trims of one file must not interleave).
    counts: std::sync::Mutex<std::collections::HashMap<PathBuf, usize>>,
}

impl History {
    /// The history under `home`; files unused for longer than `retain` are removed now.
    pub fn open(home: &Path, retain: Duration) -> History {
        let dir = crate::runtime::Layout::new(home).history_dir();
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let old = e
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > retain);
                if old {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        History {
            dir,
            counts: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(crate::runtime::history_file(id))
    }

    /// Appends a cell; trims the oldest when the bounds are passed. A failure is logged: a
    /// notebook missing a cell must never fail the call that ran it.
    pub fn record(&self, id: &str, cell: &Cell) {
        let mut counts = crate::host::lock::Locked::locked(&self.counts);
        let path = self.path(id);
        let line = match serde_json::to_string(cell) {
            Ok(l) => l,
            Err(_) => return,
        };
        let appended = std::fs::create_dir_all(&self.dir).and_then(|_| {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?;
            writeln!(f, "{line}")?;
            f.metadata()
        });
        let size = match appended {
            Ok(m) => m.len(),
            Err(e) => {
                tracing::warn!("could not record a cell of {id}'s history: {e}");
                return;
            }
        };
        let count = counts.entry(path.clone()).or_insert_with(|| {
            std::fs::read_to_string(&path).map_or(0, |t| t.lines().count().saturating_sub(1))
        });
        *count += 1;
        if size > MAX_BYTES || *count > MAX_CELLS {
            *count = self.trim(&path);
        }
    }

    /// Keeps the newest cells within the bounds (written aside and renamed); how many.
    fn trim(&self, path: &Path) -> usize {
        let Ok(text) = std::fs::read_to_string(path) else {
            return 0;
        };
        let lines: Vec<&str> = text.lines().collect();
        let mut keep = lines.len().min(MAX_CELLS);
        let mut bytes: u64 = lines[lines.len() - keep..]
            .iter()
            .map(|l| l.len() as u64 + 1)
            .sum();
        while bytes > MAX_BYTES / 2 * 3 / 2 && keep > 1 {
            bytes -= lines[lines.len() - keep].len() as u64 + 1;
            keep -= 1;
        }
        if keep == lines.len() {
            return keep;
        }
        let tmp = path.with_extension("tmp");
        let body = lines[lines.len() - keep..].join("\n") + "\n";
        if std::fs::write(&tmp, body)
            .and_then(|_| crate::host::retry::rename(&tmp, path))
            .is_err()
        {
            let _ = std::fs::remove_file(&tmp);
            return lines.len();
        }
        keep
    }

    /// The sandbox's cells, oldest first (lines that do not parse are skipped).
    pub fn cells(&self, id: &str) -> Vec<Cell> {
        std::fs::read_to_string(self.path(id))
            .map(|t| t.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
            .unwrap_or_default()
    }

    /// A fork starts with its parent's history.
    pub fn copy(&self, from: &str, to: &str) {
        let _one = crate::host::lock::Locked::locked(&self.counts);
        let src = self.path(from);
        if src.exists()
            && let Err(e) = std::fs::copy(&src, self.path(to))
        {
            tracing::warn!("could not copy {from}'s history to its fork {to}: {e}");
        }
    }

    /// Removes each sandbox's history as the sandbox goes, however it goes, for as long as
    /// the process runs (the events of sandboxes, on the runtime this is called from).
    pub fn follow(self: &std::sync::Arc<Self>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut events = crate::sandbox::events::subscribe();
        let me = std::sync::Arc::downgrade(self);
        rt.spawn(async move {
            use crate::sandbox::events::{About, What};
            use tokio::sync::broadcast::error::RecvError;
            loop {
                match events.recv().await {
                    Ok(e) => {
                        if let (About::Sandbox(id), What::Closed) = (e.about, e.what) {
                            let Some(h) = me.upgrade() else { return };
                            h.remove(&id);
                        }
                    }
                    // Missed ones are removed at the next start.
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                }
            }
        });
    }

    pub fn remove(&self, id: &str) {
        let mut counts = crate::host::lock::Locked::locked(&self.counts);
        counts.remove(&self.path(id));
        let _ = std::fs::remove_file(self.path(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_kept_in_order_within_their_bounds_and_forks_copy_them() {
        let home = std::env::temp_dir().join(format!("history-{}", uuid::Uuid::new_v4().simple()));
        let h = History::open(&home, Duration::from_secs(3600));
        let ex = Execution {
            stdout: "x".repeat(MAX_TEXT * 2),
            ..Execution::default()
        };
        for i in 0..(MAX_CELLS + 20) {
            h.record("sbx-a", &Cell::new(&format!("{i}"), &ex));
        }
        let cells = h.cells("sbx-a");
        assert!(cells.len() <= MAX_CELLS && cells.len() > 100, "{}", cells.len());
        assert_eq!(cells.last().unwrap().code, format!("{}", MAX_CELLS + 19));
        assert!(cells[0].stdout.len() < MAX_TEXT + 100);
        let size = std::fs::metadata(h.path("sbx-a")).unwrap().len();
        assert!(size <= MAX_BYTES * 2, "{size}");
        h.copy("sbx-a", "sbx-b");
        assert_eq!(h.cells("sbx-b").len(), cells.len());
        h.remove("sbx-a");
        assert!(h.cells("sbx-a").is_empty());
        assert_eq!(
            crate::runtime::history_file("../x"),
            format!(
                "{}.jsonl",
                hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"../x"))
            )
        );
        let _ = std::fs::remove_dir_all(home);
    }
}
