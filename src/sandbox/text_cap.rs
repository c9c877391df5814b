//! Text kept within a budget: the head and the tail, with a marker for what was dropped, so
//! the end of a traceback always survives.

pub struct CappedText {
    cap: usize,
    head: String,
    tail: String,
    omitted: u64,
}

impl CappedText {
    pub fn new(cap: usize) -> Self {
        CappedText {
            cap: cap.max(64),
            head: String::new(),
            tail: String::new(),
            omitted: 0,
        }
    }

    pub fn push(&mut self, mut s: &str) {
        let head_cap = self.cap / 2;
        if self.head.len() < head_cap {
            let mut k = s.len().min(head_cap - self.head.len());
            while !s.is_char_boundary(k) {
                k -= 1;
            }
            self.head.push_str(&s[..k]);
            s = &s[k..];
        }
        self.tail.push_str(s);
        let tail_cap = self.cap - head_cap;
        if self.tail.len() > tail_cap {
            let mut cut = self.tail.len() - tail_cap;
            while !self.tail.is_char_boundary(cut) {
                cut += 1;
            }
            self.omitted += cut as u64;
            self.tail.drain(..cut);
        }
    }

    /// The text, and whether anything was dropped.
    pub fn finish(self) -> (String, bool) {
        if self.omitted == 0 {
            return (self.head + &self.tail, false);
        }
        (
            format!(
                "{}\n[... {} bytes omitted: output over the {} byte limit ...]\n{}",
                self.head, self.omitted, self.cap, self.tail
            ),
            true,
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_head_and_tail() {
        let mut t = super::CappedText::new(100);
        for i in 0..100 {
            t.push(&format!("{i:03}é\n"));
        }
        let (s, cut) = t.finish();
        assert!(cut);
        assert!(s.starts_with("000é"));
        assert!(s.ends_with("099é\n"));
        assert!(s.contains("bytes omitted"));
    }
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
