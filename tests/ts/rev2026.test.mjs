// Protocol revision 2026-07-28 as the official TypeScript SDK v2 client speaks it
// (`@modelcontextprotocol/client`, pinned to that revision: `server/discover`, no initialize,
// each request carrying its version, capabilities and log level in `_meta`), over stdio and
// over streamable HTTP in remote mode with two principals. Every result is validated by the
// SDK against the revision's schemas and the tool's output schema.
//
// Run by `cargo test --release` (tests/it/ts_sdk.rs), which passes the binary and the runtime
// home. Code mode's server is tests/mcp-servers/misbehaving.py (standard library only).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Client, StreamableHTTPClientTransport, LOG_LEVEL_META_KEY } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { homeSharing, startRemote } from "./remote_server.mjs";

const BIN = process.env.MCP_CODE_SANDBOX_BIN;
const SHARED = process.env.CODE_SANDBOX_HOME;
const PYTHON = "python3";
const REVISION = "2026-07-28";
const LONG = { timeout: 180_000 };
const TEMPLATE = "sandbox://{sandbox_id}/{+path}";

/// A client pinned to 2026-07-28 that records log lines and list changes.
function recordingClient() {
  const client = new Client(
    { name: "rev2026-test", version: "1" },
    { versionNegotiation: { mode: { pin: REVISION } } },
  );
  const seen = { logs: [], tools: 0, resources: 0 };
  client.setNotificationHandler("notifications/message", (n) => {
    seen.logs.push(`${n.params.level} ${n.params.data}`);
  });
  client.setNotificationHandler("notifications/tools/list_changed", () => {
    seen.tools += 1;
  });
  client.setNotificationHandler("notifications/resources/list_changed", () => {
    seen.resources += 1;
  });
  return { client, seen };
}

async function until(what, ok, ms = 15_000) {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function withLevel(level) {
  return { [LOG_LEVEL_META_KEY]: level };
}

async function run(client, code, extra = {}) {
  const r = await client.callTool({ name: "execute_code", arguments: { code, ...extra.args }, _meta: extra.meta });
  assert.ok(!r.isError, JSON.stringify(r));
  return r.structuredContent;
}

// --- stdio, with code mode's servers ------------------------------------------------------

let stdio;

before(async () => {
  assert.ok(BIN && SHARED, "MCP_CODE_SANDBOX_BIN and CODE_SANDBOX_HOME are set");
  const dir = homeSharing(SHARED, "mcs-rev2026-stdio-");
  const servers = join(dir, "servers.json");
  writeFileSync(
    servers,
    JSON.stringify({
      mcpServers: {
        srv: { command: PYTHON, args: [resolve("../mcp-servers/misbehaving.py"), "changing"] },
      },
    }),
  );
  const { client, seen } = recordingClient();
  const transport = new StdioClientTransport({
    command: BIN,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      CODE_SANDBOX_HOME: dir,
      CODE_SANDBOX_PERSIST: "false",
      CODE_SANDBOX_MCP_SERVERS: servers,
      RUST_LOG: "warn",
    },
    stderr: "inherit",
  });
  await client.connect(transport);
  stdio = { client, seen };
});

after(async () => {
  await stdio?.client.close();
});

test("stdio: the revision is 2026-07-28 and every tool's result passes its output schema", LONG, async () => {
  const { client } = stdio;
  assert.equal(client.getNegotiatedProtocolVersion(), REVISION);
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const t of ["execute_code", "create_sandbox", "read_file", "get_run"]) assert.ok(names.includes(t), names.join());
  const v = await run(client, "sum(range(10))");
  assert.equal(v.result, "45");
  const sb = v.sandbox_id;
  const wrote = await client.callTool({
    name: "write_file",
    arguments: { sandbox_id: sb, file_path: "data/points.csv", content: "x\n1\n" },
  });
  assert.ok(!wrote.isError, JSON.stringify(wrote));
  const done = await client.complete({
    ref: { type: "ref/resource", uri: TEMPLATE },
    argument: { name: "path", value: "data/p" },
    context: { arguments: { sandbox_id: sb } },
  });
  assert.deepEqual(done.completion.values, ["data/points.csv"]);
  const ids = await client.complete({
    ref: { type: "ref/resource", uri: TEMPLATE },
    argument: { name: "sandbox_id", value: "sbx-" },
  });
  assert.ok(ids.completion.values.includes(sb), JSON.stringify(ids));
});

test("stdio: a call hears log lines only when its _meta asks, at the level it asks", LONG, async () => {
  const { client, seen } = stdio;
  seen.logs.length = 0;
  // No level asked: a new sandbox is made, and nothing is said.
  const quiet = await run(client, "1", { args: { sandbox_id: null } });
  await client.callTool({ name: "close_sandbox", arguments: { sandbox_id: quiet.sandbox_id } });
  assert.deepEqual(seen.logs, []);
  // Info: the sandbox made for it is named before the result arrives.
  const created = await client.callTool({ name: "create_sandbox", arguments: {}, _meta: withLevel("info") });
  const sb = created.structuredContent.sandbox_id;
  assert.ok(
    seen.logs.some((l) => l === `info sandbox ${sb} was created`),
    JSON.stringify(seen.logs),
  );
  // Warning: an interpreter reset is said; info lines are not.
  seen.logs.length = 0;
  await client.callTool({
    name: "execute_code",
    arguments: { sandbox_id: sb, code: "import sys\nsys.modules.clear()" },
    _meta: withLevel("warning"),
  });
  const fresh = await client.callTool({ name: "create_sandbox", arguments: {}, _meta: withLevel("warning") });
  assert.ok(
    seen.logs.some((l) => l.startsWith("warning") && l.includes(`sandbox ${sb}: the interpreter was reset`)),
    JSON.stringify(seen.logs),
  );
  assert.ok(!seen.logs.some((l) => l.startsWith("info")), JSON.stringify(seen.logs));
  await client.callTool({ name: "close_sandbox", arguments: { sandbox_id: fresh.structuredContent.sandbox_id } });
});

test("stdio: a listen stream hears tool list changes from code mode and sandboxes come and go", LONG, async () => {
  const { client, seen } = stdio;
  const sub = await client.listen({ toolsListChanged: true, resourcesListChanged: true });
  assert.equal(sub.honoredFilter.toolsListChanged, true);
  assert.equal(sub.honoredFilter.resourcesListChanged, true);
  const resourcesBefore = seen.resources;
  const made = await client.callTool({ name: "create_sandbox", arguments: {} });
  const sb = made.structuredContent.sandbox_id;
  await until("a resource list change for a new sandbox", () => seen.resources > resourcesBefore);
  const closedBefore = seen.resources;
  await client.callTool({ name: "close_sandbox", arguments: { sandbox_id: sb } });
  await until("a resource list change for a closed sandbox", () => seen.resources > closedBefore);

  // The downstream server learns a tool: the listener hears the list changed, and the next
  // listing describes the new tool to the model.
  const toolsBefore = seen.tools;
  const learned = await run(client, "import mcp_tools\nmcp_tools.srv.learn()", { args: { sandbox_id: null } });
  assert.match(JSON.stringify(learned), /learned/);
  await until("a tool list change", () => seen.tools > toolsBefore);
  const { tools } = await client.listTools({}, { cacheMode: "refresh" });
  const described = tools.find((t) => t.name === "execute_code").description;
  assert.match(described, /Servers: srv \(3 tools\)/);

  // It dies: the next call that needs it hears that it went down, at the level it asked.
  seen.logs.length = 0;
  const crashed = await client.callTool({
    name: "execute_code",
    arguments: { code: "import mcp_tools\nmcp_tools.srv.crash()" },
  });
  assert.ok(crashed.structuredContent.error, JSON.stringify(crashed.structuredContent));
  await client.callTool({
    name: "execute_code",
    arguments: { code: "import mcp_tools\nmcp_tools.srv.learn()" },
    _meta: withLevel("warning"),
  });
  assert.ok(
    seen.logs.some((l) => l.startsWith("warning") && l.includes("code mode's server srv went down")),
    JSON.stringify(seen.logs),
  );
  await sub.close();
  assert.equal(await sub.closed, "local");
});

// --- streamable HTTP, remote mode, two principals ------------------------------------------

async function httpClient(url, token) {
  const { client, seen } = recordingClient();
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return { client, seen };
}

test("http: each principal completes, hears and lists only its own sandboxes", LONG, async () => {
  const { server, url, tokens } = await startRemote(BIN, homeSharing(SHARED, "mcs-rev2026-http-"));
  try {
    const alice = await httpClient(url, tokens.alice);
    const bob = await httpClient(url, tokens.bob);
    assert.equal(alice.client.getNegotiatedProtocolVersion(), REVISION);

    const bobListens = await bob.client.listen({ resourcesListChanged: true });
    const aliceListens = await alice.client.listen({ resourcesListChanged: true });
    const made = await alice.client.callTool({ name: "create_sandbox", arguments: {}, _meta: withLevel("info") });
    const sbA = made.structuredContent.sandbox_id;
    assert.ok(alice.seen.logs.includes(`info sandbox ${sbA} was created`), JSON.stringify(alice.seen.logs));
    await until("alice's resource list change", () => alice.seen.resources > 0);

    // Bob, asking for every log line and listening, hears nothing of alice's sandbox.
    const sbB = (await run(bob.client, "2 + 2", { args: { sandbox_id: null }, meta: withLevel("debug") })).sandbox_id;
    await until("bob's resource list change", () => bob.seen.resources > 0);
    const forBob = JSON.stringify(bob.seen.logs);
    assert.ok(!forBob.includes(sbA), forBob);
    assert.ok(forBob.includes(sbB), forBob);

    const ids = async (who) =>
      (
        await who.client.complete({
          ref: { type: "ref/resource", uri: TEMPLATE },
          argument: { name: "sandbox_id", value: "" },
        })
      ).completion.values;
    assert.deepEqual(await ids(alice), [sbA]);
    assert.deepEqual(await ids(bob), [sbB]);

    // One sandbox each, and a resource change each: alice's listener heard only hers.
    const resourcesAlice = alice.seen.resources;
    await bob.client.callTool({ name: "close_sandbox", arguments: { sandbox_id: sbB } });
    await until("bob's second resource list change", () => bob.seen.resources > 1);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(alice.seen.resources, resourcesAlice, "alice heard of bob's sandbox closing");

    await bobListens.close();
    await aliceListens.close();
    await alice.client.close();
    await bob.client.close();
  } finally {
    server.kill();
  }
});

test("http: sandbox_id and run_id travel in Mcp-Param headers a proxy can route by, and a header that disagrees with the body is refused", LONG, async () => {
  const { server, url, tokens } = await startRemote(BIN, homeSharing(SHARED, "mcs-rev2026-headers-"));
  try {
    const sent = [];
    const { client } = recordingClient();
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${tokens.alice}` } },
      fetch: (input, init) => {
        sent.push(Object.fromEntries(new Headers(init?.headers).entries()));
        return fetch(input, init);
      },
    });
    await client.connect(transport);

    // The SDK drops a tool whose x-mcp-header mark is invalid: every tool the server lists is kept.
    const raw = await rawCall(url, tokens.alice, { jsonrpc: "2.0", id: 1, method: "tools/list", params: rawMeta() }, {
      "Mcp-Method": "tools/list",
    });
    const listed = raw.body.result.tools;
    const kept = (await client.listTools()).tools.map((t) => t.name);
    assert.deepEqual(kept.sort(), listed.map((t) => t.name).sort());
    const marked = listed.filter((t) => t.inputSchema.properties?.sandbox_id);
    assert.ok(marked.length >= 10, marked.map((t) => t.name).join());
    for (const t of marked) {
      assert.deepEqual(
        [t.inputSchema.properties.sandbox_id.type, t.inputSchema.properties.sandbox_id["x-mcp-header"]],
        ["string", "Sandbox-Id"],
        t.name,
      );
    }

    const sb = (await run(client, "x = 1")).sandbox_id;
    sent.length = 0;
    await run(client, "x + 1", { args: { sandbox_id: sb } });
    assert.equal(sent.at(-1)["mcp-param-sandbox-id"], sb, JSON.stringify(sent.at(-1)));
    const started = await run(client, "print('hi')", { args: { sandbox_id: sb, background: true } });
    // Until the run is over (on a busy machine it may wait its turn longer than one get_run),
    // asking each time from the output already read, so get_run waits instead of answering
    // at once with output seen before.
    let got;
    let offsets = { stdout_offset: 0, stderr_offset: 0 };
    for (let turn = 0; turn < 24; turn++) {
      got = await client.callTool({ name: "get_run", arguments: { run_id: started.run_id, wait_seconds: 5, ...offsets } });
      if (["finished", "cancelled", "timed_out", "interrupted"].includes(got.structuredContent?.state)) break;
      offsets = { stdout_offset: got.structuredContent?.stdout_offset ?? 0, stderr_offset: got.structuredContent?.stderr_offset ?? 0 };
    }
    assert.equal(got.structuredContent?.state, "finished", JSON.stringify(got));
    assert.equal(sent.at(-1)["mcp-param-run-id"], started.run_id, JSON.stringify(sent.at(-1)));
    // Null (as omitted): no header, and the call still runs.
    sent.length = 0;
    assert.equal((await run(client, "2 + 2", { args: { sandbox_id: null } })).result, "4");
    assert.equal(sent.at(-1)["mcp-param-sandbox-id"], undefined);

    // A request whose header names another sandbox than its body: 400, HeaderMismatch, nothing run.
    const other = "sbx-0123456789abcdef0123456789abcdef";
    const refused = await rawCall(
      url,
      tokens.alice,
      {
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: { name: "execute_code", arguments: { code: "x = 99", sandbox_id: sb }, ...rawMeta() },
      },
      { "Mcp-Method": "tools/call", "Mcp-Name": "execute_code", "Mcp-Param-Sandbox-Id": other },
    );
    assert.equal(refused.status, 400, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, -32020, JSON.stringify(refused.body));
    assert.match(refused.body.error.message, /Mcp-Param-Sandbox-Id/);
    assert.equal((await run(client, "x", { args: { sandbox_id: sb } })).result, "1", "the refused call ran");
    await client.close();
  } finally {
    server.kill();
  }
});

/// The `_meta` a stateless 2026-07-28 request carries.
function rawMeta() {
  return {
    _meta: {
      "io.modelcontextprotocol/protocolVersion": REVISION,
      "io.modelcontextprotocol/clientCapabilities": {},
      "io.modelcontextprotocol/clientInfo": { name: "raw", version: "1" },
    },
  };
}

/// One POST as a client of the revision sends it, with headers of the test's choosing.
async function rawCall(url, token, body, headers) {
  const r = await fetch(url, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${token}`,
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": REVISION,
      ...headers,
    },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  const json = text.startsWith("{") ? text : text.split("\n").find((l) => l.startsWith("data: {"))?.slice(6);
  return { status: r.status, body: json ? JSON.parse(json) : text };
}
