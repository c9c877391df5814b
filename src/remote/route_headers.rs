//! Routing headers held to the body, in every request of every revision. A proxy in front of
//! replicas (the project's haproxy template) sends a request to the replica that its
//! `Mcp-Param-Sandbox-Id` or `Mcp-Param-Run-Id` names, without reading the body; rmcp checks
//! those headers only in 2026-07-28 requests and only for arguments the tool declares. A header
//! nothing checks lets a principal pick its replica, and so hold its quota once on each. Here a
//! request that carries any `Mcp-Param-*` header is served only when it is a tool call whose
//! tool marks that argument `x-mcp-header` and whose body gives the same value.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::Value;

/// Each tool's marked arguments: (header name in lower case, argument name).
pub type Declared = Arc<HashMap<String, Vec<(String, String)>>>;

const PARAM_PREFIX: &str = "mcp-param-";
/// The error code rmcp answers a header that disagrees with the body with.
const HEADER_MISMATCH: i64 = -32020;

pub async fn check(State(declared): State<Declared>, req: Request, next: Next) -> Response {
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .filter(|(name, _)| name.as_str().starts_with(PARAM_PREFIX))
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                value.to_str().unwrap_or("\u{0}").to_string(),
            )
        })
        .collect();
    if headers.is_empty() {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, crate::config::MAX_REQUEST_BYTES).await else {
        return refusal(&Value::Null, "the request body could not be read".into());
    };
    let message: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if let Err(why) = backed(&declared, &headers, &message) {
        return refusal(message.get("id").unwrap_or(&Value::Null), why);
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// Whether every `Mcp-Param-*` header is one the called tool marks, equal to its argument.
fn backed(declared: &Declared, headers: &[(String, String)], message: &Value) -> Result<(), String> {
    let tool = (message.get("method").and_then(Value::as_str) == Some("tools/call"))
        .then(|| message.pointer("/params/name").and_then(Value::as_str))
        .flatten();
    for (name, value) in headers {
        let header = &shown(name);
        let Some(tool) = tool else {
            return Err(format!(
                "the {header} header is for tool calls only; send it only with a tools/call that names the same value"
            ));
        };
        let Some(argument) = declared
            .get(tool)
            .and_then(|marked| marked.iter().find(|(h, _)| h == name))
            .map(|(_, argument)| argument)
        else {
            return Err(format!(
                "the tool '{tool}' takes no argument sent in the {header} header; leave the header out"
            ));
        };
        let body = message
            .pointer(&format!("/params/arguments/{argument}"))
            .and_then(Value::as_str);
        if decoded(value).as_deref() != body {
            return Err(format!(
                "the {header} header says '{value}' but the call's {argument} is {}; send the header with the same value as the argument",
                body.map_or("not given".to_string(), |b| format!("'{b}'"))
            ));
        }
    }
    Ok(())
}

/// A header's name as the revision spells it (`Mcp-Param-Sandbox-Id`), for messages.
fn shown(lower: &str) -> String {
    lower
        .split('-')
        .map(|part| {
            let mut c = part.chars();
            c.next()
                .map(|first| first.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// A header's value as the revision encodes it: plain, or `=?base64?...?=`.
fn decoded(value: &str) -> Option<String> {
    use base64::Engine as _;
    match value.strip_prefix("=?base64?").and_then(|v| v.strip_suffix("?=")) {
        Some(inner) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(inner).ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_string()),
    }
}

/// HTTP 400 with the JSON-RPC error rmcp gives a header that disagrees with the body.
fn refusal(id: &Value, why: String) -> Response {
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": HEADER_MISMATCH, "message": why},
    });
    let mut r = Response::new(Body::from(answer.to_string()));
    *r.status_mut() = http::StatusCode::BAD_REQUEST;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declared() -> Declared {
        let mut m = HashMap::new();
        m.insert(
            "execute_code".to_string(),
            vec![("mcp-param-sandbox-id".to_string(), "sandbox_id".to_string())],
        );
        m.insert("create_sandbox".to_string(), vec![]);
        Arc::new(m)
    }

    fn call(tool: &str, arguments: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
    }

    fn header(value: &str) -> Vec<(String, String)> {
        vec![("mcp-param-sandbox-id".to_string(), value.to_string())]
    }

    #[test]
    fn a_header_passes_only_when_the_tool_marks_it_and_the_body_agrees() {
        let d = declared();
        let run = call("execute_code", json!({"sandbox_id": "sbx-r1-a", "code": "1"}));
        assert!(backed(&d, &header("sbx-r1-a"), &run).is_ok());
        assert!(backed(&d, &header("=?base64?c2J4LXIxLWE=?="), &run).is_ok());
        let err = backed(&d, &header("sbx-r2-a"), &run).unwrap_err();
        assert!(err.contains("Mcp-Param-Sandbox-Id"), "{err}");
        let default = call("execute_code", json!({"code": "1"}));
        assert!(
            backed(&d, &header("sbx-r2-a"), &default).is_err(),
            "no id in the body"
        );
        let create = call("create_sandbox", json!({"sandbox_id": "sbx-r2-a"}));
        let err = backed(&d, &header("sbx-r2-a"), &create).unwrap_err();
        assert!(err.contains("takes no argument"), "{err}");
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
        assert!(backed(&d, &header("sbx-r2-a"), &init).is_err());
        assert!(backed(&d, &header("sbx-r2-a"), &Value::Null).is_err(), "not JSON");
        let other = vec![("mcp-param-anything".to_string(), "x".to_string())];
        assert!(backed(&d, &other, &run).is_err(), "a header no tool declares");
    }
}
