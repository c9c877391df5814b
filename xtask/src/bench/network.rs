//! `--network`: a fetch from guest code through the host (an allowed loopback HTTP server),
//! beside the same fetch by native CPython's urllib on this machine.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::harness::{self, call};
use super::table::Row;

const FETCHES: usize = 30;
const SIZES: [usize; 2] = [1 << 10, 4 << 20];

/// The median of `FETCHES` fetches of `url`, timed inside a Python loop: the same code runs
/// in the guest and in native CPython.
fn loop_code(url: &str) -> String {
    format!(
        "import time, urllib.request\nts = []\nfor _ in range({FETCHES}):\n    t = time.perf_counter_ns()\n    urllib.request.urlopen({url:?}).read()\n    ts.append(time.perf_counter_ns() - t)\nsorted(ts)[len(ts) // 2]"
    )
}

pub async fn rows(bin: &Path, home: &Path) -> anyhow::Result<(Vec<Row>, String)> {
    let scratch = std::env::temp_dir().join(format!("mcs-bench-net-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    for size in SIZES {
        std::fs::write(scratch.join(format!("{size}.bin")), vec![b'x'; size])?;
    }
    let (_web, port) = harness::serve_folder(&scratch)?;
    let allow = format!("http://127.0.0.1:{port}");
    let (client, _) = harness::serve(
        bin,
        home,
        &[
            ("CODE_SANDBOX_ALLOW_HOSTS", &allow),
            ("CODE_SANDBOX_NET_BYTES", "1000000000"),
        ],
    )
    .await?;
    let sb = harness::new_sandbox(&client).await?;
    let mut rows = Vec::new();
    for size in SIZES {
        let url = format!("http://127.0.0.1:{port}/{size}.bin");
        eprintln!("bench: {FETCHES} fetches of {size} bytes from guest code and natively");
        call(&client, "execute_code", json!({"sandbox_id": sb, "code": format!("import urllib.request\nurllib.request.urlopen({url:?}).read()\nNone")})).await?;
        let v = call(
            &client,
            "execute_code",
            json!({"sandbox_id": sb, "code": loop_code(&url), "timeout_seconds": 300}),
        )
        .await?;
        let guest = Duration::from_nanos(v["result"].as_str().unwrap_or("0").parse().unwrap_or(0));
        let out = std::process::Command::new("python3")
            .args([
                "-c",
                &format!(
                    "{}\nprint(_)",
                    loop_code(&url).replace("\nsorted(", "\n_ = sorted(")
                ),
            ])
            .output()?;
        let native = Duration::from_nanos(String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0));
        rows.push(Row {
            what: format!(
                "urllib fetch of {} from guest code (allowed loopback HTTP host)",
                human(size)
            ),
            ours: guest,
            baseline: Some(("native CPython's urllib, same URL".into(), native)),
            runs: FETCHES,
        });
    }
    let _ = client.cancel().await;
    let _ = std::fs::remove_dir_all(&scratch);
    Ok((
        rows,
        "Each request goes through the host door: the host checks the allowlist and the address, makes the request with reqwest, and hands the body over in pieces of up to 256 KiB.".into(),
    ))
}

fn human(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}
