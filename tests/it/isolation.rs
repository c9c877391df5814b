//! What the guest cannot do (docs/THREAT-MODEL.md): host files, network, environment, stdin, escapes
//! through the host-side file tools.

use crate::common;

use common::Server;
use serde_json::json;

#[tokio::test]
async fn guest_cannot_read_host_files() {
    let s = Server::start().await;
    let id = s.create().await;
    for code in [
        "open('/etc/passwd').read()",
        "import os\nos.chdir('/home/user')\nopen('../../../etc/passwd').read()",
        "import os\nos.listdir('/')",
    ] {
        let (err, v) = s.exec(&id, code).await;
        if !err {
            // Listing `/` may succeed, but must show only the sandbox's own mounts.
            let listing = v["result"].as_str().unwrap_or("");
            assert!(
                !listing.contains("etc") && !listing.contains("root"),
                "{code}: {v}"
            );
        } else {
            assert!(
                v["error"]["name"].as_str().unwrap().ends_with("Error"),
                "{code}: {v}"
            );
        }
    }
    let (err, v) = s
        .exec(
            &id,
            "import os\nos.symlink('/etc/passwd', 'link')\nopen('link').read()",
        )
        .await;
    assert!(err, "a symlink out is refused or unusable: {v}");
    s.stop().await;
}

#[tokio::test]
async fn host_tools_refuse_escapes() {
    let s = Server::start().await;
    let id = s.create().await;
    for bad in [
        "../../etc/passwd",
        "/etc/passwd",
        "C:\\Windows\\win.ini",
        "..\\x",
        "a\u{0}b",
        "",
    ] {
        let (err, _, text) = s
            .call_json("read_file", json!({"sandbox_id": id, "file_path": bad}))
            .await;
        assert!(err, "{bad:?} was accepted");
        assert!(text.contains("invalid path"), "{bad:?}: {text}");
        let (err, _, _) = s
            .call_json(
                "write_file",
                json!({"sandbox_id": id, "file_path": bad, "content": "x"}),
            )
            .await;
        assert!(err, "{bad:?} was writable");
    }
    let long = "a/".repeat(50_000);
    let (err, _, _) = s
        .call_json("read_file", json!({"sandbox_id": id, "file_path": long}))
        .await;
    assert!(err);
    // Guest-made links pointing out of the sandbox are never followed by the host.
    let (_, v) = s
        .exec(&id, "import os\nos.symlink('/etc/passwd', 'abs')\nos.symlink('../../../../../../etc/passwd', 'rel')\nos.symlink('../../../..', 'up')\nsorted(os.listdir('.'))")
        .await;
    let made = v["result"].as_str().unwrap_or("").to_string();
    for name in ["abs", "rel"] {
        if made.contains(name) {
            let (err, v, text) = s
                .call_json("read_file", json!({"sandbox_id": id, "file_path": name}))
                .await;
            assert!(err, "read through the link {name}: {v}");
            assert!(!text.contains("root:"), "{text}");
            let (err, _, _) = s
                .call_json(
                    "write_file",
                    json!({"sandbox_id": id, "file_path": name, "content": "pwned"}),
                )
                .await;
            // Writing replaces the link itself, never the target.
            if !err {
                let (_, v) = s.exec(&id, &format!("open('{name}').read()")).await;
                assert_eq!(v["result"], "'pwned'");
            }
        }
    }
    if made.contains("up") {
        let (err, _, _) = s
            .call_json(
                "write_file",
                json!({"sandbox_id": id, "file_path": "up/escaped.txt", "content": "x"}),
            )
            .await;
        assert!(
            err,
            "writing through a directory link out of the sandbox is refused"
        );
        assert!(!s.home.join("escaped.txt").exists());
    }
    let v = s.run_ok(&id, "1+1").await;
    assert_eq!(v["result"], "2");
    s.stop().await;
}

#[tokio::test]
async fn no_network_no_host_environment_stdin_is_eof() {
    let s = Server::start_with(&[("HOST_SECRET_FOR_TEST", "hunter2")]).await;
    let id = s.create().await;
    let (err, v) = s
        .exec(
            &id,
            "import socket\nsocket.create_connection(('127.0.0.1', 80), timeout=2)",
        )
        .await;
    assert!(err, "{v}");
    let v = s.run_ok(&id, "import os\nsorted(os.environ)").await;
    let env = v["result"].as_str().unwrap();
    assert!(
        !env.contains("HOST_SECRET_FOR_TEST") && !env.contains("'PATH'"),
        "{env}"
    );
    let (err, v) = s.exec(&id, "input()").await;
    assert!(err);
    assert_eq!(v["error"]["name"], "EOFError");
    let v = s.run_ok(&id, "import sys\nsys.stdin.read()").await;
    assert_eq!(v["result"], "''");
    // The errors THREAT-MODEL.md names, one per way out.
    for (code, error) in [
        ("import subprocess\nsubprocess.run(['ls'])", "OSError"),
        (
            "import threading\nthreading.Thread(target=print).start()",
            "RuntimeError",
        ),
        ("import ctypes\nctypes.CDLL(None)", "OSError"),
        ("import os\nos.fork()", "AttributeError"),
        ("import socket\nsocket.socket()", "OSError"),
    ] {
        let (err, v) = s.exec(&id, code).await;
        assert!(err, "{code} ran: {v}");
        assert_eq!(v["error"]["name"], error, "{code}: {v}");
    }
    s.stop().await;
}

#[tokio::test]
async fn guest_output_that_looks_like_protocol_is_just_output() {
    let s = Server::start().await;
    let id = s.create().await;
    let msg = r#"{"jsonrpc":"2.0","id":1,"result":{"hacked":true}}"#;
    let v = s.run_ok(&id, &format!("print('{msg}')")).await;
    assert_eq!(v["stdout"], format!("{msg}\n"));
    let (err, v) = s.exec(&id, "import os\nos._exit(7)").await;
    assert!(err);
    assert_eq!(v["state_lost"], true);
    assert_eq!(v["error"]["name"], "SystemExit");
    let v = s.run_ok(&id, "1+1").await;
    assert_eq!(v["result"], "2");
    s.stop().await;
}

/// The runtime's own tool client (`host.tools`) finds no tools offered, and says so; a frame
/// of its protocol sent by hand is refused the same way, and the result path still works.
#[tokio::test]
async fn the_runtimes_tool_client_is_told_this_run_has_no_tools() {
    let s = Server::start().await;
    let id = s.create().await;
    let (err, v) = s.exec(&id, "import host.tools").await;
    assert!(err, "{v}");
    assert_eq!(v["error"]["name"], "ImportError", "{v}");
    assert!(
        v["error"]["value"]
            .as_str()
            .unwrap_or_default()
            .contains("this run has no tools"),
        "{v}"
    );
    let v = s
        .run_ok(
            &id,
            "import _host
try:
    _host.call(b'{\"v\":1,\"id\":1,\"op\":\"call\",\"tool\":\"x\",\"args\":{}}')
    r = 'answered'
except ConnectionRefusedError as e:
    r = 'refused'
r",
        )
        .await;
    assert_eq!(v["result"], "'refused'");
    assert_eq!(v["state_lost"], false);
    s.stop().await;
}

#[tokio::test]
async fn upload_reads_only_allowed_host_folders() {
    let allowed = tempdir("allowed");
    let outside = tempdir("outside");
    std::fs::write(allowed.join("data.csv"), "x,y\n1,2\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    let s = Server::start_with(&[("CODE_SANDBOX_UPLOAD_DIRS", allowed.to_str().unwrap())]).await;
    let id = s.create().await;
    let v = s
        .ok(
            "upload_file",
            json!({"sandbox_id": id, "source_path": allowed.join("data.csv").to_str().unwrap()}),
        )
        .await;
    assert_eq!(v["path"], "data.csv");
    assert_eq!(v["bytes_written"], 8);
    let (err, _, text) = s
        .call_json(
            "upload_file",
            json!({"sandbox_id": id, "source_path": outside.join("secret.txt").to_str().unwrap()}),
        )
        .await;
    assert!(err);
    assert!(text.contains("CODE_SANDBOX_UPLOAD_DIRS"), "{text}");
    let sneaky = format!(
        "{}/../{}/secret.txt",
        allowed.display(),
        outside.file_name().unwrap().to_str().unwrap()
    );
    let (err, _, _) = s
        .call_json("upload_file", json!({"sandbox_id": id, "source_path": sneaky}))
        .await;
    assert!(err, "'..' out of an allowed folder is refused");
    let (err, v, _) = s
        .call_json(
            "upload_file",
            json!({"sandbox_id": id, "content_base64": "aGVsbG8=", "destination_path": "in/hello.txt"}),
        )
        .await;
    assert!(!err);
    assert_eq!(v["bytes_written"], 5);
    let (_, v) = s
        .exec(&id, "open('in/hello.txt').read() + open('data.csv').read()")
        .await;
    assert_eq!(v["result"], "'hellox,y\\n1,2\\n'");
    s.stop().await;
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("mcs-test-{tag}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::canonicalize(d).unwrap()
}

#[cfg(unix)]
#[tokio::test]
async fn a_fifo_or_a_folder_given_to_read_file_is_a_quick_error() {
    let s = Server::start().await;
    let id = s.create().await;
    // The guest cannot make a FIFO (WASI has no mkfifo); a host process sharing the folder can.
    let fifo = s.workspace(&id).join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a plain syscall on a path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    s.exec(&id, "import os\nos.mkdir('folder')").await;
    for (path, says) in [("pipe", "not a regular file"), ("folder", "is a folder")] {
        // A hang would fail at the harness's bound on every call.
        let (err, _, text) = s
            .call_json("read_file", json!({"sandbox_id": id, "file_path": path}))
            .await;
        assert!(err, "{path}: {text}");
        assert!(text.contains(says), "{path}: {text}");
    }
    let (err, v) = s.exec(&id, "1+1").await;
    assert!(!err && v["result"] == "2");
    s.stop().await;
}

#[tokio::test]
async fn a_host_write_to_a_hard_linked_file_leaves_the_other_name_alone() {
    let s = Server::start().await;
    let id = s.create().await;
    s.run_ok(
        &id,
        "import os\nopen('a.txt', 'w').write('original')\nos.link('a.txt', 'b.txt')",
    )
    .await;
    let _ = s
        .ok(
            "write_file",
            json!({"sandbox_id": id, "file_path": "a.txt", "content": "replaced"}),
        )
        .await;
    let v = s
        .run_ok(&id, "(open('a.txt').read(), open('b.txt').read())")
        .await;
    assert_eq!(v["result"], "('replaced', 'original')");
    s.stop().await;
}

#[tokio::test]
async fn oversized_inputs_are_refused_before_any_work() {
    let allowed = tempdir("huge");
    // A 5 GB file that takes no disk: sparse.
    let huge = allowed.join("huge.bin");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(5_000_000_000)
        .unwrap();
    let s = Server::start_with(&[("CODE_SANDBOX_UPLOAD_DIRS", allowed.to_str().unwrap())]).await;
    let id = s.create().await;
    let (err, _, text) = s
        .call_json(
            "upload_file",
            json!({"sandbox_id": id, "source_path": huge.to_str().unwrap()}),
        )
        .await;
    assert!(err, "{text}");
    assert!(text.contains("limit"), "{text}");
    assert!(!s.workspace(&id).join("huge.bin").exists(), "nothing was copied");
    // Source code far over the limit is refused before the interpreter sees it.
    let code = format!("x = '{}'", "y".repeat(11 << 20));
    let (err, _, text) = s
        .call_json("execute_code", json!({"sandbox_id": id, "code": code}))
        .await;
    assert!(err);
    assert!(
        text.contains("byte limit") && text.contains("write_file"),
        "{text}"
    );
    let (err, v) = s.exec(&id, "1+1").await;
    assert!(!err && v["result"] == "2");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&allowed);
}
