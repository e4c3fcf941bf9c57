// What the suites that sign people in share: the real OpenID provider (oidc-provider.mjs) as a
// child process, an ID token it issues through its own login form (as a command-line client
// gets one) and the login typed on its page, a GraphQL request with a bearer token, and Chromium
// as every browser suite here starts it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { eventually } from '../support/eventually.mjs';

const here = dirname(fileURLToPath(import.meta.url));

/** The provider on `port`, keeping its keys and grants in `dir`; resolves once it serves. */
export async function startProvider({ port, dir, redirects, rotate = false, sessionTtl = 15 }) {
  const child = spawn(process.execPath, [join(here, 'oidc-provider.mjs')], {
    env: { ...process.env, PORT: String(port), STATE_DIR: dir, REDIRECT_URIS: redirects.join(','),
      ROTATE: rotate ? '1' : '0', SESSION_ID_TTL: String(sessionTtl) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('listening')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`the provider exited (${code}): ${out}`)));
  });
  return { issuer: `http://127.0.0.1:${port}`, stop: async () => { child.kill('SIGTERM'); await exited; } };
}

/** Cookies kept between requests to the provider (what a browser would do). */
class Jar {
  constructor() { this.cookies = new Map(); }
  take(res) {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      this.cookies.set(pair.slice(0, i).trim(), pair.slice(i + 1));
    }
  }
  header() { return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; '); }
}

/**
 * An ID token the provider issues to `client` for `user`: the authorization code flow with PKCE
 * through the provider's own login form, as a command-line client would drive it.
 */
export async function tokenFor(issuer, user, client) {
  const jar = new Jar();
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const redirect = 'http://127.0.0.1/cli-callback';
  let url = `${issuer}/auth?${new URLSearchParams({ client_id: client, response_type: 'code', scope: 'openid profile groups',
    redirect_uri: redirect, code_challenge: challenge, code_challenge_method: 'S256', nonce: 'n', state: 's' })}`;
  let form;
  for (let hop = 0; hop < 10; hop++) {
    const res = form
      ? await fetch(url, { method: 'POST', redirect: 'manual', headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' }, body: form })
      : await fetch(url, { redirect: 'manual', headers: { cookie: jar.header() } });
    jar.take(res);
    form = undefined;
    const location = res.headers.get('location');
    if (location?.startsWith(redirect)) {
      const code = new URL(location).searchParams.get('code');
      assert.ok(code, `no code in ${location}`);
      const token = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirect, code_verifier: verifier, client_id: client }),
      });
      const body = await token.json();
      assert.ok(body.id_token, JSON.stringify(body));
      return body.id_token;
    }
    if (location) {
      url = new URL(location, url).toString();
      continue;
    }
    // The provider's login page: its form, filled as a person would.
    const html = await res.text();
    const action = /action="([^"]+)"/.exec(html)?.[1];
    assert.ok(action && html.includes('name="login"'), `not the login page: ${html.slice(0, 300)}`);
    url = new URL(action, url).toString();
    form = new URLSearchParams({ prompt: 'login', login: user, password: 'any password' }).toString();
  }
  throw new Error('the provider did not return a code');
}

export async function post(base, query, token, headers = {}) {
  const h = { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...headers };
  if (token) h.authorization = `Bearer ${token}`;
  const res = await fetch(`${base}/graphql`, { method: 'POST', headers: h, body: JSON.stringify({ query }) });
  return { status: res.status, body: await res.json() };
}

/** Debian's Chromium, headless, as every browser suite here starts it. */
export function launchChromium() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** Once `page` is on the provider's login page: `user` typed in and sent, as a person would. */
export async function logIn(page, user) {
  await eventually('the provider\'s login page', async () => (await page.locator('input[name=login]').count()) === 1
    || { mismatch: [page.url(), (await page.content()).slice(0, 400)] });
  await page.locator('input[name=login]').fill(user);
  await page.locator('input[name=password]').fill('any password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
}
