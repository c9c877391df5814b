//! What one generation of a kept sandbox is: every file of its folders as the chunks that make
//! it. Chunks are immutable and named by their SHA-256, so a manifest written after its chunks
//! never names a half-written object, and unchanged files cost nothing the next time.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The manifest's format; a reader refuses others.
pub const FORMAT: u32 = 1;

/// Most bytes per chunk. Files are cut where their content says (FastCDC), so a change moves
/// the cuts near it only; chunks are this long at most, and typically [`CHUNK_TYPICAL`].
pub const CHUNK_BYTES: usize = 4 << 20;
pub const CHUNK_TYPICAL: usize = 256 << 10;
/// Fewest bytes per chunk (but a file's last).
pub const CHUNK_MIN: usize = 64 << 10;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub sandbox: String,
    /// One more than the generation it replaced.
    pub generation: u64,
    /// The replica (or host) that wrote it.
    pub written_by: String,
    pub written_at: chrono::DateTime<chrono::Utc>,
    /// The longest a chunk may be.
    pub chunk_bytes: u64,
    /// Each folder by its name (`workspace`, `scratch`): its files, by path.
    pub trees: BTreeMap<String, Vec<Entry>>,
}

/// One regular file: its path under the folder (`/`-separated), size and chunks in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub path: String,
    pub bytes: u64,
    pub chunks: Vec<String>,
}

impl Manifest {
    /// Every chunk it names, once.
    pub fn chunks(&self) -> std::collections::BTreeSet<&str> {
        self.trees
            .values()
            .flatten()
            .flat_map(|e| e.chunks.iter().map(String::as_str))
            .collect()
    }
}
