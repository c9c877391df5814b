//! Finds the `id` of a JSON-RPC request that could not be parsed, so the error can answer it.
//!
//! A message too large to keep, or one serde rejects (a lone surrogate, `NaN`, nesting deeper
//! than its limit), still deserves an answer the client can match to its pending call;
//! otherwise the call waits forever. Clients often put `id` after `params` (the TypeScript SDK
//! does), so the scanner reads the whole message as a stream of bytes, in constant memory and
//! without recursion, tracking only the nesting depth and the top-level keys.

/// Longest raw id kept; longer ones are not worth echoing.
const MAX_ID: usize = 256;
/// Longest top-level key compared (only `id` matters).
const MAX_KEY: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Before the top-level value.
    Start,
    /// Inside the top-level object, before a key.
    Key,
    /// After a key, before its colon.
    Colon,
    /// After a colon, before the value.
    Value,
    /// Inside or after a top-level value, before `,` or `}`.
    Next,
    /// The top-level value is not an object, or the object ended.
    Done,
}

#[derive(Debug)]
pub struct IdScanner {
    expect: Expect,
    /// Nesting depth: 1 inside the top-level object.
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The key being read at depth 1, and whether it is still short enough to compare.
    key: Vec<u8>,
    key_fits: bool,
    reading_key: bool,
    /// The raw bytes of the `id` value while it is read.
    capturing: bool,
    raw: Vec<u8>,
    found: Option<Vec<u8>>,
    top_is_array: bool,
}

impl Default for IdScanner {
    fn default() -> Self {
        IdScanner {
            expect: Expect::Start,
            depth: 0,
            in_string: false,
            escaped: false,
            key: Vec::new(),
            key_fits: true,
            reading_key: false,
            capturing: false,
            raw: Vec::new(),
            found: None,
            top_is_array: false,
        }
    }
}

impl IdScanner {
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.expect == Expect::Done {
                return;
            }
            self.step(b);
        }
    }

    fn keep(&mut self, b: u8) {
        if self.capturing {
            if self.raw.len() < MAX_ID {
                self.raw.push(b);
            } else {
                self.capturing = false;
                self.raw.clear();
            }
        }
    }

    fn end_value(&mut self) {
        if self.capturing {
            self.capturing = false;
            self.found = Some(std::mem::take(&mut self.raw));
        }
    }

    fn step(&mut self, b: u8) {
        if self.in_string {
            if self.reading_key {
                if self.escaped {
                    self.escaped = false;
                    self.key_fits = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    self.reading_key = false;
                    self.expect = Expect::Colon;
                } else if self.key.len() < MAX_KEY {
                    self.key.push(b);
                } else {
                    self.key_fits = false;
                }
                return;
            }
            self.keep(b);
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            return;
        }
        if b.is_ascii_whitespace() {
            return;
        }
        match self.expect {
            Expect::Start => match b {
                b'{' => {
                    self.depth = 1;
                    self.expect = Expect::Key;
                }
                b'[' => {
                    self.top_is_array = true;
                    self.expect = Expect::Done;
                }
                _ => self.expect = Expect::Done,
            },
            Expect::Key => match b {
                b'"' => {
                    self.in_string = true;
                    self.reading_key = true;
                    self.key.clear();
                    self.key_fits = true;
                }
                _ => self.expect = Expect::Done,
            },
            Expect::Colon => match b {
                b':' => self.expect = Expect::Value,
                _ => self.expect = Expect::Done,
            },
            Expect::Value => {
                self.capturing = self.key_fits && self.key == b"id" && self.found.is_none();
                self.raw.clear();
                self.expect = Expect::Next;
                self.value_byte(b);
            }
            Expect::Next => self.value_byte(b),
            Expect::Done => {}
        }
    }

    /// A byte outside strings, inside or after a top-level value.
    fn value_byte(&mut self, b: u8) {
        match b {
            b'"' => {
                self.keep(b);
                self.in_string = true;
            }
            b'{' | b'[' => {
                self.keep(b);
                self.depth += 1;
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.end_value();
                    self.expect = Expect::Done;
                } else {
                    self.keep(b);
                    self.depth -= 1;
                }
            }
            b',' if self.depth == 1 => {
                self.end_value();
                self.expect = Expect::Key;
            }
            _ => self.keep(b),
        }
    }

    /// Whether the message is a JSON array (a batch).
    pub fn is_batch(&self) -> bool {
        self.top_is_array
    }

    /// The id, when the message had one that is a valid JSON-RPC id (a string or an integer).
    pub fn id(&self) -> Option<serde_json::Value> {
        let raw = self.found.as_ref()?;
        match serde_json::from_slice::<serde_json::Value>(raw).ok()? {
            v @ serde_json::Value::String(_) => Some(v),
            serde_json::Value::Number(n) if n.is_i64() => Some(serde_json::Value::Number(n)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IdScanner;
    use serde_json::json;

    fn id_of(s: &str) -> Option<serde_json::Value> {
        let mut sc = IdScanner::default();
        sc.feed(s.as_bytes());
        sc.id()
    }

    #[test]
    fn finds_ids_before_and_after_params() {
        assert_eq!(id_of(r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#), Some(json!(7)));
        assert_eq!(
            id_of(
                r#"{"method":"tools/call","params":{"id":99,"a":[1,{"id":3}],"s":"\"id\":5"},"jsonrpc":"2.0","id":"abc"}"#
            ),
            Some(json!("abc"))
        );
    }

    #[test]
    fn finds_the_id_of_malformed_messages() {
        assert_eq!(id_of(r#"{"params":{"x":NaN},"id":12}"#), Some(json!(12)));
        assert_eq!(id_of(r#"{"params":{"x":"\ud800"},"id":13}"#), Some(json!(13)));
        let deep = format!(
            r#"{{"params":{}{},"id":14}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(id_of(&deep), Some(json!(14)));
    }

    #[test]
    fn works_across_chunk_boundaries() {
        let msg = r#"{"params":{"code":"print(\"}\")"},"id" : 42 }"#;
        for split in 0..msg.len() {
            let mut sc = IdScanner::default();
            sc.feed(&msg.as_bytes()[..split]);
            sc.feed(&msg.as_bytes()[split..]);
            assert_eq!(sc.id(), Some(json!(42)), "split at {split}");
        }
    }

    #[test]
    fn no_id_from_garbage_or_nested_keys() {
        assert_eq!(id_of("garbage"), None);
        assert_eq!(id_of(r#"{"params":{"id":1}}"#), None);
        assert_eq!(id_of(r#"{"id":{"x":1}}"#), None);
        assert_eq!(id_of(r#"{"id":1.5}"#), None);
        let mut sc = IdScanner::default();
        sc.feed(b"[{\"id\":1}]");
        assert!(sc.is_batch());
    }
}
