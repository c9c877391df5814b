//! The e2b backend against a local fake of E2B's HTTP API (E2B itself is not reachable here).
//! The fake speaks the documented protocol: JSON control plane with X-API-KEY, NDJSON
//! execution stream, envd's file API and Connect-JSON filesystem RPCs, and it checks the
//! headers the SDKs send, recording every violation.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const KEY: &str = "e2b_0123456789abcdef";
const PNG_1X1: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

#[derive(Default)]
struct Fake {
    sandboxes: HashMap<String, String>,
    paused: std::collections::HashSet<String>,
    files: HashMap<String, Vec<u8>>,
    violations: Vec<String>,
    seen: Vec<String>,
    next: u32,
}

type Shared = Arc<Mutex<Fake>>;

struct Req {
    method: String,
    path: String,
    query: HashMap<String, String>,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

async fn read_req(r: &mut BufReader<TcpStream>) -> Option<Req> {
    let mut line = String::new();
    if r.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).await.ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    let mut body = Vec::new();
    if let Some(n) = headers
        .get("content-length")
        .and_then(|n| n.parse::<usize>().ok())
    {
        body.resize(n, 0);
        r.read_exact(&mut body).await.ok()?;
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).await.ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    }
    let (path, q) = target.split_once('?').unwrap_or((&target, ""));
    let query = q
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), urldecode(v)))
        .collect();
    Some(Req {
        method,
        path: path.to_string(),
        query,
        headers,
        body,
    })
}

fn urldecode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap_or(b'?'));
            i += 3;
        } else {
            out.push(if b[i] == b'+' { b' ' } else { b[i] });
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn respond(w: &mut TcpStream, status: u16, ctype: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = w.write_all(head.as_bytes()).await;
    let _ = w.write_all(body).await;
}

async fn json_resp(w: &mut TcpStream, status: u16, v: Value) {
    respond(w, status, "application/json", v.to_string().as_bytes()).await;
}

fn ndjson(lines: &[Value]) -> Vec<u8> {
    lines
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .into_bytes()
}

/// The multipart part named `file`.
fn multipart_file(req: &Req) -> Option<Vec<u8>> {
    let ct = req.headers.get("content-type")?;
    let boundary = ct.split("boundary=").nth(1)?.trim_matches('"');
    let delim = format!("--{boundary}");
    let body = &req.body;
    let text = String::from_utf8_lossy(body);
    let start = text.find("name=\"file\"")?;
    let data_start = text[start..].find("\r\n\r\n")? + start + 4;
    let end = text[data_start..].find(&format!("\r\n{delim}"))? + data_start;
    Some(body[data_start..end].to_vec())
}

async fn handle(stream: TcpStream, fake: Shared) {
    let mut r = BufReader::new(stream);
    let Some(req) = read_req(&mut r).await else { return };
    let mut w = r.into_inner();
    let port = req.headers.get("e2b-sandbox-port").cloned();
    fake.lock()
        .unwrap()
        .seen
        .push(format!("{} {} port={:?}", req.method, req.path, port));
    let Some(port) = port else {
        return control(&mut w, &req, &fake).await;
    };
    let id = req.headers.get("e2b-sandbox-id").cloned().unwrap_or_default();
    let token = fake.lock().unwrap().sandboxes.get(&id).cloned();
    let Some(token) = token else {
        return json_resp(&mut w, 502, json!({"code": 502, "message": "sandbox not found"})).await;
    };
    if req.headers.get("x-access-token") != Some(&token) {
        fake.lock()
            .unwrap()
            .violations
            .push(format!("{} without the access token", req.path));
        return json_resp(
            &mut w,
            401,
            json!({"code": 401, "message": "missing access token"}),
        )
        .await;
    }
    match (port.as_str(), req.method.as_str(), req.path.as_str()) {
        ("49999", "POST", "/execute") => execute(&mut w, &req, &fake).await,
        ("49983", "GET", "/files") | ("49983", "POST", "/files") => {
            if req.query.get("username").map(String::as_str) != Some("user") {
                fake.lock()
                    .unwrap()
                    .violations
                    .push("files without username=user".into());
            }
            let path = req.query.get("path").cloned().unwrap_or_default();
            if req.method == "GET" {
                let got = fake.lock().unwrap().files.get(&path).cloned();
                match got {
                    Some(b) => respond(&mut w, 200, "application/octet-stream", &b).await,
                    None => json_resp(&mut w, 404, json!({"message": "file not found", "code": 404})).await,
                }
            } else {
                let Some(bytes) = multipart_file(&req) else {
                    fake.lock()
                        .unwrap()
                        .violations
                        .push("upload without a multipart part named file".into());
                    return json_resp(&mut w, 400, json!({"message": "no file", "code": 400})).await;
                };
                fake.lock().unwrap().files.insert(path.clone(), bytes);
                let name = path.rsplit('/').next().unwrap_or("").to_string();
                json_resp(&mut w, 200, json!([{"path": path, "name": name, "type": "file"}])).await
            }
        }
        ("49983", "POST", "/filesystem.Filesystem/ListDir") => {
            let entries = list_dir(&req, &fake);
            json_resp(&mut w, 200, json!({"entries": entries})).await
        }
        _ => {
            json_resp(
                &mut w,
                404,
                json!({"code": "not_found", "message": "no such route"}),
            )
            .await
        }
    }
}

fn list_dir(req: &Req, fake: &Shared) -> Vec<Value> {
    let mut f = fake.lock().unwrap();
    if req.headers.get("connect-protocol-version").map(String::as_str) != Some("1") {
        f.violations
            .push("ListDir without Connect-Protocol-Version: 1".into());
    }
    if req.headers.get("authorization").map(String::as_str) != Some("Basic dXNlcjo=") {
        f.violations.push("ListDir without Basic user auth".into());
    }
    let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
    let dir = body["path"]
        .as_str()
        .unwrap_or("")
        .trim_end_matches('/')
        .to_string();
    f.files
        .iter()
        .filter_map(|(p, b)| {
            let rest = p.strip_prefix(&format!("{dir}/"))?;
            (!rest.contains('/')).then(|| {
                json!({"name": rest, "path": p, "type": "FILE_TYPE_FILE", "size": b.len().to_string(),
                       "mode": 420, "permissions": "-rw-r--r--", "owner": "user", "group": "user",
                       "modifiedTime": "2026-12-02T00:00:00Z"})
            })
        })
        .collect()
}

fn new_sandbox(fake: &Shared, body: &Value) -> (String, String) {
    let mut f = fake.lock().unwrap();
    if body["templateID"] != "code-interpreter-v1" {
        f.violations
            .push(format!("created with template {}", body["templateID"]));
    }
    f.next += 1;
    let id = format!("fake{}", f.next);
    let token = format!("tok-{id}");
    f.sandboxes.insert(id.clone(), token.clone());
    (id, token)
}

async fn control(w: &mut TcpStream, req: &Req, fake: &Shared) {
    if req.headers.get("x-api-key").map(String::as_str) != Some(KEY) {
        return json_resp(w, 401, json!({"code": 401, "message": "Invalid API key"})).await;
    }
    let parts: Vec<&str> = req.path.trim_start_matches('/').split('/').collect();
    match (req.method.as_str(), parts.as_slice()) {
        ("POST", ["sandboxes"]) => {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
            let (id, token) = new_sandbox(fake, &body);
            json_resp(
                w,
                201,
                json!({"templateID": "code-interpreter-v1", "sandboxID": id, "clientID": "c1",
                                     "envdVersion": "0.5.7", "envdAccessToken": token, "domain": null}),
            )
            .await
        }
        ("POST", ["sandboxes", id, "pause"]) => {
            let status = {
                let mut f = fake.lock().unwrap();
                match (f.sandboxes.contains_key(*id), f.paused.contains(*id)) {
                    (false, _) => 404,
                    (true, true) => 409,
                    (true, false) => {
                        f.paused.insert(id.to_string());
                        204
                    }
                }
            };
            respond(w, status, "application/json", b"").await
        }
        ("POST", ["sandboxes", id, "connect"]) => {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
            let found = {
                let mut f = fake.lock().unwrap();
                if !body["timeout"].is_u64() {
                    f.violations.push(format!("connect without a timeout: {body}"));
                }
                let token = f.sandboxes.get(*id).cloned();
                token.map(|t| (t, if f.paused.remove(*id) { 201 } else { 200 }))
            };
            let Some((token, status)) = found else {
                return json_resp(w, 404, json!({"code": 404, "message": "not found"})).await;
            };
            json_resp(
                w,
                status,
                json!({"templateID": "code-interpreter-v1", "sandboxID": id, "clientID": "c1",
                       "envdVersion": "0.5.7", "envdAccessToken": token, "domain": null}),
            )
            .await
        }
        ("GET", ["sandboxes", id]) => {
            let (known, paused) = {
                let f = fake.lock().unwrap();
                (f.sandboxes.contains_key(*id), f.paused.contains(*id))
            };
            if known {
                json_resp(
                    w,
                    200,
                    json!({"sandboxID": id, "templateID": "code-interpreter-v1", "state": if paused { "paused" } else { "running" },
                                         "startedAt": "2026-12-02T00:00:00Z", "endAt": "2026-12-02T01:00:00Z",
                                         "cpuCount": 2, "memoryMB": 1024}),
                )
                .await
            } else {
                json_resp(w, 404, json!({"code": 404, "message": "not found"})).await
            }
        }
        ("DELETE", ["sandboxes", id]) => {
            let gone = fake.lock().unwrap().sandboxes.remove(*id).is_some();
            respond(w, if gone { 204 } else { 404 }, "application/json", b"").await
        }
        ("POST", ["sandboxes", id, "timeout"]) => {
            let known = fake.lock().unwrap().sandboxes.contains_key(*id);
            respond(w, if known { 204 } else { 404 }, "application/json", b"").await
        }
        _ => json_resp(w, 404, json!({"code": 404, "message": "no such route"})).await,
    }
}

async fn execute(w: &mut TcpStream, req: &Req, _fake: &Shared) {
    let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
    let code = body["code"].as_str().unwrap_or("").to_string();
    let count = json!({"type": "number_of_executions", "execution_count": 1});
    let end = json!({"type": "end_of_execution"});
    let lines = match code.as_str() {
        "print('hello')" => vec![
            count,
            json!({"type": "stdout", "text": "hello\n", "timestamp": 1}),
            end,
        ],
        "6*7" => vec![
            count,
            json!({"type": "keepalive"}),
            json!({"type": "result", "is_main_result": true, "text": "42"}),
            end,
        ],
        "plot()" => vec![
            count,
            json!({"type": "result", "is_main_result": false, "png": PNG_1X1, "text": "<Figure>"}),
            end,
        ],
        "1/0" => vec![
            count,
            json!({"type": "error", "name": "ZeroDivisionError", "value": "division by zero",
                                    "traceback": "Traceback...\nZeroDivisionError: division by zero"}),
            end,
        ],
        "cut()" => {
            let b = ndjson(&[count, json!({"type": "stdout", "text": "partial\n"})]);
            respond(w, 200, "application/x-ndjson", &b).await;
            return;
        }
        "ticker()" => {
            let _ = w
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n",
                )
                .await;
            let _ = w.write_all(&ndjson(&[count])).await;
            for i in 0..5 {
                let line = json!({"type": "stdout", "text": format!("tick {i}\n")});
                if w.write_all(&ndjson(&[line])).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            let _ = w
                .write_all(&ndjson(&[
                    json!({"type": "result", "is_main_result": true, "text": "'ticked'"}),
                    end,
                ]))
                .await;
            return;
        }
        "slow()" => {
            let _ = w
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n",
                )
                .await;
            for _ in 0..100 {
                if w.write_all(b"{\"type\":\"keepalive\"}\n").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            return;
        }
        c if c.starts_with("%pip install") && c.contains("tabulate") => vec![
            count,
            json!({"type": "stdout", "text": "Collecting tabulate\nSuccessfully installed tabulate-0.9.0\n"}),
            end,
        ],
        _ => vec![
            count,
            json!({"type": "stdout", "text": format!("ran {} bytes\n", code.len())}),
            end,
        ],
    };
    respond(w, 200, "application/x-ndjson", &ndjson(&lines)).await;
}

async fn start_fake() -> (String, Shared) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let fake: Shared = Arc::default();
    let f = fake.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(handle(s, f.clone()));
        }
    });
    (url, fake)
}

async fn server(url: &str, key: &str) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    server_in(url, key, &std::env::temp_dir().join("mcs-e2b-home"), false).await
}

async fn server_in(
    url: &str,
    key: &str,
    home: &std::path::Path,
    persist: bool,
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    server_with(url, key, home, persist, &[]).await
}

async fn server_with(
    url: &str,
    key: &str,
    home: &std::path::Path,
    persist: bool,
    extra: &[(&str, &str)],
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"));
    cmd.env("INTERPRETER_TYPE", "e2b")
        .env("E2B_API_KEY", key)
        .env("E2B_API_URL", url)
        .env("E2B_SANDBOX_URL", url)
        .env("CODE_SANDBOX_HOME", home)
        .env("CODE_SANDBOX_PERSIST", if persist { "true" } else { "false" })
        .env("RUST_LOG", "warn");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

async fn call(
    c: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    args: Value,
) -> (bool, Value, String) {
    let Value::Object(o) = args else { unreachable!() };
    let r = tokio::time::timeout(
        Duration::from_secs(60),
        c.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(o)),
    )
    .await
    .unwrap()
    .unwrap();
    (
        r.is_error.unwrap_or(false),
        r.structured_content.clone().unwrap_or_default(),
        common::text_of(&r),
    )
}

#[tokio::test]
async fn the_ten_tools_work_against_the_e2b_protocol() {
    let (url, fake) = start_fake().await;
    let c = server(&url, KEY).await;
    let (err, v, text) = call(&c, "create_sandbox", json!({})).await;
    assert!(!err, "{text}");
    assert_eq!(v["backend"], "e2b");
    let id = v["sandbox_id"].as_str().unwrap().to_string();

    let (err, v, _) = call(
        &c,
        "execute_code",
        json!({"sandbox_id": id, "code": "print('hello')"}),
    )
    .await;
    assert!(!err);
    assert_eq!(v["stdout"], "hello\n");

    for (tool, args) in [
        ("fork_sandbox", json!({"sandbox_id": id})),
        ("checkpoint_sandbox", json!({"sandbox_id": id})),
        ("restore_sandbox", json!({"sandbox_id": id, "checkpoint": "x"})),
    ] {
        let (err, v, text) = call(&c, tool, args).await;
        assert!(err && v.is_null(), "{tool}: {text}");
        assert!(
            text.contains("not available on the e2b backend"),
            "{tool}: {text}"
        );
    }
    let (_, v, _) = call(&c, "execute_code", json!({"code": "6*7"})).await;
    assert_eq!(
        v["result"], "42",
        "keepalives are ignored; the main result is the value"
    );
    let r = {
        let Value::Object(o) = json!({"sandbox_id": id, "code": "plot()"}) else {
            unreachable!()
        };
        c.call_tool(CallToolRequestParams::new("execute_code").with_arguments(o))
            .await
            .unwrap()
    };
    let img = r
        .content
        .iter()
        .find_map(|c| c.as_image())
        .expect("the displayed PNG is image content");
    assert_eq!(img.mime_type, "image/png");
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(&img.data)
            .unwrap()[..4],
        *b"\x89PNG"
    );
    let (err, v, _) = call(&c, "execute_code", json!({"sandbox_id": id, "code": "1/0"})).await;
    assert!(err);
    assert_eq!(v["error"]["name"], "ZeroDivisionError");

    let (err, _, text) = call(
        &c,
        "write_file",
        json!({"sandbox_id": id, "file_path": "data/a.csv", "content": "x,y\n1,2\n"}),
    )
    .await;
    assert!(!err, "{text}");
    let (err, v, _) = call(
        &c,
        "read_file",
        json!({"sandbox_id": id, "file_path": "/home/user/data/a.csv"}),
    )
    .await;
    assert!(!err);
    assert_eq!(v["content"], "x,y\n1,2\n");
    let (_, v, _) = call(&c, "list_files", json!({"sandbox_id": id, "path": "data"})).await;
    assert_eq!(
        v["entries"],
        json!([{"name": "a.csv", "path": "data/a.csv", "type": "file", "size": 8}])
    );
    let (err, _, text) = call(
        &c,
        "read_file",
        json!({"sandbox_id": id, "file_path": "nope.txt"}),
    )
    .await;
    assert!(err);
    assert!(text.contains("does not exist"), "{text}");
    let (err, v, text) = call(
        &c,
        "install_package",
        json!({"sandbox_id": id, "package_name": "tabulate"}),
    )
    .await;
    assert!(!err, "{text}");
    assert_eq!(v["installed"], json!([{"name": "tabulate", "version": "0.9.0"}]));
    let (err, _, _) = call(
        &c,
        "install_package",
        json!({"sandbox_id": id, "package_name": "x; rm -rf /"}),
    )
    .await;
    assert!(err, "only plain names reach the remote shell");
    let (err, v, _) = call(&c, "get_sandbox_status", json!({"sandbox_id": id})).await;
    assert!(!err);
    assert_eq!(v["state"], "running");

    let (err, v, _) = call(&c, "execute_code", json!({"sandbox_id": id, "code": "cut()"})).await;
    assert!(err);
    assert!(
        v["error"]["value"].as_str().unwrap().contains("end_of_execution"),
        "{v}"
    );
    assert_eq!(v["stdout"], "partial\n");
    let (err, v, _) = call(
        &c,
        "execute_code",
        json!({"sandbox_id": id, "code": "slow()", "timeout_seconds": 1}),
    )
    .await;
    assert!(err);
    assert_eq!(v["limit"], "timeout");

    let (err, _, _) = call(&c, "close_sandbox", json!({"sandbox_id": id})).await;
    assert!(!err);
    let (err, _, text) = call(&c, "execute_code", json!({"sandbox_id": id, "code": "1"})).await;
    assert!(err);
    assert!(text.contains(&id));

    let (err, v, _) = call(&c, "create_run_close", json!({"code": "6*7"})).await;
    assert!(!err);
    assert_eq!(v["result"], "42");
    {
        let f = fake.lock().unwrap();
        assert!(f.violations.is_empty(), "protocol violations: {:?}", f.violations);
        assert!(
            f.sandboxes.is_empty(),
            "every sandbox was killed: {:?}",
            f.sandboxes
        );
        assert!(
            f.seen.iter().any(|s| s.contains("/timeout")),
            "use extends the sandbox's timeout"
        );
    }
    let _ = c.cancel().await;
}

#[tokio::test]
async fn errors_are_clear_and_the_key_never_leaks() {
    let (url, fake) = start_fake().await;
    let wrong = "e2b_ffffffffffffffff";
    let c = server(&url, wrong).await;
    let (err, v, text) = call(&c, "create_sandbox", json!({})).await;
    assert!(err);
    assert!(text.contains("401") && text.contains("E2B_API_KEY"), "{text}");
    assert!(
        !text.contains(wrong) && !v.to_string().contains(wrong),
        "the key leaked: {text}"
    );
    let _ = c.cancel().await;

    let c = server(&url, KEY).await;
    let (_, v, _) = call(&c, "create_sandbox", json!({})).await;
    let id = v["sandbox_id"].as_str().unwrap().to_string();
    // The sandbox disappears remotely (timed out): the next call says so.
    fake.lock().unwrap().sandboxes.clear();
    let (err, _, text) = call(&c, "execute_code", json!({"sandbox_id": id, "code": "1"})).await;
    assert!(err);
    assert!(text.contains("gone or timed out"), "{text}");
    let _ = c.cancel().await;

    // Nothing listens: unreachable, said plainly.
    let dead = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_url = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let c = server(&dead_url, KEY).await;
    let (err, _, text) = call(&c, "create_sandbox", json!({})).await;
    assert!(err);
    assert!(text.contains("could not be reached"), "{text}");
    let _ = c.cancel().await;
}

#[tokio::test]
async fn sandboxes_are_paused_at_shutdown_and_connected_after_a_restart() {
    let (url, fake) = start_fake().await;
    let home = std::env::temp_dir().join(format!("mcs-e2b-keep-{}", uuid::Uuid::new_v4().simple()));
    let c = server_in(&url, KEY, &home, true).await;
    let (err, v, text) = call(&c, "create_sandbox", json!({})).await;
    assert!(!err, "{text}");
    let id = v["sandbox_id"].as_str().unwrap().to_string();
    let (err, _, text) = call(
        &c,
        "execute_code",
        json!({"sandbox_id": id, "code": "print('hello')"}),
    )
    .await;
    assert!(!err, "{text}");
    let _ = c.cancel().await;
    // The server pauses on its way out; wait for it.
    for _ in 0..100 {
        if fake.lock().unwrap().paused.contains(&id) && home.join("e2b/paused.json").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    {
        let f = fake.lock().unwrap();
        assert!(f.paused.contains(&id), "paused, not killed");
        assert!(f.sandboxes.contains_key(&id));
    }

    let c = server_in(&url, KEY, &home, true).await;
    let (err, v, text) = call(&c, "get_sandbox_status", json!({"sandbox_id": id})).await;
    assert!(!err, "{text}");
    assert_eq!(v["state"], "paused");
    let (err, v, text) = call(
        &c,
        "execute_code",
        json!({"sandbox_id": id, "code": "print('hello')"}),
    )
    .await;
    assert!(!err, "{text}");
    assert_eq!(v["stdout"], "hello\n");
    {
        let f = fake.lock().unwrap();
        assert!(!f.paused.contains(&id), "connecting resumed it");
        assert!(f.seen.iter().any(|s| s.contains("/connect")));
        assert!(f.violations.is_empty(), "{:?}", f.violations);
    }
    let (err, _, _) = call(&c, "close_sandbox", json!({"sandbox_id": id})).await;
    assert!(!err);
    assert!(
        !fake.lock().unwrap().sandboxes.contains_key(&id),
        "closing kills it"
    );
    let _ = c.cancel().await;
    let _ = std::fs::remove_dir_all(&home);
}

/// Past `CODE_SANDBOX_MAX_SANDBOXES` running E2B sandboxes, the least recently used idle one
/// is paused (E2B keeps its memory and files) and resumed on its next use: never a refusal.
#[tokio::test]
async fn past_the_running_maximum_the_least_recently_used_is_paused_not_refused() {
    let (url, fake) = start_fake().await;
    let home = std::env::temp_dir().join(format!("mcs-e2b-room-{}", uuid::Uuid::new_v4().simple()));
    let c = server_with(&url, KEY, &home, false, &[("CODE_SANDBOX_MAX_SANDBOXES", "2")]).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (err, v, text) = call(&c, "create_sandbox", json!({})).await;
        assert!(!err, "{text}");
        ids.push(v["sandbox_id"].as_str().unwrap().to_string());
    }
    assert!(
        fake.lock().unwrap().paused.contains(&ids[0]),
        "the oldest was paused to make room"
    );
    let (err, v, _) = call(&c, "get_sandbox_status", json!({"sandbox_id": ids[0]})).await;
    assert!(!err);
    assert_eq!(v["state"], "paused");
    let (err, v, text) = call(
        &c,
        "execute_code",
        json!({"sandbox_id": ids[0], "code": "print('hello')"}),
    )
    .await;
    assert!(!err, "{text}");
    assert_eq!(v["stdout"], "hello\n");
    {
        let f = fake.lock().unwrap();
        assert!(!f.paused.contains(&ids[0]), "resumed by connecting");
        assert!(
            f.paused.contains(&ids[1]),
            "the next least recently used made room"
        );
        assert!(f.violations.is_empty(), "{:?}", f.violations);
    }
    let _ = c.cancel().await;
    let _ = std::fs::remove_dir_all(&home);
}

/// Paused E2B sandboxes (billed for storage) follow the kept sandboxes' rules: past
/// `CODE_SANDBOX_KEEP_MB` the least recently used are killed, never one used within the hour.
#[tokio::test]
async fn paused_e2b_sandboxes_past_the_budget_are_killed_oldest_first() {
    let (url, fake) = start_fake().await;
    let home = std::env::temp_dir().join(format!("mcs-e2b-evict-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(home.join("e2b")).unwrap();
    let mut records = Vec::new();
    let mut ids = Vec::new();
    for hours in [3, 2, 0] {
        let (id, _) = new_sandbox(&fake, &json!({"templateID": "code-interpreter-v1"}));
        fake.lock().unwrap().paused.insert(id.clone());
        let used = chrono::Utc::now() - chrono::Duration::hours(hours);
        records.push(json!({
            "id": id, "created_at": used, "executions": 1, "paused_at": used, "last_used": used,
            "limits": {"timeout_seconds": 30, "memory_mb": 0, "disk_bytes": 0,
                       "output_bytes": 1048576, "fuel_per_call": null}
        }));
        ids.push(id);
    }
    std::fs::write(
        home.join("e2b/paused.json"),
        serde_json::to_vec(&records).unwrap(),
    )
    .unwrap();
    let c = server_with(&url, KEY, &home, true, &[("CODE_SANDBOX_KEEP_MB", "1")]).await;
    for _ in 0..100 {
        let killed = {
            let f = fake.lock().unwrap();
            !f.sandboxes.contains_key(&ids[0]) && !f.sandboxes.contains_key(&ids[1])
        };
        if killed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    {
        let f = fake.lock().unwrap();
        assert!(!f.sandboxes.contains_key(&ids[0]), "the oldest was killed");
        assert!(!f.sandboxes.contains_key(&ids[1]), "and the next");
        assert!(f.sandboxes.contains_key(&ids[2]), "a recently used one never is");
    }
    let (err, _, text) = call(&c, "execute_code", json!({"sandbox_id": ids[0], "code": "1"})).await;
    assert!(err);
    assert!(
        text.contains("was deleted on") && text.contains("CODE_SANDBOX_KEEP_MB"),
        "{text}"
    );
    let (err, v, text) = call(&c, "get_sandbox_status", json!({"sandbox_id": ids[2]})).await;
    assert!(!err, "{text}");
    assert_eq!(v["state"], "paused");
    let _ = c.cancel().await;
    let _ = std::fs::remove_dir_all(&home);
}

/// Remote mode in front of E2B: the principals' isolation is the same as over the local backend.
#[tokio::test(flavor = "multi_thread")]
async fn remote_mode_in_front_of_e2b_keeps_principals_apart() {
    let (url, _fake) = start_fake().await;
    let r = crate::remote_harness::Remote::start(
        &["alice", "bob"],
        &[
            ("INTERPRETER_TYPE", "e2b"),
            ("E2B_API_KEY", KEY),
            ("E2B_API_URL", &url),
            ("E2B_SANDBOX_URL", &url),
        ],
    )
    .await;
    let alice = r.client("alice").await;
    let bob = r.client("bob").await;
    let v = alice.ok("create_sandbox", json!({})).await;
    assert_eq!(v["backend"], "e2b");
    let id = v["sandbox_id"].as_str().unwrap().to_string();
    let ran = alice.run_ok(&id, "print(1)").await;
    assert!(ran["stdout"].as_str().unwrap_or("").contains("ran"), "{ran}");
    let (err, _, text) = bob
        .call_json("execute_code", json!({"sandbox_id": id, "code": "1"}))
        .await;
    assert!(err && text.contains("no open sandbox has the id"), "{text}");
    let (_, listed, _) = bob.call_json("get_sandbox_status", json!({})).await;
    assert_eq!(listed["sandboxes"], json!([]));
    assert!(!r.log_text().contains(KEY), "the E2B key reached the log");
}

/// A background run on E2B: the execution stream outlives the call that started it, its
/// output arrives through get_run as it streams, and it ends with its result.
#[tokio::test]
async fn background_runs_work_on_e2b() {
    let (url, _fake) = start_fake().await;
    let c = server(&url, KEY).await;
    let (err, v, text) = call(
        &c,
        "execute_code",
        json!({"code": "ticker()", "background": true}),
    )
    .await;
    assert!(!err, "{text}");
    let run = v["run_id"].as_str().unwrap().to_string();
    let (mut seen, mut at) = (String::new(), 0u64);
    let last = loop {
        let (_, v, text) = call(
            &c,
            "get_run",
            json!({"run_id": run, "wait_seconds": 10, "stdout_offset": at}),
        )
        .await;
        seen.push_str(v["new_stdout"].as_str().unwrap_or_default());
        at = v["stdout_offset"].as_u64().unwrap_or(at);
        if v["state"] != "running" {
            break (v, text);
        }
    };
    assert_eq!(seen, "tick 0\ntick 1\ntick 2\ntick 3\ntick 4\n");
    assert_eq!(last.0["state"], "finished", "{}", last.1);
    assert_eq!(last.0["result"], "'ticked'");
    let _ = c.cancel().await;
}

#[tokio::test]
async fn code_mode_is_said_to_be_unavailable_on_e2b() {
    let (url, _fake) = start_fake().await;
    let dir = std::env::temp_dir().join(format!("mcs-e2b-code-mode-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let servers = dir.join("servers.json");
    std::fs::write(
        &servers,
        r#"{"mcpServers": {"memory": {"command": "node", "args": ["x.js"]}}}"#,
    )
    .unwrap();
    let servers = servers.display().to_string();
    let c = server_with(
        &url,
        KEY,
        &std::env::temp_dir().join("mcs-e2b-home"),
        false,
        &[("CODE_SANDBOX_MCP_SERVERS", &servers)],
    )
    .await;
    let said = crate::common::tool_description(&c, "execute_code").await;
    assert!(said.contains("not available with the e2b backend"), "{said}");
    assert!(!said.contains("import mcp_tools"), "{said}");
    let _ = c.cancel().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn save_file_streams_an_e2b_sandboxs_file_into_a_save_folder() {
    let (url, _fake) = start_fake().await;
    let saves = std::env::temp_dir().join(format!("mcs-e2b-saves-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&saves).unwrap();
    let saves = std::fs::canonicalize(saves).unwrap();
    let home = std::env::temp_dir().join(format!("mcs-e2b-save-home-{}", uuid::Uuid::new_v4().simple()));
    let c = server_with(
        &url,
        KEY,
        &home,
        false,
        &[("CODE_SANDBOX_SAVE_DIRS", saves.to_str().unwrap())],
    )
    .await;
    let (err, v, text) = call(&c, "create_sandbox", json!({})).await;
    assert!(!err, "{text}");
    let id = v["sandbox_id"].as_str().unwrap().to_string();
    // Printable bytes: the fake finds the multipart part in text.
    let body: Vec<u8> = (0..(3u32 << 20)).map(|i| b' ' + (i % 95) as u8).collect();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&body);
    let (err, _, text) = call(
        &c,
        "upload_file",
        json!({"sandbox_id": id, "content_base64": b64, "destination_path": "data.bin"}),
    )
    .await;
    assert!(!err, "{text}");
    let dest = saves.join("data.bin");
    let args = json!({"sandbox_id": id, "path": "data.bin", "destination": dest.to_str().unwrap()});
    let (err, v, text) = call(&c, "save_file", args.clone()).await;
    assert!(!err, "{text}");
    assert_eq!(v["bytes_written"], body.len(), "{v}");
    assert_eq!(std::fs::read(&dest).unwrap(), body, "the bytes E2B sent");
    // A second save without overwrite is refused before anything is copied; a missing file
    // leaves nothing behind.
    let (err, _, text) = call(&c, "save_file", args).await;
    assert!(err && text.contains("overwrite: true"), "{text}");
    let missing = json!({"sandbox_id": id, "path": "nope.bin", "destination": saves.join("nope.bin").to_str().unwrap()});
    let (err, _, text) = call(&c, "save_file", missing).await;
    assert!(err && text.contains("nope.bin"), "{text}");
    let names: Vec<_> = std::fs::read_dir(&saves)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["data.bin"], "nothing beside the saved file");
    let _ = c.cancel().await;
    let _ = std::fs::remove_dir_all(saves);
    let _ = std::fs::remove_dir_all(home);
}
