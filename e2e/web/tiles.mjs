// The overview's figures as the API answers them and as the page shows them, for the suites
// that compare the two (the live overview, and the overview at a past moment).
import assert from 'node:assert/strict';

/** One GraphQL request; its data (fails on errors). */
export async function gql(base, query, variables = {}, key = undefined) {
  const headers = { 'content-type': 'application/json', accept: 'application/graphql-response+json' };
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ query, variables }),
  });
  const body = await res.json();
  assert.ok(!body.errors, JSON.stringify(body.errors));
  return body.data;
}

export const TILES = `{ sequence hostCapacity { hosts readyHosts usableHosts activeVms stoppedVms failedVms pendingVms vcpusUsed vcpusLimit
  memoryUsedBytes memoryLimitBytes hostsThatCanFail }
  infrastructure { clusters { total ready degraded failed inProgress byStage { value count } }
  machines { failed } } }`;

/** What the overview must show for the API's numbers (the dashboard's formatting). */
export function expectedTiles(d) {
  const c = d.hostCapacity;
  const s = d.infrastructure;
  const pct = (u, l) => `${l > 0 ? Math.round((u / l) * 100) : 0}%`;
  return {
    'tile-hosts': `${c.readyHosts}/${c.hosts}`,
    'tile-clusters': `${s.clusters.ready}/${s.clusters.total}`,
    'tile-redundancy': String(c.hostsThatCanFail),
    'tile-vms': `${c.activeVms}/${c.activeVms + c.stoppedVms}`,
    // The old page's Problems: VMs in error too, and how many are on their way.
    'tile-problems': String(s.clusters.failed + s.machines.failed + (c.hosts - c.readyHosts) + c.failedVms),
    'tile-cpu': pct(c.vcpusUsed, c.vcpusLimit),
    'tile-memory': pct(c.memoryUsedBytes, c.memoryLimitBytes),
  };
}

export const STAGES = ['NETWORK', 'MACHINES_CREATED', 'IPS_ALLOCATED', 'MACHINES_RUNNING', 'VIP_READY', 'TALOS', 'READY'];
export function expectedStages(d) {
  return STAGES.map((w) => d.infrastructure.clusters.byStage.find((c) => c.value === w)?.count ?? 0);
}

export async function shownTiles(page) {
  const shown = {};
  for (const id of Object.keys(expectedTiles({ hostCapacity: {}, infrastructure: { clusters: {}, machines: {} } }))) {
    shown[id] = (await page.getByTestId(id).textContent()).trim();
  }
  return shown;
}

export async function shownStages(page) {
  return (await page.locator('[data-testid=stages] .count').allTextContents()).map(Number);
}
