// Network results through the official TypeScript SDK client (Claude Desktop, Claude Code):
// a fetch from guest code to an allowed host (a real node:http server on loopback) validates
// against execute_code's output schema with its `network` list, and so does a refused host's
// PermissionError result.
//
// Run by `cargo test --release` (tests/it/ts_sdk.rs).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const BIN = process.env.MCP_CODE_SANDBOX_BIN;
const HOME = process.env.CODE_SANDBOX_HOME;
let client;
let web;
let port;

before(async () => {
  web = createServer((req, res) => {
    res.writeHead(200, { "Content-Type": "text/csv" });
    res.end("city,population\nOslo,700\nBergen,290\n");
  });
  await new Promise((resolve) => web.listen(0, "127.0.0.1", resolve));
  port = web.address().port;
  const transport = new StdioClientTransport({
    command: BIN,
    args: ["--allow-host", `http://127.0.0.1:${port}`],
    env: { PATH: process.env.PATH, HOME: process.env.HOME, CODE_SANDBOX_HOME: HOME, CODE_SANDBOX_PERSIST: "false", RUST_LOG: "warn" },
    stderr: "inherit",
  });
  client = new Client({ name: "ts-sdk-network", version: "1.0.0" });
  await client.connect(transport);
});

after(async () => {
  await client?.close();
  web?.close();
});

test("a fetch from an allowed host validates, with what left the machine", async () => {
  const code = [
    "import pandas as pd",
    `df = pd.read_csv('http://127.0.0.1:${port}/cities.csv')`,
    "int(df.population.sum())",
  ].join("\n");
  const r = await client.callTool({ name: "execute_code", arguments: { code } });
  assert.notEqual(r.isError, true, JSON.stringify(r));
  assert.equal(r.structuredContent.result, "990");
  assert.equal(r.structuredContent.network.length, 1, JSON.stringify(r.structuredContent));
  assert.equal(r.structuredContent.network[0].host, "127.0.0.1");
  assert.ok(r.structuredContent.network[0].bytes > 30, JSON.stringify(r.structuredContent.network));
});

test("a refused host is a PermissionError result that validates", async () => {
  const code = "import urllib.request\nurllib.request.urlopen('https://example.com/')";
  const r = await client.callTool({ name: "execute_code", arguments: { code } });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.error.name, "PermissionError");
  assert.match(r.structuredContent.error.value, /CODE_SANDBOX_ALLOW_HOSTS/);
});
