// Subscriptions driven by independent clients: the graphql-ws reference client (the
// graphql-transport-ws protocol's own implementation), raw `ws` sockets for protocol violations,
// and the graphql-sse client. The real server runs with the demo and its simulator, so the graph
// churns while the tests watch it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createClient } from 'graphql-ws';
import { createClient as createSseClient } from 'graphql-sse';
import WebSocket from 'ws';
import { startServer } from '../support/server.mjs';

let server;
let base;
let wsUrl;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function metrics() {
  return (await fetch(`${base}/metrics`)).text();
}

// The value of one series (full name with labels, exactly as exposed); undefined when absent.
function series(text, name) {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    if (at > 0 && line.slice(0, at) === name) return Number(line.slice(at + 1));
  }
  return undefined;
}

// The same, where a missing series fails the test.
function gauge(text, name) {
  const v = series(text, name);
  assert.notEqual(v, undefined, `metric ${name} is not exposed`);
  return v;
}

// How long a test waits for something that should happen: generous, so a loaded one-core
// machine turns a slow success into a slow success, not a failure.
const PATIENCE_MS = 30000;

async function eventually(what, cond, patience = PATIENCE_MS) {
  const deadline = Date.now() + patience;
  for (;;) {
    if (await cond()) return;
    assert.ok(Date.now() < deadline, `timed out after ${patience} ms waiting for ${what}`);
    await sleep(25);
  }
}

function within(what, promise) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${PATIENCE_MS} ms`)), PATIENCE_MS);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
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
  server = await startServer([
    '--demo', '--simulate', '--simulate-steps-per-second', '100',
    '--ws-init-timeout-seconds', '1', '--stream-keepalive-seconds', '1',
    '--change-buffer', '256', '--subscription-buffer', '64',
  ]);
  base = server.base;
  wsUrl = `ws://127.0.0.1:${server.port}/graphql/ws`;
});

after(() => server?.stop());

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
      await eventually(what, () => failed !== undefined || pred());
      assert.equal(failed, undefined, String(failed));
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
  // At a 1 s keep-alive the pings come however slowly the machine runs.
  await eventually('two server pings', () => pings >= 2);
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
  await eventually('the refusal', () => errors.length > 0);
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
    const timer = setTimeout(() => reject(new Error(`no close within ${PATIENCE_MS} ms`)), PATIENCE_MS);
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
    // Absent before (no such close yet) counts as 0; after, the series must be there.
    assert.equal(gauge(after, name) - (series(before, name) ?? 0), 1, name);
  }
});

test('raw socket: a paused reader gets RESYNC, then a fresh snapshot; others are not held up', async () => {
  const ws = new WebSocket(wsUrl, 'graphql-transport-ws');
  const events = [];
  ws.on('message', (d) => {
    const m = JSON.parse(d.toString());
    if (m.type === 'connection_ack') {
      // Whole objects, eight times each (aliases), so the socket buffers (MBs on loopback) fill
      // within seconds while the reader is paused: only then does the server fall behind, since
      // it renders each event once for all subscribers and keeps up with the simulator.
      const raw = Array.from({ length: 8 }, (_, i) => `r${i}: raw`).join(' ');
      send(ws, { id: 'slow', type: 'subscribe', payload: { query:
        `subscription { resourceChanged(snapshot: true) { type sequence object { ... on Machine { ${raw} } ... on NetworkConfiguration { ${raw} } ... on KubernetesCluster { ${raw} } } } }` } });
    } else if (m.type === 'next') {
      events.push(m.payload.data.resourceChanged.type);
    } else if (m.type === 'ping') {
      send(ws, { type: 'pong' });
    }
  });
  await new Promise((r) => ws.on('open', r));
  send(ws, { type: 'connection_init' });
  await eventually('the snapshot', () => events.includes('SYNCED'));
  const overflows = 'vitistack_subscription_overflows_total';
  const overflowed = gauge(await metrics(), overflows);
  // Stop reading: the simulator keeps changing the graph (100 steps/s); the socket's buffers
  // fill, then the subscription's queue (64 changes) overflows.
  ws._socket.pause();
  // Meanwhile another client is served: the query answers while the reader is still paused
  // (the reader is resumed only after it), so a server held up by the reader would fail here.
  const data = await within('a query while a reader is stalled', query('{ sequence }'));
  assert.ok(data.sequence > 0);
  // Only once the socket buffers (MBs on loopback) are full does the server fall behind: how
  // long that takes follows how fast events are produced, so the wait is longer here.
  await eventually('the paused subscription to overflow', async () => gauge(await metrics(), overflows) > overflowed, 4 * PATIENCE_MS);
  ws._socket.resume();
  await eventually('RESYNC then a fresh SYNCED', () => events.includes('RESYNC') && events.lastIndexOf('SYNCED') > events.indexOf('RESYNC'));
  const r = events.indexOf('RESYNC');
  assert.ok(r > 0, `RESYNC after the pause (${events.length} events)`);
  assert.ok(events.indexOf('SYNCED', r) > r, 'a fresh snapshot ends with SYNCED');
  const m = await metrics();
  assert.ok(gauge(m, 'vitistack_subscription_resyncs_total{field="resourceChanged"}') >= 1);
  ws.close();
});

test('raw socket: dropped without complete, the server releases everything', async () => {
  // Earlier tests' sockets are gone first (their close handshakes may still be running).
  let baseline;
  await eventually('earlier sockets to close', async () => {
    baseline = await metrics();
    return gauge(baseline, 'vitistack_websockets_open') === 0;
  });
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
  // Absent before any subscription of that field counts as 0.
  const activeBefore = series(baseline, active) ?? 0;
  let during;
  await eventually('five subscriptions', async () => {
    during = await metrics();
    return (series(during, active) ?? 0) >= activeBefore + 5;
  });
  assert.equal(gauge(during, 'vitistack_websockets_open'), gauge(baseline, 'vitistack_websockets_open') + 5);
  assert.equal(gauge(during, active), activeBefore + 5);
  // No close frame, no complete: the TCP connections just go.
  sockets.forEach((ws) => ws.terminate());
  let now;
  await eventually('the sockets to be released', async () => {
    now = await metrics();
    return gauge(now, 'vitistack_websockets_open') === gauge(baseline, 'vitistack_websockets_open')
      && gauge(now, active) === activeBefore;
  });
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
