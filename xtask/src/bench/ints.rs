//! `--ints`: integer work in a sandbox, where numpy's integers are 64-bit in the user's code,
//! beside native numpy (one process, the pinned venv of tests/native) and beside the same code
//! run as a library's code in the same sandbox, whose integers are the 32-bit ones every
//! sandbox had before (the cost of being native, measured in one process). Medians in ms,
//! measured inside each interpreter (`ints.py`), so a tool call's overhead is not in them.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{call, new_sandbox, spawn, wait_for_warm};
use super::table::Row;

const SCRIPT: &str = include_str!("ints.py");

/// The rows, in the order `ints.py` names its cases, with what each measures.
const CASES: [(&str, &str); 5] = [
    ("create", "np.arange(1_000_000)"),
    ("add", "a + a, 1,000,000 integers"),
    ("sum", "a.sum(), 1,000,000 integers"),
    ("from a list", "np.array(list of 1,000,000 Python ints)"),
    (
        "groupby-sum",
        "df.groupby('k')['v'].sum(), 1,000,000 rows, 100 groups",
    ),
];

fn ms(v: &Value) -> anyhow::Result<Duration> {
    let v = v.as_f64().ok_or_else(|| anyhow::anyhow!("not a timing: {v}"))?;
    Ok(Duration::from_secs_f64(v / 1000.0))
}

/// Native numpy's medians (the script run as a program).
fn native(root: &Path) -> anyhow::Result<Value> {
    let venv = xtask::pyvenv::ensure(&root.join("tests/native"), &|m| eprintln!("{m}"))?;
    let out = std::process::Command::new(xtask::pyvenv::tool(&venv, "python"))
        .args(["-c", SCRIPT, "native"])
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "native numpy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice::<Value>(&out.stdout)?["user"].clone())
}

/// The sandbox's medians, as the user's code and as a library's.
async fn sandboxed(bin: &Path, home: &Path) -> anyhow::Result<Value> {
    let c = spawn(bin, home).await?;
    wait_for_warm(&c).await?;
    let id = new_sandbox(&c).await?;
    let code = format!("{SCRIPT}\nimport json as _json\nprint(_json.dumps(both()))");
    let v = call(
        &c,
        "execute_code",
        json!({"sandbox_id": id, "code": code, "timeout_seconds": 300}),
    )
    .await?;
    let _ = c.cancel().await;
    let out = v["stdout"].as_str().unwrap_or_default();
    serde_json::from_str(out.trim()).map_err(|e| anyhow::anyhow!("the sandbox's timings ({e}): {v}"))
}

pub async fn rows(root: &Path, bin: &Path, home: &Path) -> anyhow::Result<(Vec<Row>, String)> {
    eprintln!("bench: integer work in native numpy");
    let native = native(root)?;
    eprintln!("bench: the same in a sandbox, as the user's code and as a library's");
    let ours = sandboxed(bin, home).await?;
    let mut rows = Vec::new();
    for (key, what) in CASES {
        let user = ms(&ours["user"][key])?;
        rows.push(Row {
            what: format!("{what}: int64, in the user's code"),
            ours: user,
            baseline: Some(("native numpy, one process".into(), ms(&native[key])?)),
            runs: 15,
        });
        rows.push(Row {
            what: format!("{what}: int64, in the user's code"),
            ours: user,
            baseline: Some((
                "the same sandbox, as a library's code (int32, as before)".into(),
                ms(&ours["library"][key])?,
            )),
            runs: 15,
        });
    }
    let note = format!(
        "Integers: the user's code made {} arrays, a library's {}, native numpy {}.",
        ours["user"]["dtype"], ours["library"]["dtype"], native["dtype"]
    );
    Ok((rows, note))
}
