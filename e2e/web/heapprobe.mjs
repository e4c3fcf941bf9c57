// Which view's WebAssembly heap grows: opens PATH on the small demo with the simulator at 20
// steps/s and prints the bytes the app's allocator has in use every 20 s (a probe, not a test).
//
//   VITISTACK_BIN=… node heapprobe.mjs [PATH] [MINUTES]
import { chromium } from 'playwright-core';
import { startServer } from '../support/server.mjs';
const path = process.argv[2] ?? '/';
const minutes = Number(process.argv[3] ?? 3);
const server = await startServer(['--demo'], { SIMULATE: 'true', SIMULATE_STEPS_PER_SECOND: '20' });
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--js-flags=--expose-gc'] });
const page = await browser.newPage();
await page.goto(`${server.base}${path}`);
await new Promise((r) => setTimeout(r, 5000));
const t0 = Date.now();
const rows = [];
while (Date.now() - t0 < minutes * 60000) {
  const s = await page.evaluate(() => ({ inUse: window.vitistackHeapInUse(), wasm: window.vitistackWasmBytes() }));
  rows.push(Math.round(s.inUse / 1024));
  await new Promise((r) => setTimeout(r, 20000));
}
console.log(path, 'inUse KiB every 20 s:', rows.join(' '));
await browser.close();
await server.stop();
