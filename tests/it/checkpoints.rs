//! fork_sandbox, checkpoint_sandbox and restore_sandbox on the local backend.

use serde_json::json;

use crate::common::Server;

#[tokio::test]
async fn checkpoint_change_restore_brings_back_variables_imports_and_files() {
    let s = Server::start().await;
    let id = s.create().await;
    s.run_ok(
        &id,
        "import json\nx = 41\nrows = [i * i for i in range(1000)]\nopen('data.txt', 'w').write('first')",
    )
    .await;
    let v = s
        .ok("checkpoint_sandbox", json!({"sandbox_id": id, "name": "good"}))
        .await;
    assert_eq!(v["checkpoint"]["name"], "good");
    let bytes = v["checkpoint"]["bytes"].as_u64().unwrap();
    assert!(bytes > 0);
    let status = s.ok("get_sandbox_status", json!({"sandbox_id": id})).await;
    assert_eq!(status["checkpoints"][0]["name"], "good", "{status}");
    assert!(
        status["disk_bytes"].as_u64().unwrap() >= bytes,
        "the checkpoint counts towards the disk quota: {status}"
    );

    s.run_ok(
        &id,
        "x = 0\ndel rows, json\nimport os\nos.remove('data.txt')\nopen('later.txt', 'w').write('later')",
    )
    .await;
    let v = s
        .ok("restore_sandbox", json!({"sandbox_id": id, "checkpoint": "good"}))
        .await;
    assert_eq!(v["checkpoint"]["name"], "good");
    let v = s
        .run_ok(
            &id,
            "import os\n(x, len(rows), json.dumps(1), open('data.txt').read(), sorted(os.listdir('.')))",
        )
        .await;
    assert_eq!(v["result"], "(41, 1000, '1', 'first', ['data.txt'])");
    // Restoring twice works: the checkpoint stays.
    s.run_ok(&id, "x = 5").await;
    s.ok("restore_sandbox", json!({"sandbox_id": id, "checkpoint": "good"}))
        .await;
    assert_eq!(s.run_ok(&id, "x").await["result"], "41");
    s.stop().await;
}

#[tokio::test]
async fn a_fork_is_independent_both_ways() {
    let s = Server::start().await;
    let a = s.create().await;
    s.run_ok(&a, "x = [1, 2]\nopen('f.txt', 'w').write('a')").await;
    let v = s.ok("fork_sandbox", json!({"sandbox_id": a})).await;
    assert_eq!(v["forked_from"], a.as_str());
    let b = v["sandbox_id"].as_str().unwrap().to_string();
    assert_ne!(a, b);
    assert_eq!(
        s.run_ok(&b, "(x, open('f.txt').read())").await["result"],
        "([1, 2], 'a')"
    );

    s.run_ok(&b, "x.append(3)\nopen('f.txt', 'w').write('b')").await;
    s.run_ok(&a, "x.append(9)\nopen('g.txt', 'w').write('only a')")
        .await;
    assert_eq!(
        s.run_ok(
            &a,
            "import os\n(x, open('f.txt').read(), os.path.exists('g.txt'))"
        )
        .await["result"],
        "([1, 2, 9], 'a', True)"
    );
    assert_eq!(
        s.run_ok(
            &b,
            "import os\n(x, open('f.txt').read(), os.path.exists('g.txt'))"
        )
        .await["result"],
        "([1, 2, 3], 'b', False)"
    );
    let code = "import random\nrandom.random()";
    let (ra, rb) = (s.run_ok(&a, code).await, s.run_ok(&b, code).await);
    assert_ne!(
        ra["result"], rb["result"],
        "the fork draws its own random numbers"
    );
    // Closing the original leaves the fork working.
    s.ok("close_sandbox", json!({"sandbox_id": a})).await;
    assert_eq!(s.run_ok(&b, "len(x)").await["result"], "3");
    s.stop().await;
}

#[tokio::test]
async fn what_cannot_be_saved_or_restored_says_so() {
    let s = Server::start().await;
    let id = s.create().await;
    s.run_ok(&id, "held = open('open.txt', 'w')").await;
    let (err, v, text) = s.call_json("checkpoint_sandbox", json!({"sandbox_id": id})).await;
    assert!(err && v.is_null(), "{text}");
    assert!(text.contains("1 file(s) open (/home/user/open.txt)"), "{text}");
    s.run_ok(&id, "held.close()").await;
    s.ok("checkpoint_sandbox", json!({"sandbox_id": id, "name": "cp"}))
        .await;

    for (args, expect) in [
        (json!({"sandbox_id": "", "checkpoint": "cp"}), "never guesses"),
        (json!({"sandbox_id": id, "checkpoint": "missing"}), "it has: cp"),
        (json!({"sandbox_id": id, "name": "../x"}), ""),
    ] {
        let tool = if args.get("name").is_some() {
            "checkpoint_sandbox"
        } else {
            "restore_sandbox"
        };
        let (err, _, text) = s.call_json(tool, args).await;
        assert!(err, "{text}");
        assert!(text.contains(expect), "{text}");
    }
    let (err, _, text) = s
        .call_json("checkpoint_sandbox", json!({"sandbox_id": id, "name": "cp"}))
        .await;
    assert!(err && text.contains("already has a checkpoint"), "{text}");

    // A damaged state file is refused, and the sandbox keeps its state.
    s.run_ok(&id, "kept = 'yes'").await;
    let state = s.home.join("scratch").join(&id).join("checkpoints/cp/state.bin");
    let bytes = std::fs::read(&state).unwrap();
    std::fs::write(&state, &bytes[..bytes.len() / 2]).unwrap();
    let (err, _, text) = s
        .call_json("restore_sandbox", json!({"sandbox_id": id, "checkpoint": "cp"}))
        .await;
    assert!(err && text.contains("damaged"), "{text}");
    assert_eq!(s.run_ok(&id, "kept").await["result"], "'yes'");
    s.stop().await;
}

/// matplotlib keeps the font files it drew with open; a sandbox that made a plot must still be
/// saved, forked and checkpointed (the fonts open again on the next plot).
#[tokio::test]
async fn a_sandbox_that_plotted_can_be_saved() {
    let s = Server::start().await;
    let id = s.create().await;
    let plot = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('sales')\nplt.show()";
    s.run_ok(&id, &format!("{plot}\nmarker = 7")).await;
    let v = s
        .ok("checkpoint_sandbox", json!({"sandbox_id": id, "name": "plotted"}))
        .await;
    assert_eq!(v["checkpoint"]["name"], "plotted");
    let fork = s.ok("fork_sandbox", json!({"sandbox_id": id})).await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
    // Both draw again, with text, and keep their variables.
    for sb in [&id, &fork] {
        let r = s
            .call(
                "execute_code",
                json!({"sandbox_id": sb, "code": format!("{plot}\nmarker")}),
            )
            .await;
        assert_ne!(r.is_error, Some(true), "{}", crate::common::text_of(&r));
        assert_eq!(r.structured_content.as_ref().unwrap()["result"], "7");
        assert_eq!(r.content.iter().filter(|c| c.as_image().is_some()).count(), 1);
    }
    s.stop().await;
}
