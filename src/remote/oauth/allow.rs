//! `CODE_SANDBOX_OAUTH_ALLOW`: who may sign in, when not everyone the issuer vouches for.
//! A file (read again when it changes, like the tokens file) or a comma-separated list, of
//! principal names and `@domain` entries (any name ending in `@domain`, as emails do).
//! Names are compared exactly, as principals are (`ALICE` is another principal than `alice`,
//! with none of her quota line); a domain only ignores ASCII case, as DNS does, so no Unicode
//! folding (the KELVIN SIGN K lower-cases to k) lets another domain through.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use crate::host::lock::Locked as _;

enum Source {
    List(Vec<String>),
    File {
        path: PathBuf,
        seen: Mutex<(Option<SystemTime>, Vec<String>)>,
    },
}

pub struct Allow(Option<Source>);

fn entries(text: &str) -> Vec<String> {
    text.split(['\n', ','])
        .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

fn admits(entries: &[String], name: &str) -> bool {
    entries.iter().any(|e| {
        if e.starts_with('@') {
            let cut = name.len().saturating_sub(e.len());
            cut > 0 && name.is_char_boundary(cut) && name[cut..].eq_ignore_ascii_case(e)
        } else {
            e == name
        }
    })
}

impl Allow {
    /// A value naming an existing file is that file; anything else is a list.
    pub fn new(setting: Option<&str>) -> Self {
        let Some(value) = setting.map(str::trim).filter(|v| !v.is_empty()) else {
            return Allow(None);
        };
        let path = PathBuf::from(value);
        if path.is_file() {
            return Allow(Some(Source::File {
                path,
                seen: Mutex::new((None, Vec::new())),
            }));
        }
        Allow(Some(Source::List(entries(value))))
    }

    /// Whether `name` may sign in.
    pub fn admits(&self, name: &str) -> bool {
        match &self.0 {
            None => true,
            Some(Source::List(list)) => admits(list, name),
            Some(Source::File { path, seen }) => {
                let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
                let mut s = seen.locked();
                if s.0 != modified || modified.is_none() {
                    // An unreadable file admits no one rather than everyone.
                    s.1 = std::fs::read_to_string(path)
                        .map(|t| entries(&t))
                        .unwrap_or_default();
                    s.0 = modified;
                }
                admits(&s.1, name)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_exact_and_domains_ignore_only_ascii_case() {
        let a = Allow::new(Some("alice, @Example.com, @kelvin.com"));
        assert!(a.admits("alice"));
        assert!(!a.admits("Alice"), "another principal than alice");
        assert!(a.admits("bob@example.com"));
        assert!(a.admits("bob@EXAMPLE.COM"));
        assert!(!a.admits("bob@\u{212a}elvin.com"), "KELVIN SIGN is not k");
        assert!(!a.admits("bob@example.com.evil"));
        assert!(!a.admits("@example.com"));
        assert!(!a.admits("mallory"));
        assert!(Allow::new(None).admits("anyone"));
    }
}
