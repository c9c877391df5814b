//! What one execution's code may reach beyond its sandbox, put together for the backend: the
//! downstream tools its caller may use (code mode) and the network (egress), each answering
//! its own frames.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use crate::downstream::CallTools;
use crate::egress::Egress;
use crate::sandbox::{GuestServices, NetUse, Refusal, ToolCall};

pub struct CallServices {
    pub tools: Option<Arc<CallTools>>,
    pub net: Option<Egress>,
}

#[async_trait]
impl GuestServices for CallServices {
    async fn answer(&self, frame: &[u8], deadline: Instant) -> Vec<u8> {
        if frame.starts_with(br#"{"net""#) {
            if let Some(net) = &self.net {
                return net.answer(frame, deadline).await;
            }
            return off("network access is off: the user allows hosts with CODE_SANDBOX_ALLOW_HOSTS");
        }
        match &self.tools {
            Some(tools) => tools.answer(frame, deadline).await,
            None => off(
                "no MCP servers are available to this call's code (the user configures them with CODE_SANDBOX_MCP_SERVERS)",
            ),
        }
    }

    fn calls(&self) -> Vec<ToolCall> {
        self.tools.as_ref().map(|t| t.calls()).unwrap_or_default()
    }

    fn network(&self) -> Vec<NetUse> {
        self.net.as_ref().map(Egress::uses).unwrap_or_default()
    }
}

fn off(why: &str) -> Vec<u8> {
    Refusal::new("off", why).frame()
}
