// Measures what the TypeScript SDK client receives for the heavy cases of issue 11, each in a
// fresh server (a case may end the connection). Prints one line per case: the serialized
// result size, or what the client threw.
//
//   node tests/ts/measure.mjs path/to/mcp-code-sandbox
//
// CODE_SANDBOX_HOME is passed through, so a runtime already installed there is used.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const BIN = process.argv[2] ?? process.env.MCP_CODE_SANDBOX_BIN;
const LONG = { timeout: 300_000 };

const cases = [
  ["unknown sandbox id (error path)", async (c) => c.callTool({ name: "execute_code", arguments: { sandbox_id: "nope", code: "1" } })],
  ["print 5 MB stdout + 3 MB stderr", async (c, id) => c.callTool({ name: "execute_code", arguments: { sandbox_id: id, code:
    "import sys\nfor i in range(100_000): print(f'line {i:06d} ' + 'x' * 40)\nfor i in range(60_000): sys.stderr.write(f'warn {i:06d} ' + 'y' * 40 + '\\n')" } }, undefined, LONG)],
  ["twelve large matplotlib figures", async (c, id) => c.callTool({ name: "execute_code", arguments: { sandbox_id: id, timeout_seconds: 200, code:
    "import numpy as np, matplotlib.pyplot as plt\nfor k in range(12):\n    plt.figure(figsize=(24, 16))\n    for j in range(40): plt.plot(np.cumsum(np.random.randn(3000)))" } }, undefined, LONG)],
  ["five noisy 2000 px figures", async (c, id) => c.callTool({ name: "execute_code", arguments: { sandbox_id: id, timeout_seconds: 200, code:
    "import numpy as np, matplotlib.pyplot as plt\nfor k in range(5):\n    plt.figure(figsize=(20, 20)); plt.imshow(np.random.rand(2000, 2000, 3)); plt.axis('off')" } }, undefined, LONG)],
  ["list_files of 10,000 long names", async (c, id) => {
    await c.callTool({ name: "execute_code", arguments: { sandbox_id: id, timeout_seconds: 200, code:
      "import os\nos.mkdir('many')\nfor i in range(10_000): open(f'many/{i:05d}_' + 'n' * 200, 'w').close()" } }, undefined, LONG);
    return c.callTool({ name: "list_files", arguments: { sandbox_id: id, path: "many" } }, undefined, LONG);
  }],
  ["resources/read of a 49 MB file", async (c, id) => {
    await c.callTool({ name: "execute_code", arguments: { sandbox_id: id, code: "open('big.bin', 'wb').write(b'\\x00\\xff' * (49_000_000 // 2))" } }, undefined, LONG);
    return c.readResource({ uri: `sandbox://${id}/big.bin` }, LONG);
  }],
  ["write_file of 17 MB", async (c, id) => c.callTool({ name: "write_file", arguments: { sandbox_id: id, file_path: "w.txt", content: "0123456789abcdef\n".repeat(1_000_000) } }, undefined, LONG)],
  ["upload_file of 13 MB base64", async (c, id) => c.callTool({ name: "upload_file", arguments: { sandbox_id: id, destination_path: "u.bin", content_base64: Buffer.alloc(10 << 20, 7).toString("base64") } }, undefined, LONG)],
];

for (const [label, run] of cases) {
  const transport = new StdioClientTransport({
    command: BIN,
    args: [],
    env: { PATH: process.env.PATH, HOME: process.env.HOME, CODE_SANDBOX_HOME: process.env.CODE_SANDBOX_HOME ?? "", RUST_LOG: "error" },
    stderr: "ignore",
  });
  const client = new Client({ name: "measure", version: "1.0.0" });
  let line;
  try {
    await client.connect(transport);
    await client.listTools();
    const created = await client.callTool({ name: "create_sandbox", arguments: {} });
    const id = created.structuredContent?.sandbox_id;
    const r = await Promise.race([
      run(client, id),
      new Promise((_, reject) => transport.onclose = () => reject(new Error("the connection closed"))),
    ]);
    const bytes = Buffer.byteLength(JSON.stringify(r));
    const imgs = (r.content ?? []).filter((c) => c.type === "image").length;
    line = `${bytes} bytes${r.isError ? " (isError)" : ""}${imgs ? `, ${imgs} image(s) inline` : ""}`;
  } catch (e) {
    line = `threw: ${String(e.message ?? e).slice(0, 160)}`;
  }
  console.log(`| ${label} | ${line} |`);
  await client.close().catch(() => {});
}
