// Sends the hostile inputs of issue 14 to the server at BASE for SECONDS, with and without the key
// KEY, four at a time, plus a 5 MB WebSocket frame now and then; prints how each was answered.
// Used by e2e/load/hostile.sh (which measures the server meanwhile). Node 20: --experimental-websocket.
const [base, key, seconds] = [process.env.BASE, process.env.KEY, Number(process.env.SECONDS ?? 10)];
const q = (query) => JSON.stringify({ query });
const nested = `{ ${'datacenter { '.repeat(50)}sequence${' }'.repeat(50)} }`;
const aliases = `{ ${Array.from({ length: 5000 }, (_, i) => `a${i}: sequence`).join(' ')} }`;
const inputs = {
  nesting: q(nested),
  aliases: q(aliases),
  body5mb: JSON.stringify({ query: '{ sequence }', extensions: { pad: 'x'.repeat(5 * 1024 * 1024) } }),
  first100000: q('{ machines(first: 100000) { totalCount } }'),
  cursor: q('{ machines(first: 5, after: "Zm9yZ2Vk") { totalCount } }'),
  globalId: q('{ node(id: "WyJNYWNoaW5lIiwibnMiXQ") { id } }'),
  batch: JSON.stringify(Array.from({ length: 1000 }, () => ({ query: '{ sequence }' }))),
};
const seen = {};
const end = Date.now() + seconds * 1000;
async function worker(n) {
  const names = Object.keys(inputs);
  for (let i = n; Date.now() < end; i++) {
    const name = names[i % names.length];
    const withKey = i % 2 === 0;
    const headers = { 'content-type': 'application/json' };
    if (withKey) headers.authorization = `Bearer ${key}`;
    try {
      const res = await fetch(`${base}/graphql`, { method: 'POST', headers, body: inputs[name] });
      await res.arrayBuffer();
      const k = `${name} ${withKey ? 'key' : 'no key'} ${res.status}`;
      seen[k] = (seen[k] ?? 0) + 1;
    } catch (e) {
      const k = `${name} ${withKey ? 'key' : 'no key'} ${e.cause?.code ?? e.message}`;
      seen[k] = (seen[k] ?? 0) + 1;
    }
  }
}
async function frames() {
  const big = JSON.stringify({ id: 'big', type: 'subscribe', payload: { query: `# ${'x'.repeat(5 * 1024 * 1024)}\n{ sequence }` } });
  while (Date.now() < end) {
    const code = await new Promise((resolve) => {
      const ws = new WebSocket(`${base.replace('http', 'ws')}/graphql/ws`, 'graphql-transport-ws');
      ws.onopen = () => ws.send(JSON.stringify({ type: 'connection_init', payload: { token: key } }));
      ws.onmessage = (m) => { if (JSON.parse(m.data).type === 'connection_ack') ws.send(big); };
      ws.onclose = (e) => resolve(e.code);
      ws.onerror = () => {};
    });
    seen[`frame5mb key close ${code}`] = (seen[`frame5mb key close ${code}`] ?? 0) + 1;
  }
}
await Promise.all([worker(0), worker(1), worker(2), worker(3), frames()]);
for (const [k, v] of Object.entries(seen).sort()) console.log(`${k}: ${v}`);
