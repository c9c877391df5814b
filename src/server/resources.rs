//! Sandbox files as MCP resources, `sandbox://<id>/<path>`, so clients that show resources can
//! open a CSV or a PNG the code made.

use base64::Engine as _;
use rmcp::ErrorData;
use rmcp::model::{ListResourcesResult, ReadResourceResult, Resource, ResourceContents};

use super::{SandboxServer, mime};
use crate::sandbox::paths::WorkspacePath;

/// Files listed per sandbox at most (the list is a convenience, not an index).
const MAX_LISTED: usize = 500;
const SCHEME: &str = "sandbox://";

pub fn uri(id: &str, rel: &str) -> String {
    format!("{SCHEME}{id}/{rel}")
}

/// Splits `sandbox://<id>/<path>` into the id and a checked path.
pub fn parse_uri(uri: &str) -> Result<(String, WorkspacePath), ErrorData> {
    let rest = uri
        .strip_prefix(SCHEME)
        .ok_or_else(|| ErrorData::invalid_params(format!("'{uri}' is not a sandbox:// resource"), None))?;
    let (id, path) = rest
        .split_once('/')
        .ok_or_else(|| ErrorData::invalid_params(format!("'{uri}' names no file"), None))?;
    let path = WorkspacePath::parse_file(path).map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
    Ok((id.to_string(), path))
}

impl SandboxServer {
    pub(super) async fn resources(&self) -> ListResourcesResult {
        let mut out = Vec::new();
        for status in self.backend.list().await {
            let id = status.sandbox_id;
            let mut queue = vec![WorkspacePath::root()];
            let mut listed = 0usize;
            while let Some(dir) = queue.pop() {
                let Ok(entries) = self.backend.files().list(&id, &dir).await else {
                    continue;
                };
                for e in entries {
                    match e.kind.as_str() {
                        "directory" => queue.push(dir.join(&e.name)),
                        "file" if listed < MAX_LISTED => {
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
        ListResourcesResult::with_all_items(out)
    }

    pub(super) async fn resource(&self, uri: &str) -> Result<ReadResourceResult, ErrorData> {
        let (id, path) = parse_uri(uri)?;
        let bytes = self
            .backend
            .files()
            .read(&id, &path, crate::sandbox::MAX_RESOURCE_READ)
            .await
            .map_err(|e| ErrorData::resource_not_found(e.to_string(), None))?;
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
        Ok(ReadResourceResult::new(vec![contents]))
    }
}
