//! One install: resolve, unpack every wheel into a private staging folder, then move the
//! result into the sandbox's site-packages. Nothing lands unless every wheel unpacked; a
//! failure while moving takes back what was moved.
//!
//! The site-packages folder is mounted read-only in the guest, so the guest cannot plant a
//! link where a package will go; the host writes it with plain renames inside its own tree.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use pep508_rs::pep440_rs::Version;

use super::index::{WheelFile, scan};
use super::resolve::{Present, parse_request, resolve};
use super::unpack::unpack;
use super::{WheelError, normalize};
use crate::disk::quota::{DiskQuota, tree_cost};

/// One sandbox as an install sees it. Owned, so a planning pass on the async side and the
/// install on a blocking thread share one.
pub struct Target {
    pub python: String,
    pub wheel_dirs: Vec<PathBuf>,
    /// `(name, version)` of what the runtime already carries.
    pub runtime: Vec<(String, String)>,
    pub site_packages: PathBuf,
    /// A host-private folder for staging.
    pub scratch: PathBuf,
    /// The sandbox's disk quota, which the installed files count against.
    pub quota: std::sync::Arc<DiskQuota>,
}

#[derive(Debug, PartialEq)]
pub struct Outcome {
    pub installed: Vec<(String, String)>,
    pub already_available: bool,
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> WheelError {
    let context = context.into();
    move |source| WheelError::Io { context, source }
}

/// Packages already importable in this sandbox: the runtime's, then its own installs.
fn present(t: &Target) -> HashMap<String, Present> {
    let mut map = HashMap::new();
    for (name, version) in &t.runtime {
        if let Ok(v) = version.parse::<Version>() {
            map.insert(normalize(name), Present::Runtime(v));
        }
    }
    if let Ok(rd) = std::fs::read_dir(&t.site_packages) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if let Some(stem) = n.strip_suffix(".dist-info")
                && let Some((name, version)) = stem.rsplit_once('-')
                && let Ok(v) = version.parse::<Version>()
            {
                map.insert(normalize(name), Present::Sandbox(v));
            }
        }
    }
    map
}

/// The newest pure wheel of each name in the cache.
pub fn available(wheel_dirs: &[PathBuf]) -> Vec<(String, String)> {
    let mut best: HashMap<String, Version> = HashMap::new();
    for w in scan(wheel_dirs).into_iter().filter(|w| w.pure) {
        let e = best.entry(w.name).or_insert_with(|| w.version.clone());
        if w.version > *e {
            *e = w.version;
        }
    }
    let mut out: Vec<(String, String)> = best.into_iter().map(|(n, v)| (n, v.to_string())).collect();
    out.sort();
    out
}

/// Whether `request` resolves against the cache as it is now (nothing is unpacked): the
/// resolver's error says what is missing.
pub fn plan(request: &str, t: &Target) -> Result<(), WheelError> {
    let req = parse_request(request)?;
    resolve(&req, &t.python, &scan(&t.wheel_dirs), &present(t)).map(|_| ())
}

pub fn install(request: &str, t: &Target) -> Result<Outcome, WheelError> {
    let req = parse_request(request)?;
    let index: Vec<WheelFile> = scan(&t.wheel_dirs);
    let present = present(t);
    let plan = resolve(&req, &t.python, &index, &present)?;
    if plan.already.is_some() {
        return Ok(Outcome {
            installed: Vec::new(),
            already_available: true,
        });
    }
    // One version of a package per sandbox: a planned wheel over an installed version would
    // collide file by file, and the interpreter may have imported the old one already.
    for w in &plan.wheels {
        if let Some(Present::Sandbox(have)) = present.get(&normalize(&w.name))
            && *have != w.version
        {
            return Err(WheelError::Conflict(format!(
                "{} {have} is already installed in this sandbox, and this install needs {} {}; a sandbox keeps the version it installed first. To use {} {}, install it first in a new sandbox (create_sandbox), or keep {have}",
                w.name, w.name, w.version, w.name, w.version
            )));
        }
    }
    let staging = t
        .scratch
        .join(format!(".install-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&staging).map_err(io("creating the staging folder"))?;
    let result = stage_and_move(&plan.wheels, &staging, &t.site_packages, &t.quota);
    let _ = std::fs::remove_dir_all(&staging);
    result?;
    Ok(Outcome {
        installed: plan
            .wheels
            .iter()
            .map(|w| (w.name.clone(), w.version.to_string()))
            .collect(),
        already_available: false,
    })
}

fn stage_and_move(
    wheels: &[WheelFile],
    staging: &Path,
    site: &Path,
    quota: &DiskQuota,
) -> Result<(), WheelError> {
    let mut taken = HashSet::new();
    let mut tops = Vec::new();
    for w in wheels {
        for top in unpack(w, staging, &mut taken)? {
            if !tops.contains(&top) {
                tops.push(top);
            }
        }
    }
    // Staged in host-private space, so nothing reached the sandbox before this check.
    let cost = tree_cost(staging);
    quota
        .reserve(cost)
        .map_err(|full| WheelError::DiskFull(full.to_string()))?;
    let mut moved = Vec::new();
    for top in &tops {
        if let Err(e) = merge_move(&staging.join(top), &site.join(top), &mut moved) {
            for p in moved.iter().rev() {
                let _ = if p.is_dir() {
                    std::fs::remove_dir_all(p)
                } else {
                    std::fs::remove_file(p)
                };
            }
            quota.release(cost);
            return Err(e);
        }
    }
    Ok(())
}

/// Moves `src` to `dst`; where both are folders (namespace packages), moves their contents.
fn merge_move(src: &Path, dst: &Path, moved: &mut Vec<PathBuf>) -> Result<(), WheelError> {
    match std::fs::symlink_metadata(dst) {
        Err(_) => {
            std::fs::rename(src, dst).map_err(io(format!("moving {} into place", dst.display())))?;
            moved.push(dst.to_path_buf());
            Ok(())
        }
        Ok(md) if md.is_dir() && src.is_dir() => {
            for e in std::fs::read_dir(src)
                .map_err(io("reading the staging folder"))?
                .flatten()
            {
                merge_move(&e.path(), &dst.join(e.file_name()), moved)?;
            }
            Ok(())
        }
        Ok(_) => Err(WheelError::Conflict(format!(
            "'{}' is already installed in this sandbox by another package",
            dst.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ))),
    }
}
