//! The ten tools. Each parses its arguments, resolves the sandbox, calls the backend through
//! the traits, and shapes the reply; the work itself lives in the backend.

use std::time::Duration;

use base64::Engine as _;
use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ProgressNotificationParam, RequestMetaObject};
use rmcp::{ErrorData, Peer, RoleServer, tool, tool_router};
use tokio_util::sync::CancellationToken;

use super::SandboxServer;
use super::args::*;
use super::exec_result::{Keep, OVERFLOW_DIR, RawFigure, shape};
use super::outputs::*;
use super::reply::{add_note, fail, ok, parse, size_of};
use super::{mime, resources, schema, upload};
use crate::config::MAX_TIMEOUT;
use crate::sandbox::paths::WorkspacePath;
use crate::sandbox::{
    CreateOptions, ExecOptions, Execution, FileKind, ProgressFn, SandboxError, SandboxStatus,
};

type ToolResult = Result<CallToolResult, ErrorData>;

/// Largest source `execute_code` accepts: refused before the interpreter sees it.
const MAX_CODE: usize = 10 << 20;
/// Most entries one `list_files` page holds (fewer when long names would pass the budget).
const LIST_PAGE: usize = 1000;
/// Most sandboxes one `get_sandbox_status` page lists: enough to find the one wanted, little
/// enough not to flood the model's context when hundreds are kept.
const STATUS_PAGE: usize = 100;
/// Largest `write_file` content.
const MAX_WRITE: usize = 50 << 20;

/// Unwraps a step or returns its tool error.
macro_rules! attempt {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Ok(fail(e)),
        }
    };
}

fn timeout_arg(t: Option<u64>) -> Result<Option<Duration>, SandboxError> {
    match t {
        None => Ok(None),
        Some(0) => Err(SandboxError::InvalidArgument(
            "timeout_seconds must be at least 1".into(),
        )),
        Some(s) if s > MAX_TIMEOUT.as_secs() => Err(SandboxError::InvalidArgument(format!(
            "timeout_seconds is {s}, above the {} s maximum; split the work into shorter calls",
            MAX_TIMEOUT.as_secs()
        ))),
        Some(s) => Ok(Some(Duration::from_secs(s))),
    }
}

fn check_code(code: &str) -> Result<(), SandboxError> {
    if code.len() > MAX_CODE {
        return Err(SandboxError::InvalidArgument(format!(
            "the code is {} bytes, over the {} byte limit; write large data to a file with write_file or upload_file and read it from the code",
            code.len(),
            MAX_CODE
        )));
    }
    Ok(())
}

/// Options of a call that runs code: its time limit, the client's cancellation, progress.
fn exec_options(
    timeout: Option<Duration>,
    ct: CancellationToken,
    meta: &RequestMetaObject,
    peer: &Peer<RoleServer>,
) -> ExecOptions {
    ExecOptions {
        timeout,
        cancel: Some(ct),
        progress: progress_reporter(meta, peer),
    }
}

/// Sends MCP progress notifications when the client gave a progress token.
fn progress_reporter(meta: &RequestMetaObject, peer: &Peer<RoleServer>) -> Option<ProgressFn> {
    let token = meta.get_progress_token()?;
    let peer = peer.clone();
    Some(Arc::new(move |elapsed: f64, last_line: String| {
        let mut message = format!("running for {elapsed:.0} s");
        if !last_line.is_empty() {
            message.push_str(&format!("; last output: {last_line}"));
        }
        let param = ProgressNotificationParam::new(token.clone(), elapsed).with_message(message);
        let peer = peer.clone();
        tokio::spawn(async move {
            let _ = peer.notify_progress(param).await;
        });
    }))
}

fn checkpoint_reply(
    sandbox_id: String,
    checkpoint: crate::sandbox::Checkpoint,
    text: String,
) -> CallToolResult {
    ok(
        &CheckpointResult {
            sandbox_id,
            checkpoint,
        },
        text,
    )
}

/// One page of a listing, from `offset`: at most `most` items, and within `budget` after
/// `fixed` bytes, each item counted twice (it appears in the structured content and as a line
/// of text); and where the next page starts, if there is one.
fn page_of<T: serde::Serialize>(
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

fn status_text(s: &SandboxStatus) -> String {
    let mut text = format!(
        "{}: {} (last used {}, created {}, {} executions, {} bytes on disk)",
        s.sandbox_id,
        s.state.as_str(),
        s.last_used_at,
        s.created_at,
        s.executions,
        s.disk_bytes
    );
    if !s.checkpoints.is_empty() {
        let names: Vec<&str> = s.checkpoints.iter().map(|c| c.name.as_str()).collect();
        text.push_str(&format!("; checkpoints: {}", names.join(", ")));
    }
    text
}

impl SandboxServer {
    /// The sandbox a call acts on: the given id, else the most recent, else (when `create`)
    /// a new one. The note says when one was made.
    async fn resolve(&self, id: Option<String>, create: bool) -> Result<(String, Vec<String>), SandboxError> {
        if let Some(id) = id.filter(|s| !s.trim().is_empty()) {
            return Ok((id, Vec::new()));
        }
        if let Some(id) = self.backend.most_recent().await {
            return Ok((id, Vec::new()));
        }
        if !create {
            return Err(SandboxError::InvalidArgument(
                "no sandbox is open; create one with create_sandbox (or just call execute_code)".into(),
            ));
        }
        let info = self.backend.create(CreateOptions::default()).await?;
        let note = format!("Created sandbox {} for this call.", info.sandbox_id);
        Ok((info.sandbox_id, vec![note]))
    }

    /// Shapes an execution into a result within the budget, saving what did not fit in the
    /// sandbox (when `keep`) so the result can point at it.
    async fn exec_result(
        &self,
        id: String,
        mut ex: Execution,
        notes: Vec<String>,
        keep: bool,
    ) -> CallToolResult {
        let budget = self.settings.result_budget();
        let keep = if keep {
            Keep::In {
                sandbox_id: id.clone(),
                folder: overflow_folder(),
            }
        } else {
            Keep::Nowhere
        };
        let images = std::mem::take(&mut ex.images);
        let sid = id.clone();
        // Decoding and re-encoding figures is CPU work: off the protocol's threads.
        let shaped = tokio::task::spawn_blocking(move || {
            let figures = images.into_iter().map(RawFigure::new).collect();
            shape(sid, ex, figures, notes, &keep, budget)
        })
        .await;
        let shaped = match shaped {
            Ok(s) => s,
            Err(e) => return fail(format!("the result could not be prepared: {e}")),
        };
        let mut result = shaped.result;
        for f in shaped.overflow {
            if let Err(e) = self.backend.files().write(&id, &f.path, f.bytes).await {
                add_note(
                    &mut result,
                    &format!("{} could not be saved: {e}", f.path.guest()),
                );
            }
        }
        result
    }
}

/// A fresh folder for one call's overflow: sortable by time, unique within the process.
fn overflow_folder() -> WorkspacePath {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    WorkspacePath::root()
        .join(OVERFLOW_DIR)
        .join(&format!("{stamp}-{n}"))
}

#[tool_router(vis = "pub(super)")]
impl SandboxServer {
    #[tool(
        description = "Create a new Python sandbox with its own interpreter and files. Returns its sandbox_id.",
        input_schema = schema::input::<CreateSandboxArgs>(),
        output_schema = schema::output::<crate::sandbox::SandboxInfo>()
    )]
    async fn create_sandbox(&self, args: JsonObject) -> ToolResult {
        let a: CreateSandboxArgs = attempt!(parse("create_sandbox", args));
        attempt!(timeout_arg(a.timeout_seconds));
        let info = attempt!(
            self.backend
                .create(CreateOptions {
                    timeout_seconds: a.timeout_seconds,
                    memory_mb: a.memory_mb,
                })
                .await
        );
        let mut text = format!(
            "Created sandbox {} (Python {}, {} backend). Working folder: {}. Memory: {} MiB.",
            info.sandbox_id, info.python_version, info.backend, info.workspace, info.limits.memory_mb
        );
        for n in &info.notes {
            text.push_str(&format!("\n[note] {n}"));
        }
        Ok(ok(&info, text))
    }

    #[tool(
        description = "Close a sandbox and delete its files.",
        input_schema = schema::input::<SandboxIdArgs>(),
        output_schema = schema::output::<CloseResult>()
    )]
    async fn close_sandbox(&self, args: JsonObject) -> ToolResult {
        let a: SandboxIdArgs = attempt!(parse("close_sandbox", args));
        if a.sandbox_id.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return Ok(fail(
                "sandbox_id is empty; close_sandbox never guesses which sandbox to delete. Give the id (get_sandbox_status lists them), or omit it to close the most recent one",
            ));
        }
        let (id, _) = attempt!(self.resolve(a.sandbox_id, false).await);
        attempt!(self.backend.close(&id).await);
        Ok(ok(
            &CloseResult {
                sandbox_id: id.clone(),
                closed: true,
            },
            format!("Closed sandbox {id}."),
        ))
    }

    #[tool(
        description = "Make a new sandbox that is a copy of another: its variables, imports and files. The two are independent from then on (the copy gets random generators of its own). Use it to try something risky without losing the original.",
        input_schema = schema::input::<SandboxIdArgs>(),
        output_schema = schema::output::<ForkResult>()
    )]
    async fn fork_sandbox(&self, args: JsonObject) -> ToolResult {
        let a: SandboxIdArgs = attempt!(parse("fork_sandbox", args));
        let (id, _) = attempt!(self.resolve(a.sandbox_id, false).await);
        let info = attempt!(self.backend.fork(&id).await);
        let text = format!(
            "Sandbox {} is a copy of {id} (variables, imports and files).",
            info.sandbox_id
        );
        Ok(ok(
            &ForkResult {
                sandbox_id: info.sandbox_id,
                forked_from: id,
                limits: info.limits,
            },
            text,
        ))
    }

    #[tool(
        description = "Save a sandbox's variables, imports and files as they are now, to return to later with restore_sandbox. Checkpoints count towards the sandbox's disk quota and are deleted with it; /tmp is not saved.",
        input_schema = schema::input::<CheckpointArgs>(),
        output_schema = schema::output::<CheckpointResult>()
    )]
    async fn checkpoint_sandbox(&self, args: JsonObject) -> ToolResult {
        let a: CheckpointArgs = attempt!(parse("checkpoint_sandbox", args));
        let (id, _) = attempt!(self.resolve(a.sandbox_id, false).await);
        let cp = attempt!(self.backend.checkpoint(&id, a.name.as_deref()).await);
        let text = format!(
            "Saved checkpoint '{}' of sandbox {id} ({} bytes). restore_sandbox with checkpoint '{}' returns to it.",
            cp.name, cp.bytes, cp.name
        );
        Ok(checkpoint_reply(id, cp, text))
    }

    #[tool(
        description = "Roll a sandbox back to a checkpoint: its variables, imports and files become what they were then (what came after is lost). Never guesses: an empty sandbox_id is an error.",
        input_schema = schema::input::<RestoreArgs>(),
        output_schema = schema::output::<CheckpointResult>()
    )]
    async fn restore_sandbox(&self, args: JsonObject) -> ToolResult {
        let a: RestoreArgs = attempt!(parse("restore_sandbox", args));
        if a.sandbox_id.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return Ok(fail(
                "sandbox_id is empty; restore_sandbox never guesses which sandbox to roll back. Give the id (get_sandbox_status lists them), or omit it for the most recent one",
            ));
        }
        if a.checkpoint.trim().is_empty() {
            return Ok(fail(
                "checkpoint is empty; give a checkpoint's name (get_sandbox_status lists them)",
            ));
        }
        let (id, _) = attempt!(self.resolve(a.sandbox_id, false).await);
        let cp = attempt!(self.backend.restore(&id, &a.checkpoint).await);
        let text = format!(
            "Sandbox {id} is back at checkpoint '{}' (saved {}).",
            cp.name, cp.created_at
        );
        Ok(checkpoint_reply(id, cp, text))
    }

    #[tool(
        description = "Status of one sandbox (given its id), or a list of all sandboxes, most recently used first, with their state (ready, busy, paused: saved, and brought back on its next use) and when each was last used. Long lists come in pages (offset, next_offset).",
        input_schema = schema::input::<StatusArgs>(),
        output_schema = schema::output::<StatusResult>()
    )]
    async fn get_sandbox_status(&self, args: JsonObject) -> ToolResult {
        let a: StatusArgs = attempt!(parse("get_sandbox_status", args));
        if let Some(id) = a.sandbox_id.filter(|s| !s.trim().is_empty()) {
            let s = attempt!(self.backend.status(&id).await);
            let text = status_text(&s);
            return Ok(ok(
                &StatusResult {
                    sandbox: Some(s),
                    sandboxes: None,
                    total: None,
                    next_offset: None,
                },
                text,
            ));
        }
        let all = self.backend.list().await;
        let total = all.len();
        let offset = a.offset.unwrap_or(0).min(total as u64) as usize;
        let (page, next_offset) = page_of(all, offset, STATUS_PAGE, 4096, self.settings.result_budget());
        let next = offset + page.len();
        let mut text = if total == 0 {
            "No sandbox is open.".to_string()
        } else {
            let mut t = format!("{total} sandbox(es), most recently used first");
            if offset > 0 {
                t.push_str(&format!(", from {offset}"));
            }
            t.push_str(":\n");
            t.push_str(&page.iter().map(status_text).collect::<Vec<_>>().join("\n"));
            t
        };
        if let Some(n) = next_offset {
            text.push_str(&format!(
                "\n... {} more: call get_sandbox_status with offset={n} for the next page",
                total - next
            ));
        }
        Ok(ok(
            &StatusResult {
                sandbox: None,
                sandboxes: Some(page),
                total: Some(total as u64),
                next_offset,
            },
            text,
        ))
    }

    #[tool(
        description = "Run Python code in a sandbox. Variables, imports and files persist between calls. Returns stdout, stderr, the value of a final expression, any error with its traceback, and matplotlib figures as images.",
        input_schema = schema::input::<ExecuteCodeArgs>(),
        output_schema = schema::output::<ExecResult>()
    )]
    async fn execute_code(
        &self,
        args: JsonObject,
        ct: CancellationToken,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> ToolResult {
        let a: ExecuteCodeArgs = attempt!(parse("execute_code", args));
        attempt!(check_code(&a.code));
        let timeout = attempt!(timeout_arg(a.timeout_seconds));
        let (id, notes) = attempt!(self.resolve(a.sandbox_id, true).await);
        let ex = attempt!(
            self.backend
                .execute(&id, &a.code, exec_options(timeout, ct, &meta, &peer))
                .await
        );
        Ok(self.exec_result(id, ex, notes, true).await)
    }

    #[tool(
        description = "Install a pure-Python package into a sandbox from the local wheel cache (there is no network); its dependencies come along. Many packages (numpy, pandas, matplotlib, scipy, scikit-learn, ...) are built in already. Pass package_name '?' to list what can be installed.",
        input_schema = schema::input::<InstallPackageArgs>(),
        output_schema = schema::output::<InstallResult>()
    )]
    async fn install_package(&self, args: JsonObject) -> ToolResult {
        let a: InstallPackageArgs = attempt!(parse("install_package", args));
        let (id, _) = attempt!(self.resolve(a.sandbox_id, true).await);
        let out = attempt!(self.backend.install_package(&id, &a.package_name).await);
        let list = |ps: &[crate::sandbox::Package]| {
            ps.iter()
                .map(|p| format!("{} {}", p.name, p.version))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let text = if let Some(av) = &out.available {
            format!(
                "Installable ({}): {}\nAlready built in ({}): {}",
                av.len(),
                list(av),
                out.built_in.as_ref().map_or(0, Vec::len),
                out.built_in.as_deref().map(list).unwrap_or_default()
            )
        } else if out.already_available {
            format!(
                "{} is already available in the sandbox; just import it.",
                a.package_name.trim()
            )
        } else {
            format!("Installed {}. Import it in execute_code.", list(&out.installed))
        };
        Ok(ok(
            &InstallResult {
                sandbox_id: id,
                outcome: out,
            },
            text,
        ))
    }

    #[tool(
        description = "Create a fresh sandbox, run code in it once, and close it. For one-off snippets that need no state.",
        input_schema = schema::input::<CreateRunCloseArgs>(),
        output_schema = schema::output::<ExecResult>()
    )]
    async fn create_run_close(
        &self,
        args: JsonObject,
        ct: CancellationToken,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> ToolResult {
        let a: CreateRunCloseArgs = attempt!(parse("create_run_close", args));
        attempt!(check_code(&a.code));
        let timeout = attempt!(timeout_arg(a.timeout_seconds));
        let info = attempt!(self.backend.create(CreateOptions::default()).await);
        let id = info.sandbox_id;
        let ex = self
            .backend
            .execute(&id, &a.code, exec_options(timeout, ct, &meta, &peer))
            .await;
        let result = match ex {
            Ok(ex) => self.exec_result(id.clone(), ex, Vec::new(), false).await,
            Err(e) => fail(e),
        };
        if let Err(e) = self.backend.close(&id).await {
            tracing::warn!("create_run_close could not close {id}: {e}");
        }
        Ok(result)
    }

    #[tool(
        description = "List the files in a sandbox folder (default: the workspace /home/user).",
        input_schema = schema::input::<ListFilesArgs>(),
        output_schema = schema::output::<ListResult>()
    )]
    async fn list_files(&self, args: JsonObject) -> ToolResult {
        let a: ListFilesArgs = attempt!(parse("list_files", args));
        let path = attempt!(WorkspacePath::parse(a.path.as_deref().unwrap_or("")));
        let (id, _) = attempt!(self.resolve(a.sandbox_id, true).await);
        let mut entries = attempt!(self.backend.files().list(&id, &path).await);
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let total = entries.len();
        let offset = a.offset.unwrap_or(0).min(total as u64) as usize;
        let fixed = 4096 + path.relative().len() * 2;
        let (page, next_offset) = page_of(entries, offset, LIST_PAGE, fixed, self.settings.result_budget());
        let next = offset + page.len();
        let mut text = format!("{} ({total} entries)\n", path.guest());
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
                total - next
            ));
        }
        Ok(ok(
            &ListResult {
                sandbox_id: id,
                path: path.relative(),
                total: total as u64,
                offset: offset as u64,
                next_offset,
                entries: page,
            },
            text,
        ))
    }

    #[tool(
        description = "Read a file from a sandbox. Text comes back as `content`, other bytes as `content_base64`.",
        input_schema = schema::input::<ReadFileArgs>(),
        output_schema = schema::output::<ReadResult>()
    )]
    async fn read_file(&self, args: JsonObject) -> ToolResult {
        let a: ReadFileArgs = attempt!(parse("read_file", args));
        let path = attempt!(WorkspacePath::parse_file(&a.file_path));
        let (id, _) = attempt!(self.resolve(a.sandbox_id, true).await);
        let budget = self.settings.result_budget();
        let too_large = |size: u64| {
            fail(format!(
                "'{}' is {size} bytes, too large to return within the {budget} byte result limit (CODE_SANDBOX_RESULT_BYTES). Read a part of it with execute_code (for example pandas' nrows, or f.read(100000)), or look at it in code",
                path.relative()
            ))
        };
        // The size is checked before the file is read, so a huge file costs nothing.
        let bytes = match self.backend.files().read(&id, &path, budget as u64).await {
            Ok(b) => b,
            Err(SandboxError::TooLarge { size, .. }) => return Ok(too_large(size)),
            Err(e) => return Ok(fail(e)),
        };
        let size = bytes.len() as u64;
        let (content, content_base64, text) = match String::from_utf8(bytes) {
            Ok(s) => (Some(s.clone()), None, s),
            Err(e) => {
                let b64 = base64::engine::general_purpose::STANDARD.encode(e.as_bytes());
                (
                    None,
                    Some(b64),
                    format!(
                        "'{}' is binary ({size} bytes); its bytes are in content_base64.",
                        path.relative()
                    ),
                )
            }
        };
        let mime = mime::guess(&path.relative());
        let image = content_base64.clone().filter(|_| mime::is_image(mime));
        let mut reply = ok(
            &ReadResult {
                sandbox_id: id.clone(),
                path: path.relative(),
                size,
                content,
                content_base64,
            },
            text,
        );
        if let Some(b64) = image {
            // Pictures are shown as pictures, and named as a resource the client can reopen.
            reply.content.push(ContentBlock::image(b64, mime));
            reply.content.push(ContentBlock::text(format!(
                "resource: {}",
                resources::uri(&id, &path.relative())
            )));
        }
        // Text comes back twice (for the model and as structured content), base64 is larger
        // than the bytes: what the budget cannot hold is refused, not cut.
        if size_of(&reply) > budget {
            return Ok(too_large(size));
        }
        Ok(reply)
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
                let src = src.clone();
                attempt!(
                    tokio::task::spawn_blocking(move || upload::read_allowed(&src, &roots))
                        .await
                        .map_err(|e| SandboxError::Backend(Box::new(e)))
                        .and_then(|r| r)
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
}
