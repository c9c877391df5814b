//! How long one call may run: the one rule every tool and backend applies, so the limit a
//! schema shows, the check on a request and the clamp in each backend cannot drift apart.

use std::time::Duration;

use super::{Limits, SandboxError};

/// The longest a single call may run, whatever it asks for.
pub const MAX_CALL_SECONDS: u64 = 300;
pub const MAX_CALL: Duration = Duration::from_secs(MAX_CALL_SECONDS);
/// The longest a background run may be allowed (`CODE_SANDBOX_BACKGROUND_TIMEOUT` at most).
pub const MAX_RUN_SECONDS: u64 = 86_400;
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
            "timeout_seconds is {s}, above the {MAX_CALL_SECONDS} s maximum of one call; for longer work run it in the background (execute_code with background: true, then get_run), whose limit is the server's CODE_SANDBOX_BACKGROUND_TIMEOUT, or split it into shorter calls"
        ))),
        Some(s) => Ok(Some(Duration::from_secs(s))),
    }
}

/// A background run's `timeout_seconds`, checked against the server's limit for runs: whole
/// seconds from 1 to `max`; none asked, `max` itself.
pub fn asked_for_run(seconds: Option<u64>, max: u64) -> Result<Duration, SandboxError> {
    match seconds {
        None => Ok(Duration::from_secs(max)),
        Some(0) => Err(SandboxError::InvalidArgument(
            "timeout_seconds must be at least 1".into(),
        )),
        Some(s) if s > max => Err(SandboxError::InvalidArgument(format!(
            "timeout_seconds is {s}, above the {max} s limit for background runs (CODE_SANDBOX_BACKGROUND_TIMEOUT); ask for less, or split the work into runs"
        ))),
        Some(s) => Ok(Duration::from_secs(s)),
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

    /// The limit a call runs under given its options: a background run's own limit (which
    /// the server set from `CODE_SANDBOX_BACKGROUND_TIMEOUT`), else [`Self::call_timeout`].
    pub fn timeout_for(&self, opts: &super::ExecOptions) -> Duration {
        match (&opts.background, opts.timeout) {
            (Some(_), Some(t)) => t.clamp(MIN_CALL, Duration::from_secs(MAX_RUN_SECONDS)),
            _ => self.call_timeout(opts.timeout),
        }
    }
}
