//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! tests/conformance) against the real server in remote mode, on both protocol revisions'
//! frozen requirement sets: 2025-11-25 (initialize, sessions) and 2026-07-28 (stateless,
//! `server/discover`). What the server cannot pass without the suite's fixtures (tools such
//! as `test_simple_text`, prompts, `test://` resources) is listed, check by check where a
//! scenario has others, in expected-failures-<revision>.yml: any other failure, and any
//! listed one that starts passing, fails the test. Node 20 lacks `fs.globSync`, which the
//! suite imports: tests/conformance/node20-globsync.mjs supplies it from the pinned `glob`.
//!
//! Also here, through rmcp's client: completion of the `sandbox://` template (the caller's own
//! ids, paths inside the named sandbox) and log notifications at the level a session asked for.

use std::time::Duration;

use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, CompletionContext, Reference, ResourceTemplateReference,
};

use crate::common;
use crate::remote_harness::Remote;

/// Runs the suite's `revision` requirement set against `url` with the baseline `baseline`.
fn suite_at(url: &str, revision: &str, baseline: &str) -> (bool, String) {
    let dir = common::ensure_npm("tests/conformance");
    let out = std::process::Command::new("node")
        .args([
            "--import",
            "./node20-globsync.mjs",
            "node_modules/@modelcontextprotocol/conformance/dist/index.js",
            "server",
            "--url",
            url,
            "--requirements",
            revision,
            "--expected-failures",
            baseline,
        ])
        .current_dir(&dir)
        .output()
        .expect("node runs the conformance suite");
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_official_conformance_suite_passes_on_both_revisions() {
    common::ensure_runtime();
    let remote = Remote::start(&[], &[]).await;
    for revision in ["2025-11-25", "2026-07-28"] {
        let baseline = format!("expected-failures-{revision}.yml");
        let (ok, text) = tokio::task::block_in_place(|| suite_at(&remote.url, revision, &baseline));
        let summary = text.split("=== SUMMARY ===").nth(1).unwrap_or(&text);
        eprintln!("conformance {revision}:{summary}");
        assert!(ok, "the conformance suite failed on {revision} (summary above)");
        assert!(summary.contains("passed"), "no scenario ran on {revision}");
        let dir = common::repo_root().join("tests/conformance");
        let listed = std::fs::read_to_string(dir.join(&baseline)).expect("the baseline");
        let counts = Counts::of(summary);
        assert_no_stale_scenario(&listed, &counts, revision);
        let row = format!(
            "| {revision} | {} | {} | {} of {}",
            counts.passed,
            counts.failed,
            counts.failing,
            counts.scenarios.len()
        );
        let doc = std::fs::read_to_string(common::repo_root().join("docs/conformance.md")).unwrap();
        assert!(
            doc.contains(&row),
            "docs/conformance.md's results for the real server are not {row:?}: update its table"
        );
    }
}

/// What the suite's summary says: each scenario's failed-check count, and the totals.
struct Counts {
    scenarios: std::collections::BTreeMap<String, u64>,
    passed: u64,
    failed: u64,
    failing: usize,
}

impl Counts {
    /// Reads `✓ name: N passed, M failed` lines and `Total: X passed, Y failed`.
    fn of(summary: &str) -> Counts {
        let number = |t: &str, word: &str| -> u64 {
            t.split(", ")
                .find_map(|p| p.trim().strip_suffix(word))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0)
        };
        let mut scenarios = std::collections::BTreeMap::new();
        let (mut passed, mut failed) = (0, 0);
        for line in summary.lines().map(str::trim) {
            if let Some(total) = line.strip_prefix("Total: ") {
                (passed, failed) = (number(total, " passed"), number(total, " failed"));
            } else if let Some((name, rest)) = line
                .strip_prefix("✓ ")
                .or_else(|| line.strip_prefix("✗ "))
                .and_then(|l| l.split_once(": "))
            {
                scenarios.insert(name.to_string(), number(rest, " failed"));
            }
        }
        let failing = scenarios.values().filter(|f| **f > 0).count();
        Counts {
            scenarios,
            passed,
            failed,
            failing,
        }
    }
}

/// A scenario the baseline lists whole must have run and still fail: the suite itself
/// flags a listed check that passes, but not a listed scenario it did not score.
fn assert_no_stale_scenario(listed: &str, counts: &Counts, revision: &str) {
    for entry in listed.lines().filter_map(|l| l.trim().strip_prefix("- ")) {
        let entry = entry.trim();
        if entry.contains(':') {
            continue;
        }
        match counts.scenarios.get(entry) {
            Some(0) => panic!("{entry} passes on {revision}: remove it from the baseline"),
            Some(_) => {}
            None => {
                panic!("{entry} is in the {revision} baseline but the suite ran no such scenario: remove it")
            }
        }
    }
}

/// The conformance server: `cargo test` builds the examples beside the test binary
/// (`target/<profile>/examples/conformance_server-HASH`; `cargo build --example` makes the
/// name without a hash). The newest one.
fn conformance_server() -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let examples = exe.parent()?.parent()?.join("examples");
    std::fs::read_dir(&examples)
        .ok()?
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let stem = name
                .strip_suffix(std::env::consts::EXE_SUFFIX)
                .unwrap_or(&name)
                .to_string();
            stem == "conformance_server"
                || stem
                    .strip_prefix("conformance_server-")
                    .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()))
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max()
        .map(|(_, p)| p)
}

/// Every scored scenario of both revisions passes against the real server with the suite's
/// fixtures beside it (examples/conformance_server.rs): the baselines are empty, so any failure
/// of a scored scenario fails the test (unscored ones, such as the tasks extension, are reported).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_conformance_server_passes_the_scored_scenarios() {
    common::ensure_runtime();
    let bin = conformance_server().expect(
        "examples/conformance_server is not built: run `cargo test --release` (it builds the examples)",
    );
    let port = common::free_port();
    let mut child = tokio::process::Command::new(&bin)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("CODE_SANDBOX_HOME", common::runtime_home())
        .env("CODE_SANDBOX_PERSIST", "false")
        .env_remove("INTERPRETER_TYPE")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the conformance server");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(u) = line.split("serving MCP at ").nth(1) {
                return u.trim().to_string();
            }
        }
        panic!("the conformance server exited before listening")
    })
    .await
    .expect("the conformance server listened in time");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    for revision in ["2025-11-25", "2026-07-28"] {
        let baseline = format!("fixtures-expected-failures-{revision}.yml");
        let (ok, text) = tokio::task::block_in_place(|| suite_at(&url, revision, &baseline));
        let summary = text.split("=== SUMMARY ===").nth(1).unwrap_or(&text);
        eprintln!("conformance server, {revision}:{summary}");
        assert!(
            ok,
            "the conformance server failed the suite on {revision} (summary above)"
        );
        // The tasks extension is a 2026-07-28 one.
        let must_pass: &[&str] = match revision {
            "2026-07-28" => &["tasks-lifecycle", "tasks-mrtr-composition", "json-schema-2020-12"],
            _ => &["json-schema-2020-12"],
        };
        for extension in must_pass {
            assert!(
                summary.contains(&format!("✓ {extension}")),
                "{extension} did not pass on {revision}"
            );
        }
        // Every scenario passes, the tasks extension's and the pending ones included (the
        // pending `http-custom-header-server-validation` checks `run_id`'s and `sandbox_id`'s
        // `Mcp-Param-*` headers).
        let failing: Vec<&str> = summary
            .lines()
            .take_while(|l| !l.starts_with("Total:"))
            .filter(|l| l.starts_with('✗'))
            .collect();
        assert!(
            failing.is_empty(),
            "scored scenarios failing on {revision}: {failing:?}"
        );
    }
}

/// The official Python SDK (the pinned venv of tests/mcp-servers) over stdio and HTTP, on both
/// revisions: tools, a call, completion of ids and paths, and (2025-11-25) log levels.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_python_sdk_works_over_both_transports_and_both_revisions() {
    common::ensure_runtime();
    let dir = common::repo_root().join("tests/mcp-servers");
    let venv = xtask::pyvenv::ensure(&dir, &|m| common::progress(m)).unwrap_or_else(|e| panic!("{e}"));
    let remote = Remote::start(&[], &[]).await;
    let out = tokio::process::Command::new(venv.join("bin/python"))
        .arg(dir.join("python_sdk_client.py"))
        .arg(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .arg(&remote.url)
        .env("CODE_SANDBOX_HOME", common::runtime_home())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(300), out)
        .await
        .expect("the Python SDK checks finished in time")
        .expect("python runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the Python SDK checks failed:\n{text}");
    for leg in [
        "stdio, 2025-11-25",
        "HTTP, 2025-11-25",
        "stdio, 2026-07-28",
        "HTTP, 2026-07-28",
    ] {
        assert!(
            text.contains(&format!("python SDK ok: {leg}")),
            "{leg} did not run:\n{text}"
        );
    }
}

pub(crate) fn complete(uri: &str, name: &str, value: &str, sandbox: Option<&str>) -> CompleteRequestParams {
    let mut p = CompleteRequestParams::new(
        Reference::Resource(ResourceTemplateReference::new(uri)),
        ArgumentInfo::new(name, value),
    );
    if let Some(id) = sandbox {
        p.context = Some(CompletionContext::with_arguments(
            [("sandbox_id".to_string(), id.to_string())].into_iter().collect(),
        ));
    }
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn completion_offers_only_the_callers_sandboxes_and_their_paths() {
    common::ensure_runtime();
    let remote = Remote::start(&["alice", "bob"], &[]).await;
    let alice = remote.client("alice").await;
    let bob = remote.client("bob").await;
    let a = alice.create().await;
    alice
        .run_ok(&a, "import os\nos.makedirs('data/raw')\nopen('data/raw/x.csv','w').write('1')\nopen('data/notes.txt','w').write('n')\nopen('dash.py','w').write('')")
        .await;
    let b = bob.create().await;
    let template = "sandbox://{sandbox_id}/{+path}";
    let ids = alice
        .client
        .complete(complete(template, "sandbox_id", "sbx-", None))
        .await
        .expect("complete")
        .completion
        .values;
    assert!(ids.contains(&a), "{ids:?}");
    assert!(!ids.contains(&b), "alice was offered bob's sandbox: {ids:?}");
    let paths = |typed: &'static str, s: String| {
        let c = &alice.client;
        async move {
            c.complete(complete(template, "path", typed, Some(&s)))
                .await
                .expect("complete")
                .completion
                .values
        }
    };
    assert_eq!(paths("d", a.clone()).await, ["dash.py", "data/"]);
    assert_eq!(paths("data/", a.clone()).await, ["data/notes.txt", "data/raw/"]);
    assert_eq!(paths("data/raw/x", a.clone()).await, ["data/raw/x.csv"]);
    assert!(paths("", b.clone()).await.is_empty(), "alice listed bob's files");
    let other = alice
        .client
        .complete(complete("file:///{path}", "path", "", None))
        .await
        .expect("complete");
    assert!(other.completion.values.is_empty());
}
