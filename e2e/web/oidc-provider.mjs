// A real OpenID provider for the tests: npm's `oidc-provider` (OpenID Certified), with its own
// login page (dev interactions: any password), test people and their groups, and clients for the
// server under test. Run: node oidc-provider.mjs (settings from the environment):
//   PORT            where it listens on 127.0.0.1 (the issuer is http://127.0.0.1:PORT)
//   STATE_DIR       its signing keys (keys.json, newest first: it signs with the first) and what it
//                   keeps (grants, refresh tokens) survive a restart there
//   REDIRECT_URIS   the server's /auth/callback URLs (comma-separated)
//   ROTATE=1        start with a new signing key in front of the old ones (a key rotation)
//   SESSION_ID_TTL  seconds an ID token for the `vitistack` client lasts (default 3600)
// Prints `listening <issuer>` once it serves.
import Provider from 'oidc-provider';
import { generateKeyPair, exportJWK } from 'jose';
import fs from 'node:fs';
import path from 'node:path';

const port = Number(process.env.PORT || 0);
const dir = process.env.STATE_DIR || fs.mkdtempSync('/tmp/oidc-');
fs.mkdirSync(dir, { recursive: true });
const issuer = `http://127.0.0.1:${port}`;

// Test people: the user name is the login typed on the provider's page.
export const PEOPLE = {
  alice: { groups: ['team-1'] },
  bob: { groups: ['team-2'] },
  pat: { groups: ['platform'] },
  nobody: { groups: [] },
};

async function newKey(n) {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { ...jwk, kid: `key-${n}-${Date.now()}`, alg: 'RS256', use: 'sig' };
}

const keysFile = path.join(dir, 'keys.json');
let keys = fs.existsSync(keysFile) ? JSON.parse(fs.readFileSync(keysFile, 'utf8')) : [];
if (keys.length === 0 || process.env.ROTATE === '1') {
  keys = [await newKey(keys.length + 1), ...keys];
  fs.writeFileSync(keysFile, JSON.stringify(keys));
}

// What the provider keeps (sessions, grants, refresh tokens), in a file: a restart (a key
// rotation) keeps the people signed in.
const storeFile = path.join(dir, 'store.json');
const stored = fs.existsSync(storeFile) ? JSON.parse(fs.readFileSync(storeFile, 'utf8')) : {};
const save = () => fs.writeFileSync(storeFile, JSON.stringify(stored));
class FileAdapter {
  constructor(name) { this.name = name; }
  key(id) { return `${this.name}:${id}`; }
  async upsert(id, payload, expiresIn) {
    stored[this.key(id)] = { payload, until: expiresIn ? Date.now() + expiresIn * 1000 : null };
    if (payload.grantId) {
      const g = `grant:${payload.grantId}`;
      stored[g] = [...new Set([...(stored[g] || []), this.key(id)])];
    }
    if (payload.uid) stored[`uid:${this.name}:${payload.uid}`] = id;
    if (payload.userCode) stored[`userCode:${this.name}:${payload.userCode}`] = id;
    save();
  }
  async find(id) {
    const e = stored[this.key(id)];
    if (!e || (e.until && e.until < Date.now())) return undefined;
    return e.payload;
  }
  async findByUid(uid) { const id = stored[`uid:${this.name}:${uid}`]; return id && this.find(id); }
  async findByUserCode(code) { const id = stored[`userCode:${this.name}:${code}`]; return id && this.find(id); }
  async consume(id) {
    const e = stored[this.key(id)];
    if (e) { e.payload.consumed = Math.floor(Date.now() / 1000); save(); }
  }
  async destroy(id) { delete stored[this.key(id)]; save(); }
  async revokeByGrantId(grantId) {
    for (const k of stored[`grant:${grantId}`] || []) delete stored[k];
    delete stored[`grant:${grantId}`];
    save();
  }
}

const redirects = (process.env.REDIRECT_URIS || '').split(',').filter(Boolean);
const sessionTtl = Number(process.env.SESSION_ID_TTL || 3600);
const provider = new Provider(issuer, {
  adapter: FileAdapter,
  jwks: { keys },
  cookies: { keys: ['vitistack-test-provider-cookies'] },
  clients: [
    {
      // The server under test (confidential: the dashboard's sign-in).
      client_id: 'vitistack',
      client_secret: 'vitistack-test-secret',
      redirect_uris: redirects,
      post_logout_redirect_uris: redirects.map((r) => r.replace(/\/auth\/callback$/, '/')),
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    },
    {
      // A command-line client: its ID tokens are the bearer tokens of the tests.
      client_id: 'cli',
      token_endpoint_auth_method: 'none',
      redirect_uris: ['http://127.0.0.1/cli-callback'],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
    {
      // Another application: its tokens are for another audience.
      client_id: 'other-app',
      token_endpoint_auth_method: 'none',
      redirect_uris: ['http://127.0.0.1/cli-callback'],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
    {
      // Tokens that expire after two seconds.
      client_id: 'short',
      token_endpoint_auth_method: 'none',
      redirect_uris: ['http://127.0.0.1/cli-callback'],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
  ],
  claims: {
    openid: ['sub'],
    profile: ['preferred_username', 'name'],
    email: ['email'],
    groups: ['groups'],
  },
  // The claims asked go into the ID token (the server reads groups there).
  conformIdTokenClaims: false,
  findAccount: async (_ctx, id) => ({
    accountId: id,
    claims: async () => ({
      sub: id,
      preferred_username: id,
      name: id,
      email: `${id}@example.test`,
      groups: (PEOPLE[id] || { groups: [] }).groups,
    }),
  }),
  // First-party clients: nothing to consent to (the login page is the only step).
  loadExistingGrant: async (ctx) => {
    const id = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (id) {
      const found = await ctx.oidc.provider.Grant.find(id);
      if (found) return found;
    }
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid profile email groups offline_access');
    await grant.save();
    return grant;
  },
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  ttl: {
    IdToken: (_ctx, _token, client) => {
      if (client?.clientId === 'short') return 2;
      if (client?.clientId === 'vitistack') return sessionTtl;
      return 3600;
    },
    AccessToken: 3600,
    RefreshToken: 86400,
    Grant: 86400,
    Session: 86400,
    Interaction: 600,
    AuthorizationCode: 60,
  },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  pkce: { required: () => true },
});
provider.proxy = false;

const server = provider.listen(port, '127.0.0.1', () => {
  console.log(`listening ${issuer}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
