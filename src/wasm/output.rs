//! Guest stdout/stderr that never trap and never grow past a cap.
//!
//! wasmtime-wasi's `MemoryOutputPipe` traps when full, which would kill the session for
//! printing too much. This stream instead keeps the first half of the budget and a rolling
//! tail of the second half, counts what fell in between, and always tells the guest the write
//! succeeded, so a flood costs bounded memory and the model still sees the end of a traceback.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// What one stream produced during a call.
#[derive(Debug, Default, Clone)]
pub struct Captured {
    pub text: String,
    /// Bytes dropped from the middle (0 when everything fit).
    pub omitted: u64,
}

#[derive(Debug)]
struct Buffer {
    cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    omitted: u64,
    /// Everything written since the last take, for live progress reports.
    total: u64,
}

impl Buffer {
    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let head_cap = self.cap / 2;
        if self.head.len() < head_cap {
            let k = bytes.len().min(head_cap - self.head.len());
            self.head.extend_from_slice(&bytes[..k]);
            bytes = &bytes[k..];
        }
        let tail_cap = self.cap - head_cap;
        if bytes.len() >= tail_cap {
            self.omitted += (self.tail.len() + bytes.len() - tail_cap) as u64;
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - tail_cap..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(tail_cap);
        self.tail.drain(..overflow);
        self.omitted += overflow as u64;
        self.tail.extend(bytes);
    }
}

/// A capped capture shared between the Store's stream and the session that reads it.
#[derive(Clone, Debug)]
pub struct Capture {
    inner: Arc<Mutex<Buffer>>,
}

impl Capture {
    pub fn new(cap: usize) -> Self {
        Capture {
            inner: Arc::new(Mutex::new(Buffer {
                cap: cap.max(64),
                head: Vec::new(),
                tail: VecDeque::new(),
                omitted: 0,
                total: 0,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buffer> {
        // A poisoned lock only means a panic elsewhere mid-push; the bytes are still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes written since the last [`Capture::take`].
    pub fn written(&self) -> u64 {
        self.lock().total
    }

    /// The last complete or partial line written so far (at most 200 characters).
    pub fn last_line(&self) -> String {
        let b = self.lock();
        let bytes: Vec<u8> = if b.tail.is_empty() {
            b.head.clone()
        } else {
            b.tail.iter().copied().collect()
        };
        let text = String::from_utf8_lossy(&bytes);
        let line = text.trim_end_matches('\n').rsplit('\n').next().unwrap_or("");
        line.chars()
            .rev()
            .take(200)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect()
    }

    /// Takes what was written so far and starts afresh for the next call.
    pub fn take(&self) -> Captured {
        let mut b = self.lock();
        let head = std::mem::take(&mut b.head);
        let tail: Vec<u8> = std::mem::take(&mut b.tail).into();
        let omitted = std::mem::take(&mut b.omitted);
        b.total = 0;
        let mut text = String::from_utf8_lossy(&head).into_owned();
        if omitted > 0 {
            text.push_str(&format!(
                "\n[... {omitted} bytes omitted: output over the {} byte limit ...]\n",
                b.cap
            ));
        }
        text.push_str(&String::from_utf8_lossy(&tail));
        Captured { text, omitted }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_passes_through() {
        let c = Capture::new(100);
        c.lock().push(b"hello\n");
        let got = c.take();
        assert_eq!(got.text, "hello\n");
        assert_eq!(got.omitted, 0);
    }

    #[test]
    fn flood_keeps_head_and_tail_and_counts_the_rest() {
        let c = Capture::new(100);
        for i in 0..1000u32 {
            c.lock().push(format!("{i:04}\n").as_bytes());
        }
        let got = c.take();
        assert!(got.text.starts_with("0000\n0001\n"));
        assert!(got.text.ends_with("0998\n0999\n"));
        assert_eq!(got.omitted, 5000 - 100);
        assert!(got.text.contains("[... 4900 bytes omitted"));
        assert!(c.take().text.is_empty(), "take starts afresh");
    }

    #[test]
    fn one_huge_write_is_bounded() {
        let c = Capture::new(64);
        c.lock().push(&vec![b'A'; 10_000]);
        c.lock().push(b"END");
        let got = c.take();
        assert!(got.text.ends_with("END"));
        assert!(got.text.len() < 200);
    }
}
