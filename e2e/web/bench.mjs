// Dashboard benchmarks for BENCHMARKS.md (a script, not a test: it measures, it does not assert).
//
//   VITISTACK_BIN=/var/tmp/vitistack-target/release/vitistack node bench.mjs [size|first|lists|latency|soak]...
//
// size     compressed bytes of what the first page load fetches, and of what is loaded on demand
// first    navigation → the overview showing real numbers (tiles, charts, stages, attention), on DEMO_CLUSTERS=500
//          (BENCH_CLUSTERS to change: 1310 is about 100,000 objects); median and max of 7 loads
// lists    navigation → the first rows of the Machines (by name, and by phase descending), networks,
//          VMs and clusters lists, on DEMO_CLUSTERS=BENCH_CLUSTERS; median and max of 5 loads each
// latency  change-to-pixel on DEMO_CLUSTERS=500 (BENCH_LATENCY_CLUSTERS to change), simulator at 20
//          steps/s (BENCH_STEPS to change): the page of a cluster in flight against a reference
//          client (graphql-ws on Node) subscribed to the same cluster; a change's latency is the
//          DOM showing it minus the reference client receiving it (matched by store sequence); the
//          bench follows the busiest clusters, BENCH_FOLLOW pages at once (default 4; at 1,310
//          clusters one page at a time saw 18 changes in 15 min), until 100 changes are in, and
//          reports the objects changed per second over the whole fleet while it ran
// soak     JS heap, WebAssembly memory and DOM nodes of an open overview (DEMO_CLUSTERS=500) during
//          10 minutes of simulator churn at 20 steps/s (SOAK_MINUTES to change)
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { createClient } from '../ws/node_modules/graphql-ws/dist/index.js';
import WebSocket from '../ws/node_modules/ws/wrapper.mjs';
import { startServer } from '../support/server.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const which = process.argv.slice(2).length ? process.argv.slice(2) : ['size', 'first', 'lists', 'latency', 'soak'];
const CHROME_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--enable-precise-memory-info', '--js-flags=--expose-gc'];

// The fleet of `first` and `lists` (DEMO_CLUSTERS; 1,310 is about 100,000 objects).
const CLUSTERS = process.env.BENCH_CLUSTERS ?? '500';
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

/** What the first load fetches and what is loaded on demand: scripts/web-budget.py's rule. */
function size() {
  const out = execFileSync('python3', [join(here, '../../scripts/web-budget.py'), '--report'], { encoding: 'utf8' });
  console.log(`size: ${out.trim()}`);
}

/** Resolves in the page when the overview shows real numbers (tiles, charts, stage bars and the
 *  clusters needing attention); returns ms since navigation start. */
const READY = () => new Promise((resolve) => {
  const check = () => {
    const tiles = [...document.querySelectorAll('.tile-value')].map((e) => e.textContent);
    const charted = document.querySelector('[data-testid=chart-cpu]') !== null
      || ![...document.querySelectorAll('p.empty')].some((p) => p.textContent.startsWith('Loading'));
    const stages = document.querySelectorAll('[data-testid=stages] li').length;
    const attention = document.querySelector('[data-testid=attention] li, [data-testid=attention-none]') !== null;
    if (tiles.length >= 7 && tiles.every((t) => t !== '…') && charted && stages > 0 && attention) resolve(performance.now());
    else requestAnimationFrame(check);
  };
  check();
});

async function first(browser) {
  const server = await startServer(['--demo'], { SIMULATE: 'false', DEMO_CLUSTERS: CLUSTERS });
  const times = [];
  for (let i = 0; i < 7; i++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
    const page = await context.newPage();
    await page.goto(`${server.base}/`);
    times.push(await page.evaluate(READY));
    await context.close();
  }
  const counts = await gql(server.base, '{ infrastructure { machines { total } clusters { total } } hostCapacity { hosts activeVms } }');
  console.log(`first render (${counts.infrastructure.clusters.total} clusters, ${counts.infrastructure.machines.total} machines, ${counts.hostCapacity.hosts} hosts, ${counts.hostCapacity.activeVms} VMs): median ${median(times).toFixed(0)} ms, max ${Math.max(...times).toFixed(0)} ms over ${times.length} loads (cold cache each; in order: ${times.map((t) => t.toFixed(0)).join(', ')})`);
  await server.stop();
}

/** Resolves in the page when a list's rows are drawn; returns ms since navigation start. */
const ROWS = (testid) => new Promise((resolve) => {
  const check = () => {
    if (document.querySelectorAll(`[data-testid=${testid}] tbody tr:not(.spacer)`).length > 0) resolve(performance.now());
    else requestAnimationFrame(check);
  };
  check();
});

/** Navigation → each list page's first rows (the page of 500 asked of the whole fleet, sorted
 *  on the server), on DEMO_CLUSTERS=BENCH_CLUSTERS; median and max of 5 loads each. */
async function lists(browser) {
  const server = await startServer(['--demo'], { SIMULATE: 'false', DEMO_CLUSTERS: CLUSTERS });
  const objects = (await gql(server.base, '{ sources { kinds { objects } } }')).sources.kinds.reduce((n, k) => n + k.objects, 0);
  for (const [path, testid] of [['/machines', 'machines'], ['/machines?sort=-phase', 'machines'], ['/networks', 'networks'], ['/vms', 'vms'], ['/clusters', 'clusters']]) {
    const times = [];
    for (let i = 0; i < 5; i++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
      const page = await context.newPage();
      await page.goto(`${server.base}${path}`);
      times.push(await page.evaluate(ROWS, testid));
      await context.close();
    }
    console.log(`list ${path} (${objects} objects): first rows median ${median(times).toFixed(0)} ms, max ${Math.max(...times).toFixed(0)} ms over ${times.length} loads (cold cache each; in order: ${times.map((t) => t.toFixed(0)).join(', ')})`);
  }
  await server.stop();
}

/** Opens `target`'s cluster page and collects change-to-pixel samples into `lat` until the
 *  cluster has been quiet for 15 s (it reached Ready, was replaced, or is held) or `want` are in
 *  (counting what the other pages open at once have seen, in `live`). */
async function follow(browser, server, target, lat, want, live) {
  // The reference client's receive time of each change, by store sequence.
  const reference = new Map();
  const client = createClient({ url: `ws://127.0.0.1:${server.port}/graphql/ws`, webSocketImpl: WebSocket });
  client.subscribe({ query: 'subscription($id: ID!) { clusterChanged(id: $id) { sequence changed { type } } }', variables: { id: target.id } }, {
    next: (r) => { if (r.data.clusterChanged.changed) reference.set(r.data.clusterChanged.sequence, Date.now()); },
    error: () => {}, complete: () => {},
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  await page.goto(`${server.base}/clusters/${target.namespace}/${target.name}`);
  await page.waitForSelector('[data-testid=pipeline] li, .problem', { timeout: 60000 });
  // The feed carries the sequence of the newest change it shows: note when each one appeared
  // (Date.now() in the page: the same clock as the reference client's).
  await page.evaluate(() => {
    window.drawn = {};
    const feed = document.querySelector('[data-testid=feed]');
    if (feed) {
      new MutationObserver(() => { window.drawn[feed.dataset.sequence] ??= Date.now(); })
        .observe(feed, { attributes: true, attributeFilter: ['data-sequence'] });
    }
  });
  const matched = async () => Object.entries(await page.evaluate(() => window.drawn))
    .filter(([s]) => reference.has(Number(s))).map(([s, t]) => t - reference.get(Number(s)));
  let last = { n: 0, at: Date.now() };
  const seen = () => lat.length + [...live.values()].reduce((a, b) => a + b, 0);
  for (;;) {
    const n = (await matched()).length;
    live.set(target.id, n);
    if (n !== last.n) last = { n, at: Date.now() };
    if (seen() >= want || Date.now() - last.at > 15000) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  live.delete(target.id);
  lat.push(...(await matched()).slice(0, Math.max(0, want - lat.length)));
  await client.dispose();
  await page.close();
}

async function latency(browser) {
  const clusters = process.env.BENCH_LATENCY_CLUSTERS ?? '500';
  const steps = process.env.BENCH_STEPS ?? '20';
  const server = await startServer(['--demo'], { SIMULATE: 'true', SIMULATE_STEPS_PER_SECOND: steps, DEMO_CLUSTERS: clusters });
  // Which clusters the simulator is moving now (most of the fleet stays Ready; a few are in flight),
  // and how many objects of any kind change each second.
  const recent = [];
  let changes = 0;
  const watcher = createClient({ url: `ws://127.0.0.1:${server.port}/graphql/ws`, webSocketImpl: WebSocket });
  watcher.subscribe({ query: 'subscription { resourceChanged { kind namespace object { ... on KubernetesCluster { id name } } } }' }, {
    next: (r) => {
      changes += 1;
      const o = r.data.resourceChanged.object;
      if (r.data.resourceChanged.kind === 'KubernetesCluster' && o?.id) recent.push({ at: Date.now(), id: o.id, name: o.name, namespace: r.data.resourceChanged.namespace });
    },
    error: () => {}, complete: () => {},
  });
  const started = Date.now();
  // The busiest cluster of the last 10 s that no page follows yet.
  const live = new Map();
  const busiest = () => {
    const counts = new Map();
    for (const e of recent.filter((e) => Date.now() - e.at < 10000 && !live.has(e.id))) counts.set(e.id, { ...e, n: (counts.get(e.id)?.n ?? 0) + 1 });
    return [...counts.values()].sort((a, b) => b.n - a.n)[0];
  };
  await new Promise((r) => setTimeout(r, 10000));
  const lat = [];
  const followed = [];
  const deadline = Date.now() + 900000;
  const pages = Number(process.env.BENCH_FOLLOW ?? 4);
  const follower = async () => {
    while (lat.length < 100 && Date.now() < deadline) {
      const target = busiest();
      if (!target) { await new Promise((r) => setTimeout(r, 1000)); continue; }
      live.set(target.id, 0);
      followed.push(target.name);
      await follow(browser, server, target, lat, 100, live);
    }
  };
  await Promise.all(Array.from({ length: pages }, follower));
  const perSecond = changes / ((Date.now() - started) / 1000);
  await watcher.dispose();
  const counts = await gql(server.base, '{ infrastructure { machines { total } clusters { total } } hostCapacity { hosts activeVms } }');
  const objects = (await gql(server.base, '{ sources { kinds { objects } } }')).sources.kinds.reduce((n, k) => n + k.objects, 0);
  console.log(`change-to-pixel over ${lat.length} changes of ${followed.length} clusters in flight, ${pages} pages at once (${objects} objects: ${counts.infrastructure.clusters.total} clusters, ${counts.infrastructure.machines.total} machines, ${counts.hostCapacity.hosts} hosts, ${counts.hostCapacity.activeVms} VMs; simulator at ${steps} steps/s, ${perSecond.toFixed(1)} objects changed per second): p50 ${pct(lat, 50)} ms, p95 ${pct(lat, 95)} ms, max ${Math.max(...lat)} ms`);
  await server.stop();
}

async function soak(browser) {
  const minutes = Number(process.env.SOAK_MINUTES ?? 10);
  const server = await startServer(['--demo'], { SIMULATE: 'true', SIMULATE_STEPS_PER_SECOND: '20', DEMO_CLUSTERS: '500' });
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  await page.goto(`${server.base}/`);
  await page.evaluate(READY);
  const sample = async () => page.evaluate(() => {
    if (window.gc) window.gc();
    return {
      heap: performance.memory.usedJSHeapSize,
      wasm: window.vitistackWasmBytes(),
      inUse: window.vitistackHeapInUse(),
      dom: document.getElementsByTagName('*').length,
    };
  });
  const rows = [];
  const t0 = Date.now();
  for (let m = 1; m <= minutes; m++) {
    while (Date.now() - t0 < m * 60000) await new Promise((r) => setTimeout(r, 1000));
    const s = await sample();
    rows.push({ minute: m, heapMiB: +(s.heap / 1048576).toFixed(2), wasmMiB: +(s.wasm / 1048576).toFixed(2), inUseMiB: +(s.inUse / 1048576).toFixed(2), domNodes: s.dom });
    console.log(JSON.stringify(rows.at(-1)));
  }
  const seq = (await gql(server.base, '{ sequence }')).sequence;
  const a = rows[0];
  const b = rows.at(-1);
  console.log(`soak ${minutes} min at 20 steps/s (${seq} changes): JS heap ${a.heapMiB} → ${b.heapMiB} MiB (${(((b.heapMiB - a.heapMiB) / a.heapMiB) * 100).toFixed(1)} %), WebAssembly memory ${a.wasmMiB} → ${b.wasmMiB} MiB (in use by the allocator ${a.inUseMiB} → ${b.inUseMiB} MiB), DOM nodes ${a.domNodes} → ${b.domNodes} (${(((b.domNodes - a.domNodes) / a.domNodes) * 100).toFixed(1)} %)`);
  await page.close();
  await server.stop();
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: CHROME_ARGS });
try {
  for (const w of which) {
    if (w === 'size') size();
    if (w === 'first') await first(browser);
    if (w === 'lists') await lists(browser);
    if (w === 'latency') await latency(browser);
    if (w === 'soak') await soak(browser);
  }
} finally {
  await browser.close();
}
