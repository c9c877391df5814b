//! Sandboxes that outlive the server: saving an interpreter's state beside its files (at
//! shutdown, in the background, and when it sits idle) and bringing it back on first use.
//!
//! The state file is written aside, synced and renamed over the old one, so a crash or kill
//! at any moment leaves the last complete state; one that is damaged, partial or from another
//! image is refused when read, and the sandbox comes back fresh with its files and a note.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::folders::STATE;
use super::record::{Sandbox, Slot};
use super::vm::{MemoryBudget, Program, SavedState, Session, SessionError, StateError};
use crate::sandbox::SandboxError;
use crate::sandbox::blocking;

/// Why a saved state could not be used, for the note the next call carries.
fn lost(slot: &mut Slot, why: String) {
    slot.saved = false;
    slot.lost = true;
    slot.lost_reason = Some(why);
}

/// Saves the interpreter's state if it changed since the last save. `suspend` also drops the
/// interpreter, giving its memory back (the state comes back on the next use). A sandbox
/// whose interpreter holds files open keeps running and is not saved.
pub async fn save(sb: &Arc<Sandbox>, slot: &mut Slot, suspend: bool) -> Result<(), SandboxError> {
    match capture(sb, slot).await? {
        Captured::Nothing => return Ok(()),
        Captured::Unchanged => {}
        Captured::State(state, executions) => {
            let writing = sb.writing.clone().lock_owned().await;
            write(sb, state, executions).await?;
            drop(writing);
        }
    }
    let _ = sb.write_meta();
    super::store_push::after_save(sb, suspend);
    if suspend {
        slot.session = None;
        slot.saved = true;
    }
    Ok(())
}

/// Saves a sandbox that keeps running (after a call, with a team's store): the interpreter is
/// held only while its memory is copied, and the state is written and pushed while the next
/// call may already run, so calls in quick succession do not wait on the disk.
pub async fn save_running(sb: &Arc<Sandbox>) -> Result<(), SandboxError> {
    let mut slot = sb.slot.lock().await;
    let Captured::State(state, executions) = capture(sb, &mut slot).await? else {
        return Ok(());
    };
    let writing = sb.writing.clone().lock_owned().await;
    drop(slot);
    write(sb, state, executions).await?;
    let _ = sb.write_meta();
    super::store_push::after_save(sb, false);
    drop(writing);
    Ok(())
}

/// What a save finds in the slot.
enum Captured {
    /// No interpreter, or one holding files open (it keeps running, not saved).
    Nothing,
    /// No call since the last save.
    Unchanged,
    /// The state, taken after this many calls.
    State(SavedState, u64),
}

async fn capture(sb: &Sandbox, slot: &mut Slot) -> Result<Captured, SandboxError> {
    let executions = sb.executions.load(Ordering::SeqCst);
    let Some(session) = slot.session.as_mut() else {
        return Ok(Captured::Nothing);
    };
    if sb.saved_executions.load(Ordering::SeqCst) == executions && sb.dirs.state().is_file() {
        return Ok(Captured::Unchanged);
    }
    match session.capture().await {
        Ok(state) => Ok(Captured::State(state, executions)),
        Err(e @ SessionError::OpenFiles(_)) => {
            tracing::info!("not saving sandbox {}: {e}", sb.id);
            Ok(Captured::Nothing)
        }
        Err(e) => Err(e.into()),
    }
}

/// Writes `state`, captured after `executions` calls, as the sandbox's saved state.
async fn write(sb: &Arc<Sandbox>, state: SavedState, executions: u64) -> Result<(), SandboxError> {
    let state = state.owned_by(owner_of_sandbox(&sb.id));
    let sb2 = sb.clone();
    blocking(move || write_state(&sb2, &state)).await?;
    sb.saved_executions.store(executions, Ordering::SeqCst);
    Ok(())
}

fn write_state(sb: &Sandbox, state: &SavedState) -> Result<(), SandboxError> {
    let dir = sb.dirs.saved();
    let io = |e: std::io::Error| SandboxError::Io {
        context: format!("could not save the state of sandbox {}", sb.id),
        source: e,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let tmp = dir.join(format!(".{STATE}.tmp"));
    state
        .write_file(&tmp)
        .map_err(|e| io(std::io::Error::other(e.to_string())))?;
    crate::host::retry::rename(&tmp, &sb.dirs.state()).map_err(io)
}

/// Whose state a sandbox's saved state is (see `SavedState::owned_by`).
pub fn owner_of_sandbox(id: &str) -> String {
    format!("sandbox {id}")
}

/// Whose state a checkpoint's saved state is.
pub fn owner_of_checkpoint(id: &str, name: &str) -> String {
    format!("checkpoint '{name}' of sandbox {id}")
}

/// Reads a saved state (a sandbox's or a checkpoint's, `owner`) with the image it was taken
/// from.
pub fn read_saved(
    path: &Path,
    images: &[Arc<Program>],
    owner: &str,
) -> Result<(SavedState, Arc<Program>), StateError> {
    let state = read_own(path, |id| images.iter().any(|i| i.answers_to(id)), owner)?;
    let image = images
        .iter()
        .find(|i| i.answers_to(&state.header.image))
        .cloned()
        .ok_or(StateError::OtherImage)?;
    Ok((state, image))
}

/// Reads the saved state at `path` whose image `known` accepts, if it is `owner`'s.
fn read_own(path: &Path, known: impl Fn(&str) -> bool, owner: &str) -> Result<SavedState, StateError> {
    let state = SavedState::read_file(path, known)?;
    state.check_owner(owner)?;
    Ok(state)
}

/// The image the state file at `path` (a sandbox's or a checkpoint's) was made from, if it can
/// be read at all: bringing it back waits for that image only.
pub async fn image_of(path: std::path::PathBuf) -> Option<String> {
    blocking(move || Ok(SavedState::image_of(&path).ok()))
        .await
        .ok()
        .flatten()
}

/// The image a sandbox's saved state was made from.
pub async fn saved_image(sb: &Sandbox) -> Option<String> {
    image_of(sb.dirs.state()).await
}

/// Brings a suspended interpreter back from its saved state. A state that cannot be used
/// leaves the slot empty and marked lost, with the reason. One that cannot get its memory
/// now stays saved, and the call is refused instead: a busy server never loses a state.
pub async fn resume(
    sb: &Sandbox,
    slot: &mut Slot,
    images: Vec<Arc<Program>>,
    older: Option<(Arc<Program>, Arc<Vec<u8>>)>,
    memory: &Arc<MemoryBudget>,
) -> Result<(), SandboxError> {
    let path = sb.dirs.state();
    let owner = owner_of_sandbox(&sb.id);
    if let Some((plain, base)) = older {
        return resume_over(sb, slot, plain, &base, memory).await;
    }
    let read = blocking(move || Ok(read_saved(&path, &images, &owner))).await?;
    let (state, image) = match read {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!("the saved state of sandbox {} could not be used: {e}", sb.id);
            let why = match e {
                StateError::OtherImage => {
                    "its saved state was made from an interpreter image this server no longer has (the runtime or this server was upgraded, or its cached image was rebuilt after damage)"
                }
                _ => "its saved state was damaged, incomplete or not its own",
            };
            lost(slot, why.into());
            return Ok(());
        }
    };
    let started = Session::start_from(&image, &sb.session_config(memory), &state, false).await;
    settle(sb, slot, started)
}

/// Puts a restored interpreter in the slot; one that could not get its memory now stays saved
/// and the call is refused; any other failure leaves the slot marked lost, with the reason.
fn settle(sb: &Sandbox, slot: &mut Slot, started: Result<Session, SessionError>) -> Result<(), SandboxError> {
    match started {
        Ok(session) => {
            slot.session = Some(session);
            slot.saved = false;
            crate::sandbox::events::sandbox_log(
                &sb.id,
                crate::sandbox::events::Severity::Info,
                format!("sandbox {} was restored from its saved state", sb.id),
            );
        }
        Err(e @ SessionError::BudgetFull) => {
            return Err(SandboxError::MemoryBusy(format!(
                "sandbox {} is suspended and could not be brought back: {e}. Its variables and files are kept",
                sb.id
            )));
        }
        Err(e) => lost(slot, format!("its saved state could not be restored ({e})")),
    }
    Ok(())
}

/// Brings back a state saved from an older warm image, over that image's memory `base`, in an
/// interpreter of the current plain program (`vm::older_image_base`).
async fn resume_over(
    sb: &Sandbox,
    slot: &mut Slot,
    plain: Arc<Program>,
    base: &[u8],
    memory: &Arc<MemoryBudget>,
) -> Result<(), SandboxError> {
    let (path, owner) = (sb.dirs.state(), owner_of_sandbox(&sb.id));
    let read = blocking(move || Ok(read_own(&path, |_| true, &owner))).await?;
    let state = match read {
        Ok(state) => state,
        Err(e) => {
            tracing::warn!("the saved state of sandbox {} could not be used: {e}", sb.id);
            lost(
                slot,
                "its saved state was damaged, incomplete or not its own".into(),
            );
            return Ok(());
        }
    };
    let started = Session::start_over(&plain, &sb.session_config(memory), &state, base).await;
    settle(sb, slot, started)
}
