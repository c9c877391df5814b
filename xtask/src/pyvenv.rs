//! A Python virtual environment holding a folder's pinned `requirements.txt` (every package
//! with its version and SHA-256), made once, for the tests that start a Python MCP server.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

/// In the venv after a successful install: the SHA-256 of the requirements it holds.
const STAMP: &str = ".installed-requirements.sha256";
const LOCK: &str = ".venv.lock";

#[derive(Debug, thiserror::Error)]
pub enum VenvError {
    #[error(
        "python3 is not on PATH, and {dir} needs it to make its venv: install Python 3.11 with its venv module, then run the command again ({source})"
    )]
    PythonMissing { dir: PathBuf, source: std::io::Error },
    #[error("`{step}` in {dir} failed ({status}); its output is above")]
    Failed {
        dir: PathBuf,
        step: &'static str,
        status: String,
    },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> VenvError + '_ {
    move |source| VenvError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Makes `dir/venv` hold exactly `dir/requirements.txt` (installed with `--require-hashes`),
/// unless it already does; one process installs, the others wait. Returns the venv's folder.
pub fn ensure(dir: &Path, progress: &dyn Fn(&str)) -> Result<PathBuf, VenvError> {
    let req = dir.join("requirements.txt");
    let want = hex::encode(Sha256::digest(std::fs::read(&req).map_err(io(&req))?));
    let venv = dir.join("venv");
    let stamp = venv.join(STAMP);
    let current = || std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == want);
    if current() {
        return Ok(venv);
    }
    let lock_path = dir.join(LOCK);
    let guard = File::create(&lock_path).map_err(io(&lock_path))?;
    guard.lock().map_err(io(&lock_path))?;
    if current() {
        return Ok(venv);
    }
    progress(&format!(
        "making the pinned Python venv of {} (pip --require-hashes)",
        dir.display()
    ));
    let _ = std::fs::remove_dir_all(&venv);
    let run = |step: &'static str, cmd: &mut Command| -> Result<(), VenvError> {
        let status = cmd
            .stdin(Stdio::null())
            .stdout(std::io::stderr())
            .status()
            .map_err(|source| VenvError::PythonMissing {
                dir: dir.to_path_buf(),
                source,
            })?;
        if status.success() {
            Ok(())
        } else {
            Err(VenvError::Failed {
                dir: dir.to_path_buf(),
                step,
                status: status.to_string(),
            })
        }
    };
    run(
        "python3 -m venv",
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
    )?;
    run(
        "pip install --require-hashes",
        Command::new(venv.join("bin").join("pip"))
            .args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--require-hashes",
                "-r",
            ])
            .arg(&req),
    )?;
    std::fs::write(&stamp, &want).map_err(io(&stamp))?;
    Ok(venv)
}
