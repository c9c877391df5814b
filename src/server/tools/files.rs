//! The file tools: list_files, read_file, write_file, upload_file, save_file.

use base64::Engine as _;

use crate::sandbox::paths::WorkspacePath;
use crate::sandbox::{FileKind, SandboxError, blocking};
use crate::server::{figures, file_part, save, save_folder, upload};

use super::shared::page_of;
use rmcp::model::JsonObject;
use rmcp::{tool, tool_router};

use super::shared::{ToolResult, attempt};
use crate::server::SandboxServer;
use crate::server::args::*;
use crate::server::outputs::*;
use crate::server::reply::{fail, ok, parse};
use crate::server::schema;

/// Most entries one `list_files` page holds (fewer when long names would pass the budget).
const LIST_PAGE: usize = 1000;

/// Largest `write_file` content.
const MAX_WRITE: usize = 50 << 20;

#[tool_router(router = file_tools, vis = "pub(super)")]
impl SandboxServer {
    #[tool(
        description = "List the files in a sandbox folder (default: the workspace /home/user; /mnt lists the user's shared folders, read-only).",
        input_schema = schema::input::<ListFilesArgs>(),
        output_schema = schema::output::<ListResult>()
    )]
    async fn list_files(&self, args: JsonObject) -> ToolResult {
        let a: ListFilesArgs = attempt!(parse("list_files", args));
        let place = attempt!(self.place(a.path.as_deref().unwrap_or("")));
        let (id, _) = attempt!(self.resolve(a.sandbox_id, true).await);
        let listing = attempt!(self.list_place(&id, &place).await);
        let (total, listed) = (listing.total, listing.entries.len());
        let offset = a.offset.unwrap_or(0).min(listed as u64) as usize;
        let fixed = 4096 + place.shown().len() * 2;
        let budget = self.settings.result_budget();
        let (page, next_offset) = page_of(listing.entries, offset, LIST_PAGE, fixed, budget);
        let next = offset + page.len();
        let mut text = format!("{} ({total} entries)\n", place.guest());
        if offset > 0 {
            text.push_str(&format!("  (from entry {offset})\n"));
        }
        for e in &page {
            let suffix = if e.kind == FileKind::Directory { "/" } else { "" };
            text.push_str(&format!("  {}{suffix}  {} bytes\n", e.name, e.size));
        }
        if let Some(n) = next_offset {
            text.push_str(&format!(
                "... {} more entries: call list_files with offset={n} for the next page\n",
                listed - next
            ));
        }
        let listed_only = (total > listed as u64).then_some(listed as u64);
        if let Some(first) = listed_only {
            text.push_str(&format!(
                "list_files reaches the first {first} of the {total} entries by name; list the rest with os.scandir in execute_code\n"
            ));
        }
        Ok(ok(
            &ListResult {
                sandbox_id: id,
                path: place.shown(),
                total,
                offset: offset as u64,
                next_offset,
                listed_only,
                entries: page,
            },
            text,
        ))
    }

    #[tool(
        description = "Read a file from a sandbox (or a shared folder under /mnt). Text comes back as `content`, other bytes as `content_base64`.",
        input_schema = schema::input::<ReadFileArgs>(),
        output_schema = schema::output::<ReadResult>()
    )]
    async fn read_file(&self, args: JsonObject) -> ToolResult {
        let a: ReadFileArgs = attempt!(parse("read_file", args));
        let place = attempt!(self.file_place(&a.file_path));
        let (id, _) = attempt!(self.resolve(a.sandbox_id, true).await);
        let path = place.shown();
        // The size is checked before the file is read, so a huge file costs nothing.
        let bytes = match self.read_place(&id, &place, file_part::MAX_PAGED).await {
            Ok(b) => b,
            Err(SandboxError::TooLarge { size, .. }) => {
                return Ok(fail(format!(
                    "'{path}' is {size} bytes; read_file pages through files of up to {} MiB. Read a part of it with execute_code (for example pandas' nrows, or f.seek and f.read(50000)), or look at it in code",
                    file_part::MAX_PAGED >> 20
                )));
            }
            Err(e) => return Ok(fail(e)),
        };
        let offset = a.offset.unwrap_or(0);
        if offset > bytes.len() as u64 {
            return Ok(fail(format!(
                "offset {offset} is past the end of '{path}', which has {} bytes",
                bytes.len()
            )));
        }
        let budget = self.settings.result_budget();
        // A picture too large to send is decoded and shrunk: CPU and memory, so off the
        // protocol's threads and within the process's bound on figures decoded at once.
        let permit = match figures::png_long_side(&bytes) {
            Some(_) => figures::DECODING.acquire().await.ok(),
            None => None,
        };
        let answer = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let ask = file_part::Ask {
                sandbox_id: &id,
                path: &path,
                offset,
                budget,
            };
            file_part::reply(&ask, &bytes)
        })
        .await;
        Ok(answer.unwrap_or_else(|e| fail(format!("the file could not be prepared: {e}"))))
    }

    #[tool(
        description = "Write a text file into a sandbox (replacing it atomically; folders are created).",
        input_schema = schema::input::<WriteFileArgs>(),
        output_schema = schema::output::<WriteResult>()
    )]
    async fn write_file(&self, args: JsonObject) -> ToolResult {
        let a: WriteFileArgs = attempt!(parse("write_file", args));
        let path = attempt!(WorkspacePath::parse_file(&a.file_path));
        if a.content.len() > MAX_WRITE {
            return Ok(fail(format!(
                "the content is {} bytes, over the {MAX_WRITE} byte limit of write_file",
                a.content.len()
            )));
        }
        let (id, _) = attempt!(self.resolve(a.sandbox_id, true).await);
        let n = attempt!(
            self.backend
                .files()
                .write(&id, &path, a.content.into_bytes())
                .await
        );
        Ok(ok(
            &WriteResult {
                sandbox_id: id,
                path: path.relative(),
                bytes_written: n,
            },
            format!("Wrote {n} bytes to {}.", path.guest()),
        ))
    }

    #[tool(
        description = "Copy a file into a sandbox: a host file from an allowed folder (source_path), or bytes given as content_base64.",
        input_schema = schema::input::<UploadFileArgs>(),
        output_schema = schema::output::<WriteResult>()
    )]
    async fn upload_file(&self, args: JsonObject) -> ToolResult {
        let a: UploadFileArgs = attempt!(parse("upload_file", args));
        let (bytes, default_name) = match (&a.source_path, &a.content_base64) {
            (Some(_), Some(_)) => return Ok(fail("give either source_path or content_base64, not both")),
            (None, None) => {
                return Ok(fail(
                    "give source_path (a host file) or content_base64 (the bytes)",
                ));
            }
            (Some(_), None) if !self.host_uploads => {
                return Ok(fail(
                    "upload_file with source_path is off on this remote server: paths would name files on the server, not on your machine. Send the bytes as content_base64 instead (the server's operator can allow server paths with CODE_SANDBOX_HTTP_HOST_UPLOADS=true)",
                ));
            }
            (Some(src), None) => {
                let roots = self.settings.upload_roots();
                let settings = self.settings.clone();
                let src = src.clone();
                attempt!(
                    blocking(move || upload::read_allowed(&src, &roots, &settings.home_canonical())).await
                )
            }
            (None, Some(b64)) => {
                if b64.len() as u64 > upload::MAX_UPLOAD * 4 / 3 + 4 {
                    return Ok(fail(format!(
                        "content_base64 is over the {} byte upload limit",
                        upload::MAX_UPLOAD
                    )));
                }
                let bytes = attempt!(
                    base64::engine::general_purpose::STANDARD
                        .decode(b64.trim())
                        .map_err(|e| format!("content_base64 is not valid base64: {e}"))
                );
                (bytes, String::new())
            }
        };
        let dest = match (&a.destination_path, default_name.is_empty()) {
            (Some(d), _) => d.clone(),
            (None, false) => default_name,
            (None, true) => return Ok(fail("destination_path is needed with content_base64")),
        };
        let path = attempt!(WorkspacePath::parse_file(&dest));
        let (id, _) = attempt!(self.resolve(a.sandbox_id, true).await);
        let n = attempt!(self.backend.files().write(&id, &path, bytes).await);
        Ok(ok(
            &WriteResult {
                sandbox_id: id,
                path: path.relative(),
                bytes_written: n,
            },
            format!("Uploaded {n} bytes to {}.", path.guest()),
        ))
    }

    #[tool(
        description = "Save a file from a sandbox onto the user's computer, into one of the folders they allowed (CODE_SANDBOX_SAVE_DIRS). An existing file is replaced only with overwrite: true; the file is written beside its destination and then moved into place, so nothing is ever half-written.",
        input_schema = schema::input::<SaveFileArgs>(),
        output_schema = schema::output::<SaveResult>()
    )]
    async fn save_file(&self, args: JsonObject) -> ToolResult {
        let a: SaveFileArgs = attempt!(parse("save_file", args));
        let folders = self.settings.save_folders();
        let home = self.settings.home_canonical();
        let given = a.destination.clone();
        let (dest, made) = attempt!(
            blocking(move || {
                let ready = save_folder::prepare(&given, &folders, &home)?;
                Ok((save::destination(&given, &ready.roots, &home)?, ready.made))
            })
            .await
        );
        let place = attempt!(self.file_place(&a.path));
        let (id, _) = attempt!(self.resolve(a.sandbox_id, false).await);
        let overwrite = a.overwrite.unwrap_or(false);
        let dest = std::sync::Arc::new(dest);
        let target = dest.clone();
        let aside = attempt!(blocking(move || target.begin(overwrite)).await);
        let out = attempt!(aside.file.try_clone().map_err(SandboxError::io("could not save")));
        let bytes = match self.copy_place(&id, &place, save::MAX_SAVE, out).await {
            Ok(n) => n,
            Err(SandboxError::IsDirectory { path }) => {
                return Ok(fail(format!(
                    "'{path}' is a folder; save_file copies one file. Make an archive of it first (shutil.make_archive in execute_code) and save that"
                )));
            }
            Err(SandboxError::TooLarge { size, .. }) => {
                return Ok(fail(format!(
                    "'{}' is {size} bytes, over the {} MiB save_file copies at once. Compress it, or split it into parts",
                    place.shown(),
                    save::MAX_SAVE >> 20
                )));
            }
            Err(e) => return Ok(fail(dest.copy_failed(e, overwrite))),
        };
        let saved = attempt!(blocking(move || dest.finish(aside, overwrite, bytes)).await);
        let verb = if saved.replaced { "Replaced" } else { "Saved" };
        let made = made.map(|m| save::shown(&m));
        let text = format!(
            "{verb} {} with {} ({} bytes).{}",
            save::shown(&saved.path),
            place.guest(),
            saved.bytes,
            made.as_ref().map_or(String::new(), |m| format!(
                " The folder {m} did not exist; it was made."
            )),
        );
        Ok(ok(
            &SaveResult {
                sandbox_id: id,
                path: place.shown(),
                destination: save::shown(&saved.path),
                bytes_written: saved.bytes,
                replaced: saved.replaced,
                folder_made: made,
            },
            text,
        ))
    }
}
