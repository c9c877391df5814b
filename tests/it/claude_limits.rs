//! The largest result each tool returns by default, measured against what Claude's clients
//! take: about 150,000 characters on claude.ai and in Claude Desktop, and 25,000 tokens in
//! Claude Code (`MAX_MCP_OUTPUT_TOKENS`). Everything a client may hand the model counts: the
//! content blocks (text, images' base64, links) and the structured content, each serialized.
//! Tokens are counted as Claude Code estimates them, a character in four, over all of it
//! (images' base64 included, as Claude Code counted it in the releases that refused
//! screenshots). Each case also checks that what matters is still there.

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::common::{Server, text_of};

const CLAUDE_CHARS: usize = 150_000;
const CLAUDE_CODE_TOKENS: usize = 25_000;

/// (characters, estimated tokens) of a result as Claude's clients count it.
fn measure(r: &CallToolResult) -> (usize, usize) {
    let content = serde_json::to_string(&r.content).expect("content serializes");
    let structured = r
        .structured_content
        .as_ref()
        .map_or(String::new(), |v| v.to_string());
    let chars = content.chars().count() + structured.chars().count();
    (chars, chars.div_ceil(4))
}

/// Asserts the result fits both clients, and prints its size for the record.
fn fits(case: &str, r: &CallToolResult) {
    let (chars, tokens) = measure(r);
    eprintln!("claude limits: {case}: {chars} characters, about {tokens} tokens");
    assert!(
        chars <= CLAUDE_CHARS,
        "{case}: {chars} characters, over claude.ai's {CLAUDE_CHARS}"
    );
    assert!(
        tokens <= CLAUDE_CODE_TOKENS,
        "{case}: about {tokens} tokens, over Claude Code's {CLAUDE_CODE_TOKENS}"
    );
}

fn images(r: &CallToolResult) -> usize {
    r.content.iter().filter(|c| c.as_image().is_some()).count()
}

async fn call(s: &Server, tool: &str, args: Value) -> CallToolResult {
    s.call(tool, args).await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_largest_result_of_each_tool_fits_what_claude_takes() {
    let s = Server::start().await;
    let sb = s.create().await;

    // Huge stdout, stderr and value at once, with escapes and wide characters in them.
    let r = call(
        &s,
        "execute_code",
        json!({"sandbox_id": sb, "code": r#"
import sys
for i in range(200000):
    print(f"line {i} \x01\t\u00e9\u4e2d " + "x" * 20)
sys.stderr.write("e\x02" * 600000)
"v\x03" * 3000000 + "END-OF-VALUE"
"#}),
    )
    .await;
    fits("execute_code: huge stdout, stderr and value", &r);
    let text = text_of(&r);
    assert!(text.contains("line 199999"), "the end of stdout is inline");
    assert!(text.contains("END-OF-VALUE"), "the end of the value is inline");
    assert!(
        text.contains("stdout.txt"),
        "the whole stdout is named: {}",
        &text[..300.min(text.len())]
    );

    // A long traceback with a long message.
    let r = call(
        &s,
        "execute_code",
        json!({"sandbox_id": sb, "code": r#"
def deep(n):
    if n == 0:
        raise ValueError("why: " + "\u00e9" * 500000)
    return deep(n - 1)
print("x" * 2000000)
deep(900)
"#}),
    )
    .await;
    fits("execute_code: long traceback and stdout", &r);
    assert!(text_of(&r).contains("ValueError"), "the error is named");

    // Many large figures.
    let r = call(
        &s,
        "execute_code",
        json!({"sandbox_id": sb, "timeout_seconds": 120, "code": r#"
import numpy as np, matplotlib.pyplot as plt
rng = np.random.default_rng(1)
for k in range(6):
    plt.figure(figsize=(10, 8), dpi=100)
    plt.imshow(rng.random((400, 500)))
    plt.title(f"noise {k}")
"#}),
    )
    .await;
    fits("execute_code: six large noisy figures", &r);
    assert!(images(&r) >= 1, "the first figure is inline: {}", text_of(&r));
    assert!(
        text_of(&r).contains("figure-6.png"),
        "the rest are saved and named"
    );

    // A wide, long table with long cells, and its pages.
    let r = call(
        &s,
        "execute_code",
        json!({"sandbox_id": sb, "code": r#"
import pandas as pd
wide = pd.DataFrame({f"column_{c}": ["\u00e9" * 300] * 2000 for c in range(600)})
wide
"#}),
    )
    .await;
    fits("execute_code: 600 columns x 2000 rows", &r);
    let table = &r.structured_content.as_ref().expect("structured")["table"];
    let handle = table["handle"].as_str().expect("a table handle").to_string();
    let r = call(&s, "read_table", json!({"handle": handle, "limit": 500})).await;
    fits("read_table: 500 rows of 600 wide columns", &r);
    let page = r.structured_content.clone().expect("structured");
    assert!(
        page["columns_left_out"].as_u64().unwrap_or(0) > 0
            || !page["rows"].as_array().expect("rows").is_empty()
    );

    // A large text file, read in parts that join up to the whole.
    s.run_ok(
        &sb,
        r#"
with open("big.csv", "w") as f:
    for i in range(120000):
        f.write(f"{i},\u00e9t\u00e9,{i*i}\n")
"#,
    )
    .await;
    let whole = std::fs::read(s.workspace(&sb).join("big.csv")).expect("the file");
    let mut got = Vec::new();
    let mut offset = 0u64;
    for part in 0..3 {
        let r = call(
            &s,
            "read_file",
            json!({"sandbox_id": sb, "file_path": "big.csv", "offset": offset}),
        )
        .await;
        fits(
            &format!("read_file: part {part} of a {} byte CSV", whole.len()),
            &r,
        );
        let v = r.structured_content.clone().expect("structured");
        assert_eq!(v["offset"].as_u64(), Some(offset));
        got.extend_from_slice(v["content"].as_str().expect("text").as_bytes());
        offset = v["next_offset"].as_u64().expect("a next part");
        assert!(
            text_of(&r).contains(&format!("offset={offset}")),
            "the text says where to go on"
        );
    }
    assert_eq!(
        &whole[..got.len()],
        &got[..],
        "the parts are the file's bytes, in order"
    );
    assert!(got.ends_with(b"\n"), "a part ends at a line's end");

    // A large picture comes shrunk; a large binary in parts.
    s.run_ok(
        &sb,
        r#"
import numpy as np, matplotlib.pyplot as plt
plt.imsave("noise.png", np.random.default_rng(2).random((1500, 1500, 3)))
open("blob.bin", "wb").write(bytes(range(256)) * 20000)
"#,
    )
    .await;
    let r = call(
        &s,
        "read_file",
        json!({"sandbox_id": sb, "file_path": "noise.png"}),
    )
    .await;
    fits("read_file: a 1500 px noisy PNG", &r);
    assert_eq!(images(&r), 1, "the picture is shown: {}", text_of(&r));
    assert!(
        text_of(&r).contains("shown below with its long side"),
        "{}",
        text_of(&r)
    );
    let r = call(
        &s,
        "read_file",
        json!({"sandbox_id": sb, "file_path": "blob.bin"}),
    )
    .await;
    fits("read_file: a 5 MB binary", &r);
    assert!(
        r.structured_content.as_ref().expect("structured")["next_offset"]
            .as_u64()
            .is_some()
    );

    // A folder of many long names.
    s.run_ok(
        &sb,
        r#"
import os
os.makedirs("many", exist_ok=True)
for i in range(3000):
    open(f"many/{i:05d}-" + "n" * 200, "w").close()
"#,
    )
    .await;
    let r = call(&s, "list_files", json!({"sandbox_id": sb, "path": "many"})).await;
    fits("list_files: 3000 names of 206 characters", &r);
    assert!(
        r.structured_content.as_ref().expect("structured")["next_offset"]
            .as_u64()
            .is_some()
    );

    // A background run with huge output, while it runs and when it ended.
    let started = s
        .ok(
            "execute_code",
            json!({"sandbox_id": sb, "background": true, "code": r#"
import sys, time
for i in range(20000):
    print("run line", i, "y" * 30)
    sys.stderr.write("z" * 40 + "\n")
time.sleep(2)
"end of run"
"#}),
        )
        .await;
    let run_id = started["run_id"].as_str().expect("run_id").to_string();
    // Worst cases: no offsets passed back, so all the output so far is unread.
    let unread = json!({"run_id": run_id});
    let mut at = (0u64, 0u64);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(180);
    let mut measured = 0;
    while std::time::Instant::now() < until {
        let r = call(
            &s,
            "get_run",
            json!({"run_id": run_id, "wait_seconds": 10,
            "stdout_offset": at.0, "stderr_offset": at.1}),
        )
        .await;
        let v = r.structured_content.clone().expect("structured");
        if v["state"] != "running" && v["state"] != "queued" {
            break;
        }
        at = (
            v["stdout_offset"].as_u64().unwrap_or(0),
            v["stderr_offset"].as_u64().unwrap_or(0),
        );
        if at.0 > 0 && measured < 3 {
            measured += 1;
            let r = call(&s, "get_run", unread.clone()).await;
            fits("get_run: a running run, all its output unread", &r);
        }
    }
    let r = call(&s, "get_run", unread).await;
    fits("get_run: the ended run, all its output unread", &r);
    assert_eq!(
        r.structured_content.as_ref().expect("structured")["state"],
        "finished"
    );
    assert!(
        text_of(&r).contains("end of run"),
        "the run's value is there: {}",
        text_of(&r)
    );

    let r = call(
        &s,
        "install_package",
        json!({"sandbox_id": sb, "package_name": "?"}),
    )
    .await;
    fits("install_package: the list of what is available", &r);
    let r = call(&s, "get_sandbox_status", json!({})).await;
    fits("get_sandbox_status: every sandbox", &r);
    let r = call(&s, "export_notebook", json!({"sandbox_id": sb})).await;
    fits("export_notebook: after all the above", &r);
    let r = call(&s, "create_run_close", json!({"code": "print('q' * 3000000)"})).await;
    fits("create_run_close: huge stdout", &r);
    s.stop().await;
}
