//! Text kept within a budget: the head and the tail, with a marker for what was dropped, so
//! the end of a traceback always survives. One buffer serves every stream that must not grow
//! without bound (a guest's stdout and stderr, a remote execution's output).

use std::collections::VecDeque;

/// A byte stream capped at `cap` bytes: the first half, a rolling last half, and a count of
/// what fell in between.
#[derive(Debug)]
pub struct HeadTail {
    cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    omitted: u64,
}

/// What a capped stream produced.
#[derive(Debug, Default, Clone)]
pub struct Captured {
    pub text: String,
    /// Bytes dropped from the middle (0 when everything fit).
    pub omitted: u64,
}

impl HeadTail {
    pub fn new(cap: usize) -> Self {
        HeadTail {
            cap: cap.max(64),
            head: Vec::new(),
            tail: VecDeque::new(),
            omitted: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
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

    /// The last line written so far, or the part of it still kept (at most 200 characters).
    pub fn last_line(&self) -> String {
        let bytes: Vec<u8> = if self.tail.is_empty() {
            self.head.clone()
        } else {
            self.tail.iter().copied().collect()
        };
        let text = String::from_utf8_lossy(&bytes);
        let line = text.trim_end_matches('\n').rsplit('\n').next().unwrap_or("");
        let skip = line.chars().count().saturating_sub(200);
        line.chars().skip(skip).collect()
    }

    /// The text so far, with a marker where bytes were dropped, and a fresh start.
    pub fn take(&mut self) -> Captured {
        let mut head = std::mem::take(&mut self.head);
        let mut tail: Vec<u8> = std::mem::take(&mut self.tail).into();
        let mut omitted = std::mem::take(&mut self.omitted);
        if omitted > 0 {
            // The cuts may fall inside characters: drop the pieces with the rest.
            if let Err(e) = std::str::from_utf8(&head)
                && e.error_len().is_none()
            {
                omitted += (head.len() - e.valid_up_to()) as u64;
                head.truncate(e.valid_up_to());
            }
            let partial = tail.iter().take(3).take_while(|&&b| b & 0xC0 == 0x80).count();
            tail.drain(..partial);
            omitted += partial as u64;
        }
        let mut text = String::from_utf8_lossy(&head).into_owned();
        if omitted > 0 {
            text.push_str(&format!(
                "\n[... {omitted} bytes omitted{CUT_MARK}{} byte limit ...]\n",
                self.cap
            ));
        }
        text.push_str(&String::from_utf8_lossy(&tail));
        Captured { text, omitted }
    }
}

/// The words of the marker [`HeadTail::take`] leaves where the middle of a stream was dropped.
const CUT_MARK: &str = ": output over the ";

/// Whether `text` is a capture whose middle was dropped (only its head and tail were kept).
pub fn lost_its_middle(text: &str) -> bool {
    text.contains(CUT_MARK)
}

/// `text` cut to at most about `max_chars` characters, keeping the first quarter and the last
/// three quarters (the end of a traceback matters most), with `marker(omitted)` between them;
/// `None` when it fits.
pub fn head_tail(text: &str, max_chars: usize, marker: impl FnOnce(usize) -> String) -> Option<String> {
    let total = text.chars().count();
    if total <= max_chars {
        return None;
    }
    let head = max_chars / 4;
    let tail = max_chars - head;
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(total - tail)
        .map_or(text.len(), |(i, _)| i);
    Some(format!(
        "{}\n{}\n{}",
        &text[..head_end],
        marker(total - head - tail),
        &text[tail_start..]
    ))
}

#[cfg(test)]
mod head_tail_tests {
    #[test]
    fn keeps_the_end_and_counts_characters() {
        let text: String = (0..1000).map(|i| format!("{i:04}é\n")).collect();
        let cut = super::head_tail(&text, 600, |n| format!("[{n} omitted]")).unwrap();
        assert!(cut.starts_with("0000é"));
        assert!(cut.ends_with("0999é\n"));
        assert!(cut.contains("[5400 omitted]"));
        assert!(cut.chars().count() < 700);
        assert!(super::head_tail("short", 600, |_| unreachable!()).is_none());
    }
}

#[cfg(test)]
mod tests {
    use super::HeadTail;

    #[test]
    fn small_output_passes_through() {
        let mut c = HeadTail::new(100);
        c.push(b"hello\n");
        let got = c.take();
        assert_eq!(got.text, "hello\n");
        assert_eq!(got.omitted, 0);
    }

    #[test]
    fn flood_keeps_head_and_tail_and_counts_the_rest() {
        let mut c = HeadTail::new(100);
        for i in 0..1000u32 {
            c.push(format!("{i:04}\n").as_bytes());
        }
        assert_eq!(c.last_line(), "0999");
        let got = c.take();
        assert!(got.text.starts_with("0000\n0001\n"));
        assert!(got.text.ends_with("0998\n0999\n"));
        assert_eq!(got.omitted, 5000 - 100);
        assert!(got.text.contains("[... 4900 bytes omitted"));
        assert!(c.take().text.is_empty(), "take starts afresh");
    }

    #[test]
    fn one_huge_write_is_bounded_and_cuts_no_character_in_half() {
        let mut c = HeadTail::new(67);
        c.push("é".repeat(10_000).as_bytes());
        c.push(b"END");
        let got = c.take();
        assert!(got.text.ends_with("END"));
        assert!(!got.text.contains('\u{fffd}'), "{}", got.text);
        assert!(got.text.len() < 200);
    }
}
