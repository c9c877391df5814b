//! A Python virtual environment holding a folder's pinned `requirements.txt` (every package
//! with its version and SHA-256), made once, for the tests that start a Python server (an MCP
//! server, a package index); and a folder of pinned wheels for such an index to serve.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// In a made folder: the SHA-256 of the list it was made from.
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

/// The Python 3 command: `python` on Windows (where `python3` may be the Store's stub).
pub const PYTHON: &str = if cfg!(windows) { "python" } else { "python3" };

/// A program a venv installed: `bin/NAME` on Unix, `Scripts\NAME.exe` on Windows.
pub fn tool(venv: &Path, name: &str) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join(format!("{name}.exe"))
    } else {
        venv.join("bin").join(name)
    }
}

/// Makes `dir/venv` hold exactly `dir/requirements.txt` (installed with `--require-hashes`),
/// unless it already does; one process installs, the others wait. Returns the venv's folder.
pub fn ensure(dir: &Path, progress: &dyn Fn(&str)) -> Result<PathBuf, VenvError> {
    let venv = dir.join("venv");
    let req = dir.join("requirements.txt");
    made_once(dir, &venv, &req, &|| {
        progress(&format!(
            "making the pinned Python venv of {} (pip --require-hashes)",
            dir.display()
        ));
        run(
            dir,
            "python3 -m venv",
            Command::new(PYTHON).args(["-m", "venv"]).arg(&venv),
        )?;
        run(
            dir,
            "pip install --require-hashes",
            Command::new(tool(&venv, "pip"))
                .args([
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--require-hashes",
                    "-r",
                ])
                .arg(&req),
        )
    })?;
    Ok(venv)
}

/// Makes `dir/packages` hold exactly the wheels `dir/packages.txt` pins (downloaded with the
/// venv's pip, `--require-hashes`, no dependencies: the list names them all), unless it
/// already does. Returns the folder.
pub fn wheels(dir: &Path, progress: &dyn Fn(&str)) -> Result<PathBuf, VenvError> {
    let venv = ensure(dir, progress)?;
    let packages = dir.join("packages");
    let list = dir.join("packages.txt");
    made_once(dir, &packages, &list, &|| {
        progress(&format!("downloading the pinned wheels of {}", list.display()));
        run(
            dir,
            "pip download --require-hashes",
            Command::new(tool(&venv, "pip"))
                .args([
                    "download",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--require-hashes",
                    "-d",
                ])
                .arg(&packages)
                .arg("-r")
                .arg(&list),
        )
    })?;
    Ok(packages)
}

/// Fills `target` by `make` from `list`, unless it holds a stamp of this very list already;
/// `target` is emptied first.
fn made_once(
    dir: &Path,
    target: &Path,
    list: &Path,
    make: &dyn Fn() -> Result<(), VenvError>,
) -> Result<(), VenvError> {
    let pins = std::fs::read(list).map_err(io(list))?;
    crate::made_once::made_once(
        &dir.join(LOCK),
        &target.join(STAMP),
        &pins,
        &|p, e| io(p)(e),
        || {
            let _ = std::fs::remove_dir_all(target);
            make()
        },
    )
}

fn run(dir: &Path, step: &'static str, cmd: &mut Command) -> Result<(), VenvError> {
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
}

/// pypiserver from `dir`'s venv, serving `wheels` on loopback `port` with SHA-256 links, and
/// never sending a client on to another index for what it lacks.
pub fn pypiserver(dir: &Path, wheels: &Path, port: u16) -> Command {
    let mut c = Command::new(tool(&dir.join("venv"), "pypi-server"));
    c.args([
        "run",
        "-i",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "--disable-fallback",
    ])
    .args(["--hash-algo", "sha256"])
    .arg(wheels);
    c
}
