//! Fair admission: at most `capacity` calls run at once, and when one ends the next slot goes
//! to the waiting principal with the fewest calls running (the longest-waiting call among
//! equals), so one principal's flood cannot starve the others. A plain FIFO semaphore would
//! hand every slot to whoever queued the most. With a `share`, one principal also runs at most
//! that many at once, so long calls of one never hold every slot while another waits.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::host::lock::Locked;
use tokio::sync::oneshot;

/// Why a call was not admitted.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The principal already has this many calls waiting.
    QueueFull(usize),
}

pub struct FairGate {
    capacity: usize,
    /// Calls one principal may run at once.
    share: usize,
    max_waiting: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    running: usize,
    next_seq: u64,
    principals: HashMap<Arc<str>, Load>,
}

#[derive(Default)]
struct Load {
    running: usize,
    waiting: VecDeque<(u64, oneshot::Sender<()>)>,
}

/// A running call's slot; dropping it hands the slot on.
pub struct Admitted {
    gate: Arc<FairGate>,
    who: Arc<str>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.gate.release(&self.who);
    }
}

/// A waiting call; if it is dropped (the client cancelled), its place in line goes, or the
/// slot it was just handed is passed on.
struct Waiting {
    gate: Arc<FairGate>,
    who: Arc<str>,
    seq: u64,
    rx: oneshot::Receiver<()>,
    done: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut st = self.gate.lock();
        let still_queued = st.principals.get_mut(&self.who).and_then(|l| {
            let at = l.waiting.iter().position(|(s, _)| *s == self.seq)?;
            l.waiting.remove(at)
        });
        if still_queued.is_none() && self.rx.try_recv().is_ok() {
            // Granted between the wake-up and the drop: give the slot back.
            drop(st);
            self.gate.release(&self.who);
        }
    }
}

impl FairGate {
    pub fn new(capacity: usize, max_waiting: usize) -> Arc<Self> {
        Self::with_share(capacity, max_waiting, capacity)
    }

    /// A gate where one principal runs at most `share` calls at once.
    pub fn with_share(capacity: usize, max_waiting: usize, share: usize) -> Arc<Self> {
        Arc::new(FairGate {
            share: share.clamp(1, capacity.max(1)),
            capacity: capacity.max(1),
            max_waiting: max_waiting.max(1),
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a few counters; a panic elsewhere cannot leave it half-updated in a
        // way worse than refusing every call, so a poisoned lock is used as is.
        self.state.locked()
    }

    /// Waits for a slot for `who`. Cancel-safe: dropping the future gives up the place.
    pub async fn admit(self: &Arc<Self>, who: &Arc<str>) -> Result<Admitted, Refused> {
        let (seq, rx) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            // Calls waiting only because their principal is at its share are not ahead.
            let share = self.share;
            let nobody_waits = st
                .principals
                .values()
                .all(|l| l.waiting.is_empty() || l.running >= share);
            let mine = st.principals.get(who).map_or(0, |l| l.running);
            if st.running < self.capacity && nobody_waits && mine < self.share {
                st.running += 1;
                st.principals.entry(who.clone()).or_default().running += 1;
                return Ok(self.admitted(who));
            }
            let max_waiting = self.max_waiting;
            let seq = st.next_seq;
            st.next_seq += 1;
            let load = st.principals.entry(who.clone()).or_default();
            if load.waiting.len() >= max_waiting {
                return Err(Refused::QueueFull(max_waiting));
            }
            let (tx, rx) = oneshot::channel();
            load.waiting.push_back((seq, tx));
            (seq, rx)
        };
        let mut waiting = Waiting {
            gate: self.clone(),
            who: who.clone(),
            seq,
            rx,
            done: false,
        };
        // The sender lives in the queue until it is used, so this ends only with a grant.
        let granted = (&mut waiting.rx).await.is_ok();
        waiting.done = true;
        if granted {
            Ok(self.admitted(who))
        } else {
            // Unreachable in practice (the queue holds the sender); treat as a full queue.
            Err(Refused::QueueFull(self.max_waiting))
        }
    }

    fn admitted(self: &Arc<Self>, who: &Arc<str>) -> Admitted {
        Admitted {
            gate: self.clone(),
            who: who.clone(),
        }
    }

    fn release(&self, who: &Arc<str>) {
        let mut guard = self.lock();
        let st = &mut *guard;
        st.running = st.running.saturating_sub(1);
        if let Some(l) = st.principals.get_mut(who) {
            l.running = l.running.saturating_sub(1);
        }
        while st.running < self.capacity {
            // The waiting principal with the fewest running calls; among equals, the oldest call.
            let share = self.share;
            let next = st
                .principals
                .iter()
                .filter(|(_, l)| l.running < share)
                .filter_map(|(name, l)| l.waiting.front().map(|(seq, _)| (l.running, *seq, name.clone())))
                .min();
            let Some((_, _, name)) = next else { break };
            let Some(load) = st.principals.get_mut(&name) else {
                break;
            };
            let Some((_, tx)) = load.waiting.pop_front() else {
                break;
            };
            if tx.send(()).is_ok() {
                load.running += 1;
                st.running += 1;
            }
        }
        st.principals
            .retain(|_, l| l.running > 0 || !l.waiting.is_empty());
    }

    /// Calls running now, for tests and logs.
    pub fn running(&self) -> usize {
        self.lock().running
    }

    /// Calls waiting for a slot now, for the metrics.
    pub fn waiting(&self) -> usize {
        self.lock().principals.values().map(|l| l.waiting.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn name(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    #[tokio::test]
    async fn a_flooding_principal_does_not_starve_another() {
        let gate = FairGate::new(2, 100);
        let (a, b) = (name("a"), name("b"));
        // `a` holds both slots and queues 50 more.
        let held: Vec<_> = vec![gate.admit(&a).await.unwrap(), gate.admit(&a).await.unwrap()];
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..50 {
            let (gate, a, order) = (gate.clone(), a.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _p = gate.admit(&a).await.unwrap();
                order.lock().unwrap().push(format!("a{i}"));
                tokio::time::sleep(Duration::from_millis(1)).await;
            }));
            tokio::task::yield_now().await;
        }
        let (gate2, b2, order2) = (gate.clone(), b.clone(), order.clone());
        let tb = tokio::spawn(async move {
            let _p = gate2.admit(&b2).await.unwrap();
            order2.lock().unwrap().push("b".to_string());
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(held);
        tb.await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        let order = order.lock().unwrap();
        let at = order.iter().position(|s| s == "b").unwrap();
        assert!(at <= 1, "b ran after {at} of a's queued calls: {order:?}");
        assert_eq!(gate.running(), 0);
    }

    #[tokio::test]
    async fn one_principal_never_holds_more_than_its_share() {
        let gate = FairGate::with_share(4, 10, 3);
        let (a, b) = (name("a"), name("b"));
        let held: Vec<_> = vec![
            gate.admit(&a).await.unwrap(),
            gate.admit(&a).await.unwrap(),
            gate.admit(&a).await.unwrap(),
        ];
        let fourth = tokio::spawn({
            let (g, a) = (gate.clone(), a.clone());
            async move { g.admit(&a).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!fourth.is_finished(), "a's fourth call waits past its share");
        let theirs = tokio::time::timeout(Duration::from_secs(1), gate.admit(&b)).await;
        assert!(theirs.is_ok(), "b finds the slot a may not take");
        drop(theirs);
        drop(held);
        fourth.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_cancelled_waiter_gives_its_place_back() {
        let gate = FairGate::new(1, 10);
        let a = name("a");
        let held = gate.admit(&a).await.unwrap();
        let waiter = tokio::spawn({
            let (gate, a) = (gate.clone(), a.clone());
            async move { gate.admit(&a).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        waiter.abort();
        let _ = waiter.await;
        drop(held);
        assert_eq!(gate.running(), 0);
        let again = tokio::time::timeout(Duration::from_secs(1), gate.admit(&a)).await;
        assert!(again.is_ok(), "the slot was lost to a cancelled waiter");
    }

    #[tokio::test]
    async fn a_principal_queue_is_bounded() {
        let gate = FairGate::new(1, 2);
        let a = name("a");
        let _held = gate.admit(&a).await.unwrap();
        let w1 = tokio::spawn({
            let (g, a) = (gate.clone(), a.clone());
            async move { g.admit(&a).await.map(|_| ()) }
        });
        let w2 = tokio::spawn({
            let (g, a) = (gate.clone(), a.clone());
            async move { g.admit(&a).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(gate.admit(&a).await.err(), Some(Refused::QueueFull(2)));
        // Another principal still gets in line.
        let other = tokio::spawn({
            let g = gate.clone();
            async move { g.admit(&name("b")).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(!other.is_finished());
        w1.abort();
        w2.abort();
        other.abort();
    }
}
