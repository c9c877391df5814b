//! One stream of a background run's output, kept in memory: the last [`KEEP`] bytes, read
//! in pages from byte offsets that stay valid while older output is dropped.

/// Bytes of each stream a run keeps (in memory and in its file); past it the oldest go.
pub const KEEP: usize = 8 << 20;

/// One stream of a run's output: the last [`KEEP`] bytes, and how many came before them.
#[derive(Default)]
pub struct Stream {
    dropped: u64,
    buf: Vec<u8>,
}

/// A piece of output read from an offset.
pub struct Page {
    pub text: String,
    /// Where the next read starts.
    pub next: u64,
    /// Bytes between the offset asked for and the oldest kept, no longer available.
    pub skipped: u64,
    /// Whether more output follows `next` already.
    pub more: bool,
}

impl Stream {
    /// A stream as its file and record have it.
    pub fn from_parts(dropped: u64, buf: Vec<u8>) -> Stream {
        Stream { dropped, buf }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() > KEEP {
            let cut = self.buf.len() - KEEP;
            self.buf.drain(..cut);
            self.dropped += cut as u64;
        }
    }

    pub fn total(&self) -> u64 {
        self.dropped + self.buf.len() as u64
    }

    /// At most `max` bytes from `offset`, ending on a whole UTF-8 character.
    pub fn page(&self, offset: u64, max: usize) -> Page {
        let start = offset.clamp(self.dropped, self.total());
        let from = (start - self.dropped) as usize;
        let mut end = (from + max).min(self.buf.len());
        while end > from && end < self.buf.len() && (self.buf[end] & 0xC0) == 0x80 {
            end -= 1;
        }
        Page {
            text: String::from_utf8_lossy(&self.buf[from..end]).into_owned(),
            next: self.dropped + end as u64,
            skipped: start.saturating_sub(offset),
            more: end < self.buf.len(),
        }
    }

    /// The last line printed (at most 200 characters), for a glance at where a run is.
    pub fn last_line(&self) -> String {
        let tail = &self.buf[self.buf.len().saturating_sub(4096)..];
        let text = String::from_utf8_lossy(tail);
        let line = text.trim_end().rsplit('\n').next().unwrap_or("");
        line.chars()
            .rev()
            .take(200)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}
