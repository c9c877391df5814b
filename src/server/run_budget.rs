//! The background-run budget (`CODE_SANDBOX_MAX_BACKGROUND_RUNS`), apart from the interactive
//! call slots: runs that sleep or crunch for an hour must never leave a person's `1+1` waiting.
//! Past it a run waits `queued`, holding its sandbox but no slot; a freed slot goes to the
//! principal with the fewest runs going ([`FairGate`]), so one principal's runs cannot keep
//! another's queued for long.

use std::sync::Arc;
use std::task::Poll;

use futures_util::future::BoxFuture;

use crate::sandbox::SandboxError;
use crate::tenancy::{Admitted, FairGate, Refused};

/// Runs one principal may have queued; past it a new one is refused.
const MAX_QUEUED_PER_PRINCIPAL: usize = 16;

pub struct RunBudget {
    gate: Arc<FairGate>,
    capacity: usize,
}

/// Where a run stands once asked for: going at once, or waiting for a slot.
pub enum Entry {
    Now(Admitted),
    Queued(BoxFuture<'static, Result<Admitted, Refused>>),
}

impl RunBudget {
    /// `setting`: `CODE_SANDBOX_MAX_BACKGROUND_RUNS`; unset, one run per core.
    pub fn new(setting: Option<usize>) -> RunBudget {
        let capacity = setting
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
            .max(1);
        RunBudget {
            gate: FairGate::new(capacity, MAX_QUEUED_PER_PRINCIPAL),
            capacity,
        }
    }

    /// Asks for a slot for `who`: a slot, a place in line, or a refusal when `who` already
    /// has as many runs queued as allowed. Dropping the entry gives the slot or place up.
    pub async fn enter(&self, who: Arc<str>) -> Result<Entry, SandboxError> {
        let gate = self.gate.clone();
        let mut wait: BoxFuture<'static, Result<Admitted, Refused>> =
            Box::pin(async move { gate.admit(&who).await });
        // The gate decides on the first poll: admitted, queued (pending), or refused.
        match futures_util::poll!(&mut wait) {
            Poll::Ready(Ok(slot)) => Ok(Entry::Now(slot)),
            Poll::Ready(Err(Refused::QueueFull(n))) => Err({
                crate::telemetry::metrics::quota_refused(crate::telemetry::metrics::QuotaKind::Runs);
                SandboxError::Quota(format!(
                    "{} background runs are going (CODE_SANDBOX_MAX_BACKGROUND_RUNS={}) and you already have {n} more queued; wait for one to end (get_run), stop one (cancel_run), or run short code without background",
                    self.capacity, self.capacity
                ))
            }),
            Poll::Pending => Ok(Entry::Queued(wait)),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}
