// The authorization server of mcpspec's OAuth tests: the OpenID Certified oidc-provider on
// 127.0.0.1, with client-credentials clients, resource indicators (RFC 8707) and JWT access
// tokens (RFC 9068). The Rust harness (tests/e2e/oauth.rs) starts it, reads the issuer from
// its first line of output, and ends it.
//
//   node provider.mjs '{"clients": [{"id": "alice", "secret": "...", "scope": "notes:read",
//                        "alg": "RS256", "claims": {"role": "notes_user"}}]}'
//
// A client with "format": "opaque" gets opaque access tokens, which a resource server checks
// at the introspection endpoint (RFC 7662) with client credentials of its own.
//
// Besides the provider's own endpoints it answers two test-only ones under /control/:
//   POST /control/rotate  new signing keys (new kids) for every algorithm, the old ones still
//                         published after them; tokens issued from now on carry the new kids.
//   POST /control/retire  withdraws every key but the newest of each algorithm (a key the
//                         issuer no longer publishes must stop verifying tokens).
//   POST /control/replace new key material for the newest key of each algorithm under the
//                         same kid (a token signed with the material replaced must stop
//                         verifying).
//   POST /control/forge   {header, claims, key}: a token signed outside the provider's rules,
//                         for the hostile-token tests: with the provider's current key of
//                         header.alg ("current"), a key the provider never published
//                         ("stranger"), or HS256 keyed with the RSA public key's PEM
//                         ("hmac-public", the algorithm-confusion attack).
import http from 'node:http';
import { createPrivateKey, createPublicKey, sign } from 'node:crypto';

import Provider from 'oidc-provider';
import { SignJWT, exportJWK, generateKeyPair, importJWK } from 'jose';

const ALGS = ['RS256', 'ES256', 'EdDSA'];
const config = JSON.parse(process.argv[2] ?? '{"clients": []}');
let generation = 0;

/** A private signing key of `alg` as a JWK, with a kid naming its generation. */
async function privateJwk(alg) {
  const options = alg === 'EdDSA' ? { crv: 'Ed25519', extractable: true } : { extractable: true };
  const { privateKey } = await generateKeyPair(alg, options);
  const jwk = await exportJWK(privateKey);
  return { ...jwk, alg, use: 'sig', kid: `${alg.toLowerCase()}-${generation}` };
}

async function newKeys() {
  generation += 1;
  return Promise.all(ALGS.map(privateJwk));
}

function clientOf(id) {
  return config.clients.find((c) => c.id === id);
}

function provider(issuer, keys) {
  const p = new Provider(issuer, {
    clients: config.clients.map((c) => ({
      client_id: c.id,
      client_secret: c.secret,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      // A resource server asks about tokens with HTTP Basic, as RFC 7662's examples do.
      token_endpoint_auth_method: c.basic ? 'client_secret_basic' : 'client_secret_post',
      scope: c.scope || undefined,
    })),
    jwks: { keys },
    scopes: ['notes:read', 'notes:write', 'other:scope'],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      resourceIndicators: {
        enabled: true,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource, client) => ({
          scope: 'notes:read notes:write other:scope',
          audience: resource,
          accessTokenTTL: 600,
          accessTokenFormat: clientOf(client.clientId)?.format ?? 'jwt',
          jwt: { sign: { alg: clientOf(client.clientId)?.alg ?? 'RS256' } },
        }),
      },
    },
    extraTokenClaims: (ctx, token) => clientOf(token.clientId)?.claims,
    ttl: { ClientCredentials: 600 },
    enabledJWA: {
      idTokenSigningAlgValues: ALGS,
    },
  });
  p.on('server_error', (ctx, err) => console.error('oidc-provider:', err));
  return p;
}

async function body(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : {};
}

let keys = await newKeys();
let current;
const server = http.createServer(async (req, res) => {
  try {
    if (req.method === 'POST' && req.url === '/control/rotate') {
      keys = [...(await newKeys()), ...keys];
      current = provider(current.issuer, keys);
      res.end(JSON.stringify({ kids: keys.slice(0, ALGS.length).map((k) => k.kid) }));
      return;
    }
    if (req.method === 'POST' && req.url === '/control/retire') {
      keys = keys.slice(0, ALGS.length);
      current = provider(current.issuer, keys);
      res.end(JSON.stringify({ kids: keys.map((k) => k.kid) }));
      return;
    }
    if (req.method === 'POST' && req.url === '/control/replace') {
      const newest = keys.slice(0, ALGS.length);
      const replaced = await Promise.all(
        newest.map(async (k) => ({ ...(await privateJwk(k.alg)), kid: k.kid })),
      );
      keys = [...replaced, ...keys.slice(ALGS.length)];
      current = provider(current.issuer, keys);
      res.end(JSON.stringify({ kids: replaced.map((k) => k.kid) }));
      return;
    }
    if (req.method === 'POST' && req.url === '/control/forge') {
      res.end(await forge(await body(req)));
      return;
    }
    current.callback()(req, res);
  } catch (e) {
    res.statusCode = 500;
    res.end(String(e));
  }
});

/**
 * A token whose header names extensions (`crit`, `b64`), which jose refuses to sign: signed
 * here, RS256 with the provider's current key, over the header and claims as given.
 */
function forgeWithExtensions(header, claims) {
  const b64 = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  const input = `${b64(header)}.${b64({ iat: now, ...claims })}`;
  const key = createPrivateKey({ key: keys.find((k) => k.alg === 'RS256'), format: 'jwk' });
  return `${input}.${sign('sha256', Buffer.from(input), key).toString('base64url')}`;
}

/** A token signed as the hostile-token tests ask (see the head of this file). */
async function forge({ header, claims, key }) {
  if (header.crit !== undefined || header.b64 !== undefined) {
    return forgeWithExtensions(header, claims);
  }
  const alg = header.alg;
  let signing;
  if (key === 'hmac-public') {
    const rsa = keys.find((k) => k.alg === 'RS256');
    const { d, p, q, dp, dq, qi, ...pub } = rsa;
    const pem = createPublicKey({ key: pub, format: 'jwk' }).export({ type: 'spki', format: 'pem' });
    signing = new TextEncoder().encode(pem);
  } else if (key === 'stranger') {
    signing = await importJWK(await privateJwk(alg), alg);
  } else {
    signing = await importJWK(keys.find((k) => k.alg === alg), alg);
  }
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ iat: now, ...claims }).setProtectedHeader(header).sign(signing);
}

server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  current = provider(issuer, keys);
  console.log(JSON.stringify({ issuer }));
});
