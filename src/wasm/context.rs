//! What every operation on a local sandbox uses beside the sandbox itself: the open
//! sandboxes, the compiled programs, the server-wide memory budget and the cap on live
//! interpreters. One value, so a call, a checkpoint or a fork takes `(&Context, &Sandbox)`
//! instead of the same five arguments each.
//!
//! Starting an interpreter lives here because every such operation does it the same way:
//! make room among the live ones first, then resume the saved state or start fresh.

use std::sync::Arc;

use super::live::Room;
use super::persist;
use super::programs::Programs;
use super::record::{Before, Sandbox, Slot};
use super::registry::Registry;
use super::vm::{MemoryBudget, Program, SavedState, Session};
use crate::sandbox::SandboxError;

pub struct Context {
    pub registry: Arc<Registry>,
    pub programs: Arc<Programs>,
    /// Guest memory of all sandboxes together.
    pub memory: Arc<MemoryBudget>,
    /// The cap on live interpreters (`CODE_SANDBOX_MAX_SANDBOXES`).
    pub room: Room,
}

impl Context {
    /// Gives the slot an interpreter when it has none: the suspended one brought back from its
    /// saved state, else a fresh one. Either takes a place among the live interpreters,
    /// suspending the least recently used idle one if need be. Says whether the interpreter
    /// before was lost, so the result can say the state is fresh.
    pub async fn ensure_session(&self, slot: &mut Slot, sb: &Sandbox) -> Result<Before, SandboxError> {
        if slot.session.is_some() {
            return Ok(Before::Kept);
        }
        self.room.make(&sb.id).await?;
        if slot.saved {
            let wanted = persist::saved_image(sb).await;
            let images = self.programs.images_for(wanted.as_deref()).await?;
            let older = match wanted.as_deref() {
                Some(w) if !images.iter().any(|i| i.answers_to(w)) => self.programs.older(w).await,
                _ => None,
            };
            persist::resume(sb, slot, images, older, &self.memory).await?;
            if slot.session.is_some() {
                return Ok(slot.take_after_resume());
            }
        }
        let start = self.programs.for_memory(sb.limits.memory_mb).await?;
        slot.session = Some(start.session(&sb.session_config(&self.memory)).await?);
        Ok(slot.take_before())
    }

    /// A new interpreter for `sb` from a saved state (`reseed`: with generators of its own,
    /// for a fork), once there is room for it. The caller holds `sb`'s slot.
    pub async fn start_from(
        &self,
        sb: &Sandbox,
        program: &Arc<Program>,
        state: &SavedState,
        reseed: bool,
    ) -> Result<Session, SandboxError> {
        self.room.make(&sb.id).await?;
        Ok(Session::start_from(program, &sb.session_config(&self.memory), state, reseed).await?)
    }
}
