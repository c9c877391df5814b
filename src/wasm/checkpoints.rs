//! Saved points of a sandbox: `checkpoint_sandbox`, `restore_sandbox` and `fork_sandbox`.
//!
//! A saved point is the interpreter's state (the memory pages that differ from its image,
//! deflated; see `vm::SavedState`) and a copy of the workspace and of the installed packages.
//! Checkpoints live in the sandbox's scratch folder, out of the guest's sight, count towards
//! its disk quota, and go with it when it is closed. `/tmp` is not saved.

use std::path::Path;
use std::sync::Arc;

use super::context::Context;
use super::folders::{
    CHECKPOINT_PACKAGES as PACKAGES, CHECKPOINT_SIZE as SIZE, CHECKPOINT_WORKSPACE as WORKSPACE, STATE,
};
use super::persist;
use super::record::{Sandbox, Slot};
use super::remove_tree;
use super::vm::{Program, SavedState};
use crate::disk::quota::{ENTRY_COST, tree_cost};
use crate::sandbox::blocking;
use crate::sandbox::{Checkpoint, SandboxError};

const MAX_NAME: usize = 64;

/// A checkpoint name the user chose, or the next free `checkpoint-N`.
fn name_for(sb: &Sandbox, asked: Option<&str>) -> Result<String, SandboxError> {
    let dir = sb.dirs.checkpoints();
    match asked.map(str::trim).filter(|s| !s.is_empty()) {
        Some(n) => {
            let ok = n.len() <= MAX_NAME
                && n.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
                && !n.starts_with('.');
            if !ok {
                return Err(SandboxError::InvalidArgument(format!(
                    "checkpoint name '{n}' is not usable: use up to {MAX_NAME} letters, digits, '.', '_' or '-', not starting with '.'"
                )));
            }
            if dir.join(n).exists() {
                return Err(SandboxError::InvalidArgument(format!(
                    "sandbox {} already has a checkpoint named '{n}'; pick another name",
                    sb.id
                )));
            }
            Ok(n.to_string())
        }
        None => Ok((1..)
            .map(|i| format!("checkpoint-{i}"))
            .find(|n| !dir.join(n).exists())
            .unwrap_or_else(|| "checkpoint".into())),
    }
}

/// Copies a tree without following links; the cost it adds, as the disk quota counts it.
/// Iterative, so a deep tree cannot overflow the stack.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<u64> {
    std::fs::create_dir_all(to)?;
    let mut cost = 0u64;
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((src, dst)) = stack.pop() {
        for entry in std::fs::read_dir(&src)? {
            let entry = entry?;
            let md = entry.path().symlink_metadata()?;
            let target = dst.join(entry.file_name());
            cost = cost.saturating_add(ENTRY_COST);
            if md.is_dir() {
                std::fs::create_dir(&target)?;
                stack.push((entry.path(), target));
            } else if md.is_symlink() {
                #[cfg(unix)]
                std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
            } else if md.is_file() {
                cost = cost.saturating_add(std::fs::copy(entry.path(), &target)?);
            }
        }
    }
    Ok(cost)
}

fn io_error(what: &str) -> impl FnOnce(std::io::Error) -> SandboxError + '_ {
    move |e| SandboxError::Io {
        context: what.to_string(),
        source: e,
    }
}

/// The state of the sandbox's interpreter (starting one first if it has none).
async fn capture(ctx: &Context, slot: &mut Slot, sb: &Sandbox) -> Result<SavedState, SandboxError> {
    ctx.ensure_session(slot, sb).await?;
    let Some(session) = slot.session.as_mut() else {
        return Err(SandboxError::Backend(
            "the interpreter could not be started".into(),
        ));
    };
    Ok(session.capture().await?)
}

/// Saves the sandbox's variables, imports and files under a name.
pub async fn checkpoint(
    ctx: &Context,
    sb: &Arc<Sandbox>,
    asked: Option<&str>,
) -> Result<Checkpoint, SandboxError> {
    let mut slot = sb.slot.lock().await;
    if sb.closing.is_cancelled() {
        return Err(SandboxError::NotFound(sb.id.clone()));
    }
    let name = name_for(sb, asked)?;
    let state = capture(ctx, &mut slot, sb)
        .await?
        .owned_by(persist::owner_of_checkpoint(&sb.id, &name));
    let dir = sb.dirs.checkpoints().join(&name);
    let sb2 = sb.clone();
    let saved = {
        let dir = dir.clone();
        blocking(move || {
            let tmp = sb2.dirs.checkpoints().join(format!(".{name}.partial"));
            let _ = remove_tree::remove_tree(&tmp);
            let written = (|| -> std::io::Result<u64> {
                std::fs::create_dir_all(&tmp)?;
                let size = state
                    .write_file(&tmp.join(STATE))
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                let mut cost = size + ENTRY_COST;
                cost += copy_tree(&sb2.dirs.workspace, &tmp.join(WORKSPACE))?;
                cost += copy_tree(&sb2.dirs.site_packages, &tmp.join(PACKAGES))?;
                // Recorded, so listing checkpoints never walks their copies; the record is
                // one more entry.
                cost += ENTRY_COST;
                std::fs::write(tmp.join(SIZE), cost.to_string())?;
                Ok(cost)
            })();
            let cost = match written {
                Ok(c) => c,
                Err(e) => {
                    let _ = remove_tree::remove_tree(&tmp);
                    return Err(io_error("could not save the checkpoint")(e));
                }
            };
            if let Err(full) = sb2.quota.reserve(cost) {
                let _ = remove_tree::remove_tree(&tmp);
                // Says which budget is full: the sandbox's, its principal's or the host's.
                return Err(SandboxError::from(full));
            }
            crate::host::retry::rename(&tmp, &dir).map_err(io_error("could not save the checkpoint"))?;
            Ok(cost)
        })
        .await?
    };
    drop(slot);
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // As the listing tells it (from the saved state's time), so every tool gives one time.
    if let Some(listed) = sb.dirs.list_checkpoints().into_iter().find(|c| c.name == name) {
        return Ok(listed);
    }
    let created: chrono::DateTime<chrono::Utc> = std::time::SystemTime::now().into();
    Ok(Checkpoint {
        name,
        created_at: created.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        bytes: saved,
    })
}

/// The image the checkpoint `name` was made from, if it exists and can be read: restoring it
/// waits for that image only.
pub async fn image_of(sb: &Sandbox, name: &str) -> Option<String> {
    let found = sb
        .dirs
        .list_checkpoints()
        .into_iter()
        .find(|c| c.name == name.trim())?;
    persist::image_of(sb.dirs.checkpoints().join(found.name).join(STATE)).await
}

/// Puts the sandbox's variables, imports and files back as they were at `name`.
pub async fn restore(
    ctx: &Context,
    sb: &Arc<Sandbox>,
    images: Vec<Arc<Program>>,
    name: &str,
) -> Result<Checkpoint, SandboxError> {
    let mut slot = sb.slot.lock().await;
    if sb.closing.is_cancelled() {
        return Err(SandboxError::NotFound(sb.id.clone()));
    }
    let known = sb.dirs.list_checkpoints();
    let Some(found) = known.iter().find(|c| c.name == name.trim()).cloned() else {
        let names: Vec<&str> = known.iter().map(|c| c.name.as_str()).collect();
        return Err(SandboxError::InvalidArgument(format!(
            "sandbox {} has no checkpoint named '{}'; it has: {}. checkpoint_sandbox makes one",
            sb.id,
            name.trim(),
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        )));
    };
    let dir = sb.dirs.checkpoints().join(&found.name);
    let owner = persist::owner_of_checkpoint(&sb.id, &found.name);
    let (state, image) = {
        let dir = dir.clone();
        let (found, sb2) = (found.clone(), sb.clone());
        blocking(move || {
            persist::read_saved(&dir.join(STATE), &images, &owner).map_err(|e| SandboxError::Damaged {
                what: format!("checkpoint '{}' of sandbox {}", found.name, sb2.id),
                source: Box::new(e),
            })
        })
        .await?
    };
    // The new interpreter first, so a failure leaves the sandbox as it was.
    let session = ctx.start_from(sb, &image, &state, false).await?;
    let sb2 = sb.clone();
    blocking(move || {
        let before = tree_cost(&sb2.dirs.workspace) + tree_cost(&sb2.dirs.site_packages);
        let after = tree_cost(&dir.join(WORKSPACE)) + tree_cost(&dir.join(PACKAGES));
        let used = sb2.quota.used().saturating_sub(before);
        if used.saturating_add(after) > sb2.quota.limit() {
            return Err(SandboxError::DiskFull {
                limit: sb2.quota.limit(),
                used: sb2.quota.used(),
                wanted: after.saturating_sub(before),
            });
        }
        for (from, to) in [
            (WORKSPACE, &sb2.dirs.workspace),
            (PACKAGES, &sb2.dirs.site_packages),
        ] {
            remove_tree::empty_folder(to).map_err(io_error("could not clear the sandbox's files"))?;
            copy_tree(&dir.join(from), to).map_err(io_error("could not restore the checkpoint's files"))?;
        }
        sb2.quota.release(before);
        sb2.quota.settle(0, i128::from(after));
        Ok(())
    })
    .await?;
    slot.replace(session);
    sb.touch();
    Ok(found)
}

/// Starts `into` as a copy of `from`: its state (with generators of its own) and its files.
pub async fn fork(ctx: &Context, from: &Arc<Sandbox>, into: &Arc<Sandbox>) -> Result<(), SandboxError> {
    let mut slot = from.slot.lock().await;
    if from.closing.is_cancelled() {
        return Err(SandboxError::NotFound(from.id.clone()));
    }
    let state = capture(ctx, &mut slot, from).await?;
    let Some(image) = slot.session.as_ref().map(|s| s.program().clone()) else {
        return Err(SandboxError::Backend(
            "the interpreter could not be started".into(),
        ));
    };
    let (src, dst) = (from.clone(), into.clone());
    blocking(move || {
        let mut cost = 0;
        for (a, b) in [
            (&src.dirs.workspace, &dst.dirs.workspace),
            (&src.dirs.site_packages, &dst.dirs.site_packages),
        ] {
            cost += copy_tree(a, b).map_err(io_error("could not copy the sandbox's files"))?;
        }
        dst.quota.reserve(cost).map_err(SandboxError::from)
    })
    .await?;
    drop(slot);
    let mut into_slot = into.slot.lock().await;
    into_slot.session = Some(ctx.start_from(into, &image, &state, true).await?);
    Ok(())
}
