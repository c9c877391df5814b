//! Debian packages the tests and `cargo xtask` commands use (haproxy, kubectl, buildah,
//! Chromium, the cross toolchain), installed the first time one is needed, as npm trees and
//! venvs are: so `cargo test --release` on a fresh Debian or Ubuntu machine needs nothing
//! prepared by hand. apt-get runs as root, or through `sudo -n` (never a password prompt in
//! a test); where neither works, the error names the command to run.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

/// One install at a time in this process (tests run in threads); other processes wait on
/// apt's own lock.
static APT: Mutex<()> = Mutex::new(());

/// How long apt-get waits for another apt-get's lock.
const LOCK_WAIT_SECONDS: &str = "600";

fn say(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "debian: {msg}");
}

/// Whether Debian's `package` is installed.
pub fn installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

/// `tool` on PATH (or in the sbin folders Debian installs daemons to), if it is there.
pub fn find(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin"].map(PathBuf::from))
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
}

/// How apt-get can run here: as root, through password-less sudo, or not at all.
fn apt_command() -> Option<Command> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    if root {
        return Some(Command::new("apt-get"));
    }
    let sudo = Command::new("sudo")
        .args(["-n", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    sudo.then(|| {
        let mut c = Command::new("sudo");
        c.args(["-n", "apt-get"]);
        c
    })
}

/// Runs `apt-get args`, saying whether it succeeded; `None` when apt-get cannot run here.
pub fn apt(args: &[&str]) -> Option<bool> {
    let mut cmd = apt_command()?;
    let status = cmd
        .args(["-o", &format!("DPkg::Lock::Timeout={LOCK_WAIT_SECONDS}")])
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(std::process::Stdio::null())
        .status();
    Some(status.is_ok_and(|s| s.success()))
}

#[derive(Debug, thiserror::Error)]
pub enum DebianError {
    #[error(
        "{what} needs Debian's {packages}, which is not installed and cannot be installed from here (not root, and sudo asks for a password): run `sudo apt-get install --no-install-recommends {packages}` and try again"
    )]
    NoPermission { what: String, packages: String },
    #[error(
        "{what} needs Debian's {packages}, and `apt-get install {packages}` failed even after `apt-get update`: run it by hand to see why"
    )]
    Failed { what: String, packages: String },
    #[error("{what} needs `{tool}`, which Debian's {package} should have installed, and it is not there")]
    Missing {
        what: String,
        tool: String,
        package: String,
    },
}

/// Installs `packages` where missing (from a fresh package list if the first try fails);
/// `what` names who needs them, for the error.
pub fn ensure_packages(what: &str, packages: &[&str]) -> Result<(), DebianError> {
    let _one = APT.lock().unwrap_or_else(|p| p.into_inner());
    let missing: Vec<&str> = packages.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let list = missing.join(" ");
    say(&format!("installing {list} (for {what}); once"));
    let mut install = vec!["install", "-y", "--no-install-recommends"];
    install.extend(&missing);
    let no_permission = || DebianError::NoPermission {
        what: what.to_string(),
        packages: list.clone(),
    };
    if apt(&install).ok_or_else(no_permission)? {
        return Ok(());
    }
    let retried = apt(&["update"]).unwrap_or(false) && apt(&install).unwrap_or(false);
    if retried {
        Ok(())
    } else {
        Err(DebianError::Failed {
            what: what.to_string(),
            packages: list,
        })
    }
}

/// The path of `tool`, installing Debian's `package` first when it is not there.
pub fn ensure_tool(what: &str, tool: &str, package: &str) -> Result<PathBuf, DebianError> {
    if let Some(found) = find(tool) {
        return Ok(found);
    }
    ensure_packages(what, &[package])?;
    find(tool).ok_or_else(|| DebianError::Missing {
        what: what.to_string(),
        tool: tool.to_string(),
        package: package.to_string(),
    })
}

/// [`ensure_tool`] for a test: the path, or a panic with the error's advice.
pub fn tool_for_test(test: &str, tool: &str, package: &str) -> PathBuf {
    ensure_tool(test, tool, package).unwrap_or_else(|e| panic!("{e}"))
}
