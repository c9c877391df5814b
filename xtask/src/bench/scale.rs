//! `cargo xtask scale-test`: a team server past one machine, on this one. Three replicas on
//! loopback behind Debian's haproxy, configured from the same template as the Kubernetes
//! ConfigMap, with static tokens and the tests' OpenID provider: 30 principals of 20 calls
//! each must land every call on their own replica and find their sandbox; the spread across
//! replicas is printed; each replica's `/metrics` must agree with the calls made; a replica
//! killed with SIGKILL must tell its principals where their sandboxes live while it is down,
//! and give them back when it returns; a sandbox on a replica its principal does not hash to is
//! reached through its `Mcp-Param-Sandbox-Id` header; a rolling restart (SIGTERM, one replica
//! at a time) must lose no sandbox, file or variable.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde_json::{Value, json};

use super::cluster::{Cluster, REPLICAS, STATIC_PRINCIPALS, Who};
use super::harness::call;
use super::remote::{Client, connect};
use super::table::{Row, median};

pub const CALLS: usize = 20;
/// Principals working at once.
const AT_ONCE: usize = 10;

fn say(msg: &str) {
    eprintln!("scale-test: {msg}");
}

/// The replica a sandbox id names.
pub fn replica_of(id: &str) -> String {
    mcp_code_sandbox::sandbox::replica::replica_of(id)
        .unwrap_or("?")
        .to_string()
}

/// One principal's session through the proxy, its sandbox, and its first calls: a file, and
/// `CALLS` calls that each see the last one's variable (a call landing anywhere else fails).
async fn work(url: String, who: &Who) -> anyhow::Result<(String, Client)> {
    let c = connect(&url, &who.token).await?;
    let v = call(&c, "create_sandbox", json!({})).await?;
    let id = v["sandbox_id"].as_str().unwrap_or_default().to_string();
    let code = format!("open('mine.txt', 'w').write({:?}); n = 0", who.name);
    call(&c, "execute_code", json!({"sandbox_id": id, "code": code})).await?;
    for i in 1..CALLS {
        let v = call(&c, "execute_code", json!({"sandbox_id": id, "code": "n += 1; n"})).await?;
        anyhow::ensure!(
            v["result"] == json!(i.to_string()),
            "{}: call {i} saw {v}",
            who.name
        );
    }
    Ok((id, c))
}

/// Every principal's [`work`], `AT_ONCE` at a time; their sandbox ids, in order.
pub async fn everyone(url: &str, who: &[Who]) -> anyhow::Result<Vec<String>> {
    let done: Vec<anyhow::Result<(String, Client)>> = futures_util::stream::iter(who.iter())
        .map(|w| work(url.to_string(), w))
        .buffered(AT_ONCE)
        .collect()
        .await;
    let mut ids = Vec::new();
    for (w, d) in who.iter().zip(done) {
        let (id, c) = d.map_err(|e| anyhow::anyhow!("{}: {e}", w.name))?;
        let _ = c.cancel().await;
        ids.push(id);
    }
    Ok(ids)
}

/// What a principal finds of its sandbox through the proxy: `mine.txt` and, when `var`, the
/// variable `n`.
async fn finds(url: &str, who: &Who, id: &str, var: bool) -> anyhow::Result<Value> {
    let c = connect(url, &who.token).await?;
    let code = if var {
        "open('mine.txt').read(), n"
    } else {
        "open('mine.txt').read()"
    };
    let v = call(&c, "execute_code", json!({"sandbox_id": id, "code": code})).await;
    let _ = c.cancel().await;
    v
}

/// [`finds`], retried while the proxy has not yet seen a restarted replica come back.
async fn found(url: &str, who: &Who, id: &str, var: bool) -> anyhow::Result<Value> {
    let mut last = None;
    for _ in 0..50 {
        match finds(url, who, id, var).await {
            Err(e) if e.to_string().contains("lives on replica") => last = Some(e),
            other => return other,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no answer")))
}

pub async fn run(root: &Path, bin: &Path, home: &Path) -> anyhow::Result<()> {
    say(&format!(
        "{REPLICAS} replicas behind haproxy, static tokens and the OpenID provider"
    ));
    let mut cluster = Cluster::start(root, bin, home, REPLICAS, true).await?;
    let result = scenario(&mut cluster).await;
    cluster.stop().await;
    result
}

async fn scenario(cluster: &mut Cluster) -> anyhow::Result<()> {
    let who = cluster.principals().await?;
    let url = cluster.proxy_url.clone();
    let started = Instant::now();
    let ids = everyone(&url, &who).await?;
    let secs = started.elapsed().as_secs_f64();
    let mut spread: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (w, id) in who.iter().zip(&ids) {
        spread.entry(replica_of(id)).or_default().push(&w.name);
    }
    say(&format!(
        "{} principals x {CALLS} calls, every call on its principal's replica, in {secs:.1} s",
        who.len()
    ));
    for (r, names) in &spread {
        say(&format!(
            "  {r}: {} principals ({})",
            names.len(),
            names.join(" ")
        ));
    }
    anyhow::ensure!(
        spread.len() > 1,
        "every principal landed on one replica: {spread:?}"
    );

    let ok = cluster
        .counted("mcp_code_sandbox_calls_total{tool=\"execute_code\",outcome=\"ok\"}")
        .await?;
    for (r, names) in &spread {
        let want = (names.len() * CALLS) as f64;
        anyhow::ensure!(
            ok.get(r) == Some(&want),
            "replica {r}'s metrics count {:?} calls, not {want}",
            ok.get(r)
        );
    }
    say(&format!("/metrics agrees: execute_code ok per replica {ok:?}"));

    // SIGKILL the busiest replica: its principals are told where their sandboxes live, then
    // find them (files; variables only as of the last save) when it is back.
    let (victim, names) = spread.iter().max_by_key(|(_, n)| n.len()).expect("a replica");
    let victim = victim.clone();
    let v = cluster
        .nodes
        .iter()
        .position(|n| n.name == victim)
        .expect("known");
    let theirs: Vec<usize> = (0..who.len())
        .filter(|&i| names.contains(&who[i].name.as_str()))
        .collect();
    cluster.down(v, libc::SIGKILL).await?;
    let first = &who[theirs[0]];
    let mut told = None;
    for _ in 0..50 {
        match finds(&url, first, &ids[theirs[0]], false).await {
            Err(e) if e.to_string().contains(&format!("lives on replica {victim}")) => {
                told = Some(e.to_string());
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let told =
        told.ok_or_else(|| anyhow::anyhow!("while {victim} was down, no call said where the sandbox lives"))?;
    let told = told
        .split("sandbox '")
        .nth(1)
        .map_or(told.as_str(), |t| t.split('"').next().unwrap_or(t));
    say(&format!(
        "{victim} killed; its principals are told: sandbox '{told}"
    ));
    cluster.up(v).await?;
    for &i in &theirs {
        let v = found(&url, &who[i], &ids[i], false).await?;
        anyhow::ensure!(
            v["result"] == json!(format!("'{}'", who[i].name)),
            "{}: {v}",
            who[i].name
        );
    }
    say(&format!(
        "{victim} back: its {} principals found their sandboxes and files",
        theirs.len()
    ));

    header_routing(cluster, &who[0], &ids[0]).await?;
    header_refusals(cluster, &who[1], &ids[1]).await?;

    // A rolling restart: every replica in turn, SIGTERM then start; nothing may be lost.
    for (w, id) in who.iter().zip(&ids) {
        let c = connect(&url, &w.token).await?;
        call(&c, "execute_code", json!({"sandbox_id": id, "code": "n = 1000"})).await?;
        let _ = c.cancel().await;
    }
    for i in 0..cluster.nodes.len() {
        cluster.down(i, libc::SIGTERM).await?;
        cluster.up(i).await?;
    }
    for (w, id) in who.iter().zip(&ids) {
        let v = found(&url, w, id, true).await?;
        anyhow::ensure!(
            v["result"] == json!(format!("('{}', 1000)", w.name)),
            "{} after the rolling restart: {v}",
            w.name
        );
    }
    say(&format!(
        "rolling restart of {} replicas: all {} sandboxes back with their files and variables",
        cluster.nodes.len(),
        who.len()
    ));
    say("passed");
    Ok(())
}

/// A sandbox of `who` on a replica its principal does not hash to, as after the replica count
/// changes: a 2026-07-28 call naming it in `Mcp-Param-Sandbox-Id` reaches that replica through
/// the proxy and finds it; a 2025-11-25 call (no such header) reaches the principal's own
/// replica and is told where the sandbox lives.
async fn header_routing(cluster: &Cluster, who: &Who, home_id: &str) -> anyhow::Result<()> {
    let home = replica_of(home_id);
    let elsewhere = cluster
        .nodes
        .iter()
        .find(|n| n.name != home)
        .ok_or_else(|| anyhow::anyhow!("one replica only"))?;
    let direct = connect(&elsewhere.url(), &who.token).await?;
    let v = call(&direct, "create_sandbox", json!({})).await?;
    let id = v["sandbox_id"].as_str().unwrap_or_default().to_string();
    call(
        &direct,
        "execute_code",
        json!({"sandbox_id": id, "code": "where = 'moved'"}),
    )
    .await?;
    let _ = direct.cancel().await;

    let v = stateless_call(
        &cluster.proxy_url,
        &who.token,
        "execute_code",
        json!({"sandbox_id": id, "code": "where"}),
    )
    .await?;
    anyhow::ensure!(
        v["result"]["structuredContent"]["result"] == json!("'moved'"),
        "a call with Mcp-Param-Sandbox-Id {id} did not reach {}: {v}",
        elsewhere.name
    );
    let told = finds(&cluster.proxy_url, who, &id, false).await;
    anyhow::ensure!(
        matches!(&told, Err(e) if e.to_string().contains(&format!("lives on replica {}", elsewhere.name))),
        "a call without the header was not told where {id} lives: {told:?}"
    );
    say(&format!(
        "{}'s sandbox on {} (its principal hashes to {home}): found through Mcp-Param-Sandbox-Id; without it, told where it lives",
        who.name, elsewhere.name
    ));
    Ok(())
}

/// A principal cannot pick its replica with a routing header the body does not back: through
/// the proxy, a `create_sandbox` or an `initialize` carrying `Mcp-Param-Sandbox-Id` that names
/// another replica, and a call whose header names another sandbox than its body, are refused
/// with 400 before any tool runs (else each principal could hold its quota once per replica).
async fn header_refusals(cluster: &Cluster, who: &Who, home_id: &str) -> anyhow::Result<()> {
    let home = replica_of(home_id);
    let other = cluster
        .nodes
        .iter()
        .find(|n| n.name != home)
        .ok_or_else(|| anyhow::anyhow!("one replica only"))?;
    let forged = format!("sbx-{}-00000000000000000000000000000000", other.name);
    let url = &cluster.proxy_url;
    let (status, v) = stateless_raw(url, &who.token, "create_sandbox", json!({}), &forged).await?;
    anyhow::ensure!(
        status == 400,
        "create_sandbox routed by a forged header: {status} {v}"
    );
    let (status, v) = stateless_raw(
        url,
        &who.token,
        "execute_code",
        json!({"sandbox_id": home_id, "code": "1"}),
        &forged,
    )
    .await?;
    anyhow::ensure!(status == 400, "a header naming another sandbox: {status} {v}");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "scale-test", "version": "1"}}});
    let status = reqwest::Client::new()
        .post(url)
        .bearer_auth(&who.token)
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Param-Sandbox-Id", &forged)
        .json(&init)
        .send()
        .await?
        .status();
    anyhow::ensure!(status == 400, "initialize routed by a forged header: {status}");
    say(&format!(
        "{}'s forged Mcp-Param-Sandbox-Id naming {}: create_sandbox, initialize and a mismatched call refused with 400",
        who.name, other.name
    ));
    Ok(())
}

/// One stateless 2026-07-28 `tools/call`, with the `Mcp-Param-Sandbox-Id` header that revision's
/// clients send for the marked argument; the JSON-RPC answer.
async fn stateless_call(url: &str, token: &str, tool: &str, arguments: Value) -> anyhow::Result<Value> {
    let id = arguments["sandbox_id"].as_str().unwrap_or_default().to_string();
    Ok(stateless_raw(url, token, tool, arguments, &id).await?.1)
}

/// A stateless 2026-07-28 `tools/call` with this `Mcp-Param-Sandbox-Id`: the HTTP status and
/// the JSON-RPC answer.
async fn stateless_raw(
    url: &str,
    token: &str,
    tool: &str,
    arguments: Value,
    id: &str,
) -> anyhow::Result<(u16, Value)> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "scale-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }});
    let resp = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", tool)
        .header("Mcp-Param-Sandbox-Id", id)
        .json(&body)
        .send()
        .await?;
    let status = resp.status().as_u16();
    let text = resp.text().await?;
    Ok((
        status,
        serde_json::from_str(xtask::answer::message(&text)).unwrap_or(Value::Null),
    ))
}

/// Round trips of the `1+1` comparison (interleaved through the proxy and direct).
const ROUND_TRIPS: usize = 200;

/// `cargo xtask bench --scale`: the proxy's added latency per call (a `1+1` round trip through
/// haproxy beside the same straight to the replica, interleaved), and calls per second of
/// 30 principals with one replica and with three behind the proxy.
pub async fn bench_rows(root: &Path, bin: &Path, home: &Path) -> anyhow::Result<(Vec<Row>, String)> {
    let mut rows = Vec::new();
    let mut rates = Vec::new();
    for replicas in [1, REPLICAS] {
        let cluster = Cluster::start(root, bin, home, replicas, false).await?;
        let who = cluster.principals().await?;
        let url = cluster.proxy_url.clone();
        if replicas == REPLICAS {
            let (id, via_proxy) = work(url.clone(), &who[0]).await?;
            let node = &cluster.nodes[cluster
                .nodes
                .iter()
                .position(|n| n.name == replica_of(&id))
                .expect("known")];
            let direct = connect(&node.url(), &who[0].token).await?;
            let (mut proxied, mut straight) = (Vec::new(), Vec::new());
            let args = json!({"sandbox_id": id, "code": "1+1"});
            for _ in 0..ROUND_TRIPS {
                let t = Instant::now();
                call(&via_proxy, "execute_code", args.clone()).await?;
                proxied.push(t.elapsed());
                let t = Instant::now();
                call(&direct, "execute_code", args.clone()).await?;
                straight.push(t.elapsed());
            }
            rows.push(Row {
                what: "`1+1` over HTTP through haproxy (3 replicas, routed by principal)".into(),
                ours: median(proxied),
                baseline: Some(("the same, straight to the replica".into(), median(straight))),
                runs: ROUND_TRIPS,
            });
        }
        let started = Instant::now();
        let done = everyone(&url, &who)
            .await
            .map_err(|e| anyhow::anyhow!("with {replicas} replica(s): {e}"))?;
        let calls = done.len() * (CALLS + 1);
        rates.push((replicas, calls as f64 / started.elapsed().as_secs_f64()));
        cluster.stop().await;
    }
    let note = rates
        .iter()
        .map(|(n, r)| format!("{n} replica(s) behind haproxy: {r:.0} calls/s ({} principals, {AT_ONCE} at once, a sandbox and {} calls each)", STATIC_PRINCIPALS, CALLS + 1))
        .collect::<Vec<_>>()
        .join("\n");
    Ok((rows, note))
}
