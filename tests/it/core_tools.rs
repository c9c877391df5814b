//! The tools over stdio against the real runtime: state, results, errors, files.

use crate::common;

use common::{Server, text_of};
use serde_json::json;

#[tokio::test]
async fn lists_exactly_the_seventeen_tools_with_schemas() {
    let s = Server::start().await;
    let tools = s.client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "cancel_run",
            "checkpoint_sandbox",
            "close_sandbox",
            "create_run_close",
            "create_sandbox",
            "execute_code",
            "export_notebook",
            "fork_sandbox",
            "get_run",
            "get_sandbox_status",
            "install_package",
            "list_files",
            "read_file",
            "read_table",
            "restore_sandbox",
            "upload_file",
            "write_file"
        ]
    );
    for t in &tools {
        assert!(t.output_schema.is_some(), "{} has no outputSchema", t.name);
    }
    let exec = tools.iter().find(|t| t.name == "execute_code").unwrap();
    let required = exec.input_schema.get("required").cloned().unwrap_or_default();
    assert_eq!(required, json!(["code"]));
    s.stop().await;
}

#[tokio::test]
async fn state_persists_and_final_expression_is_the_result() {
    let s = Server::start().await;
    let (err, v, _) = s.call_json("execute_code", json!({"code": "x = 41"})).await;
    assert!(!err);
    let id = v["sandbox_id"].as_str().unwrap().to_string();
    assert!(
        v["notes"][0].as_str().unwrap_or("").contains("Created sandbox"),
        "first call reports the new sandbox: {v}"
    );
    let v = s.run_ok(&id, "print(x + 1)").await;
    assert_eq!(v["stdout"], "42\n");
    assert_eq!(v["result"], serde_json::Value::Null);
    let r = s.call("execute_code", json!({"code": "x + 1"})).await;
    let v = r.structured_content.clone().unwrap();
    assert_eq!(
        v["result"], "42",
        "the most recent sandbox is used when no id is given"
    );
    assert_eq!(v["stdout"], "", "the value is reported as result, not printed");
    assert!(text_of(&r).contains("Out: 42"));
    assert_eq!(v["state_lost"], false);
    s.stop().await;
}

#[tokio::test]
async fn numpy_and_pandas_import() {
    let s = Server::start().await;
    let id = s.create().await;
    let v = s
        .run_ok(
            &id,
            "import numpy as np\nimport pandas as pd\nint(np.arange(5).sum())",
        )
        .await;
    assert_eq!(v["result"], "10");
    let v = s.run_ok(&id, "pd.DataFrame({'a': [1, 2], 'b': [3, 4]})").await;
    let table = v["result"].as_str().unwrap();
    assert!(
        table.contains('a') && table.contains('b') && table.contains('4'),
        "{table}"
    );
    s.stop().await;
}

#[tokio::test]
async fn exceptions_are_structured_and_keep_state() {
    let s = Server::start().await;
    let id = s.create().await;
    s.exec(&id, "keep = 'kept'").await;
    let r = s
        .call(
            "execute_code",
            json!({"sandbox_id": id, "code": "def f():\n    return 1 / 0\nf()"}),
        )
        .await;
    assert_eq!(r.is_error, Some(true));
    let v = r.structured_content.clone().unwrap();
    assert_eq!(v["error"]["name"], "ZeroDivisionError");
    assert_eq!(v["error"]["value"], "division by zero");
    let tb = v["error"]["traceback"].as_str().unwrap();
    assert!(tb.contains("Traceback") && tb.contains("in f"), "{tb}");
    assert!(text_of(&r).contains("ZeroDivisionError"));
    assert_eq!(v["state_lost"], false);
    let v = s.run_ok(&id, "keep").await;
    assert_eq!(v["result"], "'kept'");
    let (err, v) = s.exec(&id, "def broken(:\n  pass").await;
    assert!(err);
    assert_eq!(v["error"]["name"], "SyntaxError");
    s.stop().await;
}

#[tokio::test]
async fn two_sandboxes_are_kept_apart() {
    let s = Server::start().await;
    let a = s.create().await;
    let b = s.create().await;
    assert_ne!(a, b);
    s.exec(&a, "secret = 123\nopen('mine.txt', 'w').write('a')").await;
    let (err, v) = s.exec(&b, "secret").await;
    assert!(err);
    assert_eq!(v["error"]["name"], "NameError");
    let v = s.run_ok(&b, "import os\nos.path.exists('mine.txt')").await;
    assert_eq!(v["result"], "False");
    let (_, v, _) = s.call_json("list_files", json!({"sandbox_id": b})).await;
    assert_eq!(v["entries"], json!([]));
    s.stop().await;
}

#[tokio::test]
async fn files_flow_both_ways() {
    let s = Server::start().await;
    let id = s.create().await;
    let v = s
        .ok(
            "write_file",
            json!({"sandbox_id": id, "file_path": "data/in.csv", "content": "a,b\n1,2\n3,4\n"}),
        )
        .await;
    assert_eq!(v["bytes_written"], 12);
    assert_eq!(v["path"], "data/in.csv");
    let v = s.run_ok(&id, "import pandas as pd\ndf = pd.read_csv('data/in.csv')\ndf.to_csv('/home/user/out.csv', index=False)\nint(df['b'].sum())").await;
    assert_eq!(v["result"], "6");
    let (err, v, _) = s
        .call_json("read_file", json!({"sandbox_id": id, "file_path": "out.csv"}))
        .await;
    assert!(!err);
    assert_eq!(v["content"], "a,b\n1,2\n3,4\n");
    assert_eq!(v["size"], 12);
    let (_, v, _) = s.call_json("list_files", json!({"sandbox_id": id})).await;
    let names: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["data", "out.csv"]);
    assert_eq!(v["entries"][0]["type"], "directory");
    assert_eq!(v["entries"][1]["size"], 12);
    // Binary bytes come back as base64.
    s.exec(&id, "open('b.bin', 'wb').write(bytes([0, 255, 1]))").await;
    let (_, v, _) = s
        .call_json(
            "read_file",
            json!({"sandbox_id": id, "file_path": "/home/user/b.bin"}),
        )
        .await;
    assert_eq!(v["content_base64"], "AP8B");
    // The host wrote through the real folder.
    assert!(s.workspace(&id).join("data/in.csv").is_file());
    s.stop().await;
}

#[tokio::test]
async fn bad_arguments_and_missing_things_are_tool_errors() {
    let s = Server::start().await;
    let id = s.create().await;
    let (err, _, text) = s.call_json("execute_code", json!({"sandbox_id": id})).await;
    assert!(err);
    assert!(text.contains("code"), "{text}");
    let (err, _, text) = s
        .call_json("execute_code", json!({"sandbox_id": "sbx-nope", "code": "1"}))
        .await;
    assert!(err);
    assert!(
        text.contains("sbx-nope") && text.contains("create_sandbox"),
        "{text}"
    );
    let (err, _, text) = s
        .call_json("read_file", json!({"sandbox_id": id, "file_path": "missing.txt"}))
        .await;
    assert!(err);
    assert!(text.contains("does not exist"), "{text}");
    let (err, _, text) = s
        .call_json(
            "execute_code",
            json!({"sandbox_id": id, "code": "1", "timeout_seconds": 301}),
        )
        .await;
    assert!(err);
    assert!(text.contains("300"), "{text}");
    let (err, _, _) = s
        .call_json("read_file", json!({"sandbox_id": id, "file_path": "."}))
        .await;
    assert!(err);
    // The server is still fine.
    let v = s.run_ok(&id, "1+1").await;
    assert_eq!(v["result"], "2");
    s.stop().await;
}

#[tokio::test]
async fn read_file_pages_a_large_file_and_refuses_a_huge_one_with_its_size() {
    let s = Server::start().await;
    let id = s.create().await;
    s.exec(&id, "open('big.txt', 'w').write('x' * 2_000_000)").await;
    let (err, v, text) = s
        .call_json("read_file", json!({"sandbox_id": id, "file_path": "big.txt"}))
        .await;
    assert!(!err, "{text}");
    let next = v["next_offset"].as_u64().expect("a next part");
    assert_eq!(v["content"].as_str().map(str::len), Some(next as usize));
    assert!(
        text.contains(&format!("offset={next}")),
        "the text says how to go on"
    );
    let (err, v, _) = s
        .call_json(
            "read_file",
            json!({"sandbox_id": id, "file_path": "big.txt", "offset": 1_999_990}),
        )
        .await;
    assert!(!err);
    assert_eq!(v["content"], "x".repeat(10));
    assert_eq!(v.get("next_offset"), None, "the last part has no next");
    let (err, _, text) = s
        .call_json(
            "read_file",
            json!({"sandbox_id": id, "file_path": "big.txt", "offset": 2_000_001}),
        )
        .await;
    assert!(
        err && text.contains("past the end") && text.contains("2000000 bytes"),
        "{text}"
    );

    s.exec(&id, "open('huge.txt', 'w').write('x' * 70_000_000)").await;
    let (err, _, text) = s
        .call_json("read_file", json!({"sandbox_id": id, "file_path": "huge.txt"}))
        .await;
    assert!(err);
    assert!(
        text.contains("70000000 bytes") && text.contains("64 MiB") && text.contains("execute_code"),
        "{text}"
    );
    s.stop().await;
}

#[tokio::test]
async fn close_removes_the_folder_and_create_run_close_leaves_nothing() {
    let s = Server::start().await;
    let id = s.create().await;
    s.exec(&id, "open('f.txt', 'w').write('x')").await;
    let ws = s.workspace(&id);
    assert!(ws.join("f.txt").is_file());
    let (err, v, _) = s.call_json("close_sandbox", json!({"sandbox_id": id})).await;
    assert!(!err);
    assert_eq!(v["closed"], true);
    assert!(!ws.exists(), "the workspace folder is removed");
    let (err, _) = s.exec(&id, "1").await;
    assert!(err, "a closed sandbox is gone");

    let (err, v, _) = s
        .call_json(
            "create_run_close",
            json!({"code": "import sys\nsys.version_info[:2]"}),
        )
        .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], "(3, 15)");
    let gone = v["sandbox_id"].as_str().unwrap();
    assert!(!s.workspace(gone).exists());
    let (_, v, _) = s.call_json("get_sandbox_status", json!({})).await;
    assert_eq!(v["sandboxes"], json!([]));
    s.stop().await;
}

#[tokio::test]
async fn status_reports_one_or_all() {
    let s = Server::start().await;
    let id = s
        .create_with(json!({"timeout_seconds": 12, "memory_mb": 256}))
        .await;
    let (_, v, _) = s.call_json("get_sandbox_status", json!({"sandbox_id": id})).await;
    let before = v["disk_bytes"].as_u64().unwrap();
    s.exec(&id, "open('x', 'w').write('12345')").await;
    let (err, v, _) = s.call_json("get_sandbox_status", json!({"sandbox_id": id})).await;
    assert!(!err);
    assert_eq!(v["state"], "ready");
    assert_eq!(v["executions"], 1);
    // What counts against the disk quota: the bytes, and a block for the new name.
    assert_eq!(v["disk_bytes"].as_u64().unwrap() - before, 5 + 4096);
    assert_eq!(v["limits"]["disk_bytes"], 1024u64 << 20);
    assert_eq!(v["limits"]["timeout_seconds"], 12);
    assert_eq!(v["limits"]["memory_mb"], 256);
    let (_, v, _) = s.call_json("get_sandbox_status", json!({})).await;
    assert_eq!(v["sandboxes"].as_array().unwrap().len(), 1);
    s.stop().await;
}

#[tokio::test]
async fn install_package_answers_clearly() {
    let s = Server::start().await;
    let id = s.create().await;
    let v = s.install(&id, "tabulate").await;
    assert_eq!(v["already_available"], true);
    let (err, _, text) = s
        .call_json(
            "install_package",
            json!({"sandbox_id": id, "package_name": "no-such-package-xyz"}),
        )
        .await;
    assert!(err);
    assert!(
        text.contains("no-such-package-xyz") && text.contains("'?'"),
        "{text}"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_guest_lists_folders_big_and_small() {
    let s = Server::start().await;
    let id = s.create().await;
    let code = r#"
import os, time
os.makedirs('big/sub')
for i in range(3000): open(f'big/f{i:04}.txt', 'w').close()
os.symlink('f0000.txt', 'big/link')
t = time.perf_counter()
names = os.listdir('big')
took = time.perf_counter() - t
kinds = {e.name: (e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False), e.is_symlink()) for e in os.scandir('big')}
walked = sum(len(files) for _, _, files in os.walk('.'))
(len(names), sorted(names)[:2], kinds['sub'], kinds['f0001.txt'], kinds['link'], walked,
 'python315.zip' in os.listdir('/usr/local/lib'), os.listdir('big/sub'), round(took, 3))
"#;
    let v = s.run_ok(&id, code).await;
    let r = v["result"].as_str().unwrap();
    assert!(
        r.starts_with("(3002, ['f0000.txt', 'f0001.txt'], (True, False, False), (False, True, False), (False, False, True), 3001, True, [], "),
        "{r}"
    );
    s.stop().await;
}
