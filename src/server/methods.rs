//! The methods of MCP's specification, for telling a malformed standard request (-32602) from
//! a method this server does not have (-32601). rmcp hands a standard method whose params it
//! could not take over as a custom request, and so it does with a method the request's own
//! revision does not have (2026-07-28 dropped `initialize`, `logging/setLevel` and resource
//! subscriptions), which must stay "method not found".

use serde_json::Value;

/// In both revisions this server speaks.
const BOTH: &[&str] = &[
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "tasks/get",
    "tasks/list",
    "tasks/cancel",
    "tasks/update",
    "tasks/result",
];
/// Only in 2025-11-25 (sessions).
const SESSIONS_ONLY: &[&str] = &[
    "initialize",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];
/// Only in 2026-07-28 (stateless requests).
const STATELESS_ONLY: &[&str] = &["server/discover", "subscriptions/listen"];

/// Whether a request carrying `params` (over HTTP, with the `MCP-Protocol-Version` header
/// `header`) is a 2026-07-28 one: its `_meta` or the header names that revision.
fn stateless(params: Option<&Value>, header: Option<&str>) -> bool {
    params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .and_then(Value::as_str)
        .or(header)
        .is_some_and(|v| v >= "2026-07-28")
}

/// Whether `method` is one the request's own revision defines.
pub fn is_known_method(method: &str, params: Option<&Value>, header: Option<&str>) -> bool {
    let own = if stateless(params, header) {
        STATELESS_ONLY
    } else {
        SESSIONS_ONLY
    };
    BOTH.contains(&method) || own.contains(&method)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_counts_only_in_its_own_revision() {
        let new = serde_json::json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
        assert!(is_known_method("logging/setLevel", None, None));
        assert!(!is_known_method("logging/setLevel", Some(&new), None));
        assert!(!is_known_method("initialize", None, Some("2026-07-28")));
        assert!(is_known_method("subscriptions/listen", Some(&new), None));
        assert!(!is_known_method("subscriptions/listen", None, None));
        assert!(is_known_method("tasks/get", Some(&new), None) && is_known_method("tasks/get", None, None));
        assert!(!is_known_method("tools/nope", None, None));
    }
}
