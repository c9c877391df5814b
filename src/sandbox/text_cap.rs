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
