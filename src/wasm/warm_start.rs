//! Every sandbox starts warm: numpy, pandas and matplotlib's pyplot imported before its first
//! call. A sandbox asked for while the warm image loads waits for it (milliseconds); one asked
//! for while the image is being built (a minute or more, once per install) starts from the
//! plain image and imports the same modules itself, so its first `import pandas` is as quick.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::vm::{Image, Program, Session, SessionConfig, SessionError, WARM_UP};

/// How far the warm image is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmPhase {
    /// Not settled yet, and no build needed so far: loading from the cache is milliseconds away.
    Loading,
    /// Being built: sandboxes do not wait for it.
    Building,
    /// Built, loaded, failed or off.
    Settled,
}

/// How long a new sandbox waits for the warm image to load. Loading maps a cached file
/// (tens of milliseconds); the bound is for a disk so slow that importing is quicker.
pub const LOAD_WAIT: Duration = Duration::from_secs(10);

/// The room a warm image usually takes (81 MiB measured for the pinned runtime), for a
/// sandbox whose warm image is not there yet: one too small for it imports nothing either.
const TYPICAL_WARM_IMAGE: u64 = 96 << 20;

/// Room a sandbox started from a warm image keeps beyond the image itself.
const WARM_HEADROOM: u64 = 64 << 20;

/// The imports' time limit: about 3 s on a busy 2-core machine.
const PRELOAD_TIME: Duration = Duration::from_secs(60);

/// Whether a sandbox with `memory_mb` has room to work after starting from `rt`.
pub fn fits(rt: &Program, memory_mb: u64) -> bool {
    match rt.image {
        Image::Plain => true,
        Image::Warm { memory_bytes, .. } => memory_bytes + WARM_HEADROOM <= memory_mb << 20,
    }
}

/// Whether a sandbox with `memory_mb` would have started from a warm image of the usual size.
pub fn would_fit(memory_mb: u64) -> bool {
    TYPICAL_WARM_IMAGE + WARM_HEADROOM <= memory_mb << 20
}

/// The image a new sandbox starts from, and whether it imports the warm modules itself.
pub struct Start {
    pub program: Arc<Program>,
    pub preload: bool,
}

impl Start {
    pub fn from(program: Arc<Program>) -> Self {
        Start {
            program,
            preload: false,
        }
    }

    /// Starts the interpreter; with `preload`, runs the warm image's own warm-up in it. A
    /// warm-up that fails leaves a working plain interpreter (the user's imports then say why).
    pub async fn session(&self, cfg: &SessionConfig) -> Result<Session, SessionError> {
        let mut session = Session::start(&self.program, cfg).await?;
        if self.preload {
            let out = session
                .turn(WARM_UP, PRELOAD_TIME, None, &CancellationToken::new())
                .await;
            if out.status != Ok(0) {
                tracing::warn!(
                    "importing numpy, pandas and matplotlib in a new sandbox failed: {}",
                    out.stderr.text.trim()
                );
            }
        }
        Ok(session)
    }
}
