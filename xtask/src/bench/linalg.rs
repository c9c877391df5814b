//! `--linalg`: linear algebra, sorting and scikit-learn in a sandbox (host kernels on, as
//! served), beside native numpy on one BLAS thread and on all of them, and beside the same
//! sandbox with `CODE_SANDBOX_HOST_KERNELS=0` (the runtime's own WebAssembly kernels). Medians
//! in ms, measured inside each interpreter (`linalg.py`), so a tool call's overhead is not in
//! them.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{call, new_sandbox, serve, wait_for_warm};
use super::table::Row;

const SCRIPT: &str = include_str!("linalg.py");

/// The rows, in the order `linalg.py` names its cases, with what each measures and the runs
/// `linalg.py` takes of it.
const CASES: [(&str, &str, usize); 10] = [
    ("matmul f64", "512x512 float64 matmul", 9),
    ("matmul f32", "512x512 float32 matmul", 9),
    ("solve", "np.linalg.solve, 1000x1000", 5),
    ("svd", "np.linalg.svd, 300x300", 5),
    ("eigh", "np.linalg.eigh, 500x500", 5),
    ("xtx", "x.T @ x, 100,000x50", 5),
    ("sort", "np.sort, 2,000,000 float64 (with generating them)", 5),
    ("pca", "scikit-learn PCA(10) fit, 100,000x50", 3),
    ("kmeans", "scikit-learn KMeans(8) fit, 100,000x10", 3),
    ("linreg", "scikit-learn LinearRegression fit, 100,000x100", 3),
];

fn ms(v: &Value) -> anyhow::Result<Duration> {
    let v = v.as_f64().ok_or_else(|| anyhow::anyhow!("not a timing: {v}"))?;
    Ok(Duration::from_secs_f64(v / 1000.0))
}

/// Native numpy's medians (the script run as a program), on `threads` BLAS threads (None: all).
fn native(root: &Path, threads: Option<usize>) -> anyhow::Result<Value> {
    let venv = xtask::pyvenv::ensure(&root.join("tests/native"), &|m| eprintln!("{m}"))?;
    let mut cmd = std::process::Command::new(xtask::pyvenv::tool(&venv, "python"));
    if let Some(n) = threads {
        cmd.env("OPENBLAS_NUM_THREADS", n.to_string());
    }
    let out = cmd.args(["-c", SCRIPT]).output()?;
    anyhow::ensure!(
        out.status.success(),
        "native numpy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// A sandbox's medians, its server started with `settings`.
async fn sandboxed(bin: &Path, home: &Path, settings: &[(&str, &str)]) -> anyhow::Result<Value> {
    let (c, _) = serve(bin, home, settings).await?;
    wait_for_warm(&c).await?;
    let id = new_sandbox(&c).await?;
    // The code runs as `__main__`: the script prints its timings itself.
    let v = call(
        &c,
        "execute_code",
        json!({"sandbox_id": id, "code": SCRIPT, "timeout_seconds": 300}),
    )
    .await?;
    let _ = c.cancel().await;
    let out = v["stdout"].as_str().unwrap_or_default();
    serde_json::from_str(out.trim()).map_err(|e| anyhow::anyhow!("the sandbox's timings ({e}): {v}"))
}

pub async fn rows(root: &Path, bin: &Path, home: &Path) -> anyhow::Result<(Vec<Row>, String)> {
    eprintln!("bench: linear algebra in native numpy, one BLAS thread and all of them");
    let single = native(root, Some(1))?;
    let all = native(root, None)?;
    eprintln!("bench: the same in a sandbox, host kernels on and off");
    let ours = sandboxed(bin, home, &[]).await?;
    let guest = sandboxed(bin, home, &[("CODE_SANDBOX_HOST_KERNELS", "0")]).await?;
    let mut rows = Vec::new();
    for (key, what, runs) in CASES {
        let baselines = [
            ("native numpy, one BLAS thread", &single),
            ("native numpy, all threads", &all),
            ("the same sandbox, CODE_SANDBOX_HOST_KERNELS=0", &guest),
        ];
        for (name, of) in baselines {
            rows.push(Row {
                what: what.to_string(),
                ours: ms(&ours[key])?,
                baseline: Some((name.into(), ms(&of[key])?)),
                runs,
            });
        }
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let note = format!(
        "Linear algebra: {threads} cores here; host kernels ran on {} thread(s) (CODE_SANDBOX_KERNEL_THREADS=0: one fewer than the cores).",
        threads.saturating_sub(1).max(1)
    );
    Ok((rows, note))
}
