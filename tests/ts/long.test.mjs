// Work longer than a client waits, through the official TypeScript SDK with its default
// request options, as Claude Desktop and Claude Code call tools: a foreground call of 90 s is
// given up by the client after its 60 s timeout (and cancelled, which stops the code), while
// the same work as a background run finishes and is read back with get_run.
//
// Run by `cargo test --release` (tests/it/ts_sdk.rs).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const BIN = process.env.MCP_CODE_SANDBOX_BIN;
const HOME = process.env.CODE_SANDBOX_HOME;
let client;

before(async () => {
  const transport = new StdioClientTransport({
    command: BIN,
    args: [],
    env: { PATH: process.env.PATH, HOME: process.env.HOME, CODE_SANDBOX_HOME: HOME, CODE_SANDBOX_PERSIST: "false", RUST_LOG: "warn" },
    stderr: "inherit",
  });
  client = new Client({ name: "ts-sdk-long", version: "1.0.0" });
  await client.connect(transport);
  await client.listTools();
});

after(async () => {
  await client?.close();
});

const SLEEP_90 = "import time\nx = 'before'\ntime.sleep(90)\nx = 'after'\n'slept'";

test("a 90 s foreground call is given up by the client at 60 s and stopped; background carries it", async () => {
  const id = (await client.callTool({ name: "create_sandbox", arguments: {} })).structuredContent.sandbox_id;
  const started = Date.now();
  await assert.rejects(
    client.callTool({ name: "execute_code", arguments: { sandbox_id: id, code: SLEEP_90, timeout_seconds: 120 } }),
    (e) => e.code === -32001 && /timed out/i.test(e.message),
    "the SDK's default 60 s request timeout ends the call",
  );
  const waited = (Date.now() - started) / 1000;
  console.log(`foreground: the client gave up after ${waited.toFixed(1)} s`);
  // The SDK sent notifications/cancelled: the server stopped the code, so the sandbox answers
  // the next call, with the interpreter reset.
  const next = await client.callTool({ name: "execute_code", arguments: { sandbox_id: id, code: "1 + 1" } });
  assert.equal(next.structuredContent.result, "2");
  assert.equal(next.structuredContent.state_lost, true, "the cancelled call stopped the interpreter");

  const bg = await client.callTool({
    name: "execute_code",
    arguments: { sandbox_id: id, code: SLEEP_90, background: true },
  });
  assert.equal(bg.structuredContent.state, "running");
  const runId = bg.structuredContent.run_id;
  let polls = 0;
  let run;
  do {
    run = await client.callTool({ name: "get_run", arguments: { run_id: runId, wait_seconds: 50 } });
    polls += 1;
  } while (run.structuredContent.state === "running");
  assert.equal(run.structuredContent.state, "finished");
  assert.equal(run.structuredContent.result, "'slept'");
  assert.ok(run.structuredContent.elapsed_ms >= 90_000);
  console.log(`background: finished after ${(run.structuredContent.elapsed_ms / 1000).toFixed(1)} s, ${polls} get_run calls`);
  const x = await client.callTool({ name: "execute_code", arguments: { sandbox_id: id, code: "x" } });
  assert.equal(x.structuredContent.result, "'after'");
});
