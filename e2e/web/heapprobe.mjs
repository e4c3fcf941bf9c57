// Whether a view's WebAssembly heap stays flat: opens PATH on the small demo with the simulator at
// 20 steps/s and reads the bytes the app's allocator has in use every 20 s for MINUTES (default
// 12). Each reading is the lowest of twenty taken 0.25 s apart: what the page keeps, not the
// answers it happens to be holding twice while the next one is parsed (a leak raises the lowest
// reading too). The trend is a least-squares line through the readings after the warm-up. It prints every reading, then the change from the reading at WARMUP minutes (default 2) to
// the last one and the highest reading after the warm-up, both against the reading at WARMUP. A
// probe, not a test: its figures go into BENCHMARKS.md (a leak shows as steady growth; a flat
// heap moves a few KiB either way).
//
//   VITISTACK_BIN=… node heapprobe.mjs [PATH] [MINUTES] [WARMUP]
import { chromium } from 'playwright-core';
import { startServer } from '../support/server.mjs';

const path = process.argv[2] ?? '/';
const minutes = Number(process.argv[3] ?? 12);
const warmup = Number(process.argv[4] ?? 2);
const every = 20000;
const server = await startServer(['--demo'], { SIMULATE: 'true', SIMULATE_STEPS_PER_SECOND: '20' });
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
const page = await browser.newPage();
await page.goto(`${server.base}${path}`);
await page.waitForFunction(() => typeof window.vitistackHeapInUse === 'function');
const readings = [];
const t0 = Date.now();
for (let i = 0; i <= (minutes * 60000) / every; i++) {
  await new Promise((r) => setTimeout(r, Math.max(0, t0 + i * every - Date.now())));
  const five = [];
  for (let j = 0; j < 20; j++) {
    if (j > 0) await new Promise((r) => setTimeout(r, 250));
    five.push(await page.evaluate(() => window.vitistackHeapInUse()));
  }
  readings.push(Math.round(Math.min(...five) / 1024));
}
const changes = await page.evaluate(async (base) => {
  const r = await fetch(`${base}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: '{ events(first: 1) { nodes { sequence } } }' }) });
  return (await r.json()).data?.events?.nodes?.[0]?.sequence ?? null;
}, server.base);
await browser.close();
await server.stop();

const from = Math.round((warmup * 60000) / every);
const base = readings[from];
const after = readings.slice(from);
const pct = (v) => `${v >= base ? '+' : ''}${(((v - base) / base) * 100).toFixed(1)} %`;
// Least squares through (minute, KiB) after the warm-up: the readings' trend, whatever their noise.
const xs = after.map((_, i) => warmup + (i * every) / 60000);
const mx = xs.reduce((a, b) => a + b) / xs.length;
const my = after.reduce((a, b) => a + b) / after.length;
const slope = xs.reduce((a, x, i) => a + (x - mx) * (after[i] - my), 0) / xs.reduce((a, x) => a + (x - mx) ** 2, 0);
const fitFrom = my + slope * (warmup - mx);
const fitTo = my + slope * (minutes - mx);
console.log(`${path}: allocator KiB in use every ${every / 1000} s over ${minutes} min: ${readings.join(' ')}`);
console.log(`${path}: from minute ${warmup} to minute ${minutes}: ${base} → ${readings.at(-1)} KiB (${pct(readings.at(-1))}); ` +
  `highest ${Math.max(...after)} KiB (${pct(Math.max(...after))}); trend ${slope.toFixed(2)} KiB/min, ` +
  `${fitFrom.toFixed(0)} → ${fitTo.toFixed(0)} KiB (${(((fitTo - fitFrom) / fitFrom) * 100).toFixed(1)} %); store sequence at the end: ${changes}`);
