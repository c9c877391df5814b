//! The persistence rows: fork, checkpoint, restore, saving at shutdown and the first call
//! after a restart, for sandboxes with pandas in use; and what a saved sandbox takes on disk.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::{call, new_sandbox, private_home, serve, tree_bytes, wait_for_warm};
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
pub async fn rows(bin: &Path, home: &Path, rows: &mut Vec<Row>) -> anyhow::Result<String> {
    let use_pandas = "import pandas as pd, numpy as np\ndf = pd.DataFrame({'a': np.arange(100_000)})\ndf['b'] = df.a * 2\nint(df.b.sum())";
    let h = private_home(home, "persist")?;
    let start = |h: PathBuf| async move { serve(bin, &h, &[("CODE_SANDBOX_PERSIST", "true")]).await };
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
    terminate(pid).await?;
    let save_all = t.elapsed();
    drop(c);
    rows.push(Row {
        what: "SIGTERM -> exit, saving 10 sandboxes with pandas in use".into(),
        ours: save_all,
        baseline: None,
        runs: 1,
    });
    let state_bytes = tree_bytes(&h.join("scratch").join(&ids[0]).join("saved"));
    // Each restart: a new process, its handshake, and a call in a saved sandbox that is
    // restored on that first use; then SIGTERM saves it again for the next round.
    let (mut restarts, mut firsts) = (Vec::new(), Vec::new());
    for round in 0..RESTARTS {
        let t = Instant::now();
        let (c, pid) = start(h.clone()).await?;
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
    rows.push(Row {
        what: "server start -> first result in a saved pandas sandbox (restored on first use)".into(),
        ours: median(restarts),
        baseline: None,
        runs: RESTARTS,
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
