// The result view in a real browser: headless Chromium (Debian's package) loads a host page
// built on the official MCP Apps host bridge, connected to the real server (over stdio,
// through the official TypeScript SDK). It renders a DataFrame and pages and sorts it through
// read_table, shows a figure and an error, follows a background run to its end and cancels
// another, follows the host's theme, and never runs the HTML a guest wrote. Screenshots go to
// $VIEW_SCREENSHOTS; the assertions read what is on the page, not pixels.

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
async function show(input, result, theme = 'light') {
  await page.evaluate((a) => window.showResult(a), { uri: viewUri, input, result, theme });
  const frame = page.frames().find((f) => f !== page.mainFrame());
  assert.ok(frame, 'the view is in a frame of its own');
  return frame;
}

async function shot(name) {
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
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
  page = await browser.newPage({ viewport: { width: 920, height: 700 } });
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
  assert.equal(await view.locator('tbody tr').count(), 100);
  assert.match(await view.locator('.bar').first().innerText(), /Rows 1.100 of 1,000 rows/);
  assert.equal(await view.locator('tbody td', { hasText: '<script>alert(1)</script>' }).count(), 50, 'the cell shows its text');
  assert.equal(await view.locator('tbody script, tbody img').count(), 0, 'no element came from guest text');
  await shot('table');

  await view.getByRole('button', { name: 'Next rows' }).click();
  await view.locator('tbody tr').first().getByText('100', { exact: true }).waitFor();
  assert.match(await view.locator('.bar').first().innerText(), /Rows 101.200 of 1,000/);
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
  await shot('figure');
  await img.click();
  assert.equal(await view.locator('figure.zoomed').count(), 1);
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
  await shot('error-dark');
});

test('a background run is followed live to its end, and another is cancelled', async () => {
  const input = { sandbox_id: sandbox, background: true, code: "import time\nfor i in range(4):\n    print('step', i, flush=True)\n    time.sleep(0.7)\n'done'" };
  const started = await call('execute_code', input);
  assert.ok(['running', 'queued'].includes(started.structuredContent.state));
  const view = await show(input, started);
  await view.getByText(/step 1/).waitFor({ timeout: 20000 });
  await shot('run-live');
  await view.getByText(/finished/).waitFor({ timeout: 30000 });
  assert.match(await view.locator('main').innerText(), /step 3/);
  assert.match(await view.locator('main').innerText(), /'done'/);
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
