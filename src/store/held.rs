//! The sandboxes this replica holds a lease on (see [`super::lease`]), renewed in the
//! background while it runs. A renewal that finds another holder means this replica was taken
//! for dead (paused, cut off from the store): it stops writing that sandbox, so a stale owner
//! never writes over the one now serving it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::lease::{self, Claim};
use super::location::{Store, StoreError};
use crate::lock::Locked;

pub struct Held {
    store: Store,
    me: String,
    ttl: Duration,
    /// Sandbox id to its lease's path.
    leases: Mutex<HashMap<String, object_store::path::Path>>,
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

    /// The store answered a request: if it was away, whatever waits for it is woken.
    pub fn answered(&self) {
        if self.away.swap(false, std::sync::atomic::Ordering::Relaxed) {
            self.answers_again.notify_waiters();
        }
    }

    /// Until the store answers again after being away (a lease renewed, a push written), so
    /// pushes waiting to be retried go at once rather than after their backoff.
    pub async fn back(&self) {
        self.answers_again.notified().await;
    }

    pub fn holds(&self, id: &str) -> bool {
        self.leases.locked().contains_key(id)
    }

    /// Takes `id`'s lease at `path` unless another live replica holds it.
    pub async fn take(&self, id: &str, path: object_store::path::Path) -> Result<Claim, StoreError> {
        let claim = lease::claim(&self.store, &path, &self.me, self.ttl).await?;
        if matches!(claim, Claim::Ours) {
            self.leases.locked().insert(id.to_string(), path);
        }
        Ok(claim)
    }

    /// Gives `id`'s lease up, if held.
    pub async fn release(&self, id: &str) {
        let path = self.leases.locked().remove(id);
        if let Some(path) = path {
            lease::release(&self.store, &path, &self.me).await;
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
        for (id, path) in all {
            let claimed = lease::claim(&self.store, &path, &self.me, self.ttl).await;
            if claimed.is_ok() {
                self.answered();
            } else {
                self.failed();
            }
            match claimed {
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
}
