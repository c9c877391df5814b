// A real OpenID provider for the OAuth tests: panva's oidc-provider (pinned in package.json),
// on a loopback port, as a company's IdP would be set up for our server: resource indicators
// (RFC 8707) so access tokens are JWTs for the resource asked for, client credentials for
// agents, dynamic registration and PKCE for Claude-style clients, introspection for opaque
// tokens, and its development login and consent pages (the tests fill them in).
//
// It prints one line, `idp: <issuer>`, once it listens. A few `/__test/` routes beside the
// provider let a test do what an IdP's operator or an attacker would: rotate the signing keys,
// and sign tokens with the IdP's key (claims and header fields of the test's choosing, e.g.
// expired) or with a stranger's key under the IdP's key id; count the introspection requests
// it was sent, and answer introspection of a given token with a body of the test's choosing
// (a malformed answer a broken or hostile IdP could give).
//
// Usage: node idp.mjs [port]

import http from 'node:http';
import crypto from 'node:crypto';
import Provider from 'oidc-provider';
import * as jose from 'jose';

const port = Number(process.argv[2] ?? 0);
// Clients whose tokens are signed with another algorithm than RS256, or are opaque.
const ALG_OF = { 'agent-es': 'ES256', 'agent-ed': 'EdDSA' };
const OPAQUE = new Set(['agent-opaque']);

const clients = [
  ...['agent-a', 'agent-b', 'agent-es', 'agent-ed', 'agent-opaque', 'agent-noscope'].map((id) => ({
    client_id: id,
    client_secret: `${id}-secret`,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    scope: id === 'agent-noscope' ? 'other' : 'mcp other',
  })),
  // The resource server itself, for introspection of opaque tokens.
  {
    client_id: 'sandbox-rs',
    client_secret: 'sandbox-rs-secret',
    grant_types: [],
    redirect_uris: [],
    response_types: [],
  },
];

let generation = 0;
async function keySet() {
  generation += 1;
  const keys = [];
  for (const alg of ['RS256', 'ES256', 'EdDSA']) {
    const { privateKey } = await jose.generateKeyPair(alg, { extractable: true, crv: alg === 'EdDSA' ? 'Ed25519' : undefined });
    const jwk = await jose.exportJWK(privateKey);
    keys.push({ ...jwk, alg, use: 'sig', kid: `${alg.toLowerCase()}-g${generation}` });
  }
  return keys;
}

let issuer;
let keys;
let provider;
let introspections = 0;
const answers = {};

function makeProvider() {
  const p = new Provider(issuer, {
    clients,
    jwks: { keys },
    pkce: { required: () => true },
    scopes: ['openid', 'offline_access', 'mcp', 'other'],
    clientDefaults: { grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic' },
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (ctx, client, oneOf) => oneOf ?? undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource, client) => ({
          scope: 'mcp other',
          audience: resource,
          accessTokenTTL: 600,
          accessTokenFormat: OPAQUE.has(client.clientId) ? 'opaque' : 'jwt',
          jwt: { sign: { alg: ALG_OF[client.clientId] ?? 'RS256' } },
        }),
      },
    },
    // A readable name beside `sub`, for CODE_SANDBOX_OAUTH_PRINCIPAL_CLAIM=email and the allow list.
    extraTokenClaims: (ctx, token) => ({
      email: `${token.accountId ?? token.clientId}@example.com`,
    }),
    findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id, email: `${id}@example.com` }) }),
  });
  p.on('server_error', (ctx, err) => console.error('idp server_error', err));
  return p;
}

async function body(req) {
  let text = '';
  for await (const chunk of req) text += chunk;
  return text ? JSON.parse(text) : {};
}

function b64(obj) {
  return Buffer.from(JSON.stringify(obj)).toString('base64url');
}

// The `/__test/` routes: what an IdP operator (rotation) or an attacker (stranger keys) does.
async function testRoute(req, res) {
  const send = (status, value) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(value));
  };
  const url = new URL(req.url, issuer);
  if (url.pathname === '/__test/rotate') {
    keys = await keySet();
    provider = makeProvider();
    return send(200, { kids: keys.map((k) => k.kid) });
  }
  if (url.pathname === '/__test/mint') {
    // { claims, alg: 'RS256'|'ES256'|'EdDSA'|'HS256'|'none', signer: 'idp'|'stranger', header }
    const { claims, alg = 'RS256', signer = 'idp', header: extra = {} } = await body(req);
    const now = Math.floor(Date.now() / 1000);
    const payload = { iss: issuer, iat: now, exp: now + 600, ...claims };
    const idpKey = keys.find((k) => k.alg === (alg === 'HS256' || alg === 'none' ? 'RS256' : alg));
    const header = { alg, typ: 'at+jwt', kid: idpKey.kid, ...extra };
    if (alg === 'none') {
      return send(200, { token: `${b64(header)}.${b64(payload)}.` });
    }
    if (alg === 'HS256') {
      // The classic confusion: HMAC keyed with the IdP's public key, as a verifier that
      // trusts the header's `alg` would check it.
      const { d, p, q, dp, dq, qi, ...pub } = idpKey;
      const pem = crypto.createPublicKey({ key: pub, format: 'jwk' }).export({ type: 'spki', format: 'pem' });
      const token = await new jose.SignJWT(payload).setProtectedHeader(header).sign(Buffer.from(pem));
      return send(200, { token });
    }
    let key;
    if (signer === 'idp') {
      key = await jose.importJWK(idpKey, alg);
    } else {
      ({ privateKey: key } = await jose.generateKeyPair(alg, { crv: alg === 'EdDSA' ? 'Ed25519' : undefined }));
    }
    // A `crit` the test names is signed as it is: a verifier must refuse what it does not know.
    const options = extra.crit ? { crit: Object.fromEntries(extra.crit.map((c) => [c, true])) } : undefined;
    const token = await new jose.SignJWT(payload).setProtectedHeader(header).sign(key, options);
    return send(200, { token });
  }
  if (url.pathname === '/__test/introspections') {
    return send(200, { count: introspections });
  }
  if (url.pathname === '/__test/introspection-answer') {
    const { token, answer } = await body(req);
    answers[token] = answer;
    return send(200, {});
  }
  return send(404, { error: 'no such test route' });
}

const server = http.createServer((req, res) => {
  if (req.url.startsWith('/__test/')) {
    testRoute(req, res).catch((e) => {
      res.writeHead(500);
      res.end(String(e));
    });
    return;
  }
  if (req.url.startsWith('/token/introspection')) {
    introspections += 1;
    if (Object.keys(answers).length > 0) {
      // Once a test chose answers, this IdP answers every introspection itself: the chosen
      // body for that token, inactive for any other.
      let text = '';
      req.on('data', (c) => { text += c; });
      req.on('end', () => {
        const token = new URLSearchParams(text).get('token');
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answers[token] ?? { active: false }));
      });
      return;
    }
  }
  provider.callback()(req, res);
});

server.listen(port, '127.0.0.1', async () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  keys = await keySet();
  provider = makeProvider();
  console.log(`idp: ${issuer}`);
});

process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
