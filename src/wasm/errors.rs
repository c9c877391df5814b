//! The local backend's errors at its edge: what a failed interpreter start becomes for the
//! tools, in one place.

use super::vm::SessionError;
use crate::sandbox::SandboxError;

impl From<SessionError> for SandboxError {
    /// A full memory budget is the caller's to retry (nothing was lost), open files the user's
    /// to close; anything else is the backend's failure, kept as the source.
    fn from(e: SessionError) -> Self {
        match e {
            e @ SessionError::BudgetFull => SandboxError::MemoryBusy(e.to_string()),
            // The user can close the files and try again.
            e @ SessionError::OpenFiles(_) => SandboxError::InvalidArgument(e.to_string()),
            other => SandboxError::Backend(Box::new(other)),
        }
    }
}
