//! Building tool results: structured content for clients, a short text for the model, and
//! `isError` results that say what to do, never protocol errors.

use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde::Serialize;
use serde::de::DeserializeOwned;

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

/// A tool error: the message alone, with no structured content, since clients validate
/// structured content against the tool's output schema, errors included.
pub fn fail(message: impl std::fmt::Display) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.to_string())])
}

/// Serialized size of a result (or a part of one), as the client will receive it.
pub fn size_of<T: Serialize>(v: &T) -> usize {
    serde_json::to_vec(v).map_or(usize::MAX, |b| b.len())
}

/// Adds a remark to a result after it was built: to the text the model reads and to the
/// structured `notes`, when there are any.
pub fn add_note(r: &mut CallToolResult, note: &str) {
    if let Some(ContentBlock::Text(t)) = r.content.first_mut() {
        t.text.push_str(&format!("[note] {note}\n"));
    }
    if let Some(serde_json::Value::Object(o)) = r.structured_content.as_mut() {
        let notes = o
            .entry("notes")
            .or_insert_with(|| serde_json::Value::Array(Vec::new()));
        if let serde_json::Value::Array(a) = notes {
            a.push(note.into());
        }
    }
}
