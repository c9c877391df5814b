//! The user's own files, in and out (issue 57): folders every sandbox reads in place at
//! `/mnt/<name>` (CODE_SANDBOX_READ_DIRS), read-only and never copied; and `save_file`, which
//! writes a sandbox's file into one of CODE_SANDBOX_SAVE_DIRS and nowhere else, never over a
//! file unless asked and never half-written.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{LOG_TO, Server};

/// A fresh parent folder for a test's host folders.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mcs-user-{tag}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::canonicalize(d).unwrap()
}

fn joined(dirs: &[&Path]) -> String {
    let sep = if cfg!(windows) { ";" } else { ":" };
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(sep)
}

/// Waits until the log says the warm image (the one every set of folders shares) is in use.
async fn wait_for_warm_image(log: &Path) {
    let began = Instant::now();
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains("warm image ready")
    {
        assert!(
            began.elapsed() < Duration::from_secs(900),
            "the warm image was never ready with shared folders"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Every regular file under `dir`, with its size.
fn files_under(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(md) = e.path().symlink_metadata() else {
            continue;
        };
        if md.is_dir() {
            out.extend(files_under(&e.path()));
        } else if md.is_file() {
            out.push((e.path(), md.len()));
        }
    }
    out
}

#[tokio::test]
async fn a_shared_folder_is_read_in_place_never_written_and_never_copied() {
    let root = scratch("read");
    let sales = root.join("a/sales");
    let twin = root.join("b/sales");
    std::fs::create_dir_all(sales.join("2025")).unwrap();
    std::fs::create_dir_all(&twin).unwrap();
    std::fs::write(sales.join("q1.csv"), "region,units\nNorth,3\nSouth,5\n").unwrap();
    // 3 MiB no sandbox may count or copy.
    std::fs::write(sales.join("2025/big.bin"), vec![7u8; 3 << 20]).unwrap();
    std::fs::write(twin.join("note.txt"), "the second folder").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("/etc/passwd", sales.join("passwd")).unwrap();
    let log = root.join("server.log");
    let s = Server::start_with(&[
        ("CODE_SANDBOX_READ_DIRS", &joined(&[&sales, &twin])),
        (LOG_TO, log.to_str().unwrap()),
        ("RUST_LOG", "info"),
    ])
    .await;
    let tools = s.client.list_all_tools().await.unwrap();
    assert!(
        !tools.iter().any(|t| t.name == "save_file"),
        "save_file is offered only when a folder is named for it"
    );
    wait_for_warm_image(&log).await;
    let id = s.create().await;
    let v = s
        .run_ok(
            &id,
            "import os, sys\nwarm = 'pandas' in sys.modules\nimport pandas as pd\nprint(sorted(os.listdir('/mnt')), open('/mnt/sales-2/note.txt').read())\nprint('warm' if warm else 'cold')\nint(pd.read_csv('/mnt/sales/q1.csv')['units'].sum())",
        )
        .await;
    assert_eq!(v["result"], "8", "{v}");
    let out = v["stdout"].as_str().unwrap();
    assert!(out.contains("['sales', 'sales-2'] the second folder"), "{out}");
    assert!(
        out.contains("warm") && !out.contains("cold"),
        "the sandbox came from the warm image: {out}"
    );

    // Nothing in the folder changes, whatever the code tries; the error says what to do.
    for attempt in [
        "open('/mnt/sales/new.csv', 'w')",
        "open('/mnt/sales/q1.csv', 'a').write('x')",
        "import os; os.remove('/mnt/sales/q1.csv')",
        "import os; os.mkdir('/mnt/sales/sub')",
        "import os; os.rename('/mnt/sales/q1.csv', '/home/user/q1.csv')",
    ] {
        let (err, v) = s.exec(&id, attempt).await;
        assert!(err, "{attempt} was refused: {v}");
        let value = v["error"]["value"].as_str().unwrap_or_default();
        assert!(
            value.contains("/mnt/sales is the user's folder, shared read-only")
                && value.contains("/home/user"),
            "{attempt}: {v}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(sales.join("q1.csv")).unwrap(),
        "region,units\nNorth,3\nSouth,5\n"
    );
    assert!(!sales.join("new.csv").exists() && !sales.join("sub").exists());
    #[cfg(unix)]
    {
        let (err, v) = s.exec(&id, "open('/mnt/sales/passwd').read()").await;
        assert!(err, "a link leading out of the folder is not followed: {v}");
        assert!(!v.to_string().contains("root:"), "{v}");
    }

    // The user's change is seen as it is, with no copy anywhere in the sandbox.
    std::fs::write(sales.join("q1.csv"), "region,units\nNorth,30\n").unwrap();
    let v = s
        .run_ok(&id, "import pandas as pd\nb = open('/mnt/sales/2025/big.bin', 'rb').read()\n(len(b), int(pd.read_csv('/mnt/sales/q1.csv')['units'].sum()))")
        .await;
    assert_eq!(v["result"], "(3145728, 30)", "{v}");
    let status = s.ok("get_sandbox_status", json!({"sandbox_id": id})).await;
    let disk = status["disk_bytes"].as_u64().expect("disk_bytes");
    assert!(
        disk < 1 << 20,
        "the shared folder is not in the disk quota: {status}"
    );
    let fork = s.ok("fork_sandbox", json!({"sandbox_id": id})).await;
    let fork_id = fork["sandbox_id"].as_str().unwrap().to_string();
    let v = s
        .run_ok(&fork_id, "len(open('/mnt/sales/2025/big.bin', 'rb').read())")
        .await;
    assert_eq!(v["result"], "3145728", "a fork reads the folder too");
    let copies: Vec<_> = files_under(&s.home.join("sandboxes"))
        .into_iter()
        .filter(|(_, n)| *n == 3 << 20)
        .collect();
    assert!(copies.is_empty(), "nothing of the folder was copied: {copies:?}");

    // The file tools reach the folders; a write through them is refused with what to do.
    let listed = s
        .ok("list_files", json!({"sandbox_id": id, "path": "/mnt"}))
        .await;
    let names: Vec<_> = listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].clone())
        .collect();
    assert_eq!(names, [json!("sales"), json!("sales-2")]);
    let listed = s
        .ok("list_files", json!({"sandbox_id": id, "path": "/mnt/sales"}))
        .await;
    assert!(listed.to_string().contains("/mnt/sales/q1.csv"), "{listed}");
    let read = s
        .ok(
            "read_file",
            json!({"sandbox_id": id, "file_path": "/mnt/sales/q1.csv"}),
        )
        .await;
    assert_eq!(read["content"], "region,units\nNorth,30\n");
    let (err, _, text) = s
        .call_json(
            "read_file",
            json!({"sandbox_id": id, "file_path": "/mnt/other/x.csv"}),
        )
        .await;
    assert!(err && text.contains("/mnt/sales, /mnt/sales-2"), "{text}");
    let (err, _, text) = s
        .call_json(
            "write_file",
            json!({"sandbox_id": id, "file_path": "/mnt/sales/x.csv", "content": "x"}),
        )
        .await;
    assert!(
        err && text.contains("read-only") && text.contains("save_file"),
        "{text}"
    );
    assert!(!sales.join("x.csv").exists());
    s.stop().await;
    let _ = std::fs::remove_dir_all(root);
}

/// Shared folders are in no image's or state's name: a kept sandbox restored under other
/// folders (more, in another order, or none) keeps its variables and sees the folders of the
/// server it now runs in.
#[cfg(unix)]
#[tokio::test]
async fn a_kept_sandbox_keeps_its_variables_when_the_shared_folders_change() {
    use crate::persistence::{signal_and_wait, start};
    let root = scratch("change");
    let (first, second) = (root.join("first"), root.join("second"));
    std::fs::create_dir_all(&first).unwrap();
    std::fs::create_dir_all(&second).unwrap();
    std::fs::write(first.join("a.txt"), "from the first").unwrap();
    std::fs::write(second.join("b.txt"), "from the second").unwrap();
    let home = crate::common::private_home();
    let log = root.join("server.log");
    let s = start(
        &home,
        &[
            ("CODE_SANDBOX_READ_DIRS", &joined(&[&first])),
            (LOG_TO, log.to_str().unwrap()),
            ("RUST_LOG", "info"),
        ],
    )
    .await;
    wait_for_warm_image(&log).await;
    let id = s.create().await;
    let v = s
        .run_ok(
            &id,
            "import sys\nkept = open('/mnt/first/a.txt').read()\n'pandas' in sys.modules",
        )
        .await;
    assert_eq!(v["result"], "True", "started from the warm image: {v}");
    signal_and_wait(s, libc::SIGTERM).await;

    let both = joined(&[&second, &first]);
    let s = start(&home, &[("CODE_SANDBOX_READ_DIRS", &both)]).await;
    let v = s
        .run_ok(
            &id,
            "import os\n(kept, sorted(os.listdir('/mnt')), open('/mnt/second/b.txt').read())",
        )
        .await;
    assert_eq!(
        v["result"], "('from the first', ['first', 'second'], 'from the second')",
        "{v}"
    );
    assert_eq!(v["state_lost"], false, "{v}");
    signal_and_wait(s, libc::SIGTERM).await;

    let s = start(&home, &[]).await;
    let v = s
        .run_ok(&id, "import os\n(kept, os.path.exists('/mnt/first/a.txt'))")
        .await;
    assert_eq!(v["result"], "('from the first', False)", "{v}");
    assert_eq!(v["state_lost"], false, "{v}");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&home);
    let _ = std::fs::remove_dir_all(root);
}

/// Calls save_file; (is_error, structured result, text).
async fn save(s: &Server, id: &str, path: &str, dest: &str, overwrite: bool) -> (bool, Value, String) {
    s.call_json(
        "save_file",
        json!({"sandbox_id": id, "path": path, "destination": dest, "overwrite": overwrite}),
    )
    .await
}

#[tokio::test]
async fn save_file_writes_only_where_allowed_and_never_loses_a_file() {
    let root = scratch("save");
    let out = root.join("results");
    let elsewhere = root.join("elsewhere");
    std::fs::create_dir_all(out.join("sub")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let s = Server::start_with(&[("CODE_SANDBOX_SAVE_DIRS", out.to_str().unwrap())]).await;
    let tools = s.client.list_all_tools().await.unwrap();
    let tool = tools
        .iter()
        .find(|t| t.name == "save_file")
        .expect("save_file is offered");
    let hints = tool.annotations.as_ref().expect("annotations");
    assert_eq!(
        hints.destructive_hint,
        Some(true),
        "it may replace a file (with overwrite)"
    );
    assert_eq!(hints.read_only_hint, Some(false));
    let id = s.create().await;
    s.run_ok(
        &id,
        "import os\nopen('chart.csv', 'w').write('a,b\\n1,2\\n')\nos.mkdir('folder')",
    )
    .await;

    let dest = out.join("chart.csv");
    let (err, v, text) = save(&s, &id, "chart.csv", dest.to_str().unwrap(), false).await;
    assert!(!err, "{text}");
    assert_eq!(
        (v["bytes_written"].as_u64(), v["replaced"].as_bool()),
        (Some(8), Some(false))
    );
    assert_eq!(v["destination"], dest.display().to_string());
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "a,b\n1,2\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644, "a saved file is an ordinary file of the user's");
    }
    // Never over a file unless asked; then replaced whole.
    s.run_ok(&id, "open('chart.csv', 'w').write('a,b\\n3,4\\n')")
        .await;
    let (err, _, text) = save(&s, &id, "chart.csv", dest.to_str().unwrap(), false).await;
    assert!(err && text.contains("overwrite: true"), "{text}");
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "a,b\n1,2\n");
    let (err, v, text) = save(&s, &id, "/home/user/chart.csv", "chart.csv", true).await;
    assert!(
        !err && v["replaced"] == true,
        "a relative destination is in the first folder: {text}"
    );
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "a,b\n3,4\n");

    // Bad destinations and sources: each a clear error, the host untouched.
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&elsewhere, out.join("away")).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("f.csv"), out.join("f.csv")).unwrap();
        std::fs::write(elsewhere.join("f.csv"), "theirs").unwrap();
    }
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "chart.csv",
            elsewhere.join("x.csv").display().to_string(),
            "outside the folders",
        ),
        (
            "chart.csv",
            format!("{}/../elsewhere/x.csv", out.display()),
            "outside the folders",
        ),
        #[cfg(unix)]
        (
            "chart.csv",
            out.join("away/x.csv").display().to_string(),
            "outside the folders",
        ),
        #[cfg(unix)]
        ("chart.csv", out.join("f.csv").display().to_string(), "a link to"),
        ("chart.csv", out.join("sub").display().to_string(), "is a folder"),
        ("chart.csv", out.join("CON").display().to_string(), "device"),
        ("chart.csv", out.join("nul.txt").display().to_string(), "device"),
        (
            "chart.csv",
            out.join("a:b.csv").display().to_string(),
            "character",
        ),
        (
            "chart.csv",
            out.join("missing/x.csv").display().to_string(),
            "folder that exists",
        ),
        ("folder", out.join("y.csv").display().to_string(), "is a folder"),
        (
            "../../etc/passwd",
            out.join("z.csv").display().to_string(),
            "'..'",
        ),
        (
            "nothing.csv",
            out.join("z.csv").display().to_string(),
            "does not exist",
        ),
    ];
    for (path, dest, says) in &cases {
        let (err, _, text) = save(&s, &id, path, dest, true).await;
        assert!(err && text.contains(says), "{path} -> {dest}: {text}");
    }
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("f.csv")).unwrap_or_default(),
        "theirs"
    );
    let mut left: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    left.sort();
    let expected: Vec<&str> = if cfg!(unix) {
        vec!["away", "chart.csv", "f.csv", "sub"]
    } else {
        vec!["chart.csv", "sub"]
    };
    assert_eq!(left, expected, "nothing else appeared, no file was left aside");
    assert!(!elsewhere.join("x.csv").exists());
    s.stop().await;
    let _ = std::fs::remove_dir_all(root);
}

/// A full disk: the file being replaced stays as it was and nothing is left beside it. Needs a
/// small file system of its own (a 1 MiB tmpfs, so root on Linux, as CI runs).
#[cfg(target_os = "linux")]
#[tokio::test]
async fn saving_onto_a_full_disk_keeps_the_old_file_whole() {
    let root = scratch("full");
    let small = root.join("small");
    std::fs::create_dir_all(&small).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&small)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        mounted,
        "a 1 MiB tmpfs could be mounted (the test runs as root, as CI does)"
    );
    std::fs::write(small.join("report.csv"), "the user's report").unwrap();
    let s = Server::start_with(&[("CODE_SANDBOX_SAVE_DIRS", small.to_str().unwrap())]).await;
    let id = s.create().await;
    s.run_ok(&id, "open('big.csv', 'wb').write(b'x' * (2 << 20))")
        .await;
    let dest = small.join("report.csv");
    let (err, _, text) = save(&s, &id, "big.csv", dest.to_str().unwrap(), true).await;
    assert!(err && text.contains("nothing was changed"), "{text}");
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "the user's report");
    let left: Vec<_> = std::fs::read_dir(&small)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 1, "no partial file is left: {left:?}");
    s.stop().await;
    let _ = std::process::Command::new("umount").arg(&small).status();
    let _ = std::fs::remove_dir_all(root);
}
