//! Background runs have a budget of their own (CODE_SANDBOX_MAX_BACKGROUND_RUNS), apart from
//! the interactive call slots (issue 35, red team finding 2): one principal's runs that sleep
//! never leave another's `1+1` waiting, nor, over stdio, the same user's foreground calls.
//! Past the budget a run waits `queued`, and a freed slot goes to the principal with the
//! fewest runs going.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::Server;
use crate::remote_harness::Remote;

const SLEEPER: &str = "import time\ntime.sleep(120)";

/// Starts `code` in the background in a new sandbox; the start's structured result.
async fn start(s: &Server, code: &str) -> Value {
    let sb = s.create().await;
    s.ok(
        "execute_code",
        json!({"sandbox_id": sb, "code": code, "background": true}),
    )
    .await
}

async fn state(s: &Server, run: &str) -> Value {
    s.ok("get_run", json!({"run_id": run})).await
}

/// Waits (bounded) until `run` is in `want`.
async fn until_state(s: &Server, run: &str, want: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = s.ok("get_run", json!({"run_id": run, "wait_seconds": 2})).await;
        if v["state"] == want || Instant::now() > deadline {
            return v;
        }
    }
}

fn run_id(v: &Value) -> String {
    v["run_id"].as_str().expect("a run id").to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn one_principals_background_runs_never_stall_anothers_calls() {
    let r = Remote::start(
        &["alice sandboxes=10", "carol"],
        &[
            ("CODE_SANDBOX_MAX_BACKGROUND_RUNS", "2"),
            ("CODE_SANDBOX_MAX_CONCURRENT_CALLS", "2"),
        ],
    )
    .await;
    let alice = r.client("alice").await;
    let carol = r.client("carol").await;

    let mut runs = Vec::new();
    for i in 0..8 {
        let v = start(&alice, SLEEPER).await;
        let want = if i < 2 { "running" } else { "queued" };
        assert_eq!(v["state"], want, "run {i}: {v}");
        if i >= 2 {
            let notes = v["notes"].to_string();
            assert!(notes.contains("CODE_SANDBOX_MAX_BACKGROUND_RUNS"), "{notes}");
        }
        runs.push(run_id(&v));
    }
    let queued = state(&alice, &runs[2]).await;
    assert_eq!(queued["state"], "queued", "{queued}");
    assert_eq!(queued["queue_position"], 1, "{queued}");
    assert_eq!(state(&alice, &runs[7]).await["queue_position"], 6);

    // Carol's interactive calls answer at once, however many runs alice has going.
    let sb = carol.create().await;
    let v = tokio::time::timeout(Duration::from_secs(30), carol.run_ok(&sb, "1+1"))
        .await
        .expect("carol's 1+1 answered while alice's runs went on");
    assert_eq!(v["result"], "2");
    // Alice's own foreground calls, too.
    let mine = alice.create().await;
    assert_eq!(alice.run_ok(&mine, "2+2").await["result"], "4");

    // Carol's background run waits; when one of alice's ends, the slot goes to carol (she
    // has none going), not to alice's runs queued before hers.
    let hers = start(&carol, "import time\ntime.sleep(3)\nprint('carol ran')").await;
    assert_eq!(hers["state"], "queued", "{hers}");
    let hers = run_id(&hers);
    // A queued run that is cancelled never runs.
    let c = alice.ok("cancel_run", json!({"run_id": runs[7]})).await;
    assert_eq!(c["state"], "cancelled", "{c}");
    let (_, v, text) = alice.call_json("get_run", json!({"run_id": runs[7]})).await;
    assert_eq!(v["state"], "cancelled", "{v}");
    assert!(text.contains("before it started"), "{text}");
    alice.ok("cancel_run", json!({"run_id": runs[0]})).await;
    let v = until_state(&carol, &hers, "running").await;
    assert_eq!(v["state"], "running", "{v}");
    assert_eq!(
        state(&alice, &runs[2]).await["state"],
        "queued",
        "alice's run queued before carol's still waits"
    );
    let v = until_state(&carol, &hers, "finished").await;
    assert_eq!(v["stdout"], "carol ran\n", "{v}");

    for run in &runs[1..7] {
        alice.ok("cancel_run", json!({"run_id": run})).await;
    }
    r.terminate().await;
}

#[tokio::test]
async fn over_stdio_background_runs_leave_the_call_slots_free() {
    let s = Server::start_with(&[("CODE_SANDBOX_MAX_CONCURRENT_CALLS", "8")]).await;
    let mut runs = Vec::new();
    for _ in 0..8 {
        runs.push(run_id(&start(&s, SLEEPER).await));
    }
    let sb = s.create().await;
    let (err, v) = s.exec(&sb, "1+1").await;
    assert!(!err, "a foreground call failed while 8 runs went on: {v}");
    assert_eq!(v["result"], "2");
    for run in &runs {
        s.ok("cancel_run", json!({"run_id": run})).await;
    }
    s.stop().await;
}

/// A principal at its memory quota, with every sandbox running, is told what it can do, not
/// to ask for "memory_mb of at most 0".
#[tokio::test(flavor = "multi_thread")]
async fn a_principal_at_its_memory_quota_is_told_what_to_do() {
    let r = Remote::start(
        &["gina memory_mb=1024 sandboxes=5"],
        &[("CODE_SANDBOX_MEMORY_MB", "512")],
    )
    .await;
    let g = r.client("gina").await;
    let a = run_id(&start(&g, SLEEPER).await);
    let b = run_id(&start(&g, SLEEPER).await);
    until_state(&g, &a, "running").await;
    until_state(&g, &b, "running").await;
    // Both interpreters are live and running: nothing can be suspended for a third.
    let (err, _, text) = g.call_json("create_sandbox", json!({})).await;
    assert!(err, "{text}");
    assert!(!text.contains("at most 0"), "{text}");
    assert!(text.contains("close one of your sandboxes"), "{text}");
    for run in [a, b] {
        g.ok("cancel_run", json!({"run_id": run})).await;
    }
    r.terminate().await;
}

/// Past its 16 queued runs a principal's next run is refused, naming the setting; and a run
/// that finds no room for its interpreter (every live one busy) waits queued, then runs,
/// instead of ending at once with nothing (the red team: "finished after 0.1 s").
#[tokio::test]
async fn a_full_queue_refuses_and_a_run_without_room_waits_its_turn() {
    let s = Server::start_with(&[
        ("CODE_SANDBOX_MAX_BACKGROUND_RUNS", "2"),
        ("CODE_SANDBOX_MAX_SANDBOXES", "1"),
    ])
    .await;
    // Made first: while a run holds the one live interpreter, no sandbox can be made.
    let mut sandboxes = Vec::new();
    for _ in 0..19 {
        sandboxes.push(s.create().await);
    }
    let background =
        |i: usize, code: &str| json!({"sandbox_id": sandboxes[i], "code": code, "background": true});
    let first = run_id(&s.ok("execute_code", background(0, SLEEPER)).await);
    until_state(&s, &first, "running").await;
    let second = s.ok("execute_code", background(1, "print('second ran')")).await;
    assert_eq!(second["state"], "running", "a budget slot was free: {second}");
    let second = run_id(&second);
    // It cannot get an interpreter while the first runs: it waits, queued.
    let v = until_state(&s, &second, "queued").await;
    assert_eq!(v["state"], "queued", "{v}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        state(&s, &second).await["state"],
        "queued",
        "it did not end with nothing"
    );

    // Sixteen more wait for a budget slot; the next is refused, naming the setting.
    let mut queued = Vec::new();
    for i in 2..18 {
        let v = s.ok("execute_code", background(i, "1")).await;
        assert_eq!(v["state"], "queued", "{v}");
        queued.push(run_id(&v));
    }
    let (err, _, text) = s.call_json("execute_code", background(18, "1")).await;
    assert!(err, "{text}");
    assert!(text.contains("CODE_SANDBOX_MAX_BACKGROUND_RUNS"), "{text}");
    for run in &queued {
        s.ok("cancel_run", json!({"run_id": run})).await;
    }

    // The first ends: the second gets the interpreter and runs to its end.
    s.ok("cancel_run", json!({"run_id": first})).await;
    let v = until_state(&s, &second, "finished").await;
    assert_eq!(v["stdout"], "second ran\n", "{v}");
    s.stop().await;
}
