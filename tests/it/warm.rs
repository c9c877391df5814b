//! Warm images: sandboxes start with numpy, pandas and matplotlib imported, each with its own
//! randomness and files, and a damaged cached image is rebuilt.

#[cfg(unix)]
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Server, runtime_home};

const WARM_CHECK: &str =
    "import sys\nall(m in sys.modules for m in ('numpy', 'pandas', 'matplotlib.pyplot'))";

/// Waits until new sandboxes start with pandas and pyplot imported (from the warm image, or,
/// while it is built, by importing them at start).
async fn wait_for_warm(s: &Server, within: Duration) {
    let started = Instant::now();
    loop {
        let v = s.ok("create_run_close", json!({"code": WARM_CHECK})).await;
        if v["result"] == "True" {
            return;
        }
        assert!(
            started.elapsed() < within,
            "no sandbox started warm within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_fresh_sandbox_has_pandas_and_pyplot_ready_and_they_work() {
    let s = Server::start().await;
    wait_for_warm(&s, Duration::from_secs(60)).await;
    let id = s.create().await;
    let v = s.run_ok(&id, WARM_CHECK).await;
    assert_eq!(v["result"], "True", "imported before the first call");
    let r = s
        .call(
            "execute_code",
            json!({"sandbox_id": id, "code": "import numpy as np, pandas as pd\nimport matplotlib.pyplot as plt\ndf = pd.DataFrame({'x': np.arange(5), 'y': np.arange(5) ** 2})\nplt.plot(df.x, df.y)\nint(df.y.sum())"}),
        )
        .await;
    let v = r.structured_content.clone().unwrap_or_default();
    assert!(r.is_error != Some(true), "{v}");
    assert_eq!(v["result"], "30");
    assert_eq!(v["images"], 1, "{v}");
    let png = r
        .content
        .iter()
        .find_map(|c| c.as_image())
        .expect("the plot as image content");
    assert_eq!(png.mime_type, "image/png");
    s.stop().await;
}

#[tokio::test]
async fn two_warm_sandboxes_never_draw_the_same_numbers_or_names() {
    let s = Server::start().await;
    wait_for_warm(&s, Duration::from_secs(60)).await;
    let code = "import random, uuid, secrets, tempfile, numpy as np\n(random.random(), float(np.random.rand()), str(uuid.uuid4()), secrets.token_hex(8), next(tempfile._get_candidate_names()), float(np.random.default_rng().random()))";
    let a = s.create().await;
    let b = s.create().await;
    let va = s.run_ok(&a, code).await;
    let vb = s.run_ok(&b, code).await;
    let (ra, rb) = (va["result"].as_str().unwrap(), vb["result"].as_str().unwrap());
    let fields = |r: &str| {
        r.trim_matches(|c| c == '(' || c == ')')
            .split(", ")
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let (fa, fb) = (fields(ra), fields(rb));
    assert_eq!(fa.len(), 6, "{ra}");
    for (i, (x, y)) in fa.iter().zip(&fb).enumerate() {
        assert_ne!(x, y, "value {i} is the same in both sandboxes: {ra} / {rb}");
    }
    s.stop().await;
}

#[tokio::test]
async fn nothing_from_the_warm_up_shows_in_a_sandbox() {
    let s = Server::start().await;
    wait_for_warm(&s, Duration::from_secs(60)).await;
    let id = s.create().await;
    let v = s
        .run_ok(
            &id,
            "import os, time\n(sorted(os.listdir('.')), sorted(os.listdir('/tmp')), sorted(k for k in globals() if not k.startswith('__')), os.getcwd())",
        )
        .await;
    assert_eq!(
        v["result"], "([], [], ['os', 'time'], '/home/user')",
        "an empty workspace, an empty /tmp, no names but the call's own"
    );
    // The monotonic clock continues the warm-up's, so it never runs backwards.
    let v = s
        .run_ok(
            &id,
            "import time\na = time.monotonic(); b = time.monotonic()\n(a > 0, b >= a)",
        )
        .await;
    assert_eq!(v["result"], "(True, True)");
    s.stop().await;
}

#[tokio::test]
async fn small_sandboxes_and_the_off_switch_use_the_plain_image() {
    let s = Server::start().await;
    wait_for_warm(&s, Duration::from_secs(60)).await;
    let small = s.create_with(json!({"memory_mb": 100})).await;
    let v = s.run_ok(&small, WARM_CHECK).await;
    assert_eq!(
        v["result"], "False",
        "the image would leave a 100 MiB sandbox no room"
    );
    let v = s
        .run_ok(&small, "import pandas as pd\nint(pd.Series([1, 2]).sum())")
        .await;
    assert_eq!(v["result"], "3", "the plain image still imports everything");
    s.stop().await;

    let off = Server::start_with(&[("CODE_SANDBOX_WARM_IMAGE", "false")]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let v = off.ok("create_run_close", json!({"code": WARM_CHECK})).await;
    assert_eq!(v["result"], "False");
    off.stop().await;
}

/// A damaged warm image is rebuilt, and a rebuild is another image: the warm-up draws its
/// hash secret and random state afresh, so its memory differs. A sandbox saved on the old
/// image must come back whole or say it lost its variables; its saved pages must never be laid
/// over the new image's memory.
#[cfg(unix)]
#[tokio::test]
async fn a_damaged_cached_image_is_detected_and_rebuilt() {
    let (home, warm_images) = home_sharing_the_runtime(true);
    let cache = home.join("cache");
    assert!(
        !warm_images.is_empty(),
        "a warm image in the shared cache (cargo xtask fetch-runtime builds it)"
    );
    let persist = [
        ("CODE_SANDBOX_HOME", home.to_str().unwrap()),
        ("CODE_SANDBOX_PERSIST", "true"),
    ];

    // A sandbox on the intact image, saved when its server stops.
    let s = Server::start_with(&persist).await;
    wait_for_warm(&s, Duration::from_secs(120)).await;
    let id = s.create().await;
    let v = s.run_ok(&id, "import sys\nx = 42\n'pandas' in sys.modules").await;
    assert_eq!(v["result"], "True", "the sandbox started from the warm image");
    crate::persistence::signal_and_wait(s, libc::SIGTERM).await;

    for (original, copy) in &warm_images {
        // A partial write: the first megabyte of the real image.
        let bytes = std::fs::read(original).unwrap();
        std::fs::remove_file(copy).unwrap();
        std::fs::write(copy, &bytes[..1 << 20]).unwrap();
    }
    // Sandboxes made during the rebuild import pandas themselves, so only the log tells when
    // the rebuilt image is in use.
    let log = home.join("server.log");
    let log_s = log.display().to_string();
    let mut logged = persist.to_vec();
    logged.extend([(crate::common::LOG_TO, log_s.as_str()), ("RUST_LOG", "info")]);
    let s = Server::start_with(&logged).await;
    let v = s.ok("create_run_close", json!({"code": "1+1"})).await;
    assert_eq!(
        v["result"], "2",
        "the plain image serves while the warm one is rebuilt"
    );
    let began = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("warm image ready")
    {
        assert!(
            began.elapsed() < Duration::from_secs(900),
            "the warm image was never rebuilt"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (failed, v) = s.exec(&id, "x").await;
    if failed || v["result"] != "42" {
        assert_eq!(
            v["state_lost"], true,
            "the saved sandbox came back neither whole nor marked lost: {v}"
        );
        assert!(v["notes"].to_string().contains("reset"), "and says why: {v}");
    }
    let v = s.run_ok(&id, "1+1").await;
    assert_eq!(v["result"], "2", "the sandbox works on the rebuilt image");
    s.stop().await;
    let rebuilt = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("warm-"))
        .filter(|p| std::fs::metadata(p).unwrap().len() > 1 << 20)
        .collect::<Vec<_>>();
    assert_eq!(
        rebuilt.len(),
        1,
        "the image in use was rebuilt whole: {rebuilt:?}"
    );
    assert_same_digest(&rebuilt[0], &rebuilt[0].with_extension("json"));
    let _ = std::fs::remove_dir_all(&home);
}

/// A home of its own with the shared runtime, wheels and compiled images linked in (with
/// `warm`, the warm image too): the cached warm images' (shared, copy) paths.
pub fn home_sharing_the_runtime(
    warm: bool,
) -> (std::path::PathBuf, Vec<(std::path::PathBuf, std::path::PathBuf)>) {
    let shared = runtime_home();
    let home = std::env::temp_dir().join(format!("mcs-warm-{}", uuid::Uuid::new_v4().simple()));
    let cache = home.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    for d in ["runtime", "wheels"] {
        crate::common::link_dir(&shared.join(d), &home.join(d)).unwrap();
    }
    let mut warm_images = Vec::new();
    for entry in std::fs::read_dir(shared.join("cache")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let to = cache.join(&name);
        // Folders (a shared-folder layout's /mnt index) are made again when needed.
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if name.starts_with("warm-") && !warm {
            continue;
        }
        if name.starts_with("warm-") && name.ends_with(".json") {
            // The metadata is rewritten by a rebuild: a copy, not a link to the shared file.
            std::fs::copy(entry.path(), &to).unwrap();
        } else {
            // Only read here (damage replaces the link, never writes through it).
            std::fs::hard_link(entry.path(), &to)
                .or_else(|_| std::fs::copy(entry.path(), &to).map(|_| ()))
                .unwrap();
            if name.starts_with("warm-") && name.ends_with(".cwasm") {
                warm_images.push((entry.path(), to));
            }
        }
    }
    (home, warm_images)
}

/// The first call, sent right after `initialize` without waiting for anything, finds pandas
/// and pyplot imported: on ten starts with the warm image cached (it loads in milliseconds
/// and the sandbox waits for it), and on a start that must build it (a minute or more: the
/// sandbox imports them itself meanwhile).
#[tokio::test]
async fn the_first_call_after_initialize_finds_pandas_and_pyplot_imported() {
    for start in 1..=10 {
        let s = Server::start().await;
        let v = s.ok("execute_code", json!({"code": WARM_CHECK})).await;
        assert_eq!(v["result"], "True", "start {start} of 10: {v}");
        s.stop().await;
    }
    let home = home_sharing_the_runtime(false).0;
    let s = Server::start_with(&[("CODE_SANDBOX_HOME", home.to_str().unwrap())]).await;
    let v = s.ok("execute_code", json!({"code": WARM_CHECK})).await;
    assert_eq!(v["result"], "True", "while the warm image is built: {v}");
    let id = s.create().await;
    let v = s
        .run_ok(
            &id,
            "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n1",
        )
        .await;
    assert_eq!(v["images"], 1, "a second sandbox plots as a warm one does: {v}");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

/// Stopped while it builds the warm image (a user quitting in the first minute after an
/// install), the server ends the build before its async runtime goes: it used to panic in
/// wasmtime-wasi's file calls, cut off by the runtime's end. The next start builds the image.
#[cfg(unix)]
#[tokio::test]
async fn a_server_stopped_while_it_builds_the_warm_image_ends_cleanly() {
    let home = home_sharing_the_runtime(false).0;
    let log = home.join("server.log");
    let (home_s, log_s) = (home.display().to_string(), log.display().to_string());
    let envs = [
        ("CODE_SANDBOX_HOME", home_s.as_str()),
        (crate::common::LOG_TO, log_s.as_str()),
        ("RUST_LOG", "info"),
    ];
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    // Three times: the old panic came when the runtime's end met a file call, about every
    // other stop.
    for round in 1..=3 {
        let _ = std::fs::remove_file(&log);
        let s = Server::start_with(&envs).await;
        // A kept sandbox too: the shutdown saves it while the build is told to stop.
        let id = s.create().await;
        assert_eq!(s.run_ok(&id, "x = 2\nx").await["result"], "2");
        let began = Instant::now();
        while !said().contains("preparing the warm image") {
            assert!(
                began.elapsed() < Duration::from_secs(120),
                "no warm-image build began"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Well inside the build (it imports numpy, pandas and matplotlib for a minute or more).
        tokio::time::sleep(Duration::from_secs(2)).await;
        crate::persistence::signal_and_wait(s, libc::SIGTERM).await;
        let said = said();
        assert!(
            said.contains("stopping the warm-image build") && said.contains("shut down in"),
            "round {round}: stopped mid-build and shut down: {said}"
        );
        assert!(
            !said.contains("panicked"),
            "round {round}: no panic on the way out: {said}"
        );
    }
    let _ = std::fs::remove_dir_all(&home);
}

#[cfg(unix)]
fn assert_same_digest(cwasm: &Path, meta: &Path) {
    let recorded: serde_json::Value = serde_json::from_slice(&std::fs::read(meta).unwrap()).unwrap();
    let (sha, _) = mcp_code_sandbox::runtime::file_digest(cwasm).unwrap();
    assert_eq!(recorded["cwasm_sha256"], sha.as_str());
}
