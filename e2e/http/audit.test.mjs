// GraphQL over HTTP, audited by the graphql-http package (the reference implementation of the
// GraphQL-over-HTTP specification) against the real server: every audit, MUST, SHOULD and MAY,
// must be ok. Each audit is one test, named by its id and requirement.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { serverAudits } from 'graphql-http';

const BIN = process.env.VITISTACK_BIN;
let server;
let dbdir;
let url;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

before(async () => {
  assert.ok(BIN, 'VITISTACK_BIN names the server binary');
  const port = await freePort();
  dbdir = mkdtempSync(join(tmpdir(), 'vitistack-e2e-http-'));
  server = spawn(BIN, ['serve', '--demo', '--database-url', `sqlite://${dbdir}/e2e.db`], {
    env: { ...process.env, PORT: String(port), BIND_ADDRESS: '127.0.0.1', LOG_LEVEL: 'warn',
      LOG_JSON_LOGGING: 'false', SOURCE: 'embedded' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  url = `http://127.0.0.1:${port}/graphql`;
  const deadline = Date.now() + 120000;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/ready`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('server did not become ready');
});

after(() => {
  server?.kill('SIGTERM');
  if (dbdir) rmSync(dbdir, { recursive: true, force: true });
});

// The audits need the URL, which is known only once the server runs: they are listed with a
// placeholder and each reads the real one when it runs.
for (const audit of serverAudits({ url: () => url })) {
  test(`${audit.id} ${audit.name}`, async () => {
    const result = await audit.fn();
    assert.equal(result.status, 'ok', `${result.status}: ${result.reason ?? ''}${result.response ? ` (HTTP ${result.response.status})` : ''}`);
  });
}
