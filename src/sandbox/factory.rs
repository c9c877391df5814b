//! Picks the backend named by `INTERPRETER_TYPE`. A new backend is one more arm here plus its
//! implementations of [`Interpreter`] and [`SandboxFiles`](super::SandboxFiles).

use std::sync::Arc;

use super::{Interpreter, SandboxError};
use crate::config::{Backend, Settings};

pub fn build(settings: Arc<Settings>) -> Result<Arc<dyn Interpreter>, SandboxError> {
    match settings.interpreter_type {
        Backend::Wasm => Ok(Arc::new(crate::wasm::WasmBackend::new(settings)?)),
        Backend::E2b => crate::e2b::E2bBackend::build(settings),
    }
}
