//! Guest stdout/stderr that never trap and never grow past a cap.
//!
//! wasmtime-wasi's `MemoryOutputPipe` traps when full, which would kill the session for
//! printing too much. This stream instead keeps the first half of the budget and a rolling
//! tail of the second half, counts what fell in between, and always tells the guest the write
//! succeeded, so a flood costs bounded memory and the model still sees the end of a traceback.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

use crate::host::lock::Locked;
use crate::sandbox::text_cap::HeadTail;
use crate::sandbox::{OutputKind, OutputSink};

pub use crate::sandbox::text_cap::Captured;

/// A capped capture shared between the Store's stream and the session that reads it, and,
/// while a background run goes, a copy of every byte to that run.
#[derive(Clone)]
pub struct Capture {
    inner: Arc<Mutex<HeadTail>>,
    kind: OutputKind,
    tee: Arc<Mutex<Option<OutputSink>>>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// Sends a capture's bytes to a sink until dropped.
pub struct Tee(Vec<Capture>);

impl Drop for Tee {
    fn drop(&mut self) {
        for c in &self.0 {
            *c.tee.locked() = None;
        }
    }
}

impl Capture {
    pub fn new(cap: usize, kind: OutputKind) -> Self {
        Capture {
            inner: Arc::new(Mutex::new(HeadTail::new(cap))),
            kind,
            tee: Arc::default(),
        }
    }

    /// Copies every byte written to these captures to `sink`, until the returned value drops.
    pub fn tee(captures: &[&Capture], sink: OutputSink) -> Tee {
        for c in captures {
            *c.tee.locked() = Some(sink.clone());
        }
        Tee(captures.iter().map(|c| (*c).clone()).collect())
    }

    fn push(&self, bytes: &[u8]) {
        self.lock().push(bytes);
        let sink = self.tee.locked().clone();
        if let Some(sink) = sink {
            sink(self.kind, bytes);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HeadTail> {
        // A poisoned lock only means a panic elsewhere mid-push; the bytes are still usable.
        self.inner.locked()
    }

    /// The last complete or partial line written so far (at most 200 characters).
    pub fn last_line(&self) -> String {
        self.lock().last_line()
    }

    /// Takes what was written so far and starts afresh for the next call.
    pub fn take(&self) -> Captured {
        self.lock().take()
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for Capture {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Always ready: dropping is our back-pressure.
        Ok(1 << 20)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Capture {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.push(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
