//! `--views`: what the result view and notebooks cost. `read_table` of 500 rows of a
//! 1,000,000-row DataFrame, unsorted and sorted, beside native CPython's pandas doing the same
//! (slice or sort, then the rows as JSON) in-process; `export_notebook` of a 100-cell session;
//! and the view's size.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::{Client, call, new_sandbox, spawn, wait_for_warm};
use super::table::{Row, median};

const RUNS: usize = 20;
const ROWS: u64 = 1_000_000;

/// The same work in native pandas: medians in ms of (unsorted page, sort + page, page of a
/// kept order), and pandas' version.
const NATIVE: &str = r#"
import json, statistics, sys, time
import numpy as np, pandas as pd
n, runs = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(1)
df = pd.DataFrame({"a": rng.random(n), "b": np.arange(n), "c": rng.choice(["x", "y", "z"], n)})
def page(part):
    return json.dumps(part.to_numpy().tolist(), default=str)
def timed(f):
    out = []
    for i in range(runs):
        t = time.perf_counter(); f(i); out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)
def first(values, k):
    # The selection the sandbox's read_table makes: partition, then sort what it kept.
    bound = np.partition(values, k - 1)[k - 1]
    chosen = np.flatnonzero((values < bound) | (values == bound))
    return chosen[np.lexsort((chosen, values[chosen]))][:k]
a = df["a"].to_numpy()
unsorted = timed(lambda i: page(df.iloc[(i * 37_000) % n:][:500]))
fresh = timed(lambda i: page(df.iloc[first(-a if i % 2 else a, 500)]))
full = timed(lambda i: page(df.sort_values("a", ascending=bool(i % 2), kind="stable").iloc[:500]))
order = df["a"].sort_values(kind="stable").index.to_numpy()
kept = timed(lambda i: page(df.iloc[order[i * 500:(i + 1) * 500]]))
print(json.dumps([unsorted, fresh, kept, pd.__version__, full]))
"#;

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v / 1000.0)
}

/// The pages `read_table` served: at offsets, sorted anew, and past row 100,000 of a kept order.
struct Pages {
    unsorted: Vec<Duration>,
    fresh: Vec<Duration>,
    kept: Vec<Duration>,
}

pub async fn rows(root: &Path, bin: &Path, home: &Path) -> anyhow::Result<(Vec<Row>, String)> {
    let native = native_pandas(root)?;
    let n = |i: usize| native[i].as_f64().unwrap_or(f64::NAN);
    eprintln!("bench: read_table on {ROWS} rows in a sandbox");
    let c = spawn(bin, home).await?;
    wait_for_warm(&c).await?;
    let sb = new_sandbox(&c).await?;
    let shown = call(
        &c,
        "execute_code",
        json!({"sandbox_id": sb, "code": format!(
            "import numpy as np, pandas as pd\nrng = np.random.default_rng(1)\n\
             df = pd.DataFrame({{'a': rng.random({ROWS}), 'b': np.arange({ROWS}), 'c': rng.choice(['x', 'y', 'z'], {ROWS})}})\ndf")}),
    )
    .await?;
    let handle = shown["table"]["handle"].as_str().unwrap_or_default().to_string();
    anyhow::ensure!(!handle.is_empty(), "the DataFrame came without a table: {shown}");
    let version = call(
        &c,
        "execute_code",
        json!({"sandbox_id": sb, "code": "pd.__version__"}),
    )
    .await?;
    let pages = pages(&c, &handle).await?;
    let (export, nb_bytes) = notebook(&c).await?;
    let _ = c.cancel().await;
    let row = Row::new;
    let rows = vec![
        row(
            format!("read_table, 500 rows of a {ROWS}-row DataFrame, unsorted"),
            median(pages.unsorted),
            Some(("native pandas: the slice as JSON, in-process", ms(n(0)))),
            RUNS,
        ),
        row(
            format!("read_table, 500 rows of a {ROWS}-row DataFrame, sorted anew (float column)"),
            median(pages.fresh),
            Some(("native pandas, the same selection + the page as JSON", ms(n(1)))),
            RUNS,
        ),
        row(
            "read_table, sorted, pages past row 100,000 (the whole order sorted once, then kept)".into(),
            median(pages.kept),
            Some(("native pandas: the page of a kept order as JSON", ms(n(2)))),
            RUNS,
        ),
        row(
            "export_notebook of a 100-cell session (25 figures, 25 tables)".into(),
            median(export),
            None,
            5,
        ),
    ];
    let note = format!(
        "Views: the result view is {} bytes of HTML, scripts and styles inline. The notebook of the 100-cell session is {} bytes. \
         pandas in the sandbox {}, natively {}; the read_table rows include the MCP round trip over stdio. A first page of a \
         new order selects the first rows in linear time instead of sorting all of them (native pandas' full stable \
         sort_values of the column takes {:.1} ms); pages past row 50,000 of an order, and text columns, sort fully once \
         and keep the order.",
        include_str!("../../../src/server/view/result.html").len(),
        nb_bytes,
        version["result"].as_str().unwrap_or("?").trim_matches('\''),
        native[3].as_str().unwrap_or("?"),
        n(4),
    );
    Ok((rows, note))
}

/// The same work in native pandas, as [`NATIVE`] prints it.
fn native_pandas(root: &Path) -> anyhow::Result<serde_json::Value> {
    let venv = xtask::pyvenv::ensure(&root.join("tests/native"), &|m| eprintln!("{m}"))?;
    eprintln!("bench: native pandas on {ROWS} rows");
    let out = std::process::Command::new(xtask::pyvenv::tool(&venv, "python"))
        .args(["-c", NATIVE, &ROWS.to_string(), &RUNS.to_string()])
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "native pandas: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Pages of 500 rows of the table `handle`, each timed.
async fn pages(c: &Client, handle: &str) -> anyhow::Result<Pages> {
    let page = |args: serde_json::Value| async move {
        let t = Instant::now();
        let r = call(c, "read_table", args).await?;
        anyhow::ensure!(
            r["rows"].as_array().map_or(0, Vec::len) == 500,
            "a short page: {r}"
        );
        anyhow::Ok(t.elapsed())
    };
    let (mut unsorted, mut fresh, mut kept) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..RUNS as u64 {
        unsorted.push(page(json!({"handle": handle, "offset": (i * 37_000) % ROWS, "limit": 500})).await?);
        // Alternating the direction makes every request sort anew.
        fresh.push(
            page(json!({"handle": handle, "sort_by": "a", "descending": i % 2 == 1, "limit": 500})).await?,
        );
    }
    // Past row 50,000 the whole order is sorted once and kept; the pages after read it.
    page(json!({"handle": handle, "sort_by": "a", "offset": 100_000, "limit": 500})).await?;
    for i in 0..RUNS as u64 {
        kept.push(
            page(json!({"handle": handle, "sort_by": "a", "offset": 100_000 + i * 500, "limit": 500}))
                .await?,
        );
    }
    Ok(Pages {
        unsorted,
        fresh,
        kept,
    })
}

/// `export_notebook` of a 100-cell session, each timed; the notebook's size.
async fn notebook(c: &Client) -> anyhow::Result<(Vec<Duration>, u64)> {
    eprintln!("bench: export_notebook of a 100-cell session");
    let nb = new_sandbox(c).await?;
    for i in 0..100 {
        let code = match i % 4 {
            0 => format!("print('cell {i}')"),
            1 => format!("import pandas as pd\npd.DataFrame({{'x': range({i}), 'y': range({i})}})"),
            2 => format!("{i} ** 2"),
            _ => "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nNone".to_string(),
        };
        call(c, "execute_code", json!({"sandbox_id": nb, "code": code})).await?;
    }
    let mut export = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let r = call(c, "export_notebook", json!({"sandbox_id": nb})).await?;
        export.push(t.elapsed());
        anyhow::ensure!(r["cells"] == 100, "{r}");
    }
    let size = call(c, "list_files", json!({"sandbox_id": nb})).await?;
    let nb_bytes = size["entries"]
        .as_array()
        .and_then(|e| e.iter().find(|f| f["name"] == "session.ipynb"))
        .and_then(|f| f["size"].as_u64())
        .unwrap_or(0);
    Ok((export, nb_bytes))
}
