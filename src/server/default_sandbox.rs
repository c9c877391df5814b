//! The sandbox a call without an id acts on: the one this client session (the process over
//! stdio, one MCP session in remote mode) created or used last, and only that one.
//!
//! Once it is closed there is none until a call creates or names one. Falling back to an older
//! sandbox would let a retried `close_sandbox` delete work the caller never named, and let two
//! agents sharing a token act in each other's sandboxes.

use std::sync::Mutex;

use crate::host::lock::Locked;

#[derive(Debug, Default)]
pub struct DefaultSandbox(Mutex<Option<String>>);

impl DefaultSandbox {
    pub fn get(&self) -> Option<String> {
        self.0.locked().clone()
    }

    /// `id` was created or used by this session: calls without an id act on it from now on.
    pub fn set(&self, id: &str) {
        *self.0.locked() = Some(id.to_string());
    }

    /// `id` is gone: if it was the default, there is none now (never the one before it).
    pub fn forget(&self, id: &str) {
        let mut current = self.0.locked();
        if current.as_deref() == Some(id) {
            *current = None;
        }
    }
}

/// What a tool call did to the default, applied once the call has ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultChange {
    /// The call created or used this sandbox.
    Use(String),
    /// The call closed this sandbox.
    Closed(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_default_never_falls_back_to_an_older_one() {
        let d = DefaultSandbox::default();
        d.set("a");
        d.set("b");
        d.forget("b");
        assert_eq!(d.get(), None);
        d.set("a");
        d.forget("b");
        assert_eq!(
            d.get().as_deref(),
            Some("a"),
            "closing another leaves the default"
        );
    }
}
