//! What the views of all principals share: the backend, who owns which sandbox, the fair gate
//! and each sandbox's queue, and the quotas they are held to.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::gate::FairGate;
use super::owners::Owners;
use super::queue;

use crate::host::lock::Locked;
use crate::sandbox::Interpreter;

/// What one principal may hold at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    pub sandboxes: usize,
    pub memory_mb: u64,
    pub disk_mb: u64,
}

/// Who a call comes from: one bearer token, or the single local user of a tokenless server.
#[derive(Clone, Debug)]
pub struct Principal {
    pub name: Arc<str>,
    pub quota: Quota,
    /// The downstream MCP servers this principal's code may call (code mode); none unless its
    /// tokens line names them, since they run with the host's credentials.
    pub mcp_servers: Arc<[String]>,
    /// `hosts=` on its tokens line: narrows the hosts its code may reach (never widens them).
    pub hosts: Option<Arc<[String]>>,
}

/// Calls one principal may have waiting for a slot; more are refused rather than queued.
const MAX_WAITING_PER_PRINCIPAL: usize = 64;

/// Call slots one principal may hold at once: all but a quarter (at least one) when there are
/// two or more, so another principal's call always finds one free however long the first
/// one's calls (or tasks) run.
pub fn principal_share(call_slots: usize) -> usize {
    if call_slots < 2 {
        return 1;
    }
    call_slots - (call_slots / 4).max(1)
}

pub struct Tenancy {
    pub(super) inner: Arc<dyn Interpreter>,
    pub(super) owners: Owners,
    pub(super) gate: Arc<FairGate>,
    /// Creates (and forks) of one principal run one at a time, so two at once cannot both
    /// pass the quota check.
    creating: Mutex<HashMap<Arc<str>, Arc<tokio::sync::Mutex<()>>>>,
    /// Calls take their turn on their sandbox before a call slot.
    pub(super) queues: queue::SandboxQueues,
    /// Sandboxes already counted in their principal's disk budget.
    joined: Mutex<std::collections::HashSet<String>>,
    pub(super) default_memory_mb: u64,
    /// This replica's name: an id naming another replica is answered as living there.
    pub(super) replica: Option<String>,
}

impl Tenancy {
    /// `owners_file`: where ownership is kept across restarts (`None`: memory only).
    /// `call_slots`: calls that may run at once, shared fairly between principals.
    /// `replica`: this replica's name (`CODE_SANDBOX_REPLICA`).
    pub fn new(
        inner: Arc<dyn Interpreter>,
        owners_file: Option<PathBuf>,
        call_slots: usize,
        default_memory_mb: u64,
        replica: Option<String>,
    ) -> Arc<Self> {
        let owners = Owners::load(owners_file);
        // Sandboxes that did not survive the restart (closed, expired) leave the list.
        // One another server on this home holds right now is kept, and stays its owner's.
        owners.retain(|id| inner.exists(id));
        Arc::new(Tenancy {
            inner,
            owners,
            gate: FairGate::with_share(call_slots, MAX_WAITING_PER_PRINCIPAL, principal_share(call_slots)),
            creating: Mutex::new(HashMap::new()),
            queues: queue::SandboxQueues::default(),
            joined: Mutex::new(std::collections::HashSet::new()),
            default_memory_mb,
            replica,
        })
    }

    /// Calls holding a call slot and calls waiting for one, for the metrics.
    pub fn call_load(&self) -> (usize, usize) {
        (self.gate.running(), self.gate.waiting())
    }

    /// The owner of a sandbox, for logs.
    pub fn owner_of(&self, id: &str) -> Option<Arc<str>> {
        self.owners.owner_of(id)
    }

    /// Whether `id` was counted in its principal's disk budget already; marks it counted.
    pub(super) fn joined(&self, id: &str) -> bool {
        !self.joined.locked().insert(id.to_string())
    }

    pub(super) fn create_lock(&self, who: &Arc<str>) -> Arc<tokio::sync::Mutex<()>> {
        let mut m = self.creating.locked();
        m.entry(who.clone()).or_default().clone()
    }
}
