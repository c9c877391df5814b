//! The persistence rows: fork, checkpoint, restore, saving at shutdown and the first call
//! after a restart, for sandboxes with pandas in use; and what a saved sandbox takes on disk.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::{Client, call, new_sandbox, private_home, serve, tree_bytes, wait_for_warm};
use super::table::{Row, median};

/// Restarts measured for the first result in a saved sandbox.
const RESTARTS: usize = 7;

/// SIGTERM to the server, then until it is gone (it saves its sandboxes first).
async fn terminate(pid: Option<u32>) -> anyhow::Result<()> {
    if let Some(pid) = pid {
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()?;
        gone(pid).await;
    }
    Ok(())
}

/// Until the process is gone, or a zombie waiting for us: either way it has finished saving.
async fn gone(pid: u32) {
    while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    }) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Fork, checkpoint, restore, saving at shutdown and the first call after a restart, for
/// sandboxes with pandas in use; and what a saved sandbox takes on disk.
/// Code that leaves a pandas DataFrame in use.
const USE_PANDAS: &str = "import pandas as pd, numpy as np\ndf = pd.DataFrame({'a': np.arange(100_000)})\ndf['b'] = df.a * 2\nint(df.b.sum())";

fn row(what: &str, ts: Vec<Duration>, runs: usize) -> Row {
    Row {
        what: what.into(),
        ours: median(ts),
        baseline: None,
        runs,
    }
}

pub async fn rows(bin: &Path, home: &Path, rows: &mut Vec<Row>) -> anyhow::Result<String> {
    let h = private_home(home, "persist")?;
    let (c, pid) = serve(bin, &h, &[("CODE_SANDBOX_PERSIST", "true")]).await?;
    wait_for_warm(&c).await?;
    let checkpoint_bytes = fork_checkpoint_restore(&c, rows).await?;
    let mut ids = Vec::new();
    for _ in 0..10 {
        let sid = new_sandbox(&c).await?;
        call(&c, "execute_code", json!({"sandbox_id": sid, "code": USE_PANDAS})).await?;
        ids.push(sid);
    }
    let t = Instant::now();
    terminate(pid).await?;
    let save_all = t.elapsed();
    drop(c);
    rows.push(row(
        "SIGTERM -> exit, saving 10 sandboxes with pandas in use",
        vec![save_all],
        1,
    ));
    let state_bytes = tree_bytes(&h.join("scratch").join(&ids[0]).join("saved"));
    let (restarts, firsts) = restarts(bin, &h, &ids).await?;
    rows.push(row(
        "server start -> first result in a saved pandas sandbox (restored on first use)",
        restarts,
        RESTARTS,
    ));
    rows.push(row(
        "first call in each other saved sandbox (restore + run)",
        firsts,
        9,
    ));
    let _ = std::fs::remove_dir_all(&h);
    Ok(format!(
        "Saved on disk, beyond the sandbox's files: {:.2} MiB of interpreter state per pandas sandbox; a checkpoint of one (state, files and packages) {:.2} MiB.",
        state_bytes as f64 / 1048576.0,
        checkpoint_bytes as f64 / 1048576.0
    ))
}

/// Ten rounds of fork, checkpoint and restore of a sandbox with pandas in use, each a row;
/// the last checkpoint's size.
async fn fork_checkpoint_restore(c: &Client, rows: &mut Vec<Row>) -> anyhow::Result<u64> {
    let id = new_sandbox(c).await?;
    call(c, "execute_code", json!({"sandbox_id": id, "code": USE_PANDAS})).await?;
    let (mut forks, mut cps, mut restores) = (Vec::new(), Vec::new(), Vec::new());
    call(
        c,
        "checkpoint_sandbox",
        json!({"sandbox_id": id, "name": "first"}),
    )
    .await?;
    let mut checkpoint_bytes = 0;
    for i in 0..10 {
        let t = Instant::now();
        let v = call(c, "fork_sandbox", json!({"sandbox_id": id})).await?;
        forks.push(t.elapsed());
        let fid = v["sandbox_id"].as_str().unwrap_or_default().to_string();
        call(c, "close_sandbox", json!({"sandbox_id": fid})).await?;
        let change = format!("df['c{i}'] = df.a + {i}");
        call(c, "execute_code", json!({"sandbox_id": id, "code": change})).await?;
        let t = Instant::now();
        let v = call(
            c,
            "checkpoint_sandbox",
            json!({"sandbox_id": id, "name": format!("cp{i}")}),
        )
        .await?;
        cps.push(t.elapsed());
        checkpoint_bytes = v["checkpoint"]["bytes"].as_u64().unwrap_or(0);
        let t = Instant::now();
        call(
            c,
            "restore_sandbox",
            json!({"sandbox_id": id, "checkpoint": "first"}),
        )
        .await?;
        restores.push(t.elapsed());
    }
    call(c, "close_sandbox", json!({"sandbox_id": id})).await?;
    rows.push(row(
        "fork_sandbox of a sandbox with a pandas DataFrame in use",
        forks,
        10,
    ));
    rows.push(row("checkpoint_sandbox of it", cps, 10));
    rows.push(row("restore_sandbox of it", restores, 10));
    Ok(checkpoint_bytes)
}

/// Each restart: a new process, its handshake, and a call in a saved sandbox that is restored
/// on that first use; then SIGTERM saves it again for the next round. The first round also
/// times the first call in each other saved sandbox.
async fn restarts(bin: &Path, h: &Path, ids: &[String]) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let (mut restarts, mut firsts) = (Vec::new(), Vec::new());
    for round in 0..RESTARTS {
        let t = Instant::now();
        let (c, pid) = serve(bin, h, &[("CODE_SANDBOX_PERSIST", "true")]).await?;
        let sum = json!({"sandbox_id": ids[round % ids.len()], "code": "int(df.b.sum())"});
        call(&c, "execute_code", sum).await?;
        restarts.push(t.elapsed());
        if round == 0 {
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
        }
        terminate(pid).await?;
        drop(c);
    }
    Ok((restarts, firsts))
}
