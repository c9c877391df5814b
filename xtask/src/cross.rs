//! Debian's Rust toolchain, which builds the standard library for other targets
//! (`rustc-web` with `rust-web-src`, `-Zbuild-std`): rustup's toolchain here has no other
//! target's standard library and cannot fetch one. `cargo xtask windows` and
//! `cargo xtask macos-check` build with it.

use std::process::Command;

/// The toolchain's packages.
const TOOLCHAIN: &[&str] = &["rustc-web", "cargo-web", "rust-web-src"];

/// The oldest `rustc-web` that builds this crate (its `rust-version`).
const MIN_RUSTC: (u32, u32) = (1, 95);

/// Where Debian's toolchain builds for `platform` (`windows`, `macos`): a target folder of its
/// own. Its builds share nothing with rustup's anyway (another compiler), and cargo locks a
/// target folder while it builds, so a cross build can run beside `cargo test`, and the macOS
/// check beside the Windows tests (as `.ci/run` does), without holding either up.
pub fn target_dir(root: &std::path::Path, platform: &str) -> std::path::PathBuf {
    root.join("target/cross").join(platform)
}

/// Debian's compiler and cargo, not rustup's (which come first on PATH).
pub const RUSTC: &str = "/usr/bin/rustc";
pub const CARGO: &str = "/usr/bin/cargo";

fn say(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "toolchain: {msg}");
}

/// `rustc-web`'s version, when it is there.
fn debian_rustc() -> Option<(u32, u32)> {
    let out = Command::new(RUSTC).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace().nth(1)?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Installs the toolchain and `extra` where missing (a `rustc-web` older than this crate
/// needs is upgraded from a fresh package list, also when the first install brought an old
/// one: a new machine's package list can be older than the archive's).
pub fn ensure_packages(extra: &[&str]) -> anyhow::Result<()> {
    let wanted: Vec<&str> = TOOLCHAIN.iter().chain(extra).copied().collect();
    crate::debian::ensure_packages("a cross build with Debian's toolchain", &wanted)?;
    if debian_rustc().is_none_or(|v| v < MIN_RUSTC) {
        say("upgrading Debian's rustc-web from a fresh package list");
        let mut install = vec!["install", "-y", "--no-install-recommends"];
        install.extend(TOOLCHAIN);
        let upgraded =
            crate::debian::apt(&["update"]) == Some(true) && crate::debian::apt(&install) == Some(true);
        anyhow::ensure!(
            upgraded,
            "upgrading rustc-web failed: run `sudo apt-get update && sudo apt-get install rustc-web cargo-web rust-web-src`"
        );
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
