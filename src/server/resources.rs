//! Sandbox files as MCP resources, `sandbox://<id>/<path>`, so clients that show resources can
//! open a CSV or a PNG the code made.

use base64::Engine as _;
use rmcp::ErrorData;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource, ResourceContents,
    ResourceTemplate,
};

use super::{SandboxServer, mime};
use crate::sandbox::paths::WorkspacePath;
use crate::sandbox::{FileKind, SandboxError};

/// Files listed per sandbox at most (the list is a convenience, not an index).
const MAX_LISTED: usize = 500;
/// Resources per page of `resources/list`.
const PAGE: usize = 100;
const SCHEME: &str = "sandbox://";

/// `sandbox://{sandbox_id}/{path}`: any file of any open sandbox, not only the listed ones.
pub fn template() -> ResourceTemplate {
    ResourceTemplate::new(format!("{SCHEME}{{sandbox_id}}/{{+path}}"), "sandbox-file")
        .with_title("A file in a sandbox")
        .with_description("A file in a sandbox's workspace (/home/user), by sandbox id and relative path")
}

pub fn uri(id: &str, rel: &str) -> String {
    format!("{SCHEME}{id}/{rel}")
}

/// Splits `sandbox://<id>/<path>` into the id and a checked path.
pub fn parse_uri(uri: &str) -> Result<(String, WorkspacePath), ErrorData> {
    // The URI goes in `data` of every refusal (SEP-2164), so a client knows which read failed.
    let data = || Some(serde_json::json!({ "uri": uri }));
    let rest = uri
        .strip_prefix(SCHEME)
        .ok_or_else(|| ErrorData::invalid_params(format!("'{uri}' is not a sandbox:// resource"), data()))?;
    let (id, path) = rest
        .split_once('/')
        .ok_or_else(|| ErrorData::invalid_params(format!("'{uri}' names no file"), data()))?;
    let path =
        WorkspacePath::parse_file(path).map_err(|e| ErrorData::invalid_params(e.to_string(), data()))?;
    Ok((id.to_string(), path))
}

impl SandboxServer {
    /// The one template: a file of a sandbox, by its id and path.
    pub(super) fn resource_templates(&self) -> ListResourceTemplatesResult {
        ListResourceTemplatesResult::with_all_items(vec![template()])
    }

    /// One page of the sandboxes' files; the cursor is the offset of the next page.
    pub(super) async fn resources(&self, cursor: Option<String>) -> Result<ListResourcesResult, ErrorData> {
        let start = match cursor.as_deref() {
            None | Some("") => 0,
            Some(c) => c.parse::<usize>().map_err(|_| {
                ErrorData::invalid_params(
                    format!("'{c}' is not a cursor this server gave; list from the start"),
                    None,
                )
            })?,
        };
        let mut out = Vec::new();
        // In creation order, which a listing does not change (last use would move between pages).
        let mut all = self.backend.list().await;
        all.sort_by(|a, b| (&a.created_at, &a.sandbox_id).cmp(&(&b.created_at, &b.sandbox_id)));
        for status in all {
            let id = status.sandbox_id;
            let mut queue = vec![WorkspacePath::root()];
            let mut listed = 0usize;
            while let Some(dir) = queue.pop() {
                let Ok(entries) = self.backend.files().list(&id, &dir).await else {
                    continue;
                };
                for e in entries.entries {
                    match e.kind {
                        FileKind::Directory => queue.push(dir.join(&e.name)),
                        FileKind::File if listed < MAX_LISTED => {
                            listed += 1;
                            out.push(
                                Resource::new(uri(&id, &e.path), e.name.clone())
                                    .with_mime_type(mime::guess(&e.name))
                                    .with_size(e.size)
                                    .with_description(format!("{} in sandbox {id}", e.path)),
                            );
                        }
                        _ => {}
                    }
                }
            }
        }
        let total = out.len();
        let page: Vec<Resource> = out.into_iter().skip(start).take(PAGE).collect();
        let next = start + page.len();
        let mut result = ListResourcesResult::with_all_items(page);
        if next < total {
            result.next_cursor = Some(next.to_string());
        }
        Ok(result)
    }

    pub(super) async fn resource(&self, uri: &str) -> Result<ReadResourceResult, ErrorData> {
        let (id, path) = parse_uri(uri)?;
        let budget = self.settings.transport_budget();
        let too_large = |size: u64| {
            ErrorData::invalid_params(
                format!(
                    "'{}' is {size} bytes, too large to send as a resource within the {budget} byte result limit (CODE_SANDBOX_RESULT_BYTES). Read a part of it with execute_code (for example pandas' nrows, or f.read(100000)), or split it into smaller files",
                    path.relative()
                ),
                None,
            )
        };
        let bytes = match self.backend.files().read(&id, &path, budget as u64).await {
            Ok(b) => b,
            Err(SandboxError::TooLarge { size, .. }) => return Err(too_large(size)),
            // The URI in `data`, as SEP-2164 asks, so a client knows which read failed.
            Err(e) => {
                return Err(ErrorData::resource_not_found(
                    e.to_string(),
                    Some(serde_json::json!({ "uri": uri })),
                ));
            }
        };
        let size = bytes.len() as u64;
        let mime = mime::guess(&path.relative());
        let contents = match (mime.starts_with("image/"), String::from_utf8(bytes)) {
            (false, Ok(text)) => ResourceContents::TextResourceContents {
                uri: uri.to_string(),
                mime_type: Some(
                    if mime == "application/octet-stream" {
                        "text/plain"
                    } else {
                        mime
                    }
                    .into(),
                ),
                text,
                meta: None,
            },
            (_, Ok(text)) => ResourceContents::BlobResourceContents {
                uri: uri.to_string(),
                mime_type: Some(mime.into()),
                blob: base64::engine::general_purpose::STANDARD.encode(text.as_bytes()),
                meta: None,
            },
            (_, Err(e)) => ResourceContents::BlobResourceContents {
                uri: uri.to_string(),
                mime_type: Some(mime.into()),
                blob: base64::engine::general_purpose::STANDARD.encode(e.as_bytes()),
                meta: None,
            },
        };
        let result = ReadResourceResult::new(vec![contents]);
        if super::reply::size_of(&result) > budget {
            return Err(too_large(size));
        }
        Ok(result)
    }
}
