// GraphQL over HTTP, audited by the graphql-http package (the reference implementation of the
// GraphQL-over-HTTP specification) against the real server with authentication on: every audit,
// MUST, SHOULD and MAY, must be ok with the key sent by the audit's fetch, and the same requests
// without the key are answered 401. Each audit is one test, named by its id and requirement.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serverAudits } from 'graphql-http';
import { startServer } from '../support/server.mjs';

const KEY = 'audit-viewer-key-0123456789';
let server;
let url;
let dir;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'vitistack-audit-'));
  writeFileSync(join(dir, 'keys'), `audit viewer ${KEY}\n`);
  server = await startServer(['--demo'], { ANONYMOUS_READ_FROM: '', API_KEYS_FILE: join(dir, 'keys') });
  url = `${server.base}/graphql`;
});

after(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** fetch with the key added to every request the audits make. */
function withKey(input, init = {}) {
  const headers = new Headers(init.headers ?? {});
  headers.set('authorization', `Bearer ${KEY}`);
  return fetch(input, { ...init, headers });
}

// The audits need the URL, which is known only once the server runs: they are listed with a
// placeholder and each reads the real one when it runs.
for (const audit of serverAudits({ url: () => url, fetchFn: withKey })) {
  test(`${audit.id} ${audit.name}`, async () => {
    const result = await audit.fn();
    assert.equal(result.status, 'ok', `${result.status}: ${result.reason ?? ''}${result.response ? ` (HTTP ${result.response.status})` : ''}`);
  });
}

test('without the key every audit request is answered 401 with WWW-Authenticate', async () => {
  const seen = [];
  const recording = async (input, init) => {
    const res = await fetch(input, init);
    seen.push(`${init?.method ?? 'GET'} ${res.status} ${res.headers.get('www-authenticate')}`);
    return res;
  };
  for (const audit of serverAudits({ url: () => url, fetchFn: recording })) {
    await audit.fn();
  }
  assert.ok(seen.length > 20, `${seen.length} requests`);
  const other = seen.filter((s) => !s.endsWith(' 401 Bearer realm="vitistack"'));
  assert.deepEqual(other, []);
});
