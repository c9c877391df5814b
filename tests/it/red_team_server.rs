//! What a red team broke in the team server (issue 55), each against the real binary: figures
//! decoded without a bound, pictures read in the async handler, stateless calls cut by a drain.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{self, Server};
use crate::remote_harness::{Remote, meta2026, raw};

/// A valid PNG of `side` x `side` black RGBA pixels, written row by row so the test never
/// holds the picture: a 16384 px square is about 1 MB as PNG and 1 GiB decoded.
#[cfg(target_os = "linux")]
fn black_square(side: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, side, side);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::High);
    let mut writer = enc.write_header().expect("header");
    let mut stream = writer.stream_writer().expect("stream");
    let row = vec![0u8; side as usize * 4];
    for _ in 0..side {
        std::io::Write::write_all(&mut stream, &row).expect("row");
    }
    stream.finish().expect("finish");
    writer.finish().expect("finish");
    out
}

/// A folder of the test's own holding `name`s as black squares of the given sides.
#[cfg(target_os = "linux")]
fn pictures(tag: &str, files: &[(&str, u32)]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("red-team-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, side) in files {
        std::fs::write(dir.join(name), black_square(*side)).unwrap();
    }
    dir
}

/// The most memory the process has held (`VmHWM`), in MiB.
#[cfg(target_os = "linux")]
fn peak_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib / 1024
}

/// Guest code that sends each file `times` times as a figure, as hostile code may (the
/// host's door, not matplotlib).
#[cfg(target_os = "linux")]
fn send_figures(files: &[&str], times: usize) -> String {
    format!(
        "import _host, base64\nfor name in {files:?}:\n    data = base64.b64encode(open(name, 'rb').read()).decode()\n    msg = ('{{\"kind\":\"image\",\"mime\":\"image/png\",\"data\":\"%s\"}}' % data).encode()\n    for _ in range({times}):\n        _host.call(msg)\n"
    )
}

#[cfg(target_os = "linux")]
async fn upload(s: &Server, id: &str, dir: &std::path::Path, name: &str) {
    let path = dir.join(name);
    s.ok(
        "upload_file",
        json!({"sandbox_id": id, "source_path": path.to_str().unwrap(), "destination_path": name}),
    )
    .await;
}

/// Item 1: six 16384 px squares and six 4800 px ones in one call. Before, every figure was
/// decoded at full size and kept until the result was shaped (+2 GiB for six squares); now
/// the squares are refused from their headers and the others decoded one at a time.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn figures_past_every_bound_cost_the_server_bounded_memory() {
    let dir = pictures("figures", &[("square.png", 16_384), ("big.png", 4800)]);
    let s = Server::start_with(&[("CODE_SANDBOX_UPLOAD_DIRS", dir.to_str().unwrap())]).await;
    let id = s.create().await;
    upload(&s, &id, &dir, "square.png").await;
    upload(&s, &id, &dir, "big.png").await;
    s.run_ok(&id, "1 + 1").await;
    let pid = s.pid.expect("the server's pid");
    let before = peak_mib(pid);

    let r = s
        .call(
            "execute_code",
            json!({"sandbox_id": id, "code": send_figures(&["big.png", "square.png"], 6)}),
        )
        .await;
    let grown = peak_mib(pid).saturating_sub(before);
    eprintln!("twelve huge figures: the server's peak grew by {grown} MiB");
    let text = common::text_of(&r);
    assert_eq!(r.is_error, Some(false), "{text}");
    let v = r.structured_content.clone().expect("structured");
    assert!(
        v["images"].as_u64().unwrap_or(0) >= 1,
        "the first figure is shown: {text}"
    );
    let saved = v["saved_files"].as_array().expect("saved_files");
    assert!(saved.len() >= 6, "the squares are kept as files: {text}");
    assert!(
        grown < 1024,
        "shaping twelve huge figures grew the server's peak memory by {grown} MiB"
    );
    // The server still answers, and the sandbox still works.
    assert_eq!(s.run_ok(&id, "2 + 2").await["result"], "4");
    s.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// Item 2: three read_file calls of crafted pictures at once leave `/healthz` answering at
/// once: pictures are decoded off the async threads, within a bound.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn reading_crafted_pictures_never_blocks_the_server() {
    let dir = pictures("read", &[("square.png", 16_384), ("big.png", 4800)]);
    let r = Remote::start(
        &["alice"],
        &[
            ("CODE_SANDBOX_UPLOAD_DIRS", dir.to_str().unwrap()),
            ("CODE_SANDBOX_HTTP_HOST_UPLOADS", "true"),
        ],
    )
    .await;
    let alice = r.client("alice").await;
    let id = alice.create().await;
    upload(&alice, &id, &dir, "square.png").await;
    upload(&alice, &id, &dir, "big.png").await;
    let pid = r.pid();
    let before = peak_mib(pid);
    let alice = std::sync::Arc::new(alice);
    let mut reads = Vec::new();
    for name in ["square.png", "big.png", "big.png", "square.png"] {
        let client = alice.clone();
        let id = id.clone();
        reads.push(tokio::spawn(async move {
            let (err, v, text) = client
                .call_json("read_file", json!({"sandbox_id": id, "file_path": name}))
                .await;
            (name, err, v, text)
        }));
    }
    let health = format!("http://{}/healthz", r.addr());
    let mut slowest = Duration::ZERO;
    while reads.iter().any(|t| !t.is_finished()) {
        let asked = std::time::Instant::now();
        let answered = crate::remote_harness::http()
            .get(&health)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .expect("/healthz answers");
        assert_eq!(answered.status(), 200);
        slowest = slowest.max(asked.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for t in reads {
        let (name, err, v, text) = t.await.unwrap();
        assert!(!err, "{name}: {text}");
        assert_eq!(v["path"], name, "{text}");
    }
    assert!(slowest < Duration::from_secs(3), "/healthz took {slowest:?}");
    let grown = peak_mib(pid).saturating_sub(before);
    eprintln!("four crafted pictures read: peak +{grown} MiB, /healthz at most {slowest:?}");
    assert!(grown < 1024, "reading four pictures grew the peak by {grown} MiB");
    r.terminate().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// A stateless call as Claude's connectors send it (a 2025-11-25 header, a 2026-07-28 body).
fn stateless_call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments, "_meta": meta2026()}})
}

/// A sandbox made by a stateless call; its id.
async fn stateless_sandbox(r: &Remote, token: &str) -> Value {
    let header = [("MCP-Protocol-Version", "2025-11-25")];
    let (status, v) = raw(
        &r.url,
        token,
        &header,
        stateless_call(1, "create_sandbox", json!({})),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    v["result"]["structuredContent"]["sandbox_id"].clone()
}

/// Item 3: SIGTERM while a stateless call runs: the call is answered with its result, and
/// after the restart the sandbox has every variable, the running call's too.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_drains_stateless_calls_and_keeps_their_variables() {
    let home = common::private_home();
    let persist = [("CODE_SANDBOX_PERSIST", "true")];
    let r = Remote::start_in(home.clone(), &["alice"], &persist).await;
    let token = r.token("alice").to_string();
    let header = [("MCP-Protocol-Version", "2025-11-25")];
    let id = stateless_sandbox(&r, &token).await;
    let (status, v) = raw(
        &r.url,
        &token,
        &header,
        stateless_call(2, "execute_code", json!({"sandbox_id": id, "code": "x = 41"})),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let slow = {
        let (url, token, id) = (r.url.clone(), token.clone(), id.clone());
        let code = "import time; time.sleep(4); y = x + 1; y";
        tokio::spawn(async move {
            raw(
                &url,
                &token,
                &[("MCP-Protocol-Version", "2025-11-25")],
                stateless_call(3, "execute_code", json!({"sandbox_id": id, "code": code})),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let status = r.terminate().await;
    assert!(status.success(), "exit status {status}");
    let (code, v) = slow.await.unwrap();
    assert_eq!(code, 200, "the running call is answered: {v}");
    assert_eq!(v["result"]["structuredContent"]["result"], "42", "{v}");

    let r = Remote::start_in(home, &["alice"], &persist).await;
    let token = r.token("alice").to_string();
    let (status, v) = raw(
        &r.url,
        &token,
        &header,
        stateless_call(4, "execute_code", json!({"sandbox_id": id, "code": "(x, y)"})),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["structuredContent"]["result"], "(41, 42)", "{v}");
    r.terminate().await;
}

/// Item 4: a stdio server (Claude Desktop on the same machine) started while the team
/// server is down neither takes over nor sees alice's kept sandbox, and the team server's
/// restart keeps her ownership: she reads her file after each restart, and a later stdio
/// server still does not list it.
#[tokio::test(flavor = "multi_thread")]
async fn a_stdio_server_on_the_same_home_never_takes_a_principals_sandbox() {
    let home = common::private_home();
    let home_s = home.to_str().unwrap().to_string();
    let persist = [("CODE_SANDBOX_PERSIST", "true")];
    let r = Remote::start_in(home.clone(), &["alice"], &persist).await;
    let alice = r.client("alice").await;
    let id = alice.create().await;
    alice
        .run_ok(&id, "open('notes.txt', 'w').write('alice only')")
        .await;
    alice.stop().await;
    assert!(r.terminate().await.success());

    let local_env = [
        ("CODE_SANDBOX_HOME", home_s.as_str()),
        ("CODE_SANDBOX_PERSIST", "true"),
    ];
    let local = Server::start_with(&local_env).await;
    let (_, listed, _) = local.call_json("get_sandbox_status", json!({})).await;
    assert!(
        !listed.to_string().contains(&id),
        "the local user sees alice's sandbox: {listed}"
    );
    let (err, _, text) = local
        .call_json("read_file", json!({"sandbox_id": id, "file_path": "notes.txt"}))
        .await;
    assert!(err && !text.contains("alice only"), "{text}");

    // The team server starts again while the stdio server runs.
    for round in 0..2 {
        let r = Remote::start_in(home.clone(), &["alice"], &persist).await;
        let alice = r.client("alice").await;
        let v = alice
            .ok("read_file", json!({"sandbox_id": id, "file_path": "notes.txt"}))
            .await;
        assert_eq!(v["content"], "alice only", "round {round}: {v}");
        alice.stop().await;
        assert!(r.terminate().await.success());
        let owners = std::fs::read_to_string(home.join("owners.json")).unwrap();
        assert!(
            owners.contains(&id) && owners.contains("alice"),
            "round {round}: {owners}"
        );
    }
    local.stop().await;
    let later = Server::start_with(&local_env).await;
    let (_, listed, _) = later.call_json("get_sandbox_status", json!({})).await;
    assert!(
        !listed.to_string().contains(&id),
        "a later stdio server lists it: {listed}"
    );
    later.stop().await;
}

/// One HTTP/1.1 POST on a new connection whose body is sent in `pieces` with `pause` between
/// them; the status and the JSON-RPC message of the answer.
async fn slow_post(addr: &str, token: &str, body: &Value, pieces: usize, pause: Duration) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = body.to_string();
    let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.expect("head");
    let step = body.len().div_ceil(pieces);
    for (k, chunk) in body.as_bytes().chunks(step).enumerate() {
        if k > 0 {
            tokio::time::sleep(pause).await;
        }
        if tcp.write_all(chunk).await.is_err() {
            return (0, Value::Null);
        }
    }
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(60), tcp.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // SSE or JSON, chunked or not: the one line that holds the message.
    let message = text
        .lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .find(|l| l.starts_with('{'))
        .unwrap_or("null");
    (status, serde_json::from_str(message).unwrap_or(Value::Null))
}

/// Item 5: with a 2 s header time (probation), a stateless call that runs 5 s on a new
/// connection is answered, and so is a body sent over 6 s; the sandbox keeps its variables.
#[tokio::test(flavor = "multi_thread")]
async fn probation_never_cuts_an_authenticated_call_or_a_slow_body() {
    let r = Remote::start(&["alice"], &[("CODE_SANDBOX_HTTP_HEADER_TIMEOUT", "2")]).await;
    let token = r.token("alice").to_string();
    let id = stateless_sandbox(&r, &token).await;
    let code = "import time; time.sleep(5); kept = 7; kept";
    let long = stateless_call(2, "execute_code", json!({"sandbox_id": id, "code": code}));
    let (status, v) = slow_post(&r.addr(), &token, &long, 1, Duration::ZERO).await;
    assert_eq!(status, 200, "a 5 s call on a new connection: {v}");
    assert_eq!(v["result"]["structuredContent"]["result"], "7", "{v}");
    let padding = "#".repeat(30_000);
    let slow = stateless_call(
        3,
        "execute_code",
        json!({"sandbox_id": id, "code": format!("{padding}\nkept * 6")}),
    );
    let (status, v) = slow_post(&r.addr(), &token, &slow, 4, Duration::from_secs(2)).await;
    assert_eq!(status, 200, "a body sent over 6 s: {v}");
    assert_eq!(v["result"]["structuredContent"]["result"], "42", "{v}");
    // An unauthenticated connection still ends with its probation.
    let mut idle = tokio::net::TcpStream::connect(r.addr()).await.unwrap();
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 16];
    let ended = tokio::time::timeout(Duration::from_secs(10), idle.read(&mut buf)).await;
    assert!(
        matches!(ended, Ok(Ok(0)) | Ok(Err(_))),
        "an idle connection stays open: {ended:?}"
    );
    r.terminate().await;
}

/// How many descriptors a process holds open.
#[cfg(target_os = "linux")]
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Item 6: 600 half-sent requests to the metrics port hold a bounded number of the server's
/// descriptors; the MCP port, a scrape and a call still answer.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_on_the_metrics_port_leaves_the_server_its_descriptors() {
    use tokio::io::AsyncWriteExt;
    let r = Remote::start(&["alice"], &[("CODE_SANDBOX_METRICS_LISTEN", "127.0.0.1:0")]).await;
    let metrics = crate::team_server::metrics_url(&r);
    let alice = r.client("alice").await;
    let id = alice.create().await;
    let before = descriptors(r.pid());
    let at = metrics
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_string();
    let mut held = Vec::new();
    for _ in 0..600 {
        let Ok(mut tcp) = tokio::net::TcpStream::connect(&at).await else {
            continue;
        };
        let _ = tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").await;
        held.push(tcp);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = descriptors(r.pid());
    assert!(
        during < before + 100,
        "600 half-sent requests took {} descriptors",
        during.saturating_sub(before)
    );
    let health = crate::remote_harness::http()
        .get(format!("http://{}/healthz", r.addr()))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .expect("/healthz answers during the flood");
    assert_eq!(health.status(), 200);
    let scrape = crate::remote_harness::http()
        .get(&metrics)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .expect("a scrape answers during the flood");
    assert_eq!(scrape.status(), 200);
    assert_eq!(alice.run_ok(&id, "6 * 7").await["result"], "42");
    drop(held);
    alice.stop().await;
    r.terminate().await;
}

/// The status a bare request to `/mcp` gets with this bearer token (or none).
async fn status_with(r: &Remote, token: Option<&str>) -> u16 {
    let resp = crate::remote_harness::post(&r.url, token, &crate::remote_harness::initialize())
        .send()
        .await
        .expect("POST /mcp");
    resp.status().as_u16()
}

/// Polls until a request with `token` gets `want` (a change is seen within a second).
async fn until_status(r: &Remote, token: Option<&str>, want: u16) -> u16 {
    let mut got = 0;
    for _ in 0..30 {
        got = status_with(r, token).await;
        if got == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    got
}

/// Items 9 and 10: `token add` never glues a line to one without its newline, `token remove`
/// keeps the file private, and a tokens file others may write is refused at start and while
/// serving (through a link too).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn the_tokens_file_stays_private_and_whole() {
    use std::os::unix::fs::PermissionsExt;
    let home = common::private_home();
    let file = home.join("tokens");
    std::fs::write(&file, format!("first {}", "ab".repeat(32))).unwrap();
    let mut perms = std::fs::metadata(&file).unwrap().permissions();
    perms.set_mode(0o600);
    std::fs::set_permissions(&file, perms).unwrap();
    let alice = crate::remote_harness::add_token(&file, "alice");
    let bob = crate::remote_harness::add_token(&file, "bob");
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 3, "one line each: {text}");
    crate::remote_harness::add_token(&file, "carol");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .args(["token", "remove", "carol"])
        .env("CODE_SANDBOX_TOKENS", &file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "token remove rewrote the file {mode:o}");

    let link = home.join("tokens-link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let envs = [("CODE_SANDBOX_TOKENS", link.to_str().unwrap())];
    let r = Remote::start_in(home.clone(), &[], &envs).await;
    assert_eq!(status_with(&r, Some(&alice)).await, 200);
    assert_eq!(status_with(&r, Some(&bob)).await, 200);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(
        until_status(&r, Some(&alice), 401).await,
        401,
        "a 0666 file is served"
    );
    assert!(r.log_text().contains("chmod 600"), "{}", r.log_text());
    r.terminate().await;

    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
            .env("CODE_SANDBOX_HOME", &home)
            .env("CODE_SANDBOX_TRANSPORT", "http")
            .env("CODE_SANDBOX_LISTEN", "127.0.0.1:0")
            .env("CODE_SANDBOX_TOKENS", &link)
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("the server stopped at once")
    .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started with a 0666 tokens file: {said}");
    assert!(said.contains("chmod 600"), "{said}");
}

/// Item 11: a server started token-less on loopback stops serving without a token the moment
/// `token add` makes the home's tokens file, and serves the new token.
#[tokio::test(flavor = "multi_thread")]
async fn a_tokenless_server_obeys_a_tokens_file_made_while_it_runs() {
    let r = Remote::start(&[], &[]).await;
    assert_eq!(status_with(&r, None).await, 200, "token-less on loopback");
    let token = crate::remote_harness::add_token(&r.home.join("tokens"), "alice");
    assert_eq!(status_with(&r, None).await, 401, "served without a token");
    assert_eq!(status_with(&r, Some(&token)).await, 200);
    std::fs::remove_file(r.home.join("tokens")).unwrap();
    assert_eq!(
        status_with(&r, None).await,
        200,
        "the file gone, loopback serves again"
    );
    r.terminate().await;
}

/// Item 12: a revocation copied over with the same size and modification time (as `cp -p`,
/// `rsync -t` and `tar x` leave it) is obeyed.
#[tokio::test(flavor = "multi_thread")]
async fn a_revocation_that_keeps_size_and_time_is_obeyed() {
    let r = Remote::start(&["alice", "bobby"], &[]).await;
    let file = r.home.join("tokens");
    let old = r.token("bobby").to_string();
    assert_eq!(status_with(&r, Some(&old)).await, 200);
    let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    // bobby's line replaced by one for a new token, of the same length.
    let scratch = r.home.join("scratch-tokens");
    let new = crate::remote_harness::add_token(&scratch, "bobby");
    let new_line = std::fs::read_to_string(&scratch).unwrap();
    let replaced: String = text
        .lines()
        .map(|l| {
            if l.starts_with("bobby ") {
                new_line.trim_end().to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    assert_eq!(replaced.len(), text.len());
    let copy = r.home.join("tokens.copy");
    std::fs::write(&copy, &replaced).unwrap();
    let f = std::fs::File::options().write(true).open(&copy).unwrap();
    f.set_modified(modified).unwrap();
    drop(f);
    std::fs::rename(&copy, &file).unwrap();
    assert_eq!(
        until_status(&r, Some(&old), 401).await,
        401,
        "the revoked token works"
    );
    assert_eq!(status_with(&r, Some(&new)).await, 200, "the new token is refused");
    assert_eq!(status_with(&r, Some(r.token("alice"))).await, 200);
    r.terminate().await;
}

/// Item 7 (directly; `cargo xtask scale-test` does the same through haproxy): a routing header
/// the body does not back is refused in every revision, before any tool runs.
#[tokio::test(flavor = "multi_thread")]
async fn routing_headers_the_body_does_not_back_are_refused() {
    let r = Remote::start(&["alice"], &[("CODE_SANDBOX_REPLICA", "r1")]).await;
    let token = r.token("alice").to_string();
    let forged = "sbx-r2-00000000000000000000000000000000";
    let v1 = [
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Mcp-Param-Sandbox-Id", forged),
    ];
    let (status, v) = raw(
        &r.url,
        &token,
        &v1,
        stateless_call(1, "create_sandbox", json!({})),
    )
    .await;
    assert_eq!(status, 400, "create_sandbox with a sandbox header: {v}");
    assert_eq!(v["error"]["code"], -32020, "{v}");
    let (status, v) = raw(&r.url, &token, &v1, crate::remote_harness::initialize()).await;
    assert_eq!(status, 400, "initialize with a sandbox header: {v}");
    let sid = crate::remote_harness::raw_session(&r.url, &token).await;
    let session = [("mcp-session-id", sid.as_str()), ("Mcp-Param-Sandbox-Id", forged)];
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "create_sandbox", "arguments": {}}});
    let (status, v) = raw(&r.url, &token, &session, call).await;
    assert_eq!(
        status, 400,
        "a 2025-11-25 session call with a sandbox header: {v}"
    );
    let (_, listed) = raw(
        &r.url,
        &token,
        &[("mcp-session-id", sid.as_str())],
        json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
               "params": {"name": "get_sandbox_status", "arguments": {}}}),
    )
    .await;
    assert_eq!(
        listed["result"]["structuredContent"]["sandboxes"],
        json!([]),
        "a refused call made a sandbox: {listed}"
    );
    r.terminate().await;
}

/// Item 14: eight 100 MiB uploads at once (four principals, two each, a session and a
/// connection each, as separate clients send them) grow the server's peak memory by less than
/// 1.5 GiB: bodies in flight are bounded in all and per principal, and each is read once.
/// Every upload lands whole.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn eight_large_uploads_at_once_cost_bounded_memory() {
    use base64::Engine as _;
    let names = ["ann", "ben", "cat", "dan"];
    let r = Remote::start(&names, &[]).await;
    let size = 100usize << 20;
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let crc = crc32(&data);
    let b64 = base64::engine::general_purpose::STANDARD.encode(&data);
    drop(data);
    let mut targets = Vec::new();
    for name in names {
        let token = r.token(name).to_string();
        for k in 0..2 {
            let sid = crate::remote_harness::raw_session(&r.url, &token).await;
            let session = [("mcp-session-id", sid.as_str())];
            let create = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                "params": {"name": "create_sandbox", "arguments": {}}});
            let (status, v) = raw(&r.url, &token, &session, create).await;
            assert_eq!(status, 200, "{v}");
            let id = v["result"]["structuredContent"]["sandbox_id"]
                .as_str()
                .unwrap()
                .to_string();
            let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "upload_file",
                "arguments": {"sandbox_id": id, "content_base64": b64, "destination_path": format!("big-{k}.bin")}}});
            targets.push((token.clone(), sid, id, body.to_string()));
        }
    }
    drop(b64);
    let before = peak_mib(r.pid());
    let mut uploads = Vec::new();
    for (token, sid, _, body) in &targets {
        let post = reqwest::Client::new()
            .post(&r.url)
            .bearer_auth(token)
            .header("mcp-session-id", sid)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.clone());
        uploads.push(tokio::spawn(async move {
            let resp = post.send().await.expect("the upload is sent");
            (resp.status().as_u16(), resp.text().await.unwrap_or_default())
        }));
    }
    for u in uploads {
        let (status, text) = u.await.unwrap();
        assert_eq!(status, 200, "{text}");
        assert!(
            text.contains("\"isError\":false"),
            "{}",
            &text[..text.len().min(400)]
        );
    }
    let grown = peak_mib(r.pid()).saturating_sub(before);
    eprintln!("eight 100 MiB uploads: the server's peak grew by {grown} MiB");
    assert!(grown < 1536, "eight 100 MiB uploads grew the peak by {grown} MiB");
    let (token, sid, id, _) = &targets[7];
    let check = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "execute_code",
        "arguments": {"sandbox_id": id, "code": "import os, zlib; p = 'big-1.bin'; (os.path.getsize(p), zlib.crc32(open(p, 'rb').read()))"}}});
    let (_, v) = raw(&r.url, token, &[("mcp-session-id", sid.as_str())], check).await;
    assert_eq!(
        v["result"]["structuredContent"]["result"],
        format!("({size}, {crc})"),
        "{v}"
    );
    r.terminate().await;
}

/// CRC-32 (IEEE), as Python's zlib.crc32 computes it.
#[cfg(target_os = "linux")]
fn crc32(data: &[u8]) -> u32 {
    let mut z = flate2::Crc::new();
    z.update(data);
    z.sum()
}

/// Items 8 and 15, with the real OpenID provider: a sign-in whose name holds `"`, `}` and `\`
/// is counted under its own escaped label and every scrape still parses (by the official
/// Python client); a sign-in named like a static token's principal is refused, not that
/// principal.
#[tokio::test(flavor = "multi_thread")]
async fn oauth_names_neither_forge_metrics_nor_take_a_static_principal() {
    common::ensure_runtime();
    let idp = crate::oauth::Idp::start().await;
    let envs = [
        ("CODE_SANDBOX_METRICS_LISTEN", "127.0.0.1:0"),
        ("CODE_SANDBOX_METRICS_PRINCIPALS", "true"),
    ];
    let remote = crate::oauth::server(&idp, &["agent-a"], "", &envs).await;
    let url = remote.url.clone();
    let named = |sub: &str| json!({"sub": sub, "aud": url, "scope": "mcp"});
    let twin = idp.mint(named("agent-a"), "RS256", "idp").await;
    let (status, _, body) = crate::oauth::attempt(&url, Some(&twin)).await;
    assert_eq!(status, 403, "a sign-in took the static principal agent-a: {body}");
    assert!(
        body.contains("agent-a") && body.contains("static token"),
        "{body}"
    );
    // The static token itself still works.
    let (status, _, body) = crate::oauth::attempt(&url, Some(remote.token("agent-a"))).await;
    assert_eq!(status, 200, "{body}");

    let forger = r#"x"} 1 mcp_code_sandbox_calls_total{tool="forged\"#;
    let token = idp.mint(named(forger), "RS256", "idp").await;
    let client = remote.client_with_token(&token).await;
    client.create().await;
    let (text, m) = crate::team_server::scrape(&crate::team_server::metrics_url(&remote)).await;
    assert!(
        crate::team_server::sample(&m, "mcp_code_sandbox_calls_total", &[("tool", "forged")]).is_none(),
        "a forged sample: {text}"
    );
    let escaped = "x%22%7D%201%20mcp_code_sandbox_calls_total%7Btool%3D%22forged%5C";
    let counted = crate::team_server::sample(
        &m,
        "mcp_code_sandbox_calls_total",
        &[("tool", "create_sandbox"), ("principal", escaped)],
    );
    assert_eq!(counted, Some(1.0), "{text}");
    remote.terminate().await;
}

/// Item 13: with 16 connections, four principals each holding their share of proven
/// keep-alive connections leave room for a fifth principal and for `/healthz`; and a churn of
/// unauthenticated connections from one address (127.0.0.2) never costs another address's
/// new connections their call.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn connection_shares_keep_a_reserve_and_churn_costs_only_the_churner() {
    let names = ["pa", "pb", "pc", "pd", "pe"];
    let envs = [("CODE_SANDBOX_HTTP_MAX_CONNECTIONS", "16")];
    let r = Remote::start(&names, &envs).await;
    let fresh = || {
        reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .expect("a client")
    };
    let mut held = Vec::new();
    for name in &names[..4] {
        for _ in 0..4 {
            let client = fresh();
            let resp = client
                .post(&r.url)
                .bearer_auth(r.token(name))
                .header("accept", "application/json, text/event-stream")
                .json(&crate::remote_harness::initialize())
                .send()
                .await
                .expect("initialize");
            assert_eq!(resp.status(), 200);
            let _ = resp.bytes().await;
            held.push(client);
        }
    }
    assert_eq!(
        status_with(&r, Some(r.token("pe"))).await,
        200,
        "a fifth principal"
    );
    let health = fresh()
        .get(format!("http://{}/healthz", r.addr()))
        .send()
        .await
        .expect("/healthz while every share is held");
    assert_eq!(health.status(), 200);
    drop(held);

    let addr: std::net::SocketAddr = r.addr().parse().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let mut open = std::collections::VecDeque::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let socket = tokio::net::TcpSocket::new_v4().unwrap();
                socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
                if let Ok(mut tcp) = socket.connect(addr).await {
                    let _ = tcp.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\n").await;
                    open.push_back(tcp);
                }
                if open.len() > 40 {
                    open.pop_front();
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut answered = 0;
    for _ in 0..20 {
        let resp = fresh()
            .post(&r.url)
            .bearer_auth(r.token("pa"))
            .header("accept", "application/json, text/event-stream")
            .json(&crate::remote_harness::initialize())
            .send()
            .await;
        if let Ok(resp) = resp
            && resp.status() == 200
            && resp.bytes().await.is_ok()
        {
            answered += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = churn.await;
    assert_eq!(answered, 20, "calls from another address lost to the churn");
    r.terminate().await;
}

/// haproxy on `port` in front of `replica`, from the project's template (PROXY headers
/// included); its process (killed on drop) and its `/mcp` URL.
#[cfg(target_os = "linux")]
async fn proxy_in_front(replica: &Remote, port: u16) -> (tokio::process::Child, String) {
    let config = xtask::deploy::render(
        &common::repo_root(),
        xtask::deploy::Site::Loopback,
        &format!("127.0.0.1:{port}"),
        "sub",
        &[xtask::deploy::Replica {
            name: "r0".into(),
            address: replica.addr(),
        }],
    )
    .expect("the template renders");
    let file = replica.home.join("haproxy.cfg");
    std::fs::write(&file, config).unwrap();
    let haproxy = xtask::debian::tool_for_test("the proxy test", "haproxy", "haproxy");
    let child = tokio::process::Command::new(haproxy)
        .arg("-db")
        .arg("-f")
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("haproxy (Debian's haproxy package) starts");
    // haproxy sends calls only once a check found the replica ready (the warm image can take
    // a while on a busy machine): wait until `/readyz` through the proxy reaches the replica.
    let through = format!("http://127.0.0.1:{port}/readyz");
    let http = crate::remote_harness::http();
    for _ in 0..600 {
        if let Ok(resp) = http.get(&through).send().await
            && resp.status() == 200
        {
            return (child, format!("http://127.0.0.1:{port}/mcp"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("haproxy never found the replica ready in 60 s");
}

/// A client whose connections come from `source` (a loopback address of its own).
#[cfg(target_os = "linux")]
fn client_from(source: &str) -> reqwest::Client {
    crate::remote_harness::http();
    reqwest::Client::builder()
        .local_address(source.parse::<std::net::IpAddr>().ok())
        .build()
        .expect("a client")
}

/// Item 16, through haproxy: the replica counts and logs the client behind the proxy (its
/// PROXY header), not the proxy; a client that is not a listed proxy cannot claim an address
/// with a header of its own.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn behind_the_proxy_each_client_is_its_own_address() {
    let port = common::free_port();
    let r = Remote::start(
        &["alice"],
        &[
            ("CODE_SANDBOX_TRUSTED_PROXIES", "127.0.0.1"),
            ("CODE_SANDBOX_ALLOWED_HOSTS", &format!("127.0.0.1:{port}")),
        ],
    )
    .await;
    let (_haproxy, proxied) = proxy_in_front(&r, port).await;
    let token = r.token("alice").to_string();
    let call = |id: u64| stateless_call(id, "create_run_close", json!({"code": "6 * 7"}));
    let header = [("MCP-Protocol-Version", "2025-11-25")];
    for (source, url) in [("127.0.0.2", proxied.as_str()), ("127.0.0.3", r.url.as_str())] {
        let resp = client_from(source)
            .post(url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header(header[0].0, header[0].1)
            .body(call(1).to_string())
            .send()
            .await
            .expect("a call");
        assert_eq!(
            resp.status(),
            200,
            "{source} via {url}: {}",
            resp.text().await.unwrap_or_default()
        );
        let _ = resp.text().await;
    }
    let log = r.log_text();
    assert!(
        log.contains("client=127.0.0.2"),
        "the proxied call was not logged as 127.0.0.2: {log}"
    );
    assert!(log.contains("client=127.0.0.3"), "the direct call: {log}");
    // A PROXY header from a peer that is not listed is junk, never an address.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.4:0".parse().unwrap()).unwrap();
    let mut tcp = socket.connect(r.addr().parse().unwrap()).await.unwrap();
    tcp.write_all(b"PROXY TCP4 192.0.2.66 10.0.0.1 5000 8765\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(!answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        !r.log_text().contains("192.0.2.66"),
        "an unlisted peer claimed an address"
    );
    r.terminate().await;
}
