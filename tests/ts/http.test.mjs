// Remote mode as the official TypeScript SDK's streamable-HTTP client sees it: the server is
// started with `--transport http` on a free loopback port, with two principals made by its own
// `token add`. Every result is validated by the SDK against the tool's output schema.
//
// Run by `cargo test --release` (tests/it/ts_sdk.rs), which passes the binary and the runtime
// home in MCP_CODE_SANDBOX_BIN and CODE_SANDBOX_HOME.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { homeSharing, startRemote } from "./remote_server.mjs";

const BIN = process.env.MCP_CODE_SANDBOX_BIN;
const SHARED = process.env.CODE_SANDBOX_HOME;
const LONG = { timeout: 180_000 };

let server;
let url;
let tokens;

before(async () => {
  assert.ok(BIN && SHARED, "MCP_CODE_SANDBOX_BIN and CODE_SANDBOX_HOME are set");
  ({ server, url, tokens } = await startRemote(BIN, homeSharing(SHARED, "mcs-ts-http-")));
});

after(() => server?.kill("SIGTERM"));

async function connect(name) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${tokens[name]}` } },
  });
  const client = new Client({ name: `ts-http-${name}`, version: "1.0.0" });
  await client.connect(transport);
  await client.listTools();
  return client;
}

const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");

test("the tools work over HTTP and every result validates", async () => {
  const alice = await connect("alice");
  const { tools } = await alice.listTools();
  assert.equal(tools.length, 17);
  const c = await alice.callTool({ name: "create_sandbox", arguments: {} }, undefined, LONG);
  const id = c.structuredContent.sandbox_id;
  const plot = await alice.callTool(
    {
      name: "execute_code",
      arguments: {
        sandbox_id: id,
        code: "import pandas as pd, matplotlib.pyplot as plt\ndf = pd.DataFrame({'x': [1, 2, 3]})\ndf.plot()\nplt.show()\nint(df.x.sum())",
      },
    },
    undefined,
    LONG,
  );
  assert.notEqual(plot.isError, true, text(plot));
  assert.equal(plot.structuredContent.result, "6");
  assert.equal(plot.content.filter((x) => x.type === "image").length, 1);
  await alice.callTool({ name: "write_file", arguments: { sandbox_id: id, file_path: "a.txt", content: "hi" } });
  const rf = await alice.callTool({ name: "read_file", arguments: { sandbox_id: id, file_path: "a.txt" } });
  assert.equal(rf.structuredContent.content, "hi");
  const up = await alice.callTool({ name: "upload_file", arguments: { source_path: "/etc/hostname", destination_path: "h" } });
  assert.equal(up.isError, true);
  assert.match(text(up), /content_base64/);
  await alice.close();
});

test("a principal's sandbox is unknown to another, in results the SDK accepts", async () => {
  const alice = await connect("alice");
  const bob = await connect("bob");
  const id = (await alice.callTool({ name: "create_sandbox", arguments: {} })).structuredContent.sandbox_id;
  const r = await bob.callTool({ name: "execute_code", arguments: { sandbox_id: id, code: "1" } });
  assert.equal(r.isError, true);
  assert.match(text(r), /no open sandbox has the id/);
  const all = await bob.callTool({ name: "get_sandbox_status", arguments: {} });
  assert.deepEqual(all.structuredContent.sandboxes, []);
  await alice.close();
  await bob.close();
});

test("a client without a valid token cannot connect", async () => {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: "Bearer mcs_not_a_token" } },
  });
  const client = new Client({ name: "ts-http-intruder", version: "1.0.0" });
  // The SDK shows the server's own words, which say what to do.
  await assert.rejects(client.connect(transport), (e) => e.code === 401 && /token is not valid/.test(e.message));
});
