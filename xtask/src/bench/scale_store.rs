//! `cargo xtask scale-test`, with a team store: three replicas behind haproxy keep their
//! sandboxes in SeaweedFS (a real S3 server on loopback) with 5 s leases. (d) and (a): every
//! principal's last call answered, 2 s later the busiest replica is SIGKILLed and its disk
//! deleted: each of its principals finds its sandbox through haproxy on the others, with its
//! file and that call's variables. (b) two replicas asked at the same moment to resume one
//! sandbox: one serves it, the other says where it lives, and the state never forks. (c) the
//! store stopped for 20 s while calls run and sandboxes are suspended: once it is back nothing
//! is pending, and replicas started on empty disks find every sandbox as it was. (e) the store
//! away across a rolling restart: a change made while it is down, the replica stopped, the
//! store back during its drain: the change reaches the store before the replica exits.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::cluster::{Cluster, REPLICAS, Who};
use super::harness::call;
use super::remote::connect;
use super::scale::{everyone, replica_of};
use mcp_code_sandbox::store::object_store::ObjectStoreExt;
use mcp_code_sandbox::store::space;
use xtask::seaweed::Seaweed;

/// Principals in these scenarios.
const PRINCIPALS: usize = 12;
/// The store's prefix.
const PREFIX: &str = "scale";
/// How long a replica's hold lasts: a replica killed outright is replaced after this.
const LEASE_SECONDS: u64 = 5;
/// Long enough that the outage's calls all land while their sandboxes are live.
const IDLE_SECONDS: u64 = 8;
/// Rounds of two replicas resuming one sandbox at once.
const ROUNDS: u64 = 3;

fn say(msg: &str) {
    eprintln!("scale-test (store): {msg}");
}

pub async fn run(
    root: &std::path::Path,
    bin: &std::path::Path,
    home: &std::path::Path,
) -> anyhow::Result<()> {
    let mut weed = Seaweed::start(root, &say).await?;
    let mut extra: Vec<(String, String)> = weed
        .settings(PREFIX)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    extra.push((
        "CODE_SANDBOX_STORE_LEASE_SECONDS".into(),
        LEASE_SECONDS.to_string(),
    ));
    extra.push(("CODE_SANDBOX_IDLE_SECONDS".into(), IDLE_SECONDS.to_string()));
    say(&format!(
        "{REPLICAS} replicas behind haproxy, kept sandboxes in SeaweedFS ({LEASE_SECONDS} s leases)"
    ));
    let mut cluster = Cluster::start_with(root, bin, home, REPLICAS, false, extra).await?;
    let result = scenarios(&mut cluster, &mut weed).await;
    cluster.stop().await;
    result
}

async fn scenarios(cluster: &mut Cluster, weed: &mut Seaweed) -> anyhow::Result<()> {
    let mut who = cluster.principals().await?;
    who.truncate(PRINCIPALS);
    let url = cluster.proxy_url.clone();
    let ids = everyone(&url, &who).await?;
    lost_for_good(cluster, &who, &ids).await?;
    resumed_at_once(cluster, weed, &who, &ids).await?;
    store_outage(cluster, weed, &who, &ids).await?;
    drained_while_away(cluster, weed, &who[0], &ids[0]).await?;
    say("passed");
    Ok(())
}

/// Runs `code` in `id` through the proxy, retrying for up to a minute while the sandbox is
/// on its way (its replica down, its lease not yet run out, the store away); the answer.
async fn eventually(url: &str, who: &Who, id: &str, code: &str) -> anyhow::Result<Value> {
    let began = Instant::now();
    loop {
        let tried = async {
            let c = connect(url, &who.token).await?;
            let v = call(&c, "execute_code", json!({"sandbox_id": id, "code": code})).await;
            let _ = c.cancel().await;
            v
        };
        match tried.await {
            Ok(v) => return Ok(v),
            Err(e) if began.elapsed() < Duration::from_secs(60) => {
                tracing::debug!("{}: {e}", who.name);
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => anyhow::bail!("{}: {id} never answered within a minute: {e}", who.name),
        }
    }
}

/// (d) and (a): the busiest replica SIGKILLed 2 s after every principal's last call answered,
/// and its disk deleted; each of its principals finds its sandbox on the others.
async fn lost_for_good(cluster: &mut Cluster, who: &[Who], ids: &[String]) -> anyhow::Result<()> {
    let url = cluster.proxy_url.clone();
    for (i, (w, id)) in who.iter().zip(ids).enumerate() {
        let c = connect(&url, &w.token).await?;
        call(
            &c,
            "execute_code",
            json!({"sandbox_id": id, "code": format!("n = {}", 500 + i)}),
        )
        .await?;
        let _ = c.cancel().await;
    }
    let answered = Instant::now();
    let victim = busiest(ids);
    let v = node(cluster, &victim)?;
    tokio::time::sleep(Duration::from_secs(2).saturating_sub(answered.elapsed())).await;
    cluster.down(v, libc::SIGKILL).await?;
    cluster.wipe(v)?;
    let killed = Instant::now();
    let mut theirs = 0;
    for (i, (w, id)) in who.iter().zip(ids).enumerate() {
        if replica_of(id) != victim {
            continue;
        }
        let got = eventually(&url, w, id, "open('mine.txt').read(), n").await?;
        anyhow::ensure!(
            got["result"] == json!(format!("('{}', {})", w.name, 500 + i))
                && got["state_lost"] == json!(false),
            "{}'s sandbox after {victim} was lost: {got}",
            w.name
        );
        theirs += 1;
    }
    say(&format!(
        "{victim} SIGKILLed 2 s after the last call answered, its disk deleted: its {theirs} principals found their sandboxes (file and last call's variables) on the others through haproxy, the last {:.1} s after the kill",
        killed.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// The replica holding the most of `ids`.
fn busiest(ids: &[String]) -> String {
    let mut count = std::collections::BTreeMap::<String, usize>::new();
    for id in ids {
        *count.entry(replica_of(id)).or_default() += 1;
    }
    count
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(r, _)| r)
        .unwrap_or_default()
}

fn node(cluster: &Cluster, name: &str) -> anyhow::Result<usize> {
    cluster
        .nodes
        .iter()
        .position(|n| n.name == name)
        .ok_or_else(|| anyhow::anyhow!("no replica {name}"))
}

/// Whether `id`'s lease is in the store (a replica holds it).
async fn leased(weed: &Seaweed, who: &Who, id: &str) -> anyhow::Result<bool> {
    let store = weed.store(PREFIX)?;
    let path = space::lease_path(&store, &space::key(&who.name), id);
    Ok(store.objects.head(&path).await.is_ok())
}

/// The replica holding `id`'s lease, if one does.
async fn holder(weed: &Seaweed, who: &Who, id: &str) -> anyhow::Result<Option<String>> {
    let store = weed.store(PREFIX)?;
    let path = space::lease_path(&store, &space::key(&who.name), id);
    let Ok(got) = store.objects.get(&path).await else {
        return Ok(None);
    };
    let lease: Value = serde_json::from_slice(&got.bytes().await?)?;
    Ok(lease["holder"].as_str().map(String::from))
}

/// (b): a sandbox no replica holds (suspended, its lease handed back), asked for by two
/// replicas at the same moment, five times: one serves it each time, the other says where it
/// lives, and `n` goes up by one each time: the state never forks.
async fn resumed_at_once(
    cluster: &Cluster,
    weed: &Seaweed,
    who: &[Who],
    ids: &[String],
) -> anyhow::Result<()> {
    let (w, id, start) = (&who[0], &ids[0], 500u64);
    let up: Vec<u16> = cluster
        .nodes
        .iter()
        .filter(|n| n.running())
        .map(|n| n.port)
        .collect();
    anyhow::ensure!(up.len() >= 2, "two replicas up");
    let mut winners = Vec::new();
    for round in 1..=ROUNDS {
        let began = Instant::now();
        while leased(weed, w, id).await? {
            anyhow::ensure!(
                began.elapsed() < Duration::from_secs(60),
                "{id} was never handed back"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let a = connect(&format!("http://127.0.0.1:{}/mcp", up[0]), &w.token).await?;
        let b = connect(&format!("http://127.0.0.1:{}/mcp", up[1]), &w.token).await?;
        let args = json!({"sandbox_id": id, "code": "n += 1; n"});
        let (ra, rb) = tokio::join!(
            call(&a, "execute_code", args.clone()),
            call(&b, "execute_code", args)
        );
        let _ = (a.cancel().await, b.cancel().await);
        let (won, lost) = match (ra, rb) {
            (Ok(v), Err(e)) => ((0, v), e),
            (Err(e), Ok(v)) => ((1, v), e),
            (ra, rb) => anyhow::bail!("round {round}: not exactly one served it: {ra:?} / {rb:?}"),
        };
        anyhow::ensure!(
            won.1["result"] == json!((start + round).to_string()),
            "round {round}: the state forked or was lost: {}",
            won.1
        );
        anyhow::ensure!(
            lost.to_string().contains("lives on replica"),
            "round {round}: the other replica said: {lost}"
        );
        winners.push(
            cluster
                .nodes
                .iter()
                .find(|n| n.port == up[won.0])
                .map_or("?", |n| n.name.as_str()),
        );
    }
    say(&format!(
        "one sandbox asked of two replicas at once, {ROUNDS} times: one served it each time ({}), the other said where it lives; n went {} to {}, never forked",
        winners.join(", "),
        start + 1,
        start + ROUNDS
    ));
    Ok(())
}

/// (c): the store stopped for 20 s while principals run calls and their sandboxes are
/// suspended; once it is back nothing is pending, and replicas on empty disks find it all.
async fn store_outage(
    cluster: &mut Cluster,
    weed: &mut Seaweed,
    who: &[Who],
    ids: &[String],
) -> anyhow::Result<()> {
    let url = cluster.proxy_url.clone();
    // Every sandbox live (held) but the last principal's, left suspended.
    let n = who.len() - 1;
    let began = Instant::now();
    while leased(weed, &who[n], &ids[n]).await? {
        anyhow::ensure!(
            began.elapsed() < Duration::from_secs(60),
            "{} was never handed back",
            ids[n]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for (w, id) in who.iter().zip(ids).take(n) {
        eventually(&url, w, id, "1").await?;
    }
    weed.kill();
    let down = Instant::now();
    for (i, (w, id)) in who.iter().zip(ids).take(n).enumerate() {
        let c = connect(&url, &w.token).await?;
        let code = format!("n = {}; open('mine.txt', 'a').write('+')", 700 + i);
        call(&c, "execute_code", json!({"sandbox_id": id, "code": code}))
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "{}: a live sandbox stopped working while the store was away: {e}",
                    w.name
                )
            })?;
        let _ = c.cancel().await;
    }
    let refused = {
        let c = connect(&url, &who[n].token).await?;
        let r = call(&c, "execute_code", json!({"sandbox_id": ids[n], "code": "n"})).await;
        let _ = c.cancel().await;
        r
    };
    anyhow::ensure!(
        matches!(&refused, Err(e) if e.to_string().contains("retry")),
        "a suspended sandbox asked for while the store was away: {refused:?}"
    );
    tokio::time::sleep(Duration::from_secs(20).saturating_sub(down.elapsed())).await;
    let pending = cluster.counted("mcp_code_sandbox_store_pending").await?;
    weed.resume().await?;
    say(&format!(
        "store away 20 s: {n} live sandboxes kept working, a suspended one was refused with a retry; pending then {pending:?}"
    ));
    let back = Instant::now();
    loop {
        let left = cluster.counted("mcp_code_sandbox_store_pending").await?;
        if left.values().all(|v| *v == 0.0) {
            break;
        }
        anyhow::ensure!(
            back.elapsed() < Duration::from_secs(120),
            "still pending: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let settled = back.elapsed();
    // Nothing left anywhere but the store: every replica SIGKILLed, its disk deleted.
    for i in 0..cluster.nodes.len() {
        cluster.down(i, libc::SIGKILL).await?;
        cluster.wipe(i)?;
    }
    for i in 0..cluster.nodes.len() {
        cluster.up(i).await?;
    }
    for (i, (w, id)) in who.iter().zip(ids).enumerate() {
        let want = if i < n {
            format!("('{}+', {})", w.name, 700 + i)
        } else {
            format!("('{}', {})", w.name, 500 + i)
        };
        let got = eventually(&url, w, id, "open('mine.txt').read(), n").await?;
        anyhow::ensure!(got["result"] == json!(want), "{} after the outage: {got}", w.name);
    }
    say(&format!(
        "store back: nothing pending {:.1} s later; all {} replicas SIGKILLed and their disks deleted, then every sandbox found as it was",
        settled.as_secs_f64(),
        cluster.nodes.len()
    ));
    Ok(())
}

/// (e): the store away across a rolling restart: a call changes a live sandbox while the store
/// is down, its replica is stopped (SIGTERM) and the store comes back during the drain; the
/// replica's disk then goes (as a Deployment's pod's does), and through haproxy the principal
/// finds the change on a replica started afresh.
async fn drained_while_away(
    cluster: &mut Cluster,
    weed: &mut Seaweed,
    w: &Who,
    id: &str,
) -> anyhow::Result<()> {
    let url = cluster.proxy_url.clone();
    eventually(&url, w, id, "1").await?;
    let serving = holder(weed, w, id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("{id} is live but no replica holds its lease"))?;
    let v = node(cluster, &serving)?;
    weed.kill();
    let c = connect(&url, &w.token).await?;
    call(&c, "execute_code", json!({"sandbox_id": id, "code": "m = 7"})).await?;
    let _ = c.cancel().await;
    let began = Instant::now();
    let (stopped, back) = tokio::join!(cluster.down(v, libc::SIGTERM), async {
        tokio::time::sleep(Duration::from_secs(4)).await;
        weed.resume().await
    });
    stopped?;
    back?;
    let drained = began.elapsed();
    cluster.wipe(v)?;
    cluster.up(v).await?;
    let got = eventually(&url, w, id, "m").await?;
    anyhow::ensure!(
        got["result"] == json!("7"),
        "{id} after a drain while the store was away: {got}"
    );
    say(&format!(
        "store away across a rolling restart: {serving} stopped with a change the store lacked, the store back 4 s into its drain; it wrote the change and exited {:.1} s after SIGTERM, and with its disk deleted the change was found through haproxy",
        drained.as_secs_f64()
    ));
    Ok(())
}
