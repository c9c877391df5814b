//! The methods of MCP's specification, for telling a malformed standard request (-32602) from
//! a method this server does not have (-32601).

/// A method the MCP specification defines (either revision this server speaks): rmcp takes
/// one whose params do not fit as a custom request, which must be answered -32602 (invalid
/// params), not -32601 (no such method).
pub fn is_known_method(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "server/discover"
            | "tools/list"
            | "tools/call"
            | "resources/list"
            | "resources/read"
            | "resources/templates/list"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "prompts/list"
            | "prompts/get"
            | "completion/complete"
            | "logging/setLevel"
            | "subscriptions/listen"
            | "tasks/get"
            | "tasks/list"
            | "tasks/cancel"
            | "tasks/update"
            | "tasks/result"
    )
}
