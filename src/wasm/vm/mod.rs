//! The one part of the local backend that touches wasmtime: the engine and compiled module,
//! the Store and its data, and the host functions linked into it.
//!
//! Inside, [`state`] is the Store's data and a leaf; the host functions ([`door`], the
//! disk-quota shadows in [`guest_fs`], wasmtime-wasi's own) are generic over the Store's data
//! and reach their parts through projections; [`session`] puts them together into one
//! interpreter that runs turns. Everything above this module sees only [`Session`],
//! [`CompiledRuntime`] and plain data.

mod door;
pub(super) mod engine;
mod guest_fs;
mod guest_memory;
mod memory_budget;
mod output;
mod saved_state;
mod session;
mod state;
mod warm_image;

pub use engine::{CompiledRuntime, EngineError, Image};
pub use memory_budget::{MemoryBudget, Reclaim, WASM32_MAX_BYTES, half_of_machine};
pub use saved_state::{SavedState, StateError};
pub use session::{Ended, Session, SessionConfig, SessionError, TurnOutput};
pub use warm_image::{WarmError, build_or_load as warm_image, verify_cached as verify_warm_image};
