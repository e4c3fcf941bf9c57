// GraphQL over HTTP, audited by the graphql-http package (the reference implementation of the
// GraphQL-over-HTTP specification) against the real server: every audit, MUST, SHOULD and MAY,
// must be ok. Each audit is one test, named by its id and requirement.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serverAudits } from 'graphql-http';
import { startServer } from '../support/server.mjs';

let server;
let url;

before(async () => {
  server = await startServer(['--demo']);
  url = `${server.base}/graphql`;
});

after(() => server?.stop());

// The audits need the URL, which is known only once the server runs: they are listed with a
// placeholder and each reads the real one when it runs.
for (const audit of serverAudits({ url: () => url })) {
  test(`${audit.id} ${audit.name}`, async () => {
    const result = await audit.fn();
    assert.equal(result.status, 'ok', `${result.status}: ${result.reason ?? ''}${result.response ? ` (HTTP ${result.response.status})` : ''}`);
  });
}
