//! How long one call may run: the one rule every tool and backend applies, so the limit a
//! schema shows, the check on a request and the clamp in each backend cannot drift apart.

use std::time::Duration;

use super::{Limits, SandboxError};

/// The longest a single call may run, whatever it asks for.
pub const MAX_CALL_SECONDS: u64 = 300;
pub const MAX_CALL: Duration = Duration::from_secs(MAX_CALL_SECONDS);
/// The shortest a call runs: less cannot even start the code.
const MIN_CALL: Duration = Duration::from_millis(100);

/// A `timeout_seconds` a request gave, checked: whole seconds from 1 to [`MAX_CALL_SECONDS`].
pub fn asked(seconds: Option<u64>) -> Result<Option<Duration>, SandboxError> {
    match seconds {
        None => Ok(None),
        Some(0) => Err(SandboxError::InvalidArgument(
            "timeout_seconds must be at least 1".into(),
        )),
        Some(s) if s > MAX_CALL_SECONDS => Err(SandboxError::InvalidArgument(format!(
            "timeout_seconds is {s}, above the {MAX_CALL_SECONDS} s maximum; split the work into shorter calls"
        ))),
        Some(s) => Ok(Some(Duration::from_secs(s))),
    }
}

/// A sandbox's default per-call limit: what was asked, else `default`, within the bounds.
pub fn sandbox_default(asked: Option<u64>, default: u64) -> u64 {
    asked.unwrap_or(default).clamp(1, MAX_CALL_SECONDS)
}

impl Limits {
    /// The limit one call in this sandbox runs under: what the call asked for, else the
    /// sandbox's default, within the bounds.
    pub fn call_timeout(&self, asked: Option<Duration>) -> Duration {
        asked
            .unwrap_or(Duration::from_secs(self.timeout_seconds))
            .clamp(MIN_CALL, MAX_CALL)
    }
}
