//! Turning a turn's raw output (exit status, captured streams, door messages) into the
//! `Execution` the tools report.

use serde::Deserialize;

use super::record::Before;
use super::vm::{Ended, TurnOutput};
use crate::sandbox::timeouts::MAX_CALL_SECONDS;
use crate::sandbox::{Execution, Image, LimitKind, PyError};

/// A message the guest prelude sent through the door.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Message {
    Result {
        repr: String,
    },
    Error {
        name: String,
        value: String,
        traceback: String,
    },
    Image {
        mime: String,
        data: String,
    },
    Dropped {
        reason: String,
    },
    /// A table: its page as JSON (see `Table`).
    Table {
        data: String,
    },
    /// The after-call check: what no longer works of the machinery the host relies on.
    Health {
        problems: String,
    },
}

/// How the interpreter came out of the host's after-call turn.
#[derive(Debug, PartialEq)]
pub enum AfterCall {
    Healthy,
    /// The code broke the interpreter's own machinery; the reason is for the user.
    Broken(String),
    /// The turn ended the interpreter (usually the call's time ran out while drawing).
    Ended(Ended),
}

impl AfterCall {
    /// Why the interpreter must be reset, in words for the user; `None` when it is healthy.
    pub fn reset_reason(&self) -> Option<String> {
        match self {
            AfterCall::Healthy => None,
            AfterCall::Ended(why) => Some(format!(
                "drawing the figures ended the interpreter ({why:?}; usually the call's time limit)"
            )),
            AfterCall::Broken(why) => Some(format!("the code broke the interpreter's own machinery ({why})")),
        }
    }
}

/// Reads the after-call turn: it must finish, and its check must find nothing wrong.
pub fn after_call(out: &TurnOutput) -> AfterCall {
    let status = match &out.status {
        Err(ended) => return AfterCall::Ended(ended.clone()),
        Ok(status) => *status,
    };
    let report = out
        .messages
        .iter()
        .rev()
        .find_map(|raw| match serde_json::from_slice::<Message>(raw) {
            Ok(Message::Health { problems }) => Some(problems),
            _ => None,
        });
    match report {
        Some(problems) if problems.is_empty() && status == 0 => AfterCall::Healthy,
        Some(problems) if !problems.is_empty() => AfterCall::Broken(problems),
        _ => {
            let why = out
                .stderr
                .text
                .trim_end()
                .lines()
                .last()
                .unwrap_or("")
                .trim()
                .to_string();
            AfterCall::Broken(if why.is_empty() {
                "the sandbox's own after-call hook no longer runs".into()
            } else {
                format!("the sandbox's own after-call hook fails: {why}")
            })
        }
    }
}

/// Most images one call returns; the server shows as many as its result budget holds and
/// saves the rest as files.
const MAX_IMAGES: usize = 50;

/// Recovers the exception from stderr when the prelude's hook did not report it (the hook
/// itself failed, or the code replaced `sys.excepthook`).
fn error_from_stderr(stderr: &str) -> PyError {
    let tb_start = stderr.rfind("Traceback (most recent call last):").unwrap_or(0);
    let traceback = stderr[tb_start..].trim_end().to_string();
    let last = traceback.lines().last().unwrap_or("").trim();
    let (name, value) = match last.split_once(": ") {
        Some((n, v)) if !n.contains(' ') => (n.to_string(), v.to_string()),
        _ if !last.contains(' ') && !last.is_empty() => (last.to_string(), String::new()),
        _ => ("Error".to_string(), last.to_string()),
    };
    PyError {
        name,
        value,
        traceback,
    }
}

/// The time limit a call ran under, and whether it was a background run's (whose maximum is
/// the server's, not a call's).
#[derive(Clone, Copy, Debug)]
pub struct TimeLimit {
    pub seconds: f64,
    pub background: bool,
}

fn ended_error(ended: &Ended, limit: TimeLimit) -> (Option<LimitKind>, PyError) {
    let timeout_s = limit.seconds;
    let e = |name: &str, value: String| PyError {
        name: name.into(),
        value,
        traceback: String::new(),
    };
    match ended {
        Ended::Timeout if limit.background => (
            Some(LimitKind::Timeout),
            e(
                "TimeoutError",
                format!(
                    "the background run went past its {timeout_s:.0} s limit and was stopped; start it again with a larger timeout_seconds (up to the server's CODE_SANDBOX_BACKGROUND_TIMEOUT) or make it faster"
                ),
            ),
        ),
        Ended::Timeout => (
            Some(LimitKind::Timeout),
            e(
                "TimeoutError",
                format!(
                    "the code ran past the {timeout_s:.0} s limit and was stopped; pass a larger timeout_seconds (at most {MAX_CALL_SECONDS}), run it in the background (background: true) or make it faster"
                ),
            ),
        ),
        Ended::Fuel => (
            Some(LimitKind::Fuel),
            e(
                "FuelExhausted",
                "the code used up this call's fuel budget (instructions) and was stopped".into(),
            ),
        ),
        Ended::StackOverflow => (
            None,
            e(
                "StackOverflow",
                "the interpreter's stack overflowed (very deep recursion or nesting) and was stopped".into(),
            ),
        ),
        Ended::Exit(code) => (
            None,
            e("SystemExit", format!("os._exit({code}) ended the interpreter")),
        ),
        Ended::Quit(code) => (
            None,
            e("SystemExit", format!("exit({code}) ended the interpreter")),
        ),
        Ended::Cancelled => (
            None,
            e("Cancelled", "the call was cancelled and the code stopped".into()),
        ),
        Ended::Trap(msg) => (
            None,
            e("InterpreterCrash", format!("the interpreter stopped: {msg}")),
        ),
    }
}

/// Builds the execution record. `before` says the interpreter was fresh because
/// an earlier call ended the previous one (with the reason, when the host knows it).
/// `why` as a sentence of its own: capitalised, with a full stop.
pub fn sentence(why: &str) -> String {
    let mut chars = why.chars();
    match chars.next() {
        Some(first) => format!(
            "{}{}.",
            first.to_uppercase(),
            chars.as_str().trim_end_matches('.')
        ),
        None => String::new(),
    }
}

pub fn execution(out: TurnOutput, before: Before, limit: TimeLimit) -> Execution {
    let mut ex = Execution {
        stdout: out.stdout.text,
        stderr: out.stderr.text,
        duration_ms: out.duration.as_millis() as u64,
        state_lost: before != Before::Kept,
        ..Default::default()
    };
    match before {
        Before::Lost { why: reason } => {
            let why = reason
                .map(|r| format!(" (it was reset because {r})"))
                .unwrap_or_default();
            ex.notes.push(format!(
                "This ran in a fresh interpreter{why}: variables and imports from before the reset are gone (files in the workspace remain)."
            ));
        }
        Before::Rewound { why } => ex.notes.push(sentence(&why)),
        Before::Kept => {}
    }
    let mut hook_error = None;
    for raw in &out.messages {
        match serde_json::from_slice::<Message>(raw) {
            Ok(Message::Result { repr }) => ex.result = Some(repr),
            Ok(Message::Image { mime, data }) => {
                use base64::Engine as _;
                match base64::engine::general_purpose::STANDARD.decode(data.as_bytes()) {
                    Ok(_) if ex.images.len() >= MAX_IMAGES || mime != "image/png" => ex.notes.push(format!(
                        "An image was dropped: at most {MAX_IMAGES} PNG images per call."
                    )),
                    Ok(bytes) => match crate::sandbox::png::check(&bytes) {
                        Ok(_) => ex.images.push(Image {
                            mime_type: mime,
                            data: bytes,
                        }),
                        Err(why) => ex.notes.push(format!("An image was dropped: {why}.")),
                    },
                    Err(_) => ex
                        .notes
                        .push("An image could not be decoded and was dropped.".into()),
                }
            }
            Ok(Message::Dropped { reason }) => ex.notes.push(format!("An image was dropped: {reason}.")),
            Ok(Message::Table { data }) => ex.table = serde_json::from_str(&data).ok(),
            Ok(Message::Health { .. }) => {}
            Ok(Message::Error {
                name,
                value,
                traceback,
            }) if hook_error.is_none() => {
                // The first error is the code's own; a later one came from host turns.
                hook_error = Some(PyError {
                    name,
                    value,
                    traceback,
                })
            }
            Ok(Message::Error { .. }) => {}
            Err(_) => {} // the guest may call the door itself; unknown messages are ignored
        }
    }
    match &out.status {
        Ok(0) => {}
        Ok(1) => ex.error = Some(hook_error.unwrap_or_else(|| error_from_stderr(&ex.stderr))),
        Ok(code) => {
            ex.error = Some(hook_error.unwrap_or(PyError {
                name: "SystemExit".into(),
                value: code.to_string(),
                traceback: String::new(),
            }))
        }
        Err(ended) => {
            let (limit, err) = ended_error(ended, limit);
            ex.limit = limit;
            ex.error = Some(err);
            ex.state_lost = true;
            ex.notes.push(
                "The interpreter was reset: variables and imports are gone; files in the workspace remain. The next call starts fresh.".into(),
            );
        }
    }
    if ex.limit.is_none() && ex.error.as_ref().is_some_and(|e| e.name == "MemoryError") {
        ex.limit = Some(LimitKind::Memory);
        if out.memory_budget_full {
            // Python's MemoryError carries no message: say which limit it was.
            let why = "the server-wide memory budget is full: all sandboxes together may hold at most CODE_SANDBOX_TOTAL_MEMORY_MB of memory. Close sandboxes you no longer need (or free memory in this one with del), then try again";
            if let Some(e) = ex.error.as_mut()
                && e.value.is_empty()
            {
                e.value = why.to_string();
            }
            ex.notes.push(format!("MemoryError: {why}."));
        }
    }
    if ex.limit.is_none() && (out.stdout.omitted > 0 || out.stderr.omitted > 0) {
        ex.limit = Some(LimitKind::Output);
    }
    if out.dropped_messages > 0 {
        ex.notes.push(format!(
            "{} result message(s) were too large and were dropped",
            out.dropped_messages
        ));
    }
    ex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_fallback_finds_the_last_exception() {
        let e = error_from_stderr(
            "noise\nTraceback (most recent call last):\n  File \"<turn 2>\", line 1, in <module>\nZeroDivisionError: division by zero\n",
        );
        assert_eq!(e.name, "ZeroDivisionError");
        assert_eq!(e.value, "division by zero");
        assert!(e.traceback.starts_with("Traceback"));
    }

    #[test]
    fn stderr_fallback_handles_bare_names() {
        let e = error_from_stderr("Traceback (most recent call last):\nKeyboardInterrupt\n");
        assert_eq!(e.name, "KeyboardInterrupt");
    }
}
