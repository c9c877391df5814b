//! Two things Claude's clients send today that a strict reading of the revisions refuses, each
//! accepted in exactly its own shape (docs/conformance.md, "Client quirks we accept"):
//!
//! 1. Claude Code may send `initialize` after a successful `server/discover`, still carrying
//!    the `MCP-Protocol-Version: 2026-07-28` header. That revision has no `initialize`, and the
//!    header is optional on `initialize` in the revision that has it, so the body's
//!    `protocolVersion` decides: when it asks for an older revision and the body's `_meta` says
//!    nothing of 2026-07-28, the header is dropped from that one request (a 2026-07-28
//!    `initialize` is still "method not found", as that revision requires).
//! 2. Claude's connectors have been seen sending `MCP-Protocol-Version: 2025-11-25` with
//!    `_meta` saying 2026-07-28. A revision before 2026-07-28 defines no per-request version,
//!    so the body's is the only one that means anything: the header is set to it, and the
//!    `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` headers that revision asks for are added from
//!    the body when missing (a client that sent them keeps its own, and a mismatch is still
//!    refused). Such a client knows nothing of `x-mcp-header`, so without this every call
//!    naming a sandbox would be refused for want of `Mcp-Param-Sandbox-Id`.
//!
//! Nothing else is mended: a header that names 2026-07-28 or later and disagrees with the
//! body, a version this server does not speak, or a malformed body reach rmcp as they came.

use axum::body::Body;
use axum::extract::Request;
use http::{HeaderValue, Method};
use serde_json::Value;

use crate::server::HEADER_ARGUMENTS;

const VERSION_HEADER: &str = "mcp-protocol-version";
const STATELESS: &str = "2026-07-28";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// The request as the server reads it, with the quirks above mended.
pub async fn mend(req: Request, limit: usize) -> Result<Request, String> {
    let Some(header) = req
        .headers()
        .get(VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    else {
        return Ok(req);
    };
    if req.method() != Method::POST {
        return Ok(req);
    }
    let (mut parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, limit)
        .await
        .map_err(|e| format!("the request body could not be read: {e}"))?;
    // Only a body that could be one of the two shapes is parsed.
    let maybe = if header.as_str() >= STATELESS {
        contains(&bytes, b"\"initialize\"")
    } else {
        contains(&bytes, META_VERSION.as_bytes())
    };
    if maybe && let Ok(message) = serde_json::from_slice::<Value>(&bytes) {
        apply(&mut parts.headers, &header, &message);
    }
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Changes the headers of a request whose body is `message`, if it has one of the shapes.
fn apply(headers: &mut http::HeaderMap, header: &str, message: &Value) {
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let params = message.get("params");
    let said = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(META_VERSION))
        .and_then(Value::as_str);
    if header >= STATELESS {
        // Only a real 2025-11-25 handshake: it asks for an older revision and says nothing of
        // 2026-07-28 in `_meta` (a 2026-07-28 `initialize` stays "method not found").
        let asks_older = params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str)
            .is_some_and(|v| v < STATELESS);
        if method == "initialize" && asks_older && said.is_none() {
            headers.remove(VERSION_HEADER);
        }
        return;
    }
    if said != Some(STATELESS) {
        return;
    }
    headers.insert(VERSION_HEADER, HeaderValue::from_static(STATELESS));
    if !headers.contains_key("mcp-method")
        && let Ok(v) = HeaderValue::from_str(method)
    {
        headers.insert("mcp-method", v);
    }
    if !headers.contains_key("mcp-name")
        && let Some(v) = name_of(method, params).and_then(|n| HeaderValue::from_str(&n).ok())
    {
        headers.insert("mcp-name", v);
    }
    if method == "tools/call" {
        mirror_arguments(headers, params.and_then(|p| p.get("arguments")));
    }
}

/// The `Mcp-Param-*` headers of the arguments this server's tools mark `x-mcp-header`.
fn mirror_arguments(headers: &mut http::HeaderMap, arguments: Option<&Value>) {
    for (argument, header) in HEADER_ARGUMENTS {
        let name = format!("mcp-param-{}", header.to_ascii_lowercase());
        let value = arguments.and_then(|a| a.get(argument)).and_then(Value::as_str);
        if let Some(v) = value.and_then(|v| HeaderValue::from_str(&encoded(v)).ok())
            && !headers.contains_key(&name)
            && let Ok(name) = http::HeaderName::from_bytes(name.as_bytes())
        {
            headers.insert(name, v);
        }
    }
}

/// The `Mcp-Name` the 2026-07-28 revision asks of a method: a tool's or prompt's name, a
/// resource's URI, a task's id; encoded as the revision says when it is not plain ASCII.
fn name_of(method: &str, params: Option<&Value>) -> Option<String> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    Some(encoded(params?.get(key)?.as_str()?))
}

/// A header value as the revision encodes it: as it is when plain ASCII, else Base64 inside
/// `=?base64?...?=`.
fn encoded(value: &str) -> String {
    let plain = !value.starts_with([' ', '\t'])
        && !value.ends_with([' ', '\t'])
        && value.chars().all(|c| (' '..='~').contains(&c));
    if plain {
        value.to_string()
    } else {
        use base64::Engine as _;
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(version: &str) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert(VERSION_HEADER, HeaderValue::from_str(version).unwrap());
        h
    }

    #[test]
    fn only_the_two_shapes_are_mended() {
        let call = json!({"method": "tools/call", "params": {"name": "execute_code", "arguments": {"sandbox_id": "sbx-é"}, "_meta": {META_VERSION: "2026-07-28"}}});
        let mut h = headers("2025-11-25");
        apply(&mut h, "2025-11-25", &call);
        assert_eq!(h[VERSION_HEADER], "2026-07-28");
        assert_eq!(h["mcp-method"], "tools/call");
        assert_eq!(h["mcp-name"], "execute_code");
        assert_eq!(h["mcp-param-sandbox-id"], "=?base64?c2J4LcOp?=");
        assert!(!h.contains_key("mcp-param-run-id"), "no run_id, no header");

        let init = json!({"method": "initialize", "params": {"protocolVersion": "2025-11-25"}});
        let mut h = headers("2026-07-28");
        apply(&mut h, "2026-07-28", &init);
        assert!(!h.contains_key(VERSION_HEADER));
        // A 2026-07-28 initialize (no older version asked, or 2026 `_meta`) is left to be refused.
        for probe in [
            json!({"method": "initialize", "params": {"_meta": {META_VERSION: "2026-07-28"}}}),
            json!({"method": "initialize", "params": {"protocolVersion": "2025-11-25", "_meta": {META_VERSION: "2026-07-28"}}}),
        ] {
            let mut h = headers("2026-07-28");
            apply(&mut h, "2026-07-28", &probe);
            assert_eq!(h[VERSION_HEADER], "2026-07-28", "{probe}");
        }

        // A 2026 header that disagrees with its body's version, or an unknown version: as sent.
        let later = json!({"method": "tools/call", "params": {"_meta": {META_VERSION: "2027-01-01"}}});
        let mut h = headers("2025-11-25");
        apply(&mut h, "2025-11-25", &later);
        assert_eq!(h[VERSION_HEADER], "2025-11-25");
        let mut h = headers("2026-07-28");
        apply(&mut h, "2026-07-28", &call);
        assert_eq!(h[VERSION_HEADER], "2026-07-28");
        assert!(!h.contains_key("mcp-method"), "nothing added to a 2026 request");
    }
}
