//! One `install_package`: the wheels a name needs (from the local cache, or a package index
//! for what it lacks) unpacked into the sandbox's site-packages, in order with its runs, then
//! the interpreter's import caches refreshed so the new packages import at once. `?` lists
//! what could be installed and what is built in.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::context::Context;
use crate::sandbox::{InstallOutcome, SandboxError};
use crate::wheels::package_index::PackageIndex;

const INVALIDATE_CACHES: &str = "__import__('importlib').invalidate_caches()";

pub async fn install(
    ctx: &Context,
    index: Option<&PackageIndex>,
    wheel_dirs: Vec<std::path::PathBuf>,
    id: &str,
    name: &str,
) -> Result<InstallOutcome, SandboxError> {
    let program = ctx.programs.get().await?;
    let pkg = |(name, version): (String, String)| crate::sandbox::Package { name, version };
    if name.trim() == "?" {
        return Ok(InstallOutcome {
            installed: Vec::new(),
            already_available: false,
            available: Some(
                crate::wheels::install::available(&wheel_dirs)
                    .into_iter()
                    .map(pkg)
                    .collect(),
            ),
            built_in: Some(program.files.packages.iter().cloned().map(pkg).collect()),
            built_with: Some(program.files.libraries.iter().cloned().map(pkg).collect()),
        });
    }
    let sb = ctx.registry.get(id)?;
    crate::sandbox::call_scope::acting_on(id);
    // Holding the interpreter's lock keeps installs and runs in one sandbox in order.
    let mut slot = sb.slot.lock().await;
    if sb.closing.is_cancelled() {
        // Closed while this install waited: nothing may land in its folders.
        return Err(SandboxError::NotFound(sb.id.clone()));
    }
    let target = Arc::new(crate::wheels::install::Target {
        python: program.files.python_version.clone(),
        wheel_dirs,
        runtime: program.files.packages.clone(),
        site_packages: sb.dirs.site_packages.clone(),
        scratch: sb.dirs.scratch.clone(),
        quota: sb.quota.clone(),
    });
    let request = name.to_string();
    if let Some(index) = index {
        index
            .fill(&target.python, || crate::wheels::install::plan(&request, &target))
            .await
            .map_err(|e| SandboxError::Package(Box::new(e)))?;
    }
    let outcome = tokio::task::spawn_blocking(move || crate::wheels::install::install(&request, &target))
        .await?
        .inspect_err(|e| {
            if let Some(index) = index {
                index.forget_refused(e);
            }
        })
        .map_err(|e| SandboxError::Package(Box::new(e)))?;
    if !outcome.installed.is_empty()
        && let Some(session) = slot.session.as_mut()
    {
        // Import finders cache folder listings: make the new packages visible at once.
        session
            .turn(
                INVALIDATE_CACHES,
                Duration::from_secs(10),
                None,
                &CancellationToken::new(),
            )
            .await;
    }
    drop(slot);
    sb.touch();
    Ok(InstallOutcome {
        installed: outcome.installed.into_iter().map(pkg).collect(),
        already_available: outcome.already_available,
        available: None,
        built_in: None,
        built_with: None,
    })
}
