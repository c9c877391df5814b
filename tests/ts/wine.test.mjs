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
import { spawnSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const WINE_BUNDLE = process.env.WINE_BUNDLE;
const LINUX_BUNDLE = process.env.LINUX_BUNDLE;
const WORK = process.env.WINE_WORK;
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
async function start({ wine, bundle, home, env = {} }) {
  const exe = path.join(bundle, "server", wine ? "mcp-code-sandbox.exe" : "mcp-code-sandbox");
  const settings = {
    CODE_SANDBOX_HOME: wine ? win(home) : home,
    RUST_LOG: "warn",
    ...env,
  };
  const transport = new StdioClientTransport({
    command: wine ? "wine" : exe,
    args: wine ? [exe] : [],
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
