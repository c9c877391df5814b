//! The background-run row of `cargo xtask bench --remote`: one principal's interactive `1+1`
//! while another has the most background runs allowed going, all of them CPU-bound, beside
//! the same with none going.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::{call, new_sandbox, private_home, wait_for_warm};
use super::remote::{connect, start_http};
use super::table::{Row, median};

const CALLS: usize = 100;

/// Background runs going at once in the measurement (the server's default: one per core).
fn runs() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

async fn round_trips(c: &super::remote::Client, id: &str) -> anyhow::Result<Vec<Duration>> {
    let mut out = Vec::new();
    for _ in 0..CALLS {
        let t = Instant::now();
        call(c, "execute_code", json!({"sandbox_id": id, "code": "1+1"})).await?;
        out.push(t.elapsed());
    }
    Ok(out)
}

pub async fn rows(bin: &Path, home: &Path) -> anyhow::Result<Vec<Row>> {
    let h = private_home(home, "background")?;
    let (mut server, url, token) = start_http(bin, &h, &[]).await?;
    let out = std::process::Command::new(bin)
        .args(["token", "add", "bulk"])
        .env("CODE_SANDBOX_TOKENS", h.join("tokens"))
        .output()?;
    anyhow::ensure!(out.status.success(), "token add failed");
    let bulk_token = String::from_utf8(out.stdout)?.trim().to_string();
    let me = connect(&url, &token).await?;
    let bulk = connect(&url, &bulk_token).await?;
    wait_for_warm(&me).await?;
    let id = new_sandbox(&me).await?;
    call(&me, "execute_code", json!({"sandbox_id": id, "code": "0"})).await?;
    let quiet = median(round_trips(&me, &id).await?);
    let mut started = Vec::new();
    for _ in 0..runs() {
        let sb = new_sandbox(&bulk).await?;
        let v = call(
            &bulk,
            "execute_code",
            json!({"sandbox_id": sb, "code": "while True:\n    sum(range(10000))", "background": true}),
        )
        .await?;
        anyhow::ensure!(v["state"] == "running", "a background run did not start: {v}");
        started.push(v["run_id"].as_str().unwrap_or_default().to_string());
    }
    // Let them get going.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let busy = median(round_trips(&me, &id).await?);
    for run in &started {
        call(&bulk, "cancel_run", json!({"run_id": run})).await?;
    }
    let _ = me.cancel().await;
    let _ = bulk.cancel().await;
    let _ = server.kill().await;
    let _ = std::fs::remove_dir_all(&h);
    Ok(vec![Row {
        what: format!(
            "execute_code(\"1+1\") over HTTP while another principal has {} CPU-bound background runs going",
            runs()
        ),
        ours: busy,
        baseline: Some(("the same with no run going".into(), quiet)),
        runs: CALLS,
    }])
}
