// The dashboard as a user sees it: the product's own binary (with the dashboard embedded) in
// Debian's Chromium, driven by playwright-core. Every wait is on a condition with a generous
// deadline; screenshots of each view land in e2e/web/artifacts/.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { createInterface } from 'node:readline';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../support/server.mjs';
import { launchChromium } from './oidc-support.mjs';
import { eventually, PATIENCE } from '../support/eventually.mjs';
import { expectedStages, expectedTiles, gql, shownStages, shownTiles, TILES } from './tiles.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const artifacts = join(here, 'artifacts');
mkdirSync(artifacts, { recursive: true });
const axePath = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

let browser;
before(async () => {
  // Without a built dashboard every test here would wait for a page that never comes: say so once.
  const dist = join(here, '..', '..', 'web', 'dist', 'index.html');
  if (!existsSync(dist)) throw new Error(`the dashboard is not built (${dist} is missing): run scripts/build-web.sh`);
  browser = await launchChromium();
});
after(() => browser?.close());

/** A page that records what a user would see go wrong: errors, and any request off the origin. */
async function openPage(base, { bypassCSP = false } = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 720 }, bypassCSP });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('request', (r) => {
    const url = new URL(r.url());
    if (!['http:', 'ws:'].includes(url.protocol) || url.host !== new URL(base).host) {
      if (!url.protocol.startsWith('data')) problems.push(`request off the origin: ${r.url()}`);
    }
  });
  return { page, context, problems };
}

/**
 * The page shows what the API answers: read the API, the page, and the API again; equal when the
 * graph did not move in between and the page matches it.
 */
async function pageMatchesApi(page, base) {
  const first = await gql(base, TILES);
  const tiles = await shownTiles(page);
  const stages = await shownStages(page);
  const second = await gql(base, TILES);
  if (first.sequence !== second.sequence) return { mismatch: 'the graph moved while reading' };
  const want = { tiles: expectedTiles(first), stages: expectedStages(first) };
  const got = { tiles, stages };
  if (JSON.stringify(want) !== JSON.stringify(got)) return { mismatch: { want, got } };
  return { ...got, sequence: first.sequence };
}

async function shot(page, name) {
  await page.screenshot({ path: join(artifacts, `${name}.png`) });
}

describe('a still fleet (the demo, simulator off)', () => {
  let server;
  before(async () => { server = await startServer(['--demo'], { SIMULATE: 'false' }); });
  after(() => server?.stop());

  test('at 1440 px the header is one row on every page, signed out and with the time of the last change', async () => {
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const page = await context.newPage();
    for (const path of ['/', '/datacenters', '/clusters', '/applications', '/topology', '/events']) {
      await page.goto(`${server.base}${path}`);
      await eventually(`${path}: the badge says Live and the sign-in button is there`, async () =>
        (await page.getByTestId('connection').textContent()) === 'Live'
        && (await page.getByRole('button', { name: 'Sign in' }).count()) === 1);
      // One row: every item's middle within a few pixels of the others' (a second row is ~40 px down).
      const spread = await page.locator('header.top > *').evaluateAll((items) => {
        const middles = items.filter((i) => i.getBoundingClientRect().width > 0)
          .map((i) => { const r = i.getBoundingClientRect(); return (r.top + r.bottom) / 2; });
        return Math.max(...middles) - Math.min(...middles);
      });
      assert.ok(spread < 12, `${path}: the header wraps at 1440 px (its items' middles ${spread} px apart)`);
    }
    // The theme switch is an icon, named for what it does.
    await page.getByRole('button', { name: 'Light theme' }).click();
    assert.equal(await page.locator('html').getAttribute('data-theme'), 'light');
    await page.getByRole('button', { name: 'Dark theme' }).click();
    await context.close();
  });

  test('the overview shows the numbers the API answers, from this origin only', async () => {
    const { page, context, problems } = await openPage(server.base);
    await page.goto(`${server.base}/`);
    await eventually('the badge says Live', async () => (await page.getByTestId('connection').textContent()) === 'Live');
    const seen = await eventually('the tiles and stage bars equal the API', () => pageMatchesApi(page, server.base));
    assert.ok(seen.stages.reduce((a, b) => a + b, 0) > 0, 'the stage bars count clusters');
    // One datacenter: no picker to choose among one.
    assert.equal(await page.getByTestId('filter-dc').isVisible(), false, 'a datacenter picker with one datacenter');
    // The demo has VMs in error and VMs on their way, as the old page's tile counted them.
    const vmStates = (await gql(server.base, '{ virtualMachines(first: 500) { nodes { phaseState } } }')).virtualMachines.nodes;
    const capacity = (await gql(server.base, '{ hostCapacity { failedVms pendingVms } }')).hostCapacity;
    assert.ok(capacity.failedVms > 0 && capacity.failedVms >= vmStates.filter((v) => v.phaseState === 'FAILED').length, JSON.stringify(capacity));
    assert.ok(capacity.pendingVms >= vmStates.filter((v) => v.phaseState === 'PENDING').length, JSON.stringify(capacity));
    const sub = page.getByTestId('tile-problems').locator('xpath=..').locator('.tile-sub');
    assert.equal((await sub.textContent()).trim(), `failed · ${capacity.pendingVms} VMs pending`);
    // The allocation charts draw one bar per host, with the server's figures.
    const hosts = (await gql(server.base, '{ hosts(first: 500) { totalCount } }')).hosts.totalCount;
    assert.equal(await page.locator('[data-testid=chart-cpu] .bar').count(), hosts);
    assert.equal(await page.locator('[data-testid=chart-memory] .bar').count(), hosts);
    await page.screenshot({ path: join(artifacts, 'overview.png') });
    // "Needs attention": every cluster not Ready or degraded, as each one's diagnosis says, the
    // failed ones first, at most eight, and a link to the rest.
    const diagnosed = (await gql(server.base, '{ clusters(first: 500) { nodes { name diagnosis { ready degraded failed } } } }')).clusters.nodes;
    const needing = diagnosed.filter((c) => !c.diagnosis.ready || c.diagnosis.degraded);
    const failed = needing.filter((c) => c.diagnosis.failed).map((c) => c.name);
    assert.ok(failed.length > 0 && needing.length > 8, `the demo has ${failed.length} failed of ${needing.length} needing attention`);
    const items = page.getByTestId('attention').locator('li');
    await eventually('the attention list is drawn', async () => (await items.count()) === 8);
    const names = await items.locator('a').allTextContents();
    assert.deepEqual(names.slice(0, failed.length).sort(), [...failed].sort(), 'the failed clusters come first');
    assert.equal(await page.locator('[data-testid=attention] li.failed').count(), failed.length);
    assert.ok(names.every((n) => needing.some((c) => c.name === n)), names.join());
    const more = page.locator('a[href="/clusters?state=attention"]');
    assert.equal((await more.textContent()).trim(), `${needing.length - 8} more…`);
    await page.getByTestId('attention').locator('xpath=..').screenshot({ path: join(artifacts, 'overview-attention.png') });
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('a deep link restores a filtered list, and back and forward walk the filters', async () => {
    const { page, context, problems } = await openPage(server.base);
    const all = (await gql(server.base, `{ clusters(first: 500) { nodes { name namespace pipeline { stage } } } }`)).clusters.nodes;
    const stage = 'NETWORK';
    const expected = all.filter((c) => c.pipeline.stage === stage).map((c) => c.name).sort();
    assert.ok(expected.length > 0, 'the demo has clusters blocked at the network');
    await page.goto(`${server.base}/clusters?stage=${stage}`);
    const names = async () => (await page.locator('[data-testid=clusters] tbody tr:not(.spacer) td:first-child').allTextContents()).sort();
    await eventually('the list shows the clusters at that stage', async () => JSON.stringify(await names()) === JSON.stringify(expected));
    assert.equal(await page.getByTestId('filter-stage').inputValue(), stage);
    await shot(page, 'clusters');

    // Another filter is another URL; back returns to the first, forward to the second.
    await page.getByTestId('filter-state').selectOption('failed');
    await eventually('the URL carries both filters', async () => page.url().includes('state=failed') && page.url().includes(`stage=${stage}`));
    await page.goBack();
    await eventually('back restores the first filter', async () => !page.url().includes('state=failed')
      && (await page.getByTestId('filter-state').inputValue()) === ''
      && JSON.stringify(await names()) === JSON.stringify(expected));
    await page.goForward();
    await eventually('forward restores the second', async () => (await page.getByTestId('filter-state').inputValue()) === 'failed');

    // Search is a URL too.
    const one = expected[0];
    await page.goto(`${server.base}/clusters?q=${encodeURIComponent(one)}`);
    await eventually('the search finds the cluster', async () => (await names()).includes(one));
    assert.equal(await page.getByTestId('filter-q').inputValue(), one);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('six clusters or fewer are cards with their VMs; more are only a table', async () => {
    const { page, context, problems } = await openPage(server.base);
    const vms = (await gql(server.base, `{ virtualMachines(first: 500) { nodes { name namespace phase phaseState vcpus
      memoryBytes instance { nodeName } membership { clusterId } } } }`)).virtualMachines.nodes;
    const all = (await gql(server.base, '{ clusters(first: 500) { nodes { name namespace clusterId } } }')).clusters.nodes;
    assert.ok(all.length > 6, 'the demo has more than six clusters');
    await page.goto(`${server.base}/clusters`);
    await eventually('the whole fleet is a table', async () => (await page.locator('[data-testid=clusters] tbody tr:not(.spacer)').count()) === all.length);
    assert.equal(await page.getByTestId('cluster-card').count(), 0, 'no cards past six clusters');
    // Each row has the old page's compact-table columns, from the cluster's own VMs.
    const mineOf = (c) => vms.filter((v) => v.membership?.clusterId === c.clusterId && v.namespace === c.namespace);
    const columns = (c) => {
      const own = mineOf(c);
      const running = own.filter((v) => v.phase === 'Running').length;
      const hosts = new Set(own.map((v) => v.instance?.nodeName).filter(Boolean)).size;
      const errors = own.filter((v) => v.phaseState === 'FAILED').length;
      const gb = (own.reduce((a, v) => a + v.memoryBytes, 0) / 2 ** 30).toFixed(1);
      return [String(own.length), `${running}/${own.length}`, String(own.reduce((a, v) => a + v.vcpus, 0)), `${gb} GB`,
        String(hosts), errors ? `${errors} error` : 'OK'];
    };
    for (const c of all.filter((c) => mineOf(c).length > 0)) {
      const cells = page.locator('[data-testid=clusters] tbody tr:not(.spacer)')
        .filter({ has: page.getByRole('link', { name: c.name, exact: true }) }).locator('td');
      const shown = (await cells.allTextContents()).slice(5, 11).map((t) => t.trim());
      assert.deepEqual(shown, columns(c), c.name);
    }
    assert.ok(all.some((c) => columns(c)[5] !== 'OK'), 'some demo cluster has a VM in error');

    // The cluster with the most VMs, searched for by name: one card, its VMs as pills.
    const mine = (c) => vms.filter((v) => v.membership?.clusterId === c.clusterId);
    const cluster = [...all].sort((a, b) => mine(b).length - mine(a).length)[0];
    const own = mine(cluster);
    assert.ok(own.length > 0, 'some demo cluster has KubeVirt VMs');
    await page.goto(`${server.base}/clusters?q=${encodeURIComponent(cluster.name)}`);
    const card = page.getByTestId('cluster-card').filter({ has: page.getByRole('heading', { name: `⎈ ${cluster.name}`, exact: true }) });
    await eventually('the card lists every VM of the cluster', async () => (await card.locator('.pill').count()) === own.length);
    const running = own.filter((v) => v.phase === 'Running').length;
    const hosts = new Set(own.map((v) => v.instance?.nodeName).filter(Boolean)).size;
    const totals = (await card.getByTestId('cluster-card-totals').textContent()).trim();
    assert.ok(totals.startsWith(`${running}/${own.length} running · ${own.reduce((a, v) => a + v.vcpus, 0)} vCPU · `), totals);
    assert.ok(totals.endsWith(` · ${hosts} ${hosts === 1 ? 'host' : 'hosts'}`), totals);
    const pill = card.locator('.pill').first();
    assert.match(await pill.getAttribute('title'), new RegExp(`^${cluster.namespace}/`));
    await shot(page, 'cluster-cards');
    await pill.click();
    await eventually('a pill opens its VM', async () => (await page.getByTestId('object-kind').textContent().catch(() => '')) === 'VirtualMachine');
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("a blocked cluster's page names its blocker, and the link opens it", async () => {
    const { page, context, problems } = await openPage(server.base);
    const all = (await gql(server.base, `{ clusters(first: 500) { nodes { name namespace diagnosis { failed
      blockers { kind name terminal object { id } } } } } }`)).clusters.nodes;
    const blocked = all.find((c) => c.diagnosis.failed && c.diagnosis.blockers.some((b) => b.object));
    assert.ok(blocked, 'the demo has a failed cluster with an existing blocker');
    const blocker = blocked.diagnosis.blockers.find((b) => b.object);
    await page.goto(`${server.base}/clusters/${blocked.namespace}/${blocked.name}`);
    const link = page.getByTestId('blockers').getByRole('link', { name: `${blocker.kind} ${blocker.name}`, exact: true });
    await eventually('the page names the blocker', async () => (await link.count()) === 1);
    await shot(page, 'cluster');
    // Its storage and etcd backups, as the API lists them (or "none").
    const extra = (await gql(server.base, `{ clusters(filter: { namespace: "${blocked.namespace}", search: "${blocked.name}" }) {
      nodes { name clusterStorages { name } etcdBackups { name } } } }`)).clusters.nodes.find((c) => c.name === blocked.name);
    for (const [testid, list] of [['storage', extra.clusterStorages], ['backups', extra.etcdBackups]]) {
      const shown = (await page.getByTestId(testid).locator('li').allTextContents()).map((t) => t.split(' (')[0]);
      assert.deepEqual(shown, list.length ? list.map((x) => x.name) : ['none'], testid);
    }
    await link.click();
    await eventually('the link opens the blocking object', async () => (await page.getByTestId('object-name').textContent().catch(() => '')) === blocker.name);
    assert.equal(await page.getByTestId('object-kind').textContent(), blocker.kind);
    await shot(page, 'object');
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('clicking a host in the allocation chart opens it', async () => {
    const { page, context, problems } = await openPage(server.base);
    await page.goto(`${server.base}/`);
    const bar = page.locator('[data-testid=chart-cpu] .bar').first();
    await eventually('the chart is drawn', async () => (await bar.count()) === 1);
    const label = await bar.getAttribute('aria-label');
    const host = label.split(':')[0];
    await bar.click();
    await eventually('the host is shown', async () => page.url().includes('/hosts')
      && (await page.getByTestId('host-card').count()) === 1
      && (await page.getByTestId('host-card').locator('h2').textContent()) === host);
    await page.goto(`${server.base}/hosts`);
    await eventually('every host has a card', async () => (await page.getByTestId('host-card').count()) > 1);
    await shot(page, 'hosts');
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('the topology shows every host by health; hover shows details, click and Enter open it', async () => {
    const { page, context, problems } = await openPage(server.base);
    const hosts = (await gql(server.base, '{ hosts(first: 500) { nodes { name readiness acceptsVms pressures vms { name membership { clusterId } } } } }')).hosts.nodes;
    await page.goto(`${server.base}/topology`);
    const drawn = page.getByTestId('topology-host');
    await eventually('every host is drawn', async () => (await drawn.count()) === hosts.length);
    // The datacenter's box counts the clusters whose VMs run on its hosts, as the old page did.
    const clusters = new Set(hosts.flatMap((h) => h.vms.map((v) => v.membership?.clusterId).filter(Boolean))).size;
    assert.ok(clusters > 1);
    assert.equal(await page.getByTestId('topology-dc-clusters').textContent(), `${clusters} clusters`);
    // Health colours: not Ready red, Ready but not taking VMs (or under pressure) amber, else green.
    for (const h of hosts) {
      const want = h.readiness !== 'READY' ? 'err' : (!h.acceptsVms || h.pressures.length ? 'warn' : 'ok');
      const row = page.locator(`[data-testid=topology-host][data-host="${h.name}"]`);
      assert.match(await row.getAttribute('class'), new RegExp(`\\b${want}\\b`), h.name);
      assert.equal(await row.locator('g.vm').count(), Math.min(h.vms.length, 56), `${h.name}: its VMs`);
    }
    assert.ok(hosts.some((h) => h.readiness !== 'READY'), 'the demo has a host that is not Ready');
    assert.ok(hosts.some((h) => h.readiness === 'READY' && !h.acceptsVms), 'the demo has a cordoned host');
    await shot(page, 'topology');
    const target = hosts.find((h) => h.readiness !== 'READY');
    const link = page.locator(`[data-testid=topology-host][data-host="${target.name}"] > [role=link]`);
    await link.hover();
    await eventually('hover shows the details', async () => (await page.getByTestId('topology-details').locator('h2').textContent().catch(() => '')) === target.name);
    await link.click();
    const opened = async () => page.url().endsWith(`/hosts?q=${target.name}`)
      && (await page.getByTestId('host-card').locator('h2').allTextContents()).includes(target.name);
    await eventually('click opens the host', opened);
    // The keyboard does the same: focus the host, Enter.
    await page.goto(`${server.base}/topology`);
    await eventually('drawn again', async () => (await link.count()) === 1);
    await link.focus();
    await page.keyboard.press('Enter');
    await eventually('Enter opens the host', opened);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('machines filter by cluster and role from the URL, and sort', async () => {
    const { page, context, problems } = await openPage(server.base);
    const worker = (await gql(server.base, '{ machines(first: 500) { nodes { clusterId role } } }'))
      .machines.nodes.find((m) => m.role === 'WORKER');
    const cluster = { clusterId: worker.clusterId };
    const machines = (await gql(server.base, `{ machines(first: 500, filter: {labelSelector: "vitistack.io/clusterid=${cluster.clusterId}"}) { nodes { name role } } }`)).machines.nodes;
    const workers = machines.filter((m) => m.role === 'WORKER').map((m) => m.name).sort();
    assert.ok(workers.length > 0, 'the cluster has workers');
    await page.goto(`${server.base}/machines?cluster=${cluster.clusterId}&role=WORKER&sort=-name`);
    const names = async () => page.locator('[data-testid=machines] tbody tr:not(.spacer) td:first-child').allTextContents();
    await eventually('the cluster\'s workers, by name descending', async () => JSON.stringify(await names()) === JSON.stringify([...workers].reverse()));
    assert.equal(await page.getByTestId('filter-role').inputValue(), 'WORKER');
    await page.locator('[data-testid=machines] th button').first().click();
    await eventually('a click on the header sorts ascending', async () => page.url().includes('sort=name') && JSON.stringify(await names()) === JSON.stringify(workers));
    await shot(page, 'machines');
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('search: "/" opens it, an address finds its Machine, Enter opens the first hit, a click opens a cluster\'s page', async () => {
    const { page, context, problems } = await openPage(server.base);
    const machine = (await gql(server.base, '{ machines(first: 100, filter: {phase: ["Running"]}) { nodes { name ipAddresses } } }'))
      .machines.nodes.find((m) => m.ipAddresses.length > 0);
    const ip = machine.ipAddresses[0];
    const api = (await gql(server.base, `{ search(text: "${ip}", first: 8) { nodes { node { kind name } } } }`)).search.nodes;
    assert.ok(api.some((e) => e.node.kind === 'Machine' && e.node.name === machine.name), 'the API finds the Machine by its address');
    await page.goto(`${server.base}/hosts`);
    await page.getByTestId('search-open').waitFor();
    await page.keyboard.press('/');
    await eventually('"/" opens the search field, focused', async () => page.evaluate(() => document.activeElement?.dataset?.testid === 'search'));
    await page.keyboard.type(ip);
    const hits = page.getByTestId('search-hit');
    const shown = async () => (await hits.allTextContents()).map((t) => t.replace(/\s+/g, ' ').trim());
    await eventually('the hits are what the API answers, in its order', async () => {
      const got = await shown();
      return got.length === api.length && api.every((e, i) => got[i].startsWith(`${e.node.kind}${e.node.name}`));
    });
    assert.ok((await shown())[0].includes(`IP ${ip}`), 'the hit says what matched');
    await page.keyboard.press('Enter');
    await eventually('Enter opens the first hit\'s page', async () => page.url().includes('/objects/')
      && (await page.getByTestId('object-name').textContent().catch(() => '')) === api[0].node.name
      && (await page.getByTestId('object-kind').textContent().catch(() => '')) === api[0].node.kind);
    const cluster = (await gql(server.base, '{ clusters(first: 1) { nodes { name namespace } } }')).clusters.nodes[0];
    await page.getByTestId('search-open').click();
    await page.getByTestId('search').fill(cluster.name);
    const clusterHit = hits.filter({ hasText: 'KubernetesCluster' }).first();
    await eventually('the cluster is among the hits', async () => (await clusterHit.count()) > 0);
    await clusterHit.click();
    await eventually('a click opens the cluster\'s page', async () => page.url().endsWith(`/clusters/${cluster.namespace}/${cluster.name}`));
    await page.getByTestId('search-open').click();
    await page.getByTestId('search').fill('no-such-object-anywhere');
    await eventually('the box says nothing matches', async () => page.getByTestId('search-none').isVisible());
    await shot(page, 'search');
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('VMs filter by host, and networks by phase, from the URL', async () => {
    const { page, context, problems } = await openPage(server.base);
    const vmis = (await gql(server.base, '{ virtualMachineInstances(first: 500) { nodes { name nodeName } } }')).virtualMachineInstances.nodes;
    const host = vmis.find((v) => v.nodeName).nodeName;
    const onHost = vmis.filter((v) => v.nodeName === host).map((v) => v.name).sort();
    await page.goto(`${server.base}/vms?host=${host}`);
    const cells = (id) => page.locator(`[data-testid=${id}] tbody tr:not(.spacer) td:first-child`).allTextContents();
    await eventually('the VMs on that host', async () => JSON.stringify((await cells('vms')).sort()) === JSON.stringify(onHost));
    await shot(page, 'vms');
    const networks = (await gql(server.base, '{ networkNamespaces(first: 500) { nodes { name phase } } }')).networkNamespaces.nodes;
    const phase = networks.find((n) => n.phase)?.phase;
    assert.ok(phase, 'some network has a phase');
    const want = networks.filter((n) => n.phase === phase).map((n) => n.name).sort();
    await page.goto(`${server.base}/networks?phase=${phase}`);
    await eventually(`the networks in phase ${phase}`, async () => JSON.stringify((await cells('networks')).sort()) === JSON.stringify(want));
    await shot(page, 'networks');
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("the applications: each one's health as the API says, a filter from the URL, and one application's pods, revisions and links", async () => {
    const { page, context, problems } = await openPage(server.base);
    const apps = (await gql(server.base, `{ applications(first: 100) { edges { node { namespace name health readyPods pods { name } } } }
      infrastructure { applications { total healthy } } }`));
    const nodes = apps.applications.edges.map((e) => e.node);
    assert.ok(nodes.length >= 4, 'the demo has its applications');
    // The overview's tile.
    await page.goto(`${server.base}/`);
    const counts = apps.infrastructure.applications;
    await eventually('the applications tile', async () => (await page.getByTestId('tile-applications').textContent()) === `${counts.healthy}/${counts.total}`);
    // The list: every application, with its health and ready pods.
    await page.goto(`${server.base}/applications`);
    const rows = page.locator('[data-testid=applications] tbody tr');
    await eventually('every application listed', async () => (await rows.count()) === nodes.length);
    for (const a of nodes) {
      const row = page.getByTestId(`app-${a.namespace}-${a.name}`);
      assert.equal(await row.getByTestId('health').textContent(), a.health.toLowerCase().replaceAll('_', ' '));
      assert.equal(await row.locator('td').nth(5).textContent(), `${a.readyPods}/${a.pods.length}`);
    }
    assert.equal(await page.getByTestId('app-kube-system-metrics-server').count(), 0, 'a denied namespace is not listed');
    await shot(page, 'applications');
    // A deep link with a filter: the degraded one only; its link opens it.
    await page.goto(`${server.base}/applications?health=DEGRADED`);
    await eventually('only the degraded one', async () => (await rows.count()) === nodes.filter((a) => a.health === 'DEGRADED').length);
    assert.equal(await page.getByTestId('filter-health').inputValue(), 'DEGRADED');
    await page.getByRole('link', { name: 'keycloak' }).click();
    await eventually('the application page', async () => (await page.getByTestId('app-title').textContent()).includes('keycloak'));
    assert.equal(new URL(page.url()).pathname, '/applications/identity/keycloak');
    const detail = (await gql(server.base, `{ application(namespace: "identity", name: "keycloak") { reasons revision
      pods { name restarts } revisions { revision } ingresses { hosts } } }`)).application;
    const looping = detail.pods.find((p) => p.name === 'keycloak-1');
    await eventually('the crash-looping pod and its restarts', async () =>
      (await page.getByTestId('pod-keycloak-1').getByTestId('restarts').textContent()) === String(looping.restarts));
    assert.equal(await page.getByTestId('reasons').textContent(), detail.reasons.join(''));
    assert.equal(await page.locator('[data-testid=revisions] li').count(), detail.revisions.length);
    assert.equal(await page.getByTestId('ingress').getAttribute('href'), `https://${detail.ingresses[0].hosts[0]}/`);
    await shot(page, 'application');
    // Mid-upgrade: the pending revision is the live one on the timeline.
    await page.goto(`${server.base}/applications/monitoring/grafana`);
    await eventually('the upgrade under way', async () => (await page.getByTestId('health').textContent()) === 'pending upgrade');
    assert.ok((await page.getByTestId('rev-5').getAttribute('class')).includes('live'));
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('every view passes an accessibility scan (no serious or critical violation)', async () => {
    const cluster = (await gql(server.base, '{ clusters(first: 1) { nodes { name namespace } } }')).clusters.nodes[0];
    const object = (await gql(server.base, '{ machines(first: 1) { nodes { id } } }')).machines.nodes[0];
    const views = {
      overview: ['/', '[data-testid=chart-cpu]'],
      datacenters: ['/datacenters', '[data-testid=datacenters] article'],
      clusters: ['/clusters', '[data-testid=clusters] tbody tr:not(.spacer)'],
      'cluster cards': [`/clusters?q=${encodeURIComponent(cluster.name)}`, '[data-testid=cluster-card] footer'],
      cluster: [`/clusters/${cluster.namespace}/${cluster.name}`, '[data-testid=pipeline] li'],
      hosts: ['/hosts', '[data-testid=host-card]'],
      topology: ['/topology', '[data-testid=topology-host]'],
      machines: ['/machines', '[data-testid=machines] tbody tr:not(.spacer)'],
      networks: ['/networks', '[data-testid=networks] tbody tr:not(.spacer)'],
      vms: ['/vms', '[data-testid=vms] tbody tr:not(.spacer)'],
      events: ['/events', 'main table, main p.empty:has-text("No events")'],
      object: [`/objects/${encodeURIComponent(object.id)}`, '[data-testid=object-name]'],
      applications: ['/applications', '[data-testid=applications] tbody tr'],
      application: ['/applications/identity/keycloak', '[data-testid=pods] tbody tr'],
    };
    const found = {};
    for (const theme of ['dark', 'light']) {
      for (const [name, [path, ready]] of Object.entries(views)) {
        // Each view in a context of its own: its first request opens a new connection, so a
        // listener that stopped accepting cannot hide behind a kept-alive one.
        const { page, context } = await openPage(server.base, { bypassCSP: true });
        await context.addInitScript((t) => localStorage.setItem('theme', t), theme);
        await page.goto(`${server.base}${path}`);
        await eventually(`${name} renders`, async () => (await page.locator(ready).count()) > 0);
        await page.addScriptTag({ path: axePath });
        const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
        const bad = result.violations.filter((v) => ['serious', 'critical'].includes(v.impact));
        if (bad.length) found[`${name} (${theme})`] = bad.map((v) => `${v.id}: ${v.nodes.length} × ${v.nodes[0]?.target}`);
        await context.close();
      }
    }
    assert.deepEqual(found, {});
  });
});

describe('a fleet with more Machines than a page holds', () => {
  let server;
  before(async () => { server = await startServer(['--demo'], { SIMULATE: 'false', DEMO_CLUSTERS: '40' }); });
  after(() => server?.stop());

  test('a list sorted from the URL shows the first of all of them in that order, not of the first page', async () => {
    const { page, context, problems } = await openPage(server.base);
    const all = (await gql(server.base, '{ machines(first: 500) { totalCount } }')).machines.totalCount;
    assert.ok(all > 500, `more Machines (${all}) than the page's 500`);
    const last = async (field, direction) => (await gql(server.base,
      `{ machines(first: 3, sort: {field: ${field}, direction: ${direction}}) { nodes { name } } }`)).machines.nodes.map((m) => m.name);
    const names = async () => page.locator('[data-testid=machines] tbody tr:not(.spacer) td:first-child').allTextContents();
    await page.goto(`${server.base}/machines?sort=-name`);
    const byNameDesc = await last('NAME', 'DESC');
    await eventually('the last names of all Machines first', async () => JSON.stringify((await names()).slice(0, 3)) === JSON.stringify(byNameDesc));
    assert.match(await page.getByTestId('machine-count').textContent(), new RegExp(`^500 of ${all} machines`));
    await page.locator('[data-testid=machines] th button').first().click();
    const byName = await last('NAME', 'ASC');
    await eventually('a click on the header: the first names of all', async () => page.url().includes('sort=name') && JSON.stringify((await names()).slice(0, 3)) === JSON.stringify(byName));
    assert.deepEqual(problems, []);
    await context.close();
  });
});

describe('a server that knows no host yet', () => {
  let server;
  before(async () => { server = await startServer([]); });
  after(() => server?.stop());

  test('the topology says no datacenter reports instead of drawing an empty one', async () => {
    const { page, context, problems } = await openPage(server.base);
    await page.goto(`${server.base}/topology`);
    const empty = page.getByTestId('topology-empty');
    await eventually('the empty state', async () => (await empty.count()) === 1);
    assert.match(await empty.textContent(), /^No datacenters reporting/);
    assert.equal(await page.getByTestId('topology-dc').count(), 0);
    assert.deepEqual(problems, []);
    await context.close();
  });
});

describe('a server that needs a key (no anonymous read)', () => {
  const VIEWER = 'viewer-key-for-the-dashboard-0123';
  const TENANT = 'tenant-key-for-the-dashboard-0123';
  let server;
  let dir;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vitistack-keys-'));
    writeFileSync(join(dir, 'keys'), `ci viewer ${VIEWER}\nteam viewer ${TENANT} namespaces=team-1\n`);
    server = await startServer(['--demo'], { SIMULATE: 'false', ANONYMOUS_READ_FROM: '', API_KEYS_FILE: join(dir, 'keys') });
  });
  after(async () => { await server?.stop(); rmSync(dir, { recursive: true, force: true }); });

  test('the page asks for a key, refuses a wrong one, keeps a good one for the tab only, and signs out', async () => {
    const { page, context, problems } = await openPage(server.base);
    await page.goto(`${server.base}/`);
    const form = page.getByRole('dialog', { name: 'Sign in' });
    await eventually('the sign-in form shows', () => form.isVisible());
    await shot(page, 'signin');
    await page.getByTestId('key').fill('not-the-key-0123456789');
    await form.getByRole('button', { name: 'Sign in' }).click();
    await eventually('a wrong key is refused', async () => (await form.isVisible())
      && (await form.textContent()).includes('refused this key'));

    await page.getByTestId('key').fill(VIEWER);
    await form.getByRole('button', { name: 'Sign in' }).click();
    await eventually('the badge says Live', async () => (await page.getByTestId('connection').textContent()) === 'Live');
    await eventually('the header names the principal', async () => (await page.getByTestId('account').textContent()) === 'key:ci · viewer');
    assert.equal(await form.count(), 0);
    await eventually('the overview shows the fleet', async () => {
      const hosts = await page.locator('[data-testid=chart-cpu] .bar').count();
      return hosts > 0;
    });
    // Kept for this tab (sessionStorage), never in localStorage.
    assert.equal(await page.evaluate(() => sessionStorage.getItem('vitistack-key')), VIEWER);
    assert.ok(!(await page.evaluate(() => JSON.stringify(localStorage))).includes(VIEWER));
    // Another tab (another context: no session) is asked again.
    const other = await openPage(server.base);
    await other.page.goto(`${server.base}/`);
    await eventually('another tab is asked for a key', () => other.page.getByRole('dialog', { name: 'Sign in' }).isVisible());
    await other.context.close();

    await page.getByRole('button', { name: 'Sign out' }).click();
    await eventually('signing out asks for a key again', () => form.isVisible());
    assert.equal(await page.evaluate(() => sessionStorage.getItem('vitistack-key')), null);
    // The only problems are the refusals the browser logs (401s and the refused socket).
    assert.deepEqual(problems.filter((p) => !/401|4403|WebSocket/.test(p)), []);
    await context.close();
  });

  test('a key limited to a namespace shows it in the header and lists only that namespace', async () => {
    const all = (await gql(server.base, '{ clusters(first: 500) { nodes { name namespace } } }', {}, VIEWER)).clusters.nodes;
    const mine = all.filter((c) => c.namespace === 'team-1').map((c) => c.name).sort();
    assert.ok(mine.length > 0 && mine.length < all.length, 'the demo has team-1 and other teams');
    const { page, context, problems } = await openPage(server.base);
    await page.goto(`${server.base}/clusters`);
    const form = page.getByRole('dialog', { name: 'Sign in' });
    await eventually('the sign-in form shows', () => form.isVisible());
    await page.getByTestId('key').fill(TENANT);
    await form.getByRole('button', { name: 'Sign in' }).click();
    await eventually('the header names the key and its namespace', async () => (await page.getByTestId('account').textContent()) === 'key:team · viewer · team-1');
    const names = async () => (await page.locator('[data-testid=clusters] tbody tr:not(.spacer) td:first-child').allTextContents()).sort();
    await eventually('the list holds the namespace\'s clusters only', async () => JSON.stringify(await names()) === JSON.stringify(mine));
    await shot(page, 'tenant');
    assert.deepEqual(problems.filter((p) => !/401|4403|WebSocket/.test(p)), []);
    await context.close();
  });

  test('reading anonymously from a trusted network, the header offers a sign-in for more', async () => {
    const open = await startServer(['--demo'], { SIMULATE: 'false', ANONYMOUS_READ_FROM: '127.0.0.0/8', API_KEYS_FILE: join(dir, 'keys') });
    try {
      const { page, context, problems } = await openPage(open.base);
      await page.goto(`${open.base}/`);
      await eventually('the header says anonymous', async () => (await page.getByTestId('account').textContent()) === 'anonymous · viewer');
      await page.getByRole('button', { name: 'Sign in' }).click();
      const form = page.getByRole('dialog', { name: 'Sign in' });
      assert.ok((await form.textContent()).includes('to do more than read'));
      await page.getByTestId('key').fill(VIEWER);
      await form.getByRole('button', { name: 'Sign in' }).click();
      await eventually('the header names the key', async () => (await page.getByTestId('account').textContent()) === 'key:ci · viewer');
      await shot(page, 'signed-in');
      assert.deepEqual(problems, []);
      await context.close();
    } finally {
      await open.stop();
    }
  });
});

describe('an operator changes a cluster from its page', () => {
  const VIEWER = 'viewer-key-for-the-dashboard-0123';
  const OPERATOR = 'operator-key-for-the-dashboard-0123';
  let server;
  let dir;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vitistack-keys-'));
    writeFileSync(join(dir, 'keys'), `ci viewer ${VIEWER}\nops operator ${OPERATOR}\n`);
    server = await startServer(['--demo'], { SIMULATE: 'false', ANONYMOUS_READ_FROM: '', API_KEYS_FILE: join(dir, 'keys') });
  });
  after(async () => { await server?.stop(); rmSync(dir, { recursive: true, force: true }); });

  async function signIn(page, key) {
    const form = page.getByRole('dialog', { name: 'Sign in' });
    await eventually('the sign-in form shows', () => form.isVisible());
    await page.getByTestId('key').fill(key);
    await form.getByRole('button', { name: 'Sign in' }).click();
    await eventually('signed in', async () => (await page.getByTestId('connection').textContent()) === 'Live');
  }

  test('a viewer sees no change panel; an operator previews a scale with its capacity verdict, applies it, pauses, requests an upgrade and deletes', async () => {
    // A Ready cluster: its Machines exist, so a bigger pool adds exactly one.
    const all = (await gql(server.base, '{ clusters(first: 100, filter: {phase: ["Ready"]}) { nodes { namespace name nodePools { name replicas } } } }', {}, VIEWER)).clusters.nodes;
    const c = all.find((x) => x.nodePools.length > 0);
    assert.ok(c, 'the demo has a Ready cluster with a pool');
    const pool = c.nodePools[0];
    const url = `${server.base}/clusters/${c.namespace}/${c.name}`;

    // The change panel's code is a module of its own, fetched only for someone who may change.
    const lazyModules = (page) => {
      const fetched = [];
      page.on('request', (r) => { if (/\/assets\/lazy-[0-9a-f]+\.wasm$/.test(r.url())) fetched.push(r.url()); });
      return fetched;
    };
    const viewer = await openPage(server.base);
    const viewerFetched = lazyModules(viewer.page);
    await viewer.page.goto(url);
    await signIn(viewer.page, VIEWER);
    await eventually('the cluster page shows its machines', async () => (await viewer.page.getByTestId('machines').count()) === 1);
    await eventually('the header names the viewer', async () => (await viewer.page.getByTestId('account').textContent()) === 'key:ci · viewer');
    assert.equal(await viewer.page.getByTestId('operate').count(), 0);
    assert.deepEqual(viewerFetched, [], 'a viewer never downloads the change panel');
    await viewer.context.close();

    const { page, context, problems } = await openPage(server.base);
    const operatorFetched = lazyModules(page);
    await page.goto(url);
    await signIn(page, OPERATOR);
    const panel = page.getByTestId('operate');
    await eventually('the change panel shows', () => panel.isVisible());
    assert.ok(operatorFetched.length > 0, 'the panel was loaded on demand');
    const input = page.getByTestId(`pool-${pool.name}`);
    assert.equal(await input.inputValue(), String(pool.replicas));
    await input.fill(String(pool.replicas + 1));
    await page.getByTestId('preview').click();
    const plan = page.getByTestId('plan');
    await eventually('the preview shows', () => plan.isVisible());
    // The preview is the server's dry run: the same verdict and the one new machine.
    const dry = (await gql(server.base, `mutation($ns: String!, $n: String!, $p: String!, $r: Int!) {
      scaleCluster(namespace: $ns, name: $n, nodePools: [{name: $p, replicas: $r}], dryRun: true) {
        plan { capacity { verdict } machines { name exists } } } }`,
    { ns: c.namespace, n: c.name, p: pool.name, r: pool.replicas + 1 }, OPERATOR)).scaleCluster.plan;
    const added = dry.machines.filter((m) => !m.exists).map((m) => m.name);
    assert.equal(added.length, 1);
    assert.deepEqual(await page.getByTestId('added').locator('tbody td:first-child').allTextContents(), added);
    assert.equal(await page.getByTestId('removed').textContent(), 'No machine is removed.');
    const verdict = await page.getByTestId('verdict').textContent();
    assert.equal(verdict, { FITS: 'Fits', BELOW_REDUNDANCY: 'Fits, too few hosts could fail', DOES_NOT_FIT: 'Does not fit', UNKNOWN: 'Capacity unknown' }[dry.capacity.verdict]);
    await plan.scrollIntoViewIfNeeded();
    await shot(page, 'operate-preview');
    if (verdict !== 'Fits') await page.getByTestId('allow').check();
    await page.getByTestId('apply').click();
    await eventually('the change is applied', async () => (await page.getByTestId('operate-message').textContent().catch(() => '')).startsWith('Applied'));
    const now = (await gql(server.base, `{ cluster(namespace: "${c.namespace}", name: "${c.name}") { nodePools { name replicas } } }`, {}, VIEWER)).cluster;
    assert.equal(now.nodePools.find((p) => p.name === pool.name).replicas, pool.replicas + 1);
    await eventually('the page shows the new size', async () => (await page.locator('ul.pools').textContent()).includes(`/${pool.replicas + 1} machines`));

    await page.getByTestId('pause').click();
    await eventually('the page says the cluster is paused', async () => (await page.getByTestId('pause').textContent()) === 'Resume reconciliation');
    await panel.scrollIntoViewIfNeeded();
    await shot(page, 'operate-paused');
    await page.getByTestId('pause').click();
    await eventually('and resumed', async () => (await page.getByTestId('pause').textContent()) === 'Pause reconciliation');

    await page.getByTestId('kubernetes-target').fill('v1.34.1');
    await page.getByTestId('upgrade').click();
    await eventually('the upgrade is requested', async () => (await page.getByTestId('operate-message').textContent().catch(() => '')).startsWith('Upgrade requested'));
    const annotations = (await gql(server.base, `{ cluster(namespace: "${c.namespace}", name: "${c.name}") { annotations { key value } } }`, {}, VIEWER)).cluster.annotations;
    assert.ok(annotations.some((a) => a.key === 'upgrade.vitistack.io/kubernetes-target' && a.value === 'v1.34.1'), JSON.stringify(annotations));

    // Deleting needs the name typed.
    assert.ok(await page.getByTestId('delete').isDisabled());
    await page.getByTestId('confirm').fill(`${c.name}-not`);
    assert.ok(await page.getByTestId('delete').isDisabled());
    await page.getByTestId('confirm').fill(c.name);
    await page.getByTestId('delete').click();
    await eventually('the page says the cluster is gone', async () => (await page.getByText('This cluster was deleted.').count()) === 1);
    assert.equal((await gql(server.base, `{ cluster(namespace: "${c.namespace}", name: "${c.name}") { name } }`, {}, VIEWER)).cluster, null);
    assert.deepEqual(problems.filter((p) => !/401|4403|WebSocket/.test(p)), []);
    await context.close();
  });

  test('an operator previews a new cluster (its machines, YAML, verdict, refusals) and creates it', async () => {
    const g = await gql(server.base, `{ networkNamespaces(first: 1) { nodes { namespace name } }
      machineClasses(first: 50) { nodes { name enabled } } }`, {}, VIEWER);
    const nn = g.networkNamespaces.nodes[0];
    const cls = g.machineClasses.nodes.find((m) => m.enabled).name;
    const { page, context, problems } = await openPage(server.base);
    await page.goto(`${server.base}/clusters`);
    await signIn(page, OPERATOR);
    await page.getByTestId('new-cluster').click();
    const fill = async (v, text) => page.getByTestId(`new-${v}`).fill(text);
    for (const [v, text] of [['namespace', nn.namespace], ['name', 'made-in-browser'], ['nn', nn.name],
      ['datacenter', 'test-south-az1'], ['region', 'south'], ['zone', 'az1'], ['project', 'p'],
      ['workspace', 'w'], ['workorder', 'wo-1'], ['environment', 'dev'], ['version', '1.33.1'],
      ['cp_class', cls], ['pool', 'workers'], ['pool_class', cls]]) {
      await fill(v, text);
    }
    // A name the API server would refuse, and an empty required field: listed by field, no
    // Create button. (An even control plane the browser refuses itself: the field steps by 2.)
    await fill('name', 'Made_In_Browser');
    await fill('region', '');
    await page.getByTestId('new-preview').click();
    await eventually('the refusal is listed by field', async () => {
      const said = await page.getByTestId('new-message').textContent({ timeout: 100 }).catch(() => null);
      if (said) return { mismatch: `the preview failed: ${said}` };
      const listed = await page.getByTestId('new-problems').textContent({ timeout: 100 });
      return listed.includes('metadata.name') && listed.includes('region');
    });
    assert.equal(await page.getByTestId('new-create').count(), 0);
    await fill('name', 'made-in-browser');
    await fill('region', 'south');
    await page.getByTestId('new-preview').click();
    await eventually('the preview lists the machines', async () => (await page.getByTestId('new-problems').locator('li').count()) === 0
      && (await page.getByTestId('new-machines').locator('tbody tr').count()) === 5);
    assert.deepEqual(await page.getByTestId('new-machines').locator('tbody td:first-child').allTextContents(),
      ['made-in-browser-ctp0', 'made-in-browser-ctp1', 'made-in-browser-ctp2', 'made-in-browser-wrk0', 'made-in-browser-wrk1']);
    assert.ok((await page.getByTestId('new-yaml').textContent()).includes('clusterId: made-in-browser'));
    await page.getByTestId('new-plan').scrollIntoViewIfNeeded();
    await shot(page, 'new-cluster');
    if ((await page.getByTestId('new-verdict').textContent()) !== 'Fits') await page.getByLabel('Create it even if it does not fit').check();
    await page.getByTestId('new-create').click();
    await eventually('the new cluster page opens', async () => page.url().endsWith(`/clusters/${nn.namespace}/made-in-browser`));
    const made = (await gql(server.base, `{ cluster(namespace: "${nn.namespace}", name: "made-in-browser") { controlPlane { replicas } nodePools { name replicas } } }`, {}, VIEWER)).cluster;
    assert.deepEqual(made, { controlPlane: { replicas: 3 }, nodePools: [{ name: 'workers', replicas: 2 }] });
    // The event log says who made it.
    // (The event log is written behind the store: the page is opened once the row is there.)
    await eventually('the event is logged', async () => (await gql(server.base,
      '{ events(filter: {name: "made-in-browser"}, first: 5) { nodes { actor } } }', {}, VIEWER)).events.nodes.length > 0);
    await page.goto(`${server.base}/events?by=key:ops&name=made-in-browser`);
    await eventually('the event names its maker', async () => {
      const rows = page.getByTestId('events').locator('tbody tr');
      if ((await rows.count()) === 0) {
        const api = (await gql(server.base, '{ events(filter: {name: "made-in-browser"}, first: 5) { nodes { actor type } } }', {}, VIEWER)).events.nodes;
        return { mismatch: `no row shown; the API has ${JSON.stringify(api)}; the page says ${await page.locator('main').textContent().catch(() => '?')}` };
      }
      return (await rows.first().textContent()).includes('key:ops');
    });
    assert.deepEqual(problems.filter((p) => !/401|4403|WebSocket/.test(p)), []);
    await context.close();
  });
});

describe('a live fleet (the simulator on)', () => {
  let server;
  before(async () => {
    server = await startServer(['--demo'], { SIMULATE: 'true', SIMULATE_STEPS_PER_SECOND: '2' });
  });
  after(() => server?.stop());

  test('the events page lists the log newest first and filters it from the URL', async () => {
    const { page, context, problems } = await openPage(server.base);
    const newestMachine = async () => (await gql(server.base, '{ events(first: 1, filter: {kind: "Machine"}) { nodes { sequence name type } } }')).events.nodes[0];
    await eventually('the simulator wrote Machine events', newestMachine);
    await page.goto(`${server.base}/events?kind=Machine`);
    const first = page.locator('[data-testid=events] tbody tr').first();
    await eventually('the newest Machine event is first', async () => {
      const before = await newestMachine();
      const shown = [await first.locator('td').nth(2).textContent().catch(() => ''), await first.locator('td').nth(1).textContent().catch(() => '')];
      const after = await newestMachine();
      return before.sequence === after.sequence && shown[0].includes(before.name) && shown[1] === before.type ? shown : { mismatch: { before, shown } };
    });
    const kinds = await page.locator('[data-testid=events] tbody tr td:nth-child(3)').allTextContents();
    assert.ok(kinds.every((k) => k.startsWith('Machine ')), 'only Machines');
    await shot(page, 'events');
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('an application page follows applicationChanged: the crash-looping pod\'s restarts rise without a reload, and it links to its cluster', async () => {
    const { page, context, problems } = await openPage(server.base);
    const changes = [];
    page.on('websocket', (ws) => ws.on('framereceived', (f) => {
      if (typeof f.payload === 'string' && f.payload.includes('applicationChanged')) changes.push(f.payload);
    }));
    await page.goto(`${server.base}/applications/identity/keycloak`);
    const restarts = page.getByTestId('pod-keycloak-1').getByTestId('restarts');
    const first = Number(await eventually('the restarts shown', async () => (await restarts.textContent().catch(() => '')) || false));
    await page.evaluate(() => { window.notReloaded = true; });
    // The simulator restarts keycloak-1 every step: the page shows a higher count, told by the
    // subscription (the page reads nothing on a timer).
    const later = await eventually('a later restart count', async () => {
      const n = Number(await restarts.textContent());
      return n > first ? n : false;
    });
    assert.ok(changes.length > 0, 'applicationChanged events reached the page');
    assert.equal(await page.evaluate(() => window.notReloaded), true, 'the page was not reloaded');
    const api = (await gql(server.base, '{ application(namespace: "identity", name: "keycloak") { pods { name restarts } kubernetesCluster { name namespace } } }')).application;
    assert.ok(api.pods.find((p) => p.name === 'keycloak-1').restarts >= later);
    // The cluster it runs on, linked.
    const link = page.getByTestId('app-cluster').getByRole('link');
    assert.equal(await link.textContent(), api.kubernetesCluster.name);
    await link.click();
    await eventually('the cluster page', async () => new URL(page.url()).pathname === `/clusters/${api.kubernetesCluster.namespace}/${api.kubernetesCluster.name}`);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('a new answer redraws only the rows that changed: the others keep their element (and what the user did to it)', async () => {
    const { page, context, problems } = await openPage(server.base);
    await page.goto(`${server.base}/machines`);
    const rows = page.locator('[data-testid=machines] tbody tr:not(.spacer)');
    await eventually('the machines are listed', async () => (await rows.count()) > 10);
    // From here on the list never leaves the page (a refetch once replaced the page with
    // "Loading…" and drew every row anew): count each time it is gone.
    await page.evaluate(() => {
      window.listGone = 0;
      const listed = () => document.querySelector('[data-testid=machines] tbody tr:not(.spacer)') !== null;
      new MutationObserver(() => { if (!listed()) window.listGone += 1; })
        .observe(document.body, { childList: true, subtree: true });
    });
    // Mark every row element with its text as it is now, as a user's selection would be kept.
    const mark = () => rows.evaluateAll((trs) => trs.map((tr) => { tr.dataset.seen = tr.textContent; return tr.textContent; }));
    let marked = await mark();
    // The simulator moves Machines through their phases: wait until a listed machine changed
    // while others still show what they showed (on a slow machine the simulator may have moved
    // every listed one by the time the page is read again: then wait for the next answer).
    // The simulator alone decides when a listed machine changes (it played 120 steps without
    // changing one in view once, on a loaded machine): a generous deadline, and what the page
    // and the API showed when it ran out.
    const after = await eventually('a listed machine changed its row, another did not', async () => {
      const now = await rows.evaluateAll((trs) => trs.map((tr) => ({ text: tr.textContent, seen: tr.dataset.seen ?? null, name: tr.cells[0].textContent, phase: tr.cells[8].textContent })));
      const changed = now.filter((r) => r.seen === null && !marked.includes(r.text));
      const same = now.filter((r) => marked.includes(r.text));
      if (changed.length > 0 && same.length > 0) return now;
      // Every listed row changed since it was marked (the simulator moved them all, or the
      // marks were taken from an answer older than the list's first live one): no row can be
      // shown unchanged any more, so mark what is shown now and wait for the next answer.
      const remarked = same.length === 0 && changed.length === now.length;
      if (remarked) marked = await mark();
      const api = new Map((await gql(server.base, '{ machines(first: 500) { nodes { name phase } } }')).machines.nodes.map((m) => [m.name, m.phase ?? '']));
      const stale = now.filter((r) => api.has(r.name) && api.get(r.name) !== r.phase).map((r) => `${r.name}: ${r.phase} shown, ${api.get(r.name)} now`);
      return { mismatch: { rows: now.length, changed: changed.length, same: same.length, kept: now.filter((r) => r.seen !== null).length, remarked, stale } };
    }, 3 * PATIENCE);
    // A row whose text did not change is the same element (still marked); a marked element
    // always shows what it showed when it was marked (changed content is a new element).
    const unchanged = after.filter((r) => marked.includes(r.text));
    // (Most of them: one the simulator changed and changed back, or deleted and made again, is
    // a new element with the same text.)
    const kept = unchanged.filter((r) => r.seen !== null);
    assert.ok(kept.length > unchanged.length / 2, `unchanged rows are kept: ${kept.length} of ${unchanged.length}`);
    for (const r of after.filter((r) => r.seen !== null)) assert.equal(r.text, r.seen, 'a kept row shows what it showed');
    assert.equal(await page.evaluate(() => window.listGone), 0, 'the list stayed on the page while new answers came');
    // And the page still matches the API, row for row.
    await eventually('the rows show the API\'s phases', async () => {
      const shown = await rows.evaluateAll((trs) => trs.map((tr) => [tr.cells[0].textContent, tr.cells[8].textContent]));
      const now = new Map((await gql(server.base, '{ machines(first: 500) { nodes { name phase } } }')).machines.nodes.map((m) => [m.name, m.phase ?? '']));
      const wrong = shown.filter(([name, phase]) => now.get(name) !== phase);
      return wrong.length === 0 ? shown : { wrong };
    });
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('changes in the store appear in the page; a restart shows Reconnecting, then Live with fresh data', async () => {
    const { page, context, problems } = await openPage(server.base);
    await page.goto(`${server.base}/`);
    const first = await eventually('the page matches the API', () => pageMatchesApi(page, server.base));
    // The simulator moves clusters along the pipeline: the page follows without a reload.
    await eventually('a later state of the graph is shown', async () => {
      const now = await pageMatchesApi(page, server.base);
      if (now.mismatch) return now;
      return now.sequence > first.sequence && JSON.stringify(now.stages) !== JSON.stringify(first.stages) ? now : { mismatch: 'not changed yet' };
    });

    // The events page prepends new events as they happen.
    const events = await page.context().newPage();
    await events.goto(`${server.base}/events`);
    const newest = async () => events.locator('[data-testid=events] tbody tr').first().locator('td').nth(2).textContent().catch(() => '');
    const before = await eventually('the events page has rows', newest);
    const logged = (await gql(server.base, '{ events(first: 1) { nodes { sequence } } }')).events.nodes[0].sequence;
    await eventually('a newer event appears on top without a reload', async () => {
      const top = (await gql(server.base, '{ events(first: 1) { nodes { sequence kind namespace name } } }')).events.nodes[0];
      const shown = await newest();
      return top.sequence > logged && shown.includes(top.name) && shown !== before ? shown : { mismatch: { top, shown } };
    });
    await events.close();

    await server.stop({ keep: true });
    await eventually('the badge shows the connection lost', async () => ['Reconnecting', 'Disconnected'].includes(await page.getByTestId('connection').textContent()));
    server = await startServer(['--demo'], { SIMULATE: 'true', SIMULATE_STEPS_PER_SECOND: '2' }, { port: server.port, dbdir: server.dbdir });
    await eventually('the badge is Live again', async () => (await page.getByTestId('connection').textContent()) === 'Live');
    await eventually('the page shows the restarted server\'s data', () => pageMatchesApi(page, server.base));
    // The lost connection is expected to log nothing the user must act on; page errors are bugs.
    assert.deepEqual(problems.filter((p) => !p.startsWith('console:')), []);
    await context.close();
  });
});

describe('three datacenters, one going away now and then (DEMO_DATACENTERS=3)', () => {
  let server;
  // Outages every 30 s, the last third of each: the first starts 20 s in and lasts 10 s.
  before(async () => {
    server = await startServer(['--demo'], {
      SIMULATE: 'false', DEMO_DATACENTERS: '3', DEMO_OUTAGE_SECONDS: '30',
      DC_PROBE_INTERVAL_SECONDS: '1', DC_STALE_AFTER_SECONDS: '2',
    });
  });
  after(() => server?.stop());

  /** The data of an answer, partial or not (an away datacenter adds DATACENTER_UNAVAILABLE). */
  async function data(query) {
    const res = await fetch(`${server.base}/graphql`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }),
    });
    return (await res.json()).data;
  }

  test('a card per datacenter with its own figures; one that goes away is greyed with its age, named on every page, and the others\' lists still fill', async () => {
    const { page, context, problems } = await openPage(server.base);
    const api = (await data(`{ datacenters { key hostCapacity { hosts readyHosts activeVms stoppedVms }
      clusterSummary { total ready } } }`)).datacenters;
    assert.deepEqual(api.map((d) => d.key), ['bergen', 'oslo', 'trondheim']);
    await page.goto(`${server.base}/`);
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Datacenters' }).click();
    for (const d of api) {
      const card = page.getByTestId(`dc-${d.key}`);
      await eventually(`the card of ${d.key} with the API's figures`, async () => {
        const values = await card.locator('dd').allTextContents();
        const want = [`${d.hostCapacity.readyHosts}/${d.hostCapacity.hosts}`,
          `${d.hostCapacity.activeVms}/${d.hostCapacity.activeVms + d.hostCapacity.stoppedVms}`];
        const clusters = `${d.clusterSummary.ready}/${d.clusterSummary.total}`;
        return values[0] === want[0] && values[1] === want[1] && values[4] === clusters ? values : { mismatch: { values, want, clusters } };
      });
    }
    await shot(page, 'datacenters');

    // The topology: one box per datacenter, each with its own hosts (the same names in each).
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Topology' }).click();
    await eventually('a box per datacenter with its hosts', async () => {
      const boxes = await page.getByTestId('topology-dc').evaluateAll((gs) => gs.map((g) => g.querySelector('.title').textContent));
      const rows = await page.getByTestId('topology-host').count();
      const hosts = api.reduce((n, d) => n + d.hostCapacity.hosts, 0);
      const ready = await page.getByTestId('topology-dc').locator('text:nth-of-type(2)').allTextContents();
      const want = api.map((d) => `${d.hostCapacity.readyHosts}/${d.hostCapacity.hosts} hosts ready`);
      return JSON.stringify(boxes) === JSON.stringify(api.map((d) => d.key)) && rows === hosts
        && JSON.stringify(ready) === JSON.stringify(want) ? boxes : { mismatch: { boxes, rows, hosts, ready, want } };
    });
    await shot(page, 'topology-datacenters');
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Datacenters' }).click();

    // A card's Hosts link: that datacenter's hosts only.
    const oslo = api.find((d) => d.key === 'oslo');
    await page.getByTestId('dc-oslo').getByRole('link', { name: 'Hosts' }).click();
    await eventually("oslo's hosts", async () => page.url().endsWith('/hosts?dc=oslo')
      && (await page.getByTestId('host-card').count()) === oslo.hostCapacity.hosts);
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Datacenters' }).click();
    // Its Events link: the event log asked for that datacenter's events.
    await page.getByTestId('dc-oslo').getByRole('link', { name: 'Events' }).click();
    await eventually("oslo's events", async () => page.url().endsWith('/events?dc=oslo')
      && (await page.getByTestId('filter-dc').inputValue()) === 'oslo');
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Datacenters' }).click();

    // One goes away: its card is greyed with the age of what it shows and why; every page says so.
    const away = await eventually('a datacenter greyed as away', async () => {
      for (const d of api) {
        const card = page.getByTestId(`dc-${d.key}`);
        if ((await card.getAttribute('class')).includes('away')) {
          const age = await card.getByTestId('dc-age').textContent();
          const state = await card.getByTestId('dc-state').textContent();
          if (/Last known, \d+ s old\. .*simulated outage/.test(age) && state === 'stale') return d.key;
        }
      }
      return false;
    });
    await shot(page, 'datacenters-away');
    const banner = page.getByTestId('away');
    await eventually('the banner names it', async () => (await banner.textContent())?.includes(away));

    // Another datacenter's VMs, from its card, while that one is away: its rows, not an error.
    const other = api.find((d) => d.key !== away).key;
    const vms = (await data(`{ virtualMachineInstances(first: 500, filter: {datacenter: "${other}"}) { nodes { name } } }`))
      .virtualMachineInstances.nodes.map((v) => v.name).sort();
    assert.ok(vms.length > 0);
    await page.getByTestId(`dc-${other}`).getByRole('link', { name: 'VMs' }).click();
    await eventually('the deep link carries the datacenter', async () => page.url().endsWith(`/vms?dc=${other}`));
    const cells = () => page.locator('[data-testid=vms] tbody tr:not(.spacer) td:first-child').allTextContents();
    await eventually(`${other}'s VMs listed while ${away} is away`, async () => {
      const shown = (await cells()).sort();
      return JSON.stringify(shown) === JSON.stringify(vms) ? shown : { mismatch: { shown: shown.length, want: vms.length } };
    });
    assert.ok(await banner.isVisible(), 'the banner stays on other pages');
    await shot(page, 'vms-while-away');

    // It comes back: the card is no longer greyed, the banner goes.
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Datacenters' }).click();
    await eventually(`${away} synced again`, async () => {
      const card = page.getByTestId(`dc-${away}`);
      return (await card.count()) === 1 && !(await card.getAttribute('class')).includes('away')
        && (await card.getByTestId('dc-state').textContent()) === 'synced';
    });
    await eventually('the banner gone', async () => (await page.getByTestId('away').count()) === 0);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('the overview counts the datacenters reporting, the topology draws one that does not answer as such, and an unknown one is said', async () => {
    const { page, context, problems } = await openPage(server.base);
    // The tile: those synced, of all the server knows, as the API says at that moment.
    await page.goto(`${server.base}/`);
    await eventually('the datacenters tile equals the API', async () => {
      const dcs = (await data('{ datacenters { key state } }')).datacenters;
      const want = `${dcs.filter((d) => d.state === 'SYNCED').length}/${dcs.length}`;
      const shown = await page.getByTestId('tile-datacenters').textContent();
      const again = (await data('{ datacenters { key state } }')).datacenters;
      // Read twice around the page: the states were the same all along.
      return JSON.stringify(dcs) === JSON.stringify(again) && shown === want ? shown : { mismatch: { shown, want } };
    });
    // The topology: while one is stale, exactly its box is drawn as not answering.
    await page.goto(`${server.base}/topology`);
    const away = await eventually('a stale datacenter drawn as such', async () => {
      const stale = (await data('{ datacenters { key state } }')).datacenters.filter((d) => d.state !== 'SYNCED').map((d) => d.key);
      const drawn = await page.getByTestId('topology-dc').evaluateAll((gs) => gs
        .filter((g) => g.classList.contains('stale')).map((g) => g.querySelector('.title').textContent));
      const again = (await data('{ datacenters { key state } }')).datacenters.filter((d) => d.state !== 'SYNCED').map((d) => d.key);
      return stale.length === 1 && JSON.stringify(stale) === JSON.stringify(again)
        && JSON.stringify(drawn) === JSON.stringify([`${stale[0]} · not answering`]) ? stale[0] : { mismatch: { stale, drawn } };
    });
    assert.ok(away);
    await shot(page, 'topology-stale');
    // A datacenter the server does not know: said, with the ones it knows, on both pages.
    for (const path of ['/', '/topology']) {
      await page.goto(`${server.base}${path}?dc=nowhere`);
      const said = page.getByTestId('dc-not-found');
      await eventually(`${path} says nowhere is not known`, async () =>
        (await said.textContent()) === 'Datacenter \u201cnowhere\u201d not found. Known: bergen, oslo, trondheim.');
      assert.equal(await page.getByTestId('tile-hosts').count(), 0, 'no figures for an unknown datacenter');
    }
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('the overview and the topology for one datacenter: from a deep link, from the picker, and back to all', async () => {
    const { page, context, problems } = await openPage(server.base);
    const figures = `hostCapacity { hosts readyHosts activeVms stoppedVms } clusterSummary { total ready }`;
    const api = (await data(`{ datacenters { key ${figures} } }`)).datacenters;
    const fleet = await data(`{ hostCapacity { hosts readyHosts activeVms stoppedVms } clusterSummary { total ready } }`);
    const tiles = (f) => [`${f.hostCapacity.readyHosts}/${f.hostCapacity.hosts}`,
      `${f.clusterSummary.ready}/${f.clusterSummary.total}`,
      `${f.hostCapacity.activeVms}/${f.hostCapacity.activeVms + f.hostCapacity.stoppedVms}`];
    const shown = async () => Promise.all(['tile-hosts', 'tile-clusters', 'tile-vms']
      .map((id) => page.getByTestId(id).textContent()));
    const showing = (what, f) => eventually(`the tiles of ${what}`, async () => {
      const got = await shown();
      return JSON.stringify(got) === JSON.stringify(tiles(f)) ? got : { mismatch: { got, want: tiles(f) } };
    });
    const bergen = api.find((d) => d.key === 'bergen');
    const oslo = api.find((d) => d.key === 'oslo');
    assert.notDeepEqual(tiles(bergen), tiles(fleet), 'one datacenter differs from the fleet');

    // A deep link names bergen: the picker says so, the tiles are bergen's, the links carry it.
    await page.goto(`${server.base}/?dc=bergen`);
    const picker = page.getByTestId('filter-dc');
    await eventually('the picker on bergen', async () => (await picker.inputValue()) === 'bergen');
    await showing('bergen', bergen);
    await eventually('the stage bars link to bergen\'s clusters', async () => {
      const hrefs = await page.locator('[data-testid=stages] a').evaluateAll((as) => as.map((a) => a.getAttribute('href')));
      return hrefs.length > 0 && hrefs.every((h) => h.includes('dc=bergen')) ? hrefs : { hrefs };
    });
    await shot(page, 'overview-bergen');

    // The picker: oslo, then every datacenter again.
    await picker.selectOption('oslo');
    await eventually('the URL names oslo', async () => page.url().endsWith('/?dc=oslo'));
    await showing('oslo', oslo);
    await picker.selectOption('');
    await eventually('the URL names none', async () => !page.url().includes('dc='));
    await showing('the whole fleet', fleet);

    // The topology for one datacenter: its box and its hosts only.
    await page.goto(`${server.base}/topology?dc=oslo`);
    await eventually("oslo's box and hosts only", async () => {
      const boxes = await page.getByTestId('topology-dc').evaluateAll((gs) => gs.map((g) => g.querySelector('.title').textContent));
      const rows = await page.getByTestId('topology-host').count();
      return JSON.stringify(boxes) === '["oslo"]' && rows === oslo.hostCapacity.hosts ? boxes : { mismatch: { boxes, rows } };
    });
    assert.equal(await page.getByTestId('filter-dc').inputValue(), 'oslo');
    assert.deepEqual(problems, []);
    await context.close();
  });
});

describe('a server still syncing with its cluster (the Kubernetes API test server holds every list)', () => {
  let api;
  let server;
  let dir;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vitistack-kube-'));
    // Built by `cargo test` with the server (server/examples/kube_api.rs).
    const bin = join(dirname(process.env.VITISTACK_BIN), 'examples', 'kube_api');
    api = spawn(bin, [join(dir, 'kubeconfig')], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: api.stdout });
    await new Promise((resolve, reject) => {
      lines.on('line', (l) => { if (l === 'ready') resolve(); });
      api.once('exit', (code) => reject(new Error(`kube_api exited with ${code}`)));
      // Not built (a `cargo test` of one target): say so, rather than wait for a line forever.
      api.once('error', (e) => reject(new Error(`kube_api could not start (${bin}): ${e.message}`)));
    });
    server = await startServer(['--kubeconfig', join(dir, 'kubeconfig'), '--kube-context', 'test'],
      { SOURCE: 'kube' }, { until: '/health/live' });
  });
  after(async () => {
    await server?.stop();
    api?.stdin.end();
    api?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('the page says it is syncing, kind by kind, instead of showing zeros; then shows the fleet', async () => {
    const { page, context, problems } = await openPage(server.base);
    await page.goto(`${server.base}/`);
    const banner = page.getByTestId('sync');
    const kinds = (await gql(server.base, '{ sources { kinds { name served } } }')).sources.kinds.filter((k) => k.served !== false);
    await eventually('the banner shows every kind waiting', async () => (await banner.count()) === 1
      && (await banner.locator('li.waiting').count()) === kinds.length);
    assert.match(await banner.textContent(), new RegExp(`Syncing with the cluster: 0 of ${kinds.length} kinds read`));
    assert.equal(await banner.locator('progress').getAttribute('value'), '0');
    // No tile claims a number while nothing has been read.
    for (const id of ['tile-hosts', 'tile-clusters', 'tile-vms']) {
      assert.doesNotMatch((await page.getByTestId(id).textContent()).trim(), /^0/, `${id} is not a zero`);
    }
    // Nor does any section draw or judge the partial fleet.
    assert.equal(await page.getByTestId('attention-none').count(), 0, 'no "every cluster is Ready" while syncing');
    assert.equal(await page.getByTestId('chart-cpu').count(), 0, 'no allocation chart while syncing');
    assert.equal(await page.getByTestId('redundancy-explained').textContent(), '');
    await shot(page, 'syncing');

    api.stdin.write('release\n');
    await eventually('the banner goes once every kind is read', async () => (await banner.count()) === 0, 120000);
    await eventually('the tiles show the fleet the API answers', async () => pageMatchesApi(page, server.base));
    assert.deepEqual(problems, []);
    await context.close();
  });
});
