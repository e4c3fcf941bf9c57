// The fleet as it was, in the dashboard: the overview at a past moment shows that moment's
// figures (as the API answers `at` them), the time control moves to a moment typed in, links keep
// the moment, the "what changed" page lists a change made here, "Live" returns to the present, a
// cluster's phase step opens the cluster then, and an application's page shows it as it was.
// The product's own binary in Debian's Chromium; every wait is on a condition with a deadline.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../support/server.mjs';
import { launchChromium } from './oidc-support.mjs';
import { eventually } from '../support/eventually.mjs';
import { expectedStages, expectedTiles, gql, shownStages, shownTiles, TILES } from './tiles.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const artifacts = join(here, 'artifacts');
mkdirSync(artifacts, { recursive: true });

/** `TILES` asked at moment `at`. */
const tilesAt = (at) => `{ at(time: "${at}") ${TILES} }`;

/** What the overview shows, against what the API answers for the moment `at` (the page's). */
async function overviewAt(page, base, at) {
  const api = (await gql(base, tilesAt(at))).at;
  const want = { tiles: expectedTiles(api), stages: expectedStages(api) };
  const got = { tiles: await shownTiles(page), stages: await shownStages(page) };
  if (JSON.stringify(want) !== JSON.stringify(got)) return { mismatch: { want, got } };
  return got;
}

/** The page's address's `at`, or null. */
const addressAt = (page) => new URL(page.url()).searchParams.get('at');

/** A local `datetime-local` value (seconds) for a time, as the browser's field takes it. */
const localInput = (page, ms) => page.evaluate((t) => {
  const d = new Date(t);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}, ms);

describe('the fleet as it was (the demo, simulator off, a cluster deleted during the test)', () => {
  const OPERATOR = 'operator-key-for-the-past-test-0123';
  let server;
  let dir;
  let browser;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vitistack-keys-'));
    writeFileSync(join(dir, 'keys'), `ops operator ${OPERATOR}\n`);
    server = await startServer(['--demo'], { SIMULATE: 'false', API_KEYS_FILE: join(dir, 'keys') });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('the overview at a past moment shows its figures; what changed lists a deletion; Live returns', async () => {
    // The history has its first moment once the timeline's first checkpoint is written.
    const oldest = await eventually('the history keeps a moment', async () => (await gql(server.base, '{ oldestMoment }')).oldestMoment);
    // A moment after it, on a whole second (the time control's field has seconds), where the
    // graph held still (it answers as the present does), then a change.
    const { before, then } = await eventually('a still moment after the oldest one', async () => {
      const before = Math.floor((Date.now() - 1000) / 1000) * 1000;
      if (before <= Date.parse(oldest)) return false;
      const then = (await gql(server.base, tilesAt(new Date(before).toISOString()))).at;
      const live = await gql(server.base, TILES);
      return JSON.stringify(expectedTiles(then)) === JSON.stringify(expectedTiles(live)) && { before, then };
    });
    const beforeIso = new Date(before).toISOString();
    const ready = (await gql(server.base, '{ clusters(first: 100, filter: {phase: ["Ready"]}) { nodes { namespace name } } }')).clusters.nodes;
    const gone = ready[0];
    assert.ok(gone, 'the demo has a Ready cluster');
    await gql(server.base, 'mutation($ns: String!, $n: String!) { deleteKubernetesCluster(namespace: $ns, name: $n, confirm: $n) { changed } }',
      { ns: gone.namespace, n: gone.name }, OPERATOR);
    const now = await eventually('the cluster is gone now', async () => {
      const d = await gql(server.base, `{ gone: cluster(namespace: "${gone.namespace}", name: "${gone.name}") { name } ...on Query ${TILES} }`);
      return d.gone === null && d.infrastructure.clusters.total === then.infrastructure.clusters.total - 1 && d;
    });
    assert.notDeepEqual(expectedTiles(now), expectedTiles(then), 'the deletion moves the overview');

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });

    // A deep link to the past: the page says so, and shows that moment's figures.
    await page.goto(`${server.base}/?at=${encodeURIComponent(beforeIso)}`);
    await eventually('the page says it shows the past', () => page.getByTestId('past').isVisible());
    assert.match(await page.getByTestId('past').textContent(), /Not live: the fleet as it was at/);
    assert.equal(await page.getByTestId('past-moment').getAttribute('datetime'), beforeIso);
    assert.equal(await page.getByTestId('connection').textContent(), 'Past', 'the badge does not say Live');
    await eventually('the overview shows the figures of that moment', () => overviewAt(page, server.base, beforeIso));
    assert.equal((await page.getByTestId('tile-clusters').textContent()).trim(), expectedTiles(then)['tile-clusters']);
    // The time control is open at a past moment, its slider from the oldest moment kept.
    await eventually('the time control shows', () => page.getByTestId('moment-slider').isVisible());
    assert.equal(Number(await page.getByTestId('moment-slider').getAttribute('min')), Math.floor(Date.parse(oldest)));
    await page.screenshot({ path: join(artifacts, 'past-overview.png') });

    // Going to another page keeps the moment in the address (a copied link opens the same moment).
    await page.getByRole('link', { name: 'Clusters', exact: true }).click();
    await eventually('the clusters list keeps the moment', async () => new URL(page.url()).pathname === '/clusters' && addressAt(page) === beforeIso);
    await eventually('the deleted cluster is listed then', async () => (await page.getByText(gone.name, { exact: true }).count()) > 0);

    // Live: the present again, without the banner, with the present's figures.
    await page.goto(`${server.base}/?at=${encodeURIComponent(beforeIso)}`);
    await eventually('the time control shows', () => page.getByTestId('live').isVisible());
    await page.getByTestId('live').click();
    await eventually('the address has no moment', async () => new URL(page.url()).pathname === '/' && addressAt(page) === null);
    await eventually('the banner is gone', async () => (await page.getByTestId('past').count()) === 0);
    await eventually('the badge says Live', async () => (await page.getByTestId('connection').textContent()) === 'Live');
    await eventually('the overview shows the present', async () => {
      const want = expectedTiles(await gql(server.base, TILES));
      const got = await shownTiles(page);
      return JSON.stringify(want) === JSON.stringify(got) ? got : { mismatch: { want, got } };
    });

    // The time control from the present: a moment typed in, shown.
    await page.getByTestId('history').click();
    await eventually('the time control opens', () => page.getByTestId('moment').isVisible());
    await page.getByTestId('moment').fill(await localInput(page, before));
    await page.getByTestId('show-moment').click();
    await eventually('the address names the moment typed in', async () => addressAt(page) !== null && Date.parse(addressAt(page)) === before);
    await eventually('the overview shows the figures of that moment', () => overviewAt(page, server.base, addressAt(page)));

    // What changed between that moment and now lists the deletion.
    const to = new Date().toISOString();
    await page.goto(`${server.base}/changes?from=${encodeURIComponent(beforeIso)}&to=${encodeURIComponent(to)}`);
    const row = page.getByTestId('change').filter({ hasText: gone.name }).filter({ hasText: 'KubernetesCluster' });
    await eventually('the deleted cluster is listed as removed', async () => (await row.count()) === 1 && /removed/.test(await row.textContent()));
    const api = (await gql(server.base, `{ changes(from: "${beforeIso}", to: "${to}", first: 500) { totalCount } }`)).changes;
    assert.match(await page.getByTestId('changes-summary').textContent(), new RegExp(`^${api.totalCount} objects? differ: 0 added, 1 removed`));
    await page.screenshot({ path: join(artifacts, 'past-changes.png') });
    assert.deepEqual(problems, []);
    await context.close();
  });
});

describe('the fleet as it was, while the simulator moves it', () => {
  let server;
  let browser;
  before(async () => {
    server = await startServer(['--demo'], { SIMULATE: 'true', SIMULATE_STEPS_PER_SECOND: '4' });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test("a cluster page's phase history opens the cluster as it was in a past step", async () => {
    // A cluster that has been through two phases at least (the simulator moves them on).
    const c = await eventually('a cluster with a finished phase', async () => {
      const nodes = (await gql(server.base, '{ clusters(first: 100, sort: {field: NAME}) { nodes { namespace name phaseTimeline { phase until } } } }')).clusters.nodes;
      return nodes.find((n) => n.phaseTimeline.some((p) => p.until));
    }, 180000);
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    await page.goto(`${server.base}/clusters/${c.namespace}/${c.name}`);
    const steps = page.getByTestId('step');
    await eventually('the phase history links its steps', async () => (await steps.count()) >= 2);
    const href = await steps.first().getAttribute('href');
    const at = new URL(href, server.base).searchParams.get('at');
    assert.ok(at && Number.isFinite(Date.parse(at)), href);
    await steps.first().click();
    await eventually('the cluster page at that step, said to be the past', async () => addressAt(page) === at
      && new URL(page.url()).pathname === `/clusters/${c.namespace}/${c.name}`
      && await page.getByTestId('past').isVisible());
    const then = (await gql(server.base, `{ at(time: "${at}") { cluster(namespace: "${c.namespace}", name: "${c.name}") { phase diagnosis { summary } } } }`)).at.cluster;
    assert.equal(then.phase, c.phaseTimeline[0].phase, 'the moment linked is inside the first step');
    await eventually("the page shows the cluster's diagnosis then", async () =>
      (await page.getByTestId('diagnosis').textContent()) === then.diagnosis.summary);
    // Nothing of the present reaches a page of the past: the feed of live changes stays empty.
    assert.equal(await page.getByTestId('feed').getAttribute('data-changes'), '0');
    await page.screenshot({ path: join(artifacts, 'past-cluster.png') });
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("an application's page at a past moment shows it as it was", async () => {
    // The demo's keycloak pod restarts every few seconds while the simulator runs.
    const ask = (at) => at
      ? `{ at(time: "${at}") { application(namespace: "identity", name: "keycloak") { pods { name restarts } } } }`
      : '{ application(namespace: "identity", name: "keycloak") { pods { name restarts } } }';
    const oldest = await eventually('the history keeps a moment', async () => (await gql(server.base, '{ oldestMoment }')).oldestMoment);
    const at = await eventually('a moment after the oldest one', async () => {
      const t = new Date(Date.now() - 500).toISOString();
      return Date.parse(t) > Date.parse(oldest) && t;
    });
    // The pod that restarts (the one with the most restarts then), by name.
    const first = (await gql(server.base, ask(at))).at.application.pods.reduce((a, b) => (b.restarts > a.restarts ? b : a));
    const pod = (d) => d.application.pods.find((p) => p.name === first.name);
    await eventually('keycloak restarted since', async () =>
      pod(await gql(server.base, ask())).restarts > first.restarts + 1, 120000);
    // What the history says of the moment now that it has been written, against the present.
    const then = pod((await gql(server.base, ask(at))).at);
    const now = pod(await gql(server.base, ask()));
    assert.notEqual(then.restarts, now.restarts, 'the moment differs from the present');
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    await page.goto(`${server.base}/applications/identity/keycloak?at=${encodeURIComponent(at)}`);
    const restarts = page.getByTestId(`pod-${then.name}`).getByTestId('restarts');
    await eventually("the page shows the pod's restarts then", async () =>
      (await restarts.count()) === 1 && (await restarts.textContent()) === String(then.restarts));
    assert.ok(await page.getByTestId('past').isVisible(), 'the page says it shows the past');
    await page.screenshot({ path: join(artifacts, 'past-application.png') });
    assert.deepEqual(problems, []);
    await context.close();
  });
});
