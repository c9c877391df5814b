//! `cargo xtask windows`: the Windows x86_64 server, built on this Linux machine and run under
//! Wine. Debian's `rustc-web` can build the standard library for another target
//! (`-Zbuild-std`, with `rust-web-src`), MinGW links it, and Wine runs the result. rustup's
//! toolchain here has no Windows standard library and cannot fetch one.
//!
//! Wine 8 lacks `bcryptprimitives.dll`, whose `ProcessPrng` Rust's standard library imports:
//! a one-function stand-in (tests/windows/bcryptprimitives.c, calling `RtlGenRandom`) is built
//! beside the `.exe` so that `wine target/cross/windows/x86_64-pc-windows-gnu/release/mcp-code-sandbox.exe`
//! runs as it is. It is for Wine only and never goes into a bundle.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Rust target the Windows server is built for.
pub const TARGET: &str = "x86_64-pc-windows-gnu";

/// Debian's packages the Windows build and Wine need, beside the toolchain.
const PACKAGES: &[&str] = &["gcc-mingw-w64-x86-64", "wine", "wine64"];

fn say(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "windows: {msg}");
}

/// The `.exe` [`build`] makes.
pub fn exe(root: &Path) -> PathBuf {
    crate::cross::target_dir(root, "windows")
        .join(TARGET)
        .join("release/mcp-code-sandbox.exe")
}

/// Builds the server for Windows and the Wine stand-in beside it; the `.exe`.
pub fn build(root: &Path) -> anyhow::Result<PathBuf> {
    crate::cross::ensure_packages(PACKAGES)?;
    say(&format!(
        "building {TARGET} (its standard library too: about 20 minutes the first time)"
    ));
    build_exe(root)?;
    finish(root)
}

/// The `.exe` itself, built on the same standard library a test build makes (`test` beside
/// `std`), so that a build after a test build (or before one) shares it and every dependency.
fn build_exe(root: &Path) -> anyhow::Result<()> {
    let status = cross_cargo(root, "build")
        .args(["--release", "--quiet", "--bin", "mcp-code-sandbox"])
        .status()?;
    anyhow::ensure!(status.success(), "the Windows build failed (output above)");
    Ok(())
}

/// Builds the server for Windows and the library's unit-test program (one standard library
/// and one build of the dependencies for both): the `.exe` and the unit-test program. The
/// integration tests and the binary's (empty) unit tests are not built here: they drive a
/// real server, which the bundle test does under Wine, and GitHub's Windows job compiles
/// and runs them natively; building them here would add minutes to every cold CI.
pub fn build_with_tests(root: &Path) -> anyhow::Result<(PathBuf, Vec<PathBuf>)> {
    crate::cross::ensure_packages(PACKAGES)?;
    say(&format!(
        "building {TARGET} and its unit tests (the standard library too: about 20 minutes the first time)"
    ));
    let out = cross_cargo(root, "test")
        .args([
            "--release",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .args(["--package", "mcp-code-sandbox", "--lib"])
        .stderr(std::process::Stdio::inherit())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "the Windows build of the unit tests failed (output above)"
    );
    let units = unit_test_programs(&String::from_utf8_lossy(&out.stdout));
    anyhow::ensure!(!units.is_empty(), "cargo built no unit-test program for Windows");
    build_exe(root)?;
    Ok((finish(root)?, units))
}

/// The built `.exe`, stripped (MinGW keeps every symbol: stripped, it is a fraction of its
/// size, and so is its share of the bundle; a profile setting would rebuild the standard
/// library), with the Wine stand-in beside it.
fn finish(root: &Path) -> anyhow::Result<PathBuf> {
    let exe = exe(root);
    let stripped = Command::new("x86_64-w64-mingw32-strip")
        .arg("--strip-all")
        .arg(&exe)
        .status()?
        .success();
    anyhow::ensure!(stripped, "x86_64-w64-mingw32-strip failed on {}", exe.display());
    wine_stand_in(root, exe.parent().unwrap_or(root))?;
    Ok(exe)
}

/// Debian's cargo running `subcommand` for Windows, with the standard library built from
/// source: with `test` always, as a test build adds it, so that builds and test builds make
/// the same standard library and share everything built on it (without it, each rebuilds
/// all of it: about 17 minutes).
fn cross_cargo(root: &Path, subcommand: &str) -> Command {
    let mut cmd = crate::nested_cargo::command(crate::cross::CARGO);
    cmd.current_dir(root)
        .args([subcommand, "-Zbuild-std=std,panic_abort,test", "--target", TARGET])
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_TARGET_DIR", crate::cross::target_dir(root, "windows"))
        .env("RUSTC", crate::cross::RUSTC)
        .env("RUSTDOC", "/usr/bin/rustdoc")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO")
        .env(
            "CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER",
            "x86_64-w64-mingw32-gcc",
        );
    cmd
}

/// Runs the unit-test programs under Wine (the integration tests drive a real server, which
/// the bundle test does here). Each program prints its own summary; the first that fails
/// stops the run.
pub fn unit_tests(root: &Path, programs: &[PathBuf]) -> anyhow::Result<()> {
    for exe in programs {
        wine_stand_in(root, exe.parent().unwrap_or(root))?;
        say(&format!("running {} under Wine", exe.display()));
        let status = Command::new("wine")
            .arg(exe)
            .arg("--test-threads=2")
            .env("WINEDEBUG", "-all")
            .status()?;
        anyhow::ensure!(
            status.success(),
            "unit tests failed under Wine: {} (output above)",
            exe.display()
        );
    }
    Ok(())
}

/// The unit-test programs in cargo's JSON messages: test artifacts of the library and the
/// binaries (not of `tests/`), by their executable.
fn unit_test_programs(messages: &str) -> Vec<PathBuf> {
    messages
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["profile"]["test"] == true)
        .filter(|m| {
            m["target"]["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "lib" || k == "bin"))
        })
        .filter_map(|m| m["executable"].as_str().map(PathBuf::from))
        .collect()
}

/// `bcryptprimitives.dll` for Wine, built into `dir`.
fn wine_stand_in(root: &Path, dir: &Path) -> anyhow::Result<()> {
    mingw(
        &root.join("tests/windows/bcryptprimitives.c"),
        &dir.join("bcryptprimitives.dll"),
        &["-shared", "-O2", "-ladvapi32"],
    )
}

/// Builds a test's Windows program from C with MinGW, unless `out` is newer than `source`.
fn mingw(source: &Path, out: &Path, flags: &[&str]) -> anyhow::Result<()> {
    let fresh = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if fresh(out).is_some() && fresh(out) >= fresh(source) {
        return Ok(());
    }
    let ok = Command::new("x86_64-w64-mingw32-gcc")
        .arg(source)
        .arg("-o")
        .arg(out)
        .args(flags)
        .status()?
        .success();
    anyhow::ensure!(ok, "building {} for Wine failed", out.display());
    Ok(())
}

/// `cargo xtask windows --test`: the Windows bundle (built unless current) unpacked and started
/// under Wine on an empty home, driven over stdio by the official TypeScript SDK
/// (tests/ts/wine.test.mjs), beside the Linux bundle timed the same way.
pub fn test(root: &Path, bin: &Path, exe: &Path) -> anyhow::Result<()> {
    let settings = mcp_code_sandbox::config::Settings::defaults_with_home(
        std::env::var_os("CODE_SANDBOX_HOME").map(PathBuf::from),
    );
    let home = settings.home_dir();
    let ts = root.join("tests/ts");
    crate::npm::ensure(&ts, &|m| say(m))?;
    let windows = crate::bundle::For {
        target: mcp_code_sandbox::wasm::direct::Target::named(TARGET)
            .ok_or_else(|| anyhow::anyhow!("{TARGET} is not a known target"))?,
        exe,
    };
    let rt = tokio::runtime::Runtime::new()?;
    let linux_bundle = rt.block_on(crate::bundle::ensure_current(root, bin, &home))?;
    let windows_bundle = rt.block_on(crate::bundle::ensure_current_for(root, bin, &home, &windows))?;
    // Within the budget; its compiled image carries Windows' unwind tables (16 MB more than
    // Linux's before compression), so it has less room to grow than the Linux bundle.
    let mib = crate::bundle::within_budget(&windows_bundle, 0)?;
    say(&format!(
        "{}: {mib:.1} MiB of a {} MiB budget",
        windows_bundle.display(),
        crate::bundle::SIZE_BUDGET >> 20
    ));
    let work = root.join("target/wine");
    std::fs::create_dir_all(&work)?;
    let (wine_dir, linux_dir) = (work.join("bundle-windows"), work.join("bundle-linux"));
    crate::bundle::unpack(&windows_bundle, &wine_dir)?;
    crate::bundle::unpack(&linux_bundle, &linux_dir)?;
    // The stand-in Wine needs, beside the unpacked server only (never in the bundle).
    std::fs::copy(
        exe.with_file_name("bcryptprimitives.dll"),
        wine_dir.join("server/bcryptprimitives.dll"),
    )?;
    // A program holding a file open as antivirus does (tests/windows/holder.c).
    let holder = work.join("holder.exe");
    mingw(
        &root.join("tests/windows/holder.c"),
        &holder,
        &["-municode", "-O2"],
    )?;
    say("testing the Windows bundle under Wine (tests/ts/wine.test.mjs)");
    let status = Command::new("node")
        .current_dir(&ts)
        .args(["--test", "--test-concurrency=1", "wine.test.mjs"])
        .env("WINE_BUNDLE", &wine_dir)
        .env("LINUX_BUNDLE", &linux_dir)
        .env("WINE_WORK", &work)
        .env("WINE_HOLDER", &holder)
        .status()?;
    anyhow::ensure!(
        status.success(),
        "the Windows tests under Wine failed (output above)"
    );
    Ok(())
}
