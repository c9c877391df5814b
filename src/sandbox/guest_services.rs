//! What guest code may reach beyond its sandbox during one execution: the user's other MCP
//! servers' tools (code mode) and the hosts the user allows (egress).
//!
//! A backend only carries frames between its guest and this trait; what the frames mean
//! (listing, calling, requests, limits, the record of use) belongs to whoever implements it, so
//! a backend never learns about MCP clients or HTTP, and the server decides per call (and per
//! principal) what the code may reach.

use std::time::Instant;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One downstream tool call guest code made, as the result reports it (never its arguments
/// or its result).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ToolCall {
    pub server: String,
    pub tool: String,
    pub duration_ms: u64,
    /// Whether the tool answered without an error.
    pub ok: bool,
    /// Size of the arguments sent plus the result received, serialized.
    pub bytes: u64,
}

#[async_trait]
pub trait GuestServices: Send + Sync {
    /// Answers one frame the guest's `mcp_tools` module sent. `deadline` is when the guest's
    /// turn ends: a call still going then is cancelled in time for the guest to hear so.
    /// Never fails: a bad frame gets a frame that says what was wrong.
    async fn answer(&self, frame: &[u8], deadline: Instant) -> Vec<u8>;

    /// The tool calls made so far through this value, oldest first.
    fn calls(&self) -> Vec<ToolCall>;

    /// The hosts reached so far, with the bytes received from each.
    fn network(&self) -> Vec<NetUse> {
        Vec::new()
    }
}

/// When a service must answer a frame sent during a turn ending at `turn_deadline`: a little
/// before it (a tenth of what is left, at most half a second), so the guest hears of the
/// timeout and its interpreter lives on instead of being stopped mid-call.
pub fn answer_by(turn_deadline: Instant) -> Instant {
    let left = turn_deadline.saturating_duration_since(Instant::now());
    turn_deadline - (left / 10).min(std::time::Duration::from_millis(500))
}

/// A host guest code reached, and what it received from it.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct NetUse {
    pub host: String,
    pub bytes: u64,
}

/// Why a frame got no value: `kind` is what the guest raises (see runtime/guest), `message`
/// what it says.
pub struct Refusal {
    pub kind: &'static str,
    pub message: String,
}

impl Refusal {
    pub fn new(kind: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            kind,
            message: message.into(),
        }
    }

    /// The answer frame: `{"ok": false, "error": {"kind", "message"}}`.
    pub fn frame(&self) -> Vec<u8> {
        serde_json::json!({"ok": false, "error": {"kind": self.kind, "message": self.message}})
            .to_string()
            .into_bytes()
    }
}
