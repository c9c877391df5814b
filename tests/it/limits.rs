//! Per-call limits: time, memory, output; and what a reset looks like to the user.

use crate::common;

use common::{Server, text_of};
use serde_json::json;

#[tokio::test]
async fn busy_loop_is_stopped_at_the_timeout_and_the_next_call_starts_fresh() {
    let s = Server::start().await;
    let id = s.create().await;
    s.exec(&id, "before = 1").await;
    let r = s
        .call(
            "execute_code",
            json!({"sandbox_id": id, "code": "while True: pass", "timeout_seconds": 2}),
        )
        .await;
    assert_eq!(r.is_error, Some(true));
    let v = r.structured_content.clone().unwrap();
    assert_eq!(v["limit"], "timeout");
    assert_eq!(v["state_lost"], true);
    let ms = v["duration_ms"].as_u64().unwrap();
    assert!(ms >= 2000, "stopped no earlier than the limit: {ms}");
    assert!(text_of(&r).contains("reset"));
    let (_, v, _) = s.call_json("get_sandbox_status", json!({"sandbox_id": id})).await;
    assert_eq!(v["state"], "reset");
    let v = s.run_ok(&id, "1+1").await;
    assert_eq!(v["result"], "2");
    assert_eq!(v["state_lost"], true, "the first call after a reset says so");
    let (err, v) = s.exec(&id, "before").await;
    assert!(err);
    assert_eq!(v["error"]["name"], "NameError");
    assert_eq!(v["state_lost"], false);
    s.stop().await;
}

#[tokio::test]
async fn sleeping_is_stopped_at_the_timeout() {
    let s = Server::start().await;
    let id = s.create().await;
    let (err, v) = s
        .call_json(
            "execute_code",
            json!({"sandbox_id": id, "code": "import time\ntime.sleep(10**6)", "timeout_seconds": 2}),
        )
        .await
        .into_pair();
    assert!(err);
    assert_eq!(v["limit"], "timeout");
    let v = s.run_ok(&id, "1+1").await;
    assert_eq!(v["result"], "2");
    s.stop().await;
}

#[tokio::test]
async fn asyncio_runs_and_a_waiting_event_loop_is_stopped_at_the_timeout() {
    let s = Server::start().await;
    let id = s.create().await;
    // Event loops work although WASI has no socket pair: tasks, timers, queues, wait_for.
    let v = s
        .run_ok(
            &id,
            "import asyncio
async def square(i):
    await asyncio.sleep(0.01 * i)
    return i * i
async def main():
    got = await asyncio.gather(*(square(i) for i in range(5)))
    q = asyncio.Queue()
    for i in range(3):
        await q.put(i)
    try:
        await asyncio.wait_for(asyncio.sleep(60), 0.05)
        late = 'no'
    except TimeoutError:
        late = 'stopped'
    return got, [q.get_nowait() for _ in range(3)], late
asyncio.run(main())",
        )
        .await;
    assert_eq!(v["result"], "([0, 1, 4, 9, 16], [0, 1, 2], 'stopped')", "{v}");
    // A loop waiting on a long timer is stopped at the call's limit like a sleep.
    let (err, v) = s
        .call_json(
            "execute_code",
            json!({"sandbox_id": id, "code": "import asyncio\nasyncio.run(asyncio.sleep(10**6))", "timeout_seconds": 2}),
        )
        .await
        .into_pair();
    assert!(err);
    assert_eq!(v["limit"], "timeout", "{v}");
    let v = s.run_ok(&id, "1+1").await;
    assert_eq!(v["result"], "2");
    s.stop().await;
}

#[tokio::test]
async fn memory_bomb_is_a_memory_error_and_the_session_survives() {
    let s = Server::start().await;
    let id = s.create_with(json!({"memory_mb": 256})).await;
    s.exec(&id, "survivor = 'yes'").await;
    let (err, v) = s.exec(&id, "b = bytearray(1024**3)").await;
    assert!(err);
    assert_eq!(v["error"]["name"], "MemoryError");
    assert_eq!(v["limit"], "memory");
    assert_eq!(v["state_lost"], false);
    let (err, v) = s
        .exec(&id, "grow = []\nwhile True: grow.append(bytearray(10**6))")
        .await;
    assert!(err);
    assert_eq!(v["error"]["name"], "MemoryError");
    let v = s.run_ok(&id, "del grow\nsurvivor").await;
    assert_eq!(v["result"], "'yes'");
    s.stop().await;
}

#[tokio::test]
async fn output_flood_keeps_head_and_tail() {
    let s = Server::start().await;
    let id = s.create().await;
    let (err, v) = s
        .exec(
            &id,
            "for i in range(60000):\n    print(f'line {i:06d} ' + 'A' * 80)\nprint('THE END')",
        )
        .await;
    assert!(err, "hitting the output limit is reported");
    assert_eq!(v["limit"], "output");
    let out = v["stdout"].as_str().unwrap();
    assert!(out.starts_with("line 000000 "));
    assert!(out.ends_with("THE END\n"));
    assert!(out.contains("characters of stdout omitted here"), "{out:.300}");
    assert!(
        out.contains("what was kept of it (its first and last part) is in")
            && !out.contains("all of it is in"),
        "the marker claims the file holds all of it: {out:.300}"
    );
    assert!(
        out.chars().count() < 21_000,
        "inline output is capped: {}",
        out.len()
    );
    // The whole capture (itself capped at about 1 MiB, head and tail) is saved beside it.
    let saved = v["saved_files"][0].as_str().expect("saved stdout").to_string();
    assert!(saved.ends_with("/stdout.txt"), "{saved}");
    let v = s.run_ok(&id, &format!("t = open('{saved}').read()\n(len(t) > 1_000_000, 'bytes omitted' in t, t.endswith('THE END\\n'))")).await;
    assert_eq!(v["result"], "(True, True, True)");
    let v = s.run_ok(&id, "'still here'").await;
    assert_eq!(v["state_lost"], false);
    s.stop().await;
}

trait IntoPair {
    fn into_pair(self) -> (bool, serde_json::Value);
}
impl IntoPair for (bool, serde_json::Value, String) {
    fn into_pair(self) -> (bool, serde_json::Value) {
        (self.0, self.1)
    }
}

/// With one call allowed at a time, a second call is refused in words that count right
/// ("1 call is", not "1 calls are") and say what to do.
#[tokio::test]
async fn the_call_cap_of_one_is_said_in_the_singular() {
    let s = Server::start_with(&[("CODE_SANDBOX_MAX_CONCURRENT_CALLS", "1")]).await;
    let a = s.create().await;
    let b = s.create().await;
    let slow = s.exec(&a, "import time\ntime.sleep(4)\n1");
    let second = async {
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        s.call_json("execute_code", serde_json::json!({"sandbox_id": b, "code": "2"}))
            .await
    };
    let ((slow_failed, _), (refused, _, text)) = tokio::join!(slow, second);
    assert!(!slow_failed, "the first call ran");
    assert!(refused, "the second call ran beside the first: {text}");
    assert!(
        text.contains("1 call is already running code") && text.contains("CODE_SANDBOX_MAX_CONCURRENT_CALLS"),
        "{text}"
    );
    s.stop().await;
}
