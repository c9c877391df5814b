//! Same answers as native Python: numpy's default integer is 64-bit in every sandbox (new,
//! warm-started, forked, checkpointed and restored, started from the plain image), and a
//! corpus of integer-heavy analysis code gives what native CPython with numpy, pandas, scipy
//! and scikit-learn gives, value for value and dtype for dtype, but for the differences
//! docs/packages.md lists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Value, json};

use crate::common::{Server, repo_root, run};

/// The examples: each expression and what native CPython (64-bit) prints for it.
const EXAMPLES: &str = "import numpy as np, pandas as pd
from sklearn.datasets import load_sample_image
[
    int(np.arange(3_000_000).sum()) == 4499998500000,
    int(np.prod(np.arange(1, 21))) == 2432902008176640000,
    int((np.ones(100000, dtype=np.int16) * 30000).sum()) == 3000000000,
    str(np.array([1, 2, 3]).dtype), str(np.dtype(int)), str(np.arange(5).dtype),
    str(pd.Series(np.arange(10)).dtype),
    str(np.random.RandomState(0).randint(0, 10, 5).dtype),
    load_sample_image('china.jpg').shape,
]";

const NATIVE: &str = "[True, True, True, 'int64', 'int64', 'int64', 'int64', 'int64', (427, 640, 3)]";

/// The numpy examples alone, for a sandbox too small for pandas and scikit-learn.
const PLAIN: &str = "import sys\nwarm = 'numpy' in sys.modules\nimport numpy as np
warm, int(np.arange(3_000_000).sum()), str(np.dtype(int)), str(np.array([1, 2]).dtype), \
str(np.random.RandomState(0).randint(0, 10, 5).dtype)";

/// Asserts the examples give native's answers in sandbox `id`, saying where it was made.
async fn assert_native(s: &Server, id: &str, how: &str) {
    let v = run(s, id, EXAMPLES).await;
    assert_eq!(v["result"], NATIVE, "in a {how} sandbox: {v}");
}

#[tokio::test]
async fn every_kind_of_sandbox_has_64_bit_integers() {
    let s = Server::start().await;
    let id = s.create().await;
    assert_native(&s, &id, "new").await;
    // Arrays made before a fork or checkpoint stay what they were after it.
    run(&s, &id, "import numpy as np\nkept = np.arange(2**20) * 4096").await;
    let fork = s.ok("fork_sandbox", json!({"sandbox_id": id})).await;
    let fork = fork["sandbox_id"].as_str().expect("the fork's id").to_string();
    assert_native(&s, &fork, "forked").await;
    s.ok("checkpoint_sandbox", json!({"sandbox_id": id, "name": "ints"}))
        .await;
    run(&s, &id, "kept = None").await;
    s.ok("restore_sandbox", json!({"sandbox_id": id, "checkpoint": "ints"}))
        .await;
    assert_native(&s, &id, "restored").await;
    let v = run(&s, &id, "str(kept.dtype), int(kept.sum())").await;
    assert_eq!(v["result"], "('int64', 2251797666201600)", "{v}");
    // Too little memory for the warm image: started plain, numpy imported by the code.
    let small = s.create_with(json!({"memory_mb": 128})).await;
    let v = run(&s, &small, PLAIN).await;
    assert_eq!(
        v["result"], "(False, 4499998500000, 'int64', 'int64', 'int64')",
        "{v}"
    );
    s.stop().await;
}

/// The cases docs/packages.md lists under "Differences from native Python": each line
/// `- \`case name\`: what differs`.
fn documented_differences() -> BTreeSet<String> {
    let page = std::fs::read_to_string(repo_root().join("docs/packages.md")).expect("docs/packages.md");
    let section = page
        .split("## Differences from native Python")
        .nth(1)
        .expect("docs/packages.md has a section \"Differences from native Python\"");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split_once("`:").map(|(name, _)| name.to_string()))
        .collect()
}

/// What `script` (in tests/native) prints, run by native CPython (the pinned venv there) with
/// one BLAS thread.
pub fn native_answers(dir: &Path, script: &str) -> Value {
    let venv = xtask::pyvenv::ensure(dir, &|m| crate::common::progress(m)).unwrap_or_else(|e| panic!("{e}"));
    let out = std::process::Command::new(xtask::pyvenv::tool(&venv, "python"))
        .env("OPENBLAS_NUM_THREADS", "1")
        .arg(dir.join(script))
        .output()
        .expect("run native CPython");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the corpus prints JSON")
}

/// What module `name`'s `run()` gives in a sandbox: the file (`source`) written there as
/// `name.py`, imported and run.
pub async fn sandbox_answers(s: &Server, name: &str, source: &str) -> Value {
    let id = s.create().await;
    s.ok(
        "write_file",
        json!({"sandbox_id": id, "file_path": format!("{name}.py"), "content": source}),
    )
    .await;
    let code = format!(
        "import sys, json\nsys.path.insert(0, '/home/user')\nimport {name}\nopen('answers.json', 'w').write(json.dumps({name}.run(), sort_keys=True))"
    );
    let v = run(s, &id, &code).await;
    assert!(v["error"].is_null(), "the corpus failed in the sandbox: {v}");
    let mut text = String::new();
    let mut offset = 0;
    loop {
        let page = s
            .ok(
                "read_file",
                json!({"sandbox_id": id, "file_path": "answers.json", "offset": offset}),
            )
            .await;
        text.push_str(page["content"].as_str().expect("text content"));
        match page["next_offset"].as_u64() {
            Some(next) => offset = next,
            None => break,
        }
    }
    serde_json::from_str(&text).expect("the sandbox wrote JSON")
}

#[tokio::test]
async fn a_corpus_of_integer_heavy_code_gives_native_answers() {
    let dir = repo_root().join("tests/native");
    let corpus = std::fs::read_to_string(dir.join("corpus.py")).expect("tests/native/corpus.py");
    let native = native_answers(&dir, "corpus.py");
    let s = Server::start().await;
    let ours = sandbox_answers(&s, "corpus", &corpus).await;
    s.stop().await;
    let (native, ours) = (&native["answers"], &ours["answers"]);
    let names: BTreeSet<&String> = native.as_object().expect("answers").keys().collect();
    assert!(names.len() >= 200, "the corpus has {} cases", names.len());
    let mut differ = BTreeMap::new();
    for name in &names {
        if native[name.as_str()] != ours[name.as_str()] {
            differ.insert(
                name.to_string(),
                (native[name.as_str()].clone(), ours[name.as_str()].clone()),
            );
        }
    }
    let documented = documented_differences();
    let undocumented: Vec<_> = differ.iter().filter(|(n, _)| !documented.contains(*n)).collect();
    assert!(
        undocumented.is_empty(),
        "{} of {} cases differ from native Python and are not in docs/packages.md's \"Differences from native Python\" (native, then sandbox):\n{undocumented:#?}",
        undocumented.len(),
        names.len()
    );
    let stale: Vec<_> = documented.iter().filter(|n| !differ.contains_key(*n)).collect();
    assert!(
        stale.is_empty(),
        "docs/packages.md lists differences that are gone: {stale:?}"
    );
    crate::common::progress(&format!(
        "native answers: {} of {} corpus cases equal, {} documented differences",
        names.len() - differ.len(),
        names.len(),
        differ.len()
    ));
}

#[tokio::test]
async fn the_model_is_told_what_stays_32_bit() {
    let s = Server::start().await;
    let said = crate::common::tool_description(&s.client, "execute_code").await;
    assert!(said.contains("numpy's integers are 64-bit"), "{said}");
    assert!(said.contains(".astype(np.int64)"), "{said}");
    s.stop().await;
}

/// A home whose cache is its own (links to the shared compiled files, so renaming one there
/// leaves the shared cache alone), sharing the installed runtime and wheels.
fn home_with_own_cache() -> std::path::PathBuf {
    crate::common::ensure_runtime();
    let shared = crate::common::runtime_home();
    let home = std::env::temp_dir().join(format!("mcs-older-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(home.join("cache")).expect("make the home");
    for d in ["runtime", "wheels"] {
        crate::common::link_dir(&shared.join(d), &home.join(d)).expect("link the shared runtime");
    }
    for e in std::fs::read_dir(shared.join("cache"))
        .expect("the shared cache")
        .flatten()
    {
        if e.path().is_file() {
            std::fs::hard_link(e.path(), home.join("cache").join(e.file_name())).expect("link a cached file");
        }
    }
    home
}

/// Waits until a warm image other than the renamed ones is in the cache (its record is
/// written last).
async fn wait_for_new_warm_image(cache: &Path) {
    let began = std::time::Instant::now();
    loop {
        let built = std::fs::read_dir(cache).expect("the cache").flatten().any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("warm-") && !name.starts_with("warm-earlier") && name.ends_with(".json")
        });
        if built {
            return;
        }
        assert!(
            began.elapsed().as_secs() < 600,
            "no new warm image was built in ten minutes"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn a_sandbox_saved_from_an_earlier_warm_image_comes_back_with_its_arrays() {
    let home = home_with_own_cache();
    let dir = home.display().to_string();
    let envs = [
        ("CODE_SANDBOX_HOME", dir.as_str()),
        ("CODE_SANDBOX_PERSIST", "true"),
    ];
    let s = Server::start_with(&envs).await;
    let id = s.create().await;
    let v = run(
        &s,
        &id,
        "import numpy as np\nkept = np.arange(5, dtype=np.int32) * 2\nx = 41\nstr(kept.dtype)",
    )
    .await;
    assert_eq!(v["result"], "'int32'", "{v}");
    s.stop().await;
    // The warm image it was saved from is no longer the one the server starts from (as after
    // an upgrade), but still in the cache under another name.
    let cache = home.join("cache");
    for e in std::fs::read_dir(&cache).expect("the cache").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(rest) = name.strip_prefix("warm-") {
            std::fs::rename(e.path(), cache.join(format!("warm-earlier{rest}"))).expect("rename");
        }
    }
    let s = Server::start_with(&envs).await;
    s.call_json("get_sandbox_status", json!({})).await;
    wait_for_new_warm_image(&cache).await;
    let v = run(
        &s,
        &id,
        "str(kept.dtype), kept.tolist(), x + 1, str(np.arange(3).dtype)",
    )
    .await;
    assert_eq!(v["result"], "('int32', [0, 2, 4, 6, 8], 42, 'int64')", "{v}");
    assert_eq!(v["state_lost"], false, "{v}");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}
