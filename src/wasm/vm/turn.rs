//! One turn's outcome: what it produced, and why it ended the interpreter when it did; and
//! running the guest's `turn` export on a piece of source.

use std::time::Duration;

use wasmtime::{Memory, Store, Trap, TypedFunc};
use wasmtime_wasi::I32Exit;

use super::output::Captured;
use super::state::GuestState;

/// Why a turn ended the interpreter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    Timeout,
    Fuel,
    StackOverflow,
    /// `os._exit(n)`.
    Exit(i32),
    /// `exit()`/`quit()`: the guest asked to stop.
    Quit(i32),
    /// The client cancelled the call, or the sandbox was closed under it.
    Cancelled,
    Trap(String),
}

/// Everything one turn produced.
#[derive(Debug)]
pub struct TurnOutput {
    /// The turn's exit code (0 ok, 1 exception, n for `sys.exit(n)`), or why the session ended.
    pub status: Result<i32, Ended>,
    pub stdout: Captured,
    pub stderr: Captured,
    pub messages: Vec<Vec<u8>>,
    pub dropped_messages: usize,
    pub duration: Duration,
    /// The server-wide memory budget refused the guest memory during the turn.
    pub memory_budget_full: bool,
}

impl TurnOutput {
    /// Folds the host's after-call turn (figures and the health check) into this one. The
    /// code's own status stands whatever happened there, and that turn's own output is kept
    /// only when it ran cleanly.
    pub fn absorb_after_call(&mut self, after: TurnOutput) {
        self.messages.extend(after.messages);
        self.dropped_messages += after.dropped_messages;
        self.duration += after.duration;
        self.memory_budget_full |= after.memory_budget_full;
        if after.status == Ok(0) {
            self.stdout.text.push_str(&after.stdout.text);
            self.stderr.text.push_str(&after.stderr.text);
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the call's time limit was reached")]
pub struct DeadlineReached;

pub fn classify(err: wasmtime::Error) -> Ended {
    if err.is::<DeadlineReached>() {
        return Ended::Timeout;
    }
    if let Some(exit) = err.downcast_ref::<I32Exit>() {
        return Ended::Exit(exit.0);
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => Ended::Fuel,
        Some(Trap::Interrupt) => Ended::Timeout,
        Some(Trap::StackOverflow) => Ended::StackOverflow,
        _ => Ended::Trap(format!("{err:#}")),
    }
}

pub async fn run_turn(
    store: &mut Store<GuestState>,
    memory: Memory,
    host_alloc: &TypedFunc<i32, i32>,
    turn: &TypedFunc<(i32, i32), i32>,
    code: &[u8],
    len: i32,
) -> wasmtime::Result<i32> {
    if len == 0 {
        return turn.call_async(&mut *store, (0, 0)).await;
    }
    let ptr = host_alloc.call_async(&mut *store, len).await?;
    if ptr == 0 {
        // The guest reports "no memory for this turn's code" itself and lives on.
        return turn.call_async(&mut *store, (0, len)).await;
    }
    memory.write(&mut *store, ptr as u32 as usize, code)?;
    turn.call_async(&mut *store, (ptr, len)).await
}
