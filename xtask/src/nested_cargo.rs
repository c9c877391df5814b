//! Cargo started from inside a cargo run (`cargo xtask` is `cargo run`): without the
//! variables cargo sets for the running package. Build scripts such as ring's rerun when
//! `CARGO_MANIFEST_DIR` or `CARGO_PKG_NAME` differ from the last build's, so a nested
//! `cargo build` that inherits xtask's would rebuild ring, everything above it and the server
//! (about four minutes) every time the outer and the nested builds take turns, as CI's test
//! run and `cargo xtask windows --test` do.

use std::ffi::OsStr;
use std::process::Command;

/// The variables cargo sets for a package it runs, which no nested build should inherit.
fn set_for_the_running_package(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    EXACT.contains(&name) || name.starts_with("CARGO_PKG_") || name.starts_with("CARGO_BIN_EXE_")
}

/// `program` (a cargo) with a clean package environment.
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_for_the_running_package) {
            cmd.env_remove(&name);
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_running_packages_variables_are_dropped() {
        for kept in ["CARGO_HOME", "CARGO_TARGET_DIR", "CARGO_TERM_COLOR", "PATH"] {
            assert!(!super::set_for_the_running_package(kept), "{kept}");
        }
        for dropped in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "OUT_DIR",
        ] {
            assert!(super::set_for_the_running_package(dropped), "{dropped}");
        }
    }
}
