//! Raw JSON-RPC over stdio: every line a client sends gets an answer, malformed or not, and
//! the server goes on serving. Written byte by byte, as a buggy or hostile client would.

use crate::common;

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

struct Raw {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Raw {
    async fn start() -> Raw {
        common::ensure_runtime();
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
            .env("CODE_SANDBOX_HOME", common::runtime_home())
            .env("CODE_SANDBOX_PERSIST", "false")
            .env("RUST_LOG", "error")
            .env_remove("INTERPRETER_TYPE")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the server");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut raw = Raw { child, stdin, stdout };
        raw.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}))
            .await;
        let init = raw.read().await;
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        raw.line(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        raw
    }

    async fn line(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).await.expect("write");
        self.stdin.write_all(b"\n").await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    async fn send(&mut self, v: Value) {
        self.line(v.to_string().as_bytes()).await;
    }

    async fn read(&mut self) -> Value {
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(60), self.stdout.read_line(&mut line))
            .await
            .expect("the server answered within 60 s")
            .expect("read");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("answer is not JSON ({e}): {line}"))
    }

    /// Sends a ping and checks the answer: the server still serves.
    async fn alive(&mut self, id: i64) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
            .await;
        let r = self.read().await;
        assert_eq!(r["id"], id, "{r}");
        assert!(r["result"].is_object(), "{r}");
    }
}

#[tokio::test]
async fn malformed_json_gets_a_parse_error_and_the_server_goes_on() {
    let mut s = Raw::start().await;

    s.line(b"this is not json").await;
    let r = s.read().await;
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(
        r.get("id"),
        Some(&Value::Null),
        "no id can be known: JSON-RPC says null: {r}"
    );
    s.alive(1).await;

    // NaN and a lone surrogate: the id is still found, so the pending call ends.
    s.line(br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"execute_code","arguments":{"code":NaN}},"id":2}"#)
        .await;
    let r = s.read().await;
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(2), json!(-32700)),
        "{r}"
    );
    s.line(br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{"file_path":"a","content":"\ud800"}},"id":"three"}"#)
        .await;
    let r = s.read().await;
    assert_eq!(r["id"], "three", "{r}");
    assert_eq!(r["error"]["code"], -32700);
    assert!(
        r["error"]["message"].as_str().unwrap().contains("surrogate"),
        "{r}"
    );

    // Nesting far past serde's 128 levels.
    let deep = format!(
        r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"x","arguments":{{"a":{}{}}}}},"id":4}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    s.line(deep.as_bytes()).await;
    let r = s.read().await;
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(4), json!(-32700)),
        "{r}"
    );

    // Truncated JSON.
    s.line(br#"{"jsonrpc":"2.0","id":5,"method":"ping""#).await;
    let r = s.read().await;
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(5), json!(-32700)),
        "{r}"
    );
    s.alive(6).await;
}

#[tokio::test]
async fn invalid_requests_get_invalid_request_errors() {
    let mut s = Raw::start().await;
    for (line, id) in [
        (r#"{"foo":1}"#, Some(Value::Null)),
        (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, Some(Value::Null)),
        (r#"{"jsonrpc":"2.0","id":7}"#, Some(json!(7))),
        (r#"42"#, Some(Value::Null)),
    ] {
        s.line(line.as_bytes()).await;
        let r = s.read().await;
        assert_eq!(r["error"]["code"], -32600, "{line}: {r}");
        assert_eq!(r.get("id").cloned(), id, "{line}: {r}");
    }
    // A known method with parameters of the wrong shape.
    s.send(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": 5}}))
        .await;
    let r = s.read().await;
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(8), json!(-32602)),
        "{r}"
    );
    // An unknown notification is ignored, as MCP asks; the next request is answered.
    s.line(br#"{"jsonrpc":"2.0","method":"notifications/whatever","params":{}}"#)
        .await;
    s.alive(9).await;
}

#[tokio::test]
async fn a_request_over_the_size_limit_is_answered_with_the_limit() {
    let mut s = Raw::start().await;
    let limit = mcp_code_sandbox::config::MAX_REQUEST_BYTES;
    // The id comes after the huge params, as the TypeScript SDK orders them.
    let mut line = br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{"file_path":"big.txt","content":""#.to_vec();
    line.resize(line.len() + limit + 10, b'a');
    line.extend_from_slice(br#""}},"id":77}"#);
    let writer = {
        let mut stdin = s.stdin;
        tokio::spawn(async move {
            stdin.write_all(&line).await.expect("write");
            stdin.write_all(b"\n").await.expect("write");
            stdin
        })
    };
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(120), s.stdout.read_line(&mut answer))
        .await
        .expect("answered")
        .expect("read");
    s.stdin = writer.await.expect("writer");
    let r: Value = serde_json::from_str(&answer).expect("json");
    assert_eq!(r["id"], 77, "{r}");
    assert_eq!(r["error"]["code"], -32600);
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&limit.to_string()), "names the limit: {msg}");
    s.alive(78).await;
    let rss_ok = s.child.id().is_some();
    assert!(rss_ok, "the server is still running");
}
