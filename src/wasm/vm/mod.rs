//! The one part of the local backend that touches wasmtime: the engine and compiled module,
//! the Store and its data, and the host functions linked into it.
//!
//! Inside, [`state`] is the Store's data and a leaf; the host functions ([`door`], the
//! disk-quota shadows in [`guest_fs`], wasmtime-wasi's own) are generic over the Store's data
//! and reach their parts through projections; [`session`] puts them together into one
//! interpreter that runs turns. Everything above this module sees only [`Session`],
//! [`Program`] and plain data.

mod build_dir;
mod cache_sweep;
mod code_patch;
mod compile;
mod door;
pub(super) mod engine;
mod guest_fs;
mod guest_memory;
mod kernels;
mod memory_budget;
mod older_image;
mod output;
mod preopen_reset;
mod preopens;
mod saved_state;
mod session;
mod shipped;
mod state;
mod target;
mod turn;
mod upgrade;
mod warm_image;
mod warm_key;

pub use compile::EngineError;
pub use engine::{Image, Program};
pub use kernels::{Setup as KernelSetup, configure as configure_kernels, threads as kernel_threads};
pub use memory_budget::{MemoryBudget, Reclaim, WASM32_MAX_BYTES, half_of_machine};
pub use older_image::base as older_image_base;
pub use preopens::SessionConfig;
pub use saved_state::{SavedState, StateError};
pub use session::{Session, SessionError};
pub use target::Target;
pub use turn::{Ended, TurnOutput};
pub use warm_image::{
    WarmError, build_or_load as warm_image, is_cached as warm_image_cached,
    load_shipped as shipped_warm_image, ship as ship_warm_image, verify_cached as verify_warm_image,
};
pub use warm_key::WARM_UP;
