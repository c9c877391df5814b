//! Every configured server, started at start-up in the background and stopped at shutdown;
//! what the model is told about them; and which of them one caller may use.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::config;
use super::link::{Link, Standing};

/// Which servers a caller's code may use: all of them (the local user), or those a remote
/// principal's tokens line names (`mcp=NAME,NAME`).
#[derive(Clone, Debug)]
pub enum Allowed {
    All,
    Only(Arc<[String]>),
}

impl Allowed {
    pub fn admits(&self, server: &str) -> bool {
        match self {
            Allowed::All => true,
            Allowed::Only(names) => names.iter().any(|n| n == server),
        }
    }
}

pub struct Gateway {
    links: Vec<Arc<Link>>,
    /// Why code mode is off although a servers file was named (the file could not be read).
    problem: Option<String>,
    pub(super) max_calls: usize,
    version: tokio::sync::watch::Sender<u64>,
}

impl Gateway {
    /// Reads the servers file and starts every stdio server in the background (HTTP ones
    /// connect at first use). A file that cannot be read turns code mode off, and says why
    /// in the log and in `execute_code`'s description, rather than stopping the server.
    pub fn start(
        file: &Path,
        own_listen: Option<&str>,
        max_calls: usize,
        start_time: Duration,
    ) -> Arc<Gateway> {
        let (version, _) = tokio::sync::watch::channel(0u64);
        let (entries, problem) = match config::load(file, own_listen) {
            Ok(entries) => (entries, None),
            Err(e) => {
                tracing::error!("code mode is off: {e}");
                (Vec::new(), Some(e.to_string()))
            }
        };
        let gateway = Arc::new_cyclic(|weak: &std::sync::Weak<Gateway>| {
            let weak = weak.clone();
            let changed: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
                if let Some(g) = weak.upgrade() {
                    g.version.send_modify(|v| *v += 1);
                }
            });
            Gateway {
                links: entries
                    .into_iter()
                    .map(|e| Link::new(e.name, e.reach, e.policy, start_time, changed.clone()))
                    .collect(),
                problem,
                max_calls,
                version,
            }
        });
        for l in gateway.links.iter().filter(|l| l.is_stdio()) {
            l.kick();
        }
        gateway
    }

    /// The number [`Gateway::changes`] is at: the guest keeps its listing while it stays.
    pub fn version(&self) -> u64 {
        *self.version.borrow()
    }

    /// Bumps whenever a server's tools may have changed (started, died, listed again).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Waits for the next change of `changes` and the ones right behind it: several servers
    /// starting together make one notification, not one each. `false` once the gateway is gone.
    pub async fn next_change(changes: &mut tokio::sync::watch::Receiver<u64>) -> bool {
        if changes.changed().await.is_err() {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        changes.borrow_and_update();
        true
    }

    pub(super) fn link(&self, name: &str) -> Option<&Arc<Link>> {
        self.links.iter().find(|l| l.name == name)
    }

    pub(super) fn links<'a>(&'a self, allowed: &'a Allowed) -> impl Iterator<Item = &'a Arc<Link>> + 'a {
        self.links.iter().filter(move |l| allowed.admits(&l.name))
    }

    /// What `execute_code`'s description says about code mode for this caller.
    pub fn describe(&self, allowed: &Allowed) -> String {
        if let Some(problem) = &self.problem {
            return format!(" Code mode (calling the user's other MCP servers from code) is off: {problem}.");
        }
        let mut parts = Vec::new();
        for l in self.links(allowed) {
            parts.push(match l.standing() {
                Standing::Ready { tools } => format!("{} ({tools} tools)", l.name),
                Standing::Starting => format!("{} (starting)", l.name),
                Standing::Down { why } => format!("{} (unavailable: {why})", l.name),
            });
        }
        if parts.is_empty() {
            return String::new();
        }
        format!(
            " The code can call the user's other MCP servers as Python functions, so their data is filtered and joined in code instead of passing through the conversation: `import mcp_tools`; `mcp_tools.servers()` lists them, `help(mcp_tools.SERVER.TOOL)` shows a tool's arguments, `mcp_tools.SERVER.TOOL(**arguments)` calls it and returns its data. Servers: {}.",
            parts.join(", ")
        )
    }

    /// Whether `allowed` leaves this caller any server to call.
    pub(super) fn offers_any(&self, allowed: &Allowed) -> bool {
        self.problem.is_none() && self.links(allowed).next().is_some()
    }

    /// Code mode named but not available (a backend without it): the description says why.
    pub fn off(problem: String) -> Arc<Gateway> {
        let (version, _) = tokio::sync::watch::channel(0u64);
        Arc::new(Gateway {
            links: Vec::new(),
            problem: Some(problem),
            max_calls: 0,
            version,
        })
    }

    /// Stops every server (child processes end with their sessions).
    pub fn shutdown(&self) {
        for l in &self.links {
            l.stop();
        }
    }
}
