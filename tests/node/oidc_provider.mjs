// A real OpenID Connect provider on loopback for the chat page's sign-in test: the
// oidc-provider package, one public client (PKCE, no secret) and any login name as a user.
//
//   node oidc_provider.mjs [--id-token-ttl SECONDS]
//
// It binds a free port on 127.0.0.1 and prints {"issuer": "http://127.0.0.1:PORT"}; then reads
// one JSON line on stdin, {"redirect_uri": "<the chat page's URL>"}, registers the client
// "chat-page" with that URL (sign-in and sign-out both return there), and prints
// {"ready": true}. Each token grant is printed as {"event": "grant", "grant_type": ...}, so
// the test sees the code exchange and the refreshes. It stops when stdin closes.
//
// Sign-in uses the package's development pages (any login, any password); consent is skipped
// for this first-party client, as Cognito's hosted pages do.

import { generateKeyPairSync, randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { createInterface } from "node:readline";

import Provider from "oidc-provider";

const CLIENT_ID = "chat-page";
const SCOPES = "openid email profile";

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
}

function signingKey() {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return { ...privateKey.export({ format: "jwk" }), kid: "test-rs256", alg: "RS256", use: "sig" };
}

// The person behind a login name: its claims (a name and an address made from it).
async function findAccount(_ctx, sub) {
  const name = String(sub);
  return {
    accountId: name,
    claims: async () => ({
      sub: name,
      email: `${name}@example.test`,
      email_verified: true,
      name: name.charAt(0).toUpperCase() + name.slice(1),
    }),
  };
}

// A first-party client: the grant of the scopes it asks for is given without a consent page.
async function loadExistingGrant(ctx) {
  const { oidc } = ctx;
  const known = oidc.result?.consent?.grantId || oidc.session.grantIdFor(oidc.client.clientId);
  if (known) return oidc.provider.Grant.find(known);
  const grant = new oidc.provider.Grant({
    clientId: oidc.client.clientId,
    accountId: oidc.session.accountId,
  });
  grant.addOIDCScope(SCOPES);
  await grant.save();
  return grant;
}

function configuration(redirectUri) {
  const pageOrigin = new URL(redirectUri).origin;
  return {
    clients: [
      {
        client_id: CLIENT_ID,
        token_endpoint_auth_method: "none",
        application_type: "web",
        redirect_uris: [redirectUri],
        post_logout_redirect_uris: [redirectUri],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
      },
    ],
    jwks: { keys: [signingKey()] },
    cookies: { keys: [randomBytes(32).toString("hex")] },
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    conformIdTokenClaims: false, // the name and email in the ID token, as Cognito puts them
    findAccount,
    loadExistingGrant,
    pkce: { required: () => true },
    // Cognito always issues a refresh token with the code; so does this (no offline_access).
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed("refresh_token"),
    clientBasedCORS: (_ctx, origin) => origin === pageOrigin,
    ttl: { IdToken: option("--id-token-ttl", 3600), AccessToken: 3600 },
    features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  };
}

const say = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);

let handler = (_req, res) => {
  res.writeHead(503).end("not ready");
};
const server = createServer((req, res) => handler(req, res));
server.listen(0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  say({ issuer });
  const input = createInterface({ input: process.stdin });
  input.once("line", (line) => {
    const provider = new Provider(issuer, configuration(JSON.parse(line).redirect_uri));
    provider.on("grant.success", (ctx) => {
      say({ event: "grant", grant_type: ctx.oidc.params.grant_type });
    });
    provider.on("server_error", (_ctx, error) => say({ event: "error", message: error.message }));
    handler = provider.callback();
    say({ ready: true });
  });
  input.on("close", () => server.close(() => process.exit(0)));
});
