// The real server for the Node suites: started from VITISTACK_BIN on a free port with a SQLite
// file of its own, waited for until /ready answers, stopped (and its file removed) at the end.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';

/** A port nothing listens on now (for a server or provider to be started on). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

/**
 * Start `vitistack serve ARGS…`; returns { base, port, dbdir, stop, exited }.
 * `options.port` and `options.dbdir` restart a server where an earlier one ran (`keep: true` on
 * that one's stop keeps its database). `options.until` is the path waited for (default `/ready`;
 * `/health` for a server that is not expected to finish syncing yet).
 */
export async function startServer(args, env = {}, options = {}) {
  const bin = process.env.VITISTACK_BIN;
  assert.ok(bin, 'VITISTACK_BIN names the server binary');
  const port = options.port ?? await freePort();
  const dbdir = options.dbdir ?? mkdtempSync(join(tmpdir(), 'vitistack-e2e-'));
  const child = spawn(bin, ['serve', ...args, '--database-url', `sqlite://${dbdir}/e2e.db`], {
    env: { ...process.env, PORT: String(port), BIND_ADDRESS: '127.0.0.1', LOG_LEVEL: 'warn',
      LOG_JSON_LOGGING: 'false', SOURCE: 'embedded',
      // The suites read as a client on a trusted network does, unless they set keys.
      ANONYMOUS_READ_FROM: '127.0.0.0/8', RATE_LIMIT: '0', ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const base = `http://127.0.0.1:${port}`;
  const stop = async ({ keep = false } = {}) => {
    child.kill('SIGTERM');
    await exited;
    if (!keep) rmSync(dbdir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 120000;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`${base}${options.until ?? '/ready'}`)).ok) return { base, port, dbdir, stop, exited };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await stop();
  throw new Error('server did not become ready');
}
