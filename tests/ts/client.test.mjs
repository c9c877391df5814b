// The server as Claude Desktop and Claude Code see it: through the official TypeScript SDK
// client, which validates every tool result against the tool's output schema (errors
// included) and whose stdio reader gives up on messages over 10 MiB. Every call here must
// return a result the SDK accepts, each under Claude Desktop's 1 MiB limit.
//
// Run by `cargo test --release` (tests/it/ts_sdk.rs), which passes the binary and the
// runtime home in MCP_CODE_SANDBOX_BIN and CODE_SANDBOX_HOME.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const BIN = process.env.MCP_CODE_SANDBOX_BIN;
const HOME = process.env.CODE_SANDBOX_HOME;
const MiB = 1024 * 1024;
const LONG = { timeout: 180_000 };

// Ajv reports unknown schema formats through console.warn; collect them.
const warnings = [];
const warn = console.warn;
console.warn = (...args) => {
  warnings.push(args.join(" "));
  warn(...args);
};

let client;
const sizes = {};

before(async () => {
  assert.ok(BIN, "MCP_CODE_SANDBOX_BIN names the server binary");
  const transport = new StdioClientTransport({
    command: BIN,
    args: [],
    env: { PATH: process.env.PATH, HOME: process.env.HOME, CODE_SANDBOX_HOME: HOME, CODE_SANDBOX_PERSIST: "false", RUST_LOG: "warn", CODE_SANDBOX_MAX_BACKGROUND_RUNS: "1" },
    stderr: "inherit",
  });
  client = new Client({ name: "ts-sdk-test", version: "1.0.0" });
  await client.connect(transport);
  // Tool output schemas are cached by listTools; callTool validates against them.
  await client.listTools();
});

after(async () => {
  await client?.close();
  console.log("result sizes (bytes):", JSON.stringify(sizes));
});

/** Calls a tool; the SDK throws if the result does not validate. Returns the result. */
async function call(name, args, label = name) {
  const r = await client.callTool({ name, arguments: args }, undefined, LONG);
  const size = Buffer.byteLength(JSON.stringify(r));
  sizes[label] = size;
  assert.ok(size < MiB, `${label}: result is ${size} bytes, over 1 MiB`);
  assert.ok(size <= 1_000_000, `${label}: result is ${size} bytes, over the 1,000,000 byte budget`);
  return r;
}

const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
const images = (r) => r.content.filter((c) => c.type === "image");
const links = (r) => r.content.filter((c) => c.type === "resource_link");

function pngSize(b64) {
  const png = Buffer.from(b64, "base64");
  assert.equal(png.subarray(1, 4).toString(), "PNG");
  return [png.readUInt32BE(16), png.readUInt32BE(20)];
}

async function ok(name, args, label) {
  const r = await call(name, args, label);
  assert.notEqual(r.isError, true, `${label ?? name} failed: ${text(r)}`);
  assert.ok(r.structuredContent, `${label ?? name}: structured content`);
  return r;
}

async function err(name, args, label, pattern) {
  const r = await call(name, args, label);
  assert.equal(r.isError, true, `${label} should be an error: ${text(r)}`);
  assert.match(text(r), pattern, label);
  return r;
}

test("tools carry titles, annotations and schemas every validator knows", async () => {
  const { tools } = await client.listTools();
  assert.equal(tools.length, 17);
  for (const t of tools) {
    assert.ok(t.title, `${t.name} has a title`);
    assert.ok(t.outputSchema, `${t.name} has an output schema`);
    assert.equal(t.outputSchema.type, "object");
    assert.equal(t.annotations?.openWorldHint, false, `${t.name}: the local backend is not open-world`);
    assert.doesNotMatch(JSON.stringify(t.outputSchema) + JSON.stringify(t.inputSchema), /"format":"u?int/);
  }
  const by = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const n of ["get_sandbox_status", "list_files", "read_file"]) assert.equal(by[n].annotations.readOnlyHint, true, n);
  assert.equal(by.close_sandbox.annotations.destructiveHint, true);
  const { resourceTemplates } = await client.listResourceTemplates();
  assert.equal(resourceTemplates[0].uriTemplate, "sandbox://{sandbox_id}/{+path}");
  assert.deepEqual(warnings.filter((w) => /format/.test(w)), [], "no schema format warnings");
});

test("every tool succeeds and validates", async () => {
  const c = await ok("create_sandbox", {});
  const id = c.structuredContent.sandbox_id;
  await ok("get_sandbox_status", { sandbox_id: id }, "get_sandbox_status(one)");
  await ok("get_sandbox_status", {}, "get_sandbox_status(all)");
  const e = await ok("execute_code", { sandbox_id: id, code: "x = 41\nx + 1" });
  assert.equal(e.structuredContent.result, "42");
  await ok("write_file", { sandbox_id: id, file_path: "data/a.csv", content: "a,b\n1,2\n" });
  await ok("upload_file", { sandbox_id: id, content_base64: Buffer.from("hello").toString("base64"), destination_path: "h.txt" });
  const l = await ok("list_files", { sandbox_id: id });
  assert.deepEqual(l.structuredContent.entries.map((e) => e.name), ["data", "h.txt"]);
  const rf = await ok("read_file", { sandbox_id: id, file_path: "data/a.csv" });
  assert.equal(rf.structuredContent.content, "a,b\n1,2\n");
  const ip = await ok("install_package", { sandbox_id: id, package_name: "tabulate" });
  assert.ok(ip.structuredContent.already_available || ip.structuredContent.installed.length > 0);
  await ok("install_package", { sandbox_id: id, package_name: "?" }, "install_package(?)");
  const cp = await ok("checkpoint_sandbox", { sandbox_id: id, name: "cp1" });
  assert.equal(cp.structuredContent.checkpoint.name, "cp1");
  const st = await ok("get_sandbox_status", { sandbox_id: id }, "get_sandbox_status(with checkpoints)");
  assert.equal(st.structuredContent.checkpoints[0].name, "cp1");
  await ok("execute_code", { sandbox_id: id, code: "x = 0" });
  await ok("restore_sandbox", { sandbox_id: id, checkpoint: "cp1" });
  const f = await ok("fork_sandbox", { sandbox_id: id });
  const back = await ok("execute_code", { sandbox_id: f.structuredContent.sandbox_id, code: "x" });
  assert.equal(back.structuredContent.result, "41");
  await ok("close_sandbox", { sandbox_id: f.structuredContent.sandbox_id });
  const crc = await ok("create_run_close", { code: "print('once')" });
  assert.match(text(crc), /once/);

  // A background run: started, followed, finished with a figure; another stopped.
  const bg = await ok(
    "execute_code",
    { sandbox_id: id, background: true, code: "import time, matplotlib.pyplot as plt\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.5)\nplt.plot([1, 2])\n'done'" },
    "execute_code(background)",
  );
  assert.equal(bg.structuredContent.state, "running");
  const runId = bg.structuredContent.run_id;
  const busy = await call("execute_code", { sandbox_id: id, code: "1" }, "execute_code(busy)");
  assert.equal(busy.isError, true);
  assert.match(text(busy), new RegExp(runId));
  let seen = "";
  let at = 0;
  let run;
  for (;;) {
    run = await call("get_run", { run_id: runId, wait_seconds: 10, stdout_offset: at }, "get_run");
    seen += run.structuredContent.new_stdout;
    at = run.structuredContent.stdout_offset;
    if (run.structuredContent.state !== "running") break;
  }
  assert.equal(seen, "0\n1\n2\n");
  assert.equal(run.structuredContent.state, "finished");
  assert.equal(run.structuredContent.result, "'done'");
  assert.equal(images(run).length, 1);
  const spin = await ok("execute_code", { sandbox_id: id, background: true, code: "while True: pass" });
  // Past the budget (1 here) a run is queued, and says where it stands.
  const other = (await ok("create_sandbox", {})).structuredContent.sandbox_id;
  const waits = await ok("execute_code", { sandbox_id: other, background: true, code: "1" }, "execute_code(queued)");
  assert.equal(waits.structuredContent.state, "queued");
  const queued = await call("get_run", { run_id: waits.structuredContent.run_id }, "get_run(queued)");
  assert.equal(queued.structuredContent.state, "queued");
  assert.equal(queued.structuredContent.queue_position, 1);
  const dropped = await ok("cancel_run", { run_id: waits.structuredContent.run_id }, "cancel_run(queued)");
  assert.equal(dropped.structuredContent.state, "cancelled");
  await ok("close_sandbox", { sandbox_id: other });
  const cancelled = await ok("cancel_run", { run_id: spin.structuredContent.run_id });
  assert.equal(cancelled.structuredContent.state, "cancelled");
  const stopped = await call("get_run", { run_id: spin.structuredContent.run_id }, "get_run(cancelled)");
  assert.equal(stopped.structuredContent.state, "cancelled");
  await err("get_run", { run_id: "run-sbx-none-0123abcd" }, "unknown run", /no such run/);
  await ok("close_sandbox", { sandbox_id: id });
});

test("a retried close_sandbox without an id refuses instead of closing an older sandbox", async () => {
  const older = (await ok("create_sandbox", {})).structuredContent.sandbox_id;
  await ok("create_sandbox", {});
  await ok("close_sandbox", {}, "close_sandbox(default)");
  await err("close_sandbox", {}, "close_sandbox(no default)", /no default sandbox/);
  await ok("get_sandbox_status", { sandbox_id: older });
  await ok("close_sandbox", { sandbox_id: older });
});

test("every error is a result the SDK accepts, with a message saying what to do", async () => {
  const id = (await ok("create_sandbox", {})).structuredContent.sandbox_id;
  await err("execute_code", { sandbox_id: "nope", code: "1" }, "unknown sandbox", /get_sandbox_status/);
  await err("read_file", { sandbox_id: id, file_path: "missing.txt" }, "missing file", /list_files/);
  await err("read_file", { sandbox_id: id, file_path: "../etc/passwd" }, "path escape", /relative to \/home\/user/);
  await err("install_package", { sandbox_id: id, package_name: "no-such-package-xyz" }, "unknown package", /./);
  await err("execute_code", { sandbox_id: id, code: 5 }, "wrong argument type", /bad arguments/);
  await err("execute_code", { sandbox_id: id }, "missing argument", /code/);
  await err("close_sandbox", { sandbox_id: "" }, "blank id on close", /never guesses/);
  await err("restore_sandbox", { sandbox_id: "", checkpoint: "a" }, "blank id on restore", /never guesses/);
  await err("restore_sandbox", { sandbox_id: id, checkpoint: "none" }, "unknown checkpoint", /checkpoint_sandbox/);
  await err("list_files", { sandbox_id: id, path: "nothing/here" }, "missing folder", /does not exist/);
  await err("upload_file", { sandbox_id: id }, "upload without input", /source_path/);
  await err("upload_file", { sandbox_id: id, content_base64: "!!!", destination_path: "x" }, "bad base64", /base64/);
  await err("get_sandbox_status", { sandbox_id: "nope" }, "status of unknown", /no open sandbox/);
  const py = await err("execute_code", { sandbox_id: id, code: "1/0" }, "python exception", /ZeroDivisionError/);
  assert.equal(py.structuredContent.error.name, "ZeroDivisionError");
  await ok("close_sandbox", { sandbox_id: id });
  await err("execute_code", { sandbox_id: id, code: "1" }, "closed sandbox", /sandbox/);
});

test("a flood of output stays within the budget, with its end and the traceback inline", async () => {
  const id = (await ok("create_sandbox", {})).structuredContent.sandbox_id;
  const code = [
    "import sys",
    "for i in range(100_000): print(f'line {i:06d} ' + 'x' * 40)",
    "for i in range(60_000): sys.stderr.write(f'warn {i:06d} ' + 'y' * 40 + '\\n')",
    "print('THE END OF STDOUT')",
    "raise ValueError('the real error at the end')",
  ].join("\n");
  const r = await call("execute_code", { sandbox_id: id, code }, "flood 5 MB + 3 MB");
  assert.equal(r.isError, true);
  const t = text(r);
  assert.match(t, /THE END OF STDOUT/);
  assert.match(t, /ValueError: the real error at the end/);
  assert.ok(t.length < 100_000, `text for the model is ${t.length} characters`);
  const s = r.structuredContent;
  assert.match(s.stdout, /THE END OF STDOUT/);
  assert.ok(s.stdout.length <= 21_000, `inline stdout is ${s.stdout.length} characters`);
  assert.ok(s.saved_files.some((p) => p.endsWith("/stdout.txt")), JSON.stringify(s.saved_files));
  assert.ok(links(r).length >= 2, "the saved output is linked");
  // The saved output is there, and larger than what was shown.
  const saved = s.saved_files.find((p) => p.endsWith("/stdout.txt"));
  const dir = saved.replace("/home/user/", "").replace(/\/stdout.txt$/, "");
  const l = await ok("list_files", { sandbox_id: id, path: dir });
  const file = l.structuredContent.entries.find((e) => e.name === "stdout.txt");
  assert.ok(file.size > 500_000, `saved stdout is ${file.size} bytes`);
  const tail = await ok("execute_code", { sandbox_id: id, code: `open('${saved}').read().splitlines()[-1]` });
  assert.match(tail.structuredContent.result, /THE END OF STDOUT/);
});

test("many large figures: at least one inline, each at most 1568 px, the rest saved and linked", async () => {
  const id = (await ok("create_sandbox", {})).structuredContent.sandbox_id;
  const code = [
    "import numpy as np, matplotlib.pyplot as plt",
    "for k in range(12):",
    "    fig = plt.figure(figsize=(24, 16))",
    "    for j in range(40): plt.plot(np.cumsum(np.random.randn(3000)))",
    "    plt.title(f'figure {k}')",
    "print('drawn')",
  ].join("\n");
  const r = await call("execute_code", { sandbox_id: id, code, timeout_seconds: 120 }, "twelve large figures");
  assert.notEqual(r.isError, true, text(r));
  const imgs = images(r);
  assert.ok(imgs.length >= 1, "at least one figure inline");
  for (const i of imgs) {
    const [w, h] = pngSize(i.data);
    assert.ok(Math.max(w, h) <= 1568, `figure is ${w}x${h}`);
  }
  assert.equal(r.structuredContent.images, imgs.length);
  if (imgs.length < 12) {
    assert.match(text(r), /did not fit in this result/);
    assert.ok(r.structuredContent.saved_files.filter((p) => p.endsWith(".png")).length >= 12 - imgs.length);
  }
});

test("noisy 2000 px figures still bring one figure inline", async () => {
  const id = (await ok("create_sandbox", {})).structuredContent.sandbox_id;
  const code = [
    "import numpy as np, matplotlib.pyplot as plt",
    "for k in range(5):",
    "    fig = plt.figure(figsize=(20, 20))",
    "    plt.imshow(np.random.rand(2000, 2000, 3)); plt.axis('off')",
    "raise RuntimeError('after the figures')",
  ].join("\n");
  const r = await call("execute_code", { sandbox_id: id, code, timeout_seconds: 120 }, "five noisy 2000 px figures");
  assert.equal(r.isError, true);
  assert.match(text(r), /RuntimeError: after the figures/);
  assert.ok(images(r).length >= 1, "one figure inline");
});

test("a long listing is paged within the budget, sorted", async () => {
  const id = (await ok("create_sandbox", {})).structuredContent.sandbox_id;
  await ok("execute_code", {
    sandbox_id: id,
    code: "import os\nos.mkdir('many')\nfor i in range(10_000): open(f'many/{i:05d}_' + 'n' * 200, 'w').close()",
    timeout_seconds: 120,
  });
  let offset = 0;
  const names = [];
  for (let page = 0; page < 300; page++) {
    const r = await ok("list_files", { sandbox_id: id, path: "many", offset }, page === 0 ? "list 10,000 long names" : "list page");
    names.push(...r.structuredContent.entries.map((e) => e.name));
    assert.equal(r.structuredContent.total, 10_000);
    if (r.structuredContent.next_offset == null) break;
    assert.match(text(r), /more entries: call list_files with offset=/);
    offset = r.structuredContent.next_offset;
  }
  assert.equal(names.length, 10_000);
  assert.deepEqual([...names].sort(), names, "sorted by name");
});

test("large requests get answers: a 17 MB write and a 13 MB upload", async () => {
  const id = (await ok("create_sandbox", {})).structuredContent.sandbox_id;
  const content = "0123456789abcdef\n".repeat(1_000_000); // 17 MB
  const w = await ok("write_file", { sandbox_id: id, file_path: "big.txt", content }, "write_file 17 MB");
  assert.equal(w.structuredContent.bytes_written, content.length);
  const bytes = Buffer.alloc(10 * MiB, 7); // 13.3 MB as base64
  const u = await ok("upload_file", { sandbox_id: id, content_base64: bytes.toString("base64"), destination_path: "blob.bin" }, "upload_file 13 MB");
  assert.equal(u.structuredContent.bytes_written, bytes.length);
  // Reading it back does not fit a result: it comes in parts that end at a line's end.
  const first = await ok("read_file", { sandbox_id: id, file_path: "big.txt" }, "read_file 17 MB");
  const next = first.structuredContent.next_offset;
  assert.ok(next > 10_000 && next % 17 === 0, `a first part of whole lines: ${next}`);
  assert.equal(first.structuredContent.content, content.slice(0, next));
  const last = await ok("read_file", { sandbox_id: id, file_path: "big.txt", offset: 17_000_000 - 34 }, "read_file's last part");
  assert.equal(last.structuredContent.content, "0123456789abcdef\n".repeat(2));
  assert.equal(last.structuredContent.next_offset, undefined);
  await assert.rejects(
    client.readResource({ uri: `sandbox://${id}/big.txt` }),
    /17000000 bytes/,
    "a resource over the budget is refused with its size",
  );
});

test("figure drawing stays inside the call's time and never resets the interpreter", async () => {
  const id = (await ok("create_sandbox", {})).structuredContent.sandbox_id;
  await ok("execute_code", { sandbox_id: id, code: "x = 41\nimport matplotlib.pyplot as plt, time" });
  // Figures are made until 1.6 s have passed, leaving too little of the 2 s to draw them all.
  const code = [
    "t0 = time.monotonic()",
    "while time.monotonic() - t0 < 1.6:",
    "    plt.figure(figsize=(12, 9)); plt.plot(range(20000))",
  ].join("\n");
  const r = await call("execute_code", { sandbox_id: id, code, timeout_seconds: 2 }, "figures at the time limit");
  assert.equal(r.structuredContent.state_lost, false, text(r));
  assert.match(text(r), /not drawn because the call's time limit was reached/);
  const next = await ok("execute_code", { sandbox_id: id, code: "x + 1" });
  assert.equal(next.structuredContent.result, "42");
  assert.equal(next.structuredContent.state_lost, false);
});

test("resources are paged with cursors", async () => {
  const id = (await ok("create_sandbox", {})).structuredContent.sandbox_id;
  await ok("execute_code", { sandbox_id: id, code: "for i in range(250): open(f'r{i:03d}.txt', 'w').write('x')" });
  let cursor;
  let n = 0;
  for (let i = 0; i < 100; i++) {
    const page = await client.listResources(cursor ? { cursor } : {});
    n += page.resources.filter((r) => r.uri.startsWith(`sandbox://${id}/r`)).length;
    cursor = page.nextCursor;
    if (!cursor) break;
  }
  assert.equal(n, 250);
  const one = await client.readResource({ uri: `sandbox://${id}/r007.txt` });
  assert.equal(one.contents[0].text, "x");
});

test("shared folders and save_file: results the SDK accepts, errors included", LONG, async () => {
  const fs = await import("node:fs");
  const os = await import("node:os");
  const path = await import("node:path");
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "ts-folders-"));
  const shared = path.join(root, "reports");
  const saves = path.join(root, "saved");
  fs.mkdirSync(shared);
  fs.mkdirSync(saves);
  fs.writeFileSync(path.join(shared, "q1.csv"), "a,b\n1,2\n");
  const transport = new StdioClientTransport({
    command: BIN,
    args: [],
    env: {
      PATH: process.env.PATH, HOME: process.env.HOME, CODE_SANDBOX_HOME: HOME, CODE_SANDBOX_PERSIST: "false",
      RUST_LOG: "warn", CODE_SANDBOX_READ_DIRS: shared, CODE_SANDBOX_SAVE_DIRS: saves,
      // The plain image: a warm one for this layout of folders is another test's business.
      CODE_SANDBOX_WARM_IMAGE: "false",
    },
    stderr: "inherit",
  });
  const other = new Client({ name: "ts-sdk-folders", version: "1.0.0" });
  await other.connect(transport);
  try {
    const tools = (await other.listTools()).tools;
    const saveTool = tools.find((t) => t.name === "save_file");
    assert.ok(saveTool?.outputSchema, "save_file is offered, with an output schema");
    const use = (name, args) => other.callTool({ name, arguments: args }, undefined, LONG);
    const id = (await use("create_sandbox", {})).structuredContent.sandbox_id;
    const e = await use("execute_code", { sandbox_id: id, code: "import pandas as pd\nd = pd.read_csv('/mnt/reports/q1.csv')\nd.to_csv('out.csv', index=False)\nint(d.b.sum())" });
    assert.equal(e.structuredContent.result, "2", text(e));
    const listed = await use("list_files", { sandbox_id: id, path: "/mnt/reports" });
    assert.deepEqual(listed.structuredContent.entries.map((x) => x.path), ["/mnt/reports/q1.csv"]);
    const read = await use("read_file", { sandbox_id: id, file_path: "/mnt/reports/q1.csv" });
    assert.equal(read.structuredContent.content, "a,b\n1,2\n");
    const saved = await use("save_file", { sandbox_id: id, path: "out.csv", destination: path.join(saves, "out.csv") });
    assert.equal(saved.structuredContent.bytes_written, 8, text(saved));
    assert.equal(saved.structuredContent.replaced, false);
    const again = await use("save_file", { sandbox_id: id, path: "out.csv", destination: path.join(saves, "out.csv") });
    assert.equal(again.isError, true);
    assert.match(text(again), /overwrite: true/);
    const refused = await use("write_file", { sandbox_id: id, file_path: "/mnt/reports/x", content: "x" });
    assert.equal(refused.isError, true);
    assert.equal(fs.readFileSync(path.join(saves, "out.csv"), "utf8"), "a,b\n1,2\n");
  } finally {
    await other.close();
    fs.rmSync(root, { recursive: true, force: true });
  }
});
