// OpenID Connect for a public client in the browser: discovery, the authorization code flow
// with PKCE (S256), the code and refresh-token grants, and reading a token's claims.
//
// The page has no secret: PKCE binds the code to this tab (the verifier never leaves it until
// the exchange), state ties the answer to the request this tab made, nonce ties the ID token
// to it. The page reads claims only to show who is signed in and when a token runs out; the
// server checks every token's signature against the issuer's keys.

const enc = new TextEncoder();

function base64url(bytes) {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// 32 random bytes as base64url: 43 characters, inside PKCE's 43..128 for the verifier.
export const randomToken = () => base64url(crypto.getRandomValues(new Uint8Array(32)));

export async function challengeOf(verifier) {
  return base64url(new Uint8Array(await crypto.subtle.digest("SHA-256", enc.encode(verifier))));
}

// A JWT's payload as an object; null when the token is not a JWT (an opaque access token).
export function claimsOf(token) {
  const parts = typeof token === "string" ? token.split(".") : [];
  if (parts.length !== 3) return null;
  try {
    const binary = atob(parts[1].replace(/-/g, "+").replace(/_/g, "/"));
    const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
    const claims = JSON.parse(new TextDecoder().decode(bytes));
    return claims && typeof claims === "object" && !Array.isArray(claims) ? claims : null;
  } catch {
    return null;
  }
}

async function getJson(url, init) {
  const response = await fetch(url, { cache: "no-store", ...init });
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: said below
  }
  if (!response.ok || !body || typeof body !== "object") {
    const said = body && typeof body.error === "string" ? `: ${body.error}` : "";
    throw new Error(`${new URL(url).host} answered HTTP ${response.status}${said}`);
  }
  return body;
}

const LOOPBACK = ["127.0.0.1", "localhost", "[::1]"];
const httpsOrLoopback = (url) => {
  const parsed = new URL(url);
  return parsed.protocol === "https:" || LOOPBACK.includes(parsed.hostname);
};

// The issuer's endpoints; the document must be the issuer's own (its "issuer" is ours).
export async function discover(issuer) {
  const doc = await getJson(`${issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`);
  if (doc.issuer !== issuer) throw new Error(`the discovery document is not ${issuer}'s`);
  for (const name of ["authorization_endpoint", "token_endpoint"]) {
    if (typeof doc[name] !== "string" || !httpsOrLoopback(doc[name])) {
      throw new Error(`the issuer's ${name} is missing or not https`);
    }
  }
  const end = doc.end_session_endpoint;
  return {
    authorization: doc.authorization_endpoint,
    token: doc.token_endpoint,
    endSession: typeof end === "string" && httpsOrLoopback(end) ? end : null,
  };
}

// The sign-in request: where to send the browser, and what the answer must match.
export async function authorizationRequest(config, endpoints, redirectUri) {
  const flow = { state: randomToken(), nonce: randomToken(), verifier: randomToken() };
  const url = new URL(endpoints.authorization);
  const params = {
    response_type: "code",
    client_id: config.client_id,
    redirect_uri: redirectUri,
    scope: config.scopes,
    state: flow.state,
    nonce: flow.nonce,
    code_challenge: await challengeOf(flow.verifier),
    code_challenge_method: "S256",
  };
  if (config.audience) params.audience = config.audience; // Auth0: a JWT access token
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  return { url: url.href, flow };
}

function grant(endpoints, params) {
  return getJson(endpoints.token, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: new URLSearchParams(params),
  });
}

export const exchangeCode = (endpoints, config, code, verifier, redirectUri) =>
  grant(endpoints, {
    grant_type: "authorization_code",
    code,
    redirect_uri: redirectUri,
    client_id: config.client_id,
    code_verifier: verifier,
  });

export const refresh = (endpoints, config, refreshToken) =>
  grant(endpoints, {
    grant_type: "refresh_token",
    refresh_token: refreshToken,
    client_id: config.client_id,
  });

// An ID token fit to show: from our issuer, for our client, answering our nonce, unexpired.
export function checkIdToken(idToken, config, nonce, now = Date.now() / 1000) {
  const claims = claimsOf(idToken);
  if (!claims) throw new Error("the issuer sent no ID token");
  const audience = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (claims.iss !== config.issuer) throw new Error("the ID token is from another issuer");
  if (!audience.includes(config.client_id)) throw new Error("the ID token is for another client");
  if (nonce !== undefined && claims.nonce !== nonce) {
    throw new Error("the ID token does not answer this sign-in (nonce)");
  }
  if (typeof claims.exp !== "number" || claims.exp < now) throw new Error("the ID token expired");
  return claims;
}
