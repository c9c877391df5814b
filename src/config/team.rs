//! Remote mode's settings for a team server past one machine: replicas behind a proxy, their
//! metrics, and how long a shutdown lets running calls finish. Kept apart because a
//! deployment sets them together (see docs/deploy-kubernetes.md).

use clap::Args;

#[derive(Clone, Debug, Default, Args)]
pub struct TeamSettings {
    /// This replica's name (a DNS label, such as the pod's name) when several serve one team
    /// behind a proxy: its sandbox ids carry it, and a call naming another replica's sandbox
    /// says which replica holds it and to retry, instead of "no such sandbox".
    #[arg(long, env = "CODE_SANDBOX_REPLICA", value_parser = replica_name)]
    pub replica: Option<String>,

    /// Address (host:port) serving Prometheus metrics at `/metrics`; off when unset. Never the
    /// MCP port: metrics are for operators, not principals.
    #[arg(long, env = "CODE_SANDBOX_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,

    /// Label calls in the metrics by principal too (one series per principal and tool: set it
    /// only for a team of tens, not thousands).
    #[arg(long, env = "CODE_SANDBOX_METRICS_PRINCIPALS", default_value_t = false)]
    pub metrics_principals: bool,

    /// Seconds a shutdown (SIGTERM) lets running calls finish before it stops them. Under
    /// Kubernetes keep the pod's termination grace period longer than this plus 15 s.
    #[arg(long, env = "CODE_SANDBOX_DRAIN_SECONDS", default_value_t = 10)]
    pub drain_seconds: u64,
}

fn replica_name(name: &str) -> Result<String, String> {
    crate::sandbox::replica::valid_name(name).map(|()| name.to_string())
}
