//! Remote mode over real HTTP on loopback: authentication, Origin and Host, isolation between
//! principals, their quotas, hang-ups, shutdown, TLS, and a bounded load run.

use std::time::{Duration, Instant};

use rmcp::model::{PaginatedRequestParams, ReadResourceRequestParams};
use serde_json::{Value, json};

use crate::remote_harness::{Remote, initialize, post, raw_session};

#[tokio::test(flavor = "multi_thread")]
async fn requests_without_a_valid_token_get_401_with_a_bearer_challenge() {
    let r = Remote::start(&["alice"], &[]).await;
    let none = post(&r.url, None, &initialize()).send().await.unwrap();
    assert_eq!(none.status(), 401);
    let challenge = none.headers()["www-authenticate"].to_str().unwrap().to_string();
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    assert!(none.text().await.unwrap().contains("token add"));

    let wrong = post(&r.url, Some("mcs_0000"), &initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(
        wrong.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );

    // A token that is right except for its last character is just as wrong.
    let mut near = r.token("alice").to_string();
    let last = if near.ends_with('0') { "1" } else { "0" };
    near.pop();
    near.push_str(last);
    assert_eq!(
        post(&r.url, Some(&near), &initialize())
            .send()
            .await
            .unwrap()
            .status(),
        401
    );

    let ok = post(&r.url, Some(r.token("alice")), &initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert!(ok.headers().contains_key("mcp-session-id"));
    // The token never reaches the log.
    assert!(!r.log_text().contains(r.token("alice")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_origin_or_host_gets_403() {
    let r = Remote::start(&["alice"], &[]).await;
    let t = r.token("alice");
    let evil = post(&r.url, Some(t), &initialize())
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(evil.status(), 403);
    assert!(
        evil.text()
            .await
            .unwrap()
            .contains("CODE_SANDBOX_ALLOWED_ORIGINS")
    );

    let rebinding = post(&r.url, Some(t), &initialize())
        .header("host", "attacker.example:8765")
        .send()
        .await
        .unwrap();
    assert_eq!(rebinding.status(), 403);

    // The server's own origin, and no origin at all, pass.
    let base = r.url.trim_end_matches("/mcp").to_string();
    let same = post(&r.url, Some(t), &initialize())
        .header("origin", &base)
        .send()
        .await
        .unwrap();
    assert_eq!(same.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_listed_origin_passes() {
    let r = Remote::start(
        &["alice"],
        &[("CODE_SANDBOX_ALLOWED_ORIGINS", "https://app.example.com")],
    )
    .await;
    let ok = post(&r.url, Some(r.token("alice")), &initialize())
        .header("origin", "https://app.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_principal_cannot_reach_anothers_sandbox_session_or_files() {
    let r = Remote::start(&["alice", "bob"], &[]).await;
    let alice = r.client("alice").await;
    let bob = r.client("bob").await;
    let a = alice.create().await;
    assert_eq!(a.len(), "sbx-".len() + 32, "ids carry 128 random bits: {a}");
    alice
        .ok(
            "write_file",
            json!({"sandbox_id": a, "file_path": "secret.txt", "content": "alice's"}),
        )
        .await;
    alice.run_ok(&a, "token = 'alice-only'").await;

    // Every tool, given alice's id, answers bob as if it did not exist.
    let unknown = |text: &str| text.contains("no open sandbox has the id");
    for (tool, args) in [
        ("execute_code", json!({"sandbox_id": a, "code": "token"})),
        ("get_sandbox_status", json!({"sandbox_id": a})),
        ("read_file", json!({"sandbox_id": a, "file_path": "secret.txt"})),
        ("list_files", json!({"sandbox_id": a})),
        (
            "write_file",
            json!({"sandbox_id": a, "file_path": "x.txt", "content": "bob was here"}),
        ),
        ("install_package", json!({"sandbox_id": a, "package_name": "six"})),
        ("fork_sandbox", json!({"sandbox_id": a})),
        ("checkpoint_sandbox", json!({"sandbox_id": a})),
        ("restore_sandbox", json!({"sandbox_id": a, "checkpoint": "c"})),
        ("close_sandbox", json!({"sandbox_id": a})),
    ] {
        let (err, _, text) = bob.call_json(tool, args).await;
        assert!(
            err && unknown(&text),
            "{tool} let bob reach alice's sandbox: {text}"
        );
    }
    let (_, listed, _) = bob.call_json("get_sandbox_status", json!({})).await;
    assert_eq!(listed["sandboxes"], json!([]), "bob sees: {listed}");

    // Without an id, bob gets a sandbox of his own, not alice's most recent one.
    let v = bob.run_ok("", "'token' in globals()").await;
    assert_eq!(v["result"], "False");
    let b = v["sandbox_id"].as_str().unwrap().to_string();
    assert_ne!(a, b);

    // Resources: bob lists only his files and cannot read alice's by URI.
    let res = bob
        .client
        .list_resources(Some(PaginatedRequestParams::default()))
        .await
        .unwrap();
    assert!(
        res.resources.iter().all(|x| !x.uri.contains(&a)),
        "bob lists alice's files"
    );
    let read = bob
        .client
        .read_resource(ReadResourceRequestParams::new(format!(
            "sandbox://{a}/secret.txt"
        )))
        .await;
    assert!(read.is_err(), "bob read alice's file as a resource");

    // Alice's session, with bob's token, is refused.
    let sid = raw_session(&r.url, r.token("alice")).await;
    let hijack = post(
        &r.url,
        Some(r.token("bob")),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .header("mcp-session-id", &sid)
    .send()
    .await
    .unwrap();
    assert_eq!(hijack.status(), 403);

    // Alice's sandbox is untouched.
    let v = alice.run_ok(&a, "token, open('secret.txt').read()").await;
    assert_eq!(v["result"], "('alice-only', \"alice's\")");
    let (_, listed, _) = alice.call_json("get_sandbox_status", json!({})).await;
    assert_eq!(listed["sandboxes"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn quotas_hold_per_principal() {
    let r = Remote::start(
        &[
            "carol sandboxes=2",
            "dave memory_mb=768",
            "erin disk_mb=2",
            "frank",
        ],
        &[("CODE_SANDBOX_MEMORY_MB", "512")],
    )
    .await;
    // Open sandboxes.
    let carol = r.client("carol").await;
    carol.create().await;
    carol.create().await;
    let (err, _, text) = carol.call_json("create_sandbox", json!({})).await;
    assert!(
        err && text.contains("2 sandboxes (live and kept)") && text.contains("quota"),
        "{text}"
    );
    let (err, _, text) = carol.call_json("create_run_close", json!({"code": "1"})).await;
    assert!(err && text.contains("quota"), "{text}");
    // Another principal is not affected.
    let frank = r.client("frank").await;
    frank.create().await;

    // Memory: what live sandboxes may grow to counts; past it, the principal's own least
    // recently used idle sandbox is suspended; what can never fit is refused; an unsized
    // sandbox gets what is left.
    let dave = r.client("dave").await;
    let first = dave.create_with(json!({"memory_mb": 512})).await;
    let (err, _, text) = dave.call_json("create_sandbox", json!({"memory_mb": 1024})).await;
    assert!(err && text.contains("1024 MiB more does not fit"), "{text}");
    let v = dave.ok("get_sandbox_status", json!({"sandbox_id": first})).await;
    assert_eq!(
        v["state"], "ready",
        "nothing was suspended for a request that cannot fit"
    );
    dave.create_with(json!({"memory_mb": 512})).await;
    let v = dave.ok("get_sandbox_status", json!({"sandbox_id": first})).await;
    assert_eq!(v["state"], "paused", "the first made room: {v}");
    let (err, v, text) = dave.call_json("create_sandbox", json!({})).await;
    assert!(!err, "{text}");
    assert_eq!(v["limits"]["memory_mb"], 256, "{v}");
    assert!(text.contains("memory quota"), "{text}");

    // Disk: the principal's quota holds for guest writes and for calls that add files alike.
    let erin = r.client("erin").await;
    let e = erin.create().await;
    erin.run_ok(&e, "open('big.bin', 'wb').write(b'x' * 1_500_000)")
        .await;
    let (_, v) = erin
        .exec(&e, "open('more.bin', 'wb').write(b'x' * 1_000_000)")
        .await;
    assert_eq!(
        v["error"]["name"], "OSError",
        "the guest's write stops at it: {v}"
    );
    let (err, _, text) = erin
        .call_json(
            "write_file",
            json!({"sandbox_id": e, "file_path": "more.txt", "content": "x".repeat(700_000)}),
        )
        .await;
    assert!(err && text.contains("disk quota"), "{text}");
    // Code still runs, so files can be deleted, and that makes room again.
    erin.run_ok(&e, "import os; os.remove('big.bin')").await;
    erin.ok(
        "write_file",
        json!({"sandbox_id": e, "file_path": "more.txt", "content": "x".repeat(700_000)}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn upload_from_a_server_path_is_off_over_http() {
    let r = Remote::start(&["alice"], &[]).await;
    let alice = r.client("alice").await;
    let (err, _, text) = alice
        .call_json(
            "upload_file",
            json!({"source_path": "/etc/hostname", "destination_path": "h"}),
        )
        .await;
    assert!(err && text.contains("content_base64"), "{text}");
    let v = alice
        .ok(
            "upload_file",
            json!({"content_base64": "aGk=", "destination_path": "h.txt"}),
        )
        .await;
    assert_eq!(v["bytes_written"], 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_hangs_up_mid_call_cancels_its_guest() {
    let r = Remote::start(&["alice"], &[]).await;
    let alice = r.client("alice").await;
    let id = alice.create().await;
    let sid = raw_session(&r.url, r.token("alice")).await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "execute_code",
        "arguments": {"sandbox_id": id, "code": "while True: pass", "timeout_seconds": 300}
    }});
    let resp = post(&r.url, Some(r.token("alice")), &call)
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // The guest is spinning: the sandbox is busy.
    let busy_seen = wait_busy(&alice, &id, true).await;
    assert!(busy_seen, "the call never started");
    let hung_up = Instant::now();
    drop(resp);
    // Well before the 300 s limit, the sandbox is free and still has its state.
    let freed = wait_busy(&alice, &id, false).await;
    assert!(freed, "the guest kept running after the client hung up");
    eprintln!("freed {:?} after the hang-up", hung_up.elapsed());
    let v = alice.run_ok(&id, "1 + 1").await;
    assert_eq!(v["result"], "2");
    let log = r.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("tool=execute_code") && l.contains("outcome=cancelled")),
        "the log does not record the cancelled call"
    );
}

fn turnless(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find("<turn ") {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let end = tail.find('>').map_or(tail.len(), |e| e + 1);
        out.push_str("<turn>");
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Waits up to 30 s until the sandbox is busy (or not); whether it got there.
async fn wait_busy(c: &crate::common::Server, id: &str, busy: bool) -> bool {
    wait_for(Duration::from_secs(30), || async {
        let (_, v, _) = c.call_json("get_sandbox_status", json!({"sandbox_id": id})).await;
        (v["state"] == "busy") == busy
    })
    .await
}

async fn wait_for<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < limit {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread")]
async fn each_call_leaves_one_log_line_without_code_or_contents() {
    let r = Remote::start(&["alice"], &[]).await;
    let alice = r.client("alice").await;
    let id = alice.create().await;
    alice.run_ok(&id, "marker_code_7f3a = 1").await;
    alice
        .ok(
            "write_file",
            json!({"sandbox_id": id, "file_path": "f.txt", "content": "marker_content_9c1e"}),
        )
        .await;
    let (err, _, _) = alice
        .call_json("read_file", json!({"sandbox_id": id, "file_path": "nope.txt"}))
        .await;
    assert!(err);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = r.log_text();
    let calls: Vec<&str> = log.lines().filter(|l| l.contains("principal=alice")).collect();
    assert_eq!(calls.len(), 4, "one line per call:\n{}", calls.join("\n"));
    assert!(calls[1].contains("tool=execute_code") && calls[1].contains(&format!("sandbox={id}")));
    assert!(calls[1].contains("outcome=ok") && calls[1].contains("duration_ms="));
    assert!(calls[3].contains("tool=read_file") && calls[3].contains("outcome=tool_error"));
    assert!(!log.contains("marker_code_7f3a") && !log.contains("marker_content_9c1e"));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_tokens_only_loopback_is_served() {
    // An empty home: a server that went on to prepare the runtime would start a download here.
    let home = std::env::temp_dir().join(format!("mcs-refused-{}", uuid::Uuid::new_v4().simple()));
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .args(["--transport", "http", "--listen", "0.0.0.0:0"])
        .env_remove("CODE_SANDBOX_TOKENS")
        .env("CODE_SANDBOX_HOME", &home)
        .stdin(std::process::Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .unwrap()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("without tokens") && err.contains("token add"),
        "{err}"
    );
    // Refused before anything is installed: no runtime download for a server that will not start.
    assert!(
        !home.join("runtime").exists() && !home.join("downloads").exists(),
        "{err}"
    );
    assert!(!err.contains("runtime:"), "{err}");

    // On loopback, a tokenless server serves the machine's one user.
    let r = Remote::start(&[], &[]).await;
    let raw = post(&r.url, None, &initialize()).send().await.unwrap();
    assert_eq!(raw.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn http_and_stdio_give_the_same_results() {
    let r = Remote::start(&["alice"], &[]).await;
    let http = r.client("alice").await;
    let stdio = crate::common::Server::start().await;
    let tools = |l: Vec<rmcp::model::Tool>| {
        let mut v: Vec<Value> = l.into_iter().map(|t| serde_json::to_value(t).unwrap()).collect();
        v.sort_by_key(|t| t["name"].as_str().unwrap_or("").to_string());
        v
    };
    assert_eq!(
        tools(http.client.list_all_tools().await.unwrap()),
        tools(stdio.client.list_all_tools().await.unwrap()),
        "the tools differ between transports"
    );
    let code = "import pandas as pd\nprint('rows', len(pd.DataFrame({'a': [1, 2, 3]})))\n{'k': [1, 2]}";
    let mut outs = Vec::new();
    for s in [&http, &stdio] {
        let id = s.create().await;
        let mut v = s.run_ok(&id, code).await;
        v["sandbox_id"] = Value::Null;
        v["duration_ms"] = Value::Null;
        let (_, mut e, _) = s
            .call_json("execute_code", json!({"sandbox_id": id, "code": "1/0"}))
            .await;
        e["sandbox_id"] = Value::Null;
        e["duration_ms"] = Value::Null;
        // The turn number in a traceback counts the interpreter's turns, which depends on
        // whether the sandbox came from the spare; it differs within one transport too.
        let e = serde_json::from_str::<Value>(&turnless(&e.to_string())).unwrap();
        outs.push((v, e));
    }
    assert_eq!(outs[0], outs[1]);
    stdio.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_lets_a_running_call_finish_and_keeps_sandboxes_for_their_owner() {
    let home = crate::common::private_home();
    let persist = [("CODE_SANDBOX_PERSIST", "true")];
    let r = Remote::start_in(home.clone(), &["alice", "bob"], &persist).await;
    let alice = r.client("alice").await;
    let id = alice.create().await;
    alice.run_ok(&id, "x = 41").await;
    // A call that is running when the signal comes gets its result.
    let slow = {
        let id = id.clone();
        async move {
            alice
                .call_json(
                    "execute_code",
                    json!({"sandbox_id": id, "code": "import time; time.sleep(2); x + 1"}),
                )
                .await
        }
    };
    let slow = tokio::spawn(slow);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let status = r.terminate().await;
    assert!(status.success(), "exit status {status}");
    let (err, v, text) = slow.await.unwrap();
    assert!(!err, "{text}");
    assert_eq!(v["result"], "42");

    let r = Remote::start_in(home, &["alice", "bob"], &persist).await;
    let bob = r.client("bob").await;
    let (_, listed, _) = bob.call_json("get_sandbox_status", json!({})).await;
    assert_eq!(listed["sandboxes"], json!([]), "bob sees alice's kept sandbox");
    let alice = r.client("alice").await;
    let v = alice.run_ok(&id, "x").await;
    assert_eq!(v["result"], "41");
    let _ = r.terminate().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn https_with_a_given_certificate() {
    let home = crate::common::private_home();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(home.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(home.join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    let cert_path = home.join("cert.pem").display().to_string();
    let key_path = home.join("key.pem").display().to_string();
    let r = Remote::start_in(
        home,
        &["alice"],
        &[
            ("CODE_SANDBOX_TLS_CERT", &cert_path),
            ("CODE_SANDBOX_TLS_KEY", &key_path),
        ],
    )
    .await;
    assert!(r.url.starts_with("https://"), "{}", r.url);
    let url = r.url.replace("127.0.0.1", "localhost");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()
        .unwrap();
    let resp = client
        .post(&url)
        .bearer_auth(r.token("alice"))
        .header("accept", "application/json, text/event-stream")
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().contains_key("mcp-session-id"));
    // Plain HTTP to the HTTPS port gets nowhere.
    let plain = crate::remote_harness::http()
        .post(r.url.replace("https://", "http://"))
        .json(&initialize())
        .timeout(Duration::from_secs(10))
        .send()
        .await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());
}

/// 40 sessions of 4 principals, 25 calls each, all at once: every call answers, right.
#[tokio::test(flavor = "multi_thread")]
async fn a_bounded_load_run_finishes_without_error() {
    let names = ["p0", "p1", "p2", "p3"];
    let r = Remote::start(
        &names,
        &[
            ("CODE_SANDBOX_MAX_SANDBOXES", "48"),
            ("CODE_SANDBOX_PRINCIPAL_SANDBOXES", "12"),
            ("CODE_SANDBOX_MEMORY_MB", "256"),
        ],
    )
    .await;
    let r = std::sync::Arc::new(r);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..40 {
        let r = r.clone();
        tasks.push(tokio::spawn(async move {
            let c = r.client(names[s % 4]).await;
            let id = c.create().await;
            let mut latencies = Vec::new();
            for i in 0..25 {
                let t = Instant::now();
                let (err, v) = c.exec(&id, &format!("{s} * 1000 + {i}")).await;
                latencies.push(t.elapsed());
                assert!(!err, "session {s} call {i}: {v}");
                assert_eq!(v["result"], format!("{}", s * 1000 + i));
            }
            c.ok("close_sandbox", json!({"sandbox_id": id})).await;
            latencies
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("a session failed"));
    }
    let elapsed = started.elapsed();
    all.sort();
    eprintln!(
        "load: {} calls in {elapsed:?} ({:.0} calls/s), median {:?}, p99 {:?}",
        all.len(),
        all.len() as f64 / elapsed.as_secs_f64(),
        all[all.len() / 2],
        all[all.len() * 99 / 100]
    );
    assert_eq!(all.len(), 1000);
}

/// One principal floods the call slots; another's single call still gets the next free slot
/// rather than waiting behind the whole flood.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_from_one_principal_does_not_starve_another() {
    let r = Remote::start(
        &["flood", "quiet"],
        &[
            ("CODE_SANDBOX_MAX_CONCURRENT_CALLS", "2"),
            ("CODE_SANDBOX_MEMORY_MB", "256"),
        ],
    )
    .await;
    let flood = std::sync::Arc::new(r.client("flood").await);
    let quiet = r.client("quiet").await;
    let q = quiet.create().await;
    let mut ids = Vec::new();
    for _ in 0..8 {
        ids.push(flood.create().await);
    }
    let done = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, id) in ids.into_iter().enumerate() {
        let (flood, done) = (flood.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let v = flood.run_ok(&id, "import time; time.sleep(0.5)").await;
            done.lock().unwrap().push(format!("flood{i}"));
            v
        }));
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    let v = quiet.run_ok(&q, "'quiet'").await;
    done.lock().unwrap().push("quiet".into());
    assert_eq!(v["result"], "'quiet'");
    for t in tasks {
        t.await.unwrap();
    }
    let order = done.lock().unwrap().clone();
    let at = order.iter().position(|s| s == "quiet").unwrap();
    // With two slots, at most the two running flood calls and the pair that started with
    // them finish first; a first-come queue would put it after all eight.
    assert!(at <= 4, "the quiet principal's call finished {at}th: {order:?}");
}

/// Over HTTP, progress arrives on the call's event stream, and an explicit
/// `notifications/cancelled` interrupts the guest.
#[tokio::test(flavor = "multi_thread")]
async fn progress_streams_and_cancellation_is_honoured_over_http() {
    let r = Remote::start(&["alice"], &[]).await;
    let t = r.token("alice");
    let sid = raw_session(&r.url, t).await;
    let id = r.client("alice").await.create().await;
    let call = |n: u64, code: &str| {
        json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
            "name": "execute_code",
            "arguments": {"sandbox_id": id, "code": code, "timeout_seconds": 300},
            "_meta": {"progressToken": format!("p{n}")}
        }})
    };
    let body = post(
        &r.url,
        Some(t),
        &call(
            11,
            "import time\nfor i in range(3):\n    print(i); time.sleep(0.8)\n'done'",
        ),
    )
    .header("mcp-session-id", &sid)
    .send()
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    let progress = body
        .find("notifications/progress")
        .expect("progress on the stream");
    let result = body.find("'done'").expect("the result on the stream");
    assert!(progress < result, "{body}");

    let spinning = post(&r.url, Some(t), &call(12, "while True: pass"))
        .header("mcp-session-id", &sid)
        .send();
    let spinning = tokio::spawn(spinning);
    let alice = r.client("alice").await;
    let busy = wait_busy(&alice, &id, true).await;
    assert!(busy, "the call never started");
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12, "reason": "test"}});
    let r2 = post(&r.url, Some(t), &cancel)
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert!(r2.status().is_success());
    let freed = wait_busy(&alice, &id, false).await;
    assert!(freed, "the guest kept running after notifications/cancelled");
    assert_eq!(alice.run_ok(&id, "2 + 2").await["result"], "4");
    spinning.abort();
}

/// A principal's memory quota counts live sandboxes: past it, its own least recently used idle
/// sandbox is suspended (losslessly) instead of the new one being refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_principals_memory_quota_suspends_its_own_idle_sandboxes_first() {
    let r = Remote::start(
        &["gina memory_mb=1024 sandboxes=5"],
        &[("CODE_SANDBOX_MEMORY_MB", "512")],
    )
    .await;
    let g = r.client("gina").await;
    let a = g.create().await;
    g.run_ok(&a, "x = 'a'").await;
    let b = g.create().await;
    g.run_ok(&b, "y = 'b'").await;
    let c = g.create().await;
    let v = g.ok("get_sandbox_status", json!({"sandbox_id": a})).await;
    assert_eq!(v["state"], "paused", "the least recently used was suspended: {v}");
    let v = g.ok("get_sandbox_status", json!({"sandbox_id": c})).await;
    assert_eq!(v["state"], "ready");
    let v = g.run_ok(&a, "x").await;
    assert_eq!(v["result"], "'a'", "and comes back whole");
    let v = g.run_ok(&b, "y").await;
    assert_eq!(v["result"], "'b'");
}

/// A page at `http://localhost:PORT` is this server's own origin as much as one at
/// `http://127.0.0.1:PORT`; and ending a session with DELETE answers 200, which clients
/// (the Python SDK) take as success.
#[tokio::test(flavor = "multi_thread")]
async fn the_servers_own_names_are_its_origin_and_ending_a_session_answers_200() {
    let r = Remote::start(&["hal"], &[]).await;
    let port = r
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/mcp")
        .to_string();
    let token = r.token("hal").to_string();
    let resp = post(&r.url, Some(&token), &initialize())
        .header("origin", format!("http://localhost:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap_or_default());
    let resp = post(&r.url, Some(&token), &initialize())
        .header("origin", format!("http://attacker.example:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);

    let sid = raw_session(&r.url, &token).await;
    let resp = crate::remote_harness::http()
        .delete(&r.url)
        .bearer_auth(&token)
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "DELETE of a session answers 200");
    let resp = post(
        &r.url,
        Some(&token),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .header("mcp-session-id", &sid)
    .send()
    .await
    .unwrap();
    assert!(
        !resp.status().is_success(),
        "the session is gone: {}",
        resp.status()
    );
}

/// Calls queued on one busy sandbox hold no call slot while they wait: another principal's
/// small call runs at once, and past the bound of waiting calls a sandbox refuses, saying so.
#[tokio::test(flavor = "multi_thread")]
async fn calls_waiting_for_a_busy_sandbox_hold_no_slot_and_are_bounded() {
    let r = std::sync::Arc::new(
        Remote::start(&["ivy", "jon"], &[("CODE_SANDBOX_MAX_CONCURRENT_CALLS", "2")]).await,
    );
    let ivy = r.client("ivy").await;
    let jon = r.client("jon").await;
    let mine = ivy.create().await;
    let his = jon.create().await;
    jon.run_ok(&his, "0").await;
    let started = Instant::now();
    let sleeps = (0..6).map(|_| {
        ivy.call_json(
            "execute_code",
            json!({"sandbox_id": mine, "code": "import time\ntime.sleep(3)\n'slept'"}),
        )
    });
    let small = async {
        tokio::time::sleep(Duration::from_millis(800)).await;
        let (err, v) = jon.exec(&his, "1+1").await;
        (err, v, started.elapsed())
    };
    let (results, (err, v, small_done)) = tokio::join!(futures_util::future::join_all(sleeps), small);
    assert!(!err, "{v}");
    assert_eq!(v["result"], "2");
    eprintln!(
        "fairness: jon's 1+1 answered {:?} after it was sent, beside ivy's 6 queued 3 s calls",
        small_done.saturating_sub(Duration::from_millis(800))
    );
    assert!(
        small_done < Duration::from_secs(3),
        "jon's 1+1 finished ({small_done:?}) before ivy's first sleep could end"
    );
    let refused: Vec<&String> = results.iter().filter(|(e, _, _)| *e).map(|(_, _, t)| t).collect();
    assert_eq!(
        refused.len(),
        1,
        "1 running and 4 waiting are allowed: {refused:?}"
    );
    assert!(refused[0].contains("4 more are waiting for it"), "{}", refused[0]);
    for (err, v, _) in results.iter().filter(|(e, _, _)| !*e) {
        assert!(!err);
        assert_eq!(v["result"], "'slept'");
    }
}

/// A stdio server started later on the same home is the local user: a remote principal's kept
/// sandbox is as unknown to it as to another principal.
#[tokio::test(flavor = "multi_thread")]
async fn a_stdio_server_on_the_same_home_never_sees_a_principals_sandboxes() {
    let home = crate::common::private_home();
    let persist = [("CODE_SANDBOX_PERSIST", "true")];
    let r = Remote::start_in(home.clone(), &["kim"], &persist).await;
    let kim = r.client("kim").await;
    let id = kim.create().await;
    kim.run_ok(&id, "secret = 'kim'\nopen('mine.txt', 'w').write('kim')")
        .await;
    let status = r.terminate().await;
    assert!(status.success());

    let home_str = home.to_str().unwrap().to_string();
    let s = crate::common::Server::start_with(&[
        ("CODE_SANDBOX_HOME", &home_str),
        ("CODE_SANDBOX_PERSIST", "true"),
    ])
    .await;
    let v = s.ok("get_sandbox_status", json!({})).await;
    assert_eq!(v["sandboxes"], json!([]), "not listed: {v}");
    for (tool, args) in [
        ("execute_code", json!({"sandbox_id": id, "code": "secret"})),
        ("read_file", json!({"sandbox_id": id, "file_path": "mine.txt"})),
        ("get_sandbox_status", json!({"sandbox_id": id})),
        ("close_sandbox", json!({"sandbox_id": id})),
    ] {
        let (err, _, text) = s.call_json(tool, args).await;
        assert!(
            err && text.contains("no open sandbox has the id"),
            "{tool}: {text}"
        );
    }
    s.stop().await;
    assert!(
        home.join("sandboxes").join(&id).join("mine.txt").exists(),
        "kim's files are untouched"
    );
}

/// Reads until the server closes the connection (or `limit` passes); whether it closed.
async fn closed_by_server(stream: &mut tokio::net::TcpStream, limit: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    let until = Instant::now() + limit;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            // A 408 or similar before the close is fine: keep reading to the end.
            Ok(Ok(_)) => {}
        }
    }
}

/// Unauthenticated clients that trickle a request's head or body are cut off at the timeouts,
/// and `/healthz` answers all the while.
#[tokio::test(flavor = "multi_thread")]
async fn slow_clients_are_cut_off_and_health_answers_throughout() {
    use tokio::io::AsyncWriteExt;
    let r = Remote::start(
        &["lee"],
        &[
            ("CODE_SANDBOX_HTTP_HEADER_TIMEOUT", "2"),
            ("CODE_SANDBOX_HTTP_BODY_TIMEOUT", "2"),
        ],
    )
    .await;
    let addr = r.addr();
    let mut slow = Vec::new();
    for i in 0..200 {
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        if i % 2 == 0 {
            // Half a request head, never finished.
            s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .await
                .unwrap();
        } else {
            // A whole head declaring 100 MB of body, then one byte.
            let head = format!(
                "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100000000\r\n\r\n{{",
                r.token("lee")
            );
            s.write_all(head.as_bytes()).await.unwrap();
        }
        slow.push(s);
    }
    let health = format!("http://{addr}/healthz");
    for _ in 0..3 {
        let t = Instant::now();
        let resp = crate::remote_harness::http().get(&health).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        eprintln!("/healthz answered in {:?} beside 200 slow clients", t.elapsed());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut closed = 0;
    for s in &mut slow {
        if closed_by_server(s, Duration::from_secs(10)).await {
            closed += 1;
        }
    }
    assert_eq!(closed, 200, "every slow connection was closed by the server");
    let resp = crate::remote_harness::http().get(&health).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}

/// A flood of sessions from one principal is refused past its cap, with a 429 that says what
/// to do; ending a session makes room; server memory stays flat.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn sessions_are_capped_per_principal_and_memory_stays_flat() {
    let r = Remote::start(&["max"], &[("CODE_SANDBOX_PRINCIPAL_SESSIONS", "5")]).await;
    let token = r.token("max").to_string();
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(raw_session(&r.url, &token).await);
    }
    let rss = || {
        std::fs::read_to_string(format!("/proc/{}/status", r.pid()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            })
            .unwrap_or(0)
    };
    let refused = || async {
        let resp = post(&r.url, Some(&token), &initialize()).send().await.unwrap();
        assert_eq!(resp.status(), 429);
        let text = resp.text().await.unwrap();
        assert!(text.contains("CODE_SANDBOX_PRINCIPAL_SESSIONS"), "{text}");
    };
    // The first few hundred warm the allocator and the connection pool; then memory must stay
    // flat (a session kept per attempt would be ~55 KB each, 55 MB for these 1,000).
    for _ in 0..200 {
        refused().await;
    }
    let before = rss();
    for _ in 0..1000 {
        refused().await;
    }
    let after = rss();
    eprintln!("session flood: server RSS {before} kB -> {after} kB over 1,000 refused sessions");
    assert!(
        after < before + 10 * 1024,
        "memory stays flat under the flood: {before} kB -> {after} kB"
    );
    let resp = crate::remote_harness::http()
        .delete(&r.url)
        .bearer_auth(&token)
        .header("mcp-session-id", &ids[0])
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    raw_session(&r.url, &token).await;
}

/// Over HTTP too: a call still running when the drain ends is stopped and answered (not a
/// stream that ends without a JSON-RPC answer), and after a restart the sandbox says its
/// variables were lost and why.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_still_running_at_shutdown_is_answered_and_the_loss_is_told_after_restart() {
    let home = crate::common::private_home();
    let persist = [("CODE_SANDBOX_PERSIST", "true")];
    let r = Remote::start_in(home.clone(), &["nia"], &persist).await;
    let nia = std::sync::Arc::new(r.client("nia").await);
    let id = nia.create().await;
    nia.run_ok(&id, "keep = 'before'").await;
    let running = {
        let (nia, id) = (nia.clone(), id.clone());
        tokio::spawn(async move {
            nia.call_json(
                "execute_code",
                json!({"sandbox_id": id, "code": "import time\ntime.sleep(60)"}),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let status = r.terminate().await;
    assert!(status.success(), "{status}");
    let (err, v, text) = running.await.unwrap();
    assert!(err, "a stopped call is an error result: {text}");
    assert_eq!(v["error"]["name"], "ServerShutdown", "{v}");
    assert_eq!(v["state_lost"], true, "{v}");
    assert!(text.contains("shutting down"), "{text}");

    let r = Remote::start_in(home, &["nia"], &persist).await;
    let nia = r.client("nia").await;
    let (_, v, text) = nia
        .call_json("execute_code", json!({"sandbox_id": id, "code": "keep"}))
        .await;
    assert_eq!(v["state_lost"], true, "{text}");
    assert!(
        text.contains("server shut down while a call was running"),
        "{text}"
    );
    let _ = r.terminate().await;
}

/// Two tool calls with the same JSON-RPC id in one session: the second is refused at once with
/// an error naming the id, and the first still gets its own answer.
#[tokio::test(flavor = "multi_thread")]
async fn a_duplicate_request_id_in_flight_is_refused_and_the_first_is_answered() {
    let r = Remote::start(&["ola"], &[]).await;
    let token = r.token("ola").to_string();
    let sid = raw_session(&r.url, &token).await;
    let call = |id: u64, code: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "execute_code", "arguments": {"code": code}}})
    };
    let first = {
        let (url, token, sid) = (r.url.clone(), token.clone(), sid.clone());
        let body = call(7, "import time\ntime.sleep(3)\n'first'");
        tokio::spawn(async move {
            post(&url, Some(&token), &body)
                .header("mcp-session-id", &sid)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(800)).await;
    let second = post(&r.url, Some(&token), &call(7, "'second'"))
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 200);
    let v: Value = second.json().await.unwrap();
    assert_eq!(v["id"], 7);
    assert_eq!(v["error"]["code"], -32600, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("still running"),
        "{v}"
    );
    let first = tokio::time::timeout(Duration::from_secs(30), first)
        .await
        .expect("the first call is answered")
        .unwrap();
    assert!(first.contains("'first'"), "the first call's own answer: {first}");
    assert!(!first.contains("'second'"));
}

/// A principal's disk quota is hard for guest writes too: the sandbox's budget sits inside the
/// principal's, inside the host's, so writes to the workspace, to /tmp and in a second sandbox
/// stop at it, and a checkpoint or fork that would pass it is refused before it is kept.
#[tokio::test(flavor = "multi_thread")]
async fn a_principals_disk_quota_holds_for_guest_writes_checkpoints_and_forks() {
    let r = Remote::start(&["pat disk_mb=20"], &[]).await;
    let pat = r.client("pat").await;
    let a = pat.create().await;
    pat.run_ok(&a, "open('big.bin', 'wb').write(b'x' * 15_000_000)")
        .await;
    for (id, code) in [
        (&a, "open('more.bin', 'wb').write(b'x' * 10_000_000)"),
        (&a, "open('/tmp/more.bin', 'wb').write(b'x' * 10_000_000)"),
    ] {
        let (_, v) = pat.exec(id, code).await;
        assert_eq!(v["error"]["name"], "OSError", "{code}: {v}");
    }
    let b = pat.create().await;
    let (_, v) = pat
        .exec(&b, "open('other.bin', 'wb').write(b'x' * 10_000_000)")
        .await;
    assert_eq!(v["error"]["name"], "OSError", "a second sandbox too: {v}");
    let (err, _, text) = pat
        .call_json("checkpoint_sandbox", json!({"sandbox_id": a}))
        .await;
    assert!(
        err && text.contains("your") && text.contains("disk quota"),
        "checkpoint: {text}"
    );
    let (err, _, text) = pat.call_json("fork_sandbox", json!({"sandbox_id": a})).await;
    assert!(
        err && text.contains("your") && text.contains("disk quota"),
        "fork: {text}"
    );
    // Deleting files makes room again.
    pat.run_ok(&a, "import os; os.remove('big.bin')").await;
    pat.run_ok(&b, "open('other.bin', 'wb').write(b'x' * 10_000_000)")
        .await;
}

/// Connections not yet answered (but for 401/403) may take only a quarter of the connection
/// cap: past it a new one closes the oldest, so idle sockets never lock out a client that
/// opens a connection and sends its request, and a client already served keeps working.
#[tokio::test(flavor = "multi_thread")]
async fn unproven_connections_are_capped_and_proven_clients_keep_working() {
    use tokio::io::AsyncWriteExt;
    let r = Remote::start(&["quin"], &[("CODE_SANDBOX_HTTP_MAX_CONNECTIONS", "40")]).await;
    let quin = r.client("quin").await;
    let id = quin.create().await;
    quin.run_ok(&id, "1").await;
    let addr = r.addr();
    let mut slow = Vec::new();
    for _ in 0..10 {
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        s.write_all(b"POST /mcp HTTP/1.1\r\n").await.unwrap();
        slow.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut extra = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let _ = extra.write_all(b"GET /healthz HTTP/1.1\r\n").await;
    assert!(
        closed_by_server(&mut slow[0], Duration::from_secs(3)).await,
        "an eleventh unproven connection closes the oldest"
    );
    assert!(
        !closed_by_server(&mut slow[9], Duration::from_millis(300)).await,
        "the newer unproven connections stay until their head times out"
    );
    // A client arriving now, on connections of its own, is served: the idle ones make way.
    let late = r.client("quin").await;
    let v = late.run_ok(&id, "6 * 7").await;
    assert_eq!(v["result"], "42", "a new client is served");
    let v = quin.run_ok(&id, "6 * 8").await;
    assert_eq!(v["result"], "48", "the served client keeps working");
    drop(slow);
}
