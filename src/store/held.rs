//! The sandboxes this replica holds a lease on (see [`super::lease`]), renewed in the
//! background while it runs. A renewal that finds another holder means this replica was taken
//! for dead (paused, cut off from the store): it stops writing that sandbox, so a stale owner
//! never writes over the one now serving it.
//!
//! A lease not confirmed for longer than it lasts has *lapsed*: this process was paused (or
//! the store away) long enough for another replica to take the sandbox, serve it, write a
//! newer generation and hand it back, so finding the lease free again proves nothing. A lapsed
//! lease stays listed, but [`Held::fresh`] says no until the caller has taken it again and
//! compared generations (`Held::take`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::lease::{self, Claim};
use super::location::{Store, StoreError};
use crate::host::lock::Locked;

/// One lease this replica took: where it is, and until when it is surely still ours.
#[derive(Clone)]
struct Lease {
    path: object_store::path::Path,
    /// When the claim that last confirmed it began, plus its length: the store's copy says
    /// at least that.
    sure_until: Instant,
    /// A renewal found it had run out before it was renewed.
    lapsed: bool,
}

/// Whether this replica may serve a sandbox from what it holds, as far as its lease goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// Held and confirmed within the lease's length.
    Fresh,
    /// Listed as held, but not confirmed for longer than the lease lasts: another replica may
    /// have served it meanwhile.
    Lapsed,
    NotHeld,
}

pub struct Held {
    store: Store,
    me: String,
    ttl: Duration,
    /// Sandbox id to its lease.
    leases: Mutex<HashMap<String, Lease>>,
    /// Whether the store failed the last request heard of; when it answers again, pushes
    /// waiting to be retried are woken (see [`Held::back`]).
    away: std::sync::atomic::AtomicBool,
    answers_again: tokio::sync::Notify,
}

impl Held {
    /// Leases of `ttl` taken as `me`, renewed every third of it.
    pub fn start(store: Store, me: String, ttl: Duration) -> Arc<Self> {
        let held = Arc::new(Held {
            store,
            me,
            ttl,
            leases: Mutex::default(),
            away: Default::default(),
            answers_again: tokio::sync::Notify::new(),
        });
        let weak = Arc::downgrade(&held);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(ttl / 3);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(held) = weak.upgrade() else { break };
                held.renew_all().await;
            }
        });
        held
    }

    pub fn me(&self) -> &str {
        &self.me
    }

    /// The store failed a request: it is away.
    pub fn failed(&self) {
        self.away.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the last request heard of failed: the store is away.
    pub fn away(&self) -> bool {
        self.away.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The store answered a request: if it was away, whatever waits for it is woken.
    pub fn answered(&self) {
        if self.away.swap(false, std::sync::atomic::Ordering::Relaxed) {
            self.answers_again.notify_waiters();
        }
    }

    /// Wakes pushes waiting out a backoff, to be tried now.
    pub fn retry_now(&self) {
        self.answers_again.notify_waiters();
    }

    /// Until the store answers again after being away (a lease renewed, a push written), so
    /// pushes waiting to be retried go at once rather than after their backoff.
    pub async fn back(&self) {
        self.answers_again.notified().await;
    }

    /// Whether `id`'s lease is listed here, lapsed or not.
    pub fn holds(&self, id: &str) -> bool {
        self.leases.locked().contains_key(id)
    }

    /// How `id`'s lease stands now.
    pub fn fresh(&self, id: &str) -> Hold {
        match self.leases.locked().get(id) {
            None => Hold::NotHeld,
            Some(l) if !l.lapsed && Instant::now() < l.sure_until => Hold::Fresh,
            Some(_) => Hold::Lapsed,
        }
    }

    /// Takes `id`'s lease at `path` unless another live replica holds it; a lapsed one taken
    /// again is fresh.
    pub async fn take(&self, id: &str, path: object_store::path::Path) -> Result<Claim, StoreError> {
        let began = Instant::now();
        let claim = lease::claim(&self.store, &path, &self.me, self.ttl).await?;
        let mut leases = self.leases.locked();
        match claim {
            Claim::Ours => {
                let lease = Lease {
                    path,
                    sure_until: began + self.ttl,
                    lapsed: false,
                };
                leases.insert(id.to_string(), lease);
            }
            Claim::Held { .. } => {
                leases.remove(id);
            }
        }
        Ok(claim)
    }

    /// Gives `id`'s lease up, if held.
    pub async fn release(&self, id: &str) {
        let lease = self.leases.locked().remove(id);
        if let Some(lease) = lease {
            lease::release(&self.store, &lease.path, &self.me).await;
        }
    }

    /// Gives every lease up (at shutdown, after the last pushes), so another replica may serve
    /// these sandboxes at once instead of after the leases run out.
    pub async fn release_all(&self) {
        let ids: Vec<String> = self.leases.locked().keys().cloned().collect();
        for id in ids {
            self.release(&id).await;
        }
    }

    async fn renew_all(&self) {
        let all: Vec<_> = self.leases.locked().clone().into_iter().collect();
        for (id, lease) in all {
            let began = Instant::now();
            let claimed = lease::claim(&self.store, &lease.path, &self.me, self.ttl).await;
            if claimed.is_ok() {
                self.answered();
            } else {
                self.failed();
            }
            match claimed {
                // Handed back while this renewal was under way: its claim wrote the lease again,
                // and nothing would ever renew or delete it (other replicas would wait out its
                // length, and it would stay in the store): given up again.
                Ok(Claim::Ours) if !self.renewed(&id, began) => {
                    lease::release(&self.store, &lease.path, &self.me).await;
                }
                Ok(Claim::Ours) => {}
                Ok(Claim::Held { holder }) => {
                    tracing::warn!(
                        "{id}: replica {holder} serves it now (this replica was taken for gone); no longer writing it to the store"
                    );
                    self.leases.locked().remove(&id);
                }
                // The store is away: kept as ours; the next renewal tries again.
                Err(e) => tracing::warn!("{id}: its lease could not be renewed: {e}"),
            }
        }
    }

    /// `id`'s lease was renewed by a claim begun at `began`: sure for another length, and
    /// lapsed if it had run out before; whether it is still listed (not handed back meanwhile).
    fn renewed(&self, id: &str, began: Instant) -> bool {
        let mut leases = self.leases.locked();
        let Some(l) = leases.get_mut(id) else {
            return false;
        };
        if began > l.sure_until && !l.lapsed {
            l.lapsed = true;
            tracing::warn!(
                "{id}: its lease ran out before this replica renewed it (paused, or cut off from the store); it is checked against the store before its next use"
            );
        }
        l.sure_until = began + self.ttl;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lease_not_confirmed_for_its_length_has_lapsed_until_taken_again() {
        let dir = std::env::temp_dir().join(format!("mcs-held-{}", uuid::Uuid::new_v4().simple()));
        let url = url::Url::from_directory_path(&dir).expect("an absolute folder");
        let store = super::super::location::open(url.as_str()).unwrap();
        let ttl = Duration::from_millis(300);
        // Renewals every 100 ms would keep it fresh: a paused process renews nothing.
        let held = Held {
            store: store.clone(),
            me: "r0".into(),
            ttl,
            leases: Mutex::default(),
            away: Default::default(),
            answers_again: tokio::sync::Notify::new(),
        };
        let path = store.path(&["lease.json"]);
        assert_eq!(held.fresh("s"), Hold::NotHeld);
        assert!(matches!(held.take("s", path.clone()).await.unwrap(), Claim::Ours));
        assert_eq!(held.fresh("s"), Hold::Fresh);
        tokio::time::sleep(ttl * 2).await;
        assert_eq!(held.fresh("s"), Hold::Lapsed, "not confirmed for its length");
        held.renew_all().await;
        assert_eq!(
            held.fresh("s"),
            Hold::Lapsed,
            "a late renewal does not make it fresh"
        );
        assert!(matches!(held.take("s", path).await.unwrap(), Claim::Ours));
        assert_eq!(
            held.fresh("s"),
            Hold::Fresh,
            "taken again (and checked) by its user"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
