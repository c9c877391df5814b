//! The file tools on an E2B sandbox, through envd's filesystem API.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::backend::E2bBackend;
use super::client::E2bError;
use crate::sandbox::paths::WorkspacePath;
use crate::sandbox::{FileEntry, FileKind, Listing, SandboxError, SandboxFiles};

fn entry_kind(t: &str) -> FileKind {
    match t {
        "FILE_TYPE_FILE" => FileKind::File,
        "FILE_TYPE_DIRECTORY" => FileKind::Directory,
        "FILE_TYPE_SYMLINK" => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

#[async_trait]
impl SandboxFiles for E2bBackend {
    async fn list(&self, id: &str, path: &WorkspacePath) -> Result<Listing, SandboxError> {
        let e = self.entry(id).await?;
        let v = self
            .fleet
            .client
            .filesystem(&e.remote, "ListDir", json!({"path": path.guest(), "depth": 1}))
            .await
            .map_err(|err| match err {
                E2bError::Gone(404) => SandboxError::FileNotFound {
                    path: path.relative(),
                },
                other => other.into(),
            })?;
        let out: Vec<FileEntry> = v
            .get("entries")
            .and_then(Value::as_array)
            .map(|a| a.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|en| {
                let name = en.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                FileEntry {
                    path: path.join(&name).relative(),
                    kind: entry_kind(en.get("type").and_then(Value::as_str).unwrap_or("")),
                    size: match en.get("size") {
                        Some(Value::String(s)) => s.parse().unwrap_or(0),
                        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
                        _ => 0,
                    },
                    name,
                }
            })
            .collect();
        Ok(Listing::whole(out))
    }

    async fn read(&self, id: &str, path: &WorkspacePath, limit: u64) -> Result<Vec<u8>, SandboxError> {
        let e = self.entry(id).await?;
        let bytes = self
            .fleet
            .client
            .read_file(&e.remote, &path.guest())
            .await
            .map_err(read_error(path))?;
        // envd sends the whole file; the limit still holds for what we hand on.
        if bytes.len() as u64 > limit {
            return Err(SandboxError::TooLarge {
                path: path.relative(),
                size: bytes.len() as u64,
                limit,
            });
        }
        Ok(bytes)
    }

    /// Piece by piece as envd sends it, so a large file is never held whole.
    async fn copy_out(
        &self,
        id: &str,
        path: &WorkspacePath,
        limit: u64,
        out: std::fs::File,
    ) -> Result<u64, SandboxError> {
        use tokio::io::AsyncWriteExt;
        let e = self.entry(id).await?;
        let client = &self.fleet.client;
        let mut resp = client
            .open_file(&e.remote, &path.guest())
            .await
            .map_err(read_error(path))?;
        let mut out = tokio::fs::File::from_std(out);
        let failed = |e| SandboxError::io(format!("could not copy '{}'", path.relative()))(e);
        let mut copied = 0u64;
        while let Some(piece) = crate::e2b::client::Client::next_piece(&mut resp).await? {
            copied += piece.len() as u64;
            if copied > limit {
                return Err(SandboxError::TooLarge {
                    path: path.relative(),
                    size: copied,
                    limit,
                });
            }
            out.write_all(&piece).await.map_err(&failed)?;
        }
        out.flush().await.map_err(&failed)?;
        Ok(copied)
    }

    async fn write(&self, id: &str, path: &WorkspacePath, bytes: Vec<u8>) -> Result<u64, SandboxError> {
        let e = self.entry(id).await?;
        let n = bytes.len() as u64;
        self.fleet
            .client
            .write_file(&e.remote, &path.guest(), bytes)
            .await?;
        Ok(n)
    }
}

/// A download's error, as the file tools say it.
fn read_error(path: &WorkspacePath) -> impl Fn(E2bError) -> SandboxError + '_ {
    move |err| match err {
        E2bError::Gone(404) => SandboxError::FileNotFound {
            path: path.relative(),
        },
        E2bError::Status { status: 400, .. } => SandboxError::IsDirectory {
            path: path.relative(),
        },
        other => other.into(),
    }
}
