// The MCP Bundle as a new Claude Desktop user gets it: unpacked with the official bundle
// library into a fresh folder, its launch command worked out from the manifest by the same
// library function Claude Desktop's loader uses (`getMcpConfigForManifest`: `${__dirname}`,
// `${HOME}` and the form's values filled in, a list of folders expanded into arguments), and
// started with a fresh CODE_SANDBOX_HOME and nothing on PATH (so no python3, no pip). It must
// install its runtime and packages from the bundle alone and answer `1+1` and a pandas plot.
//
// BUNDLE names the .mcpb file. On Linux `cargo test --release` runs this inside a network
// namespace of its own (tests/it/bundle.rs), so nothing can be downloaded; the release workflow
// runs it directly on each platform it builds.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const here = path.dirname(fileURLToPath(import.meta.url));
// The bundle CLI pinned for `cargo xtask bundle`; one pin for both uses.
const mcpbLib = path.join(here, "..", "..", "xtask", "mcpb", "node_modules", "@anthropic-ai", "mcpb", "dist", "index.js");
const FIRST_RESULT_MS = 900_000;
const LONG = { timeout: 180_000 };

test("the bundle installs offline, without Python, and answers as Claude Desktop starts it", async () => {
  const bundle = process.env.BUNDLE;
  assert.ok(bundle, "BUNDLE names the .mcpb file (cargo xtask bundle writes it under dist/)");
  const { unpackExtension, getMcpConfigForManifest } = await import(pathToFileURL(mcpbLib).href);

  const root = mkdtempSync(path.join(tmpdir(), "mcs-bundle-"));
  const extension = path.join(root, "extension");
  const userHome = path.join(root, "user");
  const data = path.join(userHome, "Data");
  const emptyPath = path.join(root, "bin");
  for (const d of [extension, data, emptyPath]) mkdirSync(d, { recursive: true });
  writeFileSync(path.join(data, "sales.csv"), "month,sales\n1,10\n2,14\n3,9\n4,21\n");

  assert.ok(await unpackExtension({ mcpbPath: bundle, outputDir: extension, silent: true }), "the bundle unpacks");
  const manifest = JSON.parse(readFileSync(path.join(extension, "manifest.json"), "utf8"));
  assert.equal(manifest.server.type, "binary");
  assert.ok(manifest.compatibility.platforms.includes(process.platform), `built for ${process.platform}`);

  // What the user chose in the form: one folder to upload from; the rest left at the defaults.
  const config = await getMcpConfigForManifest({
    manifest,
    extensionPath: extension,
    systemDirs: {
      HOME: userHome,
      DESKTOP: path.join(userHome, "Desktop"),
      DOCUMENTS: path.join(userHome, "Documents"),
      DOWNLOADS: path.join(userHome, "Downloads"),
    },
    userConfig: { upload_dirs: [data] },
    pathSeparator: path.sep,
  });
  assert.ok(config, "the manifest yields a launch command");
  assert.ok(!JSON.stringify(config).includes("${"), `every placeholder is filled: ${JSON.stringify(config)}`);

  const env = {
    ...config.env,
    CODE_SANDBOX_HOME: path.join(root, "sandbox-home"),
    HOME: userHome,
    PATH: emptyPath,
    RUST_LOG: "info",
  };
  if (process.platform === "win32") env.USERPROFILE = userHome;
  let logs = "";
  /** Starts the server as Claude Desktop does; its log goes to `logs` and on to stderr. */
  const launch = async () => {
    const transport = new StdioClientTransport({ command: config.command, args: config.args, env, stderr: "pipe" });
    transport.stderr.on("data", (chunk) => {
      logs += chunk;
      process.stderr.write(chunk);
    });
    const client = new Client({ name: "bundle-test", version: "1.0.0" });
    await client.connect(transport);
    return { client, transport };
  };
  /** Quits it as Claude Desktop does (stdin closed), and checks it is gone. */
  const quit = async ({ client, transport }) => {
    const pid = transport.pid;
    await client.close();
    // It saves its sandboxes first; on a loaded machine that can take a few seconds.
    const alive = () => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 100 && alive(); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.throws(() => process.kill(pid, 0), "the server has exited");
  };
  const started = performance.now();
  let server = await launch();
  let client = server.client;
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(
      tools.map((t) => t.name).sort(),
      manifest.tools.map((t) => t.name).sort(),
      "the manifest lists the server's tools",
    );

    // The first call waits for the runtime: installed from the bundled wheel and compiled once.
    // A call waits 20 s at most, then says to try again, which is what the model does.
    let first;
    let answers = 0;
    for (;;) {
      first = await client.callTool({ name: "execute_code", arguments: { code: "1+1" } }, undefined, LONG);
      answers += 1;
      const said = first.content.map((c) => c.text ?? "").join("");
      if (!(first.isError && said.includes("not ready yet"))) break;
      assert.match(said, /Try again in a minute/);
      assert.ok(performance.now() - started < FIRST_RESULT_MS, "the runtime was ready within 15 minutes");
    }
    const seconds = (performance.now() - started) / 1000;
    assert.notEqual(first.isError, true, JSON.stringify(first.content));
    assert.equal(first.structuredContent.result, "2");
    console.log(`bundle: first start to first result ${seconds.toFixed(1)} s (${answers} calls)`);

    // Files come only from the folder picked in the form; pandas plots come back as images.
    const up = await client.callTool(
      { name: "upload_file", arguments: { source_path: path.join(data, "sales.csv") } },
      undefined,
      LONG,
    );
    assert.notEqual(up.isError, true, JSON.stringify(up.content));
    const id = up.structuredContent.sandbox_id;
    const plot = await client.callTool(
      {
        name: "execute_code",
        arguments: {
          sandbox_id: id,
          code: "import pandas as pd\nimport matplotlib.pyplot as plt\ndf = pd.read_csv('sales.csv')\ndf.plot(x='month', y='sales')\nplt.show()\nint(df.sales.sum())",
        },
      },
      undefined,
      LONG,
    );
    assert.notEqual(plot.isError, true, JSON.stringify(plot.content));
    console.log(`bundle: first start to first pandas plot ${((performance.now() - started) / 1000).toFixed(1)} s`);
    // The first sandbox already started from the warm image the bundle ships: pandas was
    // imported before the code ran.
    const other = (await client.callTool({ name: "create_sandbox", arguments: {} })).structuredContent.sandbox_id;
    const fresh = await client.callTool(
      { name: "execute_code", arguments: { sandbox_id: other, code: "import sys\n'pandas' in sys.modules" } },
      undefined,
      LONG,
    );
    assert.equal(fresh.structuredContent.result, "True", "a new sandbox starts with pandas imported");
    await client.callTool({ name: "close_sandbox", arguments: { sandbox_id: other } });
    assert.equal(plot.structuredContent.result, "54");
    const images = plot.content.filter((c) => c.type === "image");
    assert.equal(images.length, 1, "one PNG of the plot");
    assert.equal(images[0].mimeType, "image/png");

    // A package from the bundled wheel cache, with no pip and no network.
    const inst = await client.callTool(
      { name: "install_package", arguments: { sandbox_id: id, package_name: "humanize" } },
      undefined,
      LONG,
    );
    assert.notEqual(inst.isError, true, JSON.stringify(inst.content));
    const used = await client.callTool(
      { name: "execute_code", arguments: { sandbox_id: id, code: "import humanize; humanize.intcomma(1234567)" } },
      undefined,
      LONG,
    );
    assert.equal(used.structuredContent.result, "'1,234,567'");

    // Outside the picked folder nothing is readable, not even the bundle's own files.
    const outside = await client.callTool(
      { name: "upload_file", arguments: { sandbox_id: id, source_path: path.join(extension, "manifest.json") } },
      undefined,
      LONG,
    );
    assert.equal(outside.isError, true, "a file outside the picked folders is refused");
    // Quitting Claude Desktop: nothing panics, and the sandbox (which drew a plot) is kept for
    // the next start.
    await quit(server);
    assert.match(logs, /serving MCP/, "the server's log was read");
    assert.doesNotMatch(logs, /panicked/, "the server shut down without a panic");
    assert.doesNotMatch(logs, /not saving sandbox/, "the sandbox was saved at shutdown");
    const again = performance.now();
    const before = logs.length;
    server = await launch();
    client = server.client;
    const back = await client.callTool(
      { name: "execute_code", arguments: { sandbox_id: id, code: "int(df.sales.sum()), humanize.intcomma(10**6)" } },
      undefined,
      LONG,
    );
    assert.notEqual(back.isError, true, JSON.stringify(back.content));
    assert.equal(back.structuredContent.result, "(54, '1,000,000')");
    assert.equal(back.structuredContent.state_lost, false);
    // The state was made from the shipped warm image, loaded at once at this start too: it
    // comes back with nothing built or compiled.
    assert.match(logs.slice(before), /warm image shipped with the bundle is in use/);
    assert.doesNotMatch(logs, /preparing the warm image|compiling the interpreter/, "nothing was built or compiled");
    console.log(`bundle: second start to first result ${((performance.now() - again) / 1000).toFixed(2)} s`);
    await quit(server);
    assert.doesNotMatch(logs, /panicked/, "the server shut down without a panic");
  } finally {
    await client.close();
    rmSync(root, { recursive: true, force: true });
  }
});
