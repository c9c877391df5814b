// The first call from a source build, through the official TypeScript SDK with its default
// request options (a 60 s timeout), as Claude Desktop and Claude Code make it: the server's
// home has the runtime unpacked but not yet compiled (about a minute or two on two cores), so
// no call may be given up by the client while the server prepares. Each call answers within
// the client's timeout, saying the interpreter is still being prepared, and the same call made
// again runs once it is.
//
// Run by `cargo test --release` (tests/it/ts_sdk.rs).

import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const BIN = process.env.MCP_CODE_SANDBOX_BIN;
const SHARED = process.env.CODE_SANDBOX_HOME;

test("a first call while the interpreter compiles is answered, and the retry runs", { timeout: 900_000 }, async () => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "mcs-first-call-"));
  // The runtime as fetched and unpacked, without the compiled interpreter.
  for (const d of ["runtime", "wheels"]) fs.symlinkSync(path.join(SHARED, d), path.join(home, d));
  const transport = new StdioClientTransport({
    command: BIN,
    args: [],
    env: { PATH: process.env.PATH, HOME: process.env.HOME, CODE_SANDBOX_HOME: home, CODE_SANDBOX_PERSIST: "false", RUST_LOG: "warn" },
    stderr: "inherit",
  });
  const client = new Client({ name: "ts-sdk-first-call", version: "1.0.0" });
  await client.connect(transport);
  try {
    await firstCalls(client);
  } finally {
    // Also on a failure: the server (and its warm-image build) must not outlive the test.
    await client.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
});

async function firstCalls(client) {
  let result;
  const said = [];
  for (let attempt = 0; attempt < 12; attempt++) {
    // The SDK's default options: a call the server does not answer in 60 s rejects here.
    result = await client.callTool({ name: "execute_code", arguments: { code: "1+1" } });
    if (!result.isError) break;
    const text = result.content.map((c) => c.text ?? "").join("");
    said.push(text);
    assert.match(text, /still being prepared.*call again/s, text);
  }
  assert.notEqual(result.isError, true, `never ran: ${said.join(" | ")}`);
  assert.equal(result.structuredContent.result, "2");
  console.log(`first call: ran after ${said.length} answer(s) saying the interpreter was being prepared`);
}
