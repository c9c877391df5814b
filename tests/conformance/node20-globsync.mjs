// The conformance suite's bundle imports `globSync` from `fs`, which Node 22 has and Node 20
// (this project's floor) lacks. Loaded with `node --import ./node20-globsync.mjs`, this hook
// rewrites that one import of the suite's own bundle to take `globSync` from the `glob`
// package (pinned beside it; the same call shape: a pattern and `{ cwd }`, relative paths
// back). On a Node that has `fs.globSync` it does nothing.
import fs from 'node:fs';
import { register } from 'node:module';

if (typeof fs.globSync !== 'function') {
  register(new URL('./node20-globsync-hook.mjs', import.meta.url));
}
