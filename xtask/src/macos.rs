//! `cargo xtask macos-check`: clippy, with every target and `-D warnings`, for both Apple
//! targets, on this Linux machine. Debian's `rustc-web` builds the standard library for them
//! (`-Zbuild-std`) and Debian's clippy lints; zig (PyPI's `ziglang`, pinned and checked) with
//! `cargo-zigbuild` carries the C headers the crates' build scripts compile against. Nothing is
//! linked (that needs Apple's SDK): the macOS binaries come from the release workflow, on macOS.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The Apple targets checked.
pub const TARGETS: &[&str] = &["aarch64-apple-darwin", "x86_64-apple-darwin"];

/// zig, from PyPI by name and version, and the SHA-256 of its manylinux x86_64 wheel.
const ZIG: &str = "ziglang==0.13.0";
const ZIG_WHEEL_SHA256: &str = "3ce0c9f16547e5d61b32e0d226926e9a2552ef4b91fccf7ab5ea1a623a77824b";
const ZIGBUILD_VERSION: &str = "0.22.2";

fn say(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "macos-check: {msg}");
}

/// zig in a venv of its own under `target/`, its wheel checked against the pin first.
fn zig(root: &Path) -> anyhow::Result<PathBuf> {
    let venv = root.join("target/zig-venv");
    // The wheel carries zig's own binary in its package (it has no script of its own).
    let installed = || -> Option<PathBuf> {
        std::fs::read_dir(venv.join("lib"))
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path().join("site-packages/ziglang/zig"))
            .find(|p| p.is_file())
    };
    if let Some(zig) = installed() {
        return Ok(zig);
    }
    let wheels = root.join("target/zig-wheel");
    let _ = std::fs::remove_dir_all(&wheels);
    let ok = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            ZIG,
            "-d",
        ])
        .arg(&wheels)
        .status()?
        .success();
    anyhow::ensure!(ok, "pip could not download {ZIG}");
    let wheel = std::fs::read_dir(&wheels)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| anyhow::anyhow!("pip downloaded no wheel of {ZIG}"))?;
    let digest = hex::encode(Sha256::digest(std::fs::read(&wheel)?));
    anyhow::ensure!(
        digest == ZIG_WHEEL_SHA256,
        "{} has SHA-256 {digest}, not the pinned {ZIG_WHEEL_SHA256}",
        wheel.display()
    );
    let ok = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()?
        .success()
        && Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--no-index", "--no-deps"])
            .arg(&wheel)
            .status()?
            .success();
    anyhow::ensure!(ok, "installing {} failed", wheel.display());
    installed().ok_or_else(|| anyhow::anyhow!("{ZIG} installed no ziglang/zig"))
}

/// cargo-zigbuild, installed with rustup's cargo (it runs on this machine) unless present.
fn zigbuild() -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or_else(|| anyhow::anyhow!("neither CARGO_HOME nor HOME is set"))?;
    let bin = home.join("bin/cargo-zigbuild");
    let current = Command::new(&bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(ZIGBUILD_VERSION));
    if !current {
        say(&format!("installing cargo-zigbuild {ZIGBUILD_VERSION}"));
        let ok = crate::nested_cargo::command(env!("CARGO"))
            .args([
                "install",
                "--locked",
                "--quiet",
                "cargo-zigbuild",
                "--version",
                ZIGBUILD_VERSION,
            ])
            .status()?
            .success();
        anyhow::ensure!(ok, "cargo install cargo-zigbuild failed");
    }
    Ok(bin)
}

/// Runs clippy for each Apple target; fails on any warning.
pub fn check(root: &Path) -> anyhow::Result<()> {
    crate::cross::ensure_packages(&["rust-web-clippy"])?;
    let zig = zig(root)?;
    let zigbuild = zigbuild()?;
    // Debian's cargo, rustc and clippy first on PATH: rustup's have no Apple standard library.
    let path = format!("/usr/bin:{}", std::env::var("PATH").unwrap_or_default());
    say(&format!(
        "clippy for {} (their standard library too: minutes the first time)",
        TARGETS.join(" and ")
    ));
    // One run for both targets: build scripts and procedural macros are built once.
    let targets = TARGETS.iter().flat_map(|t| ["--target", t]);
    // zig's probes leave an empty object file in the working folder: run from target/.
    let ok = crate::nested_cargo::command(&zigbuild)
        .current_dir(root.join("target"))
        .arg("clippy")
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .args([
            "--release",
            "--workspace",
            "--all-targets",
            "-Zbuild-std=std,panic_abort",
        ])
        .args(targets)
        .args(["--", "-D", "warnings"])
        .env("PATH", &path)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_TARGET_DIR", crate::cross::target_dir(root, "macos"))
        .env("CARGO", crate::cross::CARGO)
        .env("RUSTC", crate::cross::RUSTC)
        .env_remove("RUSTUP_TOOLCHAIN")
        .env("CARGO_ZIGBUILD_ZIG_PATH", &zig)
        .env("CARGO_PROFILE_RELEASE_STRIP", "false")
        .status()?
        .success();
    anyhow::ensure!(ok, "clippy for the Apple targets failed (output above)");
    say("clean for both Apple targets");
    Ok(())
}
