// The load hook of node20-globsync.mjs: only the conformance suite's bundle is touched.
const SUITE = '/node_modules/@modelcontextprotocol/conformance/dist/index.js';

export async function load(url, context, nextLoad) {
  const loaded = await nextLoad(url, context);
  if (!url.endsWith(SUITE)) return loaded;
  const source = String(loaded.source);
  const rewritten = source.replace(/import\{([^}]*)\}from"fs";/, (whole, names) => {
    const kept = [];
    let alias = null;
    for (const part of names.split(',')) {
      const m = part.trim().match(/^globSync(?: as (\w+))?$/);
      if (m) alias = m[1] ?? 'globSync';
      else kept.push(part);
    }
    if (!alias) return whole;
    return `import{${kept.join(',')}}from"fs";import{globSync as ${alias}}from"glob";`;
  });
  if (rewritten === source) throw new Error('node20-globsync: the suite no longer imports globSync from fs as expected');
  return { ...loaded, source: rewritten };
}
