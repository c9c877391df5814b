//! `cargo xtask bench --store`: kept sandboxes in a team store (SeaweedFS on loopback), two
//! replicas called directly. A suspended sandbox holding pandas and a 1,000,000-row DataFrame
//! resumed from the store on the other replica, beside resumed from the disk of the replica
//! that suspended it (interleaved); the bytes sent for a one-cell change beside those sent for
//! the whole sandbox; `n += 1` back to back with the store on beside a replica without one
//! (interleaved).

use std::time::{Duration, Instant};

use serde_json::json;

use super::cluster::Cluster;
use super::harness::call;
use super::remote::{Client, connect};
use super::table::{Row, median};
use mcp_code_sandbox::store::object_store::ObjectStoreExt;
use mcp_code_sandbox::store::space;
use xtask::seaweed::Seaweed;

const RESUMES: usize = 20;
const CALLS: usize = 200;
const PREFIX: &str = "bench";
/// Calls whose way to the store is timed.
const LAGS: usize = 100;
/// pandas and a 1,000,000-row DataFrame `df`: the sandbox measured, and its twin without a store.
const FRAME: &str = "import numpy as np, pandas as pd\n\
                     df = pd.DataFrame({'a': np.arange(1_000_000), 'b': np.random.default_rng(1).random(1_000_000)})\n";

fn say(msg: &str) {
    eprintln!("bench (store): {msg}");
}

/// The replicas' settings: the store, and sandboxes suspended a second after their last call.
fn settings(weed: &Seaweed) -> Vec<(String, String)> {
    let mut extra: Vec<(String, String)> = weed
        .settings(PREFIX)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    extra.push(("CODE_SANDBOX_IDLE_SECONDS".into(), "1".into()));
    extra.push(("CODE_SANDBOX_MEMORY_MB".into(), "512".into()));
    extra
}

pub async fn rows(
    root: &std::path::Path,
    bin: &std::path::Path,
    home: &std::path::Path,
) -> anyhow::Result<(Vec<Row>, String)> {
    let weed = Seaweed::start(root, &say).await?;
    let with = Cluster::start_with(root, bin, home, 2, false, settings(&weed)).await?;
    let without = Cluster::start_with(
        root,
        bin,
        home,
        1,
        false,
        vec![("CODE_SANDBOX_MEMORY_MB".into(), "512".into())],
    )
    .await?;
    let measured = measure(&with, &without, &weed).await;
    with.stop().await;
    without.stop().await;
    measured
}

async fn measure(with: &Cluster, without: &Cluster, weed: &Seaweed) -> anyhow::Result<(Vec<Row>, String)> {
    let who = with.principals().await?.swap_remove(0);
    let replicas = [
        connect(&with.nodes[0].url(), &who.token).await?,
        connect(&with.nodes[1].url(), &who.token).await?,
    ];
    let v = call(&replicas[0], "create_sandbox", json!({})).await?;
    let id = v["sandbox_id"].as_str().unwrap_or_default().to_string();
    let code = format!("{FRAME}len(df)");
    call(
        &replicas[0],
        "execute_code",
        json!({"sandbox_id": id, "code": code}),
    )
    .await?;
    let lease =
        |store: &mcp_code_sandbox::store::Store| space::lease_path(store, &space::key(&who.name), &id);
    let store = weed.store(PREFIX)?;
    let handed_back = || async {
        let began = Instant::now();
        while store.objects.head(&lease(&store)).await.is_ok() {
            anyhow::ensure!(
                began.elapsed() < Duration::from_secs(60),
                "never suspended and written"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    };
    handed_back().await?;
    let whole = sent(with).await?;
    call(
        &replicas[0],
        "execute_code",
        json!({"sandbox_id": id, "code": "df.iloc[0, 1] = -1.0"}),
    )
    .await?;
    handed_back().await?;
    let change = sent(with).await? - whole;
    say(&format!(
        "sent {whole} bytes for the sandbox, {change} for a one-cell change"
    ));

    let (mut local, mut remote) = (Vec::new(), Vec::new());
    let mut last = 0;
    let args = json!({"sandbox_id": id, "code": "len(df)"});
    for _ in 0..RESUMES {
        handed_back().await?;
        let t = Instant::now();
        call(&replicas[last], "execute_code", args.clone()).await?;
        local.push(t.elapsed());
        handed_back().await?;
        last = 1 - last;
        let t = Instant::now();
        call(&replicas[last], "execute_code", args.clone()).await?;
        remote.push(t.elapsed());
    }
    let lag = to_store(&replicas[last], &id, &store, &who.name).await?;
    let plain = without.principals().await?.swap_remove(0);
    let (on, off) = back_to_back(&replicas[last], &id, without, &plain.token).await?;
    let rows = vec![
        Row {
            what: "resume a suspended sandbox (pandas, a 1,000,000-row DataFrame) on another replica, from the store".into(),
            ours: median(remote),
            baseline: Some(("resumed from the disk of the replica that suspended it".into(), median(local))),
            runs: RESUMES,
        },
        Row {
            what: "`n += 1`, back to back, with the store (saved and pushed once the calls pause)".into(),
            ours: median(on.clone()),
            baseline: Some(("the same on a replica without a store".into(), median(off.clone()))),
            runs: CALLS,
        },
    ];
    let rate = |d: &[Duration]| d.len() as f64 / d.iter().sum::<Duration>().as_secs_f64();
    let (p50, p99) = (lag[lag.len() / 2], lag[lag.len() * 99 / 100]);
    let note = format!(
        "Bytes sent to the store: {whole} for the sandbox (its saved state with pandas and the DataFrame, its files), \
         {change} for a one-cell change of the DataFrame ({:.1}%). Calls per second back to back: {:.0} with the store, \
         {:.0} without. From a call's answer to its state's manifest in the store ({LAGS} calls, 0.3 s apart): \
         median {:.0} ms, p99 {:.0} ms, most {:.0} ms.",
        change as f64 * 100.0 / whole.max(1) as f64,
        rate(&on),
        rate(&off),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        lag[lag.len() - 1].as_secs_f64() * 1e3
    );
    Ok((rows, note))
}

/// For [`LAGS`] calls in `id`, 0.3 s apart: the time from each call's answer until the store
/// holds a manifest of a later generation (its state), sorted.
async fn to_store(
    c: &Client,
    id: &str,
    store: &mcp_code_sandbox::store::Store,
    principal: &str,
) -> anyhow::Result<Vec<Duration>> {
    let path = space::manifest_path(store, &space::key(principal), id);
    let generation = || async {
        let got = mcp_code_sandbox::store::pull::manifest(store, &path).await?;
        anyhow::Ok(got.map_or(0, |(m, _)| m.generation))
    };
    let mut lags = Vec::new();
    for _ in 0..LAGS {
        let before = generation().await?;
        let code = "n = globals().get('n', 0) + 1";
        call(c, "execute_code", json!({"sandbox_id": id, "code": code})).await?;
        let answered = Instant::now();
        while generation().await? <= before {
            anyhow::ensure!(
                answered.elapsed() < Duration::from_secs(30),
                "a call's state never reached the store"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        lags.push(answered.elapsed());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    lags.sort();
    Ok(lags)
}

/// Bytes of new chunks the replicas sent to the store so far.
async fn sent(c: &Cluster) -> anyhow::Result<u64> {
    let per = c.counted("mcp_code_sandbox_store_sent_bytes_total").await?;
    Ok(per.values().sum::<f64>() as u64)
}

/// `n += 1` in `id` (on a replica with the store) interleaved with the same in a sandbox on a
/// replica without one; each call's time, store on and off.
async fn back_to_back(
    on: &Client,
    id: &str,
    without: &Cluster,
    token: &str,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let off = connect(&without.nodes[0].url(), token).await?;
    let v = call(&off, "create_sandbox", json!({})).await?;
    let plain = v["sandbox_id"].as_str().unwrap_or_default().to_string();
    // The same data in both, so each call saves as much.
    let code = format!("{FRAME}n = 0");
    call(&off, "execute_code", json!({"sandbox_id": plain, "code": code})).await?;
    call(on, "execute_code", json!({"sandbox_id": id, "code": "n = 0"})).await?;
    let (mut with, mut without_store) = (Vec::new(), Vec::new());
    for _ in 0..CALLS {
        for (c, sb, times) in [(on, id, &mut with), (&off, plain.as_str(), &mut without_store)] {
            let t = Instant::now();
            call(c, "execute_code", json!({"sandbox_id": sb, "code": "n += 1"})).await?;
            times.push(t.elapsed());
        }
    }
    Ok((with, without_store))
}
