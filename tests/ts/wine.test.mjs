// The Windows server under Wine, as Claude Desktop on Windows runs it: the Windows bundle
// unpacked, started on an empty home over stdio, driven by the official TypeScript SDK.
// Run by `cargo xtask windows --test` (not by `cargo test`: it needs the Windows build).
//
// WINE_BUNDLE: the unpacked Windows bundle; LINUX_BUNDLE: the Linux one, timed the same way
// beside it; WINE_WORK: a scratch folder (homes, upload folders, the Wine prefix).

import { test, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { spawn, spawnSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const WINE_BUNDLE = process.env.WINE_BUNDLE;
const LINUX_BUNDLE = process.env.LINUX_BUNDLE;
const WORK = process.env.WINE_WORK;
// A Windows program holding a file open as antivirus does (tests/windows/holder.c).
const HOLDER = process.env.WINE_HOLDER;
const PREFIX = path.join(WORK, "prefix");
const WINE_ENV = { WINEPREFIX: PREFIX, WINEDEBUG: "-all", WINEDLLOVERRIDES: "mscoree,mshtml=" };
const LONG = { timeout: 600_000 };

// A Linux path as the Windows program sees it (Wine maps Z: to /).
const win = (p) => "Z:" + p.replaceAll("/", "\\");

const clients = [];
after(async () => {
  for (const c of clients) await c.close().catch(() => {});
});

/// Starts a server from `bundle` on `home`; under Wine when `wine`.
async function start({ wine, bundle, home, env = {}, args = [] }) {
  const exe = path.join(bundle, "server", wine ? "mcp-code-sandbox.exe" : "mcp-code-sandbox");
  const settings = {
    CODE_SANDBOX_HOME: wine ? win(home) : home,
    RUST_LOG: "warn",
    ...env,
  };
  const transport = new StdioClientTransport({
    command: wine ? "wine" : exe,
    args: wine ? [exe, ...args] : args,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...(wine ? WINE_ENV : {}), ...settings },
    stderr: "inherit",
  });
  const client = new Client({ name: "wine-test", version: "1.0.0" });
  await client.connect(transport, LONG);
  clients.push(client);
  return { client, transport, pid: transport.pid };
}

async function call(client, name, args = {}) {
  return client.callTool({ name, arguments: args }, undefined, LONG);
}

async function ok(client, name, args = {}) {
  const r = await call(client, name, args);
  const text = (r.content ?? []).map((c) => c.text ?? "").join("");
  assert.notEqual(r.isError, true, `${name} failed: ${text}`);
  return r.structuredContent;
}

/// First result and first plot on an empty home, in seconds from the process start.
async function firstTimes(wine, bundle) {
  const home = fs.mkdtempSync(path.join(WORK, wine ? "home-win-" : "home-linux-"));
  const t0 = performance.now();
  const { client } = await start({ wine, bundle, home, env: { CODE_SANDBOX_PERSIST: "false" } });
  const first = await ok(client, "execute_code", { code: "1+1" });
  const firstResult = (performance.now() - t0) / 1000;
  assert.equal(first.result, "2");
  const plot = await call(client, "execute_code", {
    code: "import pandas as pd, matplotlib.pyplot as plt\npd.Series([1, 3, 2]).plot()\nplt.show()",
  });
  const firstPlot = (performance.now() - t0) / 1000;
  assert.ok(plot.content.some((c) => c.type === "image"), "the plot comes back as an image");
  await client.close();
  return { firstResult, firstPlot };
}

test("the Windows bundle's first start on an empty home, timed beside the Linux bundle's", LONG, async () => {
  // Wine makes its prefix on first use (tens of seconds): not part of the server's time.
  spawnSync("wine", ["cmd", "/c", "exit"], { env: { ...process.env, ...WINE_ENV }, stdio: "ignore" });
  const w = await firstTimes(true, WINE_BUNDLE);
  const l = await firstTimes(false, LINUX_BUNDLE);
  console.log(`first start | Windows bundle under Wine | Linux bundle, same machine`);
  console.log(`first result | ${w.firstResult.toFixed(2)} s | ${l.firstResult.toFixed(2)} s`);
  console.log(`first plot   | ${w.firstPlot.toFixed(2)} s | ${l.firstPlot.toFixed(2)} s`);
});

/// A Windows server on a home of its own, kept across restarts, with an upload folder.
async function windowsServer(home, extra = {}) {
  return start({
    wine: true,
    bundle: WINE_BUNDLE,
    home,
    env: { CODE_SANDBOX_PERSIST: "true", ...extra },
  });
}

/// Waits until `check` is true, polling every 200 ms for up to `ms`.
async function until(check, ms = 15_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

/// Ends the server as Claude Desktop does: its stdin closes, and it saves and exits.
async function endInput(s) {
  s.transport._process.stdin.end();
  assert.ok(await exitOf(s.transport, 60_000), "the server ends when its stdin closes");
}

async function exitOf(transport, ms = 20_000) {
  const pid = transport.pid;
  return until(() => {
    try {
      process.kill(pid, 0);
      return false;
    } catch {
      return true;
    }
  }, ms);
}

test("every tool works under Windows: files, uploads from Z:\\, packages, fork, checkpoint, restore, a background run, the disk quota, close", LONG, async () => {
  const home = fs.mkdtempSync(path.join(WORK, "home-tools-"));
  const uploads = fs.mkdtempSync(path.join(WORK, "uploads-"));
  const outside = fs.mkdtempSync(path.join(WORK, "outside-"));
  fs.writeFileSync(path.join(uploads, "sales.csv"), "region,units\nNorth,3\nSouth,5\n");
  fs.writeFileSync(path.join(outside, "secret.txt"), "no");
  const { client } = await windowsServer(home, { CODE_SANDBOX_UPLOAD_DIRS: win(uploads), CODE_SANDBOX_DISK_MB: "64" });
  const id = (await ok(client, "create_sandbox")).sandbox_id;

  await ok(client, "write_file", { sandbox_id: id, file_path: "data/notes.txt", content: "héllo\n" });
  assert.equal((await ok(client, "read_file", { sandbox_id: id, file_path: "data/notes.txt" })).content, "héllo\n");
  const listed = await ok(client, "list_files", { sandbox_id: id, path: "data" });
  assert.deepEqual(listed.entries.map((e) => e.name), ["notes.txt"]);

  const up = await ok(client, "upload_file", { sandbox_id: id, source_path: win(path.join(uploads, "sales.csv")) });
  assert.equal(up.bytes_written, fs.statSync(path.join(uploads, "sales.csv")).size);
  const refused = await call(client, "upload_file", { sandbox_id: id, source_path: win(path.join(outside, "secret.txt")) });
  assert.equal(refused.isError, true, "a file outside the upload folders is refused");
  const summed = await ok(client, "execute_code", { sandbox_id: id, code: "import pandas as pd\nint(pd.read_csv('sales.csv').units.sum())" });
  assert.equal(summed.result, "8");

  const installed = await ok(client, "install_package", { sandbox_id: id, package_name: "tabulate" });
  assert.ok(installed.installed.some((p) => p.name === "tabulate") || installed.already_available, JSON.stringify(installed));
  assert.equal((await ok(client, "execute_code", { sandbox_id: id, code: "import tabulate\n'ok'" })).result, "'ok'");

  await ok(client, "execute_code", { sandbox_id: id, code: "x = 41" });
  const forked = (await ok(client, "fork_sandbox", { sandbox_id: id })).sandbox_id;
  assert.equal((await ok(client, "execute_code", { sandbox_id: forked, code: "x + 1" })).result, "42");
  await ok(client, "checkpoint_sandbox", { sandbox_id: id, name: "before" });
  await ok(client, "execute_code", { sandbox_id: id, code: "x = 0\nopen('later.txt', 'w').write('l')" });
  await ok(client, "restore_sandbox", { sandbox_id: id, checkpoint: "before" });
  assert.equal((await ok(client, "execute_code", { sandbox_id: id, code: "import os\n(x, os.path.exists('later.txt'))" })).result, "(41, False)");

  const run = await ok(client, "execute_code", { sandbox_id: id, background: true, code: "import time\nfor i in range(3):\n    print('step', i, flush=True)\n    time.sleep(0.3)\n'done'" });
  let state;
  let offsets = {};
  for (let i = 0; i < 30; i++) {
    state = await ok(client, "get_run", { run_id: run.run_id, wait_seconds: 5, ...offsets });
    if (state.state !== "running" && state.state !== "queued") break;
    offsets = { stdout_offset: state.stdout_offset, stderr_offset: state.stderr_offset };
  }
  assert.equal(state.state, "finished", JSON.stringify(state));
  assert.equal(state.result, "'done'");

  const full = await call(client, "execute_code", { sandbox_id: id, code: "open('big.bin', 'wb').write(b'x' * (80 << 20))" });
  assert.equal(full.isError, true, "the disk quota holds");
  assert.match(JSON.stringify(full.structuredContent ?? full.content), /No space|quota|ENOSPC|28/i);

  const folder = path.join(home, "sandboxes", forked);
  assert.ok(fs.existsSync(folder), "the fork's folder is under the home");
  await ok(client, "close_sandbox", { sandbox_id: forked });
  assert.ok(await until(() => !fs.existsSync(folder)), "close removes the sandbox's folder");
  await client.close();
});

test("names Windows would misread fail with a clear OSError, and no file changes or vanishes", LONG, async () => {
  const home = fs.mkdtempSync(path.join(WORK, "home-names-"));
  const { client } = await windowsServer(home);
  const id = (await ok(client, "create_sandbox")).sandbox_id;
  const code = [
    "import os",
    "def attempt(f):",
    "    try:",
    "        f()",
    "        return 'ok'",
    "    except OSError as e:",
    "        return type(e).__name__",
    "open('a.txt', 'w').write('lower')",
    "out = {}",
    "for name in ['CON', 'nul.txt', 'COM1', 'lpt9.log', 'a:b', 'dot.', 'space ', 'q?', 'tab\\tname']:",
    "    out[name] = attempt(lambda: open(name, 'w').write('x'))",
    "out['A.txt'] = attempt(lambda: open('A.txt', 'w').write('upper'))",
    "out['rm A.txt'] = attempt(lambda: os.remove('A.txt'))",
    "out['mkdir A.TXT'] = attempt(lambda: os.mkdir('A.TXT'))",
    "out['normal.txt'] = attempt(lambda: open('normal.txt', 'w').write('n'))",
    "import errno",
    "def long_step(f):",
    "    try:",
    "        f()",
    "        return 'ok'",
    "    except OSError as e:",
    "        return 'too long' if e.errno == errno.ENAMETOOLONG else f'{type(e).__name__} {e.errno} {e}'",
    "deep = 'd' * 90",
    "long = {}",
    "for depth in range(2, 6):",
    "    deep += '/' + 'd' * 90",
    "    f = deep + '/' + 'f' * 60 + '.txt'",
    "    steps = {'mkdir': lambda: os.makedirs(deep), 'write': lambda: open(f, 'w').write('deep'),",
    "             'read': lambda: open(f).read(), 'list': lambda: os.listdir(deep),",
    "             'rename': lambda: os.rename(f, f + '2'), 'remove': lambda: os.remove(f + '2')}",
    "    done = long[len(f)] = {}",
    "    for k, s in steps.items():",
    "        done[k] = long_step(s)",
    "        if done[k] != 'ok':",
    "            break  # the next step needs this one",
    "    if done['mkdir'] != 'ok':",
    "        break  # deeper needs this folder",
    "out['long'] = long",
    "out['kept'] = open('a.txt').read()",
    "out['listed'] = sorted(os.listdir('.'))",
    "import json",
    "print(json.dumps(out))",
  ].join("\n");
  const r = await ok(client, "execute_code", { sandbox_id: id, code });
  const out = JSON.parse(r.stdout);
  for (const name of ["CON", "nul.txt", "COM1", "lpt9.log", "a:b", "dot.", "space ", "q?", "tab\tname"]) {
    assert.notEqual(out[name], "ok", `${JSON.stringify(name)} must fail: ${r.stdout}`);
  }
  assert.equal(out["A.txt"], "FileExistsError", r.stdout);
  assert.equal(out["rm A.txt"], "FileNotFoundError", r.stdout);
  assert.equal(out["mkdir A.TXT"], "FileExistsError", r.stdout);
  assert.equal(out["normal.txt"], "ok");
  // A path past 260 characters works as on Linux or, where the host cannot spell out the
  // folder's full name (Wine stops at 260 characters, Windows at 32,767), fails with
  // ENAMETOOLONG: never an I/O error, never something half-done.
  console.log("long paths (guest length: step results):", JSON.stringify(out.long));
  for (const [length, steps] of Object.entries(out.long)) {
    for (const [step, got] of Object.entries(steps)) {
      assert.ok(got === "ok" || got === "too long", `${step} at ${length} characters: ${got}`);
    }
  }
  assert.ok(Object.values(out.long).some((s) => s.write === "ok" && s.read === "ok"),
    "a file past 260 characters opens (relative to its folder)");
  assert.equal(out.kept, "lower", "a.txt was neither replaced nor removed");
  assert.ok(out.listed.includes("a.txt") && out.listed.includes("normal.txt"), r.stdout);
  assert.ok(!fs.existsSync(path.join(home, "CON")), "nothing reached the home");
  await client.close();
});

test("sandboxes come back after a restart and after the process is killed; stdin closing and Ctrl-C end it cleanly", LONG, async () => {
  const home = fs.mkdtempSync(path.join(WORK, "home-keep-"));
  let s = await windowsServer(home);
  const id = (await ok(s.client, "create_sandbox")).sandbox_id;
  await ok(s.client, "execute_code", { sandbox_id: id, code: "x = 41\nopen('kept.txt', 'w').write('k')" });
  await endInput(s);

  s = await windowsServer(home);
  assert.equal((await ok(s.client, "execute_code", { sandbox_id: id, code: "x + 1" })).result, "42", "variables kept across a restart");
  await ok(s.client, "execute_code", { sandbox_id: id, code: "open('after.txt', 'w').write('a')" });
  process.kill(s.transport.pid, "SIGKILL");
  assert.ok(await exitOf(s.transport), "killed");

  s = await windowsServer(home);
  const back = await ok(s.client, "execute_code", { sandbox_id: id, code: "import os\nsorted(n for n in os.listdir('.') if n.endswith('.txt'))" });
  assert.equal(back.result, "['after.txt', 'kept.txt']", "files kept after a kill");
  process.kill(s.transport.pid, "SIGINT");
  assert.ok(await exitOf(s.transport), "Ctrl-C ends the server");
});

/// Every file under `dir` named `name`.
function findAll(dir, name) {
  const found = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory() && !e.isSymbolicLink()) found.push(...findAll(p, name));
    else if (e.name === name) found.push(p);
  }
  return found;
}

test("a file another program holds open (as antivirus does) is waited out: close still removes the sandbox's folder", LONG, async () => {
  const home = fs.mkdtempSync(path.join(WORK, "home-held-"));
  const { client } = await windowsServer(home);
  const id = (await ok(client, "create_sandbox")).sandbox_id;
  await ok(client, "execute_code", { sandbox_id: id, code: "open('held.txt', 'w').write('scanned')" });
  const [file] = findAll(home, "held.txt");
  assert.ok(file, "the guest's file is on the host");
  // Held for 1.5 s without FILE_SHARE_DELETE: deleting or renaming it fails until then.
  const holder = spawn("wine", [HOLDER, win(file), "1500"], { env: { ...process.env, ...WINE_ENV } });
  const held = await new Promise((resolve) => {
    let out = "";
    holder.stdout.on("data", (d) => {
      out += d;
      if (out.includes("held")) resolve(true);
      if (out.includes("error")) resolve(false);
    });
    holder.on("exit", () => resolve(out.includes("held")));
  });
  assert.ok(held, "the holder holds the file");
  const blocked = spawnSync("wine", ["cmd", "/c", "del", win(file)], { env: { ...process.env, ...WINE_ENV } });
  assert.ok(fs.existsSync(file), `another program cannot delete the held file (${blocked.status})`);
  await ok(client, "close_sandbox", { sandbox_id: id });
  // Without waiting, the folder would sit in the trash until the next sweep (30 s).
  const gone = await until(() => findAll(home, "held.txt").length === 0, 8_000);
  assert.ok(gone, `the held file's sandbox folder was removed: ${findAll(home, "held.txt")}`);
  await client.close();
});

test("Windows: a folder read in place and save_file, given as the bundle passes them (\\\\?\\ paths), with folding names, devices and drive-relative names", LONG, async () => {
  const home = fs.mkdtempSync(path.join(WORK, "home-folders-"));
  const root = fs.mkdtempSync(path.join(WORK, "folders-"));
  const elsewhere = path.join(root, "Elsewhere");
  const results = path.join(root, "Results");
  fs.mkdirSync(elsewhere);
  fs.mkdirSync(results);
  fs.writeFileSync(path.join(results, "chart.csv"), "the user's own");
  const data = path.join(root, "Data");
  fs.mkdirSync(path.join(data, "2025"), { recursive: true });
  fs.writeFileSync(path.join(data, "2025", "q1.csv"), "region,units\nNorth,3\nSouth,5\n");
  // As the bundle passes the folders picked in Claude Desktop's form, in the long (\\?\) form.
  const { client } = await start({
    wine: true,
    bundle: WINE_BUNDLE,
    home,
    env: { CODE_SANDBOX_PERSIST: "false" },
    args: ["--save-dir", "\\\\?\\" + win(results), "--read-dir", "\\\\?\\" + win(data)],
  });
  const names = (await client.listTools()).tools.map((t) => t.name);
  assert.ok(names.includes("save_file"), "save_file is offered with a folder named for it");
  const id = (await ok(client, "create_sandbox")).sandbox_id;

  // The folder to read, in place: from the shipped warm image (pandas already there), read-only.
  const read = await ok(client, "execute_code", {
    sandbox_id: id,
    code: "import os, sys\nwarm = 'pandas' in sys.modules\nimport pandas as pd\nprint(os.listdir('/mnt'), warm)\nint(pd.read_csv('/mnt/Data/2025/q1.csv')['units'].sum())",
  });
  assert.equal(read.result, "8", JSON.stringify(read));
  assert.match(read.stdout, /\['Data'\] True/, "listed, and started from the shipped warm image");
  for (const attempt of ["open('/mnt/Data/new.csv', 'w')", "import os; os.remove('/mnt/Data/2025/q1.csv')"]) {
    const refused = await call(client, "execute_code", { sandbox_id: id, code: attempt });
    assert.match(JSON.stringify(refused.structuredContent), /\/mnt\/Data is the user's folder, shared read-only/, attempt);
  }
  fs.writeFileSync(path.join(data, "2025", "q1.csv"), "region,units\nNorth,30\n");
  const again = await ok(client, "read_file", { sandbox_id: id, file_path: "/mnt/Data/2025/q1.csv" });
  assert.equal(again.content, "region,units\nNorth,30\n", "the user's change is seen");
  const listed = await ok(client, "list_files", { sandbox_id: id, path: "/mnt/Data" });
  assert.match(JSON.stringify(listed), /\/mnt\/Data\/2025/);
  assert.deepEqual(fs.readdirSync(data), ["2025"], "nothing appeared in the folder read");
  await ok(client, "execute_code", { sandbox_id: id, code: "open('out.csv', 'w').write('a,b\\n1,2\\n')" });
  const saved = await ok(client, "save_file", { sandbox_id: id, path: "out.csv", destination: win(path.join(results, "out.csv")) });
  assert.equal(saved.bytes_written, 8);
  assert.ok(!saved.destination.startsWith("\\\\?\\"), saved.destination);
  assert.equal(fs.readFileSync(path.join(results, "out.csv"), "utf8"), "a,b\n1,2\n");
  // A name differing only in case from the user's file is that file on Windows: refused.
  const folded = await call(client, "save_file", { sandbox_id: id, path: "out.csv", destination: win(path.join(results, "CHART.csv")), overwrite: true });
  assert.equal(folded.isError, true, JSON.stringify(folded.content));
  assert.match(JSON.stringify(folded.content), /differs only in case/);
  for (const bad of ["CON", "nul.txt", "a:b.csv", "trail."]) {
    const refused = await call(client, "save_file", { sandbox_id: id, path: "out.csv", destination: win(path.join(results, bad)) });
    assert.equal(refused.isError, true, `${bad} is refused`);
  }
  const driveRelative = await call(client, "save_file", { sandbox_id: id, path: "out.csv", destination: "Z:out.csv" });
  assert.match(JSON.stringify(driveRelative.content), /relative to a drive/);
  const outside = await call(client, "save_file", { sandbox_id: id, path: "out.csv", destination: win(path.join(elsewhere, "x.csv")) });
  assert.equal(outside.isError, true, "a folder not named is refused");
  assert.equal(fs.readFileSync(path.join(results, "chart.csv"), "utf8"), "the user's own");
  assert.deepEqual(fs.readdirSync(results).sort(), ["chart.csv", "out.csv"], "nothing else appeared");
  assert.deepEqual(fs.readdirSync(elsewhere), []);
  await client.close();
});
