#!/usr/bin/env node
// The official TypeScript client's own OAuth flow against mcpspec: `ClientCredentialsProvider`
// (client credentials, headless, client_secret_basic) finds the authorization server from the
// server's 401 and its protected resource metadata (RFC 9728), asks it for a token for this
// resource (RFC 8707) and retries. Run by tests/clients/run against `teamnotes` served with
// --oauth-issuer and tests/oauth/provider.mjs; exits 1 with what failed.
//
//   node oauth.mjs --url http://127.0.0.1:PORT/mcp --issuer http://127.0.0.1:PORT2 \
//       --client alice --secret SECRET --client bob --secret SECRET2
import {
  Client,
  ClientCredentialsProvider,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';

const failed = [];
function check(name, ok, why = '') {
  console.log(ok ? `ok ${name}` : `FAIL ${name}: ${typeof why === 'string' ? why : JSON.stringify(why)}`);
  if (!ok) failed.push(name);
}

function args(argv) {
  const all = (name) => argv.flatMap((a, i) => (a === name ? [argv[i + 1]] : []));
  return { url: all('--url')[0], issuer: all('--issuer')[0], clients: all('--client'), secrets: all('--secret') };
}

async function connect(ns, i) {
  const authProvider = new ClientCredentialsProvider({
    clientId: ns.clients[i],
    clientSecret: ns.secrets[i],
    scope: 'notes:read notes:write',
    expectedIssuer: ns.issuer,
  });
  const client = new Client({ name: 'mcpspec-oauth-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(ns.url), { authProvider }));
  return client;
}

async function notes(client) {
  const result = await client.callTool({ name: 'list_notes', arguments: {} });
  const rows = result.structuredContent?.rows ?? result.structuredContent ?? [];
  return rows.map((r) => r.text);
}

const ns = args(process.argv.slice(2));
try {
  const first = await connect(ns, 0);
  const text = `${ns.clients[0]} via the TypeScript SDK`;
  const added = await first.callTool({ name: 'add_note', arguments: { text } });
  check('add_note as the first client', !added.isError, added);
  const mine = await notes(first);
  check("the first client's notes include it", mine.includes(text), mine);
  const second = await connect(ns, 1);
  const theirs = await notes(second);
  check('the second client sees none of them', !theirs.includes(text), theirs);
  await first.close();
  await second.close();
} catch (e) {
  check('the run', false, String(e?.stack ?? e));
}
process.exit(failed.length ? 1 : 0);
