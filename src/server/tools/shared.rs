//! What every tool family shares: turning a failed step into a tool error, finding the
//! sandbox a call acts on, and paging a listing within the result budget.

use rmcp::ErrorData;
use rmcp::model::CallToolResult;

use crate::sandbox::{CreateOptions, SandboxError};
use crate::server::SandboxServer;
use crate::server::calls::used;
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
    /// The sandbox a call acts on: the given id, else this session's default (see
    /// `default_sandbox.rs`), else (when `create`) a new one. The note says when one was made.
    pub(super) async fn resolve(
        &self,
        id: Option<String>,
        create: bool,
    ) -> Result<(String, Vec<String>), SandboxError> {
        if let Some(id) = id.filter(|s| !s.trim().is_empty()) {
            self.owned(&id).await?;
            used(&id);
            return Ok((id, Vec::new()));
        }
        if let Some(id) = self.default_sandbox.get() {
            // Closed by another session, or expired: never fall back to an older one.
            if self.backend.usage(&id).is_ok() {
                used(&id);
                return Ok((id, Vec::new()));
            }
            self.default_sandbox.forget(&id);
        }
        if !create {
            return Err(SandboxError::InvalidArgument(self.no_default().await));
        }
        let info = self.backend.create(CreateOptions::default()).await?;
        used(&info.sandbox_id);
        let note = format!("Created sandbox {} for this call.", info.sandbox_id);
        Ok((info.sandbox_id, vec![note]))
    }

    /// Refuses a sandbox the caller cannot see (another principal's answers exactly as an
    /// unknown id), before anything is recorded, queued or told about it: whether it is busy,
    /// and with what run, is its owner's business alone.
    pub(super) async fn owned(&self, id: &str) -> Result<(), SandboxError> {
        self.backend.locate(id).await
    }

    /// Why a call without an id that must not create a sandbox has none to act on, and the
    /// open ones it could name.
    async fn no_default(&self) -> String {
        const SHOWN: usize = 5;
        let open: Vec<String> = self
            .backend
            .list()
            .await
            .into_iter()
            .map(|s| s.sandbox_id)
            .collect();
        let mut text = String::from(
            "no default sandbox: this session has not created or used one, or the one it used last is closed, and calls without an id never fall back to another. Give sandbox_id",
        );
        if open.is_empty() {
            text.push_str(" (no sandbox is open; create_sandbox or execute_code makes one)");
        } else {
            let more = open.len().saturating_sub(SHOWN);
            let mut shown = open.into_iter().take(SHOWN).collect::<Vec<_>>().join(", ");
            if more > 0 {
                shown.push_str(&format!(" and {more} more"));
            }
            text.push_str(&format!("; open: {shown} (get_sandbox_status lists them)"));
        }
        text
    }
}
