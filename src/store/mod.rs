//! Kept sandboxes in object storage (`CODE_SANDBOX_STORE`): each kept sandbox's folders are
//! written to a bucket as content-addressed chunks plus one small manifest per generation,
//! written last, so a store a team already runs holds what a replica's disk held.
//!
//! [`location`] opens the store from its URL; [`manifest`] is what one generation names;
//! [`push`] writes a sandbox's folders as a new generation. Nothing here knows wasmtime or the
//! protocol: the local backend hands it folders after it has saved them.

pub mod held;
pub mod lease;
pub mod location;
pub mod manifest;
pub mod pull;
pub mod push;
pub mod retry;
pub mod space;

pub use location::{Store, StoreError};
