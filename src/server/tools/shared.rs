//! What every tool family shares: turning a failed step into a tool error, finding the
//! sandbox a call acts on, and paging a listing within the result budget.

use rmcp::ErrorData;
use rmcp::model::CallToolResult;

use crate::sandbox::{CreateOptions, SandboxError};
use crate::server::SandboxServer;
use crate::server::calls::acted_on;
use crate::server::reply::size_of;

pub type ToolResult = Result<CallToolResult, ErrorData>;

/// Unwraps a step or returns its tool error.
macro_rules! attempt {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Ok(fail(e)),
        }
    };
}
pub(super) use attempt;

/// One page of a listing, from `offset`: at most `most` items, and within `budget` after
/// `fixed` bytes, each item counted twice (it appears in the structured content and as a line
/// of text); and where the next page starts, if there is one.
pub fn page_of<T: serde::Serialize>(
    items: Vec<T>,
    offset: usize,
    most: usize,
    fixed: usize,
    budget: usize,
) -> (Vec<T>, Option<u64>) {
    let total = items.len();
    let mut used = fixed;
    let mut page = Vec::new();
    for item in items.into_iter().skip(offset) {
        let cost = size_of(&item).saturating_mul(2) + 64;
        if page.len() >= most || used + cost > budget {
            break;
        }
        used += cost;
        page.push(item);
    }
    let next = offset + page.len();
    (page, (next < total).then_some(next as u64))
}

impl SandboxServer {
    /// The sandbox a call acts on: the given id, else the most recent, else (when `create`)
    /// a new one. The note says when one was made.
    pub(super) async fn resolve(
        &self,
        id: Option<String>,
        create: bool,
    ) -> Result<(String, Vec<String>), SandboxError> {
        if let Some(id) = id.filter(|s| !s.trim().is_empty()) {
            acted_on(&id);
            return Ok((id, Vec::new()));
        }
        if let Some(id) = self.backend.most_recent().await {
            acted_on(&id);
            return Ok((id, Vec::new()));
        }
        if !create {
            return Err(SandboxError::InvalidArgument(
                "no sandbox is open; create one with create_sandbox (or just call execute_code)".into(),
            ));
        }
        let info = self.backend.create(CreateOptions::default()).await?;
        acted_on(&info.sandbox_id);
        let note = format!("Created sandbox {} for this call.", info.sandbox_id);
        Ok((info.sandbox_id, vec![note]))
    }
}
