//! What the result view and notebooks read: a DataFrame shown as a call's value comes with
//! its first rows as a table, `read_table` pages and sorts it from the value kept in the
//! sandbox (and only the caller's own), and `export_notebook` writes the session as a notebook
//! that nbformat's validator accepts and nbconvert turns into HTML.

use serde_json::{Value, json};

use crate::common::{self, Server};
use crate::remote_harness::Remote;

async fn page(s: &Server, args: Value) -> (bool, Value, String) {
    s.call_json("read_table", args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dataframe_comes_as_a_table_that_read_table_pages_and_sorts() {
    let s = Server::start().await;
    let sb = s.create().await;
    let v = s
        .run_ok(
            &sb,
            "import pandas as pd, numpy as np\n\
             df = pd.DataFrame({'n': range(1000), 'half': [i / 2 for i in range(1000)],\n\
                                's': [f'<script>alert({i})</script>' for i in range(1000)]})\n\
             df.loc[3, 'half'] = np.nan\n\
             df",
        )
        .await;
    let t = &v["table"];
    assert_eq!(t["columns"], json!(["n", "half", "s"]), "{v}");
    assert_eq!(
        t["dtypes"],
        json!(["int64", "float64", "str"]),
        "pandas 3 names text columns str"
    );
    assert_eq!(t["total_rows"], 1000);
    assert_eq!(t["rows"].as_array().unwrap().len(), 100);
    assert_eq!(t["rows"][2], json!([2, 1.0, "<script>alert(2)</script>"]));
    assert_eq!(t["rows"][3][1], Value::Null, "NaN is null");
    assert!(
        v["result"].as_str().unwrap().contains("[1000 rows x 3 columns]"),
        "the text stays for the model"
    );
    let handle = t["handle"].as_str().unwrap().to_string();
    assert!(
        handle.starts_with(&format!("{sb}:")),
        "the handle names its sandbox: {handle}"
    );

    let (err, p, text) = page(&s, json!({"handle": handle, "offset": 500, "limit": 500})).await;
    assert!(!err, "{text}");
    assert_eq!(p["rows"].as_array().unwrap().len(), 500);
    assert_eq!(p["rows"][0][0], 500);
    assert_eq!(p["offset"], 500);
    let (_, p, _) = page(&s, json!({"handle": handle, "limit": 100000})).await;
    assert_eq!(
        p["rows"].as_array().unwrap().len(),
        500,
        "at most 500 rows a page"
    );
    let (err, p, text) = page(
        &s,
        json!({"handle": handle, "sort_by": "n", "descending": true, "limit": 3}),
    )
    .await;
    assert!(!err, "{text}");
    assert_eq!(p["rows"][0][0], 999);
    assert_eq!(p["rows"][2][0], 997);
    // Missing values sort last either way.
    let (_, p, _) = page(
        &s,
        json!({"handle": handle, "sort_by": "half", "offset": 999, "limit": 1}),
    )
    .await;
    assert_eq!(p["rows"][0][1], Value::Null);
    let (err, _, text) = page(&s, json!({"handle": handle, "sort_by": "nope"})).await;
    assert!(err && text.contains("no column 'nope'"), "{text}");

    // A page of a new order picks its rows without sorting them all: the same rows, ties in
    // their order, as pandas' own stable sort.
    let v = s
        .run_ok(&sb, "ties = pd.DataFrame({'g': [i % 7 for i in range(5000)], 'i': range(5000)})\nties.loc[5, 'g'] = None\nties")
        .await;
    let ties = v["table"]["handle"].as_str().unwrap().to_string();
    for descending in [false, true] {
        let (err, p, text) = page(
            &s,
            json!({"handle": ties, "sort_by": "g", "descending": descending, "offset": 10, "limit": 50}),
        )
        .await;
        assert!(!err, "{text}");
        let got: Vec<i64> = p["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r[1].as_i64().unwrap())
            .collect();
        let asc = if descending { "False" } else { "True" };
        let want = s
            .run_ok(&sb, &format!("list(ties.sort_values('g', ascending={asc}, kind='stable', na_position='last')['i'][10:60])"))
            .await;
        assert_eq!(
            format!("{got:?}"),
            want["result"].as_str().unwrap(),
            "descending={descending}"
        );
    }

    // Series, a 2-D array, an index that says something.
    let v = s.run_ok(&sb, "pd.Series([3, 1, 2], name='x')").await;
    assert_eq!(v["table"]["columns"], json!(["x"]));
    let v = s.run_ok(&sb, "np.arange(6).reshape(2, 3)").await;
    assert_eq!(v["table"]["columns"], json!(["0", "1", "2"]));
    assert_eq!(v["table"]["rows"][1], json!([3, 4, 5]));
    let v = s
        .run_ok(&sb, "df.assign(k=df.n % 3).groupby('k')[['n']].sum()")
        .await;
    assert_eq!(v["table"]["columns"], json!(["k", "n"]), "{v}");
    assert_eq!(v["table"]["rows"][0], json!([0, 166833]));
    assert!(
        s.run_ok(&sb, "[1, 2]").await.get("table").is_none(),
        "a list is not a table"
    );

    // The handle expires when its variable is assigned anew.
    s.run_ok(&sb, "df = 1").await;
    let (err, _, text) = page(&s, json!({"handle": handle})).await;
    assert!(err && text.contains("assigned a new value"), "{text}");
    // Only a handle's own shape reaches the guest.
    let (err, _, text) = page(&s, json!({"handle": format!("{sb}:t1); import os; (")})).await;
    assert!(err && text.contains("not a table handle"), "{text}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_table_reads_only_the_callers_own_sandboxes() {
    common::ensure_runtime();
    let remote = Remote::start(&["alice", "bob"], &[]).await;
    let alice = remote.client("alice").await;
    let bob = remote.client("bob").await;
    let sb = alice.create().await;
    let v = alice
        .run_ok(
            &sb,
            "import pandas as pd\nsecret = pd.DataFrame({'pin': [1234]})\nsecret",
        )
        .await;
    let handle = v["table"]["handle"].as_str().unwrap().to_string();
    let (err, _, text) = bob.call_json("read_table", json!({"handle": handle})).await;
    assert!(err, "bob read alice's table: {text}");
    assert!(!text.contains("1234"), "{text}");
    let (err, p, _) = alice.call_json("read_table", json!({"handle": handle})).await;
    assert!(!err);
    assert_eq!(p["rows"][0][0], 1234);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_session_exports_as_a_notebook_jupyter_reads() {
    let venv = xtask::pyvenv::ensure(&common::repo_root().join("tests/notebook"), &|m| {
        common::progress(m)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let s = Server::start().await;
    let sb = s.create().await;
    s.run_ok(&sb, "print('hello')\nx = 41").await;
    s.run_ok(
        &sb,
        "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['<img src=x onerror=alert(1)>', 'y']})",
    )
    .await;
    s.run_ok(&sb, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nx + 1")
        .await;
    let (err, _) = s.exec(&sb, "1 / 0").await;
    assert!(err);
    let out = s.ok("export_notebook", json!({"sandbox_id": sb})).await;
    assert_eq!(out["path"], "session.ipynb");
    assert_eq!(out["cells"], 4);
    let path = s.workspace(&sb).join("session.ipynb");
    let nb: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let cells = nb["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    assert_eq!(cells[0]["outputs"][0]["text"], json!(["hello\n"]));
    assert_eq!(cells[1]["execution_count"], 2);
    let html = cells[1]["outputs"][0]["data"]["text/html"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect::<String>();
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"), "{html}");
    assert!(
        cells[2]["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["data"]["image/png"].is_string())
    );
    assert_eq!(
        cells[2]["outputs"].as_array().unwrap().last().unwrap()["data"]["text/plain"],
        json!(["42"])
    );
    let error = cells[3]["outputs"].as_array().unwrap();
    assert_eq!(
        error.len(),
        1,
        "the traceback once, as the error output: {error:?}"
    );
    assert_eq!(error[0]["ename"], "ZeroDivisionError");
    assert!(
        nb["metadata"]["language_info"]["version"]
            .as_str()
            .unwrap()
            .starts_with("3."),
        "{}",
        nb["metadata"]
    );

    // The notebook reads as Jupyter's own tools read it.
    let python = venv.join("bin/python");
    let check = std::process::Command::new(&python)
        .args(["-c", "import sys, nbformat; nb = nbformat.read(sys.argv[1], as_version=4); nbformat.validate(nb); print(len(nb.cells))"])
        .arg(&path)
        .output()
        .expect("run nbformat");
    assert!(
        check.status.success(),
        "nbformat: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&check.stdout).trim(), "4");
    let html_out = std::env::temp_dir().join(format!("nb-{}", uuid::Uuid::new_v4().simple()));
    let convert = std::process::Command::new(venv.join("bin/jupyter-nbconvert"))
        .args(["--to", "html", "--output-dir"])
        .arg(&html_out)
        .arg(&path)
        .output()
        .expect("run nbconvert");
    assert!(
        convert.status.success(),
        "nbconvert: {}",
        String::from_utf8_lossy(&convert.stderr)
    );
    let page = std::fs::read_to_string(html_out.join("session.html")).unwrap();
    assert!(page.contains("ZeroDivisionError") && page.contains("hello"));
    assert!(
        !page.contains("<img src=x onerror"),
        "the guest's HTML was exported as HTML"
    );

    // A fork carries the history; the notebook survives a restart (the history is beside the sandbox).
    let fork = s.ok("fork_sandbox", json!({"sandbox_id": sb})).await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_string();
    s.run_ok(&fork, "x * 2").await;
    let out = s
        .ok(
            "export_notebook",
            json!({"sandbox_id": fork, "path": "fork.ipynb"}),
        )
        .await;
    assert_eq!(out["cells"], 5);
    let _ = std::fs::remove_dir_all(html_out);
    s.stop().await;
}

/// The view in headless Chromium inside a host page on the official MCP Apps host bridge
/// (tests/views/view.test.mjs). Chromium is $CHROMIUM, or Debian's `chromium`, installed the
/// first time (Linux only: other systems' Chromium lives elsewhere).
#[cfg(target_os = "linux")]
#[test]
fn the_view_renders_results_in_a_real_browser_through_the_official_host_bridge() {
    // $CHROMIUM, a Chromium already installed (Ubuntu names it chromium-browser), or Debian's.
    let chromium = std::env::var_os("CHROMIUM")
        .map(std::path::PathBuf::from)
        .or_else(|| xtask::debian::find("chromium-browser"))
        .unwrap_or_else(|| xtask::debian::tool_for_test("the view's browser test", "chromium", "chromium"));
    common::ensure_runtime();
    let dir = common::ensure_npm("tests/views");
    let shots = common::repo_root().join("target/view-screenshots");
    let status = std::process::Command::new("node")
        .args(["--test", "--test-concurrency=1", "view.test.mjs"])
        .current_dir(&dir)
        .env("MCP_CODE_SANDBOX_BIN", env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .env("CODE_SANDBOX_HOME", common::runtime_home())
        .env("CHROMIUM", &chromium)
        .env("VIEW_SCREENSHOTS", &shots)
        .status()
        .expect("node runs");
    assert!(
        status.success(),
        "the view's browser tests failed (output above; screenshots in {})",
        shots.display()
    );
}
