// Code mode through the official TypeScript SDK client (Claude Desktop, Claude Code): results
// whose code called another MCP server (the reference memory server, pinned in
// tests/mcp-servers) validate against execute_code's and get_run's output schemas, tool_calls
// included, and execute_code's description names the server.
//
// Run by `cargo test --release` (tests/it/ts_sdk.rs).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const BIN = process.env.MCP_CODE_SANDBOX_BIN;
const HOME = process.env.CODE_SANDBOX_HOME;
const MODULES = process.env.MCP_SERVERS_MODULES;
let client;
let dir;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "mcs-ts-code-mode-"));
  const servers = join(dir, "servers.json");
  writeFileSync(servers, JSON.stringify({
    mcpServers: {
      memory: {
        command: "node",
        args: [join(MODULES, "server-memory/dist/index.js")],
        env: { MEMORY_FILE_PATH: join(dir, "memory.jsonl") },
      },
    },
  }));
  const transport = new StdioClientTransport({
    command: BIN,
    args: ["--mcp-servers", servers],
    env: { PATH: process.env.PATH, HOME: process.env.HOME, CODE_SANDBOX_HOME: HOME, CODE_SANDBOX_PERSIST: "false", RUST_LOG: "warn" },
    stderr: "inherit",
  });
  client = new Client({ name: "ts-sdk-code-mode", version: "1.0.0" });
  await client.connect(transport);
  await client.listTools();
});

after(async () => {
  await client?.close();
  rmSync(dir, { recursive: true, force: true });
});

test("a call whose code used another server validates, tool_calls included", async () => {
  const code = [
    "import mcp_tools",
    "mcp_tools.memory.create_entities(entities=[{'name': 'ts', 'entityType': 'client', 'observations': ['validates']}])",
    "[e['name'] for e in mcp_tools.memory.read_graph()['entities']]",
  ].join("\n");
  const r = await client.callTool({ name: "execute_code", arguments: { code } });
  assert.notEqual(r.isError, true, JSON.stringify(r));
  assert.equal(r.structuredContent.result, "['ts']");
  assert.deepEqual(r.structuredContent.tool_calls.map((c) => `${c.server}.${c.tool}:${c.ok}`), [
    "memory.create_entities:true",
    "memory.read_graph:true",
  ]);

  const tools = await client.listTools();
  const exec = tools.tools.find((t) => t.name === "execute_code");
  assert.match(exec.description, /memory \(9 tools\)/);
});

test("a tool's error and a background run's result validate too", async () => {
  const failed = await client.callTool({
    name: "execute_code",
    arguments: { code: "import mcp_tools\nmcp_tools.memory.create_entities(entities='not a list')" },
  });
  assert.equal(failed.isError, true);
  assert.equal(failed.structuredContent.error.name, "ToolError");
  assert.equal(failed.structuredContent.tool_calls[0].ok, false);

  const started = await client.callTool({
    name: "execute_code",
    arguments: { background: true, code: "import mcp_tools\nlen(mcp_tools.memory.read_graph()['entities'])" },
  });
  const runId = started.structuredContent.run_id;
  let run;
  for (let i = 0; i < 10; i++) {
    run = await client.callTool({ name: "get_run", arguments: { run_id: runId, wait_seconds: 10 } });
    if (run.structuredContent.state !== "running") break;
  }
  assert.equal(run.structuredContent.state, "finished", JSON.stringify(run.structuredContent));
  assert.equal(run.structuredContent.result, "1");
  assert.equal(run.structuredContent.tool_calls[0].tool, "read_graph");
});
