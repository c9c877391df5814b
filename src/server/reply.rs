//! Building tool results: structured content for clients, a short text for the model, and
//! `isError` results that say what to do, never protocol errors.

use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::outputs::ExecResult;
use crate::sandbox::{Execution, Image};

/// The JSON schema of a tool's arguments.
pub fn input_schema<T: schemars::JsonSchema + 'static>() -> Arc<JsonObject> {
    // The argument types are ours and fixed at build time; a failure here is a build defect
    // caught by the tests that list the tools.
    rmcp::handler::server::common::schema_for_input::<T>().unwrap_or_else(|e| panic!("schema: {e}"))
}

pub fn output_schema<T: schemars::JsonSchema + 'static>() -> Arc<JsonObject> {
    rmcp::handler::server::common::schema_for_output::<T>()
}

/// Parses arguments, turning a bad one into a tool error the model can act on.
pub fn parse<T: DeserializeOwned>(tool: &str, args: JsonObject) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::Object(args))
        .map_err(|e| format!("{tool}: bad arguments: {e}. See the tool's input schema"))
}

/// A successful result.
pub fn ok<T: Serialize>(value: &T, text: String) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = serde_json::to_value(value).ok();
    r
}

/// A tool error: the message is the text, and the structured content carries it too.
pub fn fail(message: impl std::fmt::Display) -> CallToolResult {
    let message = message.to_string();
    let mut r = CallToolResult::error(vec![ContentBlock::text(message.clone())]);
    r.structured_content = Some(serde_json::json!({ "error": message }));
    r
}

/// The text the model reads for an execution: output first, then value, error and notes.
fn exec_text(res: &ExecResult) -> String {
    let mut t = String::new();
    if !res.stdout.is_empty() {
        t.push_str(&res.stdout);
        if !res.stdout.ends_with('\n') {
            t.push('\n');
        }
    }
    if !res.stderr.is_empty()
        && res
            .error
            .as_ref()
            .is_none_or(|e| !res.stderr.contains(&e.traceback) || e.traceback.is_empty())
    {
        t.push_str("[stderr]\n");
        t.push_str(&res.stderr);
        if !res.stderr.ends_with('\n') {
            t.push('\n');
        }
    }
    if let Some(r) = &res.result {
        t.push_str(&format!("Out: {r}\n"));
    }
    if let Some(e) = &res.error {
        if e.traceback.is_empty() {
            t.push_str(&format!("{}: {}\n", e.name, e.value));
        } else {
            t.push_str(&e.traceback);
            if !e.traceback.ends_with('\n') {
                t.push('\n');
            }
        }
    }
    if let Some(l) = &res.limit {
        t.push_str(&format!(
            "[limit reached: {}]\n",
            serde_json::to_value(l)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default()
        ));
    }
    for n in &res.notes {
        t.push_str(&format!("[note] {n}\n"));
    }
    if res.images > 0 {
        t.push_str(&format!("[{} image(s) attached]\n", res.images));
    }
    if t.is_empty() {
        t.push_str("(no output)\n");
    }
    t
}

pub fn exec_reply(sandbox_id: String, ex: Execution, extra_notes: Vec<String>) -> CallToolResult {
    let is_error = ex.error.is_some() || ex.limit.is_some();
    let images: Vec<Image> = ex.images;
    let mut notes = extra_notes;
    notes.extend(ex.notes);
    let res = ExecResult {
        sandbox_id,
        stdout: ex.stdout,
        stderr: ex.stderr,
        result: ex.result,
        error: ex.error,
        images: images.len(),
        duration_ms: ex.duration_ms,
        limit: ex.limit,
        state_lost: ex.state_lost,
        notes,
    };
    let mut content = vec![ContentBlock::text(exec_text(&res))];
    for img in images {
        content.push(ContentBlock::image(
            base64::engine::general_purpose::STANDARD.encode(&img.data),
            img.mime_type,
        ));
    }
    let mut r = if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    r.structured_content = serde_json::to_value(&res).ok();
    r
}
