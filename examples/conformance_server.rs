//! The server the official MCP conformance suite scores: this project's own server (the same
//! library, handler and tools) over streamable HTTP, plus the fixtures the suite's scenarios
//! call by name: tools such as `test_simple_text` and `test_sampling`, the prompts
//! `test_simple_prompt` ... `test_prompt_with_image`, and the `test://` resources. Every
//! request that is not for a fixture goes to the real server.
//!
//! Run: `cargo run --release --example conformance_server -- --listen 127.0.0.1:PORT`
//! (loopback only; no tokens). Settings come from the environment as for the server itself.
//!
//! For 2026-07-28 also the input-required (multi-round-trip, SEP-2322) fixtures and the
//! stateless scenario's diagnostics.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use mcp_code_sandbox::config::Settings;
use mcp_code_sandbox::server::SandboxServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, CompleteRequestParams,
    CompleteResult, CustomRequest, GetPromptRequestParams, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ServerConfig, ServerRequest,
    SubscribeRequestParams, Tool, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

const IMAGE: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const AUDIO: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// The real server with the suite's fixtures beside it.
#[derive(Clone)]
struct Fixtures {
    real: SandboxServer,
    subscribed: Arc<Mutex<HashSet<String>>>,
    /// `test_trigger_tool_change` fans a tool-list change out to the open listen streams.
    tools_changed: tokio::sync::broadcast::Sender<()>,
    /// Tasks that wait for the client's input (`confirm_delete`, `multi_input`).
    waiting: Arc<Mutex<std::collections::HashMap<String, Waiting>>>,
}

/// A task that waits for the client's answers: the server's runs never ask for input, so the
/// tasks extension's input scenarios have these fixtures of their own, beside the real tasks.
struct Waiting {
    created_at: String,
    /// The questions not answered yet.
    pending: serde_json::Map<String, Value>,
    answers: Vec<String>,
    cancelled: bool,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("a fixture's JSON has the protocol's shape")
}

/// A result, marked complete: 2026-07-28 requires `resultType` (rmcp drops it for older peers).
fn done<T: serde::de::DeserializeOwned>(mut v: Value) -> T {
    v["resultType"] = json!("complete");
    from(v)
}

fn text(t: &str) -> CallToolResult {
    done(json!({"content": [{"type": "text", "text": t}]}))
}

/// The fixture tools, as the suite's reference server lists them.
fn fixture_tools() -> Vec<Tool> {
    let none = json!({"type": "object", "properties": {}});
    let one = |name: &str, what: &str| json!({"type": "object", "properties": {name: {"type": "string", "description": what}}, "required": [name]});
    [
        (
            "test_simple_text",
            "Tests simple text content response",
            none.clone(),
        ),
        ("test_image_content", "Tests image content response", none.clone()),
        ("test_audio_content", "Tests audio content response", none.clone()),
        (
            "test_embedded_resource",
            "Tests embedded resource content response",
            none.clone(),
        ),
        (
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
            none.clone(),
        ),
        (
            "test_tool_with_logging",
            "Tests tool that emits log messages during execution",
            none.clone(),
        ),
        (
            "test_tool_with_progress",
            "Tests tool that reports progress notifications",
            none.clone(),
        ),
        (
            "test_error_handling",
            "Tests error response handling",
            none.clone(),
        ),
        (
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
            one("prompt", "The prompt to send to the LLM"),
        ),
        (
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
            one("message", "The message to show the user"),
        ),
        (
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values per SEP-1034",
            none.clone(),
        ),
        (
            "test_elicitation_sep1330_enums",
            "Tests elicitation with enum schema improvements per SEP-1330",
            none.clone(),
        ),
    ]
    .into_iter()
    .chain(MRTR_TOOLS.iter().map(|n| {
        (
            *n,
            "MRTR: returns InputRequiredResult until its input arrives",
            none.clone(),
        )
    }))
    .map(|(name, description, schema)| {
        from(json!({"name": name, "description": description, "inputSchema": schema}))
    })
    .chain(task_tools())
    .chain(std::iter::once(from(json!({
        "name": "json_schema_2020_12_tool",
        "description": "Tool with JSON Schema 2020-12 features",
        "inputSchema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"}
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false
        }
    }))))
    .collect()
}

/// The tasks extension's fixtures (SEP-2663). `greet` answers at once; the others are real
/// background runs of Python in real sandboxes, answered as the real server's tasks.
fn task_tools() -> Vec<Tool> {
    let none = json!({"type": "object", "properties": {}});
    [
        (
            "greet",
            "Says hello (sync only)",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            None,
        ),
        (
            "slow_compute",
            "Sleeps `seconds` in a sandbox, then answers (a background run)",
            json!({"type": "object", "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}}}),
            Some("optional"),
        ),
        (
            "failing_job",
            "Python that raises after about a second (a background run)",
            none.clone(),
            Some("required"),
        ),
        (
            "protocol_error_job",
            "A run whose sandbox is closed under it: the task fails",
            none.clone(),
            Some("optional"),
        ),
        (
            "confirm_delete",
            "Asks the client to confirm, then says the file is deleted",
            json!({"type": "object", "properties": {"filename": {"type": "string"}}}),
            Some("optional"),
        ),
        (
            "multi_input",
            "Asks the client two questions at once",
            none.clone(),
            Some("optional"),
        ),
        (
            "test_tool_with_task",
            "Asks for a name (input required), then greets it from a background run",
            none,
            Some("required"),
        ),
    ]
    .into_iter()
    .map(|(name, description, schema, support)| {
        let mut tool = json!({"name": name, "description": description, "inputSchema": schema});
        if let Some(support) = support {
            tool["execution"] = json!({"taskSupport": support});
        }
        from(tool)
    })
    .collect()
}

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// -32021 for a tool whose task support is `required`, to a client without the extension.
fn tasks_required() -> ErrorData {
    let needed: rmcp::model::ClientCapabilities = from(json!({"extensions": {TASKS: {}}}));
    ErrorData::missing_required_client_capability(needed)
}

/// Whether this request may be answered with a task: the client declared the tasks extension
/// for its session or on this request.
fn speaks_tasks(p: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> bool {
    client_capabilities(p, context)["extensions"].get(TASKS).is_some()
        || context.client_capabilities().is_some_and(|c| c.supports_tasks())
}

impl Fixtures {
    /// Sends a request to the client (sampling, elicitation) as JSON, and its answer as JSON.
    async fn ask(context: &RequestContext<RoleServer>, method: &str, params: Value) -> Result<Value, String> {
        let request = ServerRequest::CustomRequest(CustomRequest::new(method, Some(params)));
        match context.peer.send_request(request).await {
            Ok(ClientResult::CustomResult(r)) => Ok(r.0),
            Ok(other) => serde_json::to_value(other).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn elicit(
        context: &RequestContext<RoleServer>,
        message: &str,
        schema: Value,
        label: &str,
    ) -> CallToolResult {
        match Self::ask(
            context,
            "elicitation/create",
            json!({"message": message, "requestedSchema": schema}),
        )
        .await
        {
            Ok(r) => text(&format!(
                "{label}: action={}, content={}",
                r["action"].as_str().unwrap_or(""),
                r.get("content").cloned().unwrap_or(json!({}))
            )),
            Err(e) => text(&format!("Elicitation not supported or error: {e}")),
        }
    }

    /// A fixture's answer; `None` when `name` is not a fixture.
    async fn fixture(
        &self,
        p: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<CallToolResult> {
        let arg = |k: &str| {
            p.arguments
                .as_ref()
                .and_then(|a| a.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        Some(match p.name.as_ref() {
            "test_simple_text" => text("This is a simple text response for testing."),
            "test_image_content" => {
                done(json!({"content": [{"type": "image", "data": IMAGE, "mimeType": "image/png"}]}))
            }
            "test_audio_content" => {
                done(json!({"content": [{"type": "audio", "data": AUDIO, "mimeType": "audio/wav"}]}))
            }
            "test_embedded_resource" => done(json!({"content": [{"type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}}]})),
            "test_multiple_content_types" => done(json!({"content": [
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": IMAGE, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json",
                    "text": json!({"test": "data", "value": 123}).to_string()}}]})),
            #[allow(deprecated)]
            "test_tool_with_logging" => {
                for line in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ] {
                    let note = rmcp::model::LoggingMessageNotificationParam::new(
                        rmcp::model::LoggingLevel::Info,
                        json!(line),
                    );
                    let _ = context.peer.notify_logging_message(note).await;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                text("Tool with logging executed successfully")
            }
            "test_tool_with_progress" => {
                let token = context.meta.get_progress_token();
                for step in [0.0, 50.0, 100.0] {
                    if let Some(token) = &token {
                        let p = rmcp::model::ProgressNotificationParam::new(token.clone(), step)
                            .with_total(100.0)
                            .with_message(format!("Completed step {step} of 100"));
                        let _ = context.peer.notify_progress(p).await;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                text(
                    &token
                        .map(|t| {
                            serde_json::to_value(t.0)
                                .map(|v| v.to_string())
                                .unwrap_or_default()
                        })
                        .unwrap_or("0".into()),
                )
            }
            "test_error_handling" => done(json!({"isError": true, "content": [{"type": "text",
                "text": "This tool intentionally returns an error for testing"}]})),
            "test_sampling" => {
                let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": arg("prompt")}}], "maxTokens": 100});
                match Self::ask(context, "sampling/createMessage", params).await {
                    Ok(r) => text(&format!(
                        "LLM response: {}",
                        r["content"]["text"].as_str().unwrap_or("No response")
                    )),
                    Err(e) => text(&format!("Sampling not supported or error: {e}")),
                }
            }
            "test_elicitation" => {
                let schema = json!({"type": "object", "properties": {"response": {"type": "string", "description": "User's response"}}, "required": ["response"]});
                Self::elicit(context, &arg("message"), schema, "User response").await
            }
            "test_elicitation_sep1034_defaults" => {
                let schema = json!({"type": "object", "required": [], "properties": {
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "description": "Verification status", "default": true}}});
                Self::elicit(
                    context,
                    "Please review and update the form fields with defaults",
                    schema,
                    "Elicitation completed",
                )
                .await
            }
            "test_elicitation_sep1330_enums" => {
                let titled = |a: &str, b: &str, c: &str| {
                    json!([
                    {"const": "value1", "title": a}, {"const": "value2", "title": b}, {"const": "value3", "title": c}])
                };
                let schema = json!({"type": "object", "required": [], "properties": {
                    "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": titled("First Option", "Second Option", "Third Option")},
                    "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3, "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3, "items": {"anyOf": titled("First Choice", "Second Choice", "Third Choice")}}}});
                Self::elicit(
                    context,
                    "Please select options from the enum fields",
                    schema,
                    "Elicitation completed",
                )
                .await
            }
            _ => return None,
        })
    }
}

fn fixture_resource(uri: &str) -> Option<ReadResourceResult> {
    let contents = match uri {
        "test://static-text" => {
            json!([{"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."}])
        }
        "test://static-binary" => json!([{"uri": uri, "mimeType": "image/png", "blob": IMAGE}]),
        "test://watched-resource" => {
            json!([{"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"}])
        }
        _ => {
            let id = uri.strip_prefix("test://template/")?.strip_suffix("/data")?;
            let body =
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string();
            json!([{"uri": uri, "mimeType": "application/json", "text": body}])
        }
    };
    Some(done(json!({"contents": contents})))
}

fn prompt(name: &str, args: &serde_json::Map<String, Value>) -> Option<GetPromptResult> {
    let get = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let messages = match name {
        "test_simple_prompt" => {
            json!([{"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}])
        }
        "test_prompt_with_arguments" => json!([{"role": "user", "content": {"type": "text",
            "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", get("arg1"), get("arg2"))}}]),
        "test_prompt_with_embedded_resource" => json!([
            {"role": "user", "content": {"type": "resource", "resource": {"uri": get("resourceUri"), "mimeType": "text/plain", "text": "Embedded resource content for testing."}}},
            {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}}]),
        "test_prompt_with_image" => json!([
            {"role": "user", "content": {"type": "image", "data": IMAGE, "mimeType": "image/png"}},
            {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}}]),
        _ => return None,
    };
    Some(done(json!({"messages": messages})))
}

// ---- 2026-07-28 input-required (multi-round-trip) fixtures -------------------------------

/// Seals request state so a client cannot change it unnoticed: an HS256 JWT under a key made
/// at start (jsonwebtoken; no crypto of our own).
struct Seal(jsonwebtoken::EncodingKey, jsonwebtoken::DecodingKey);

static SEAL: std::sync::LazyLock<Seal> = std::sync::LazyLock::new(|| {
    let secret = uuid::Uuid::new_v4().as_bytes().repeat(2);
    Seal(
        jsonwebtoken::EncodingKey::from_secret(&secret),
        jsonwebtoken::DecodingKey::from_secret(&secret),
    )
});

fn seal(state: Value) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({"state": state}),
        &SEAL.0,
    )
    .unwrap_or_default()
}

fn unseal(token: &str) -> Option<Value> {
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
    v.required_spec_claims.clear();
    v.validate_exp = false;
    jsonwebtoken::decode::<Value>(token, &SEAL.1, &v)
        .ok()
        .map(|d| d.claims["state"].clone())
}

fn elicit_request(message: &str, field: &str, kind: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema":
        {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}}})
}

fn sample_request(text: &str, max: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max}})
}

fn input_required(requests: Value, state: Option<String>) -> CallToolResponse {
    let mut v = json!({"resultType": "input_required", "inputRequests": requests});
    if let Some(s) = state {
        v["requestState"] = json!(s);
    }
    CallToolResponse::InputRequired(from(v))
}

/// A text field of an elicitation answer.
fn answered(responses: &rmcp::model::InputResponses, key: &str, field: &str) -> String {
    responses
        .get(key)
        .and_then(|r| r["content"][field].as_str())
        .unwrap_or("unknown")
        .to_string()
}

const MRTR_TOOLS: [&str; 12] = [
    "test_trigger_tool_change",
    "test_missing_capability",
    "test_logging_tool",
    "test_streaming_elicitation",
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
    "test_input_required_result_capabilities",
];

/// An input-required fixture's answer; `None` when `p` names none.
fn mrtr(p: &CallToolRequestParams, client_caps: &Value) -> Option<Result<CallToolResponse, ErrorData>> {
    // An answer that is not an object (a number, null) is no answer: it is asked for again.
    let responses: rmcp::model::InputResponses = p
        .input_responses
        .iter()
        .flatten()
        .filter(|(_, v)| v.is_object())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let responses = &responses;
    let state = p.request_state.as_deref();
    let plain = |t: String| Some(Ok(CallToolResponse::Complete(text(&t))));
    let nonce = || uuid::Uuid::new_v4().to_string();
    match p.name.as_ref() {
        // Diagnostics of the stateless scenario: a tool that needs sampling, one that logs only
        // when the request asked for a level, one whose stream must carry no request of its own.
        "test_missing_capability" => {
            if client_caps.get("sampling").is_none() {
                let needed: rmcp::model::ClientCapabilities = from(json!({"sampling": {}}));
                return Some(Err(ErrorData::missing_required_client_capability(needed)));
            }
            plain("Success".into())
        }
        "test_logging_tool" => plain("Logging evaluated".into()),
        "test_streaming_elicitation" => plain("Streaming complete".into()),
        "test_input_required_result_elicitation" => match responses.get("user_name") {
            Some(_) => plain(format!("Hello, {}!", answered(responses, "user_name", "name"))),
            None => Some(Ok(input_required(
                json!({"user_name": elicit_request("What is your name?", "name", "string")}),
                None,
            ))),
        },
        "test_input_required_result_sampling" => match responses.get("sample_request") {
            Some(r) => plain(format!(
                "Sampling result: {}",
                r["content"]["text"].as_str().unwrap_or("no response")
            )),
            None => Some(Ok(input_required(
                json!({"sample_request": sample_request("What is the capital of France?", 100)}),
                None,
            ))),
        },
        "test_input_required_result_list_roots" => match responses.get("roots_request") {
            Some(r) => plain(format!(
                "Found {} root(s)",
                r["roots"].as_array().map_or(0, Vec::len)
            )),
            None => Some(Ok(input_required(
                json!({"roots_request": {"method": "roots/list", "params": {}}}),
                None,
            ))),
        },
        "test_input_required_result_request_state" => {
            let ok = state
                .and_then(unseal)
                .is_some_and(|s| s["kind"] == "request-state")
                && responses
                    .get("confirm")
                    .is_some_and(|r| r["content"]["ok"] == json!(true));
            if ok {
                return plain("state-ok: requestState validated".into());
            }
            let confirm = elicit_request("Please confirm", "ok", "boolean");
            Some(Ok(input_required(
                json!({"confirm": confirm}),
                Some(seal(json!({"kind": "request-state", "nonce": nonce()}))),
            )))
        }
        "test_input_required_result_multiple_inputs" => {
            let complete = ["user_name", "greeting", "client_roots"]
                .iter()
                .all(|k| responses.contains_key(*k));
            if complete
                && state
                    .and_then(unseal)
                    .is_some_and(|s| s["kind"] == "multiple-inputs")
            {
                let greeting = responses["greeting"]["content"]["text"]
                    .as_str()
                    .unwrap_or("Hello there!");
                let roots = responses["client_roots"]["roots"].as_array().map_or(0, Vec::len);
                return plain(format!(
                    "Name: {}; Greeting: {greeting}; Roots: {roots}",
                    answered(responses, "user_name", "name")
                ));
            }
            let requests = json!({
                "user_name": elicit_request("What is your name?", "name", "string"),
                "greeting": sample_request("Generate a greeting", 50),
                "client_roots": {"method": "roots/list", "params": {}}});
            Some(Ok(input_required(
                requests,
                Some(seal(json!({"kind": "multiple-inputs", "nonce": nonce()}))),
            )))
        }
        "test_input_required_result_multi_round" => {
            let step1 = || {
                Some(Ok(input_required(
                    json!({"step1": elicit_request("Step 1: What is your name?", "name", "string")}),
                    Some(seal(json!({"round": 1, "nonce": nonce()}))),
                )))
            };
            let Some(s) = state.and_then(unseal) else {
                return step1();
            };
            if s["round"] == 1 && responses.contains_key("step1") {
                let name = answered(responses, "step1", "name");
                return Some(Ok(input_required(
                    json!({"step2": elicit_request("Step 2: What is your favorite color?", "color", "string")}),
                    Some(seal(json!({"round": 2, "name": name, "nonce": nonce()}))),
                )));
            }
            if s["round"] == 2 && responses.contains_key("step2") {
                let name = s["name"].as_str().unwrap_or("friend").to_string();
                return plain(format!(
                    "Multi-round complete for {name} who likes {}",
                    answered(responses, "step2", "color")
                ));
            }
            step1()
        }
        "test_input_required_result_tampered_state" => {
            if let Some(raw) = state {
                let Some(s) = unseal(raw) else {
                    return Some(Err(ErrorData::invalid_params(
                        "requestState integrity check failed",
                        None,
                    )));
                };
                if s["kind"] == "tamper-test" && responses.contains_key("confirm") {
                    return plain("integrity-ok: state verified".into());
                }
            }
            let confirm = elicit_request("Please confirm", "ok", "boolean");
            Some(Ok(input_required(
                json!({"confirm": confirm}),
                Some(seal(json!({"kind": "tamper-test", "nonce": nonce()}))),
            )))
        }
        "test_input_required_result_capabilities" => {
            if !responses.is_empty() {
                let keys: Vec<&str> = responses.keys().map(String::as_str).collect();
                return plain(format!("capabilities-ok: received {}", keys.join(",")));
            }
            let mut requests = serde_json::Map::new();
            if client_caps.get("elicitation").is_some() {
                requests.insert(
                    "elicit_input".into(),
                    elicit_request("Elicitation input", "value", "string"),
                );
            }
            if client_caps.get("sampling").is_some() {
                requests.insert("sample_input".into(), sample_request("Sample request", 50));
            }
            if requests.is_empty() {
                return plain("No supported capabilities declared".into());
            }
            Some(Ok(input_required(
                Value::Object(requests),
                Some(seal(json!({"kind": "capabilities-test", "nonce": nonce()}))),
            )))
        }
        _ => None,
    }
}

/// The capabilities the client declared on this request (2026-07-28 `_meta`), as JSON.
fn client_capabilities(p: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> Value {
    let key = "io.modelcontextprotocol/clientCapabilities";
    let from_params = p
        .meta
        .as_ref()
        .and_then(|m| serde_json::to_value(m).ok())
        .and_then(|v| v.get(key).cloned());
    let from_context = serde_json::to_value(&context.meta)
        .ok()
        .and_then(|v| v.get(key).cloned());
    from_params.or(from_context).unwrap_or(Value::Null)
}

impl Fixtures {
    /// Calls one of the real server's tools with `args` (and this request's `_meta`).
    async fn real_tool(
        &self,
        name: &'static str,
        args: Value,
        p: &CallToolRequestParams,
        c: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut call = CallToolRequestParams::new(name);
        call.arguments = args.as_object().cloned();
        call.meta = p.meta.clone();
        self.real.call_tool(call, c.clone()).await
    }

    /// A sandbox of its own for one job: two jobs at once never share one.
    async fn sandbox(&self, c: &RequestContext<RoleServer>) -> Result<String, ErrorData> {
        let made = self
            .real
            .call_tool(CallToolRequestParams::new("create_sandbox"), c.clone())
            .await?;
        let CallToolResponse::Complete(r) = made else {
            return Err(ErrorData::internal_error("create_sandbox did not complete", None));
        };
        r.structured_content
            .as_ref()
            .and_then(|v| v["sandbox_id"].as_str())
            .map(str::to_string)
            .ok_or_else(|| ErrorData::internal_error(format!("no sandbox was made: {r:?}"), None))
    }

    /// Python code run as a real background run in a new sandbox: a task when the client
    /// speaks tasks, else the run's start as a plain result.
    async fn job(
        &self,
        code: String,
        p: &CallToolRequestParams,
        c: &RequestContext<RoleServer>,
    ) -> Result<(String, CallToolResponse), ErrorData> {
        let sb = self.sandbox(c).await?;
        let args = json!({"sandbox_id": sb, "code": code, "background": true});
        Ok((sb, self.real_tool("execute_code", args, p, c).await?))
    }

    /// The tasks extension's fixtures; `None` when `p` names none.
    async fn task_fixture(
        &self,
        p: &CallToolRequestParams,
        c: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        let args = p.arguments.clone().unwrap_or_default();
        Some(match p.name.as_ref() {
            "greet" => Ok(CallToolResponse::Complete(text(&format!(
                "Hello, {}!",
                args.get("name").and_then(Value::as_str).unwrap_or("world")
            )))),
            "slow_compute" => {
                let seconds = args
                    .get("seconds")
                    .and_then(Value::as_f64)
                    .unwrap_or(1.0)
                    .clamp(0.0, 300.0);
                let label = args
                    .get("label")
                    .and_then(Value::as_str)
                    .unwrap_or("slow_compute");
                // A JSON string is a Python string literal too.
                let code = format!(
                    "import time\ntime.sleep({seconds})\nprint({} + ' done after {seconds} s')",
                    json!(label)
                );
                self.job(code, p, c).await.map(|(_, r)| r)
            }
            "failing_job" if !speaks_tasks(p, c) => Err(tasks_required()),
            "failing_job" => {
                let code =
                    "import time\ntime.sleep(1)\nraise RuntimeError('failing_job fails, as it always does')";
                self.job(code.into(), p, c).await.map(|(_, r)| r)
            }
            "protocol_error_job" => {
                let code = "import time\ntime.sleep(60)";
                match self.job(code.into(), p, c).await {
                    Ok((sb, r)) => {
                        // Its sandbox is closed under it, as an operator or an expiry would.
                        let me = self.clone();
                        let (p, c) = (p.clone(), c.clone());
                        tokio::spawn(async move {
                            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                            let _ = me
                                .real_tool("close_sandbox", json!({"sandbox_id": sb}), &p, &c)
                                .await;
                        });
                        Ok(r)
                    }
                    Err(e) => Err(e),
                }
            }
            "confirm_delete" | "multi_input" => {
                let mut pending = serde_json::Map::new();
                if p.name == "confirm_delete" {
                    let file = args.get("filename").and_then(Value::as_str).unwrap_or("the file");
                    pending.insert(
                        "confirm".into(),
                        elicit_request(&format!("Delete {file}?"), "confirm", "boolean"),
                    );
                } else {
                    pending.insert("first".into(), elicit_request("First answer?", "value", "string"));
                    pending.insert(
                        "second".into(),
                        elicit_request("Second answer?", "value", "string"),
                    );
                }
                let id = format!("wait-{}", uuid::Uuid::new_v4().simple());
                let created_at = now();
                let task = rmcp::model::Task::new(
                    &id,
                    rmcp::model::TaskStatus::InputRequired,
                    &created_at,
                    &created_at,
                )
                .with_poll_interval_ms(200);
                self.waiting.lock().unwrap().insert(
                    id,
                    Waiting {
                        created_at,
                        pending,
                        answers: Vec::new(),
                        cancelled: false,
                    },
                );
                Ok(CallToolResponse::Task(rmcp::model::CreateTaskResult::new(task)))
            }
            "test_tool_with_task" if !speaks_tasks(p, c) => Err(tasks_required()),
            "test_tool_with_task" => match p.input_responses.as_ref().filter(|r| r.contains_key("user_name"))
            {
                // The answer gathered, the work goes on as a real background run.
                Some(r) => {
                    let name = answered(r, "user_name", "name");
                    let code = format!("print('Hello, ' + {} + '!')", json!(name));
                    let mut job = p.clone();
                    job.request_state = None;
                    self.job(code, &job, c).await.map(|(_, r)| r)
                }
                None => Ok(input_required(
                    json!({"user_name": elicit_request("What is your name?", "name", "string")}),
                    None,
                )),
            },
            _ => return None,
        })
    }

    /// A waiting task's state, if `id` is one.
    fn waiting_task(&self, id: &str) -> Option<rmcp::model::GetTaskResult> {
        use rmcp::model::{DetailedTask, GetTaskResult, Task, TaskPayload};
        let all = self.waiting.lock().unwrap();
        let w = all.get(id)?;
        let payload = if w.cancelled {
            TaskPayload::Cancelled
        } else if w.pending.is_empty() {
            let said = format!("Done: {}", w.answers.join(", "));
            TaskPayload::Completed {
                result: json!({"content": [{"type": "text", "text": said}]})
                    .as_object()
                    .cloned()?,
            }
        } else {
            TaskPayload::InputRequired {
                input_requests: from(Value::Object(w.pending.clone())),
            }
        };
        let task = Task::new(id, payload.status(), &w.created_at, now()).with_poll_interval_ms(200);
        Some(GetTaskResult::new(DetailedTask::new(task, payload)))
    }
}

impl ServerHandler for Fixtures {
    fn get_info(&self) -> ServerConfig {
        let mut info = self.real.get_info();
        info.capabilities.prompts = Some(from(json!({"listChanged": false})));
        info.capabilities.resources = Some(from(json!({"subscribe": true, "listChanged": true})));
        info
    }

    async fn list_tools(
        &self,
        r: Option<PaginatedRequestParams>,
        c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut listed = self.real.list_tools(r, c).await?;
        listed.tools.extend(fixture_tools());
        Ok(listed)
    }

    /// The called tool's schema, so its `Mcp-Param-*` headers are checked against the body.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.real.get_tool(name)
    }

    async fn call_tool(
        &self,
        p: CallToolRequestParams,
        c: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if p.name == "test_trigger_tool_change" {
            let _ = self.tools_changed.send(());
            return Ok(CallToolResponse::Complete(text("Mutation triggered")));
        }
        if let Some(answer) = mrtr(&p, &client_capabilities(&p, &c)) {
            return answer;
        }
        if let Some(answer) = self.task_fixture(&p, &c).await {
            return answer;
        }
        match self.fixture(&p, &c).await {
            Some(r) => Ok(r.into()),
            None => self.real.call_tool(p, c).await,
        }
    }

    async fn list_prompts(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let arg = |n: &str, d: &str| json!({"name": n, "description": d, "required": true});
        Ok(done(json!({"prompts": [
            {"name": "test_simple_prompt", "title": "Simple Test Prompt", "description": "A simple prompt without arguments"},
            {"name": "test_prompt_with_arguments", "title": "Prompt With Arguments", "description": "A prompt with required arguments",
             "arguments": [arg("arg1", "First test argument"), arg("arg2", "Second test argument")]},
            {"name": "test_prompt_with_embedded_resource", "title": "Prompt With Embedded Resource", "description": "A prompt that includes an embedded resource",
             "arguments": [arg("resourceUri", "URI of the resource to embed")]},
            {"name": "test_prompt_with_image", "title": "Prompt With Image", "description": "A prompt that includes image content"},
            {"name": "test_input_required_result_prompt", "description": "MRTR: a prompt that asks for its context first"}]})))
    }

    async fn get_prompt(
        &self,
        p: GetPromptRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        if p.name == "test_input_required_result_prompt" {
            if let Some(r) = p
                .input_responses
                .as_ref()
                .filter(|r| r.contains_key("user_context"))
            {
                let context = answered(r, "user_context", "context");
                let result: GetPromptResult = done(
                    json!({"messages": [{"role": "user", "content": {"type": "text", "text": format!("Prompt with context: {context}")}}]}),
                );
                return Ok(result.into());
            }
            let ask = elicit_request("What context should the prompt use?", "context", "string");
            let needed: rmcp::model::InputRequiredResult =
                from(json!({"resultType": "input_required", "inputRequests": {"user_context": ask}}));
            return Ok(rmcp::model::GetPromptResponse::InputRequired(needed));
        }
        let args = p.arguments.clone().unwrap_or_default();
        prompt(&p.name, &args)
            .map(Into::into)
            .ok_or_else(|| ErrorData::invalid_params(format!("no prompt named {}", p.name), None))
    }

    async fn list_resources(
        &self,
        r: Option<PaginatedRequestParams>,
        c: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut listed = self.real.list_resources(r, c).await?;
        let fixtures: ListResourcesResult = from(json!({"resources": [
            {"uri": "test://static-text", "name": "static-text", "title": "Static Text Resource", "mimeType": "text/plain"},
            {"uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource", "mimeType": "image/png"},
            {"uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource", "mimeType": "text/plain"}]}));
        listed.resources.extend(fixtures.resources);
        Ok(listed)
    }

    async fn list_resource_templates(
        &self,
        r: Option<PaginatedRequestParams>,
        c: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut listed = self.real.list_resource_templates(r, c).await?;
        let fixture: ListResourceTemplatesResult = from(json!({"resourceTemplates": [
            {"uriTemplate": "test://template/{id}/data", "name": "template", "title": "Resource Template", "mimeType": "application/json"}]}));
        listed.resource_templates.extend(fixture.resource_templates);
        Ok(listed)
    }

    async fn read_resource(
        &self,
        p: ReadResourceRequestParams,
        c: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        match fixture_resource(&p.uri) {
            Some(r) => Ok(r.into()),
            None => self.real.read_resource(p, c).await,
        }
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        p: SubscribeRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscribed.lock().expect("lock").insert(p.uri);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        p: UnsubscribeRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscribed.lock().expect("lock").remove(&p.uri);
        Ok(())
    }

    async fn complete(
        &self,
        p: CompleteRequestParams,
        c: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        if let rmcp::model::Reference::Prompt(r) = &p.r#ref
            && r.name == "test_prompt_with_arguments"
        {
            let values: Vec<&str> = ["paris", "park", "party"]
                .into_iter()
                .filter(|v| v.starts_with(&p.argument.value))
                .collect();
            return Ok(done(
                json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}),
            ));
        }
        self.real.complete(p, c).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        self.real.accepted_subscription_filter(requested)
    }

    async fn listen(&self, subscription: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        // This server has no code mode, whose changes the real server's streams carry: only the
        // fixture's own trigger changes the tool list here.
        let mut changed = self.tools_changed.subscribe();
        loop {
            tokio::select! {
                _ = subscription.cancelled() => return Ok(()),
                got = changed.recv() => {
                    if got.is_err() {
                        continue;
                    }
                    let note = rmcp::model::ServerNotification::ToolListChangedNotification(Default::default());
                    if subscription.sink().send(note).await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }

    async fn get_task(
        &self,
        p: rmcp::model::GetTaskParams,
        c: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        match self.waiting_task(&p.task_id) {
            Some(t) => Ok(t),
            None => self.real.get_task(p, c).await,
        }
    }

    async fn update_task(
        &self,
        p: rmcp::model::UpdateTaskParams,
        c: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(w) = self.waiting.lock().unwrap().get_mut(&p.task_id) {
            for (key, answer) in &p.input_responses {
                if answer.is_object() && w.pending.remove(key).is_some() {
                    w.answers.push(format!(
                        "{key}={}",
                        answer.get("content").cloned().unwrap_or_default()
                    ));
                }
            }
            return Ok(());
        }
        self.real.update_task(p, c).await
    }

    async fn cancel_task(
        &self,
        p: rmcp::model::CancelTaskParams,
        c: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(w) = self.waiting.lock().unwrap().get_mut(&p.task_id) {
            if !w.pending.is_empty() {
                w.cancelled = true;
            }
            return Ok(());
        }
        self.real.cancel_task(p, c).await
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        p: rmcp::model::SetLevelRequestParams,
        c: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.real.set_level(p, c).await
    }
}

fn listen_address() -> String {
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--listen" {
            return args.next().unwrap_or_else(|| "127.0.0.1:8766".into());
        }
        if let Some(v) = a.strip_prefix("--listen=") {
            return v.into();
        }
    }
    "127.0.0.1:8766".into()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter("warn")
        .init();
    let listen = listen_address();
    let settings = Arc::new(Settings::defaults_with_home(
        std::env::var_os("CODE_SANDBOX_HOME").map(Into::into),
    ));
    let backend = mcp_code_sandbox::app::backend(settings.clone())?;
    let real = SandboxServer::new(backend, settings);
    let template = Fixtures {
        real,
        subscribed: Arc::default(),
        tools_changed: tokio::sync::broadcast::channel(16).0,
        waiting: Arc::default(),
    };
    let service = StreamableHttpService::new(
        move || Ok(template.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().route_service("/mcp", service);
    let tcp = tokio::net::TcpListener::bind(&listen).await?;
    anyhow::ensure!(
        tcp.local_addr()?.ip().is_loopback(),
        "the conformance server listens on loopback only"
    );
    eprintln!(
        "conformance server: serving MCP at http://{}/mcp",
        tcp.local_addr()?
    );
    axum::serve(tcp, app).await?;
    Ok(())
}
