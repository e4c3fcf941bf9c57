// Subscriptions driven by independent clients: the graphql-ws reference client (the
// graphql-transport-ws protocol's own implementation), raw `ws` sockets for protocol violations,
// and the graphql-sse client. The real server runs with the demo and its simulator, so the graph
// churns while the tests watch it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { createClient } from 'graphql-ws';
import { createClient as createSseClient } from 'graphql-sse';
import WebSocket from 'ws';

const BIN = process.env.VITISTACK_BIN;
let server;
let base;
let wsUrl;
let dbdir;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

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

async function metrics() {
  return (await fetch(`${base}/metrics`)).text();
}

function gauge(text, name) {
  const line = text.split('\n').find((l) => l.startsWith(name));
  return line ? Number(line.split(' ').pop()) : 0;
}

async function query(q) {
  const res = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: q }),
  });
  const body = await res.json();
  assert.equal(body.errors, undefined, JSON.stringify(body.errors));
  return body.data;
}

before(async () => {
  assert.ok(BIN, 'VITISTACK_BIN names the server binary');
  const port = await freePort();
  dbdir = mkdtempSync(join(tmpdir(), 'vitistack-e2e-ws-'));
  server = spawn(
    BIN,
    [
      'serve', '--demo', '--simulate', '--simulate-steps-per-second', '100',
      '--ws-init-timeout-seconds', '1', '--stream-keepalive-seconds', '1',
      '--change-buffer', '256', '--subscription-buffer', '64', '--database-url', `sqlite://${dbdir}/e2e.db`,
    ],
    {
      env: { ...process.env, PORT: String(port), BIND_ADDRESS: '127.0.0.1', LOG_LEVEL: 'warn',
        LOG_JSON_LOGGING: 'false', SOURCE: 'embedded' },
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  base = `http://127.0.0.1:${port}`;
  wsUrl = `ws://127.0.0.1:${port}/graphql/ws`;
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${base}/ready`)).ok) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error('server did not become ready');
});

after(() => {
  server?.kill('SIGTERM');
  if (dbdir) rmSync(dbdir, { recursive: true, force: true });
});

const MACHINES = `subscription { resourceChanged(kinds: ["Machine"], snapshot: true) {
  type sequence namespace name object { ... on Machine { phase } } } }`;

test('graphql-ws client: snapshot then stream equals the graph at every sequence, during churn', async () => {
  const client = createClient({ url: wsUrl, webSocketImpl: WebSocket, retryAttempts: 0 });
  const events = [];
  let failed;
  const unsubscribe = client.subscribe(
    { query: MACHINES },
    { next: (r) => events.push(r.data.resourceChanged), error: (e) => { failed = e; }, complete: () => {} },
  );
  try {
    const until = async (pred, what) => {
      for (let i = 0; i < 200 && !pred(); i++) await sleep(50);
      assert.equal(failed, undefined, String(failed));
      assert.ok(pred(), what);
    };
    await until(() => events.some((e) => e.type === 'SYNCED'), 'SYNCED arrives');
    // Three times: the graph at sequence S (one HTTP query reads one snapshot) equals the
    // subscriber's state after every event up to S.
    for (let round = 0; round < 3; round++) {
      const truth = await query('{ sequence machines(first: 500) { totalCount nodes { namespace name phase } } }');
      const S = truth.sequence;
      await until(() => events.some((e) => e.type !== 'SYNCED' && e.sequence > S), `an event after ${S}`);
      const state = new Map();
      let inSnapshot = false;
      let last = 0;
      for (const e of events) {
        if (e.type === 'RESYNC') { state.clear(); inSnapshot = true; continue; }
        if (e.type === 'SYNCED') { inSnapshot = false; last = e.sequence; continue; }
        const snapshotItem = inSnapshot || events.indexOf(e) < events.findIndex((x) => x.type === 'SYNCED');
        if (!snapshotItem) {
          assert.ok(e.sequence > last, `sequence ${e.sequence} after ${last}: no duplicate, in order`);
          if (e.sequence > S) break;
          last = e.sequence;
        }
        const key = `${e.namespace}/${e.name}`;
        if (e.type === 'DELETED') state.delete(key);
        else state.set(key, e.object.phase ?? '');
      }
      const expected = new Map(truth.machines.nodes.map((m) => [`${m.namespace}/${m.name}`, m.phase ?? '']));
      assert.equal(truth.machines.totalCount, expected.size, 'one page holds every machine');
      assert.deepEqual(state, expected, `state at sequence ${S}`);
    }
    assert.ok(events.filter((e) => e.type === 'MODIFIED').length > 0, 'the simulator changed machines');
  } finally {
    unsubscribe();
    await client.dispose();
  }
});

test('graphql-ws client: the server pings, the client answers, the connection stays up', async () => {
  let pings = 0;
  let closed;
  const client = createClient({
    url: wsUrl,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    on: { ping: (received) => { if (received) pings++; }, closed: (e) => { closed = e; } },
  });
  const summaries = [];
  const unsubscribe = client.subscribe(
    { query: 'subscription { infrastructureSummary(debounceMs: 50) { machines { total } } }' },
    { next: (r) => summaries.push(r.data), error: () => {}, complete: () => {} },
  );
  await sleep(3500);
  assert.ok(pings >= 2, `${pings} server pings in 3.5 s at a 1 s keep-alive`);
  assert.equal(closed, undefined);
  assert.ok(summaries.length >= 1);
  unsubscribe();
  await client.dispose();
});

test('graphql-ws client: the operation cap per socket refuses the extra subscription with its limit', async () => {
  const client = createClient({ url: wsUrl, webSocketImpl: WebSocket, retryAttempts: 0 });
  const errors = [];
  const stops = [];
  for (let i = 0; i < 101; i++) {
    stops.push(client.subscribe(
      { query: 'subscription { hostsChanged { hosts } }' },
      { next: () => {}, error: (e) => errors.push(e), complete: () => {} },
    ));
  }
  for (let i = 0; i < 100 && errors.length === 0; i++) await sleep(50);
  assert.equal(errors.length, 1);
  const [e] = errors[0];
  assert.equal(e.extensions.code, 'OPERATION_LIMIT');
  assert.match(e.message, /limit \(STREAM_MAX_OPERATIONS_PER_SOCKET\) is 100/);
  stops.forEach((s) => s());
  await client.dispose();
});

/** Open a raw socket, run `act`, and return the close event's code and reason. */
function closeOf(protocol, act) {
  return new Promise((resolve, reject) => {
    const ws = protocol ? new WebSocket(wsUrl, protocol) : new WebSocket(wsUrl);
    const timer = setTimeout(() => reject(new Error('no close within 5 s')), 5000);
    ws.on('open', () => act(ws));
    ws.on('close', (code, reason) => { clearTimeout(timer); resolve({ code, reason: reason.toString() }); });
    ws.on('error', () => {});
  });
}

const send = (ws, m) => ws.send(JSON.stringify(m));

function afterAck(fn) {
  return (ws) => {
    ws.on('message', (d) => {
      if (JSON.parse(d.toString()).type === 'connection_ack') fn(ws);
    });
    send(ws, { type: 'connection_init' });
  };
}

test('raw socket: every graphql-transport-ws close code', async () => {
  const sub = (id) => ({ id, type: 'subscribe', payload: { query: 'subscription { hostsChanged { hosts } }' } });
  const cases = [
    [4408, 'Connection initialisation timeout', 'graphql-transport-ws', () => {}],
    [4429, 'Too many initialisation requests', 'graphql-transport-ws', afterAck((ws) => send(ws, { type: 'connection_init' }))],
    [4401, 'Unauthorized', 'graphql-transport-ws', (ws) => send(ws, sub('1'))],
    [4400, 'not JSON', 'graphql-transport-ws', afterAck((ws) => ws.send('{nope'))],
    [4400, 'unknown type `start`', 'graphql-transport-ws', afterAck((ws) => send(ws, { type: 'start', id: '1' }))],
    [4409, 'Subscriber for same already exists', 'graphql-transport-ws', afterAck((ws) => { send(ws, sub('same')); send(ws, sub('same')); })],
    [4406, 'Subprotocol not acceptable', undefined, () => {}],
  ];
  const before = await metrics();
  for (const [code, reason, protocol, act] of cases) {
    const got = await closeOf(protocol, act);
    assert.equal(got.code, code, `${reason}: ${JSON.stringify(got)}`);
    assert.ok(got.reason.includes(reason), `${JSON.stringify(got)} says ${reason}`);
  }
  const after = await metrics();
  for (const code of [4408, 4429, 4401, 4409, 4406]) {
    const name = `vitistack_websocket_closes_total{code="${code}"}`;
    assert.equal(gauge(after, name) - gauge(before, name), 1, name);
  }
});

test('raw socket: a paused reader gets RESYNC, then a fresh snapshot; others are not held up', async () => {
  const ws = new WebSocket(wsUrl, 'graphql-transport-ws');
  const events = [];
  ws.on('message', (d) => {
    const m = JSON.parse(d.toString());
    if (m.type === 'connection_ack') {
      // Whole objects, so the socket buffers fill while the reader is paused.
      send(ws, { id: 'slow', type: 'subscribe', payload: { query:
        'subscription { resourceChanged(snapshot: true) { type sequence object { ... on Machine { raw } ... on NetworkConfiguration { raw } ... on KubernetesCluster { raw } } } }' } });
    } else if (m.type === 'next') {
      events.push(m.payload.data.resourceChanged.type);
    } else if (m.type === 'ping') {
      send(ws, { type: 'pong' });
    }
  });
  await new Promise((r) => ws.on('open', r));
  send(ws, { type: 'connection_init' });
  for (let i = 0; i < 100 && !events.includes('SYNCED'); i++) await sleep(50);
  assert.ok(events.includes('SYNCED'));
  // Stop reading for a while: the simulator keeps changing the graph (100 steps/s); a
  // subscription queues 64 changes.
  ws._socket.pause();
  const t0 = Date.now();
  // Meanwhile another client is served promptly.
  const data = await query('{ sequence }');
  assert.ok(data.sequence > 0);
  assert.ok(Date.now() - t0 < 2000, 'a query while a reader is stalled');
  await sleep(6000);
  ws._socket.resume();
  for (let i = 0; i < 200 && !(events.includes('RESYNC') && events.lastIndexOf('SYNCED') > events.indexOf('RESYNC')); i++) await sleep(50);
  const r = events.indexOf('RESYNC');
  assert.ok(r > 0, `RESYNC after the pause (${events.length} events)`);
  assert.ok(events.indexOf('SYNCED', r) > r, 'a fresh snapshot ends with SYNCED');
  const m = await metrics();
  assert.ok(gauge(m, 'vitistack_subscription_resyncs_total{field="resourceChanged"}') >= 1);
  ws.close();
});

test('raw socket: dropped without complete, the server releases everything', async () => {
  // Earlier tests' sockets are gone first (their close handshakes may still be running).
  let baseline = await metrics();
  for (let i = 0; i < 100 && gauge(baseline, 'vitistack_websockets_open') !== 0; i++) {
    await sleep(50);
    baseline = await metrics();
  }
  assert.equal(gauge(baseline, 'vitistack_websockets_open'), 0);
  const sockets = [];
  for (let i = 0; i < 5; i++) {
    const ws = new WebSocket(wsUrl, 'graphql-transport-ws');
    await new Promise((r) => ws.on('open', r));
    ws.on('message', (d) => {
      if (JSON.parse(d.toString()).type === 'connection_ack') {
        send(ws, { id: 'x', type: 'subscribe', payload: { query: 'subscription { resourceChanged(kinds: ["Machine"]) { type } }' } });
      }
    });
    ws.on('error', () => {});
    send(ws, { type: 'connection_init' });
    sockets.push(ws);
  }
  const active = 'vitistack_subscriptions_active{field="resourceChanged"}';
  let during = await metrics();
  for (let i = 0; i < 100 && gauge(during, active) < gauge(baseline, active) + 5; i++) {
    await sleep(50);
    during = await metrics();
  }
  assert.equal(gauge(during, 'vitistack_websockets_open'), gauge(baseline, 'vitistack_websockets_open') + 5);
  assert.equal(gauge(during, active), gauge(baseline, active) + 5);
  // No close frame, no complete: the TCP connections just go.
  sockets.forEach((ws) => ws.terminate());
  let now = await metrics();
  for (let i = 0; i < 100 && gauge(now, 'vitistack_websockets_open') !== gauge(baseline, 'vitistack_websockets_open'); i++) {
    await sleep(50);
    now = await metrics();
  }
  assert.equal(gauge(now, 'vitistack_websockets_open'), gauge(baseline, 'vitistack_websockets_open'));
  assert.equal(gauge(now, active), gauge(baseline, active));
});

test('graphql-sse client: the same subscription over server-sent events', async () => {
  const client = createSseClient({ url: `${base}/graphql/stream`, retryAttempts: 0 });
  const seen = [];
  await new Promise((resolve, reject) => {
    const stop = client.subscribe(
      { query: MACHINES },
      {
        next: (r) => {
          seen.push(r.data.resourceChanged);
          // The snapshot, SYNCED, then a live change from the simulator.
          if (seen.some((e) => e.type === 'SYNCED') && seen.at(-1).type !== 'SYNCED' && seen.findIndex((e) => e.type === 'SYNCED') < seen.length - 1) {
            stop();
            resolve();
          }
        },
        error: reject,
        complete: resolve,
      },
    );
  });
  const synced = seen.findIndex((e) => e.type === 'SYNCED');
  assert.ok(synced > 0, 'snapshot items before SYNCED');
  assert.ok(seen[synced + 1].sequence > seen[synced].sequence);
  client.dispose();
});
