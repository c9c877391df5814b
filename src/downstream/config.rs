//! The servers file (`CODE_SANDBOX_MCP_SERVERS`): Claude Desktop's `mcpServers` shape, plus
//! per-server `allow` and `deny` lists of tool-name globs.
//!
//! The same file a user already keeps for Claude Desktop can be pointed at, so unknown keys
//! are ignored; what would break a server (no command and no url, both, a bad url) marks that
//! one entry unusable with the reason, and the others still work.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::glob;

/// Largest servers file read (it is a settings file, not data).
const MAX_FILE: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "the MCP servers file {file} could not be read ({source}); fix CODE_SANDBOX_MCP_SERVERS (or --mcp-servers) to name a readable JSON file"
    )]
    Unreadable { file: PathBuf, source: std::io::Error },
    #[error("the MCP servers file {file} is over 1 MiB; it should hold only server entries")]
    TooLarge { file: PathBuf },
    #[error(
        "the MCP servers file {file} is not what code mode reads ({reason}); it needs Claude Desktop's shape: {{\"mcpServers\": {{\"NAME\": {{\"command\": ..., \"args\": [...]}}}}}}"
    )]
    Malformed { file: PathBuf, reason: String },
}

/// How to reach one server.
#[derive(Clone, Debug, PartialEq)]
pub enum Reach {
    /// A child process speaking MCP over its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// A streamable-HTTP endpoint.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// Which of a server's tools guest code may call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Policy {
    /// Globs; empty means every tool.
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

impl Policy {
    /// Allow rules admit a name as it is spelled; deny rules refuse it as spelled or folded
    /// (see [`glob::folded`]), so another spelling of a denied tool is denied too.
    pub fn permits(&self, tool: &str) -> bool {
        let folded = glob::folded(tool);
        (self.allow.is_empty() || self.allow.iter().any(|g| glob::matches(g, tool)))
            && !self
                .deny
                .iter()
                .any(|g| glob::matches(g, tool) || glob::matches(&glob::folded(g), &folded))
    }
}

/// One entry of the file: a server to use, or the reason it cannot be.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    pub reach: Result<Reach, String>,
    pub policy: Policy,
}

/// One entry as written; every field optional, so one bad entry does not sink the file.
#[derive(Deserialize)]
struct RawEntry {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    disabled: bool,
}

#[derive(Deserialize)]
struct RawFile {
    #[serde(rename = "mcpServers")]
    mcp_servers: BTreeMap<String, serde_json::Value>,
}

/// Reads the servers file. `own_listen`: this server's own HTTP address in remote mode, which
/// an entry must not point back at.
pub fn load(file: &Path, own_listen: Option<&str>) -> Result<Vec<Entry>, ConfigError> {
    let meta = std::fs::metadata(file).map_err(|source| ConfigError::Unreadable {
        file: file.to_path_buf(),
        source,
    })?;
    if meta.len() > MAX_FILE {
        return Err(ConfigError::TooLarge {
            file: file.to_path_buf(),
        });
    }
    let text = std::fs::read(file).map_err(|source| ConfigError::Unreadable {
        file: file.to_path_buf(),
        source,
    })?;
    parse(&text, own_listen).map_err(|reason| ConfigError::Malformed {
        file: file.to_path_buf(),
        reason,
    })
}

pub fn parse(text: &[u8], own_listen: Option<&str>) -> Result<Vec<Entry>, String> {
    let raw: RawFile = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (name, value) in raw.mcp_servers {
        if name.is_empty() || name.len() > 64 || name.chars().any(|c| c.is_control() || c == '.') {
            return Err(format!(
                "the server name {name:?} must be 1 to 64 characters with no dots or control characters"
            ));
        }
        let entry = match serde_json::from_value::<RawEntry>(value) {
            Ok(e) if e.disabled => continue,
            Ok(e) => e,
            Err(e) => {
                out.push(Entry {
                    name,
                    reach: Err(format!("its entry could not be read: {e}")),
                    policy: Policy::default(),
                });
                continue;
            }
        };
        let policy = Policy {
            allow: entry.allow.clone(),
            deny: entry.deny.clone(),
        };
        let reach = reach(entry, own_listen);
        out.push(Entry { name, reach, policy });
    }
    Ok(out)
}

fn reach(e: RawEntry, own_listen: Option<&str>) -> Result<Reach, String> {
    match (e.command, e.url) {
        (Some(_), Some(_)) => Err("it has both a command and a url; give one".into()),
        (None, None) => Err("it has neither a command nor a url".into()),
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err("its command is empty".into());
            }
            if let Some(which) = names_this_server(&command, &e.args) {
                return Err(format!(
                    "it would start this server itself ({which}), and code calling it would call itself; remove the entry"
                ));
            }
            Ok(Reach::Stdio {
                command,
                args: e.args,
                env: e.env,
                cwd: e.cwd,
            })
        }
        (None, Some(url)) => {
            let parsed =
                reqwest::Url::parse(&url).map_err(|err| format!("its url {url:?} is not a URL ({err})"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(format!("its url {url:?} is not http or https"));
            }
            if let Some(listen) = own_listen {
                let here = format!(
                    "{}:{}",
                    parsed.host_str().unwrap_or_default(),
                    parsed.port_or_known_default().unwrap_or_default()
                );
                if same_address(&here, listen) {
                    return Err(format!(
                        "its url points at this server's own address {listen}, and code calling it would call itself; remove the entry"
                    ));
                }
            }
            Ok(Reach::Http {
                url,
                headers: e.headers,
            })
        }
    }
}

/// Whether `command` (or, run through a launcher such as `npx`, one of `args`) is this
/// program: its name, or the very file that is running.
fn names_this_server(command: &str, args: &[String]) -> Option<String> {
    let own = std::env::current_exe().ok().and_then(|p| p.canonicalize().ok());
    let ours = |word: &str| {
        let path = Path::new(word);
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let base = stem.split('@').next().unwrap_or_default();
        if base == env!("CARGO_PKG_NAME") {
            return true;
        }
        match (&own, path.canonicalize().ok()) {
            (Some(own), Some(p)) => &p == own,
            _ => false,
        }
    };
    std::iter::once(command)
        .chain(args.iter().map(String::as_str))
        .find(|w| ours(w))
        .map(str::to_string)
}

fn same_address(a: &str, listen: &str) -> bool {
    let norm = |s: &str| {
        s.trim_start_matches('[')
            .replace("]:", ":")
            .replace("localhost:", "127.0.0.1:")
            .replace("0.0.0.0:", "127.0.0.1:")
    };
    norm(a) == norm(listen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_desktop_entries_are_read_and_bad_ones_say_why() {
        let text = br#"{"mcpServers": {
            "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {"A": "1"}},
            "web": {"url": "http://127.0.0.1:9000/mcp", "headers": {"X-Key": "k"}, "deny": ["delete_*"]},
            "both": {"command": "x", "url": "http://a/"},
            "me": {"command": "/usr/local/bin/mcp-code-sandbox"},
            "me2": {"command": "npx", "args": ["mcp-code-sandbox@1.0"]},
            "loop": {"url": "http://localhost:8765/mcp"},
            "off": {"command": "x", "disabled": true},
            "odd": {"command": 3}
        }, "globalShortcut": "x"}"#;
        let entries = parse(text, Some("127.0.0.1:8765")).unwrap();
        let by = |n: &str| entries.iter().find(|e| e.name == n).unwrap();
        assert!(matches!(&by("memory").reach, Ok(Reach::Stdio { command, .. }) if command == "npx"));
        assert!(matches!(&by("web").reach, Ok(Reach::Http { .. })));
        assert!(by("web").policy.permits("read_graph"));
        assert!(!by("web").policy.permits("delete_entities"));
        assert!(
            by("both")
                .reach
                .as_ref()
                .unwrap_err()
                .contains("both a command and a url")
        );
        assert!(
            by("me")
                .reach
                .as_ref()
                .unwrap_err()
                .contains("would start this server itself")
        );
        assert!(
            by("me2")
                .reach
                .as_ref()
                .unwrap_err()
                .contains("would start this server itself")
        );
        assert!(by("loop").reach.as_ref().unwrap_err().contains("own address"));
        assert!(by("odd").reach.is_err());
        assert!(!entries.iter().any(|e| e.name == "off"));
        assert!(
            parse(b"{\"servers\": {}}", None)
                .unwrap_err()
                .contains("mcpServers")
        );
    }

    #[test]
    fn allow_lists_narrow_and_deny_lists_win() {
        let p = Policy {
            allow: vec!["read_*".into(), "search_nodes".into()],
            deny: vec!["read_secret*".into()],
        };
        assert!(p.permits("read_graph"));
        assert!(p.permits("search_nodes"));
        assert!(!p.permits("create_entities"));
        assert!(!p.permits("read_secrets"));
        assert!(Policy::default().permits("anything"));
    }

    #[test]
    fn a_denied_tool_is_denied_under_every_spelling() {
        let p = Policy {
            allow: vec![],
            deny: vec!["delete_all".into(), "*admin*".into()],
        };
        for name in [
            "delete_all",
            "DELETE_ALL",
            "delete_all ",
            "\tdelete_all",
            "delete\u{200b}_all",
            "ADMIN_RESET",
            "Admin",
        ] {
            assert!(!p.permits(name), "{name:?} was permitted");
        }
        assert!(p.permits("read_notes"));
        // An allow rule admits the name as spelled only.
        let only = Policy {
            allow: vec!["read_*".into()],
            deny: vec![],
        };
        assert!(!only.permits("READ_notes"));
    }
}
