//! `--code-mode`: a downstream tool call made from guest code beside the same call made by an
//! MCP client directly, and the bytes the model receives when records are read and aggregated
//! in code beside the bytes of the tool results themselves.

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use super::harness::{self, call};
use super::table::{Row, median};

const CALLS: usize = 200;
const RECORDS: usize = 300;

/// The two reference servers code mode reaches, and the servers file naming them.
struct Servers {
    everything: std::path::PathBuf,
    memory: std::path::PathBuf,
    file: std::path::PathBuf,
    scratch: std::path::PathBuf,
}

fn servers(root: &Path) -> anyhow::Result<Servers> {
    let dir = root.join("tests/mcp-servers");
    xtask::npm::ensure(&dir, &|m| eprintln!("{m}"))?;
    let modules = dir.join("node_modules/@modelcontextprotocol");
    let scratch = std::env::temp_dir().join(format!("mcs-bench-code-mode-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let everything = modules.join("server-everything/dist/index.js");
    let memory = modules.join("server-memory/dist/index.js");
    let file = scratch.join("servers.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {
            "everything": {"command": "node", "args": [everything, "stdio"]},
            "memory": {"command": "node", "args": [memory],
                       "env": {"MEMORY_FILE_PATH": scratch.join("memory.jsonl")}}
        }})
        .to_string(),
    )?;
    Ok(Servers {
        everything,
        memory,
        file,
        scratch,
    })
}

/// Tool arguments from a JSON object.
fn args(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

pub async fn rows(root: &Path, bin: &Path, home: &Path) -> anyhow::Result<(Vec<Row>, String)> {
    let s = servers(root)?;
    let direct_median = direct_echo(&s).await?;
    eprintln!("bench: {CALLS} echo calls from guest code");
    let servers_arg = s.file.display().to_string();
    let (client, _) = harness::serve(bin, home, &[("CODE_SANDBOX_MCP_SERVERS", &servers_arg)]).await?;
    let sb = harness::new_sandbox(&client).await?;
    let (guest_median, round_trip) = guest_echo(&client, &sb).await?;
    let note = aggregation_note(&client, &sb, &s).await?;
    let _ = client.cancel().await;
    let _ = std::fs::remove_dir_all(&s.scratch);
    let direct = || {
        Some((
            "the same call by an MCP client (rmcp) directly".to_string(),
            direct_median,
        ))
    };
    let rows = vec![
        Row {
            what: "one downstream tool call (`echo`) from guest code, timed in the guest".into(),
            ours: guest_median,
            baseline: direct(),
            runs: CALLS,
        },
        Row {
            what: "`execute_code` making one downstream call, client to client".into(),
            ours: round_trip,
            baseline: direct(),
            runs: 50,
        },
    ];
    Ok((rows, note))
}

/// The same server, called by an MCP client directly: the median `echo`.
async fn direct_echo(s: &Servers) -> anyhow::Result<Duration> {
    eprintln!("bench: {CALLS} echo calls by an MCP client directly");
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(&s.everything).arg("stdio");
    let direct = ().serve(TokioChildProcess::new(cmd)?).await?;
    let echo = || CallToolRequestParams::new("echo").with_arguments(args(json!({"message": "hello"})));
    for _ in 0..20 {
        direct.call_tool(echo()).await?;
    }
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        direct.call_tool(echo()).await?;
        times.push(t.elapsed());
    }
    let _ = direct.cancel().await;
    Ok(median(times))
}

fn exec(sb: &str, code: String) -> Value {
    json!({"sandbox_id": sb, "code": code, "timeout_seconds": 300})
}

/// From guest code, through our server: the median `echo` as the guest timed it, and a whole
/// `execute_code` making one call.
async fn guest_echo(client: &harness::Client, sb: &str) -> anyhow::Result<(Duration, Duration)> {
    let warm = "import mcp_tools\nfor _ in range(20): mcp_tools.everything.echo(message='hello')";
    call(client, "execute_code", exec(sb, warm.into())).await?;
    let v = call(
        client,
        "execute_code",
        exec(sb, format!(
            "import time, mcp_tools\ntimes = []\nfor _ in range({CALLS}):\n    t = time.perf_counter_ns()\n    mcp_tools.everything.echo(message='hello')\n    times.append(time.perf_counter_ns() - t)\nsorted(times)[len(times) // 2]"
        )),
    )
    .await?;
    let guest = Duration::from_nanos(v["result"].as_str().unwrap_or("0").parse().unwrap_or(0));
    let mut round_trips = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let one = "import mcp_tools\nmcp_tools.everything.echo(message='hello')";
        call(client, "execute_code", exec(sb, one.into())).await?;
        round_trips.push(t.elapsed());
    }
    Ok((guest, median(round_trips)))
}

/// Many records: read and aggregated in code, beside the tool result the model would read.
async fn aggregation_note(client: &harness::Client, sb: &str, s: &Servers) -> anyhow::Result<String> {
    eprintln!("bench: {RECORDS} records, aggregated in code beside the raw tool results");
    call(
        client,
        "execute_code",
        exec(sb, format!(
            "import mcp_tools, random\nrandom.seed(1)\nmcp_tools.memory.create_entities(entities=[{{'name': f'customer-{{i}}', 'entityType': random.choice(['retail', 'wholesale', 'online']), 'observations': [f'orders {{random.randint(1, 90)}}', f'region {{random.choice([\"north\", \"south\", \"east\", \"west\"])}}', 'joined 2025']}} for i in range({RECORDS})])\n'ok'"
        )),
    )
    .await?;
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(&s.memory)
        .env("MEMORY_FILE_PATH", s.scratch.join("memory.jsonl"));
    let direct = ().serve(TokioChildProcess::new(cmd)?).await?;
    let raw = direct
        .call_tool(CallToolRequestParams::new("read_graph").with_arguments(args(json!({}))))
        .await?;
    let raw_bytes = serde_json::to_vec(&raw)?.len();
    let _ = direct.cancel().await;
    let code = "import mcp_tools, pandas as pd\ng = mcp_tools.memory.read_graph()\ndf = pd.DataFrame(g['entities'])\ndf['orders'] = df['observations'].map(lambda o: int(o[0].split()[1]))\ndf.groupby('entityType')['orders'].agg(['count', 'sum', 'mean']).round(1).to_dict('index')";
    let aggregated = client
        .call_tool(CallToolRequestParams::new("execute_code").with_arguments(args(exec(sb, code.into()))))
        .await?;
    let aggregated_bytes = serde_json::to_vec(&aggregated)?.len();
    Ok(format!(
        "Read {RECORDS} records and aggregate them: the model receives {aggregated_bytes} bytes from one `execute_code` \
         that reads the memory server's graph and groups it in pandas, beside {raw_bytes} bytes for the `read_graph` \
         result itself ({:.0}x fewer).",
        raw_bytes as f64 / aggregated_bytes.max(1) as f64
    ))
}
