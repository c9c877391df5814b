//! MCP over stdio, one JSON-RPC message per line, answering what rmcp's own transport drops.
//!
//! rmcp's line transport silently discards a line over 16 MiB and any line that is not valid
//! JSON, as the other SDKs do, so a client that sent one waits forever for its answer. Here
//! every line gets an answer: a message too large gets an error naming the limit, malformed
//! JSON a parse error (-32700), and well-formed JSON that is no JSON-RPC message an invalid
//! request (-32600), each with the request's id when one can be found (see
//! [`super::request_id`]). Outgoing messages are checked against the result budget as a last
//! line of defence: a client's reader closes the connection on an oversized line, which would
//! end the server and every sandbox with it.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use super::request_id::IdScanner;

/// JSON-RPC error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

/// Room for the JSON-RPC envelope around a result.
const ENVELOPE: usize = 4096;

/// Outcome of reading one line.
enum Line {
    /// A whole line is in the buffer.
    Whole,
    /// The line was over the limit and has been skipped to its end; the scanner saw all of it.
    TooLong {
        size: u64,
    },
    Eof,
}

pub struct StdioTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    max_line: usize,
    /// Set while skipping the rest of an oversized line; lives here because `receive` may be
    /// cancelled between reads.
    skipping: Option<(IdScanner, u64)>,
    write: Arc<Mutex<W>>,
    max_outgoing: usize,
}

impl<R, W> StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// `max_line`: the largest request accepted; `max_result`: the largest result sent.
    pub fn new(read: R, write: W, max_line: usize, max_result: usize) -> Self {
        StdioTransport {
            read: BufReader::with_capacity(1 << 16, read),
            line: Vec::new(),
            max_line,
            skipping: None,
            write: Arc::new(Mutex::new(write)),
            max_outgoing: max_result.saturating_add(ENVELOPE),
        }
    }

    /// Reads one line without ever holding more than `max_line` bytes of it.
    async fn read_line(&mut self) -> std::io::Result<Line> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(Line::Eof);
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let chunk = &available[..take];
            if let Some((scanner, size)) = self.skipping.as_mut() {
                scanner.feed(chunk);
                *size += take as u64;
            } else if self.line.len() + take > self.max_line {
                let mut scanner = IdScanner::default();
                scanner.feed(&self.line);
                scanner.feed(chunk);
                let size = (self.line.len() + take) as u64;
                self.line = Vec::new();
                self.skipping = Some((scanner, size));
            } else {
                self.line.extend_from_slice(chunk);
            }
            self.read.consume(take);
            if newline.is_some() {
                if let Some((scanner, size)) = self.skipping.take() {
                    self.pending_error(
                        scanner.id(),
                        INVALID_REQUEST,
                        format!(
                            "the message is {size} bytes, over the {} byte limit of one request. Send large data in smaller pieces (several write_file calls, or upload_file with source_path for a host file)",
                            self.max_line
                        ),
                    );
                    return Ok(Line::TooLong { size });
                }
                return Ok(Line::Whole);
            }
        }
    }

    /// Writes an error response from a task of its own, so a cancelled `receive` can never
    /// leave half a line on stdout.
    fn pending_error(&self, id: Option<Value>, code: i64, message: String) {
        // JSON-RPC 2.0: an error for a request whose id could not be read carries `"id": null`.
        let body = json!({"jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "error": {"code": code, "message": message}});
        let write = self.write.clone();
        tokio::spawn(async move {
            let _ = write_line(&write, body.to_string().into_bytes()).await;
        });
    }

    /// Decodes a whole line, or answers it with the error that says why it cannot be decoded.
    fn decode(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
        let err = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
            Ok(rmcp::model::JsonRpcMessage::Request(req)) => {
                // rmcp takes a standard method whose params do not fit for a custom one, and
                // would answer "method not found".
                if let rmcp::model::ClientRequest::CustomRequest(custom) = &req.request
                    && super::methods::is_known_method(&custom.method, custom.params.as_ref(), None)
                {
                    self.pending_error(
                        serde_json::to_value(&req.id).ok(),
                        INVALID_PARAMS,
                        format!(
                            "invalid params for '{}': they do not have the fields and types the MCP specification gives this method",
                            custom.method
                        ),
                    );
                    return None;
                }
                return Some(rmcp::model::JsonRpcMessage::Request(req));
            }
            Ok(msg) => return Some(msg),
            Err(e) => e,
        };
        let mut scanner = IdScanner::default();
        scanner.feed(line);
        let id = scanner.id();
        if scanner.is_batch() {
            self.pending_error(
                None,
                INVALID_REQUEST,
                "JSON-RPC batches are not supported by MCP; send one message per line".into(),
            );
            return None;
        }
        let message = match err.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                self.pending_error(
                    id,
                    PARSE_ERROR,
                    format!(
                        "the message is not valid JSON ({err}). Strings must be valid UTF-8 text (no lone surrogates such as \\ud800), numbers must be finite (no NaN or Infinity), and nesting may be at most 128 levels deep"
                    ),
                );
                return None;
            }
            _ => err,
        };
        // Well-formed JSON that is not a message we know.
        let value: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
        let method = value.get("method").and_then(Value::as_str);
        match (method, &id) {
            // A notification we do not know is ignored, as MCP asks of receivers.
            (Some(_), None) if value.get("id").is_none() => None,
            (Some(method), Some(_)) if super::methods::is_known_method(method, value.get("params"), None) => {
                self.pending_error(
                    id,
                    INVALID_PARAMS,
                    format!("invalid params for '{method}': {message}"),
                );
                None
            }
            _ => {
                self.pending_error(
                    id,
                    INVALID_REQUEST,
                    format!("not a valid JSON-RPC 2.0 request: {message}"),
                );
                None
            }
        }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(write: &Mutex<W>, mut bytes: Vec<u8>) -> std::io::Result<()> {
    bytes.push(b'\n');
    let mut w = write.lock().await;
    w.write_all(&bytes).await?;
    w.flush().await
}

/// The message to send in place of one that is too large: an error for a response, nothing
/// for a notification.
fn replacement(item: &TxJsonRpcMessage<RoleServer>, size: usize, limit: usize) -> Option<Vec<u8>> {
    let id = match item {
        rmcp::model::JsonRpcMessage::Response(r) => serde_json::to_value(&r.id).ok()?,
        _ => return None,
    };
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": INTERNAL_ERROR,
            "message": format!("the result was {size} bytes, over the {limit} byte limit (CODE_SANDBOX_RESULT_BYTES); ask for less at once (a part of the file, fewer figures, less output)"),
        }
    });
    Some(body.to_string().into_bytes())
}

impl<R, W> Transport<RoleServer> for StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        let limit = self.max_outgoing;
        async move {
            let bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            if bytes.len() > limit {
                tracing::error!(
                    "an outgoing message of {} bytes is over the {limit} byte limit; it was replaced",
                    bytes.len()
                );
                match replacement(&item, bytes.len(), limit) {
                    Some(b) => return write_line(&write, b).await,
                    None => return Ok(()),
                }
            }
            write_line(&write, bytes).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                Ok(Line::Whole) => {}
                Ok(Line::TooLong { size }) => {
                    tracing::warn!("a request of {size} bytes was over the limit and was refused");
                    continue;
                }
                Ok(Line::Eof) => return None,
                Err(e) => {
                    tracing::error!("could not read stdin: {e}");
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let mut body = line.strip_suffix(b"\n").unwrap_or(&line);
            body = body.strip_suffix(b"\r").unwrap_or(body);
            body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
            if body.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Some(msg) = self.decode(body) {
                return Some(msg);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut w = self.write.lock().await;
        w.flush().await
    }
}
