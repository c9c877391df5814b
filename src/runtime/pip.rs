//! Running `pip download` by name and version: the one way this project fetches anything, so
//! the user's index, proxy and certificate settings always apply.

use std::path::Path;
use std::process::{Command, Stdio};

#[derive(Debug)]
pub enum PipError {
    /// No Python with pip could be started.
    Missing(std::io::Error),
    /// pip ran and failed; the last lines of what it said.
    Failed { code: String, stderr: String },
}

/// The Python to run pip with: `PYTHON` if set, else `python3`, else `python`.
fn python_candidates() -> Vec<String> {
    match std::env::var("PYTHON") {
        Ok(p) if !p.is_empty() => vec![p],
        _ => vec!["python3".into(), "python".into()],
    }
}

/// `pip download --no-deps --only-binary=:all: [extra...] -d into specs...`.
pub fn download(specs: &[String], extra: &[&str], into: &Path) -> Result<(), PipError> {
    let mut last_err = None;
    for py in python_candidates() {
        let out = Command::new(&py)
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
            ])
            .args(extra)
            .arg("-d")
            .arg(into)
            .args(specs)
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(out) if out.status.success() => return Ok(()),
            Ok(out) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let lines: Vec<&str> = stderr.lines().collect();
                return Err(PipError::Failed {
                    code: out.status.code().map_or("signal".into(), |c| c.to_string()),
                    stderr: lines[lines.len().saturating_sub(6)..].join("\n"),
                });
            }
            Err(e) => last_err = Some(e),
        }
    }
    Err(PipError::Missing(
        last_err.unwrap_or_else(|| std::io::Error::other("no python found")),
    ))
}
