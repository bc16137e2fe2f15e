// A real, certified OpenID provider (the npm package `oidc-provider`, 9.x) for tests/oidc_provider.rs:
// the authorization server of one protected MCP server, on 127.0.0.1 and a free port.
//
//   node provider.mjs
//
// Environment:
//   OIDC_PROVIDER_ENTRY     the package's entry file (…/node_modules/oidc-provider/lib/index.js);
//                           imported by path, as this script lives outside that node_modules
//   MCP_RESOURCE            the MCP server's URL: the one resource (RFC 8707) and the tokens' `aud`
//   ACCESS_TOKEN_TTL        seconds an access token lives (short: the test waits past it)
//   RESOURCE_SERVER_SECRET  the secret of the pre-registered client `mcp-resource-server`, with
//                           which the MCP server introspects (and may revoke) tokens
//   TOKEN_DELAY_MS          optional: how long the token endpoint holds its answer back once
//                           done (a slow provider: concurrent refreshes then overlap); each
//                           answer is then told as `event token.answered` before the wait
//   ACCESS_TOKEN_FORMAT     optional: `jwt` for access tokens signed with the provider's keys
//                           (its JWKS), which a resource server checks without asking it;
//                           default `opaque` (checked by introspection)
//   EXTRA_RESOURCES         optional: a JSON list of more resource URLs (a gateway's upstream
//                           servers), each with opaque tokens of the `mcp` scope
//   EXCHANGE_CLIENT         optional: `id:secret` of a pre-registered client that may exchange
//                           (RFC 8693) a JWT access token of this provider's for an opaque one
//                           of an EXTRA_RESOURCES resource, for the same account
//   HOLD_TOKEN_REQUEST      optional: the Nth token request (counting from 1) is held forever,
//                           never processed, told as `event token.held`
//
// Stdout, one line each: `listening <port>` once bound, then `event <name> <details>` for every
// provider event the test counts (never a token or a secret). Warnings go to stderr.

import * as crypto from 'node:crypto';
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';

const { default: Provider, errors } = await import(
  pathToFileURL(process.env.OIDC_PROVIDER_ENTRY).href
);

const resource = process.env.MCP_RESOURCE;
const accessTokenTTL = Number(process.env.ACCESS_TOKEN_TTL || 5);
const accessTokenFormat = process.env.ACCESS_TOKEN_FORMAT || 'opaque';
const resourceServerSecret = process.env.RESOURCE_SERVER_SECRET;
const extraResources = JSON.parse(process.env.EXTRA_RESOURCES || '[]');
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const exchangeClient = process.env.EXCHANGE_CLIENT
  ? (() => {
    const [id, secret] = process.env.EXCHANGE_CLIENT.split(':');
    return {
      client_id: id,
      client_secret: secret,
      token_endpoint_auth_method: 'client_secret_basic',
      response_types: [],
      grant_types: [TOKEN_EXCHANGE],
      redirect_uris: [],
    };
  })()
  : undefined;
if (!resource || !resourceServerSecret) {
  console.error('MCP_RESOURCE and RESOURCE_SERVER_SECRET are required');
  process.exit(2);
}

const server = createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [
    // The MCP server itself: only introspects and revokes (no grants, no redirects).
    {
      client_id: 'mcp-resource-server',
      client_secret: resourceServerSecret,
      token_endpoint_auth_method: 'client_secret_basic',
      response_types: [],
      grant_types: [],
      redirect_uris: [],
    },
    ...(exchangeClient ? [exchangeClient] : []),
  ],
  // Any login, as itself (devInteractions accepts any login and password).
  async findAccount(ctx, id) {
    return { accountId: id, async claims() { return { sub: id }; } };
  },
  scopes: ['openid', 'offline_access'],
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    introspection: { enabled: true },
    // The MCP server may revoke the tokens it is shown (the test revokes a grant this way).
    revocation: {
      enabled: true,
      allowedPolicy: (ctx, client, token) => client.clientId === 'mcp-resource-server'
        || token.clientId === client.clientId,
    },
    resourceIndicators: {
      enabled: true,
      defaultResource: (ctx, client, oneOf) => oneOf ?? resource,
      useGrantedResource: () => true,
      getResourceServerInfo(ctx, indicator) {
        if (extraResources.includes(indicator)) {
          return { scope: 'mcp', audience: indicator, accessTokenFormat: 'opaque', accessTokenTTL };
        }
        if (indicator !== resource) {
          throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        }
        return {
          scope: 'mcp',
          audience: resource,
          accessTokenFormat,
          accessTokenTTL,
        };
      },
    },
  },
  // A refresh token when the grant holds offline_access (oidc-provider keeps offline_access only
  // with prompt=consent), rotated on every use.
  issueRefreshToken: (ctx, client, code) =>
    client.grantTypeAllowed('refresh_token') && code.scopes.has('offline_access'),
  rotateRefreshToken: true,
  ttl: {
    AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL ?? accessTokenTTL,
    RefreshToken: 24 * 60 * 60,
    Session: 60 * 60,
    Interaction: 10 * 60,
    Grant: 24 * 60 * 60,
    AuthorizationCode: 60,
  },
  pkce: { required: () => true },
  cookies: { keys: ['a-test-only-cookie-signing-key'] },
  // Errors as JSON lines on stderr instead of an HTML page only.
  renderError(ctx, out, error) {
    console.error(`error page: ${JSON.stringify(out)} ${error?.stack ?? ''}`);
    ctx.type = 'json';
    ctx.body = out;
  },
});

const say = (line) => process.stdout.write(`${line}\n`);
const grantType = (ctx) => ctx.oidc?.params?.grant_type ?? '-';

provider.on('registration_create.success', (ctx, client) => say(
  `event registration_create.success client_id=${client.clientId} application_type=${client.applicationType} `
  + `auth_method=${client.clientAuthMethod} redirect_uris=${client.redirectUris.join(',')}`,
));
provider.on('registration_create.error', (ctx, error) => say(`event registration_create.error ${error.message} ${error.error_description ?? ''}`));
provider.on('authorization.accepted', (ctx) => say(
  `event authorization.accepted scope=${ctx.oidc.params.scope} prompt=${ctx.oidc.params.prompt ?? '-'} `
  + `resource=${ctx.oidc.params.resource ?? '-'} code_challenge_method=${ctx.oidc.params.code_challenge_method ?? '-'}`,
));
provider.on('interaction.started', (ctx, prompt) => say(`event interaction.started prompt=${prompt.name} reasons=${prompt.reasons.join(',')}`));
provider.on('interaction.ended', () => say('event interaction.ended'));
provider.on('authorization.success', () => say('event authorization.success'));
provider.on('authorization.error', (ctx, error) => say(`event authorization.error ${error.message} ${error.error_description ?? ''}`));
provider.on('authorization_code.consumed', () => say('event authorization_code.consumed'));
provider.on('grant.success', (ctx) => say(`event grant.success grant_type=${grantType(ctx)}`));
provider.on('grant.error', (ctx, error) => say(`event grant.error grant_type=${grantType(ctx)} ${error.message} ${error.error_description ?? ''}`));
provider.on('access_token.saved', (token) => say(
  `event access_token.saved aud=${token.aud} scope=${token.scope} account=${token.accountId} ttl=${token.expiresIn}`,
));
provider.on('refresh_token.saved', (token) => say(`event refresh_token.saved scope=${token.scope} rotations=${token.rotations ?? 0}`));
provider.on('refresh_token.consumed', () => say('event refresh_token.consumed'));
provider.on('grant.revoked', () => say('event grant.revoked'));
provider.on('revocation.error', (ctx, error) => say(`event revocation.error ${error.message}`));
provider.on('introspection.error', (ctx, error) => say(`event introspection.error ${error.message}`));
provider.on('server_error', (ctx, error) => {
  say(`event server_error ${error.message}`);
  console.error(error);
});

const tokenDelay = Number(process.env.TOKEN_DELAY_MS || 0);
const holdTokenRequest = Number(process.env.HOLD_TOKEN_REQUEST || 0);
let tokenRequests = 0;
if (tokenDelay > 0 || holdTokenRequest > 0) {
  provider.use(async (ctx, next) => {
    if (ctx.method === 'POST' && ctx.path === '/token') {
      tokenRequests += 1;
      if (tokenRequests === holdTokenRequest) {
        // Never processed: as if the request had never reached the provider.
        say('event token.held');
        await new Promise(() => {});
      }
    }
    await next();
    if (ctx.method === 'POST' && ctx.path === '/token') {
      // Done (a refresh token rotated), the answer held back.
      say('event token.answered');
      await new Promise((resolve) => setTimeout(resolve, tokenDelay));
    }
  });
}

// A JWT access token's claims if this provider signed it (its JWKS) and it is current.
async function verifiedAccessToken(jwt) {
  const [head, body, signature] = jwt.split('.');
  if (!signature) return undefined;
  const header = JSON.parse(Buffer.from(head, 'base64url'));
  const jwks = await (await fetch(`${issuer}/jwks`)).json();
  const jwk = jwks.keys.find((key) => key.kid === header.kid);
  if (!jwk) return undefined;
  const key = crypto.createPublicKey({ key: jwk, format: 'jwk' });
  const signed = Buffer.from(`${head}.${body}`);
  const bytes = Buffer.from(signature, 'base64url');
  const valid = header.alg === 'RS256' ? crypto.verify('sha256', signed, key, bytes)
    : header.alg === 'ES256' ? crypto.verify('sha256', signed, { key, dsaEncoding: 'ieee-p1363' }, bytes)
      : false;
  if (!valid) return undefined;
  const claims = JSON.parse(Buffer.from(body, 'base64url'));
  if (claims.iss !== issuer || claims.exp * 1000 < Date.now()) return undefined;
  return claims;
}

// RFC 8693, for EXCHANGE_CLIENT: a JWT access token this provider signed for the gateway, for
// an opaque token of one of EXTRA_RESOURCES, for the same account.
provider.registerGrantType(TOKEN_EXCHANGE, async (ctx) => {
  const { params, client } = ctx.oidc;
  const refuse = (error, description) => {
    say(`event token_exchange.error ${error} ${description}`);
    ctx.status = 400;
    ctx.body = { error, error_description: description };
  };
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    return refuse('invalid_request', 'subject_token_type must be an access token');
  }
  if (!extraResources.includes(params.resource)) {
    return refuse('invalid_target', `unknown resource ${params.resource}`);
  }
  const subject = await verifiedAccessToken(params.subject_token);
  if (!subject || subject.aud !== resource) {
    return refuse('invalid_grant', 'the subject token is not a valid access token for the gateway');
  }
  // A grant of the exchanged token's own, for the same account.
  const grant = new provider.Grant({ accountId: subject.sub, clientId: client.clientId });
  grant.addResourceScope(params.resource, 'mcp');
  const grantId = await grant.save();
  const token = new provider.AccessToken({
    accountId: subject.sub,
    client,
    grantId,
    scope: 'mcp',
    gty: 'token_exchange',
  });
  token.resourceServer = new provider.ResourceServer(params.resource, {
    scope: 'mcp', audience: params.resource, accessTokenFormat: 'opaque', accessTokenTTL,
  });
  const value = await token.save();
  say(`event token_exchange.success account=${subject.sub} resource=${params.resource}`);
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: token.expiration,
    scope: 'mcp',
  };
}, ['subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'scope', 'audience']);

server.on('request', provider.callback());
say(`listening ${port}`);

// The test's guard kills this process; a closed stdin (the test gone) ends it too.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
