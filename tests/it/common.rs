//! Test harness: starts the real `mcp-code-sandbox` binary and talks MCP to it over stdio
//! with rmcp's client, exactly as Claude Desktop would.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// The runtime home shared by every test server: `CODE_SANDBOX_HOME` if set, else the same
/// platform folder a user's server uses.
pub fn runtime_home() -> PathBuf {
    mcp_code_sandbox::config::Settings::defaults_with_home(
        std::env::var_os("CODE_SANDBOX_HOME").map(PathBuf::from),
    )
    .home_dir()
}

/// Makes `to` a link to the folder `from` (on Windows a directory symlink, which needs the
/// developer mode or an administrator, as CI runners have): the one platform difference of the
/// helpers that share the installed runtime between homes.
pub fn link_dir(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    #[cfg(unix)]
    return std::os::unix::fs::symlink(from, to);
    #[cfg(windows)]
    return std::os::windows::fs::symlink_dir(from, to);
}

/// Installs and compiles the runtime once per test binary (instant when already there), so a
/// test never races the server's background installation.
pub fn ensure_runtime() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let layout = mcp_code_sandbox::runtime::Layout::new(runtime_home());
        let plain = mcp_code_sandbox::wasm::direct::install_and_load(&layout, None, false, &|s| {
            progress(&format!("runtime: {s}"))
        })
        .unwrap_or_else(|e| panic!("the runtime could not be installed: {e}"));
        mcp_code_sandbox::wasm::direct::prepare_warm_image(&plain, &layout)
            .unwrap_or_else(|e| panic!("the warm image could not be built: {e}"));
    });
}

/// Progress of the preparation steps, straight to the process's stderr: the test harness
/// captures `eprintln!` inside tests, and a minute of silence on a fresh clone looks like a hang.
pub fn progress(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "prepare: {message}");
}

/// Installs the pinned npm packages of `dir` (relative to the repository) the first time a
/// test needs them, through the same code as `cargo xtask bundle`; a clear failure naming what
/// is missing (node, npm, a lock file out of step) instead of one deep inside a test.
pub fn ensure_npm(dir: &str) -> PathBuf {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let dir = repo_root().join(dir);
    xtask::npm::require_node().unwrap_or_else(|e| panic!("{e}"));
    xtask::npm::ensure(&dir, &|m| progress(m)).unwrap_or_else(|e| panic!("{e}"));
    dir
}

/// Checks `documents` against the published JSON Schema at `schema` (a path in the repository)
/// with Ajv (tests/ts/validate_json.mjs), a validator the server's code does not share.
/// A text file of the repository; one that cannot be read fails the test, naming it.
pub fn read_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every file under `dir` whose extension is one of `exts`.
pub fn files_under(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| exts.iter().any(|w| x == *w)) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

pub fn assert_schema_valid(schema: &str, documents: &[serde_json::Value]) {
    if let Err(said) = schema_check(schema, documents) {
        panic!("not valid against {schema}: {said}");
    }
}

/// What Ajv says of `documents` against `schema`: `Err` with its errors if any is not valid.
pub fn schema_check(schema: &str, documents: &[serde_json::Value]) -> Result<(), String> {
    let ts = ensure_npm("tests/ts");
    let dir = private_home().join("documents");
    std::fs::create_dir_all(&dir).unwrap();
    let files: Vec<PathBuf> = documents
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let file = dir.join(format!("{i}.json"));
            std::fs::write(&file, d.to_string()).unwrap();
            file
        })
        .collect();
    let out = std::process::Command::new("node")
        .arg("validate_json.mjs")
        .arg(repo_root().join(schema))
        .args(&files)
        .current_dir(&ts)
        .output()
        .expect("node runs");
    let _ = std::fs::remove_dir_all(&dir);
    match out.status.code() {
        Some(0) => Ok(()),
        Some(1) => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        _ => panic!(
            "the validator could not run: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The MCP Bundle of the binary under test, built (as `cargo xtask bundle` builds it) unless
/// an up-to-date one is already in `dist/`.
pub fn ensure_bundle() -> PathBuf {
    static DONE: OnceLock<PathBuf> = OnceLock::new();
    DONE.get_or_init(|| {
        ensure_runtime();
        progress("the bundle (as `cargo xtask bundle` builds it), unless dist/ has a current one");
        // On a thread of its own, so an async test (inside a Tokio runtime) may call this too.
        std::thread::spawn(|| {
            let rt = tokio::runtime::Runtime::new().expect("a runtime to build the bundle in");
            rt.block_on(xtask::bundle::ensure_current(
                &repo_root(),
                std::path::Path::new(env!("CARGO_BIN_EXE_mcp-code-sandbox")),
                &runtime_home(),
            ))
        })
        .join()
        .expect("the bundle build did not panic")
        .unwrap_or_else(|e| panic!("the bundle could not be built: {e:#}"))
    })
    .clone()
}

/// A home of its own that shares the installed runtime, compiled module and wheels, for tests
/// that kill a server: in a shared home, another test's server starting meanwhile would clean
/// up the killed server's folders before the test could look at them.
pub fn private_home() -> PathBuf {
    ensure_runtime();
    let shared = runtime_home();
    let home = std::env::temp_dir().join(format!("mcs-home-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&home).expect("create a private home");
    for d in ["runtime", "cache", "wheels"] {
        link_dir(&shared.join(d), &home.join(d)).expect("link the shared runtime");
    }
    home
}

pub struct Server {
    pub client: RunningService<RoleClient, ()>,
    pub home: PathBuf,
    /// The server process, for tests that kill it.
    #[allow(dead_code)]
    pub pid: Option<u32>,
}

/// Not passed to the server: `start_with` writes its log (stderr) to this file instead.
pub const LOG_TO: &str = "MCS_TEST_LOG_TO";

/// A generous bound so a hung server fails the test instead of hanging CI.
const CALL_BOUND: Duration = Duration::from_secs(120);

impl Server {
    pub async fn start() -> Server {
        Server::start_with(&[]).await
    }

    pub async fn start_with(envs: &[(&str, &str)]) -> Server {
        ensure_runtime();
        let home = envs
            .iter()
            .find(|(k, _)| *k == "CODE_SANDBOX_HOME")
            .map_or_else(runtime_home, |(_, v)| PathBuf::from(v));
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"));
        // Tests share one home: each server deletes its sandboxes at exit unless a test asks
        // for persistence (in a home of its own).
        cmd.env("CODE_SANDBOX_HOME", &home)
            .env("RUST_LOG", "warn")
            .env("CODE_SANDBOX_PERSIST", "false");
        cmd.env_remove("INTERPRETER_TYPE");
        let mut log = None;
        for (k, v) in envs {
            if *k == LOG_TO {
                log = Some(std::fs::File::create(v).expect("create the server's log file"));
            } else {
                cmd.env(k, v);
            }
        }
        let transport = match log {
            Some(file) => TokioChildProcess::builder(cmd)
                .stderr(file)
                .spawn()
                .map(|(t, _)| t),
            None => TokioChildProcess::new(cmd),
        }
        .expect("spawn the server");
        let pid = transport.id();
        let client = tokio::time::timeout(CALL_BOUND, ().serve(transport))
            .await
            .expect("initialize in time")
            .expect("initialize");
        Server { client, home, pid }
    }

    pub async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        let Value::Object(obj) = args else {
            panic!("arguments must be an object")
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(obj);
        tokio::time::timeout(CALL_BOUND, self.client.call_tool(params))
            .await
            .unwrap_or_else(|_| panic!("{tool} did not answer within {CALL_BOUND:?}"))
            .unwrap_or_else(|e| panic!("{tool} failed at the protocol level: {e}"))
    }

    /// Calls a tool and returns (is_error, structured content, text).
    pub async fn call_json(&self, tool: &str, args: Value) -> (bool, Value, String) {
        let r = self.call(tool, args).await;
        (
            r.is_error.unwrap_or(false),
            r.structured_content.clone().unwrap_or(Value::Null),
            text_of(&r),
        )
    }

    pub async fn exec(&self, sandbox: &str, code: &str) -> (bool, Value) {
        let (err, v, _) = self
            .call_json("execute_code", json!({"sandbox_id": sandbox, "code": code}))
            .await;
        (err, v)
    }

    /// Runs code that must succeed; its structured result.
    pub async fn run_ok(&self, sandbox: &str, code: &str) -> Value {
        let (err, v, text) = self
            .call_json("execute_code", json!({"sandbox_id": sandbox, "code": code}))
            .await;
        assert!(!err, "the code failed: {v} {text}");
        v
    }

    /// Calls a tool that must succeed; its structured result.
    pub async fn ok(&self, tool: &str, args: Value) -> Value {
        let (err, v, text) = self.call_json(tool, args).await;
        assert!(!err, "{tool} failed: {text}");
        v
    }

    /// Installs a package that must install; the structured result.
    pub async fn install(&self, sandbox: &str, package: &str) -> Value {
        self.ok(
            "install_package",
            json!({"sandbox_id": sandbox, "package_name": package}),
        )
        .await
    }

    pub async fn create(&self) -> String {
        let (err, v, text) = self.call_json("create_sandbox", json!({})).await;
        assert!(!err, "create_sandbox failed: {text}");
        v["sandbox_id"].as_str().expect("sandbox_id").to_string()
    }

    pub async fn create_with(&self, args: Value) -> String {
        let (err, v, text) = self.call_json("create_sandbox", args).await;
        assert!(!err, "create_sandbox failed: {text}");
        v["sandbox_id"].as_str().expect("sandbox_id").to_string()
    }

    /// How many descriptors the server process holds open (Linux only).
    #[allow(dead_code)]
    pub fn open_descriptors(&self) -> Option<usize> {
        let dir = format!("/proc/{}/fd", self.pid?);
        Some(std::fs::read_dir(dir).ok()?.count())
    }

    pub fn workspace(&self, id: &str) -> PathBuf {
        self.home.join("sandboxes").join(id)
    }

    pub async fn stop(self) {
        let _ = self.client.cancel().await;
    }
}

pub fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The description a client is given for the tool `name`.
pub async fn tool_description<H: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, H>,
    name: &str,
) -> String {
    let tools = client.list_all_tools().await.expect("tools/list");
    tools
        .into_iter()
        .find(|t| t.name == name)
        .and_then(|t| t.description.map(|d| d.to_string()))
        .unwrap_or_else(|| panic!("no tool {name}"))
}

/// Runs code in `sb` with up to two minutes: its structured result, a Python exception
/// included (which is an error result that still carries the execution).
pub async fn run(server: &Server, sb: &str, code: &str) -> Value {
    let (err, v, text) = server
        .call_json(
            "execute_code",
            json!({"sandbox_id": sb, "code": code, "timeout_seconds": 120}),
        )
        .await;
    assert!(v["sandbox_id"] == sb, "execute_code gave no execution: {text}");
    assert_eq!(err, !v["error"].is_null(), "{v}");
    v
}

/// `(exception name, message)` of an execution's error; empty when it has none.
pub fn error_of(v: &Value) -> (String, String) {
    (
        v["error"]["name"].as_str().unwrap_or_default().to_string(),
        v["error"]["value"].as_str().unwrap_or_default().to_string(),
    )
}

/// A loopback port free now, for a server that must be told its port before it starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind a loopback port")
        .local_addr()
        .expect("its address")
        .port()
}
