//! Principals sharing one backend (remote mode): each sees only its own sandboxes, within its
//! own quotas, and waits its fair turn for a call slot.
//!
//! The layer wraps any [`Interpreter`], so both backends (and new ones) get the same isolation
//! without knowing principals exist; the server hands each call the [`Tenancy::view`] of the
//! principal that made it.

mod gate;
mod local;
pub mod names;
mod owners;
mod queue;
mod shared;
mod view;

pub use gate::{Admitted, FairGate, Refused};
pub use local::{LocalView, remote_owned};
pub use shared::{Principal, Quota, Tenancy};
