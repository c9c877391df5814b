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

    /// Proxies in front of this server that send the PROXY protocol (haproxy's
    /// `send-proxy-v2`), as addresses or CIDR ranges, comma-separated. A connection from one
    /// may start with a PROXY header, and the client it names is the address that the limits
    /// per address count (connections on probation, token introspection); without it every
    /// client behind the proxy shares one. List only the proxies: a listed peer can claim any
    /// address. Plain HTTP from the proxy only (TLS ends there).
    #[arg(long = "trusted-proxy", env = "CODE_SANDBOX_TRUSTED_PROXIES", value_delimiter = ',', value_parser = ip_range)]
    pub trusted_proxies: Vec<IpRange>,

    /// An object store kept sandboxes are also written to after each save, as a URL:
    /// `s3://bucket/prefix` (for an S3-compatible store, `AWS_ENDPOINT_URL`, and
    /// `AWS_ALLOW_HTTP=true` for plain HTTP), `gs://`, `az://`, or `file:///path`. Credentials
    /// come from the cloud's own variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`), web identity or
    /// instance metadata; never from the URL or from profile files such as `~/.aws/config`. Files are cut into content-addressed chunks, so an
    /// unchanged file is not sent twice; a manifest per sandbox, written last, names them.
    #[arg(long, env = "CODE_SANDBOX_STORE")]
    pub store: Option<String>,

    /// With a store: seconds a replica's hold on a sandbox lasts unless renewed (it is, every
    /// third of this, while the replica runs). A sandbox whose replica died is resumed by
    /// another this long after the last renewal at most; a replica stopped with SIGTERM hands
    /// its sandboxes over at once. Keep the replicas' clocks within a few seconds (NTP).
    #[arg(long, env = "CODE_SANDBOX_STORE_LEASE_SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(3..=3600))]
    pub store_lease_seconds: u64,

    /// With a store: seconds a chunk no manifest names is kept before the sweep deletes it
    /// (a file deleted or changed, a sandbox closed or past `CODE_SANDBOX_RETAIN_DAYS`). One
    /// replica at a time sweeps, every quarter of this (at most hourly); keep it far above
    /// the longest push. The sweep also deletes sandboxes no replica wrote for
    /// `CODE_SANDBOX_RETAIN_DAYS`.
    #[arg(long, env = "CODE_SANDBOX_STORE_GRACE_SECONDS", default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(2..=2_592_000))]
    pub store_grace_seconds: u64,

    /// With a store: seconds a shutdown waits for kept sandboxes to reach the store when it is
    /// away or slow (their saves are on this disk, which may go with the pod), after running
    /// calls have finished. Under Kubernetes keep the pod's termination grace period longer
    /// than `CODE_SANDBOX_DRAIN_SECONDS` plus this plus 15 s.
    #[arg(long, env = "CODE_SANDBOX_STORE_DRAIN_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub store_drain_seconds: u64,
}

impl TeamSettings {
    /// How long a hold on a sandbox in the store lasts (30 s where settings were built
    /// without the command line's defaults).
    pub fn store_lease(&self) -> std::time::Duration {
        let secs = match self.store_lease_seconds {
            0 => 30,
            s => s.max(3),
        };
        std::time::Duration::from_secs(secs)
    }

    /// How long a shutdown waits for the store (60 s where settings were built without the
    /// command line's defaults).
    pub fn store_drain(&self) -> std::time::Duration {
        std::time::Duration::from_secs(match self.store_drain_seconds {
            0 => 60,
            s => s,
        })
    }

    /// How long a chunk no manifest names is kept (a day where settings were built without
    /// the command line's defaults).
    pub fn store_grace(&self) -> std::time::Duration {
        let secs = match self.store_grace_seconds {
            0 => 86_400,
            s => s.max(2),
        };
        std::time::Duration::from_secs(secs)
    }
}

/// An address or a CIDR range of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpRange {
    network: std::net::IpAddr,
    prefix: u8,
}

impl IpRange {
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr::{V4, V6};
        // An IPv4 client may reach a dual-stack socket as ::ffff:a.b.c.d.
        let ip = match ip {
            V6(v6) => v6.to_ipv4_mapped().map_or(ip, V4),
            v4 => v4,
        };
        let (net, ip, bits) = match (self.network, ip) {
            (V4(n), V4(i)) => (u128::from(n.to_bits()), u128::from(i.to_bits()), 32),
            (V6(n), V6(i)) => (n.to_bits(), i.to_bits(), 128),
            _ => return false,
        };
        let shift = bits - u32::from(self.prefix);
        shift >= bits || (net >> shift) == (ip >> shift)
    }
}

impl std::str::FromStr for IpRange {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ip_range(text)
    }
}

fn ip_range(text: &str) -> Result<IpRange, String> {
    let text = text.trim();
    let bad = || format!("'{text}' is not an address or a CIDR range such as 10.0.0.0/8 or fd00::/8");
    let (addr, prefix) = match text.split_once('/') {
        Some((a, p)) => (a, Some(p.parse::<u8>().map_err(|_| bad())?)),
        None => (text, None),
    };
    let network: std::net::IpAddr = addr.parse().map_err(|_| bad())?;
    let max = if network.is_ipv4() { 32 } else { 128 };
    let prefix = prefix.unwrap_or(max);
    if prefix > max {
        return Err(bad());
    }
    Ok(IpRange { network, prefix })
}

fn replica_name(name: &str) -> Result<String, String> {
    crate::sandbox::replica::valid_name(name).map(|()| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_hold_what_they_say() {
        let r = ip_range("10.1.0.0/16").unwrap();
        assert!(r.contains("10.1.200.3".parse().unwrap()));
        assert!(!r.contains("10.2.0.1".parse().unwrap()));
        assert!(r.contains("::ffff:10.1.0.9".parse().unwrap()), "IPv4-mapped");
        let one = ip_range("127.0.0.1").unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        assert!(
            ip_range("0.0.0.0/0")
                .unwrap()
                .contains("8.8.8.8".parse().unwrap())
        );
        assert!(ip_range("fd00::/8").unwrap().contains("fd12::1".parse().unwrap()));
        assert!(
            !ip_range("fd00::/8")
                .unwrap()
                .contains("10.0.0.1".parse().unwrap())
        );
        for bad in ["10.0.0.0/33", "nonsense", "10.0.0.0/x", "::/129"] {
            assert!(ip_range(bad).is_err(), "{bad}");
        }
    }
}
