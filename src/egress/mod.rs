//! Egress: HTTP(S) from guest code to the hosts the user allows (`CODE_SANDBOX_ALLOW_HOSTS`),
//! made by the host on the guest's behalf, since the guest has no sockets. Off unless hosts are
//! listed.
//!
//! `rules` is the allowlist (`crate::outbound::internal_address`: the addresses never reached by name), `fetch` one
//! execution's requests.

mod fetch;
mod rules;
mod secrets;

use std::path::Path;
use std::sync::Arc;

pub use fetch::{Egress, NetPolicy};
pub use rules::{HostRule, RuleError};
pub use secrets::SecretsError;

#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error(transparent)]
    Rule(#[from] RuleError),
    #[error(transparent)]
    Roots(#[from] crate::outbound::tls_roots::RootsError),
    #[error(transparent)]
    Secrets(#[from] SecretsError),
}

/// The server's network policy, or `None` when no host is allowed (no network at all).
pub fn policy(
    allow: &[String],
    ca_file: Option<&Path>,
    secrets_file: Option<&Path>,
    max_bytes: u64,
) -> Result<Option<Arc<NetPolicy>>, EgressError> {
    let rules = allow
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(HostRule::parse)
        .collect::<Result<Vec<_>, _>>()?;
    let secrets = match secrets_file.filter(|f| !f.as_os_str().is_empty()) {
        Some(file) => secrets::load(file)?,
        None => Vec::new(),
    };
    if rules.is_empty() {
        if !secrets.is_empty() {
            tracing::warn!(
                "CODE_SANDBOX_SECRETS is set but no host is allowed (CODE_SANDBOX_ALLOW_HOSTS), so no secret is ever sent"
            );
        }
        return Ok(None);
    }
    let roots = crate::outbound::tls_roots::load(ca_file)?;
    Ok(Some(Arc::new(NetPolicy {
        rules,
        roots,
        max_bytes,
        secrets,
        clients: Default::default(),
    })))
}
