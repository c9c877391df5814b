//! What the server's own outbound connections (guest egress, a package index, downstream MCP
//! servers) refuse and trust: addresses never reached by a name ([`internal_address`]) and
//! the extra roots of `CODE_SANDBOX_CA_FILE` ([`tls_roots`]).

pub mod internal_address;
pub mod tls_roots;
