//! The composition root: the one place that knows every backend. It picks the backend named
//! by `INTERPRETER_TYPE`; a new backend is one more arm here plus its implementations of
//! [`Interpreter`] and [`SandboxFiles`](crate::sandbox::SandboxFiles).

use std::sync::Arc;

use crate::config::{Backend, Settings, Transport};
use crate::downstream::Gateway;
use crate::egress::{EgressError, NetPolicy};
use crate::sandbox::{Interpreter, SandboxError};

pub fn backend(settings: Arc<Settings>) -> Result<Arc<dyn Interpreter>, SandboxError> {
    settings
        .folders_outside_home()
        .map_err(SandboxError::InvalidArgument)?;
    settings.log_save_folders();
    match settings.interpreter_type {
        Backend::Wasm => {
            let leave = match settings.transport {
                Transport::Stdio => crate::tenancy::remote_owned(settings.home_dir().join("owners.json")),
                Transport::Http => Default::default(),
            };
            Ok(Arc::new(crate::wasm::WasmBackend::new(settings, &leave)?))
        }
        Backend::E2b => {
            if settings.package_index_url().is_some() {
                tracing::warn!(
                    "CODE_SANDBOX_INDEX_URL is ignored: the e2b backend's sandboxes install with pip from their own network"
                );
            }
            if !settings.read_roots().is_empty() {
                tracing::warn!(
                    "CODE_SANDBOX_READ_DIRS is ignored: E2B's sandboxes run in the cloud and cannot read this computer's folders; upload the files instead"
                );
            }
            crate::e2b::E2bBackend::build(settings)
        }
    }
}

/// Code mode's servers, when a servers file is set: started now in the background. Only the
/// local backend's guest can reach this machine's servers; another backend's description says
/// so instead.
pub fn code_mode(settings: &Settings, backend: &dyn Interpreter) -> Option<Arc<Gateway>> {
    // A bundle's form left empty passes an empty value: off, as unset.
    let file = settings
        .mcp_servers
        .as_ref()
        .filter(|f| !f.as_os_str().is_empty())?;
    if backend.backend() != "wasm" {
        tracing::warn!(
            "CODE_SANDBOX_MCP_SERVERS is ignored: code mode is not available with the {} backend",
            backend.backend()
        );
        return Some(Gateway::off(format!(
            "it is not available with the {} backend, whose sandboxes run on another machine; it needs INTERPRETER_TYPE=wasm",
            backend.backend()
        )));
    }
    let own = matches!(settings.transport, Transport::Http).then_some(settings.listen.as_str());
    Some(Gateway::start(
        file,
        own,
        settings.mcp_calls,
        std::time::Duration::from_secs(settings.mcp_start_seconds.max(1)),
    ))
}

/// The hosts sandbox code may reach, or `None` (no network). A bad entry or CA file stops the
/// start with what to fix: it is a security setting, and guessing would widen or break it.
/// Read before the backend starts, so a bad entry stops the start at once.
pub fn network(settings: &Settings) -> Result<Option<Arc<NetPolicy>>, EgressError> {
    let policy = crate::egress::policy(
        &settings.allow_hosts,
        settings.ca_file.as_deref(),
        settings.secrets.as_deref(),
        settings.net_bytes,
    )?;
    if policy.is_some() && settings.interpreter_type != Backend::Wasm {
        tracing::warn!(
            "CODE_SANDBOX_ALLOW_HOSTS is ignored: the e2b backend's sandboxes have their own network"
        );
        return Ok(None);
    }
    Ok(policy)
}
