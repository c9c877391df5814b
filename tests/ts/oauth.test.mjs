// Signing in as Claude's connectors do, through the official TypeScript SDK's OAuth client:
// the first request gets 401; the SDK reads the protected resource metadata the challenge
// points at, discovers the authorization server (a real one: oidc-provider, idp.mjs),
// registers itself dynamically, and sends the user to sign in with PKCE and the resource
// indicator. Here the "user" is this test filling in the IdP's login and consent pages; then
// the SDK exchanges the code, and the client lists tools and runs 1+1 with its new token.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import readline from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

const BIN = process.env.MCP_CODE_SANDBOX_BIN;
const REDIRECT = 'http://127.0.0.1:1/callback';

function lineOf(child, stream, prefix) {
  return new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child[stream] });
    rl.on('line', (line) => {
      const at = line.indexOf(prefix);
      if (at >= 0) resolve(line.slice(at + prefix.length).split(/\s/)[0]);
    });
    child.on('exit', (code) => reject(new Error(`${stream} ended (exit ${code}) before "${prefix}"`)));
  });
}

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

// What a browser does with the IdP's pages: follows redirects, keeps cookies, submits forms.
class Browser {
  cookies = new Map();

  async go(url, init = {}) {
    const headers = { ...(init.headers ?? {}), cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ') };
    const r = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const c of r.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const eq = pair.indexOf('=');
      this.cookies.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
    return r;
  }

  // Follows redirects from `url` until one leaves for `stop` (the client's callback) or a
  // page answers; returns that URL or page.
  async follow(url, stop, init) {
    let r = await this.go(url, init);
    for (let hops = 0; hops < 20; hops += 1) {
      if (r.status < 300 || r.status >= 400) return { page: await r.text(), url };
      url = new URL(r.headers.get('location'), url).href;
      if (url.startsWith(stop)) return { redirect: new URL(url) };
      r = await this.go(url);
    }
    throw new Error('too many redirects');
  }
}

test('the SDK signs in through the IdP (discovery, registration, PKCE, resource) and runs 1+1', async (t) => {
  const idp = spawn('node', ['idp.mjs', '0'], { stdio: ['pipe', 'pipe', 'ignore'] });
  t.after(() => idp.kill());
  const issuer = await lineOf(idp, 'stdout', 'idp: ');
  idp.stdout.resume();

  const port = await freePort();
  const mcpUrl = `http://127.0.0.1:${port}/mcp`;
  const server = spawn(BIN, [], {
    env: {
      ...process.env,
      CODE_SANDBOX_TRANSPORT: 'http',
      CODE_SANDBOX_LISTEN: `127.0.0.1:${port}`,
      CODE_SANDBOX_OAUTH_ISSUER: issuer,
      CODE_SANDBOX_PUBLIC_URL: mcpUrl,
      CODE_SANDBOX_OAUTH_SCOPES: 'mcp',
      CODE_SANDBOX_PERSIST: 'false',
      RUST_LOG: 'warn',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  t.after(() => server.kill());
  await lineOf(server, 'stderr', 'serving MCP at ');
  server.stderr.resume();

  // The client's side of the flow, kept in memory as a desktop app keeps it on disk.
  const saved = {};
  const provider = {
    get redirectUrl() { return REDIRECT; },
    get clientMetadata() {
      return {
        client_name: 'oauth test (as Claude)',
        redirect_uris: [REDIRECT],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
        scope: 'mcp',
      };
    },
    clientInformation: () => saved.client,
    saveClientInformation: (c) => { saved.client = c; },
    tokens: () => saved.tokens,
    saveTokens: (tokens) => { saved.tokens = tokens; },
    redirectToAuthorization: (url) => { saved.authorizationUrl = url; },
    saveCodeVerifier: (v) => { saved.verifier = v; },
    codeVerifier: () => saved.verifier,
  };

  const first = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
  await assert.rejects(new Client({ name: 'oauth-test', version: '1' }).connect(first), UnauthorizedError);
  assert.ok(saved.client?.client_id, 'the SDK registered a client dynamically');
  const authUrl = saved.authorizationUrl;
  assert.ok(authUrl, 'the SDK sent the user to sign in');
  assert.equal(authUrl.origin, new URL(issuer).origin, 'to the issuer the metadata names');
  assert.equal(authUrl.searchParams.get('resource'), mcpUrl, 'with the resource indicator');
  assert.equal(authUrl.searchParams.get('code_challenge_method'), 'S256', 'with PKCE');

  // The user signs in and consents on the IdP's own pages.
  const browser = new Browser();
  let step = await browser.follow(authUrl.href, REDIRECT);
  for (const prompt of ['login', 'consent']) {
    assert.ok(step.page, `the IdP shows its ${prompt} page`);
    const form = new URLSearchParams({ prompt, login: 'alice', password: 'any' });
    step = await browser.follow(step.url, REDIRECT, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    if (step.redirect) break;
  }
  assert.ok(step.redirect, `the IdP sent the user back with a code: ${step.page?.slice(0, 300)}`);
  const code = step.redirect.searchParams.get('code');
  assert.ok(code, `a code in ${step.redirect}`);
  await first.finishAuth(code);
  assert.ok(saved.tokens?.access_token, 'the SDK exchanged the code for a token');

  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
  const client = new Client({ name: 'oauth-test', version: '1' });
  await client.connect(transport);
  t.after(() => client.close());
  const { tools } = await client.listTools();
  assert.ok(tools.some((x) => x.name === 'execute_code'), 'the tools are listed');
  const r = await client.callTool({ name: 'execute_code', arguments: { code: '1+1' } });
  assert.ok(!r.isError, JSON.stringify(r));
  assert.equal(r.structuredContent.result, '2');
});
