//! Debian's Rust toolchain, which builds the standard library for other targets
//! (`rustc-web` with `rust-web-src`, `-Zbuild-std`): rustup's toolchain here has no other
//! target's standard library and cannot fetch one. `cargo xtask windows` and
//! `cargo xtask macos-check` build with it.

use std::process::Command;

/// The toolchain's packages.
const TOOLCHAIN: &[&str] = &["rustc-web", "cargo-web", "rust-web-src"];

/// The oldest `rustc-web` that builds this crate (its `rust-version`).
const MIN_RUSTC: (u32, u32) = (1, 95);

/// Debian's compiler and cargo, not rustup's (which come first on PATH).
pub const RUSTC: &str = "/usr/bin/rustc";
pub const CARGO: &str = "/usr/bin/cargo";

fn say(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "toolchain: {msg}");
}

fn installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

/// `rustc-web`'s version, when it is there.
fn debian_rustc() -> Option<(u32, u32)> {
    let out = Command::new(RUSTC).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace().nth(1)?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

fn apt(args: &[&str]) -> anyhow::Result<bool> {
    let root = Command::new("id").arg("-u").output()?.stdout == b"0\n";
    let mut cmd = if root {
        Command::new("apt-get")
    } else {
        let mut c = Command::new("sudo");
        c.arg("apt-get");
        c
    };
    Ok(cmd
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()?
        .success())
}

/// Installs the toolchain and `extra` where missing (a `rustc-web` older than this crate
/// needs is upgraded from a fresh package list).
pub fn ensure_packages(extra: &[&str]) -> anyhow::Result<()> {
    let wanted: Vec<&str> = TOOLCHAIN.iter().chain(extra).copied().collect();
    let missing = wanted.iter().any(|p| !installed(p));
    let old = debian_rustc().is_none_or(|v| v < MIN_RUSTC);
    if !missing && !old {
        return Ok(());
    }
    say(&format!("installing Debian's {}", wanted.join(", ")));
    let mut install = vec!["install", "-y", "--no-install-recommends"];
    install.extend(&wanted);
    if old || !apt(&install)? {
        anyhow::ensure!(apt(&["update"])?, "apt-get update failed");
        anyhow::ensure!(apt(&install)?, "apt-get install {} failed", wanted.join(" "));
    }
    let v =
        debian_rustc().ok_or_else(|| anyhow::anyhow!("{RUSTC} does not run after installing rustc-web"))?;
    anyhow::ensure!(
        v >= MIN_RUSTC,
        "Debian's rustc-web is {}.{}, older than the {}.{} this crate needs",
        v.0,
        v.1,
        MIN_RUSTC.0,
        MIN_RUSTC.1
    );
    Ok(())
}
