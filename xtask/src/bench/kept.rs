//! The kept-sandbox rows of `cargo xtask bench --kept`: a server with 1,000 kept sandboxes
//! (start to first result, listing them), 50 clients using them round-robin with 32 live
//! places (calls that resumed their sandbox and calls that did not, the server's PSS), and
//! the disk they take with eviction keeping it under `CODE_SANDBOX_KEEP_MB`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::harness::{call, private_home, proc_bytes, serve, tree_bytes, wait_for_warm};
use super::remote::{connect, p99, start_http};
use super::table::{Row, median, ms};

const KEPT: usize = 1000;
const CLIENTS: usize = 50;
const STEP: &str = "import pandas as pd\ndf = pd.DataFrame({'a': range(100)})\nint(df.a.sum())";

/// The server's proportional set size (shared pages split between their users), in MiB.
fn pss_mib(pid: u32) -> Option<f64> {
    proc_bytes(pid, "smaps_rollup", "Pss:").map(|b| b as f64 / (1 << 20) as f64)
}

fn kept_bytes(home: &Path) -> u64 {
    tree_bytes(&home.join("sandboxes")) + tree_bytes(&home.join("scratch"))
}

/// Stops a server the way a service manager does, and waits until it has saved and exited.
async fn sigterm(mut child: tokio::process::Child) -> anyhow::Result<()> {
    if let Some(pid) = child.id() {
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()?;
    }
    tokio::time::timeout(Duration::from_secs(300), child.wait()).await??;
    Ok(())
}

/// Start (stdio, persistence on) to the answer of a first `1+1` without an id.
async fn first_result(bin: &Path, home: &Path) -> anyhow::Result<(Duration, Duration)> {
    let t = Instant::now();
    let (c, _) = serve(bin, home, &[("CODE_SANDBOX_PERSIST", "true")]).await?;
    let v = call(&c, "execute_code", json!({"code": "1+1"})).await?;
    let first = t.elapsed();
    anyhow::ensure!(v["result"] == "2", "unexpected first result: {v}");
    let mut lists = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        call(&c, "get_sandbox_status", json!({})).await?;
        lists.push(t.elapsed());
    }
    // The sandbox made for the call is closed, so the home stays as it was.
    if let Some(id) = v["sandbox_id"].as_str() {
        call(&c, "close_sandbox", json!({"sandbox_id": id})).await?;
    }
    let _ = c.cancel().await;
    Ok((first, median(lists)))
}

/// One call of the round-robin load: its time, and whether its sandbox had to be resumed.
async fn timed_step(c: &super::remote::Client, id: &str) -> anyhow::Result<(Duration, bool)> {
    let before = call(c, "get_sandbox_status", json!({"sandbox_id": id})).await?;
    let resumed = before["state"] == "paused";
    let t = Instant::now();
    let v = call(c, "execute_code", json!({"sandbox_id": id, "code": STEP})).await?;
    let took = t.elapsed();
    anyhow::ensure!(v["result"] == "4950", "wrong answer in {id}: {v}");
    Ok((took, resumed))
}
/// What the load phase measured: each call's time by whether it resumed its sandbox, and the
/// server's PSS over it.
struct Load {
    resumed: Vec<Duration>,
    live: Vec<Duration>,
    pss: Vec<f64>,
    seconds: f64,
    failed: usize,
}

/// What eviction did: sandboxes left, their disk, the budget and how long it took.
struct Eviction {
    listed: usize,
    after: u64,
    budget_mb: u64,
    seconds: f64,
}

pub async fn rows(bin: &Path, home: &Path) -> anyhow::Result<(Vec<Row>, String)> {
    let h = private_home(home, "kept")?;
    let empty = private_home(home, "kept-baseline")?;
    let settings = [
        ("CODE_SANDBOX_PERSIST", "true"),
        ("CODE_SANDBOX_MAX_SANDBOXES", "32"),
        ("CODE_SANDBOX_PRINCIPAL_SANDBOXES", "5000"),
        ("CODE_SANDBOX_MEMORY_MB", "512"),
    ];
    let (server, url, token) = start_http(bin, &h, &settings).await?;
    let maker = connect(&url, &token).await?;
    wait_for_warm(&maker).await?;
    let ids = make_kept(&maker).await?;
    let mut rows = vec![alone(&maker, &ids).await?];
    let ids = Arc::new(ids);
    let load = under_load(&url, &token, &ids, server.id()).await?;
    rows.push(Row {
        what: format!(
            "{CLIENTS} HTTP clients round-robin over {KEPT} sandboxes, 32 live: a pandas step that resumed its sandbox"
        ),
        ours: median(load.resumed.clone()),
        baseline: Some(("the same step in a live sandbox".into(), median(load.live.clone()))),
        runs: load.resumed.len(),
    });
    let _ = maker.cancel().await;
    sigterm(server).await?;
    let kept_disk = kept_bytes(&h);
    // From here a stdio server (the local user) uses them: they belong to no principal now.
    std::fs::remove_file(h.join("owners.json"))?;
    rows.extend(starts(bin, &h, &empty).await?);
    let eviction = evict(bin, &h, &ids, kept_disk).await?;
    let note = note(&load, kept_disk, &eviction);
    for d in [&h, &empty] {
        let _ = std::fs::remove_dir_all(d);
    }
    Ok((rows, note))
}

/// 1,000 sandboxes made through remote mode (one principal), each with a pandas step.
async fn make_kept(maker: &super::remote::Client) -> anyhow::Result<Vec<String>> {
    let made = Instant::now();
    let mut ids = Vec::new();
    for i in 0..KEPT {
        let v = call(maker, "create_sandbox", json!({})).await?;
        let id = v["sandbox_id"].as_str().unwrap_or_default().to_string();
        call(maker, "execute_code", json!({"sandbox_id": id, "code": STEP})).await?;
        ids.push(id);
        if (i + 1) % 100 == 0 {
            eprintln!(
                "bench: {} sandboxes made ({:.0} s)",
                i + 1,
                made.elapsed().as_secs_f64()
            );
        }
    }
    Ok(ids)
}

/// One client alone: a step in a suspended sandbox (the oldest made), then again in it.
async fn alone(maker: &super::remote::Client, ids: &[String]) -> anyhow::Result<Row> {
    let (mut resumed_times, mut live_times) = (Vec::new(), Vec::new());
    for id in ids.iter().take(50) {
        let (t, resumed) = timed_step(maker, id).await?;
        anyhow::ensure!(resumed, "{id} was expected to be suspended");
        resumed_times.push(t);
        live_times.push(timed_step(maker, id).await?.0);
    }
    Ok(Row {
        what: "one client: a pandas step that resumed its suspended sandbox".into(),
        ours: median(resumed_times),
        baseline: Some(("the same step again, the sandbox live".into(), median(live_times))),
        runs: 50,
    })
}

/// The server's PSS every 250 ms until `running` is cleared.
fn sample_pss(pid: Option<u32>, running: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<f64>> {
    tokio::spawn(async move {
        let mut samples = Vec::new();
        while running.load(Ordering::SeqCst) {
            if let Some(p) = pid.and_then(pss_mib) {
                samples.push(p);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        samples
    })
}

/// 50 clients, round-robin over the 1,000: each call on a sandbox, then a second on it.
async fn under_load(
    url: &str,
    token: &str,
    ids: &Arc<Vec<String>>,
    pid: Option<u32>,
) -> anyhow::Result<Load> {
    let failures = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicBool::new(true));
    let sampler = sample_pss(pid, running.clone());
    let began = Instant::now();
    let mut tasks = Vec::new();
    for k in 0..CLIENTS {
        let (url, token, ids, failures) = (url.to_string(), token.to_string(), ids.clone(), failures.clone());
        tasks.push(tokio::spawn(async move {
            let c = connect(&url, &token).await?;
            let mut out = Vec::new();
            for id in ids.iter().skip(k).step_by(CLIENTS) {
                for _ in 0..2 {
                    match timed_step(&c, id).await {
                        Ok(x) => out.push(x),
                        Err(e) => {
                            eprintln!("bench: a call failed: {e}");
                            failures.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
            }
            let _ = c.cancel().await;
            anyhow::Ok(out)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    let seconds = began.elapsed().as_secs_f64();
    running.store(false, Ordering::SeqCst);
    let mut pss = sampler.await?;
    pss.sort_by(f64::total_cmp);
    let (resumed, live): (Vec<_>, Vec<_>) = all.into_iter().partition(|(_, r)| *r);
    let times = |v: Vec<(Duration, bool)>| v.into_iter().map(|(d, _)| d).collect::<Vec<_>>();
    let (resumed, live) = (times(resumed), times(live));
    anyhow::ensure!(!resumed.is_empty() && !live.is_empty(), "no calls of one kind");
    let failed = failures.load(Ordering::SeqCst);
    Ok(Load {
        resumed,
        live,
        pss,
        seconds,
        failed,
    })
}

/// Start to first result and a listing, with 1,000 kept beside an empty home, alternating.
async fn starts(bin: &Path, h: &Path, empty: &Path) -> anyhow::Result<[Row; 2]> {
    let (mut firsts, mut empty_firsts, mut lists, mut empty_lists) = (vec![], vec![], vec![], vec![]);
    for _ in 0..5 {
        let (f, l) = first_result(bin, h).await?;
        firsts.push(f);
        lists.push(l);
        let (f, l) = first_result(bin, empty).await?;
        empty_firsts.push(f);
        empty_lists.push(l);
    }
    Ok([
        Row {
            what: format!("server start to the first `1+1` result, {KEPT} kept sandboxes"),
            ours: median(firsts),
            baseline: Some(("the same with none kept".into(), median(empty_firsts))),
            runs: 5,
        },
        Row {
            what: format!("get_sandbox_status listing {KEPT} kept sandboxes (first page of 100)"),
            ours: median(lists),
            baseline: Some(("the same with none kept".into(), median(empty_lists))),
            runs: 100,
        },
    ])
}

/// Eviction: every kept sandbox last used two hours ago, and a budget of half their disk.
async fn evict(bin: &Path, h: &Path, ids: &[String], kept_disk: u64) -> anyhow::Result<Eviction> {
    for id in ids {
        let path = h.join("scratch").join(id).join("saved").join("meta.json");
        if let Ok(bytes) = std::fs::read(&path)
            && let Ok(mut meta) = serde_json::from_slice::<Value>(&bytes)
        {
            meta["last_used"] = json!((chrono::Utc::now() - chrono::Duration::hours(2)).to_rfc3339());
            std::fs::write(&path, serde_json::to_vec(&meta)?)?;
        }
    }
    let budget_mb = (kept_disk / 2) >> 20;
    let keep_mb = budget_mb.to_string();
    let settings = [
        ("CODE_SANDBOX_PERSIST", "true"),
        ("CODE_SANDBOX_KEEP_MB", keep_mb.as_str()),
    ];
    let (c, _) = serve(bin, h, &settings).await?;
    let began = Instant::now();
    let mut listed = KEPT;
    for _ in 0..600 {
        let v = call(&c, "get_sandbox_status", json!({})).await?;
        listed = v["total"].as_u64().unwrap_or(0) as usize;
        if listed < KEPT && kept_bytes(h) <= budget_mb << 20 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seconds = began.elapsed().as_secs_f64();
    let _ = c.cancel().await;
    Ok(Eviction {
        listed,
        after: kept_bytes(h),
        budget_mb,
        seconds,
    })
}

/// The table's note: the load, the server's memory, the disk and eviction.
fn note(load: &Load, kept_disk: u64, e: &Eviction) -> String {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let pct = |v: &[f64], q: usize| {
        v.get((v.len() * q / 100).min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    format!(
        "Kept sandboxes: {CLIENTS} clients made {} calls over {KEPT} sandboxes in {:.1} s with {} failures; \
         a call that resumed its sandbox took {} median, {} p99; one that did not, {} median, {} p99. \
         Server PSS during the run: median {:.0} MiB, peak {:.0} MiB. \
         {KEPT} kept sandboxes took {:.1} MiB on disk ({:.1} KiB each); with CODE_SANDBOX_KEEP_MB={} and all \
         unused for two hours, eviction left {} sandboxes holding {:.1} MiB, {:.1} s after start.",
        load.resumed.len() + load.live.len(),
        load.seconds,
        load.failed,
        ms(median(load.resumed.clone())),
        ms(p99(load.resumed.clone())),
        ms(median(load.live.clone())),
        ms(p99(load.live.clone())),
        pct(&load.pss, 50),
        load.pss.last().copied().unwrap_or(0.0),
        mib(kept_disk),
        kept_disk as f64 / 1024.0 / KEPT as f64,
        e.budget_mb,
        e.listed,
        mib(e.after),
        e.seconds,
    )
}
