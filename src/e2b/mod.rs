//! The remote E2B backend.

use std::sync::Arc;

use crate::config::Settings;
use crate::sandbox::SandboxError;

pub struct E2bBackend;

impl E2bBackend {
    pub fn build(_settings: Arc<Settings>) -> Result<Arc<dyn crate::sandbox::Interpreter>, SandboxError> {
        Err(SandboxError::Unsupported(
            "the e2b backend is not built yet; unset INTERPRETER_TYPE to use the local wasm backend".into(),
        ))
    }
}
