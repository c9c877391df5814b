//! `--folders`: the user's own files. A 1 GiB CSV in a shared folder read with pandas in chunks
//! (time to the first chunk, and a whole pass) beside native CPython's pandas on the same file,
//! and beside the way in before shared folders: `upload_file` (at most 100 MB, so a 100 MB
//! part of it) and then the same read; the disk each way costs. And `save_file` of a 100 MB
//! result beside `cp` of the same file.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::{Client, call, new_sandbox, serve, tree_bytes, wait_for_warm};
use super::table::{Row, median};

const RUNS: usize = 5;
const CSV_BYTES: u64 = 1 << 30;
const PART_BYTES: u64 = 100_000_000;
const SAVE_BYTES: u64 = 100 << 20;

/// Native pandas on the same file: medians in ms of (first chunk, whole chunked pass).
const NATIVE: &str = r#"
import json, statistics, sys, time
import pandas as pd
path, runs = sys.argv[1], int(sys.argv[2])
def first():
    t = time.perf_counter(); next(pd.read_csv(path, chunksize=100_000)); return (time.perf_counter() - t) * 1000
def whole():
    t = time.perf_counter(); sum(int(c["units"].sum()) for c in pd.read_csv(path, chunksize=1_000_000)); return (time.perf_counter() - t) * 1000
print(json.dumps([statistics.median(first() for _ in range(runs)), whole()]))
"#;

const FIRST_CHUNK: &str = "import pandas as pd\nnext(pd.read_csv(PATH, chunksize=100_000)).shape[0]";
const WHOLE_PASS: &str =
    "import pandas as pd\nsum(int(c['units'].sum()) for c in pd.read_csv(PATH, chunksize=1_000_000))";

/// A CSV of about `bytes`: an id, a region and units, like an export.
fn write_csv(path: &Path, bytes: u64) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    out.write_all(b"id,region,units,price\n")?;
    let (mut written, mut i) = (0u64, 0u64);
    while written < bytes {
        let line = format!(
            "{i},{},{},{}.{:02}\n",
            ["North", "South", "East", "West"][(i % 4) as usize],
            i % 97,
            i % 1000,
            i % 100
        );
        out.write_all(line.as_bytes())?;
        written += line.len() as u64;
        i += 1;
    }
    out.flush()?;
    Ok(())
}

async fn timed(c: &Client, sb: &str, code: &str) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let v = call(
        c,
        "execute_code",
        json!({"sandbox_id": sb, "code": code, "timeout_seconds": 300}),
    )
    .await?;
    anyhow::ensure!(v["error"].is_null(), "the read failed: {v}");
    Ok(t.elapsed())
}

fn native(root: &Path, csv: &Path) -> anyhow::Result<(Duration, Duration)> {
    let venv = xtask::pyvenv::ensure(&root.join("tests/native"), &|m| eprintln!("{m}"))?;
    let out = std::process::Command::new(xtask::pyvenv::tool(&venv, "python"))
        .args(["-c", NATIVE])
        .arg(csv)
        .arg(RUNS.to_string())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "native pandas: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let ms = |i: usize| Duration::from_secs_f64(v[i].as_f64().unwrap_or(f64::NAN) / 1000.0);
    Ok((ms(0), ms(1)))
}

pub async fn rows(root: &Path, bin: &Path, home: &Path) -> anyhow::Result<(Vec<Row>, String)> {
    let work = std::env::temp_dir().join(format!("mcs-bench-folders-{}", std::process::id()));
    let (data, part_dir, out) = (work.join("data"), work.join("upload"), work.join("out"));
    for d in [&data, &part_dir, &out] {
        std::fs::create_dir_all(d)?;
    }
    eprintln!("bench: writing a 1 GiB CSV and a 100 MB one");
    let (csv, part) = (data.join("export.csv"), part_dir.join("part.csv"));
    write_csv(&csv, CSV_BYTES)?;
    write_csv(&part, PART_BYTES)?;
    let (native_first, native_whole) = native(root, &csv)?;
    let settings = [
        ("CODE_SANDBOX_READ_DIRS", data.to_str().unwrap_or_default()),
        ("CODE_SANDBOX_UPLOAD_DIRS", part_dir.to_str().unwrap_or_default()),
        ("CODE_SANDBOX_SAVE_DIRS", out.to_str().unwrap_or_default()),
        ("CODE_SANDBOX_DISK_MB", "2048"),
    ];
    let (c, _) = serve(bin, home, &settings).await?;
    eprintln!("bench: waiting for the warm image made for the shared folder");
    wait_for_warm(&c).await?;
    let sb = new_sandbox(&c).await?;
    let sandboxes = home.join("sandboxes");
    let before = tree_bytes(&sandboxes);
    let shared_code = |code: &str| code.replace("PATH", "'/mnt/data/export.csv'");
    let mut first = Vec::new();
    for _ in 0..RUNS {
        first.push(timed(&c, &sb, &shared_code(FIRST_CHUNK)).await?);
    }
    let whole = timed(&c, &sb, &shared_code(WHOLE_PASS)).await?;
    let copied = tree_bytes(&sandboxes).saturating_sub(before);

    let (uploaded, upload_copied) = uploads(&c, &sandboxes, &part).await?;
    let (save, cp) = save_rows(&c, &sb, home, &out).await?;
    let _ = c.cancel().await;
    let _ = std::fs::remove_dir_all(&work);
    let row = Row::new;
    let rows = vec![
        row(
            "shared folder: first 100,000 rows of a 1 GiB CSV (`pd.read_csv(chunksize=...)` on `/mnt`)"
                .into(),
            median(first),
            Some(("native pandas, same file", native_first)),
            RUNS,
        ),
        row(
            "shared folder: the whole 1 GiB CSV in chunks".into(),
            whole,
            Some(("native pandas, same file", native_whole)),
            1,
        ),
        row(
            "before: `upload_file` of a 100 MB CSV (its limit), then its first 100,000 rows".into(),
            median(uploaded),
            None,
            RUNS,
        ),
        row(
            "`save_file` of a 100 MB result into a save folder".into(),
            save,
            Some(("`cp` of the same file", cp)),
            RUNS,
        ),
    ];
    let note = format!(
        "Disk copied into the sandbox: {} bytes reading the 1 GiB CSV from the shared folder (goal: zero); {} bytes for one 100 MB upload. A 1 GiB file cannot be uploaded at all (upload_file takes at most 100 MB).",
        copied, upload_copied
    );
    Ok((rows, note))
}

/// The same read after `upload_file` (100 MB, its limit), each into a new sandbox: the times,
/// and the bytes one upload copied.
async fn uploads(c: &Client, sandboxes: &Path, part: &Path) -> anyhow::Result<(Vec<Duration>, u64)> {
    eprintln!("bench: the same read after upload_file (100 MB, its limit)");
    let mut uploaded = Vec::new();
    let mut upload_copied = 0;
    for _ in 0..RUNS {
        let fresh = new_sandbox(c).await?;
        let before = tree_bytes(sandboxes);
        let t = Instant::now();
        call(
            c,
            "upload_file",
            json!({"sandbox_id": fresh, "source_path": part.to_str()}),
        )
        .await?;
        timed(c, &fresh, &FIRST_CHUNK.replace("PATH", "'part.csv'")).await?;
        uploaded.push(t.elapsed());
        upload_copied = tree_bytes(sandboxes).saturating_sub(before);
        call(c, "close_sandbox", json!({"sandbox_id": fresh})).await?;
    }
    Ok((uploaded, upload_copied))
}

/// `save_file` of a 100 MB file (overwriting the last run's) beside `cp` of the same bytes.
async fn save_rows(c: &Client, sb: &str, home: &Path, out: &Path) -> anyhow::Result<(Duration, Duration)> {
    call(
        c,
        "execute_code",
        json!({"sandbox_id": sb, "code": format!("open('result.bin', 'wb').write(b'r' * {SAVE_BYTES})")}),
    )
    .await?;
    let source = home.join("sandboxes").join(sb).join("result.bin");
    let dest = out.join("result.bin");
    let (mut saves, mut cps) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let t = Instant::now();
        let v = call(
            c,
            "save_file",
            json!({"sandbox_id": sb, "path": "result.bin", "destination": dest.to_str(), "overwrite": true}),
        )
        .await?;
        saves.push(t.elapsed());
        anyhow::ensure!(v["bytes_written"] == SAVE_BYTES, "save_file: {v}");
        let t = Instant::now();
        let ok = std::process::Command::new("cp")
            .arg(&source)
            .arg(out.join("copy.bin"))
            .status()?
            .success();
        cps.push(t.elapsed());
        anyhow::ensure!(ok, "cp {} failed", source.display());
    }
    Ok((median(saves), median(cps)))
}
