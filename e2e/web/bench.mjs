// Dashboard benchmarks for BENCHMARKS.md (a script, not a test: it measures, it does not assert).
//
//   VITISTACK_BIN=/var/tmp/vitistack-target/release/vitistack node bench.mjs [size|first|latency|soak]...
//
// size     compressed bytes of what the page loads (web/dist, gzip as served)
// first    navigation → the overview showing real numbers (tiles and charts), on DEMO_CLUSTERS=500;
//          median and max of 7 loads
// latency  change-to-pixel: the cluster page's live feed against a reference client (graphql-ws on
//          Node) subscribed to the same cluster; a change's latency is the DOM showing it minus the
//          reference client receiving it, over 100 changes, simulator at 20 steps/s
// soak     JS heap, WebAssembly memory and DOM nodes of an open overview during 10 minutes of
//          simulator churn at 20 steps/s (SOAK_MINUTES to change)
import { readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { createClient } from '../ws/node_modules/graphql-ws/dist/index.js';
import WebSocket from '../ws/node_modules/ws/wrapper.mjs';
import { startServer } from '../support/server.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const which = process.argv.slice(2).length ? process.argv.slice(2) : ['size', 'first', 'latency', 'soak'];
const CHROME_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--enable-precise-memory-info', '--js-flags=--expose-gc'];

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)];

async function gql(base, query, variables = {}) {
  const res = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()).data;
}

function size() {
  const dir = join(here, '../../web/dist/assets');
  const rows = {};
  for (const f of readdirSync(dir)) {
    if (!f.endsWith('.gz')) continue;
    const kind = f.replace(/\.gz$/, '').split('.').pop();
    rows[kind] = (rows[kind] ?? 0) + statSync(join(dir, f)).size;
  }
  const total = Object.values(rows).reduce((a, b) => a + b, 0);
  console.log(`size: ${Object.entries(rows).map(([k, v]) => `${k} ${(v / 1024).toFixed(1)} KiB`).join(', ')}; total ${(total / 1024).toFixed(1)} KiB gzip`);
}

/** Resolves in the page when the overview shows real numbers; returns ms since navigation start. */
const READY = () => new Promise((resolve) => {
  const check = () => {
    const tiles = [...document.querySelectorAll('.tile-value')].map((e) => e.textContent);
    const charted = document.querySelector('[data-testid=chart-cpu]') !== null
      || ![...document.querySelectorAll('p.empty')].some((p) => p.textContent.startsWith('Loading'));
    const stages = document.querySelectorAll('[data-testid=stages] li').length;
    if (tiles.length === 7 && tiles.every((t) => t !== '…') && charted && stages > 0) resolve(performance.now());
    else requestAnimationFrame(check);
  };
  check();
});

async function first(browser) {
  const server = await startServer(['--demo'], { SIMULATE: 'false', DEMO_CLUSTERS: '500' });
  const times = [];
  for (let i = 0; i < 7; i++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
    const page = await context.newPage();
    await page.goto(`${server.base}/`);
    times.push(await page.evaluate(READY));
    await context.close();
  }
  const counts = await gql(server.base, '{ infrastructure { machines { total } clusters { total } } hostCapacity { hosts activeVms } }');
  console.log(`first render (${counts.infrastructure.clusters.total} clusters, ${counts.infrastructure.machines.total} machines, ${counts.hostCapacity.hosts} hosts, ${counts.hostCapacity.activeVms} VMs): median ${median(times).toFixed(0)} ms, max ${Math.max(...times).toFixed(0)} ms over ${times.length} loads (cold cache each)`);
  await server.stop();
}

async function latency(browser) {
  const server = await startServer(['--demo'], { SIMULATE: 'true', SIMULATE_STEPS_PER_SECOND: '20' });
  // The cluster the simulator moves most over 10 s (protected ones, keeping the demo's mix, stay).
  const counts = new Map();
  const watcher = createClient({ url: `ws://127.0.0.1:${server.port}/graphql/ws`, webSocketImpl: WebSocket });
  const stopWatching = watcher.subscribe({ query: 'subscription { resourceChanged(kinds: ["KubernetesCluster", "Machine"]) { namespace object { ... on KubernetesCluster { id name } ... on Machine { cluster { id name } } } } }' }, {
    next: (r) => {
      const o = r.data.resourceChanged.object;
      const c = o?.cluster ?? (o?.name ? o : null);
      if (c?.id) counts.set(c.id, { ...c, namespace: r.data.resourceChanged.namespace, n: (counts.get(c.id)?.n ?? 0) + 1 });
    },
    error: () => {}, complete: () => {},
  });
  await new Promise((r) => setTimeout(r, 10000));
  stopWatching();
  await watcher.dispose();
  const target = [...counts.values()].sort((a, b) => b.n - a.n)[0];
  const reference = [];
  const client = createClient({ url: `ws://127.0.0.1:${server.port}/graphql/ws`, webSocketImpl: WebSocket });
  client.subscribe({ query: 'subscription($id: ID!) { clusterChanged(id: $id) { sequence changed { type } } }', variables: { id: target.id } }, {
    next: (r) => { if (r.data.clusterChanged.changed) reference.push(Date.now()); },
    error: () => {}, complete: () => {},
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  await page.goto(`${server.base}/clusters/${target.namespace}/${target.name}`);
  await page.waitForSelector('[data-testid=pipeline] li');
  // Entries the page drew, with the time each appeared (Date.now() in the page: the same clock).
  await page.evaluate(() => {
    window.drawn = [];
    const feed = document.querySelector('[data-testid=feed]');
    new MutationObserver(() => {
      const n = feed.querySelectorAll('li time').length;
      while (window.drawn.length < n) window.drawn.push(Date.now());
    }).observe(feed, { childList: true, subtree: true });
  });
  const start = reference.length;
  // The feed keeps the newest 50 entries: read the page's counter of entries drawn instead.
  const deadline = Date.now() + 180000;
  while (Date.now() < deadline) {
    const drawn = await page.evaluate(() => window.drawn.length);
    if (drawn >= 100 && reference.length - start >= 100) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const drawn = await page.evaluate(() => window.drawn);
  const n = Math.min(100, drawn.length, reference.length - start);
  const lat = [];
  for (let i = 0; i < n; i++) lat.push(drawn[i] - reference[start + i]);
  console.log(`change-to-pixel over ${n} changes of ${target.name} (simulator at 20 steps/s): p50 ${pct(lat, 50)} ms, p95 ${pct(lat, 95)} ms, max ${Math.max(...lat)} ms`);
  await client.dispose();
  await page.close();
  await server.stop();
}

async function soak(browser) {
  const minutes = Number(process.env.SOAK_MINUTES ?? 10);
  const server = await startServer(['--demo'], { SIMULATE: 'true', SIMULATE_STEPS_PER_SECOND: '20' });
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  await page.goto(`${server.base}/`);
  await page.evaluate(READY);
  const sample = async () => page.evaluate(() => {
    if (window.gc) window.gc();
    return {
      heap: performance.memory.usedJSHeapSize,
      wasm: window.vitistackWasmBytes(),
      dom: document.getElementsByTagName('*').length,
    };
  });
  const rows = [];
  const t0 = Date.now();
  for (let m = 1; m <= minutes; m++) {
    while (Date.now() - t0 < m * 60000) await new Promise((r) => setTimeout(r, 1000));
    const s = await sample();
    rows.push({ minute: m, heapMiB: +(s.heap / 1048576).toFixed(2), wasmMiB: +(s.wasm / 1048576).toFixed(2), domNodes: s.dom });
    console.log(JSON.stringify(rows.at(-1)));
  }
  const seq = (await gql(server.base, '{ sequence }')).sequence;
  const a = rows[0];
  const b = rows.at(-1);
  console.log(`soak ${minutes} min at 20 steps/s (${seq} changes): JS heap ${a.heapMiB} → ${b.heapMiB} MiB (${(((b.heapMiB - a.heapMiB) / a.heapMiB) * 100).toFixed(1)} %), WebAssembly memory ${a.wasmMiB} → ${b.wasmMiB} MiB, DOM nodes ${a.domNodes} → ${b.domNodes} (${(((b.domNodes - a.domNodes) / a.domNodes) * 100).toFixed(1)} %)`);
  await page.close();
  await server.stop();
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: CHROME_ARGS });
try {
  for (const w of which) {
    if (w === 'size') size();
    if (w === 'first') await first(browser);
    if (w === 'latency') await latency(browser);
    if (w === 'soak') await soak(browser);
  }
} finally {
  await browser.close();
}
