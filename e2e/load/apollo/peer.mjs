// The peer of e2e/load/peers.sh: Apollo Server 5 serving the same fleet from in-memory maps.
// It loads the fleet from the running vitistack server once (SOURCE_URL), then answers the load
// queries (e2e/load/dashboard.graphql, e2e/load/counts.graphql) with the same schema
// (schema.graphql) and plain resolvers: pages sliced from arrays, relationships looked up in
// Maps, machine counts walked per request. With CHURN_PER_SECOND it changes that many machine
// phases a second, as the simulator changes our fleet (Apollo keeps no response cache, so this
// costs it only the writes).
import { readFileSync } from "node:fs";
import { ApolloServer } from "@apollo/server";
import { startStandaloneServer } from "@apollo/server/standalone";

const SOURCE_URL = process.env.SOURCE_URL ?? "http://127.0.0.1:19991/graphql";
const PORT = Number(process.env.PORT ?? 19992);
const CHURN = Number(process.env.CHURN_PER_SECOND ?? 0);
const typeDefs = readFileSync(new URL("../../../schema.graphql", import.meta.url), "utf8");

// Paged as the dashboard pages (the whole fleet in one query is above our complexity limit).
const PAGE = `query Page($after: String) {
  clusters(first: 50, after: $after) { pageInfo { hasNextPage endCursor } nodes { name namespace phase controlPlane { replicas }
    machines(first: 100) { nodes { name phase role nodePool
      networkConfiguration { name interfaces { name macAddress ipv4Addresses } }
      machineClass { name cpu { vcpus } memory { bytes } } } } } }
  infrastructure {
    networks { namespaces readyNamespaces configurations allocatedIps vips readyVips }
    storage { machineDiskGb clusterStorages etcdBackups }
    clusters { total ready degraded failed inProgress } }
}`;

async function query(variables) {
  const response = await fetch(SOURCE_URL, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ query: PAGE, variables }),
  });
  const { data, errors } = await response.json();
  if (errors) throw new Error(JSON.stringify(errors));
  return data;
}

const data = { clusters: { nodes: [] } };
for (let after = null; ; ) {
  const page = await query({ after });
  data.clusters.nodes.push(...page.clusters.nodes);
  data.infrastructure = page.infrastructure;
  if (!page.clusters.pageInfo.hasNextPage) break;
  after = page.clusters.pageInfo.endCursor;
}

// In-memory maps: clusters in page order, machines by cluster, configurations and classes by name.
const configurations = new Map();
const classes = new Map();
const clusters = data.clusters.nodes.map((c) => ({
  ...c,
  machines: c.machines.nodes.map((m) => {
    if (m.networkConfiguration) configurations.set(m.networkConfiguration.name, m.networkConfiguration);
    if (m.machineClass) classes.set(m.machineClass.name, m.machineClass);
    return {
      ...m,
      networkConfiguration: m.networkConfiguration?.name ?? null,
      machineClass: m.machineClass?.name ?? null,
    };
  }),
}));
const machines = clusters.flatMap((c) => c.machines);

const page = (items, first, after) => {
  const start = after ? Number(Buffer.from(after, "base64").toString()) + 1 : 0;
  const nodes = items.slice(start, start + (first ?? items.length));
  const end = start + nodes.length - 1;
  return {
    totalCount: items.length,
    pageInfo: {
      hasNextPage: start + nodes.length < items.length,
      hasPreviousPage: start > 0,
      startCursor: nodes.length ? Buffer.from(String(start)).toString("base64") : null,
      endCursor: nodes.length ? Buffer.from(String(end)).toString("base64") : null,
    },
    nodes,
  };
};

const resolvers = {
  Query: {
    clusters: (_, { first, after }) => page(clusters, first, after),
    infrastructure: () => {
      let running = 0, failed = 0, vcpus = 0, memoryBytes = 0;
      for (const m of machines) {
        if (m.phase === "Running") running++;
        if (m.phase === "Failed") failed++;
        const cls = classes.get(m.machineClass);
        vcpus += cls?.cpu?.vcpus ?? 0;
        memoryBytes += Number(cls?.memory?.bytes ?? 0);
      }
      return {
        machines: { total: machines.length, running, failed, vcpus, memoryBytes },
        networks: data.infrastructure.networks,
        storage: data.infrastructure.storage,
        clusters: data.infrastructure.clusters,
      };
    },
  },
  KubernetesCluster: {
    machines: (c, { first, after }) => page(c.machines, first, after),
  },
  Machine: {
    networkConfiguration: (m) => configurations.get(m.networkConfiguration) ?? null,
    machineClass: (m) => classes.get(m.machineClass) ?? null,
  },
};

if (CHURN > 0) {
  const phases = ["Running", "Pending", "Failed", "Provisioning"];
  let i = 0;
  setInterval(() => {
    for (let n = 0; n < CHURN / 10; n++) {
      i = (i * 1103515245 + 12345) % 2147483648;
      machines[i % machines.length].phase = phases[i % phases.length];
    }
  }, 100);
}

// Configured for speed, as a production deployment would be: compact JSON (Apollo pretty-prints by
// default) and no landing page; run with NODE_ENV=production (no stack traces, no introspection).
const server = new ApolloServer({
  typeDefs,
  resolvers,
  stringifyResult: (value) => JSON.stringify(value),
  plugins: [(await import("@apollo/server/plugin/disabled")).ApolloServerPluginLandingPageDisabled()],
});
const { url } = await startStandaloneServer(server, { listen: { port: PORT, host: "127.0.0.1" } });
console.log(`apollo peer: ${clusters.length} clusters, ${machines.length} machines at ${url}`);
