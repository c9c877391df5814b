//! The tokens file: one principal per line, `NAME SHA256HEX [sandboxes=N] [memory_mb=N]
//! [disk_mb=N] [mcp=...] [hosts=...]`; `NAME - ...` (a dash for the hash) gives quotas to an
//! OAuth principal, which signs in at its IdP and has no token here. Only hashes are on disk; a presented token is hashed and compared with every
//! line in constant time. The file is read again whenever it changes, so a token added or
//! removed with `mcp-code-sandbox token` takes effect at the next request, without a restart:
//! a change is seen by its size, times and inode, and (for a copy that keeps all of those)
//! by its content, compared at most a second later. A file others may write is refused whole:
//! whoever can write it can give themselves a token.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::host::lock::Locked;
use crate::tenancy::{Principal, Quota};

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "'{0}' is not a usable principal name: use 1 to 64 letters, digits, '.', '_' or '-' ('local' is reserved for the machine's own user)"
    )]
    BadName(String),
    #[error(
        "{name} already has a token in {file}; remove it first with `mcp-code-sandbox token remove {name}`"
    )]
    Exists { name: String, file: String },
    #[error("{name} has no token in {file}")]
    Unknown { name: String, file: String },
    #[error("could not {what} the tokens file {file}: {source}")]
    Io {
        what: &'static str,
        file: String,
        #[source]
        source: std::io::Error,
    },
}

/// A sign-in's name is a static token's principal.
#[derive(Debug)]
pub struct StaticName;

struct Entry {
    name: String,
    /// `None`: an OAuth principal's line, which no bearer token matches.
    hash: Option<[u8; 32]>,
    quota: Quota,
    mcp_servers: Arc<[String]>,
    hosts: Option<Arc<[String]>>,
}

impl Entry {
    fn principal(&self) -> Principal {
        Principal {
            name: self.name.as_str().into(),
            quota: self.quota,
            mcp_servers: self.mcp_servers.clone(),
            hosts: self.hosts.clone(),
        }
    }
}

/// The principals of the tokens file, kept in step with the file.
pub struct TokenBook {
    file: PathBuf,
    defaults: Quota,
    loaded: Mutex<Loaded>,
}

struct Loaded {
    /// The file's stamp when it was read; `None`: not there.
    stamp: Option<Stamp>,
    /// SHA-256 of the text read, to notice a change no stamp shows.
    digest: [u8; 32],
    /// When the content was last compared.
    compared: Instant,
    entries: Vec<Entry>,
}

/// How often the content is compared when the stamp says nothing changed.
const COMPARE_EVERY: Duration = Duration::from_secs(1);

/// What a `stat` says of the file (through a link: the file it leads to).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    marks: (u64, i64, i64),
    mode: Option<u32>,
}

fn stamp(file: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(file).ok()?;
    Some(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        marks: crate::host::marks::change_marks(&m),
        mode: crate::host::marks::mode(&m),
    })
}

/// The mode of a tokens file that users other than its owner may write, if it is one.
fn open_to_others(stamp: Option<Stamp>) -> Option<u32> {
    stamp.and_then(|s| s.mode).filter(|m| m & 0o022 != 0)
}

pub(super) fn valid_name(name: &str) -> bool {
    crate::tenancy::names::check(name).is_ok()
        && (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// An OAuth principal's name (a claim's value: an email, a UUID, `auth0|1234`), held to the
/// same rules as a sign-in's (a line is one whitespace-separated word, so no inner space).
fn valid_oauth_name(name: &str) -> bool {
    crate::tenancy::names::check(name).is_ok()
}

/// Parses the file's text; a bad line is skipped with a warning (the others keep working).
fn parse(text: &str, defaults: Quota, file: &Path) -> Vec<Entry> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(name), Some(hex)) = (words.next(), words.next()) else {
            tracing::warn!(
                "{}:{}: expected `NAME SHA256HEX`; line ignored",
                file.display(),
                n + 1
            );
            continue;
        };
        // A dash for the hash: an OAuth principal's line, which no bearer token matches.
        let (usable, hash) = if hex == "-" {
            (valid_oauth_name(name), None)
        } else {
            let mut bytes = [0u8; 32];
            let decoded = hex::decode_to_slice(hex, &mut bytes).is_ok();
            (valid_name(name) && decoded, Some(bytes))
        };
        if !usable {
            tracing::warn!(
                "{}:{}: a name of letters, digits, '.', '_', '-' and 64 hex digits (or `-` for an OAuth principal) are needed; line ignored",
                file.display(),
                n + 1
            );
            continue;
        }
        let mut quota = defaults;
        let mut mcp_servers: Arc<[String]> = Arc::from([]);
        let mut hosts: Option<Arc<[String]>> = None;
        for w in words {
            if let Some(list) = w.strip_prefix("hosts=") {
                hosts = Some(
                    list.split(',')
                        .map(str::trim)
                        .filter(|h| !h.is_empty())
                        .map(str::to_string)
                        .collect(),
                );
                continue;
            }
            if let Some(list) = w.strip_prefix("mcp=") {
                mcp_servers = list
                    .split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .collect();
                continue;
            }
            let parsed = w
                .split_once('=')
                .and_then(|(k, v)| Some((k, v.parse::<u64>().ok()?)));
            match parsed {
                Some(("sandboxes", v)) => quota.sandboxes = v as usize,
                Some(("memory_mb", v)) => quota.memory_mb = v,
                Some(("disk_mb", v)) => quota.disk_mb = v,
                _ => tracing::warn!(
                    "{}:{}: '{w}' is not sandboxes=N, memory_mb=N, disk_mb=N, mcp=NAME,NAME or hosts=PATTERN,PATTERN; ignored",
                    file.display(),
                    n + 1
                ),
            }
        }
        out.push(Entry {
            name: name.to_string(),
            hash,
            quota,
            mcp_servers,
            hosts,
        });
    }
    out
}

impl TokenBook {
    pub fn open(file: PathBuf, defaults: Quota) -> Self {
        let book = TokenBook {
            file,
            defaults,
            loaded: Mutex::new(Loaded {
                stamp: None,
                digest: [0; 32],
                compared: Instant::now(),
                entries: Vec::new(),
            }),
        };
        book.refresh();
        book
    }

    /// How many principals the file names now (OAuth principals' lines included).
    pub fn principals(&self) -> usize {
        self.refresh();
        self.loaded.locked().entries.len()
    }

    /// Whether no line has a token (OAuth principals' lines have none).
    pub fn has_no_token(&self) -> bool {
        self.refresh();
        self.loaded.locked().entries.iter().all(|e| e.hash.is_none())
    }

    /// The principal of the OAuth line (`NAME - ...`) named `name`: its quotas, servers and
    /// hosts. `Err` when a line with a token has that name: a sign-in is never that
    /// principal, whatever name its identity provider let the user choose.
    pub fn named(&self, name: &str) -> Result<Option<Principal>, StaticName> {
        self.refresh();
        let l = self.loaded.locked();
        match l.entries.iter().find(|e| e.name == name) {
            Some(e) if e.hash.is_some() => Err(StaticName),
            found => Ok(found.map(Entry::principal)),
        }
    }

    /// Whether the file is there now: while it is, nothing is served without a token.
    pub fn exists(&self) -> bool {
        self.refresh();
        self.loaded.locked().stamp.is_some()
    }

    /// The file's mode when users other than its owner may write it (then no token works).
    pub fn open_to_others(&self) -> Option<u32> {
        self.refresh();
        open_to_others(self.loaded.locked().stamp)
    }

    /// Re-reads the file if it changed since the last read: one `stat` per request, and the
    /// content compared at most once a second.
    fn refresh(&self) {
        let now = stamp(&self.file);
        let mut l = self.loaded.locked();
        let changed = now != l.stamp;
        if !changed && now.is_some() && l.compared.elapsed() < COMPARE_EVERY {
            return;
        }
        l.compared = Instant::now();
        let text = match std::fs::read_to_string(&self.file) {
            Ok(text) => text,
            Err(e) => {
                // A removed file revokes every token rather than keeping stale ones alive.
                if now.is_some() || l.stamp.is_some() {
                    tracing::warn!(
                        "could not read the tokens file {}: {e}; no token is accepted",
                        self.file.display()
                    );
                }
                (l.stamp, l.digest, l.entries) = (now, [0; 32], Vec::new());
                return;
            }
        };
        let digest: [u8; 32] = Sha256::digest(text.as_bytes()).into();
        if !changed && digest == l.digest {
            return;
        }
        l.entries = match open_to_others(now) {
            Some(mode) => {
                tracing::error!(
                    "the tokens file {} may be written by other users (mode {mode:o}): no token is accepted until you run `chmod 600 {}`",
                    self.file.display(),
                    self.file.display()
                );
                Vec::new()
            }
            None => parse(&text, self.defaults, &self.file),
        };
        (l.stamp, l.digest) = (now, digest);
    }

    /// The principal whose token this is. Every line is compared, in constant time, so the
    /// answer's timing says nothing about how close a guess came.
    pub fn authenticate(&self, token: &str) -> Option<Principal> {
        self.refresh();
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let l = self.loaded.locked();
        let mut found = None;
        for e in &l.entries {
            let Some(hash) = &e.hash else { continue };
            if bool::from(hash.ct_eq(&presented)) {
                found = Some(e.principal());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::super::token_edit::{add, remove};
    use super::*;

    const Q: Quota = Quota {
        sandboxes: 8,
        memory_mb: 4096,
        disk_mb: 4096,
    };

    #[test]
    fn added_tokens_authenticate_and_removed_ones_stop() {
        let dir = std::env::temp_dir().join(format!("tokens-{}", uuid::Uuid::new_v4().simple()));
        let file = dir.join("tokens");
        let alice = add(&file, "alice").unwrap();
        let bob = add(&file, "bob").unwrap();
        assert!(matches!(add(&file, "alice"), Err(TokenError::Exists { .. })));
        assert!(matches!(add(&file, "no spaces"), Err(TokenError::BadName(_))));
        assert!(
            matches!(add(&file, "local"), Err(TokenError::BadName(_))),
            "the local user's name is reserved"
        );
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains(&alice), "the token itself is on disk");
        let book = TokenBook::open(file.clone(), Q);
        assert_eq!(book.authenticate(&alice).unwrap().name.as_ref(), "alice");
        assert_eq!(book.authenticate(&bob).unwrap().name.as_ref(), "bob");
        assert!(book.authenticate("mcs_wrong").is_none());
        assert!(book.authenticate("").is_none());
        remove(&file, "alice").unwrap();
        // The stamp may not change within the file system's time resolution: force it.
        book.loaded.lock().unwrap().stamp = None;
        assert!(book.authenticate(&alice).is_none());
        assert_eq!(book.authenticate(&bob).unwrap().name.as_ref(), "bob");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn quotas_on_a_line_override_the_defaults_and_bad_lines_are_skipped() {
        let text = format!(
            "# team\nalice {} sandboxes=2 memory_mb=512\nbroken-line\nbob nothex\ncarol {}\ndave@example.com - sandboxes=1\nbad\u{7}name -\n",
            "ab".repeat(32),
            "cd".repeat(32)
        );
        let e = parse(&text, Q, Path::new("tokens"));
        assert_eq!(e.len(), 3);
        assert_eq!(e[2].name, "dave@example.com");
        assert!(e[2].hash.is_none(), "a dash line has no token");
        assert_eq!(e[2].quota.sandboxes, 1);
        assert_eq!(e[0].quota.sandboxes, 2);
        assert_eq!(e[0].quota.memory_mb, 512);
        assert_eq!(e[0].quota.disk_mb, 4096);
        assert_eq!(e[1].name, "carol");
        assert_eq!(e[1].quota, Q);
    }
}
