//! One owner at a time: beside each sandbox's manifest, a small lease names the replica that
//! serves it and until when. A replica takes a lease only if there is none, if it is its own,
//! or if its holder let it run out; each write is conditional on the version read (create if
//! absent, else replace only that version), so of two replicas taking one lease at once, one
//! wins and the other is told who holds it. Holders renew well before the lease runs out; a
//! holder that died is replaced once its lease has run out.
//!
//! Times are the writers' clocks: replicas are expected to keep them within seconds (NTP),
//! far less than a lease.

use std::time::Duration;

use chrono::{DateTime, Utc};
use object_store::{ObjectStoreExt, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};

use super::location::{Store, StoreError};

// Its JSON Schema is published beside the manifest's (docs/schemas/).
/// Who serves a sandbox, and until when: `.../sandboxes/<id>/lease.json` beside its manifest
/// (and `<prefix>/sweep/lease.json` for the one replica that sweeps).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(title = "A sandbox's lease in the team store")]
pub struct Lease {
    /// The replica that serves the sandbox.
    #[schemars(length(min = 1))]
    pub holder: String,
    /// Until when; another replica may take it after.
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub until: DateTime<Utc>,
}

/// The lease's JSON Schema, as published.
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Lease)).unwrap_or_default()
}

/// What a claim found.
#[derive(Debug)]
pub enum Claim {
    /// Ours now, until `ttl` from the claim.
    Ours,
    /// Another replica holds it and its lease has not run out.
    Held { holder: String },
}

/// Takes (or renews) the lease at `path` for `me`, for `ttl`.
pub async fn claim(
    store: &Store,
    path: &object_store::path::Path,
    me: &str,
    ttl: Duration,
) -> Result<Claim, StoreError> {
    // A lease deleted between the read and the write (its holder gave it up: often this
    // replica itself, handing back a suspended sandbox's) is free: taken on the next try.
    for _ in 0..TRIES - 1 {
        if let Some(claim) = try_claim(store, path, me, ttl).await? {
            return Ok(claim);
        }
    }
    // Still vanishing: nobody is known to hold it, so no holder is named; the caller tries
    // again later (a push after its backoff, a call's user shortly).
    try_claim(store, path, me, ttl)
        .await?
        .ok_or_else(|| store.changed("a sandbox's lease"))
}

/// How many times a claim is tried while the lease keeps vanishing under it.
const TRIES: usize = 3;

/// One read and conditional write; `None` when the lease was deleted between the two.
async fn try_claim(
    store: &Store,
    path: &object_store::path::Path,
    me: &str,
    ttl: Duration,
) -> Result<Option<Claim>, StoreError> {
    let (current, version) = match read(store, path).await? {
        Some((lease, version)) => (Some(lease), Some(version)),
        None => (None, None),
    };
    if let Some(l) = &current
        && l.holder != me
        && l.until > Utc::now()
    {
        return Ok(Some(Claim::Held {
            holder: l.holder.clone(),
        }));
    }
    let lease = Lease {
        holder: me.to_string(),
        until: Utc::now() + chrono::Duration::from_std(ttl).unwrap_or_default(),
    };
    let body = serde_json::to_vec(&lease).unwrap_or_default();
    let opts = PutOptions {
        mode: store.put_mode(version),
        ..Default::default()
    };
    match store.objects.put_opts(path, PutPayload::from(body), opts).await {
        Ok(_) => Ok(Some(Claim::Ours)),
        // Written between our read and our write: by another replica, which holds it now, or
        // by this one's own claim at the same moment (a renewal beside a use), which is ours.
        Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
            Ok(match read(store, path).await? {
                Some((l, _)) if l.holder == me && l.until > Utc::now() => Some(Claim::Ours),
                Some((l, _)) => Some(Claim::Held { holder: l.holder }),
                None => None,
            })
        }
        Err(e) => Err(store.failed("a sandbox's lease", e)),
    }
}

/// Gives the lease up (a sandbox closed, or handed back at shutdown), if it is still ours.
pub async fn release(store: &Store, path: &object_store::path::Path, me: &str) {
    if let Ok(Some((lease, _))) = read(store, path).await
        && lease.holder == me
    {
        let _ = store.objects.delete(path).await;
    }
}

/// The lease at `path` and its version, if there is one; a damaged one counts as none.
async fn read(
    store: &Store,
    path: &object_store::path::Path,
) -> Result<Option<(Lease, UpdateVersion)>, StoreError> {
    let Some((bytes, version)) = store.read(path, "a sandbox's lease", 64 << 10).await? else {
        return Ok(None);
    };
    let lease = serde_json::from_slice(&bytes).unwrap_or(Lease {
        holder: String::new(),
        until: DateTime::<Utc>::MIN_UTC,
    });
    Ok(Some((lease, version)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lease_is_held_until_it_runs_out_and_then_taken_over() {
        let dir = std::env::temp_dir().join(format!("mcs-lease-{}", uuid::Uuid::new_v4().simple()));
        let url = url::Url::from_directory_path(&dir).expect("an absolute folder");
        let store = super::super::location::open(url.as_str()).unwrap();
        let path = store.path(&["lease.json"]);
        let short = Duration::from_millis(300);
        assert!(matches!(
            claim(&store, &path, "r0", short).await.unwrap(),
            Claim::Ours
        ));
        assert!(matches!(
            claim(&store, &path, "r0", short).await.unwrap(),
            Claim::Ours
        ));
        match claim(&store, &path, "r1", short).await.unwrap() {
            Claim::Held { holder } => assert_eq!(holder, "r0"),
            Claim::Ours => panic!("r0's lease has not run out"),
        }
        tokio::time::sleep(short * 2).await;
        assert!(matches!(
            claim(&store, &path, "r1", short).await.unwrap(),
            Claim::Ours
        ));
        release(&store, &path, "r0").await;
        assert!(dir.join("lease.json").is_file(), "r0 no longer holds it");
        release(&store, &path, "r1").await;
        assert!(!dir.join("lease.json").exists());
        let _ = std::fs::remove_dir_all(dir);
    }
}
