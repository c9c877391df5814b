// The server in remote mode for the TypeScript tests: a home of its own that shares the
// installed runtime and caches, two principals made by its own `token add`, and
// `--transport http` on a free loopback port.

import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/// A fresh home whose runtime, cache and wheels are those of `shared` (nothing is installed twice).
export function homeSharing(shared, prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  for (const d of ["runtime", "cache", "wheels"]) symlinkSync(join(shared, d), join(dir, d));
  return dir;
}

/// Starts `bin` in remote mode in `home` with principals alice and bob; resolves once it
/// listens, to { server, url, tokens } (the caller kills `server`).
export async function startRemote(bin, home) {
  const tokensFile = join(home, "tokens");
  const tokens = {};
  for (const name of ["alice", "bob"]) {
    tokens[name] = execFileSync(bin, ["token", "add", name], {
      env: { ...process.env, CODE_SANDBOX_TOKENS: tokensFile },
    })
      .toString()
      .trim();
  }
  const server = spawn(bin, ["--transport", "http", "--listen", "127.0.0.1:0"], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      CODE_SANDBOX_HOME: home,
      CODE_SANDBOX_TOKENS: tokensFile,
      CODE_SANDBOX_PERSIST: "false",
      RUST_LOG: "warn",
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const url = await new Promise((resolve, reject) => {
    let said = "";
    server.stderr.on("data", (chunk) => {
      process.stderr.write(chunk);
      said += chunk;
      const m = said.match(/serving MCP at (\S+)\s/); // whole: the line may come in pieces
      if (m) resolve(m[1]);
    });
    server.on("exit", (code) => reject(new Error(`the server exited (${code}) before listening`)));
  });
  return { server, url, tokens };
}
