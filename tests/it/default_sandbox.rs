//! A call without a sandbox id acts on the sandbox this session created or used last, and only
//! that one: a retried `close_sandbox` never deletes an older sandbox (issue 41), and in remote
//! mode two sessions of one principal never act in each other's sandboxes.

use serde_json::{Value, json};

use crate::common::Server;
use crate::remote_harness::Remote;

/// A with a file, then B; `close_sandbox` without an id twice (and once with null): B goes, A
/// and its file stay, the refusal says what to do; `execute_code` without an id then runs in a
/// new sandbox, which is the default from then on.
async fn retried_close_spares_the_older_sandbox(s: &Server) {
    let a = s.ok("create_sandbox", json!({})).await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
    s.ok(
        "write_file",
        json!({"sandbox_id": a, "file_path": "work.txt", "content": "keep me"}),
    )
    .await;
    s.run_ok(&a, "x = 'from A'").await;
    let b = s.ok("create_sandbox", json!({})).await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();

    let first = s.ok("close_sandbox", json!({})).await;
    assert_eq!(
        first["sandbox_id"],
        b.as_str(),
        "the first close takes the newest"
    );

    for args in [json!({}), json!({"sandbox_id": null})] {
        let (err, v, text) = s.call_json("close_sandbox", args.clone()).await;
        assert!(err, "a retried close_sandbox {args} closed something: {v} {text}");
        assert!(text.contains("no default sandbox"), "{text}");
        assert!(text.contains(&a), "the refusal names the open sandbox: {text}");
        assert!(
            text.contains("sandbox_id"),
            "the refusal says what to give: {text}"
        );
    }
    let (err, _, text) = s.call_json("restore_sandbox", json!({"checkpoint": "c"})).await;
    assert!(err && text.contains("no default sandbox"), "{text}");

    // Without an id, code runs in a new sandbox, never in A.
    let v = s.run_ok("", "'x' in globals()").await;
    assert_eq!(v["result"], "False", "ran in A: {v}");
    let c = v["sandbox_id"].as_str().unwrap().to_string();
    assert_ne!(c, a);
    assert!(
        v["notes"].to_string().contains("Created sandbox"),
        "the new sandbox is reported: {v}"
    );
    let v = s
        .call_json(
            "execute_code",
            json!({"code": "y = 1; y", "sandbox_id": Value::Null}),
        )
        .await
        .1;
    assert_eq!(v["sandbox_id"], c.as_str(), "null counts as omitted: {v}");

    // Naming A makes it the default again; a mistyped id does not replace it.
    let file = s
        .ok("read_file", json!({"sandbox_id": a, "file_path": "work.txt"}))
        .await;
    assert_eq!(file["content"], "keep me", "A's file survived");
    let (err, _) = s.exec("no-such-sandbox", "1").await;
    assert!(err);
    let v = s.run_ok("", "x").await;
    assert_eq!(v["sandbox_id"], a.as_str(), "{v}");

    let (err, _, _) = s.call_json("get_sandbox_status", json!({"sandbox_id": a})).await;
    assert!(!err, "A is still open");
    s.ok("close_sandbox", json!({"sandbox_id": c})).await;
    s.ok("close_sandbox", json!({})).await;
}

#[tokio::test]
async fn over_stdio_a_retried_close_never_deletes_an_older_sandbox() {
    let s = Server::start().await;
    retried_close_spares_the_older_sandbox(&s).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn over_http_each_session_has_its_own_default_sandbox() {
    let r = Remote::start(&["alice"], &[]).await;
    let one = r.client("alice").await;
    retried_close_spares_the_older_sandbox(&one).await;

    // Two agents with one token: the second session's calls without an id never reach the
    // first's sandbox.
    let mine = one.run_ok("", "secret = 1").await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
    let two = r.client("alice").await;
    let v = two.run_ok("", "'secret' in globals()").await;
    assert_eq!(
        v["result"], "False",
        "the second session ran in the first's sandbox"
    );
    assert_ne!(v["sandbox_id"], mine.as_str());
    two.ok("close_sandbox", json!({})).await;
    let (err, _, text) = two.call_json("close_sandbox", json!({})).await;
    assert!(err && text.contains("no default sandbox"), "{text}");
    let v = one.run_ok("", "secret").await;
    assert_eq!(
        v["sandbox_id"],
        mine.as_str(),
        "the first session's default is untouched"
    );
    r.terminate().await;
}
