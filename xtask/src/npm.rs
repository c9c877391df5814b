//! Installing a folder's pinned npm packages (`npm ci`), once, for the tests and the bundle.
//!
//! A fresh clone has no `node_modules`: the first test that needs the TypeScript SDK or the
//! bundle CLI installs it here. Only what the committed `package-lock.json` pins is ever
//! installed: a `package.json` that asks for anything else (a range, a version the lock file
//! does not hold) is refused before npm runs, and `npm ci` itself refuses a lock file out of
//! step with its `package.json`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// Written into `node_modules` after a successful `npm ci`: the SHA-256 of the lock file it
/// installed, so a later call knows the folder is current without asking npm.
const STAMP: &str = ".installed-lock.sha256";

/// Beside the lock file; held while installing, so parallel tests install once.
const LOCK: &str = ".npm-ci.lock";

#[derive(Debug, thiserror::Error)]
pub enum NpmError {
    #[error(
        "{tool} is not on PATH, and {dir} needs it to install its pinned npm packages: install \
         Node.js 20 or newer (it brings npm), then run the command again ({source})"
    )]
    ToolMissing {
        tool: &'static str,
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} could not be read: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error(
        "{dir}: package.json and package-lock.json disagree ({detail}). Only what the committed \
         lock file pins is installed; to change a pin on purpose run `npm install --prefix {dir} \
         NAME@VERSION` and commit both files"
    )]
    LockMismatch { dir: PathBuf, detail: String },
    #[error("`npm ci` in {dir} failed ({status}); its output is above")]
    InstallFailed { dir: PathBuf, status: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> NpmError + '_ {
    move |source| NpmError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn read_json(path: &Path) -> Result<(Vec<u8>, Value), NpmError> {
    let bytes = std::fs::read(path).map_err(|e| NpmError::Unreadable {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let value = serde_json::from_slice(&bytes).map_err(|e| NpmError::Unreadable {
        path: path.to_path_buf(),
        reason: format!("not JSON: {e}"),
    })?;
    Ok((bytes, value))
}

/// Every dependency `package.json` names must be an exact version, and the lock file must
/// hold that same version as its direct dependency. `npm ci` checks much of this too, but
/// only after npm is found and started; this says which package is wrong, and why.
fn check_pins(dir: &Path, package: &Value, lock: &Value) -> Result<(), NpmError> {
    let mismatch = |detail: String| NpmError::LockMismatch {
        dir: dir.to_path_buf(),
        detail,
    };
    let root = &lock["packages"][""];
    for section in ["dependencies", "devDependencies"] {
        let Some(wanted) = package[section].as_object() else {
            continue;
        };
        for (name, spec) in wanted {
            let spec = spec.as_str().unwrap_or_default();
            let exact = !spec.is_empty()
                && spec
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'));
            if !exact {
                return Err(mismatch(format!(
                    "{name} is asked for as \"{spec}\", not one exact version"
                )));
            }
            let locked_spec = root[section][name].as_str();
            let locked = lock["packages"][format!("node_modules/{name}")]["version"].as_str();
            if locked_spec != Some(spec) || locked != Some(spec) {
                return Err(mismatch(format!(
                    "package.json pins {name} {spec}, the lock file holds {}",
                    locked.unwrap_or("nothing")
                )));
            }
        }
    }
    // A lock file that pins a direct dependency package.json no longer names.
    for section in ["dependencies", "devDependencies"] {
        if let Some(locked) = root[section].as_object() {
            for name in locked.keys() {
                if package[section][name].is_null() {
                    return Err(mismatch(format!(
                        "the lock file pins {name}, which package.json does not name"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Makes `dir/node_modules` hold exactly what `dir/package-lock.json` pins, running `npm ci`
/// only when it does not already (the lock file's hash is stamped after each install).
/// Safe to call from many threads and processes at once: one installs, the others wait.
pub fn ensure(dir: &Path, progress: &dyn Fn(&str)) -> Result<(), NpmError> {
    let npm = if cfg!(windows) { "npm.cmd" } else { "npm" };
    ensure_with(dir, Path::new(npm), progress)
}

/// [`ensure`] with the npm program to run (a test names one that is not there).
pub fn ensure_with(dir: &Path, npm: &Path, progress: &dyn Fn(&str)) -> Result<(), NpmError> {
    let (_, package) = read_json(&dir.join("package.json"))?;
    let (lock_bytes, lock) = read_json(&dir.join("package-lock.json"))?;
    check_pins(dir, &package, &lock)?;
    let stamp = dir.join("node_modules").join(STAMP);
    crate::made_once::made_once(&dir.join(LOCK), &stamp, &lock_bytes, &|p, e| io(p)(e), || {
        let probe = Command::new(npm)
            .arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Err(source) = probe {
            return Err(NpmError::ToolMissing {
                tool: "npm",
                dir: dir.to_path_buf(),
                source,
            });
        }
        progress(&format!(
            "installing the pinned npm packages of {} (npm ci)",
            dir.display()
        ));
        let started = std::time::Instant::now();
        // npm's own output goes to stderr: stdout may belong to a protocol or a test's capture.
        let status = Command::new(npm)
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(std::io::stderr())
            .status()
            .map_err(io(dir))?;
        if !status.success() {
            return Err(NpmError::InstallFailed {
                dir: dir.to_path_buf(),
                status: status.to_string(),
            });
        }
        progress(&format!(
            "installed the npm packages of {} in {:.1} s",
            dir.display(),
            started.elapsed().as_secs_f64()
        ));
        Ok(())
    })
}

/// Whether `node` can be started: the tests run their TypeScript clients with it.
pub fn require_node() -> Result<(), NpmError> {
    Command::new("node")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|_| ())
        .map_err(|source| NpmError::ToolMissing {
            tool: "node",
            dir: PathBuf::from("the tests"),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lock_for(name: &str, version: &str) -> Value {
        json!({
            "lockfileVersion": 3,
            "packages": {
                "": {"dependencies": {name: version}},
                format!("node_modules/{name}"): {"version": version}
            }
        })
    }

    #[test]
    fn an_exact_pin_held_by_the_lock_passes() {
        let p = json!({"dependencies": {"a": "1.2.3"}});
        check_pins(Path::new("d"), &p, &lock_for("a", "1.2.3")).unwrap();
    }

    #[test]
    fn ranges_other_versions_and_stale_locks_are_refused() {
        let d = Path::new("d");
        for (package, lock, says) in [
            (
                json!({"dependencies": {"a": "^1.2.3"}}),
                lock_for("a", "1.2.3"),
                "not one exact",
            ),
            (
                json!({"dependencies": {"a": "1.2.4"}}),
                lock_for("a", "1.2.3"),
                "holds 1.2.3",
            ),
            (
                json!({"dependencies": {"b": "1.0.0"}}),
                lock_for("a", "1.0.0"),
                "holds nothing",
            ),
            (
                json!({"dependencies": {}}),
                lock_for("a", "1.0.0"),
                "does not name",
            ),
        ] {
            let e = check_pins(d, &package, &lock).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
            assert!(e.contains("commit both"), "{e}");
        }
    }
}
