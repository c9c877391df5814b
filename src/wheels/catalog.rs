//! The pinned wheel list (`runtime/wheels.toml`) and fetching it with pip by name and version.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Deserialize;

use super::WheelError;
use crate::runtime::Layout;

#[derive(Debug, Deserialize)]
pub struct Pinned {
    pub name: String,
    pub version: String,
    pub file: String,
    pub sha256: String,
}

#[derive(Debug, Deserialize)]
struct Catalog {
    wheel: Vec<Pinned>,
}

const WHEELS_TOML: &str = include_str!("../../runtime/wheels.toml");

pub fn pinned() -> &'static [Pinned] {
    static C: OnceLock<Catalog> = OnceLock::new();
    // Part of the source tree, checked by a unit test: a parse failure is a build defect.
    &C.get_or_init(|| toml::from_str(WHEELS_TOML).expect("runtime/wheels.toml is valid"))
        .wheel
}

fn verified(path: &Path, p: &Pinned) -> bool {
    crate::runtime::file_digest(path)
        .map(|(sha, _)| sha == p.sha256)
        .unwrap_or(false)
}

/// Where a bundle keeps the wheel cache, relative to the binary.
pub const BUNDLED_WHEELS_DIR: &str = "wheels";

/// Copies the pinned wheels an MCP Bundle ships beside the binary into `dir`, each verified
/// against its pin (a wheel that does not match is skipped, and pip may fetch it later).
/// Returns those still missing.
fn copy_bundled<'a>(dir: &Path, missing: Vec<&'a Pinned>) -> Vec<&'a Pinned> {
    match crate::runtime::beside_binary(BUNDLED_WHEELS_DIR) {
        Some(bundled) => copy_verified(&bundled, dir, missing),
        None => missing,
    }
}

fn copy_verified<'a>(bundled: &Path, dir: &Path, missing: Vec<&'a Pinned>) -> Vec<&'a Pinned> {
    missing
        .into_iter()
        .filter(|p| {
            let src = bundled.join(&p.file);
            if !src.is_file() {
                return true;
            }
            // The copy is what gets verified: a damaged source fails there too.
            let tmp = dir.join(format!(".{}.tmp", p.file));
            if std::fs::copy(&src, &tmp).is_ok()
                && verified(&tmp, p)
                && std::fs::rename(&tmp, dir.join(&p.file)).is_ok()
            {
                return false;
            }
            let _ = std::fs::remove_file(&tmp);
            true
        })
        .collect()
}

/// Fills `wheels/` with the pinned wheels that are missing: from a bundle beside the binary
/// when there is one, else with pip. Each is verified; one whose digest differs is deleted,
/// never kept. Returns how many were fetched with pip.
pub fn fetch(layout: &Layout, progress: &dyn Fn(String)) -> Result<usize, WheelError> {
    let dir = layout.wheels_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| WheelError::Fetch(format!("creating {}: {e}", dir.display())))?;
    let missing = copy_bundled(
        &dir,
        pinned()
            .iter()
            .filter(|p| !verified(&dir.join(&p.file), p))
            .collect(),
    );
    if missing.is_empty() {
        return Ok(0);
    }
    progress(format!("downloading {} pinned wheels with pip", missing.len()));
    let staging: PathBuf = dir.join(format!(".pip-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&staging).map_err(|e| WheelError::Fetch(e.to_string()))?;
    let specs: Vec<String> = missing
        .iter()
        .map(|p| format!("{}=={}", p.name, p.version))
        .collect();
    // The target is CPython 3.15 on WASI: ask for pure wheels for it, whatever the host runs.
    let target = [
        "--python-version",
        "3.15",
        "--implementation",
        "cp",
        "--abi",
        "none",
        "--platform",
        "any",
    ];
    let out = crate::runtime::pip::download(&specs, &target, &staging);
    let result = match out {
        Err(crate::runtime::pip::PipError::Missing(e)) => {
            Err(WheelError::Fetch(format!("could not run pip: {e}")))
        }
        Err(crate::runtime::pip::PipError::Failed { stderr, .. }) => Err(WheelError::Fetch(format!(
            "pip failed: {}",
            stderr.replace('\n', " | ")
        ))),
        Ok(_) => {
            let mut bad = Vec::new();
            for p in &missing {
                let got = staging.join(&p.file);
                if verified(&got, p) {
                    let _ = std::fs::rename(&got, dir.join(&p.file));
                } else {
                    bad.push(p.file.clone());
                }
            }
            if bad.is_empty() {
                Ok(missing.len())
            } else {
                Err(WheelError::Fetch(format!(
                    "these downloads did not match their pinned SHA-256 and were discarded: {}",
                    bad.join(", ")
                )))
            }
        }
    };
    let _ = std::fs::remove_dir_all(&staging);
    result
}

#[cfg(test)]
mod tests {
    /// A bundled wheel that does not match its pin is never copied into the cache.
    #[test]
    fn a_damaged_bundled_wheel_is_skipped() {
        let root = std::env::temp_dir().join(format!("mcs-catalog-{}", uuid::Uuid::new_v4().simple()));
        let (bundled, cache) = (root.join("bundled"), root.join("cache"));
        std::fs::create_dir_all(&bundled).unwrap();
        std::fs::create_dir_all(&cache).unwrap();
        let pin = &super::pinned()[0];
        std::fs::write(bundled.join(&pin.file), b"PK\x03\x04 not the wheel").unwrap();
        let left = super::copy_verified(&bundled, &cache, vec![pin]);
        assert_eq!(left.len(), 1, "the damaged wheel is still missing");
        assert_eq!(
            std::fs::read_dir(&cache).unwrap().count(),
            0,
            "nothing copied, no temporary left"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_catalog_pins_at_least_thirty_pure_wheels() {
        let p = super::pinned();
        assert!(p.len() >= 30);
        for w in p {
            assert_eq!(w.sha256.len(), 64, "{}", w.name);
            assert!(
                crate::wheels::index::parse_file_name(&w.file).is_some_and(|(_, _, pure)| pure),
                "{}",
                w.file
            );
        }
    }
}
