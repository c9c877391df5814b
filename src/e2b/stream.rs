//! Reading `/execute`'s NDJSON stream into an [`Execution`]: one JSON object per line,
//! keepalives ignored, and a stream that ends without `end_of_execution` reported as such.

use base64::Engine as _;
use serde_json::Value;

use crate::sandbox::text_cap::HeadTail;
use crate::sandbox::{Execution, Image, LimitKind, OutputKind, OutputSink, PyError};

/// Largest single line accepted (a big PNG fits).
const MAX_LINE: usize = 32 << 20;

pub struct Collector {
    stdout: HeadTail,
    stderr: HeadTail,
    buf: Vec<u8>,
    pub ex: Execution,
    pub ended: bool,
    /// Gets every piece of output as it arrives (a background run).
    pub sink: Option<OutputSink>,
}

impl Collector {
    pub fn new(output_limit: usize) -> Self {
        Collector {
            stdout: HeadTail::new(output_limit),
            stderr: HeadTail::new(output_limit),
            buf: Vec::new(),
            ex: Execution::default(),
            ended: false,
            sink: None,
        }
    }

    /// Feeds bytes as they arrive; complete lines are handled at once.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), String> {
        self.buf.extend_from_slice(chunk);
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=pos).collect();
            self.line(&line)?;
        }
        if self.buf.len() > MAX_LINE {
            return Err(format!("a line of the execution stream is over {MAX_LINE} bytes"));
        }
        Ok(())
    }

    fn line(&mut self, line: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(line)
            .map_err(|_| "the execution stream is not UTF-8".to_string())?
            .trim();
        if text.is_empty() {
            return Ok(());
        }
        let v: Value = serde_json::from_str(text).map_err(|e| format!("bad NDJSON line: {e}"))?;
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            kind @ ("stdout" | "stderr") => {
                let text = s("text");
                let (capture, kind) = match kind {
                    "stdout" => (&mut self.stdout, OutputKind::Stdout),
                    _ => (&mut self.stderr, OutputKind::Stderr),
                };
                capture.push(text.as_bytes());
                if let Some(sink) = &self.sink {
                    sink(kind, text.as_bytes());
                }
            }
            "error" => {
                self.ex.error = Some(PyError {
                    name: s("name"),
                    value: s("value"),
                    traceback: match v.get("traceback") {
                        Some(Value::Array(lines)) => lines
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join("\n"),
                        _ => s("traceback"),
                    },
                })
            }
            "result" => {
                let main = v.get("is_main_result").and_then(Value::as_bool).unwrap_or(false);
                if let Some(png) = v.get("png").and_then(Value::as_str) {
                    match base64::engine::general_purpose::STANDARD.decode(png) {
                        Ok(data) => match crate::sandbox::png::check(&data) {
                            Ok(_) => self.ex.images.push(Image {
                                mime_type: "image/png".into(),
                                data,
                            }),
                            Err(why) => self.ex.notes.push(format!("An image was dropped: {why}.")),
                        },
                        Err(_) => self
                            .ex
                            .notes
                            .push("An image could not be decoded and was dropped.".into()),
                    }
                }
                if main {
                    self.ex.result = v.get("text").and_then(Value::as_str).map(str::to_string);
                }
            }
            "end_of_execution" => self.ended = true,
            // number_of_executions, keepalive and types added later carry nothing we show.
            _ => {}
        }
        Ok(())
    }

    pub fn finish(mut self) -> Execution {
        let out = self.stdout.take();
        let err = self.stderr.take();
        self.ex.stdout = out.text;
        self.ex.stderr = err.text;
        if self.ex.limit.is_none() && (out.omitted > 0 || err.omitted > 0) {
            self.ex.limit = Some(LimitKind::Output);
        }
        if !self.ended && self.ex.limit.is_none() {
            self.ex.error.get_or_insert(PyError {
                name: "ConnectionError".into(),
                value: "the execution stream ended before end_of_execution; the code may not have finished"
                    .into(),
                traceback: String::new(),
            });
        }
        self.ex
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_stream_becomes_an_execution() {
        let mut c = Collector::new(1000);
        // A real 1x1 PNG: bytes that are not one are dropped.
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
        let stream = format!(
            "{{\"type\":\"number_of_executions\",\"execution_count\":1}}\n{{\"type\":\"stdout\",\"text\":\"hi\\n\"}}\n{{\"type\":\"keepalive\"}}\n{{\"type\":\"result\",\"is_main_result\":false,\"png\":\"{png}\"}}\n{{\"type\":\"result\",\"is_main_result\":true,\"text\":\"42\"}}\n{{\"type\":\"end_of_execution\"}}\n"
        );
        // Split mid-line to check the framing.
        let (a, b) = stream.as_bytes().split_at(37);
        c.feed(a).unwrap();
        c.feed(b).unwrap();
        let ex = c.finish();
        assert_eq!(ex.stdout, "hi\n");
        assert_eq!(ex.result.as_deref(), Some("42"));
        assert_eq!(ex.images.len(), 1);
        assert!(ex.error.is_none());
    }

    #[test]
    fn bytes_that_are_not_a_png_are_dropped_saying_so() {
        let mut c = Collector::new(1000);
        let fake = base64::engine::general_purpose::STANDARD.encode(b"<svg onload=alert(1)>");
        c.feed(format!("{{\"type\":\"result\",\"is_main_result\":false,\"png\":\"{fake}\"}}\n{{\"type\":\"end_of_execution\"}}\n").as_bytes())
            .unwrap();
        let ex = c.finish();
        assert!(ex.images.is_empty());
        assert!(ex.notes.iter().any(|n| n.contains("not a PNG")), "{:?}", ex.notes);
    }

    #[test]
    fn a_stream_cut_short_is_reported() {
        let mut c = Collector::new(1000);
        c.feed(b"{\"type\":\"stdout\",\"text\":\"partial\"}\n").unwrap();
        let ex = c.finish();
        assert_eq!(ex.error.unwrap().name, "ConnectionError");
    }
}
