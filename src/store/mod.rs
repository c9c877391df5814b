//! Kept sandboxes in object storage (`CODE_SANDBOX_STORE`): each kept sandbox's folders are
//! written to a bucket as content-addressed chunks plus one small manifest per generation,
//! written last, so a store a team already runs holds what a replica's disk held.
//!
//! [`location`] opens the store from its URL; [`manifest`] is what one generation names;
//! [`push`] writes a sandbox's folders as a new generation. Nothing here knows wasmtime or the
//! protocol: the local backend hands it folders after it has saved them.

pub mod chunks;
pub mod held;
pub mod lease;
pub mod location;
pub mod manifest;
pub mod pull;
pub mod push;
pub mod retry;
pub mod space;
pub mod sweep;

pub use location::{Store, StoreError};
/// The object store crate, for tools beside the server that read what it wrote.
pub use object_store;

use std::time::Duration;

/// How a replica uses the store: how long its hold on a sandbox lasts, how long a chunk no
/// manifest names is kept (the sweep deletes it after), and how long a sandbox no one wrote
/// stays (none: for ever).
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub lease: Duration,
    pub grace: Duration,
    pub retain: Option<Duration>,
}

impl Timing {
    /// `lease`, with a day's grace and no retention.
    pub fn with_lease(lease: Duration) -> Timing {
        Timing {
            lease,
            grace: Duration::from_secs(86_400),
            retain: None,
        }
    }
}
