//! The composition root: the one place that knows every backend. It picks the backend named
//! by `INTERPRETER_TYPE`; a new backend is one more arm here plus its implementations of
//! [`Interpreter`] and [`SandboxFiles`](crate::sandbox::SandboxFiles).

use std::sync::Arc;

use crate::config::{Backend, Settings};
use crate::sandbox::{Interpreter, SandboxError};

pub fn backend(settings: Arc<Settings>) -> Result<Arc<dyn Interpreter>, SandboxError> {
    match settings.interpreter_type {
        Backend::Wasm => Ok(Arc::new(crate::wasm::WasmBackend::new(settings)?)),
        Backend::E2b => crate::e2b::E2bBackend::build(settings),
    }
}
