//! Prometheus metrics for the operators of a team server (`CODE_SANDBOX_METRICS_LISTEN`):
//! what calls did and how long they took, what was refused, and the levels behind them
//! (sandboxes by state, memory, calls running and waiting, background runs).
//!
//! Counters are recorded where things happen, through the functions here, which do nothing
//! until [`install`] is called (a server without a metrics address keeps none). Levels are
//! set by whoever serves a scrape, just before it encodes ([`Levels`]). Every label comes from a
//! closed set, so no caller can grow the number of series: a tool the server does not have is
//! `other`, and a principal is a label only when the operator asks for it.

use std::sync::OnceLock;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// How a tool call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// A result the client can use.
    Ok,
    /// A result with `isError`: the tool ran and says what went wrong.
    ToolError,
    /// A protocol error: unknown tool, arguments that are not an object.
    Rejected,
    /// The client cancelled (or went away) before the result.
    Cancelled,
}

impl std::fmt::Display for CallOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

impl CallOutcome {
    fn label(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::ToolError => "tool_error",
            CallOutcome::Rejected => "rejected",
            CallOutcome::Cancelled => "cancelled",
        }
    }
}

/// Which of a principal's limits refused a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaKind {
    Sandboxes,
    Memory,
    Disk,
    /// Too many calls already waiting for a slot.
    Waiting,
    /// Too many background runs queued.
    Runs,
}

impl QuotaKind {
    fn label(self) -> &'static str {
        match self {
            QuotaKind::Sandboxes => "sandboxes",
            QuotaKind::Memory => "memory",
            QuotaKind::Disk => "disk",
            QuotaKind::Waiting => "waiting",
            QuotaKind::Runs => "runs",
        }
    }
}

/// Why an OAuth access token was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OAuthRefusal {
    Invalid,
    Scope,
    /// The authorization server could not be asked.
    Unavailable,
    /// Valid, but `CODE_SANDBOX_OAUTH_ALLOW` does not admit the principal.
    NotAllowed,
}

impl OAuthRefusal {
    fn label(self) -> &'static str {
        match self {
            OAuthRefusal::Invalid => "invalid_token",
            OAuthRefusal::Scope => "insufficient_scope",
            OAuthRefusal::Unavailable => "issuer_unavailable",
            OAuthRefusal::NotAllowed => "not_allowed",
        }
    }
}

/// The levels a scrape reports, read when it is served.
#[derive(Clone, Debug, Default)]
pub struct Levels {
    /// Sandboxes by state: `live` (an interpreter in memory), `suspended` (saved, open),
    /// `kept` (saved from before a restart, not yet used).
    pub sandboxes: Vec<(&'static str, u64)>,
    pub memory_used_bytes: u64,
    pub memory_total_bytes: u64,
    pub calls_running: u64,
    pub calls_waiting: u64,
}

pub struct Metrics {
    registry: Registry,
    per_principal: bool,
    calls: Family<Labels, Counter>,
    durations: Histograms,
    quota_refusals: Family<Labels, Counter>,
    oauth_refusals: Family<Labels, Counter>,
    runs_ended: Family<Labels, Counter>,
    runs_going: Gauge,
    sandboxes: Family<Labels, Gauge>,
    memory: Family<Labels, Gauge>,
    calls_running: Gauge,
    calls_waiting: Gauge,
    store_pushes: Family<Labels, Counter>,
    store_pending: Gauge,
    store_sent: Counter,
    host_kernels: Family<Labels, Counter>,
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

fn latency() -> Histogram {
    // 5 ms to about 330 s: a `1+1` to a call at the foreground limit.
    Histogram::new(exponential_buckets(0.005, 3.0, 11))
}

/// Starts keeping metrics (once; later calls keep the first settings). `per_principal`:
/// label calls by principal too.
pub fn install(per_principal: bool) -> &'static Metrics {
    METRICS.get_or_init(|| Metrics::new(per_principal))
}

impl Metrics {
    fn new(per_principal: bool) -> Metrics {
        let mut registry = Registry::with_prefix("mcp_code_sandbox");
        let m = Metrics {
            registry: Registry::default(),
            per_principal,
            calls: Family::default(),
            durations: Family::new_with_constructor(latency as fn() -> Histogram),
            quota_refusals: Family::default(),
            oauth_refusals: Family::default(),
            runs_ended: Family::default(),
            runs_going: Gauge::default(),
            sandboxes: Family::default(),
            memory: Family::default(),
            calls_running: Gauge::default(),
            calls_waiting: Gauge::default(),
            store_pushes: Family::default(),
            store_pending: Gauge::default(),
            store_sent: Counter::default(),
            host_kernels: Family::default(),
        };
        let r = &mut registry;
        r.register("calls", "Tool calls by tool and outcome", m.calls.clone());
        r.register(
            "call_duration_seconds",
            "How long tool calls took, by tool",
            m.durations.clone(),
        );
        r.register(
            "quota_refusals",
            "Calls refused by a principal's quota, by quota",
            m.quota_refusals.clone(),
        );
        r.register(
            "oauth_refusals",
            "OAuth access tokens refused, by reason",
            m.oauth_refusals.clone(),
        );
        r.register(
            "runs_ended",
            "Background runs that ended, by state",
            m.runs_ended.clone(),
        );
        r.register(
            "runs_going",
            "Background runs running or queued",
            m.runs_going.clone(),
        );
        r.register("sandboxes", "Sandboxes by state", m.sandboxes.clone());
        r.register(
            "memory_budget_bytes",
            "The memory budget for interpreters: used and total",
            m.memory.clone(),
        );
        r.register(
            "calls_running",
            "Tool calls holding a call slot",
            m.calls_running.clone(),
        );
        r.register(
            "calls_waiting",
            "Tool calls waiting for a call slot",
            m.calls_waiting.clone(),
        );
        r.register(
            "store_pushes",
            "Kept sandboxes written to the object store (CODE_SANDBOX_STORE), by outcome",
            m.store_pushes.clone(),
        );
        r.register(
            "store_pending",
            "Kept sandboxes waiting to be written to the object store, or to be tried again",
            m.store_pending.clone(),
        );
        r.register(
            "store_sent_bytes",
            "Bytes of new chunks written to the object store (unchanged files and pages are not sent again)",
            m.store_sent.clone(),
        );
        r.register(
            "host_kernel_products",
            "Matrix products a sandbox's BLAS handed to the host's kernels (CODE_SANDBOX_HOST_KERNELS), by bound function",
            m.host_kernels.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The text exposition format, with `levels` as they are now.
    pub fn render(&self, levels: &Levels) -> String {
        for (state, n) in &levels.sandboxes {
            self.sandboxes
                .get_or_create(&vec![("state", state.to_string())])
                .set(*n as i64);
        }
        let memory = [
            ("used", levels.memory_used_bytes),
            ("total", levels.memory_total_bytes),
        ];
        for (of, bytes) in memory {
            self.memory
                .get_or_create(&vec![("of", of.to_string())])
                .set(bytes as i64);
        }
        self.calls_running.set(levels.calls_running as i64);
        self.calls_waiting.set(levels.calls_waiting as i64);
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// A push to the object store ended, written or not (it is then tried again).
pub fn store_push(written: bool) {
    let Some(m) = METRICS.get() else { return };
    let outcome = if written { "written" } else { "failed" };
    m.store_pushes
        .get_or_create(&vec![("outcome", outcome.to_string())])
        .inc();
}

/// A push wrote `bytes` of new chunks.
pub fn store_sent(bytes: u64) {
    if let Some(m) = METRICS.get() {
        m.store_sent.inc_by(bytes);
    }
}

/// A host kernel computed a product for a sandbox; `kernel` is the bound function's name
/// (`cblas_dgemm`, `dgemm_kernel`, ...: a fixed set).
pub fn host_kernel(kernel: &'static str) {
    if let Some(m) = METRICS.get() {
        m.host_kernels
            .get_or_create(&vec![("kernel", kernel.to_string())])
            .inc();
    }
}

/// How many kept sandboxes wait to be written to the object store.
pub fn store_pending(n: usize) {
    if let Some(m) = METRICS.get() {
        m.store_pending.set(n as i64);
    }
}

/// Records a finished tool call. `known`: whether the server has this tool (else `other`).
pub fn call(tool: &str, known: bool, outcome: CallOutcome, principal: &str, seconds: f64) {
    let Some(m) = METRICS.get() else { return };
    let tool = if known { tool } else { "other" };
    let mut labels = vec![
        ("tool", tool.to_string()),
        ("outcome", outcome.label().to_string()),
    ];
    if m.per_principal {
        labels.push(("principal", label_value(principal)));
    }
    m.calls.get_or_create(&labels).inc();
    m.durations
        .get_or_create(&vec![("tool", tool.to_string())])
        .observe(seconds);
}

/// A name as a label value: the encoder writes values as they are, and a principal's name
/// (an OAuth claim) may hold `"`, `\\`, `}` or a newline, which would forge samples or break
/// every scrape. Bytes outside a plain set are percent-encoded (so no two names meet), and a
/// name is cut at 128 bytes.
fn label_value(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes().take(128) {
        if b.is_ascii_alphanumeric() || b"-_.@+:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Records a call refused by a principal's quota.
pub fn quota_refused(kind: QuotaKind) {
    if let Some(m) = METRICS.get() {
        m.quota_refusals
            .get_or_create(&vec![("quota", kind.label().to_string())])
            .inc();
    }
}

/// Records a refused OAuth access token.
pub fn oauth_refused(why: OAuthRefusal) {
    if let Some(m) = METRICS.get() {
        m.oauth_refusals
            .get_or_create(&vec![("reason", why.label().to_string())])
            .inc();
    }
}

/// Records a background run starting (running or queued).
pub fn run_started() {
    if let Some(m) = METRICS.get() {
        m.runs_going.inc();
    }
}

/// Records a background run ending in `state` (its own closed set of names).
pub fn run_ended(state: &'static str) {
    if let Some(m) = METRICS.get() {
        m.runs_going.dec();
        m.runs_ended
            .get_or_create(&vec![("state", state.to_string())])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_levels_and_refusals_are_rendered_with_closed_labels() {
        let m = Metrics::new(false);
        let levels = Levels {
            sandboxes: vec![("live", 2), ("suspended", 1), ("kept", 0)],
            memory_used_bytes: 512 << 20,
            memory_total_bytes: 4 << 30,
            calls_running: 1,
            calls_waiting: 0,
        };
        m.calls
            .get_or_create(&vec![("tool", "execute_code".into()), ("outcome", "ok".into())])
            .inc();
        let text = m.render(&levels);
        assert!(
            text.contains("mcp_code_sandbox_calls_total{tool=\"execute_code\",outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("mcp_code_sandbox_sandboxes{state=\"live\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("mcp_code_sandbox_memory_budget_bytes{of=\"total\"} 4294967296"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn a_principals_name_never_escapes_its_label() {
        let m = Metrics::new(true);
        let forged = "x\"} 1\nmcp_code_sandbox_calls_total{tool=\"forged\\";
        let labels = vec![("principal", label_value(forged))];
        m.calls.get_or_create(&labels).inc();
        let text = m.render(&Levels::default());
        assert!(!text.contains("forged\""), "{text}");
        let line = text
            .lines()
            .find(|l| l.starts_with("mcp_code_sandbox_calls_total{"))
            .expect("the sample");
        assert_eq!(
            line,
            "mcp_code_sandbox_calls_total{principal=\"x%22%7D%201%0Amcp_code_sandbox_calls_total%7Btool%3D%22forged%5C\"} 1"
        );
        assert_eq!(label_value("alice@example.com"), "alice@example.com");
    }
}
