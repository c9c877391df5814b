//! Log lines no caller can forge. Values from outside (a principal's name, a sandbox id a
//! client sent, a run id read from a file sandbox code can rewrite) are printed as one field
//! each: quoted and escaped when they hold white space, `=`, quotes or control characters, so
//! `bob sandbox=x` or a newline cannot add a field or a line. And the writer all of the log
//! goes through escapes every control character of an event but its final newline (and the
//! invisible characters that reorder or break a terminal's text), and takes the credentials
//! out of every URL in it (`crate::telemetry::redact`), whatever printed it: libraries log the URLs they
//! fail on (rmcp's transport quotes a servers-file URL with its `?api_key=`).

use std::fmt;
use std::io::{self, Write};

/// A value from outside, printed as one log field.
pub struct Field<'a>(pub &'a str);

impl fmt::Display for Field<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plain = !self.0.is_empty()
            && self.0.chars().all(|c| {
                !c.is_whitespace() && !c.is_control() && !hidden(c) && !matches!(c, '=' | '"' | '\\')
            });
        if plain {
            f.write_str(self.0)
        } else {
            // Debug quotes and escapes: "\n", "\u{1b}", "\"".
            write!(f, "{:?}", self.0)
        }
    }
}

/// Characters that change how the rest of a line shows: line and paragraph separators and
/// bidirectional controls.
fn hidden(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{61C}')
}

/// One event as the log shows it: URLs without credentials, control characters escaped but
/// the final newline.
fn safe_event(text: &str) -> String {
    let text = crate::telemetry::redact::urls(text);
    let (body, end) = match text.strip_suffix('\n') {
        Some(b) => (b, "\n"),
        None => (&*text, ""),
    };
    let mut out = String::with_capacity(text.len() + 8);
    for c in body.chars() {
        if c != '\t' && (c.is_control() || hidden(c)) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out.push_str(end);
    out
}

/// The log's writer: stderr, one event per write, its control characters escaped.
pub struct SafeStderr;

impl Write for SafeStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        io::stderr()
            .lock()
            .write_all(safe_event(&String::from_utf8_lossy(buf)).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_values_stay_one_field() {
        assert_eq!(Field("sbx-0123abcd").to_string(), "sbx-0123abcd");
        assert_eq!(Field("alice@example.com").to_string(), "alice@example.com");
        assert_eq!(Field("bob sandbox=x").to_string(), "\"bob sandbox=x\"");
        assert_eq!(Field("a\nb").to_string(), "\"a\\nb\"");
        assert_eq!(Field("a\u{1b}[31m").to_string(), "\"a\\u{1b}[31m\"");
        assert_eq!(Field("x\u{2028}y").to_string(), "\"x\\u{2028}y\"");
        assert_eq!(Field("").to_string(), "\"\"");
    }

    #[test]
    fn an_event_stays_one_line_without_credentials() {
        assert_eq!(
            safe_event("INFO x\nFAKE \u{1b}[31m url (http://h/mcp?api_key=k)\n"),
            "INFO x\\u{a}FAKE \\u{1b}[31m url (http://h/mcp?…)\n"
        );
    }
}
