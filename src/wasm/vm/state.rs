//! The Store's data: everything the guest can reach, owned by its Store.
//!
//! A leaf: the host functions that use these parts (the door, the disk-quota shadows,
//! wasmtime-wasi) are generic over the Store's data and reach them through projections, so
//! none of them imports this type and each can be tested on its own.

use std::time::Instant;

use wasmtime_wasi::p1::WasiP1Ctx;

use super::door::Inbox;
use super::guest_fs::GuestFs;
use super::memory_budget::GuestLimiter;

pub struct GuestState {
    pub wasi: WasiP1Ctx,
    pub fs: GuestFs,
    pub limits: GuestLimiter,
    pub inbox: Inbox,
    /// When the running turn must stop; the epoch callback reads it.
    pub deadline: Instant,
}

impl GuestState {
    pub fn wasi(&mut self) -> &mut WasiP1Ctx {
        &mut self.wasi
    }

    pub fn wasi_and_fs(&mut self) -> (&mut WasiP1Ctx, &mut GuestFs) {
        (&mut self.wasi, &mut self.fs)
    }

    pub fn inbox(&mut self) -> &mut Inbox {
        &mut self.inbox
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}
