// The result view in a real browser: headless Chromium (Debian's package) loads a host page
// built on the official MCP Apps host bridge, connected to the real server (over stdio,
// through the official TypeScript SDK). It renders a DataFrame and pages and sorts it through
// read_table, shows a figure and an error, follows a background run to its end and cancels
// another, follows the host's theme, and never runs the HTML a guest wrote. Every view is held
// to Claude's MCP Apps directory checklist (checklist() below): inline at most 500 px with no
// scrolling inside it, 44 px touch targets, WCAG AA contrast on Claude's light and dark
// backgrounds, a transparent background with color-scheme, links through the host's
// open-link request. Screenshots go to $VIEW_SCREENSHOTS (the README's come from the
// "realistic session" test); the assertions read what is on the page, not pixels.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const BIN = process.env.MCP_CODE_SANDBOX_BIN;
const SHOTS = process.env.VIEW_SCREENSHOTS ?? path.join(import.meta.dirname, 'screenshots');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

let client;
let browser;
let page;
let viewUri;
let sandbox;
const dialogs = [];

async function call(name, args) {
  return client.callTool({ name, arguments: args });
}

// Shows `result` (of a call of `tool` with `input`) in the host page; the view's frame.
async function show(input, result, theme = 'light', options = {}) {
  await page.evaluate((a) => window.showResult(a), { uri: viewUri, input, result, theme, ...options });
  const frame = page.frames().find((f) => f !== page.mainFrame());
  assert.ok(frame, 'the view is in a frame of its own');
  return frame;
}

async function shot(name) {
  fs.mkdirSync(SHOTS, { recursive: true });
  // The page down to the end of the view, as wide as the window (1100 px).
  const height = await page.evaluate(() => Math.ceil(document.body.getBoundingClientRect().height));
  const width = page.viewportSize().width;
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), clip: { x: 0, y: 0, width, height: Math.min(height, 1400) } });
}

// Claude's MCP Apps directory checklist, read off the rendered view.
async function checklist(view, theme, what) {
  await view.waitForTimeout(150); // the view fits itself after images load
  const found = await view.evaluate(({ hostBg, inline }) => {
    const parse = (c) => {
      const m = /rgba?\(([^)]+)\)/.exec(c);
      if (!m) return null;
      const p = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
      return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
    };
    const hex = (h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16)).concat(1);
    const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat(1);
    const lum = (c) => {
      const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
      return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
    };
    const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
    const visible = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
    const out = { problems: [] };
    const html = document.documentElement;
    out.height = Math.ceil(html.getBoundingClientRect().height);
    if (inline && out.height > 500) out.problems.push(`inline height ${out.height} px > 500`);
    if (html.scrollWidth > html.clientWidth + 1) out.problems.push(`the page is ${html.scrollWidth} px wide in ${html.clientWidth}`);
    for (const e of [html, document.body]) {
      const bg = getComputedStyle(e).backgroundColor;
      if (bg !== 'rgba(0, 0, 0, 0)') out.problems.push(`${e.tagName} background ${bg}, not transparent`);
    }
    out.colorScheme = getComputedStyle(html).colorScheme;
    for (const e of document.querySelectorAll('body *')) {
      const cs = getComputedStyle(e);
      const y = /(auto|scroll)/.test(cs.overflowY) && e.scrollHeight > e.clientHeight + 1;
      const x = /(auto|scroll)/.test(cs.overflowX) && e.scrollWidth > e.clientWidth + 1;
      if (x || y) out.problems.push(`${e.tagName}.${e.className} scrolls inside the view`);
    }
    for (const e of document.querySelectorAll('button, summary, [role=button], input, select')) {
      if (!visible(e)) continue;
      const r = e.getBoundingClientRect();
      if (r.width < 44 || r.height < 44) out.problems.push(`target "${e.textContent.trim().slice(0, 30)}" is ${Math.round(r.width)}x${Math.round(r.height)}`);
    }
    let checked = 0;
    for (const e of document.querySelectorAll('body *')) {
      const text = [...e.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join('').trim();
      if (!text || !visible(e) || e.closest('button:disabled')) continue;
      let bg = hex(hostBg);
      const chain = [];
      for (let a = e; a; a = a.parentElement) chain.unshift(getComputedStyle(a).backgroundColor);
      for (const c of chain) { const p = parse(c); if (p && p[3] > 0) bg = over(p, bg); }
      const fg = over(parse(getComputedStyle(e).color), bg);
      const size = parseFloat(getComputedStyle(e).fontSize);
      const bold = Number(getComputedStyle(e).fontWeight) >= 700;
      const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
      const got = ratio(fg, bg);
      checked++;
      if (got < need) out.problems.push(`"${text.slice(0, 30)}" contrast ${got.toFixed(2)} < ${need}`);
    }
    out.checked = checked;
    out.links = [...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href'));
    return out;
  }, { hostBg: await page.evaluate((t) => window.hostBackgrounds[t], theme), inline: true });
  assert.deepEqual(found.problems, [], `${what} (${theme}): the checklist`);
  assert.equal(found.colorScheme, theme, `${what}: color-scheme follows the theme`);
  assert.ok(found.checked > 0, `${what}: text was checked for contrast`);
  return found;
}

before(async () => {
  client = new Client({ name: 'view-test-host', version: '1.0.0' });
  await client.connect(new StdioClientTransport({
    command: BIN,
    env: { ...process.env, CODE_SANDBOX_PERSIST: 'false', RUST_LOG: 'warn' },
    stderr: 'inherit',
  }));
  const { tools } = await client.listTools();
  const exec = tools.find((t) => t.name === 'execute_code');
  viewUri = exec._meta?.ui?.resourceUri;
  assert.match(viewUri, /^ui:\/\/mcp-code-sandbox\/result\//);
  for (const name of ['get_run', 'create_run_close']) {
    assert.equal(tools.find((t) => t.name === name)._meta?.ui?.resourceUri, viewUri, name);
  }
  assert.deepEqual(tools.find((t) => t.name === 'read_table')._meta?.ui?.visibility, ['app']);
  const created = await call('create_sandbox', {});
  sandbox = created.structuredContent.sandbox_id;

  const bundle = await build({
    entryPoints: [path.join(import.meta.dirname, 'host.js')],
    bundle: true, format: 'iife', platform: 'browser', write: false, logLevel: 'silent',
  });
  const hostScript = bundle.outputFiles[0].text;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  page = await browser.newPage({ viewport: { width: 1100, height: 760 } });
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss(); });
  await page.exposeFunction('mcpReadResource', async (uri) => {
    const r = await client.readResource({ uri });
    assert.equal(r.contents[0].mimeType, 'text/html;profile=mcp-app');
    return r.contents[0].text;
  });
  await page.exposeFunction('mcpCallTool', async (params) => JSON.stringify(await client.callTool(JSON.parse(params))));
  await page.setContent(`<!doctype html><html><head><title>host</title></head><body></body></html>`);
  await page.addScriptTag({ content: hostScript });
});

after(async () => {
  await browser?.close();
  await client?.close();
});

test('a DataFrame is a table the user pages and sorts; guest HTML stays text', async () => {
  const input = {
    sandbox_id: sandbox,
    code: "import pandas as pd\ndf = pd.DataFrame({'n': range(1000), 'label': ['<script>alert(1)</script>' if i % 2 else '<img src=x onerror=alert(2)>' for i in range(1000)], 'x': [i * 0.5 for i in range(1000)]})\ndf",
  };
  const result = await call('execute_code', input);
  assert.ok(result.structuredContent.table, 'the result carries the table');
  const view = await show(input, result);
  await view.locator('tbody tr').first().waitFor();
  assert.equal(await view.locator('tbody tr').count(), 10, 'inline, a page of ten rows');
  assert.match(await view.locator('.bar').first().innerText(), /Rows 1.10 of 1,000 rows/);
  assert.equal(await view.locator('tbody td', { hasText: '<script>alert(1)</script>' }).count(), 5, 'the cell shows its text');
  await checklist(view, 'light', 'a table');
  assert.equal(await view.locator('tbody script, tbody img').count(), 0, 'no element came from guest text');
  await shot('table');

  await view.getByRole('button', { name: 'Next rows' }).click();
  await view.locator('tbody tr').first().getByText('10', { exact: true }).waitFor();
  assert.match(await view.locator('.bar').first().innerText(), /Rows 11.20 of 1,000/);
  await view.getByRole('button', { name: /^n/ }).click();
  await view.getByRole('button', { name: /^n ▲/ }).waitFor();
  await view.getByRole('button', { name: /^n ▲/ }).click();
  await view.getByRole('button', { name: /^n ▼/ }).waitFor();
  await view.locator('tbody tr').first().getByText('999', { exact: true }).waitFor();
  assert.equal(await view.locator('th[aria-sort="descending"]').count(), 1);
  // The keyboard reaches the header buttons.
  await view.getByRole('button', { name: /^x/ }).focus();
  await page.keyboard.press('Enter');
  await view.getByRole('button', { name: /^x ▲/ }).waitFor();
  await checklist(view, 'light', 'a sorted table');
  await shot('table-sorted');
  assert.ok((await page.evaluate(() => window.toolCalls)).filter((n) => n === 'read_table').length >= 3);
  assert.deepEqual(dialogs, [], 'no guest script ran');
});

test('a figure fits the width, zooms on click and downloads through the host', async () => {
  const input = { sandbox_id: sandbox, code: "import matplotlib.pyplot as plt\nplt.figure(figsize=(8, 4))\nplt.plot([1, 4, 2, 5, 3], marker='o')\nplt.title('Measurements')\nprint('drawn')" };
  const result = await call('execute_code', input);
  const view = await show(input, result);
  const img = view.locator('figure img');
  await img.waitFor();
  await view.waitForFunction(() => document.querySelector('figure img').naturalWidth > 100);
  const box = await img.boundingBox();
  assert.ok(box.width <= 880, `fitted to the width: ${box.width}`);
  assert.match(await view.locator('pre').first().innerText(), /drawn/);
  await checklist(view, 'light', 'a figure');
  await shot('figure');
  await img.click();
  await page.waitForFunction(() => window.displayModes.includes('fullscreen'));
  await view.waitForFunction(() => document.documentElement.dataset.mode === 'fullscreen');
  await view.getByRole('button', { name: 'Download PNG' }).click();
  await page.waitForFunction(() => window.downloads.length === 1);
  const [[item]] = await page.evaluate(() => window.downloads);
  assert.equal(item.resource.mimeType, 'image/png');
  assert.ok(Buffer.from(item.resource.blob, 'base64').subarray(1, 4).toString() === 'PNG');
});

test('an error shows its name, message and traceback, in the dark theme', async () => {
  const input = { sandbox_id: sandbox, code: "def f():\n    return {}['<b>missing</b>']\nf()" };
  const result = await call('execute_code', input);
  const view = await show(input, result, 'dark');
  const alert = view.getByRole('alert');
  await alert.waitFor();
  assert.match(await alert.innerText(), /KeyError: '<b>missing<\/b>'/);
  assert.equal(await view.getByText('The call failed').count(), 0, 'shown as the code\'s error, not a failed call');
  await view.getByText('Traceback', { exact: true }).click();
  assert.match(await view.locator('.error pre').innerText(), /in f/);
  assert.equal(await view.evaluate(() => document.documentElement.dataset.theme), 'dark');
  assert.equal(await view.locator('.error b').count(), 0);
  assert.equal(await view.getByText('Errors and warnings').count(), 0, 'the traceback shows once');
  await checklist(view, 'dark', 'an error');
  await shot('error-dark');
});

test('a background run is followed live to its end, and another is cancelled', async () => {
  const input = { sandbox_id: sandbox, background: true, code: "import time\nfor i in range(4):\n    print('step', i, flush=True)\n    time.sleep(0.7)\n'done'" };
  const started = await call('execute_code', input);
  assert.ok(['running', 'queued'].includes(started.structuredContent.state));
  const view = await show(input, started);
  await view.getByText(/step 1/).waitFor({ timeout: 20000 });
  await checklist(view, 'light', 'a live run');
  await shot('run-live');
  await view.getByText(/finished/).waitFor({ timeout: 30000 });
  assert.match(await view.locator('main').innerText(), /step 3/);
  assert.match(await view.locator('main').innerText(), /'done'/);
  await checklist(view, 'light', 'a finished run');
  await shot('run-finished');

  const long = { sandbox_id: sandbox, background: true, code: "import time\nprint('waiting', flush=True)\ntime.sleep(60)" };
  const second = await call('execute_code', long);
  const view2 = await show(long, second);
  await view2.getByText('waiting').waitFor({ timeout: 20000 });
  await view2.getByRole('button', { name: 'Cancel run' }).click();
  await view2.getByText(/cancelled/).waitFor({ timeout: 30000 });
  const run = await call('get_run', { run_id: second.structuredContent.run_id });
  assert.equal(run.structuredContent.state, 'cancelled');
});

test("a realistic session fits the checklist, and the README's screenshots come from it", async () => {
  const regions = { North: 1.0, South: 0.8, East: 1.25, West: 0.65 };
  const lines = ['month,region,units,revenue'];
  for (let m = 1; m <= 12; m++) {
    for (const [region, k] of Object.entries(regions)) {
      const units = Math.round(k * (120 + 40 * Math.sin(m / 2) + m * 6));
      lines.push(`2026-${String(m).padStart(2, '0')}-01,${region},${units},${(units * 24.5).toFixed(2)}`);
    }
  }
  const sandbox = (await call('create_sandbox', {})).structuredContent.sandbox_id;
  await call('write_file', { sandbox_id: sandbox, file_path: 'sales.csv', content: lines.join('\n') + '\n' });
  const wide = { width: 1040 };

  const analyse = {
    sandbox_id: sandbox,
    code: [
      'import pandas as pd',
      'df = pd.read_csv("sales.csv", parse_dates=["month"])',
      'print(f"{len(df)} rows, {df.region.nunique()} regions, {df.month.min():%b %Y} to {df.month.max():%b %Y}")',
      'summary = (df.groupby("region")',
      '    .agg(revenue=("revenue", "sum"), units=("units", "sum"), best_month=("revenue", "max"))',
      '    .sort_values("revenue", ascending=False))',
      'summary',
    ].join('\n'),
  };
  let view = await show(analyse, await call('execute_code', analyse), 'light', { ...wide, caption: 'Analyse sales.csv: revenue and units by region.' });
  await view.locator('tbody tr').first().waitFor();
  assert.match(await view.locator('pre').first().innerText(), /48 rows, 4 regions, Jan 2026 to Dec 2026/);
  assert.equal(await view.locator('tbody tr').count(), 4);
  await checklist(view, 'light', 'the CSV analysed');
  await shot('readme-1-csv-analysed');
  await view.getByRole('button', { name: /^units/ }).click();
  await view.getByRole('button', { name: /^units ▲/ }).waitFor();
  await view.getByRole('button', { name: /^units ▲/ }).click();
  await view.getByRole('button', { name: /^units ▼/ }).waitFor();
  assert.match(await view.locator('tbody tr').first().innerText(), /East/);
  await checklist(view, 'light', 'the sorted summary');
  await shot('readme-2-table-sorted');

  const plot = {
    sandbox_id: sandbox,
    code: [
      'import matplotlib.pyplot as plt',
      'fig, ax = plt.subplots(figsize=(9, 4.2))',
      'for region, part in df.groupby("region"):',
      '    ax.plot(part.month, part.revenue / 1000, marker="o", label=region)',
      'ax.set_title("Monthly revenue by region"); ax.set_ylabel("revenue (k$)")',
      'ax.grid(alpha=.3); ax.legend(ncol=4)',
      'plt.show()',
    ].join('\n'),
  };
  view = await show(plot, await call('execute_code', plot), 'light', { ...wide, caption: 'Plot monthly revenue by region.' });
  await view.locator('figure img').waitFor();
  await view.waitForFunction(() => document.querySelector('figure img').naturalWidth > 100);
  await checklist(view, 'light', 'the figure');
  await shot('readme-3-figure');

  const train = {
    sandbox_id: sandbox,
    background: true,
    code: [
      'import time',
      'for epoch in range(1, 9):',
      '    time.sleep(0.8)',
      '    print(f"epoch {epoch}/8  loss {1.9 / epoch:.3f}  val_acc {0.62 + epoch * 0.035:.3f}", flush=True)',
      '"model saved to model.pkl"',
    ].join('\n'),
  };
  view = await show(train, await call('execute_code', train), 'dark', { ...wide, caption: 'Train the model in the background and follow it.' });
  await view.getByText(/epoch 3\/8/).waitFor({ timeout: 30000 });
  await checklist(view, 'dark', 'the live run');
  await shot('readme-4-run-live');
  await view.getByText(/finished/).waitFor({ timeout: 30000 });

  // Much at once: inline it is clipped to 500 px with no scrolling inside, links go through
  // the host, and the full view shows everything.
  const much = {
    sandbox_id: sandbox,
    code: [
      'for i in range(300): print("row", i)',
      'print("Docs: https://pandas.pydata.org/docs/user_guide/10min.html.")',
      'plt.figure(figsize=(6, 6)); plt.plot([3, 1, 2])',
      'pd.DataFrame({"a": range(300), "b": range(300)})',
    ].join('\n'),
  };
  view = await show(much, await call('execute_code', much), 'light');
  await view.locator('figure img').waitFor();
  const found = await checklist(view, 'light', 'output, a figure and a table at once');
  assert.deepEqual(found.links, ['https://pandas.pydata.org/docs/user_guide/10min.html']);
  assert.match(await view.locator('pre').first().innerText(), /Docs: https/, 'the end of the output shows');
  await view.getByRole('link').click();
  await page.waitForFunction(() => window.openedLinks.length === 1);
  assert.deepEqual(await page.evaluate(() => window.openedLinks), ['https://pandas.pydata.org/docs/user_guide/10min.html']);
  assert.equal(page.frames().length, 2, 'the frame did not navigate');
  await view.getByRole('button', { name: 'Open full view' }).click();
  await view.waitForFunction(() => document.documentElement.dataset.mode === 'fullscreen');
  await view.locator('tbody tr').nth(99).waitFor();
  assert.match(await view.locator('pre').first().innerText(), /row 0\n/, 'the full view shows all of it');
});
