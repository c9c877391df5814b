//! `cargo xtask advisories`: Cargo.lock against a copy of the RustSec database's `crates/`
//! folder, offline (these machines cannot fetch it over git, so cargo deny's own check
//! cannot run here). A locked version is affected by an advisory unless it matches one of
//! its `patched` or `unaffected` ranges; a withdrawn advisory affects nothing. A match fails
//! the check unless deny.toml's `[advisories] ignore` lists its id with a reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use semver::{Version, VersionReq};

/// One advisory that applies to a locked package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub id: String,
    pub package: String,
    pub version: String,
    pub title: String,
    /// The reason deny.toml gives for accepting it, if it does.
    pub accepted: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AdvisoryError {
    #[error(
        "no advisory database at {0}: point ADVISORY_DB (or --db) at a copy of RustSec's advisory-db with its crates/ folder"
    )]
    NoDatabase(PathBuf),
    #[error("could not read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid TOML: {source}")]
    Toml {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error(
        "deny.toml's [advisories] ignore entry {0} needs a reason: write {{ id = \"{0}\", reason = \"why it does not apply\" }}"
    )]
    NoReason(String),
    /// semver's error as text: its `std` feature (what makes it an `Error`) would change the
    /// features the server's own dependencies are built with, and so rebuild wasmtime
    /// between `cargo test` and `cargo build --bin` (see xtask/Cargo.toml).
    #[error("{path}: '{range}' is not a version range: {reason}")]
    Range {
        path: PathBuf,
        range: String,
        reason: String,
    },
}

fn read(path: &Path) -> Result<String, AdvisoryError> {
    std::fs::read_to_string(path).map_err(|source| AdvisoryError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn parse_toml(path: &Path, text: &str) -> Result<toml::Value, AdvisoryError> {
    toml::from_str(text).map_err(|source| AdvisoryError::Toml {
        path: path.to_path_buf(),
        source,
    })
}

/// Locked packages: name → versions.
pub fn locked(lock: &Path) -> Result<BTreeMap<String, Vec<Version>>, AdvisoryError> {
    let value = parse_toml(lock, &read(lock)?)?;
    let mut out: BTreeMap<String, Vec<Version>> = BTreeMap::new();
    for p in value
        .get("package")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
    {
        let (Some(name), Some(version)) = (
            p.get("name").and_then(|v| v.as_str()),
            p.get("version")
                .and_then(|v| v.as_str())
                .and_then(|v| Version::parse(v).ok()),
        ) else {
            continue;
        };
        // Path and git packages are ours, not the registry's.
        if p.get("source")
            .and_then(|s| s.as_str())
            .is_some_and(|s| s.starts_with("registry+"))
        {
            out.entry(name.to_string()).or_default().push(version);
        }
    }
    Ok(out)
}

/// deny.toml's accepted advisories: id → reason.
fn accepted(deny: &Path) -> Result<BTreeMap<String, String>, AdvisoryError> {
    let value = parse_toml(deny, &read(deny)?)?;
    let mut out = BTreeMap::new();
    let entries = value
        .get("advisories")
        .and_then(|a| a.get("ignore"))
        .and_then(|i| i.as_array())
        .cloned()
        .unwrap_or_default();
    for e in entries {
        let id = e
            .get("id")
            .and_then(|v| v.as_str())
            .or(e.as_str())
            .unwrap_or_default()
            .to_string();
        match e
            .get("reason")
            .and_then(|r| r.as_str())
            .filter(|r| !r.trim().is_empty())
        {
            Some(reason) => out.insert(id, reason.to_string()),
            None => return Err(AdvisoryError::NoReason(id)),
        };
    }
    Ok(out)
}

/// The TOML block at the head of an advisory file and its title (the first `# ` line).
fn split_advisory(text: &str) -> (&str, String) {
    let body = text.trim_start().strip_prefix("```toml").unwrap_or(text);
    let (toml, rest) = body.split_once("```").unwrap_or((body, ""));
    let title = rest
        .lines()
        .find_map(|l| l.strip_prefix("# "))
        .unwrap_or("")
        .trim()
        .to_string();
    (toml, title)
}

fn ranges(path: &Path, versions: Option<&toml::Value>, key: &str) -> Result<Vec<VersionReq>, AdvisoryError> {
    let list = versions
        .and_then(|v| v.get(key))
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    list.iter()
        .filter_map(|r| r.as_str())
        .map(|r| {
            VersionReq::parse(r).map_err(|e| AdvisoryError::Range {
                path: path.to_path_buf(),
                range: r.to_string(),
                reason: e.to_string(),
            })
        })
        .collect()
}

/// Every advisory in `db` (the folder holding `crates/`) that applies to `lock`.
pub fn check(db: &Path, lock: &Path, deny: &Path) -> Result<Vec<Finding>, AdvisoryError> {
    let crates = db.join("crates");
    if !crates.is_dir() {
        return Err(AdvisoryError::NoDatabase(db.to_path_buf()));
    }
    let packages = locked(lock)?;
    let accepted = accepted(deny)?;
    let mut findings = Vec::new();
    for (name, versions) in &packages {
        let Ok(dir) = std::fs::read_dir(crates.join(name)) else {
            continue;
        };
        let mut files: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
        files.sort();
        for path in files
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
        {
            let text = read(&path)?;
            let (head, title) = split_advisory(&text);
            let value = parse_toml(&path, head)?;
            let advisory = value.get("advisory");
            if advisory.and_then(|a| a.get("withdrawn")).is_some() {
                continue;
            }
            let id = advisory
                .and_then(|a| a.get("id"))
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string();
            let safe: Vec<VersionReq> = ranges(&path, value.get("versions"), "patched")?
                .into_iter()
                .chain(ranges(&path, value.get("versions"), "unaffected")?)
                .collect();
            for v in versions {
                if !safe.iter().any(|r| r.matches(v)) {
                    findings.push(Finding {
                        id: id.clone(),
                        package: name.clone(),
                        version: v.to_string(),
                        title: title.clone(),
                        accepted: accepted.get(&id).cloned(),
                    });
                }
            }
        }
    }
    Ok(findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_locked_version_outside_every_safe_range_is_found_unless_accepted_with_a_reason() {
        let dir = std::env::temp_dir().join(format!("advisories-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write(
            &dir.join("db/crates/wasmtime/RUSTSEC-2099-0001.md"),
            "```toml\n[advisory]\nid = \"RUSTSEC-2099-0001\"\npackage = \"wasmtime\"\n\n[versions]\npatched = [\">= 46.0.2, < 47.0.0\", \">= 47.0.3\"]\nunaffected = [\"< 46.0.0\"]\n```\n\n# A made-up flaw\n",
        );
        write(
            &dir.join("db/crates/wasmtime/RUSTSEC-2099-0002.md"),
            "```toml\n[advisory]\nid = \"RUSTSEC-2099-0002\"\npackage = \"wasmtime\"\nwithdrawn = \"2099-01-02\"\n\n[versions]\npatched = []\n```\n\n# Withdrawn\n",
        );
        let lock = |v: &str| {
            format!(
                "version = 4\n\n[[package]]\nname = \"wasmtime\"\nversion = \"{v}\"\nsource = \"registry+https://example.invalid/index\"\n"
            )
        };
        let deny = dir.join("deny.toml");
        write(&deny, "[bans]\n");
        for (v, hit) in [
            ("46.0.1", true),
            ("46.0.2", false),
            ("47.0.2", true),
            ("47.0.3", false),
            ("45.9.9", false),
        ] {
            write(&dir.join("Cargo.lock"), &lock(v));
            let found = check(&dir.join("db"), &dir.join("Cargo.lock"), &deny).unwrap();
            assert_eq!(!found.is_empty(), hit, "{v}: {found:?}");
        }
        write(&dir.join("Cargo.lock"), &lock("46.0.1"));
        write(
            &deny,
            "[advisories]\nignore = [{ id = \"RUSTSEC-2099-0001\", reason = \"not reachable: we never use bulk memory\" }]\n",
        );
        let found = check(&dir.join("db"), &dir.join("Cargo.lock"), &deny).unwrap();
        assert_eq!(found[0].title, "A made-up flaw");
        assert!(found[0].accepted.is_some());
        write(&deny, "[advisories]\nignore = [\"RUSTSEC-2099-0001\"]\n");
        assert!(matches!(
            check(&dir.join("db"), &dir.join("Cargo.lock"), &deny),
            Err(AdvisoryError::NoReason(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
