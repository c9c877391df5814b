//! Calls waiting for one sandbox. A sandbox runs one call at a time, so a call that waits for
//! it must not hold a call slot meanwhile (twelve queued calls on one sandbox would take every
//! slot from everyone else): it takes its turn on the sandbox first, then a slot. And only so
//! many may wait on one sandbox; more are refused, saying so.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::host::lock::Locked;
use crate::sandbox::SandboxError;

/// Calls that may wait for one sandbox while another runs in it.
pub const MAX_WAITING_PER_SANDBOX: usize = 4;

struct Line {
    turn: Arc<tokio::sync::Mutex<()>>,
    waiting: AtomicUsize,
}

#[derive(Default)]
pub struct SandboxQueues {
    lines: Mutex<HashMap<String, Arc<Line>>>,
}

/// A call's turn on its sandbox; the next waiting call goes when it drops.
pub struct Turn {
    _held: tokio::sync::OwnedMutexGuard<()>,
}

/// Undoes the waiting count however the wait ends (turn taken, call cancelled).
struct Waiting(Arc<Line>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

impl SandboxQueues {
    /// Waits for `id`'s turn, or refuses when too many calls already wait for it.
    pub async fn turn(&self, id: &str) -> Result<Turn, SandboxError> {
        let line = {
            let mut lines = self.lines.locked();
            // Lines nobody holds or waits on are dropped as others come and go.
            lines.retain(|_, l| Arc::strong_count(l) > 1 || l.turn.try_lock().is_err());
            lines
                .entry(id.to_string())
                .or_insert_with(|| {
                    Arc::new(Line {
                        turn: Arc::new(tokio::sync::Mutex::new(())),
                        waiting: AtomicUsize::new(0),
                    })
                })
                .clone()
        };
        if let Ok(held) = line.turn.clone().try_lock_owned() {
            return Ok(Turn { _held: held });
        }
        let before = line.waiting.fetch_add(1, Ordering::SeqCst);
        let waiting = Waiting(line.clone());
        if before >= MAX_WAITING_PER_SANDBOX {
            return Err(SandboxError::Queued {
                id: id.to_string(),
                waiting: before,
            });
        }
        let held = line.turn.clone().lock_owned().await;
        drop(waiting);
        Ok(Turn { _held: held })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_wait_their_turn_and_past_the_bound_are_refused() {
        let q = Arc::new(SandboxQueues::default());
        let first = q.turn("a").await.unwrap();
        let mut waiters = Vec::new();
        for _ in 0..MAX_WAITING_PER_SANDBOX {
            let q = q.clone();
            waiters.push(tokio::spawn(async move { q.turn("a").await.map(|_| ()) }));
        }
        tokio::task::yield_now().await;
        for _ in 0..50 {
            if q.lines.lock().unwrap()["a"].waiting.load(Ordering::SeqCst) == MAX_WAITING_PER_SANDBOX {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let refused = q.turn("a").await.err().expect("one too many").to_string();
        assert!(refused.contains("4 more are waiting for it"), "{refused}");
        let other = q.turn("b").await;
        assert!(other.is_ok(), "another sandbox is not held up");
        drop(first);
        for w in waiters {
            assert!(w.await.unwrap().is_ok(), "each waiter got its turn");
        }
    }
}
