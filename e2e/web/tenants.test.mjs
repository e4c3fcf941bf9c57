// Two tenants on two datacenters, as people sign in: the real OpenID provider (oidc-provider.mjs)
// vouches for alice (group team-1), bob (team-2) and pat (platform); two Kubernetes API test
// servers (server/examples/kube_api.rs, one per datacenter) hold each datacenter's objects and the
// RoleBindings that say what each group may list there. No role map: what a person sees is what
// each datacenter's RBAC answers (SubjectAccessReviews with the person's user and groups).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, startServer } from '../support/server.mjs';
import { eventually } from '../support/eventually.mjs';
import { launchChromium, logIn, post, startProvider, tokenFor } from './oidc-support.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const artifacts = join(here, 'artifacts');
mkdirSync(artifacts, { recursive: true });
const ADMIN = 'admin-key-for-the-tenants-suite-01';
const DATACENTERS = ['oslo', 'bergen'];
const TEAMS = ['team-1', 'team-2'];

/**
 * A Kubernetes API test server (a datacenter) as a child process, empty; objects written over
 * HTTP. Built by `cargo test` with the server (server/examples/kube_api.rs); stops when its stdin
 * closes.
 */
async function startKubeApi() {
  const bin = join(dirname(process.env.VITISTACK_BIN), 'examples', 'kube_api');
  const child = spawn(bin, ['--empty'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`${bin} exited (${code}): ${out}`)));
    // Not built (a `cargo test` of one target): say so, rather than fail outside the test.
    child.once('error', (e) => reject(new Error(`${bin} could not start: ${e.message}`)));
  });
  const send = async (method, path, body) => {
    const res = await fetch(`${url}${path}`, { method, headers: { 'content-type': 'application/json' }, body: body && JSON.stringify(body) });
    assert.ok(res.ok, `${method} ${path}: ${res.status} ${await res.text()}`);
  };
  return {
    url,
    create: (path, object) => send('POST', path, object),
    remove: (path) => send('DELETE', path),
    stop: async () => { child.stdin.end(); await exited; },
  };
}

const RBAC = '/apis/rbac.authorization.k8s.io/v1';
const VITISTACK = '/apis/vitistack.io/v1alpha1';
const role = (name, verbs) => ({ metadata: { name }, rules: [{ apiGroups: ['vitistack.io'], resources: ['*'], verbs }] });
const binding = (name, namespace, group, clusterRole) => ({
  metadata: namespace ? { name, namespace } : { name },
  subjects: [{ kind: 'Group', name: group, apiGroup: 'rbac.authorization.k8s.io' }],
  roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRole },
});

/** A KubernetesCluster shaped as the talos-operator's sample (fixtures/upstream/talos-operator). */
function cluster(name, namespace, datacenter) {
  const pool = { machineClass: 'medium', provider: 'kubevirt', version: '1.36.2' };
  return {
    apiVersion: 'vitistack.io/v1alpha1', kind: 'KubernetesCluster',
    metadata: { name, namespace, labels: { 'vitistack.io/clusterid': name } },
    spec: {
      data: { clusterUid: `00000000-0000-4000-8000-${name.length.toString().padStart(12, '0')}`, clusterId: name, provider: 'talos',
        environment: 'dev', datacenter, project: namespace, region: 'south', zone: 'az1', workorder: 'wo', workspace: 'ws', networkNamespaceName: namespace },
      topology: { version: '1.36.2', controlplane: { ...pool, replicas: 1 }, workers: { nodePools: [{ ...pool, name: 'wp', replicas: 1 }] } },
    },
  };
}

function machine(name, namespace, clusterId) {
  return {
    apiVersion: 'vitistack.io/v1alpha1', kind: 'Machine',
    metadata: { name, namespace, labels: { 'vitistack.io/clusterid': clusterId } },
    spec: { provider: 'kubevirt', machineClass: 'medium' },
  };
}

/** Subscription events over one SSE request (`Accept: text/event-stream`), as they come. */
function sse(base, query, token) {
  const events = [];
  const control = new AbortController();
  const state = { events, ended: null, stop: () => control.abort() };
  state.done = (async () => {
    const res = await fetch(`${base}/graphql`, {
      method: 'POST', signal: control.signal,
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query }),
    });
    if (res.status !== 200) assert.fail(`${res.status}: ${await res.text()}`);
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk, { stream: true });
        let at;
        while ((at = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
          if (data) events.push({ at: Date.now(), ...JSON.parse(data) });
        }
      }
    } catch (e) {
      if (e.name !== 'AbortError') throw e;
    }
    state.ended = Date.now();
  })();
  return state;
}

const LIST = '{ clusters(first: 100) { totalCount nodes { id name namespace datacenter } } clusterSummary { total } machines(first: 100) { totalCount } }';
const names = (body) => body.data.clusters.nodes.map((c) => `${c.datacenter}:${c.namespace}/${c.name}`).sort();
const expected = (teams, dcs = DATACENTERS) => dcs.flatMap((dc) => teams.map((ns) => `${dc}:${ns}/${dc}-${ns}`)).sort();

describe('two tenants on two datacenters, people signed in by the provider, RBAC per datacenter', () => {
  let browser;
  let provider;
  let server;
  let dir;
  const apis = {};

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vitistack-tenants-'));
    writeFileSync(join(dir, 'secret'), 'vitistack-test-secret\n');
    writeFileSync(join(dir, 'keys'), `root admin ${ADMIN}\n`);
    mkdirSync(join(dir, 'datacenters'));
    for (const dc of DATACENTERS) {
      const api = await startKubeApi();
      apis[dc] = api;
      writeFileSync(join(dir, 'datacenters', `${dc}.yaml`), [
        'apiVersion: v1', 'kind: Config',
        `clusters:\n- name: ${dc}\n  cluster:\n    server: ${api.url}`,
        `users:\n- name: ${dc}\n  user:\n    token: the-server-s-own-token`,
        `contexts:\n- name: ${dc}\n  context:\n    cluster: ${dc}\n    user: ${dc}`,
        `current-context: ${dc}`, ''].join('\n'));
      await api.create(`${RBAC}/clusterroles`, role('vitistack-view', ['get', 'list', 'watch']));
      await api.create(`${RBAC}/clusterroles`, role('vitistack-edit', ['get', 'list', 'watch', 'patch', 'update', 'create', 'delete']));
      await api.create(`${RBAC}/clusterroles`, role('vitistack-admin', ['*']));
      // team-1 runs its namespace in both datacenters; team-2 reads its own.
      await api.create(`${RBAC}/namespaces/team-1/rolebindings`, binding('team-1-edit', 'team-1', 'team-1', 'vitistack-edit'));
      await api.create(`${RBAC}/namespaces/team-2/rolebindings`, binding('team-2-view', 'team-2', 'team-2', 'vitistack-view'));
      for (const ns of TEAMS) {
        const name = `${dc}-${ns}`;
        await api.create(`${VITISTACK}/namespaces/${ns}/kubernetesclusters`, cluster(name, ns, dc));
        await api.create(`${VITISTACK}/namespaces/${ns}/machines`, machine(`${name}-cp0`, ns, name));
      }
    }
    // The platform team is admin over the whole fleet in the cluster the server runs in (oslo).
    await apis.oslo.create(`${RBAC}/clusterrolebindings`, binding('platform-admin', null, 'platform', 'vitistack-admin'));

    const providerPort = await freePort();
    const serverPort = await freePort();
    const redirect = `http://127.0.0.1:${serverPort}/auth/callback`;
    provider = await startProvider({ port: providerPort, dir: join(dir, 'provider'), redirects: [redirect] });
    server = await startServer([], {
      SOURCE: 'kube', DATACENTERS_DIR: join(dir, 'datacenters'), KUBECONFIG: join(dir, 'datacenters', 'oslo.yaml'),
      ANONYMOUS_READ_FROM: '', API_KEYS_FILE: join(dir, 'keys'),
      OIDC_ISSUER_URL: provider.issuer, OIDC_CLIENT_ID: 'vitistack', OIDC_CLIENT_SECRET_FILE: join(dir, 'secret'),
      OIDC_AUDIENCES: 'cli', OIDC_REDIRECT_URL: redirect, OIDC_PROVIDER_NAME: 'Test ID',
    }, { port: serverPort });
    await eventually('both datacenters are synced', async () => {
      const all = await post(server.base, LIST, ADMIN);
      return JSON.stringify(names(all.body)) === JSON.stringify(expected(TEAMS)) || { mismatch: all.body };
    });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
    await provider?.stop();
    for (const api of Object.values(apis)) await api.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('each tenant sees exactly its namespaces in both datacenters, in lists, counts, look-ups, history and the REST routes; the platform admin everything', async () => {
    const alice = await tokenFor(provider.issuer, 'alice', 'cli');
    const bob = await tokenFor(provider.issuer, 'bob', 'cli');
    const pat = await tokenFor(provider.issuer, 'pat', 'cli');
    const all = (await post(server.base, LIST, ADMIN)).body;

    const a = await post(server.base, `${LIST.slice(0, -1)} me { name role limited groups sees { datacenter namespaces } } }`, alice);
    assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.deepEqual(names(a.body), expected(['team-1']));
    assert.equal(a.body.data.clusters.totalCount, 2);
    assert.equal(a.body.data.clusterSummary.total, 2, 'her counts are her clusters');
    assert.equal(a.body.data.machines.totalCount, 2);
    assert.deepEqual(a.body.data.me.groups, ['team-1']);
    assert.equal(a.body.data.me.role, 'OPERATOR', 'team-1 may patch in its namespace');
    assert.equal(a.body.data.me.limited, true);
    assert.deepEqual(a.body.data.me.sees.map((s) => `${s.datacenter}:${s.namespaces.join('+')}`).sort(), ['bergen:team-1', 'oslo:team-1']);

    const b = await post(server.base, LIST, bob);
    assert.deepEqual(names(b.body), expected(['team-2']));
    assert.equal(b.body.data.clusterSummary.total, 2);

    const p = await post(server.base, `${LIST.slice(0, -1)} me { role limited } }`, pat);
    assert.deepEqual(names(p.body), names(all));
    assert.equal(p.body.data.clusterSummary.total, 4);
    assert.deepEqual(p.body.data.me, { role: 'ADMIN', limited: false });

    // Look-ups: by id and by name, another tenant's object is not found (its name does not leak).
    const theirs = all.data.clusters.nodes.find((c) => c.namespace === 'team-2' && c.datacenter === 'bergen');
    const mine = all.data.clusters.nodes.find((c) => c.namespace === 'team-1' && c.datacenter === 'bergen');
    const byId = (id) => `{ node(id: "${id}") { id } }`;
    assert.equal((await post(server.base, byId(mine.id), alice)).body.data.node.id, mine.id);
    assert.equal((await post(server.base, byId(theirs.id), alice)).body.data.node, null);
    const byName = (c) => `{ cluster(namespace: "${c.namespace}", name: "${c.name}", datacenter: "${c.datacenter}") { name machines { totalCount } } }`;
    assert.deepEqual((await post(server.base, byName(mine), alice)).body.data.cluster, { name: mine.name, machines: { totalCount: 1 } });
    assert.equal((await post(server.base, byName(theirs), alice)).body.data.cluster, null);
    assert.equal((await post(server.base, byName(theirs), bob)).body.data.cluster.name, theirs.name);

    // History: a change in each team's namespace in bergen; each tenant reads its own.
    for (const ns of TEAMS) await apis.bergen.create(`${VITISTACK}/namespaces/${ns}/machines`, machine(`bergen-${ns}-h`, ns, `bergen-${ns}`));
    const history = async (token) => (await post(server.base, '{ events(first: 200) { nodes { namespace datacenter name } } }', token)).body.data.events.nodes
      .map((e) => `${e.datacenter}:${e.namespace}/${e.name}`).sort();
    await eventually('both changes are in the history', async () => (await history(pat)).length === 2 || { mismatch: await history(pat) });
    assert.deepEqual(await history(alice), ['bergen:team-1/bergen-team-1-h']);
    assert.deepEqual(await history(bob), ['bergen:team-2/bergen-team-2-h']);

    // The old aggregator's REST route, with the same bearer token.
    const rest = async (token) => (await (await fetch(`${server.base}/api/v1/clusters`, { headers: { authorization: `Bearer ${token}` } })).json()).clusters.map((c) => c.namespace).sort();
    assert.deepEqual(await rest(alice), ['team-1', 'team-1']);
    assert.deepEqual(await rest(bob), ['team-2', 'team-2']);
    assert.deepEqual(await rest(pat), ['team-1', 'team-1', 'team-2', 'team-2']);
  });

  test('a tenant changes what is its own and nothing else; the change is recorded with who, how and their groups', async () => {
    const alice = await tokenFor(provider.issuer, 'alice', 'cli');
    const bob = await tokenFor(provider.issuer, 'bob', 'cli');
    const pause = (name, ns) => `mutation { pauseClusterReconciliation(namespace: "${ns}", name: "${name}") { changed } }`;
    const done = await post(server.base, pause('oslo-team-1', 'team-1'), alice);
    assert.equal(done.body.data?.pauseClusterReconciliation.changed, true, JSON.stringify(done.body));
    const outside = await post(server.base, pause('oslo-team-2', 'team-2'), alice);
    assert.equal(outside.body.errors?.[0].extensions.code, 'NOT_FOUND', JSON.stringify(outside.body));
    // Bob reads team-2 but RBAC gives him no patch there.
    const viewer = await post(server.base, pause('oslo-team-2', 'team-2'), bob);
    assert.equal(viewer.body.errors?.[0].extensions.code, 'FORBIDDEN', JSON.stringify(viewer.body));
    const recorded = await eventually('alice\'s change is in the history with its actor', async () => {
      const nodes = (await post(server.base, '{ events(filter: {actor: "oidc:alice"}, first: 20) { nodes { actor namespace name datacenter } } }', ADMIN)).body.data.events.nodes;
      return nodes.length > 0 ? nodes : undefined;
    });
    assert.deepEqual(recorded.map((e) => [e.actor, e.datacenter, e.namespace, e.name]),
      recorded.map(() => ['oidc:alice (oidc-token; groups team-1)', 'oslo', 'team-1', 'oslo-team-1']));
  });

  test('a RoleBinding deleted mid-stream: the tenant\'s events from that datacenter stop within 5 s, the other datacenter\'s go on', async () => {
    const alice = await tokenFor(provider.issuer, 'alice', 'cli');
    const query = 'subscription { machineChanged(snapshot: true) { type object { namespace name datacenter } } }';
    const stream = sse(server.base, query, alice);
    const seen = () => stream.events.map((e) => e.payload?.data?.machineChanged ?? e.data?.machineChanged).filter(Boolean);
    await eventually('her snapshot', async () => seen().some((e) => e.type === 'SYNCED') || { mismatch: JSON.stringify(stream.events) });
    const snapshot = seen().filter((e) => e.type === 'ADDED').map((e) => `${e.object.datacenter}:${e.object.namespace}/${e.object.name}`).sort();
    assert.deepEqual(snapshot, ['bergen:team-1/bergen-team-1-cp0', 'bergen:team-1/bergen-team-1-h', 'oslo:team-1/oslo-team-1-cp0']);
    await apis.oslo.create(`${VITISTACK}/namespaces/team-2/machines`, machine('oslo-team-2-cp1', 'team-2', 'oslo-team-2'));
    await apis.oslo.create(`${VITISTACK}/namespaces/team-1/machines`, machine('oslo-team-1-cp1', 'team-1', 'oslo-team-1'));
    await eventually('her new machine arrives', async () => seen().some((e) => e.object?.name === 'oslo-team-1-cp1'));
    assert.ok(!seen().some((e) => e.object?.namespace === 'team-2'), 'team-2\'s change is not her news');

    // Oslo's RoleBinding goes: her stream ends saying her access changed (bergen is still hers;
    // a stream that had nothing left would end FORBIDDEN).
    const deleted = Date.now();
    await apis.oslo.remove(`${RBAC}/namespaces/team-1/rolebindings/team-1-edit`);
    await eventually('her stream ends', async () => stream.ended !== null);
    assert.equal(stream.events.at(-1).errors?.[0].extensions.code, 'ACCESS_CHANGED', JSON.stringify(stream.events.at(-1)));
    const took = stream.ended - deleted;
    console.log(`alice's stream ended ${took} ms after her oslo RoleBinding was deleted`);
    // A new stream carries bergen only: oslo's next change in team-1 is not hers any more.
    const again = sse(server.base, query, alice);
    const later = () => again.events.map((e) => e.payload?.data?.machineChanged ?? e.data?.machineChanged).filter(Boolean);
    await eventually('her new snapshot', async () => later().some((e) => e.type === 'SYNCED') || { mismatch: again.events });
    assert.deepEqual(later().filter((e) => e.type === 'ADDED').map((e) => e.object.datacenter), ['bergen', 'bergen']);
    await apis.oslo.create(`${VITISTACK}/namespaces/team-1/machines`, machine('oslo-team-1-cp2', 'team-1', 'oslo-team-1'));
    await apis.bergen.create(`${VITISTACK}/namespaces/team-1/machines`, machine('bergen-team-1-cp1', 'team-1', 'bergen-team-1'));
    await eventually('bergen\'s change arrives', async () => later().some((e) => e.object?.name === 'bergen-team-1-cp1'));
    assert.ok(!later().some((e) => e.object?.name === 'oslo-team-1-cp2'), 'oslo is no longer hers');
    again.stop();
    await again.done;
    const list = await post(server.base, LIST, alice);
    assert.deepEqual(names(list.body), ['bergen:team-1/bergen-team-1']);
    // Given back: oslo is hers again.
    await apis.oslo.create(`${RBAC}/namespaces/team-1/rolebindings`, binding('team-1-edit', 'team-1', 'team-1', 'vitistack-edit'));
    await eventually('oslo is hers again', async () => {
      const b = (await post(server.base, `${LIST.slice(0, -1)} me { sees { datacenter namespaces } } }`, alice)).body;
      return JSON.stringify(names(b)) === JSON.stringify(expected(['team-1'])) || { mismatch: b };
    });
    assert.ok(took < 60000);
  });

  test('alice signs in on the provider\'s page and the dashboard shows her RBAC: team-1 in both datacenters, live', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
    const page = await context.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    await page.goto(`${server.base}/clusters`);
    await page.getByTestId('sso').click();
    await logIn(page, 'alice');
    await eventually('back on the cluster list', async () => page.url() === `${server.base}/clusters` || { mismatch: [page.url(), (await page.content()).slice(0, 600)] });
    await eventually('the header names her, her group and her namespaces',
      async () => (await page.getByTestId('account').textContent()) === 'oidc:alice (team-1) · operator · team-1' || { mismatch: await page.getByTestId('account').textContent() });
    const rows = async () => (await page.locator('[data-testid=clusters] tbody tr:not(.spacer) td:first-child').allTextContents()).sort();
    await eventually('both datacenters\' team-1 clusters, nothing else', async () => JSON.stringify(await rows()) === JSON.stringify(['bergen-team-1', 'oslo-team-1']) || { mismatch: await rows() });
    await apis.bergen.create(`${VITISTACK}/namespaces/team-2/kubernetesclusters`, cluster('bergen-team-2-new', 'team-2', 'bergen'));
    await apis.bergen.create(`${VITISTACK}/namespaces/team-1/kubernetesclusters`, cluster('bergen-team-1-new', 'team-1', 'bergen'));
    await eventually('her new cluster shows live', async () => (await rows()).includes('bergen-team-1-new')
      || { mismatch: { rows: await rows(), connection: await page.getByTestId('connection').textContent(),
        server: names((await post(server.base, LIST, ADMIN)).body) } });
    assert.ok(!(await rows()).includes('bergen-team-2-new'));
    await page.screenshot({ path: join(artifacts, 'tenants-rbac.png') });
    // Access taken away and given back while the page is open: the page follows both.
    await apis.oslo.remove(`${RBAC}/namespaces/team-1/rolebindings/team-1-edit`);
    await eventually('oslo leaves her page', async () => !(await rows()).includes('oslo-team-1') || { mismatch: await rows() });
    await apis.oslo.create(`${RBAC}/namespaces/team-1/rolebindings`, binding('team-1-edit', 'team-1', 'team-1', 'vitistack-edit'));
    await eventually('oslo comes back to her page', async () => (await rows()).includes('oslo-team-1') || { mismatch: await rows() });
    assert.deepEqual(problems, []);
    await context.close();
  });
});
