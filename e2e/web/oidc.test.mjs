// People sign in as themselves through a real OpenID provider (npm's oidc-provider, OpenID
// Certified, run by oidc-provider.mjs on localhost): the dashboard's sign-in through the
// provider's own login page in Chromium, bearer tokens the provider signed (and those it did not),
// sign-out that ends the provider's session too, and a key rotation under a live session.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SignJWT, generateKeyPair } from 'jose';
import { freePort, startServer } from '../support/server.mjs';
import { eventually } from '../support/eventually.mjs';
import { launchChromium, logIn, post, startProvider, tokenFor } from './oidc-support.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const artifacts = join(here, 'artifacts');
mkdirSync(artifacts, { recursive: true });
const ADMIN = 'admin-key-for-the-oidc-suite-0123';

const ME = '{ me { name role limited signedInWith groups expiresAt sees { namespaces } } }';
const NAMES = '{ clusters(first: 500) { nodes { name namespace } } }';

/** A KubernetesCluster manifest (the talos-operator's sample) named `name` in `namespace`. */
function clusterManifest(name, namespace) {
  const sample = readFileSync(join(here, '..', '..', 'fixtures', 'upstream', 'talos-operator', '4-kubernetescluster.yaml'), 'utf8');
  return sample
    .replace('  name: t-test-004-43ss', `  name: ${name}\n  namespace: ${namespace}`)
    .replaceAll('t-test-004-43ss', name);
}

describe('people sign in through the OpenID provider', () => {
  let browser;
  let provider;
  let server;
  let dir;
  let providerPort;
  let redirect;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vitistack-oidc-'));
    writeFileSync(join(dir, 'secret'), 'vitistack-test-secret\n');
    writeFileSync(join(dir, 'keys'), `root admin ${ADMIN}\n`);
    providerPort = await freePort();
    const serverPort = await freePort();
    redirect = `http://127.0.0.1:${serverPort}/auth/callback`;
    provider = await startProvider({ port: providerPort, dir: join(dir, 'provider'), redirects: [redirect] });
    server = await startServer(['--demo'], {
      SIMULATE: 'false', ANONYMOUS_READ_FROM: '', API_KEYS_FILE: join(dir, 'keys'),
      OIDC_ISSUER_URL: provider.issuer, OIDC_CLIENT_ID: 'vitistack', OIDC_CLIENT_SECRET_FILE: join(dir, 'secret'),
      OIDC_AUDIENCES: 'cli,short', OIDC_REDIRECT_URL: redirect, OIDC_PROVIDER_NAME: 'Test ID',
      OIDC_ROLE_MAP: 'platform=admin,team-1=viewer@team-1,team-2=operator@team-2', OIDC_CLOCK_SKEW_SECONDS: '1',
    }, { port: serverPort });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
    await provider?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('a bearer token the provider signed is accepted; expired, for another audience, signed by an unknown key or unsigned, refused', async () => {
    const alice = await tokenFor(provider.issuer, 'alice', 'cli');
    const me = await post(server.base, ME, alice);
    assert.equal(me.status, 200, JSON.stringify(me.body));
    assert.equal(me.body.data.me.name, 'oidc:alice');
    assert.equal(me.body.data.me.signedInWith, 'oidc-token');
    assert.deepEqual(me.body.data.me.groups, ['team-1']);
    assert.equal(me.body.data.me.limited, true);
    const seen = (await post(server.base, NAMES, alice)).body.data.clusters.nodes;
    const all = (await post(server.base, NAMES, ADMIN)).body.data.clusters.nodes;
    assert.ok(seen.length > 0 && seen.length < all.length, `${seen.length} of ${all.length}`);
    assert.ok(seen.every((c) => c.namespace === 'team-1'));

    const refused = async (token, why) => {
      const r = await post(server.base, ME, token);
      assert.equal(r.status, 401, JSON.stringify(r.body));
      assert.equal(r.body.errors[0].extensions.code, 'UNAUTHENTICATED');
      assert.match(r.body.errors[0].message, why);
    };
    await refused(await tokenFor(provider.issuer, 'alice', 'other-app'), /another audience/);
    const [header, payload] = alice.split('.');
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${payload}.`;
    await refused(none, /header|algorithm/);
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const { privateKey } = await generateKeyPair('RS256');
    const forged = await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: 'not-published' }).sign(privateKey);
    await refused(forged, /does not publish/);
    const kid = JSON.parse(Buffer.from(header, 'base64url').toString()).kid;
    const wrongKey = await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid }).sign(privateKey);
    await refused(wrongKey, /signature/);
    // Two seconds of life, one of clock skew (checked in whole seconds): refused once past.
    const short = await tokenFor(provider.issuer, 'alice', 'short');
    const exp = JSON.parse(Buffer.from(short.split('.')[1], 'base64url').toString()).exp;
    await eventually('the short token is past its expiry and the skew', async () => Date.now() / 1000 > exp + 3);
    await refused(short, /expired/);
  });

  test('a person\'s change is recorded with who they are, how they came and their groups; outside their namespaces nothing changes', async () => {
    const all = (await post(server.base, NAMES, ADMIN)).body.data.clusters.nodes;
    const theirs = all.find((c) => c.namespace === 'team-2');
    const other = all.find((c) => c.namespace === 'team-1');
    const bob = await tokenFor(provider.issuer, 'bob', 'cli');
    const pause = (c) => `mutation { pauseClusterReconciliation(namespace: "${c.namespace}", name: "${c.name}") { changed } }`;
    const done = await post(server.base, pause(theirs), bob);
    assert.equal(done.body.data?.pauseClusterReconciliation.changed, true, JSON.stringify(done.body));
    const outside = await post(server.base, pause(other), bob);
    assert.equal(outside.body.errors?.[0].extensions.code, 'NOT_FOUND', JSON.stringify(outside.body));
    const viewer = await post(server.base, pause(other), await tokenFor(provider.issuer, 'alice', 'cli'));
    assert.equal(viewer.body.errors?.[0].extensions.code, 'FORBIDDEN', JSON.stringify(viewer.body));
    const events = await eventually('the change is in the history with its actor', async () => {
      const nodes = (await post(server.base, '{ events(filter: {actor: "oidc:bob"}, first: 20) { nodes { actor namespace name } } }', ADMIN)).body.data.events.nodes;
      return nodes.length > 0 ? nodes : undefined;
    });
    assert.ok(events.every((e) => e.actor === 'oidc:bob (oidc-token; groups team-2)' && e.namespace === 'team-2' && e.name === theirs.name), JSON.stringify(events));
  });

  test('alice signs in on the provider\'s page, sees only team-1, follows a live change there and none in team-2, and signs out', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
    const page = await context.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    await page.goto(`${server.base}/clusters`);
    const sso = page.getByTestId('sso');
    await eventually('the sign-in form offers the provider', async () => (await sso.isVisible()) && (await sso.textContent()) === 'Sign in with Test ID');
    await page.screenshot({ path: join(artifacts, 'oidc-signin.png') });
    await sso.click();
    await eventually('the provider\'s login page shows', async () => page.url().startsWith(provider.issuer) || { mismatch: page.url() });
    await logIn(page, 'alice');
    await eventually('back on the dashboard\'s cluster list', async () => page.url() === `${server.base}/clusters`);
    await eventually('the header names alice, her group and her namespace',
      async () => (await page.getByTestId('account').textContent()) === 'oidc:alice (team-1) · viewer · team-1');
    const all = (await post(server.base, NAMES, ADMIN)).body.data.clusters.nodes;
    const mine = all.filter((c) => c.namespace === 'team-1').map((c) => c.name).sort();
    const names = async () => (await page.locator('[data-testid=clusters] tbody tr:not(.spacer) td:first-child').allTextContents()).sort();
    await eventually('the list holds team-1\'s clusters only', async () => JSON.stringify(await names()) === JSON.stringify(mine) || { mismatch: await names() });

    // The cookie: HttpOnly, SameSite, and useless to another site's page.
    const cookie = (await context.cookies()).find((c) => c.name === 'vitistack_session');
    assert.ok(cookie && cookie.httpOnly && cookie.sameSite === 'Lax', JSON.stringify(cookie));
    const crossSite = await post(server.base, ME, undefined, { cookie: `vitistack_session=${cookie.value}`, origin: 'http://evil.example' });
    assert.equal(crossSite.status, 403, JSON.stringify(crossSite.body));
    const sameSite = await post(server.base, ME, undefined, { cookie: `vitistack_session=${cookie.value}`, origin: server.base });
    assert.equal(sameSite.body.data.me.signedInWith, 'oidc-session');
    const forcedOut = await fetch(`${server.base}/auth/logout`, { method: 'POST', redirect: 'manual', headers: { cookie: `vitistack_session=${cookie.value}`, origin: 'http://evil.example' } });
    assert.equal(forcedOut.status, 403);
    assert.equal((await fetch(`${server.base}/auth/logout`, { redirect: 'manual' })).status, 405, 'no sign-out by GET');
    // The database holds neither the cookie's token nor the provider's tokens in the clear.
    const db = readFileSync(join(server.dbdir, 'e2e.db')).toString('latin1') + (() => {
      try { return readFileSync(join(server.dbdir, 'e2e.db-wal')).toString('latin1'); } catch { return ''; }
    })();
    assert.ok(db.includes('alice'), 'the session is in the database');
    assert.ok(!db.includes(cookie.value), 'the cookie\'s token is not');
    assert.ok(!/eyJ[A-Za-z0-9_-]{20,}\.eyJ/.test(db), 'no token in the clear');

    // A change in another team's namespace first, then one in hers: hers shows, the other never.
    const imported = await post(server.base, `mutation { importManifests(files: [
      {name: "two.yaml", content: ${JSON.stringify(clusterManifest('live-in-team-2', 'team-2'))}},
      {name: "one.yaml", content: ${JSON.stringify(clusterManifest('live-in-team-1', 'team-1'))}}]) { changed files { accepted problems { reason } } } }`, ADMIN);
    assert.ok(imported.body.data?.importManifests.files.every((f) => f.accepted), JSON.stringify(imported.body));
    await eventually('her new cluster shows live', async () => (await names()).includes('live-in-team-1'));
    assert.ok(!(await names()).includes('live-in-team-2'));
    await page.screenshot({ path: join(artifacts, 'oidc-tenant.png') });

    await page.getByRole('button', { name: 'Sign out' }).click();
    await eventually('the provider asks to end its session', async () => (page.url().startsWith(provider.issuer) && (await page.getByRole('button', { name: 'Yes, sign me out' }).count()) === 1) || { mismatch: [page.url(), (await page.content()).slice(0, 600)] });
    await page.getByRole('button', { name: 'Yes, sign me out' }).click();
    await eventually('back on the dashboard, signed out', async () => page.url().startsWith(server.base) && (await page.getByTestId('sso').isVisible()));
    const after = await post(server.base, ME, undefined, { cookie: `vitistack_session=${cookie.value}` });
    assert.equal(after.status, 401, 'the old cookie is refused');
    // The provider's session ended too: signing in again asks for the login.
    await page.getByTestId('sso').click();
    await eventually('the provider asks who you are again', async () => (await page.locator('input[name=login]').count()) === 1);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('the provider rotates its signing key while a session goes on and refreshes', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
    const page = await context.newPage();
    await page.goto(`${server.base}/`);
    await page.getByTestId('sso').click();
    await logIn(page, 'pat');
    await eventually('pat is an admin here', async () => (await page.getByTestId('account').textContent()) === 'oidc:pat (platform) · admin');
    const before = await post(server.base, ME, await tokenFor(provider.issuer, 'pat', 'cli'));
    const oldToken = await tokenFor(provider.issuer, 'pat', 'cli');
    const expiresAt = async () => page.evaluate(async (q) => {
      const r = await fetch('/graphql', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: q }) });
      return (await r.json()).data?.me?.expiresAt ?? null;
    }, ME);
    const first = await expiresAt();
    assert.ok(first, 'the session shows when its token expires');
    // A new signing key in front of the old one, the provider restarted on it.
    await provider.stop();
    provider = await startProvider({ port: providerPort, dir: join(dir, 'provider'), redirects: [redirect], rotate: true });
    const keys = JSON.parse(readFileSync(join(dir, 'provider', 'keys.json'), 'utf8'));
    assert.equal(keys.length, 2);
    // The session's token is refreshed before it expires: the new one is signed with the new key.
    await eventually('the session was refreshed with a token signed by the new key', async () => {
      const now = await expiresAt();
      return now && now !== first ? now : { mismatch: now };
    });
    await eventually('still signed in as pat', async () => (await page.getByTestId('account').textContent()) === 'oidc:pat (platform) · admin');
    const fresh = await tokenFor(provider.issuer, 'pat', 'cli');
    assert.equal(JSON.parse(Buffer.from(fresh.split('.')[0], 'base64url').toString()).kid, keys[0].kid);
    assert.equal((await post(server.base, ME, fresh)).body.data.me.name, 'oidc:pat');
    assert.equal((await post(server.base, ME, oldToken)).body.data.me.name, 'oidc:pat', 'the old key is still published');
    assert.equal(before.body.data.me.role, 'ADMIN');
    await context.close();
  });
});
