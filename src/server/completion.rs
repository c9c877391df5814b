//! `completion/complete` for the resource template `sandbox://{sandbox_id}/{+path}`: the
//! caller's own sandbox ids (never another principal's: the listing goes through the caller's
//! view), and paths inside the named sandbox's workspace, each prefix-matched, at most 100.
//! Anything else (a prompt, another template, an unknown argument) completes to nothing.

use rmcp::model::{CompleteRequestParams, CompleteResult, CompletionInfo, Reference};

use super::SandboxServer;
use super::resources;
use crate::sandbox::FileKind;
use crate::sandbox::paths::WorkspacePath;

const MOST: usize = CompletionInfo::MAX_VALUES;

fn result(mut values: Vec<String>) -> CompleteResult {
    let total = values.len();
    values.truncate(MOST);
    let mut info = CompletionInfo::default();
    info.has_more = Some(total > values.len());
    info.total = u32::try_from(total).ok();
    info.values = values;
    CompleteResult::new(info)
}

impl SandboxServer {
    /// Completions for `request`, acting as the caller (this value is the caller's own).
    pub(super) async fn completions(&self, request: &CompleteRequestParams) -> CompleteResult {
        let Reference::Resource(r) = &request.r#ref else {
            return result(Vec::new());
        };
        if r.uri != resources::template().uri_template {
            return result(Vec::new());
        }
        let typed = request.argument.value.as_str();
        match request.argument.name.as_str() {
            "sandbox_id" => {
                let ids = self
                    .backend
                    .list()
                    .await
                    .into_iter()
                    .map(|s| s.sandbox_id)
                    .filter(|id| id.starts_with(typed))
                    .collect();
                result(ids)
            }
            "path" => {
                let sandbox = request
                    .context
                    .as_ref()
                    .and_then(|c| c.arguments.as_ref())
                    .and_then(|a| a.get("sandbox_id"))
                    .cloned()
                    .or_else(|| self.default_sandbox.get());
                let Some(id) = sandbox else {
                    return result(Vec::new());
                };
                result(self.paths(&id, typed).await)
            }
            _ => result(Vec::new()),
        }
    }

    /// Entries of the folder `typed` is in whose names start with its last part, as paths
    /// (folders with a trailing `/`, so completing again goes inside).
    async fn paths(&self, id: &str, typed: &str) -> Vec<String> {
        let (folder, start) = match typed.rsplit_once('/') {
            Some((f, s)) => (f, s),
            None => ("", typed),
        };
        let Ok(dir) = WorkspacePath::parse(folder) else {
            return Vec::new();
        };
        let Ok(listing) = self.backend.files().list(id, &dir).await else {
            return Vec::new();
        };
        listing
            .entries
            .into_iter()
            .filter(|e| e.name.starts_with(start))
            .map(|e| {
                let slash = if e.kind == FileKind::Directory { "/" } else { "" };
                if folder.is_empty() {
                    format!("{}{slash}", e.name)
                } else {
                    format!("{folder}/{}{slash}", e.name)
                }
            })
            .collect()
    }
}
