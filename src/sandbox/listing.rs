//! What the file tools say of a folder: its entries and how many it holds.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A folder's entries: the first by name, at most as many as a listing holds, and how many
/// the folder holds in all.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// Sorted by name.
    pub entries: Vec<FileEntry>,
    pub total: u64,
}

impl Listing {
    /// Every entry of a folder that was read whole, sorted.
    pub fn whole(mut entries: Vec<FileEntry>) -> Listing {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Listing {
            total: entries.len() as u64,
            entries,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct FileEntry {
    pub name: String,
    /// Relative to the workspace.
    pub path: String,
    #[serde(rename = "type")]
    pub kind: FileKind,
    pub size: u64,
}

/// What a folder entry is.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    File,
    Directory,
    Symlink,
    /// A pipe, socket or device.
    Other,
}
