//! Part of `--network`: `install_package` from a package index on loopback (pypiserver over the
//! pinned wheels of tests/index), each time into an empty cache, beside pip installing the same
//! wheels from the same index; and `requests.get` from guest code beside the same on native CPython.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::{self, Killed, call, free_port, wait_for_port};
use super::table::{Row, median};

const INSTALLS: usize = 5;
const FETCHES: usize = 30;

/// The loopback index and the folder of a web server guest code may fetch from.
struct Loopback {
    index: String,
    allow: String,
    url: String,
    scratch: std::path::PathBuf,
}

pub async fn rows(root: &Path, bin: &Path, home: &Path) -> anyhow::Result<Vec<Row>> {
    let dir = root.join("tests/index");
    let wheels =
        xtask::pyvenv::wheels(&dir, &|m| eprintln!("bench: {m}")).map_err(|e| anyhow::anyhow!("{e}"))?;
    let venv = dir.join("venv");
    let port = free_port()?;
    let _index = Killed(
        xtask::pyvenv::pypiserver(&dir, &wheels, port)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?,
    );
    wait_for_port(port);
    let scratch = std::env::temp_dir().join(format!("mcs-bench-index-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    std::fs::write(scratch.join("1k.bin"), vec![b'x'; 1 << 10])?;
    let (_web, web_port) = harness::serve_folder(&scratch)?;
    let at = Loopback {
        index: format!("http://127.0.0.1:{port}/simple/"),
        allow: format!("http://127.0.0.1:{web_port}"),
        url: format!("http://127.0.0.1:{web_port}/1k.bin"),
        scratch,
    };

    eprintln!("bench: {INSTALLS} installs of requests from a loopback index, ours and pip's");
    let (mut ours, mut pips) = (Vec::new(), Vec::new());
    let mut last: Option<(harness::Client, std::path::PathBuf)> = None;
    for i in 0..INSTALLS {
        let (client, h, took) = one_install(bin, home, i, &at).await?;
        ours.push(took);
        // The last server stays for the fetch row.
        if let Some((old, old_home)) = last.replace((client, h)) {
            let _ = old.cancel().await;
            let _ = std::fs::remove_dir_all(old_home);
        }
        pips.push(pip_install(&venv, home, &at, i)?);
    }
    let mut rows = vec![Row {
        what: "install_package requests from a loopback index, empty cache (3 wheels fetched, 1 cached)"
            .into(),
        ours: median(ours),
        baseline: Some((
            "pip install --no-deps --target of the same 4 wheels, same index".into(),
            median(pips),
        )),
        runs: INSTALLS,
    }];
    let (client, h) = last.ok_or_else(|| anyhow::anyhow!("no install ran"))?;
    rows.push(fetch_row(&client, &at).await?);
    let _ = client.cancel().await;
    let _ = std::fs::remove_dir_all(&h);
    let _ = std::fs::remove_dir_all(&at.scratch);
    Ok(rows)
}

/// Our install of requests into a new server with an empty index cache (the wheels come over
/// HTTP, as on a first install): the server, its home and the install's time.
async fn one_install(
    bin: &Path,
    home: &Path,
    i: usize,
    at: &Loopback,
) -> anyhow::Result<(harness::Client, std::path::PathBuf, Duration)> {
    let h = harness::private_home(home, &format!("index-{i}"))?;
    let settings = [
        ("CODE_SANDBOX_INDEX_URL", at.index.as_str()),
        ("CODE_SANDBOX_ALLOW_HOSTS", at.allow.as_str()),
    ];
    let (client, _) = harness::serve(bin, &h, &settings).await?;
    let sb = harness::new_sandbox(&client).await?;
    let t = Instant::now();
    let v = call(
        &client,
        "install_package",
        json!({"sandbox_id": sb, "package_name": "requests"}),
    )
    .await?;
    let took = t.elapsed();
    anyhow::ensure!(
        v["installed"].as_array().is_some_and(|a| a.len() == 4),
        "install: {v}"
    );
    Ok((client, h, took))
}

/// pip installing the same four wheels from the same index into a folder of its own.
fn pip_install(venv: &Path, home: &Path, at: &Loopback, i: usize) -> anyhow::Result<Duration> {
    let target = at.scratch.join(format!("pip-{i}"));
    let t = Instant::now();
    let status = std::process::Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-cache-dir",
            "--no-deps",
        ])
        .args(["--index-url", &at.index, "--find-links"])
        .arg(home.join("wheels"))
        .arg("--target")
        .arg(&target)
        .args(["requests", "urllib3", "certifi", "idna==3.20"])
        .stdout(std::process::Stdio::null())
        .status()?;
    let took = t.elapsed();
    anyhow::ensure!(status.success(), "pip install failed");
    Ok(took)
}

/// `requests.get` of 1 KiB from guest code, beside native CPython's requests (the wheels pip
/// just installed) on the same URL; each the median the code itself measured.
async fn fetch_row(client: &harness::Client, at: &Loopback) -> anyhow::Result<Row> {
    eprintln!("bench: {FETCHES} requests.get of 1 KiB from guest code and natively");
    let timed = |get: &str| {
        format!(
            "import time\nts = []\nfor _ in range({FETCHES}):\n    t = time.perf_counter_ns()\n    {get}\n    ts.append(time.perf_counter_ns() - t)\nsorted(ts)[len(ts) // 2]"
        )
    };
    let get = format!("requests.get({:?}).content", at.url);
    let sb = harness::new_sandbox(client).await?;
    call(
        client,
        "install_package",
        json!({"sandbox_id": sb, "package_name": "requests"}),
    )
    .await?;
    let code = format!("import requests\n{}", timed(&get));
    let v = call(
        client,
        "execute_code",
        json!({"sandbox_id": sb, "code": code, "timeout_seconds": 300}),
    )
    .await?;
    let guest = Duration::from_nanos(v["result"].as_str().unwrap_or("0").parse().unwrap_or(0));
    let native_code = timed(&get).replace("\nsorted(", "\n_ = sorted(");
    let out = std::process::Command::new("python3")
        .env("PYTHONPATH", at.scratch.join(format!("pip-{}", INSTALLS - 1)))
        .args(["-c", &format!("import requests\n{native_code}\nprint(_)")])
        .output()?;
    let native = Duration::from_nanos(String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0));
    anyhow::ensure!(
        native > Duration::ZERO,
        "native requests: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(Row {
        what: "requests.get of 1 KiB from guest code (allowed loopback HTTP host)".into(),
        ours: guest,
        baseline: Some(("native CPython's requests (same wheels), same URL".into(), native)),
        runs: FETCHES,
    })
}
