//! The OAuth rows of `--remote`: the HTTP `1+1` round trip presenting a JWT access token
//! (the issuer's keys cached) beside the same presenting a static token, interleaved on one
//! server; and a new session's first request after the IdP rotated its keys (one JWKS fetch)
//! beside a new session's first request with the keys cached. The IdP is the tests' real
//! OpenID provider (tests/ts/idp.mjs).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::{call, new_sandbox, private_home, wait_for_warm};
use super::remote::{connect, start_http};
use super::table::{Row, median};

const ROUND_TRIPS: usize = 300;
const ROTATIONS: usize = 5;

pub async fn rows(root: &Path, bin: &Path, home: &Path) -> anyhow::Result<Vec<Row>> {
    eprintln!("bench: OAuth (a JWT beside a static token, the first call after a key rotation)");
    let idp = xtask::idp::start(root).await?;
    let issuer = idp.issuer.clone();
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let listen = format!("127.0.0.1:{port}");
    let public = format!("http://{listen}/mcp");
    let h = private_home(home, "oauth")?;
    let (mut server, url, static_token) = start_http(
        bin,
        &h,
        &[
            ("CODE_SANDBOX_LISTEN", &listen),
            ("CODE_SANDBOX_OAUTH_ISSUER", &issuer),
            ("CODE_SANDBOX_PUBLIC_URL", &public),
        ],
    )
    .await?;
    anyhow::ensure!(url == public, "the server listens at {url}, not {public}");
    let http = reqwest::Client::new();
    let jwt = idp.token(&http, "agent-a", &public, "mcp").await?;
    let (by_jwt, by_static) = (connect(&url, &jwt).await?, connect(&url, &static_token).await?);
    wait_for_warm(&by_jwt).await?;
    let (jid, sid) = (new_sandbox(&by_jwt).await?, new_sandbox(&by_static).await?);
    let (mut with_jwt, mut with_static) = (Vec::new(), Vec::new());
    for _ in 0..ROUND_TRIPS {
        let t = Instant::now();
        call(&by_jwt, "execute_code", json!({"sandbox_id": jid, "code": "1+1"})).await?;
        with_jwt.push(t.elapsed());
        let t = Instant::now();
        call(
            &by_static,
            "execute_code",
            json!({"sandbox_id": sid, "code": "1+1"}),
        )
        .await?;
        with_static.push(t.elapsed());
    }

    // A new session's first request: after a rotation (the key is fetched), and with the key
    // cached. Fetches are spaced 5 s apart; each rotation waits that out first, so the row
    // shows the fetch, not the spacing.
    let (mut rotated, mut cached) = (Vec::new(), Vec::new());
    for _ in 0..ROTATIONS {
        http.post(format!("{issuer}/__test/rotate")).send().await?;
        let fresh = idp.token(&http, "agent-a", &public, "mcp").await?;
        tokio::time::sleep(Duration::from_millis(5200)).await;
        let t = Instant::now();
        let c = connect(&url, &fresh).await?;
        rotated.push(t.elapsed());
        let _ = c.cancel().await;
        let t = Instant::now();
        let c = connect(&url, &fresh).await?;
        cached.push(t.elapsed());
        let _ = c.cancel().await;
    }
    let _ = by_jwt.cancel().await;
    let _ = by_static.cancel().await;
    let _ = server.kill().await;
    let _ = std::fs::remove_dir_all(&h);
    Ok(vec![
        Row {
            what: "execute_code(\"1+1\") over HTTP with an OAuth JWT (issuer's keys cached)".into(),
            ours: median(with_jwt),
            baseline: Some((
                "the same with a static token, interleaved".into(),
                median(with_static),
            )),
            runs: ROUND_TRIPS,
        },
        Row {
            what: "a new session's first request after the IdP rotated its keys (one JWKS fetch)".into(),
            ours: median(rotated),
            baseline: Some(("the same with the key cached".into(), median(cached))),
            runs: ROTATIONS,
        },
    ])
}
