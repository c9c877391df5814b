//! The scale test's cluster on this machine: replicas of the real binary on loopback ports,
//! each with a home of its own, behind Debian's haproxy configured from the Kubernetes
//! template (`xtask::deploy`), with static tokens and, when asked, the tests' OpenID provider.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::harness::{free_port, private_home};
use xtask::deploy::{Replica, Site, render};

pub const REPLICAS: usize = 3;
pub const STATIC_PRINCIPALS: usize = 26;
/// The OpenID provider's agents (tests/ts/idp.mjs): their tokens are JWTs.
const AGENTS: [&str; 4] = ["agent-a", "agent-b", "agent-es", "agent-ed"];

/// One replica: its name, ports, home, and process while it runs.
pub struct Node {
    pub name: String,
    pub port: u16,
    pub metrics_port: u16,
    home: PathBuf,
    child: Option<Child>,
}

impl Node {
    /// Whether it was started and not stopped since.
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// Its MCP endpoint, reached directly (not through haproxy).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// A principal and its token.
pub struct Who {
    pub name: String,
    pub token: String,
}

/// The cluster: replicas, the proxy, the identity provider.
pub struct Cluster {
    bin: PathBuf,
    pub nodes: Vec<Node>,
    proxy: Option<Child>,
    pub proxy_url: String,
    env: Vec<(String, String)>,
    statics: Vec<Who>,
    idp: Option<xtask::idp::Idp>,
    /// The homes, the tokens file and haproxy's configuration, removed at the end.
    base: PathBuf,
}

impl Cluster {
    /// `replicas` replicas sharing one tokens file, each with a home of its own (sharing the
    /// runtime and caches of `home`), behind haproxy; with the OpenID provider when `oauth`.
    pub async fn start(
        root: &Path,
        bin: &Path,
        home: &Path,
        replicas: usize,
        oauth: bool,
    ) -> anyhow::Result<Cluster> {
        Self::start_with(root, bin, home, replicas, oauth, Vec::new()).await
    }

    /// [`Cluster::start`] with settings of `extra` (a store's, say) for every replica.
    pub async fn start_with(
        root: &Path,
        bin: &Path,
        home: &Path,
        replicas: usize,
        oauth: bool,
        extra: Vec<(String, String)>,
    ) -> anyhow::Result<Cluster> {
        // reqwest is built without a default TLS provider (as in the server).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let proxy_port = free_port()?;
        let proxy_url = format!("http://127.0.0.1:{proxy_port}/mcp");
        let base = private_home(home, &format!("scale-{replicas}"))?;
        let tokens = base.join("tokens");
        let statics = static_tokens(bin, &tokens)?;
        let mut env = vec![
            ("CODE_SANDBOX_TRANSPORT".into(), "http".into()),
            ("CODE_SANDBOX_TOKENS".into(), tokens.display().to_string()),
            (
                "CODE_SANDBOX_ALLOWED_HOSTS".into(),
                format!("127.0.0.1:{proxy_port}"),
            ),
            ("CODE_SANDBOX_PERSIST".into(), "true".into()),
            ("CODE_SANDBOX_MEMORY_MB".into(), "128".into()),
            ("CODE_SANDBOX_PRINCIPAL_MEMORY_MB".into(), "1024".into()),
            ("CODE_SANDBOX_DRAIN_SECONDS".into(), "20".into()),
            // haproxy sends each client's address in a PROXY header.
            ("CODE_SANDBOX_TRUSTED_PROXIES".into(), "127.0.0.1".into()),
            ("RUST_LOG".into(), "warn".into()),
        ];
        env.extend(extra);
        let idp = if oauth {
            let idp = xtask::idp::start(root).await?;
            env.push(("CODE_SANDBOX_OAUTH_ISSUER".into(), idp.issuer.clone()));
            env.push(("CODE_SANDBOX_PUBLIC_URL".into(), proxy_url.clone()));
            Some(idp)
        } else {
            None
        };
        let mut nodes = Vec::new();
        for i in 0..replicas {
            let h = base.join(format!("r{i}"));
            std::fs::create_dir_all(&h)?;
            for d in ["runtime", "cache", "wheels"] {
                let _ = std::os::unix::fs::symlink(home.join(d), h.join(d));
            }
            nodes.push(Node {
                name: format!("r{i}"),
                port: free_port()?,
                metrics_port: free_port()?,
                home: h,
                child: None,
            });
        }
        let config = render(
            root,
            Site::Loopback,
            &format!("127.0.0.1:{proxy_port}"),
            "sub",
            &nodes
                .iter()
                .map(|n| Replica {
                    name: n.name.clone(),
                    address: format!("127.0.0.1:{}", n.port),
                })
                .collect::<Vec<_>>(),
        )?;
        let cfg = base.join("haproxy.cfg");
        std::fs::write(&cfg, config)?;
        let mut c = Cluster {
            bin: bin.to_path_buf(),
            nodes,
            proxy: None,
            proxy_url,
            env,
            statics,
            idp,
            base,
        };
        for i in 0..replicas {
            c.up(i).await?;
        }
        // Only once every replica is ready: a replica the proxy first sees as not ready joins
        // later and takes over principals whose sandboxes already live elsewhere.
        c.proxy = Some(
            Command::new(xtask::debian::ensure_tool(
                "the scale test",
                "haproxy",
                "haproxy",
            )?)
            .arg("-db")
            .arg("-f")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| anyhow::anyhow!("could not start haproxy (Debian's `haproxy` package): {e}"))?,
        );
        super::harness::wait_for_port(proxy_port);
        Ok(c)
    }

    /// Starts replica `i` (again) and waits until it says it is ready.
    pub async fn up(&mut self, i: usize) -> anyhow::Result<()> {
        let n = &mut self.nodes[i];
        let mut child = Command::new(&self.bin)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("CODE_SANDBOX_HOME", &n.home)
            .env("CODE_SANDBOX_REPLICA", &n.name)
            .env("CODE_SANDBOX_LISTEN", format!("127.0.0.1:{}", n.port))
            .env(
                "CODE_SANDBOX_METRICS_LISTEN",
                format!("127.0.0.1:{}", n.metrics_port),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        n.child = Some(child);
        let url = format!("http://127.0.0.1:{}/readyz", n.port);
        let http = reqwest::Client::new();
        for _ in 0..600 {
            if http.get(&url).send().await.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        anyhow::bail!("replica {} was not ready within 120 s", n.name)
    }

    /// Stops replica `i` with `signal` and waits for it to exit.
    pub async fn down(&mut self, i: usize, signal: i32) -> anyhow::Result<()> {
        if let Some(mut child) = self.nodes[i].child.take() {
            if let Some(pid) = child.id() {
                // SAFETY: kill only sends a signal to the child this process started.
                unsafe {
                    libc::kill(pid as i32, signal);
                }
            }
            tokio::time::timeout(Duration::from_secs(120), child.wait()).await??;
        }
        Ok(())
    }

    /// Deletes replica `i`'s disk (its sandboxes, saved states, ownership): a replica lost
    /// for good. The shared runtime and caches stay linked.
    pub fn wipe(&self, i: usize) -> anyhow::Result<()> {
        for e in std::fs::read_dir(&self.nodes[i].home)? {
            let e = e?;
            if e.file_type()?.is_symlink() {
                continue;
            }
            if e.file_type()?.is_dir() {
                std::fs::remove_dir_all(e.path())?;
            } else {
                std::fs::remove_file(e.path())?;
            }
        }
        Ok(())
    }

    /// Every principal: 26 with static tokens, and the provider's agents when signed in.
    pub async fn principals(&self) -> anyhow::Result<Vec<Who>> {
        let mut all: Vec<Who> = self
            .statics
            .iter()
            .map(|w| Who {
                name: w.name.clone(),
                token: w.token.clone(),
            })
            .collect();
        if let Some(idp) = &self.idp {
            let http = reqwest::Client::new();
            for agent in AGENTS {
                all.push(Who {
                    name: agent.to_string(),
                    token: idp.token(&http, agent, &self.proxy_url, "mcp").await?,
                });
            }
        }
        Ok(all)
    }

    /// Over the replicas running, the counter sample `line` (e.g. `..._total{tool="x",outcome="ok"}`).
    pub async fn counted(&self, sample: &str) -> anyhow::Result<BTreeMap<String, f64>> {
        let http = reqwest::Client::new();
        let mut per = BTreeMap::new();
        for n in self.nodes.iter().filter(|n| n.running()) {
            let text = http
                .get(format!("http://127.0.0.1:{}/metrics", n.metrics_port))
                .send()
                .await?
                .text()
                .await?;
            let v = text
                .lines()
                .find_map(|l| {
                    l.strip_prefix(sample)
                        .and_then(|rest| rest.trim().parse::<f64>().ok())
                })
                .unwrap_or(0.0);
            per.insert(n.name.clone(), v);
        }
        Ok(per)
    }

    pub async fn stop(mut self) {
        for i in 0..self.nodes.len() {
            let _ = self.down(i, libc::SIGTERM).await;
        }
        if let Some(mut proxy) = self.proxy.take() {
            let _ = proxy.kill().await;
        }
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// Makes the static principals' tokens, as an operator would (`token add`), before any replica
/// starts: a replica given a tokens file serves only while it holds a token.
fn static_tokens(bin: &Path, file: &Path) -> anyhow::Result<Vec<Who>> {
    let mut all = Vec::new();
    for i in 0..STATIC_PRINCIPALS {
        let name = format!("p{i:02}");
        let out = std::process::Command::new(bin)
            .args(["token", "add", &name])
            .env("CODE_SANDBOX_TOKENS", file)
            .output()?;
        anyhow::ensure!(out.status.success(), "token add {name} failed");
        all.push(Who {
            name,
            token: String::from_utf8(out.stdout)?.trim().to_string(),
        });
    }
    Ok(all)
}
