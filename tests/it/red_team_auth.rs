//! What a red team broke or degraded in sign-in and connections (issue 49), against the real
//! binary and a real OpenID provider: names that only look alike, the reserved local user, ID
//! tokens and lenient claims, introspection floods, the allow list, connection floods, call
//! slots held by one principal, malformed standard requests.

use std::time::Duration;
// The floods come from 127.0.0.x addresses of their own, which only Linux has by default.
#[cfg(target_os = "linux")]
use std::{net::IpAddr, time::Instant};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
#[cfg(target_os = "linux")]
use tokio::{io::AsyncReadExt, net::TcpStream};

use crate::common;
#[cfg(target_os = "linux")]
use crate::oauth::refused;
use crate::oauth::{Idp, attempt, server};
#[cfg(target_os = "linux")]
use crate::remote_harness::http;
use crate::remote_harness::{Remote, post, raw_session};

/// Claims of a minted token for the server at `url`.
fn claims(url: &str, more: Value) -> Value {
    let mut c = json!({"sub": "alice", "aud": url, "scope": "mcp"});
    for (k, v) in more.as_object().expect("an object") {
        c[k] = v.clone();
    }
    c
}

/// The 401's body for `token`, which must be refused.
async fn refusal(url: &str, token: &str, why: &str) -> String {
    let (status, _, body) = attempt(url, Some(token)).await;
    assert_eq!(status, 401, "{why}: {body}");
    body
}

/// Findings 4, 5 and 14: names are compared exactly as signed; look-alikes and the reserved
/// local user are refused with a 401 that says why; ID tokens, `crit`, an `iss` array and a
/// `sub` of the wrong type are refused naming what is wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn names_are_exact_and_only_access_tokens_pass() {
    common::ensure_runtime();
    let idp = Idp::start().await;
    let remote = server(&idp, &[], "", &[]).await;
    let url = remote.url.clone();
    let alice = remote
        .client_with_token(&idp.mint(claims(&url, json!({})), "RS256", "idp").await)
        .await;
    let hers = alice.create().await;
    for name in [
        " alice",
        "alice\u{a0}",
        "alice\u{3000}",
        "alice\u{2028}",
        "\u{2000}alice",
        "alice\t",
        "al\u{200b}ice",
    ] {
        let token = idp.mint(claims(&url, json!({"sub": name})), "RS256", "idp").await;
        let body = refusal(&url, &token, &format!("{name:?}")).await;
        assert!(body.contains("not a usable name"), "{name:?}: {body}");
    }
    let local = idp
        .mint(claims(&url, json!({"sub": "local"})), "RS256", "idp")
        .await;
    assert!(refusal(&url, &local, "local").await.contains("reserved"));
    // An inner plain space is a name; it is another principal than alice.
    let spaced = remote
        .client_with_token(
            &idp.mint(claims(&url, json!({"sub": "alice smith"})), "RS256", "idp")
                .await,
        )
        .await;
    let (err, _, _) = spaced
        .call_json("execute_code", json!({"sandbox_id": hers, "code": "1"}))
        .await;
    assert!(err, "alice smith reached alice's sandbox");

    for (what, more, header, said) in [
        ("an ID token", json!({"nonce": "n-1"}), json!({}), "ID token"),
        (
            "an ID token's audience",
            json!({"aud": [url, "agent-a"], "azp": "agent-a"}),
            json!({}),
            "ID token",
        ),
        (
            "an issuer array",
            json!({"iss": [idp.issuer(), "http://other"]}),
            json!({}),
            "'iss' claim is an array",
        ),
        (
            "a sub array",
            json!({"sub": ["alice"]}),
            json!({}),
            "'sub' claim is an array",
        ),
        (
            "an unknown crit",
            json!({}),
            json!({"crit": ["exp-ext"], "exp-ext": 1}),
            "crit",
        ),
        (
            "an ID token's typ",
            json!({}),
            json!({"typ": "id_token+jwt"}),
            "typ",
        ),
    ] {
        let token = idp.mint_with(claims(&url, more), "RS256", "idp", header).await;
        let body = refusal(&url, &token, what).await;
        assert!(body.contains(said), "{what}: {body}");
        assert!(!body.contains("JSON error"), "{what}: {body}");
    }
    remote.terminate().await;
}

/// Finding 18: the allow list compares names exactly (no Unicode folding), an email the IdP
/// has not verified names no one, and a number that is not exact is no name.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_allow_list_and_claims_are_compared_exactly() {
    common::ensure_runtime();
    let idp = Idp::start().await;
    let remote = server(
        &idp,
        &[],
        "",
        &[
            ("CODE_SANDBOX_OAUTH_PRINCIPAL_CLAIM", "email"),
            ("CODE_SANDBOX_OAUTH_ALLOW", "alice@example.com, @kelvin.com"),
        ],
    )
    .await;
    let url = remote.url.clone();
    let mint = |email: Value, more: Value| {
        let mut c = claims(&url, more);
        c["email"] = email;
        idp.mint(c, "RS256", "idp")
    };
    let (status, _, body) = attempt(&url, Some(&mint(json!("alice@example.com"), json!({})).await)).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = attempt(&url, Some(&mint(json!("bob@kelvin.com"), json!({})).await)).await;
    assert_eq!(status, 200, "{body}");
    for (email, why) in [
        ("ALICE@example.com", "another case"),
        ("bob@\u{212a}elvin.com", "a KELVIN SIGN"),
    ] {
        let (status, _, body) = attempt(&url, Some(&mint(json!(email), json!({})).await)).await;
        assert_eq!(status, 403, "{why}: {body}");
    }
    let unverified = mint(json!("bob@kelvin.com"), json!({"email_verified": false})).await;
    assert!(
        refusal(&url, &unverified, "unverified")
            .await
            .contains("not verified")
    );
    remote.terminate().await;

    let remote = server(&idp, &[], "", &[("CODE_SANDBOX_OAUTH_PRINCIPAL_CLAIM", "uid")]).await;
    let url = remote.url.clone();
    let big = idp
        .mint(
            claims(&url, json!({"uid": 18446744073709551617.0_f64})),
            "RS256",
            "idp",
        )
        .await;
    assert!(
        refusal(&url, &big, "2**64+1")
            .await
            .contains("not an exact integer")
    );
    let fine = idp.mint(claims(&url, json!({"uid": 1234})), "RS256", "idp").await;
    assert_eq!(attempt(&url, Some(&fine)).await.0, 200);
    remote.terminate().await;
}

/// The IdP's count of introspection requests.
#[cfg(target_os = "linux")]
async fn introspections(idp: &Idp) -> u64 {
    let v: Value = http()
        .get(format!("{}/__test/introspections", idp.issuer()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["count"].as_u64().unwrap()
}

/// Finding 15: a made-up opaque token repeated costs the IdP one call; one address's flood of
/// them takes turns and does not hold up another address's sign-in; an introspection answer
/// whose `exp` is not a number is refused, not cached.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn introspection_floods_cost_the_issuer_little_and_delay_no_one_else() {
    common::ensure_runtime();
    let idp = Idp::start().await;
    let remote = server(
        &idp,
        &[],
        "",
        &[
            ("CODE_SANDBOX_OAUTH_CLIENT", "sandbox-rs:sandbox-rs-secret"),
            ("CODE_SANDBOX_OAUTH_PRINCIPAL_CLAIM", "email"),
        ],
    )
    .await;
    let url = remote.url.clone();
    let before = introspections(&idp).await;
    for _ in 0..20 {
        refused(&url, "made-up-opaque-token", "junk").await;
    }
    assert_eq!(introspections(&idp).await - before, 1, "repeats were asked again");

    // 60 different junk tokens from 127.0.0.2, then a real user from 127.0.0.1.
    let junk_client = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<IpAddr>().unwrap())
        .build()
        .unwrap();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut flood = Vec::new();
    for i in 0..60 {
        let (c, u, n) = (junk_client.clone(), url.clone(), answered.clone());
        flood.push(tokio::spawn(async move {
            let _ = c
                .post(&u)
                .bearer_auth(format!("junk-{i}"))
                .header("accept", "application/json, text/event-stream")
                .json(&crate::remote_harness::initialize())
                .send()
                .await;
            n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }));
    }
    let started = introspections(&idp).await;
    while introspections(&idp).await == started {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let opaque = idp.token("agent-opaque", &url, "mcp").await;
    let (status, _, body) = attempt(&url, Some(&opaque)).await;
    let junk_done = answered.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(status, 200, "{body}");
    assert!(junk_done < 60, "the real user waited behind all 60 junk tokens");
    for f in flood {
        f.await.unwrap();
    }

    // An answer whose `exp` is text.
    let r = http()
        .post(format!("{}/__test/introspection-answer", idp.issuer()))
        .json(&json!({"token": "odd-exp", "answer": {"active": true, "iss": idp.issuer(), "aud": url, "email": "carol@example.com", "scope": "mcp", "exp": "9999999999"}}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    assert!(refusal(&url, "odd-exp", "exp as text").await.contains("'exp'"));
    remote.terminate().await;
}

/// A connection from `ip` to the server.
#[cfg(target_os = "linux")]
async fn connect_from(ip: &str, addr: &str) -> TcpStream {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(format!("{ip}:0").parse().unwrap()).unwrap();
    sock.connect(addr.parse().unwrap()).await.unwrap()
}

/// Sends a request and reads its answer's status (and, with a length, its body); `None` when
/// the server closed the connection instead.
#[cfg(target_os = "linux")]
async fn exchange(s: &mut TcpStream, request: &str) -> Option<u16> {
    s.write_all(request.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).to_string();
            let Some(end) = text.find("\r\n\r\n") else {
                continue;
            };
            let status = text.split(' ').nth(1)?.parse().ok()?;
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>())
                })
                .and_then(Result::ok);
            match length {
                Some(len) if buf.len() < end + 4 + len => continue,
                _ => return Some(status),
            }
        }
    })
    .await
    .ok()?
}

#[cfg(target_os = "linux")]
fn healthz() -> &'static str {
    "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
}

/// Finding 2: a client holding connections with health checks, and a signed-in principal
/// holding connections of its own, each keep only their share: users with tokens are served
/// and `/healthz` answers throughout, and a connection nothing authenticated on is closed
/// when its probation ends however often it is answered.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn connection_floods_keep_only_their_share() {
    let r = Remote::start(
        &["alice", "mallory"],
        &[
            ("CODE_SANDBOX_HTTP_MAX_CONNECTIONS", "64"),
            ("CODE_SANDBOX_HTTP_HEADER_TIMEOUT", "3"),
        ],
    )
    .await;
    let addr = r.addr();
    let mut flood = Vec::new();
    for _ in 0..80 {
        let mut s = connect_from("127.0.0.2", &addr).await;
        let _ = exchange(&mut s, healthz()).await;
        flood.push(s);
    }
    let mut open = 0;
    for s in flood.iter_mut() {
        if exchange(s, healthz()).await == Some(200) {
            open += 1;
        }
    }
    assert!(
        open <= 8,
        "{open} unproven connections of one address stayed open"
    );
    // A user with a token, and a health check from elsewhere, are served meanwhile.
    let alice = r.client("alice").await;
    let sb = alice.create().await;
    assert_eq!(alice.run_ok(&sb, "6 * 7").await["result"], "42");
    let mut probe = connect_from("127.0.0.3", &addr).await;
    assert_eq!(exchange(&mut probe, healthz()).await, Some(200));
    // Answered every second, an unproven connection still ends with its probation.
    let mut pinger = connect_from("127.0.0.4", &addr).await;
    let began = Instant::now();
    while exchange(&mut pinger, healthz()).await == Some(200) {
        assert!(
            began.elapsed() < Duration::from_secs(15),
            "kept open past its probation"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // Mallory's authenticated connections: past a quarter of the cap, her oldest close.
    let auth = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nAccept: application/json\r\n\r\n",
        r.token("mallory")
    );
    let mut hers = Vec::new();
    for _ in 0..40 {
        let mut s = connect_from("127.0.0.5", &addr).await;
        let status = exchange(&mut s, &auth).await;
        assert!(status.is_some_and(|s| s != 401), "{status:?}");
        hers.push(s);
    }
    // Closing is the server's next step for each connection past the share.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut still = 0;
    for s in hers.iter_mut() {
        if exchange(s, healthz()).await.is_some() {
            still += 1;
        }
    }
    assert!(still <= 16, "mallory kept {still} connections");
    assert_eq!(alice.run_ok(&sb, "6 * 8").await["result"], "48");
    r.terminate().await;
}

/// Finding 16: one principal's long calls never hold every call slot: with two slots, another
/// principal's create and call answer while the first one's two calls still run.
#[tokio::test(flavor = "multi_thread")]
async fn one_principals_long_calls_leave_a_slot_for_another() {
    let r = Remote::start(
        &["alice sandboxes=4", "bob"],
        &[("CODE_SANDBOX_MAX_CONCURRENT_CALLS", "2")],
    )
    .await;
    let alice = std::sync::Arc::new(r.client("alice").await);
    let (a1, a2) = (alice.create().await, alice.create().await);
    let mut long = Vec::new();
    for sb in [a1, a2] {
        let alice = alice.clone();
        long.push(tokio::spawn(async move {
            alice.run_ok(&sb, "import time\ntime.sleep(20)").await;
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let bob = r.client("bob").await;
    let sb = bob.create().await;
    assert_eq!(bob.run_ok(&sb, "1 + 1").await["result"], "2");
    assert!(
        long.iter().all(|t| !t.is_finished()),
        "bob was answered only after alice's calls ended"
    );
    for t in long {
        t.await.unwrap();
    }
    r.terminate().await;
}

/// Finding 17: malformed params of standard methods are -32602, over HTTP and stdio.
#[tokio::test(flavor = "multi_thread")]
async fn malformed_standard_requests_are_invalid_params() {
    let r = Remote::start(&["alice"], &[]).await;
    let sid = raw_session(&r.url, r.token("alice")).await;
    for (method, params) in [
        ("logging/setLevel", json!({"level": 5})),
        ("tasks/get", json!({"taskId": 5})),
        ("completion/complete", json!({"ref": 1})),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let text = post(&r.url, Some(r.token("alice")), &body)
            .header("mcp-session-id", &sid)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(text.contains("-32602"), "{method}: {text}");
    }
    r.terminate().await;

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .env("CODE_SANDBOX_HOME", common::runtime_home())
        .env("CODE_SANDBOX_PERSIST", "false")
        .env_remove("INTERPRETER_TYPE")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": 5}}),
    ];
    for l in lines {
        stdin.write_all(format!("{l}\n").as_bytes()).await.unwrap();
    }
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let answer = tokio::time::timeout(Duration::from_secs(30), async {
        use tokio::io::AsyncBufReadExt;
        let mut line = String::new();
        loop {
            line.clear();
            out.read_line(&mut line).await.unwrap();
            if line.contains("\"id\":2") {
                return line.clone();
            }
        }
    })
    .await
    .expect("tasks/get answered");
    assert!(answer.contains("-32602"), "{answer}");
}
