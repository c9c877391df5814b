//! The proxy's configuration, from one template (`deploy/haproxy/haproxy.cfg.in`) for every
//! place it runs: Kubernetes (`cargo xtask deploy` writes `deploy/kubernetes/haproxy.cfg`,
//! which a test keeps current) and the scale test's replicas on loopback.

use std::path::Path;

/// The template, relative to the project root.
pub const TEMPLATE: &str = "deploy/haproxy/haproxy.cfg.in";
/// The rendered configuration the Kubernetes manifests mount.
pub const KUBERNETES_CONFIG: &str = "deploy/kubernetes/haproxy.cfg";
/// Replicas the manifests start (the StatefulSet's `replicas`).
pub const KUBERNETES_REPLICAS: usize = 3;

/// One replica behind the proxy: its name (`CODE_SANDBOX_REPLICA`) and `host:port`.
pub struct Replica {
    pub name: String,
    pub address: String,
}

/// Where the proxy runs.
pub enum Site {
    /// In a cluster: replicas found by DNS (a StatefulSet's headless Service), re-resolved.
    Kubernetes,
    /// On this machine: fixed loopback addresses, checked every second.
    Loopback,
}

/// The configuration for `replicas`, listening on `bind`, reading the principal from the
/// JWT claim `claim`.
pub fn render(
    root: &Path,
    site: Site,
    bind: &str,
    claim: &str,
    replicas: &[Replica],
) -> anyhow::Result<String> {
    let template = std::fs::read_to_string(root.join(TEMPLATE))?;
    let (resolvers, options) = match site {
        Site::Kubernetes => (
            "resolvers cluster\n    parse-resolv-conf\n    hold valid 10s\n",
            "check inter 2s fall 3 rise 1 init-addr last,libc,none resolvers cluster",
        ),
        Site::Loopback => ("", "check inter 1s fall 3 rise 1"),
    };
    let use_servers: Vec<String> = replicas
        .iter()
        .map(|r| {
            format!(
                "    use-server {0} if {{ req.hdr(mcp-param-sandbox-id) -m beg sbx-{0}- }} || {{ req.hdr(mcp-param-run-id) -m beg run-sbx-{0}- }}",
                r.name
            )
        })
        .collect();
    let servers: Vec<String> = replicas
        .iter()
        .map(|r| format!("    server {} {}", r.name, r.address))
        .collect();
    Ok(template
        .replace("{{RESOLVERS}}", resolvers)
        .replace("{{BIND}}", bind)
        .replace("{{CLAIM}}", claim)
        .replace("{{USE_SERVERS}}", &use_servers.join("\n"))
        .replace("{{SERVER_OPTIONS}}", options)
        .replace("{{SERVERS}}", &servers.join("\n")))
}

/// The configuration the Kubernetes manifests mount: the StatefulSet's pods by their stable
/// DNS names under the headless Service.
pub fn kubernetes_config(root: &Path) -> anyhow::Result<String> {
    let replicas: Vec<Replica> = (0..KUBERNETES_REPLICAS)
        .map(|i| Replica {
            name: format!("mcp-code-sandbox-{i}"),
            address: format!("mcp-code-sandbox-{i}.mcp-code-sandbox:8765"),
        })
        .collect();
    render(root, Site::Kubernetes, "0.0.0.0:8080", "sub", &replicas)
}
