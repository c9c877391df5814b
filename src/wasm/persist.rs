//! Sandboxes that outlive the server: saving an interpreter's state beside its files (at
//! shutdown, in the background, and when it sits idle) and bringing it back on first use.
//!
//! The state file is written aside, synced and renamed over the old one, so a crash or kill
//! at any moment leaves the last complete state; one that is damaged, partial or from another
//! image is refused when read, and the sandbox comes back fresh with its files and a note.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::registry::{STATE, Sandbox, Slot};
use super::vm::{CompiledRuntime, MemoryBudget, SavedState, Session, SessionError};
use crate::sandbox::SandboxError;

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
    let executions = sb.executions.load(Ordering::SeqCst);
    let Some(session) = slot.session.as_mut() else {
        return Ok(());
    };
    let unchanged =
        sb.saved_executions.load(Ordering::SeqCst) == executions && sb.saved_dir().join(STATE).is_file();
    if !unchanged {
        let image = session.runtime().clone();
        let base = image
            .base_memory()
            .await
            .map_err(|e| SandboxError::Backend(Box::new(e)))?;
        let state = match session.capture(&image.id, &base) {
            Ok(s) => s,
            Err(e @ SessionError::OpenFiles(_)) => {
                tracing::info!("not saving sandbox {}: {e}", sb.id);
                return Ok(());
            }
            Err(e) => return Err(SandboxError::Backend(Box::new(e))),
        };
        let sb2 = sb.clone();
        super::files::blocking(move || write_state(&sb2, &state)).await?;
        sb.saved_executions.store(executions, Ordering::SeqCst);
    }
    let _ = sb.write_meta();
    if suspend {
        slot.session = None;
        slot.saved = true;
    }
    Ok(())
}

fn write_state(sb: &Sandbox, state: &SavedState) -> Result<(), SandboxError> {
    let dir = sb.saved_dir();
    let io = |e: std::io::Error| SandboxError::Io {
        context: format!("could not save the state of sandbox {}", sb.id),
        source: e,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let tmp = dir.join(format!(".{STATE}.tmp"));
    let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io)?);
    state
        .write_to(&mut f)
        .map_err(|e| io(std::io::Error::other(e.to_string())))?;
    f.flush().map_err(io)?;
    let f = f.into_inner().map_err(|e| io(e.into_error()))?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, dir.join(STATE)).map_err(io)
}

/// Brings a suspended interpreter back from its saved state. A state that cannot be used
/// leaves the slot empty and marked lost, with the reason.
pub async fn resume(
    sb: &Sandbox,
    slot: &mut Slot,
    images: Vec<Arc<CompiledRuntime>>,
    memory: &Arc<MemoryBudget>,
) {
    let path = sb.saved_dir().join(STATE);
    let read = super::files::blocking(move || {
        let mut last = String::from("no interpreter image is loaded");
        for image in images {
            let file = std::fs::File::open(&path).map_err(|e| SandboxError::Io {
                context: "could not read the saved state".into(),
                source: e,
            })?;
            match SavedState::read_from(&mut std::io::BufReader::new(file), &image.id) {
                Ok(s) => return Ok(Some((s, image))),
                Err(e) => last = e.to_string(),
            }
        }
        tracing::warn!("a saved state could not be used: {last}");
        Ok(None)
    })
    .await;
    let (state, image) = match read {
        Ok(Some(found)) => found,
        Ok(None) => {
            return lost(
                slot,
                "its saved state was damaged, incomplete or made by another version of the runtime".into(),
            );
        }
        Err(e) => return lost(slot, format!("its saved state could not be read ({e})")),
    };
    match Session::start_from(&image, &sb.session_config(memory), &state, false).await {
        Ok(session) => {
            slot.session = Some(session);
            slot.saved = false;
        }
        Err(e) => lost(slot, format!("its saved state could not be restored ({e})")),
    }
}
