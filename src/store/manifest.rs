//! What one generation of a kept sandbox is: every file of its folders as the chunks that make
//! it. Chunks are immutable and named by their SHA-256, so a manifest written after its chunks
//! never names a half-written object, and unchanged files cost nothing the next time.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The manifest's format: paths as they are. A reader refuses formats it does not know.
pub const FORMAT: u32 = 1;
/// Paths percent-encoded (`%`, `\\`, `:` and control characters), written only when a name
/// holds `\\` or `:`: a plain manifest stays readable by servers that know only format 1.
pub const FORMAT_ESCAPED: u32 = 2;

/// What [`FORMAT_ESCAPED`] encodes in a path.
const ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b'%').add(b'\\').add(b':');

/// Whether a file's path needs [`FORMAT_ESCAPED`].
pub fn needs_escape(path: &str) -> bool {
    path.contains(['\\', ':']) || path.chars().any(char::is_control)
}

/// `path` as [`FORMAT_ESCAPED`] writes it.
pub fn escape(path: &str) -> String {
    percent_encoding::utf8_percent_encode(path, ESCAPED).to_string()
}

/// One `/`-separated part of an entry's path as its file is named, in a manifest of `format`;
/// `None` when it does not decode to text.
pub fn unescape(part: &str, format: u32) -> Option<String> {
    if format == FORMAT {
        return Some(part.to_string());
    }
    percent_encoding::percent_decode_str(part)
        .decode_utf8()
        .ok()
        .map(|c| c.into_owned())
}

/// Most bytes per chunk. Files are cut where their content says (FastCDC), so a change moves
/// the cuts near it only; chunks are this long at most, and typically [`CHUNK_TYPICAL`].
pub const CHUNK_BYTES: usize = 4 << 20;
pub const CHUNK_TYPICAL: usize = 256 << 10;
/// Fewest bytes per chunk (but a file's last).
pub const CHUNK_MIN: usize = 64 << 10;

// Its JSON Schema is published (docs/schemas/, written by `cargo xtask docs`) so that whoever
// inspects or backs up a store knows what a manifest may hold; the tests check the manifests
// the server writes against it with an independent validator.
/// One generation of a kept sandbox, written after every chunk it names:
/// `<prefix>/principals/<principal's key>/sandboxes/<id>/manifest.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "A kept sandbox's manifest in the team store")]
pub struct Manifest {
    /// The manifest's format: 1, or 2 when its paths are percent-encoded.
    #[schemars(range(min = 1, max = 2))]
    pub format: u32,
    /// The sandbox's id.
    #[schemars(regex(pattern = r"^sbx-[a-z0-9-]{1,96}$"))]
    pub sandbox: String,
    /// One more than the generation it replaced.
    #[schemars(range(min = 1))]
    pub generation: u64,
    /// The replica (or host) that wrote it.
    #[schemars(length(min = 1))]
    pub written_by: String,
    /// When it was written (the writer's clock); retention counts from it.
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub written_at: chrono::DateTime<chrono::Utc>,
    /// The longest a chunk may be.
    #[schemars(range(min = 1))]
    pub chunk_bytes: u64,
    /// Each folder by its name (`workspace`, `scratch`, `history`): its files, by path.
    pub trees: BTreeMap<String, Vec<Entry>>,
}

/// One regular file: its path under the folder (`/`-separated), size and chunks in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Entry {
    /// Relative, `/`-separated, no empty, `.` or `..` part, no `\` or `:` (percent-encoded in
    /// format 2; a reader refuses others).
    #[schemars(regex(pattern = r"^(?!(.*/)?\.\.?(/|$))[^/\\:]+(/[^/\\:]+)*$"))]
    pub path: String,
    pub bytes: u64,
    /// The SHA-256 of each chunk, in order; the chunk's object is named by it.
    #[schemars(inner(regex(pattern = r"^[0-9a-f]{64}$")))]
    pub chunks: Vec<String>,
}

/// The format the manifest of `listed` is written in: its paths percent-encoded when a name
/// holds what a plain manifest cannot say (`\\`, `:`), so every file a sandbox may make comes
/// back under its own name.
pub fn escape_if_needed(listed: &mut BTreeMap<String, Vec<Entry>>) -> u32 {
    let entries = || listed.values().flatten();
    if !entries().any(|e| needs_escape(&e.path)) {
        return FORMAT;
    }
    for e in listed.values_mut().flatten() {
        e.path = escape(&e.path);
    }
    FORMAT_ESCAPED
}

/// The manifest's JSON Schema, as published.
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Manifest)).unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_backslashes_colons_and_percents_come_back_as_they_were() {
        for name in ["a:b.txt", r"c\d", "50%:x", "tab\there", "plain"] {
            let written = escape(name);
            assert!(!written.contains(['\\', ':']), "{written}");
            assert_eq!(unescape(&written, FORMAT_ESCAPED).as_deref(), Some(name));
        }
        assert_eq!(
            unescape("50%3A", FORMAT).as_deref(),
            Some("50%3A"),
            "format 1 is as written"
        );
        assert!(needs_escape("a:b") && needs_escape(r"a\b") && !needs_escape("a%b"));
    }
}
