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

use crate::lock::Locked;
use crate::sandbox::text_cap::HeadTail;

pub use crate::sandbox::text_cap::Captured;

/// A capped capture shared between the Store's stream and the session that reads it.
#[derive(Clone, Debug)]
pub struct Capture {
    inner: Arc<Mutex<HeadTail>>,
}

impl Capture {
    pub fn new(cap: usize) -> Self {
        Capture {
            inner: Arc::new(Mutex::new(HeadTail::new(cap))),
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
        self.lock().push(&bytes);
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
        self.lock().push(buf);
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
