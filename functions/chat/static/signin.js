// Signing in (AGENTLOOP_AUTH_MODE=jwt): GET /auth/config says which issuer and client; Sign in
// sends the browser to the issuer (oidc.js), its answer comes back to this page, and the
// tokens live in this tab's sessionStorage only (never localStorage: they go when the tab
// does). Requests carry the access token when it is a JWT (Cognito; Auth0 with an API),
// else the ID token (Google's access tokens are opaque to everyone but Google).

import {
  authorizationRequest,
  checkIdToken,
  claimsOf,
  discover,
  exchangeCode,
  refresh,
} from "./oidc.js";
import { chatUrl } from "./settings.js";

const SESSION_KEY = "agentloop.signin"; // the tokens
const FLOW_KEY = "agentloop.signin.flow"; // a sign-in under way: state, nonce, PKCE verifier
const MARGIN_S = 60; // a token with less than this left is refreshed before it is sent

const authConfigUrl = (endpoint) => chatUrl(endpoint).replace(/\/chat$/, "/auth/config");
// Where the issuer sends the browser back: this page, without the answer's query.
const redirectUri = () => `${location.origin}${location.pathname}`;

function stored(key) {
  try {
    const value = JSON.parse(sessionStorage.getItem(key) || "null");
    return value && typeof value === "object" ? value : null;
  } catch {
    return null;
  }
}

function store(key, value) {
  if (value === null) sessionStorage.removeItem(key);
  else sessionStorage.setItem(key, JSON.stringify(value));
}

export class SignIn {
  // onChange(): called whenever who is signed in, or what can be done, changes.
  constructor(onChange) {
    this.onChange = onChange;
    this.config = null; // { issuer, client_id, scopes, audience? } in jwt mode
    this.endpoints = null; // the issuer's, from discovery
    this.session = stored(SESSION_KEY);
    this.problem = null; // a sentence when sign-in failed or is unavailable
    this.refreshing = null; // one refresh at a time
  }

  get available() {
    return Boolean(this.config && this.endpoints);
  }

  // Who is signed in, as the ID token names them; null when no one is.
  get user() {
    const claims = this.session && claimsOf(this.session.id_token);
    if (!claims) return null;
    return claims.email || claims.name || claims.preferred_username || String(claims.sub);
  }

  // Ask the server whether it takes an issuer's tokens, then finish a sign-in the issuer
  // has just sent the browser back from.
  async start(endpoint) {
    try {
      const response = await fetch(authConfigUrl(endpoint), { cache: "no-store" });
      const config = response.ok ? await response.json() : {};
      if (config && typeof config.issuer === "string" && typeof config.client_id === "string") {
        this.config = config;
        this.endpoints = await discover(config.issuer);
        await this.finishRedirect();
      }
    } catch (err) {
      this.problem = `Sign-in failed: ${err.message}`;
    }
    this.onChange();
  }

  async signIn() {
    const { url, flow } = await authorizationRequest(this.config, this.endpoints, redirectUri());
    store(FLOW_KEY, { ...flow, issuer: this.config.issuer });
    location.assign(url);
  }

  // The issuer's answer in this page's query: checked against the request this tab made.
  async finishRedirect() {
    const answer = new URLSearchParams(location.search);
    if (!answer.has("state") || !(answer.has("code") || answer.has("error"))) return;
    history.replaceState(null, "", redirectUri() + location.hash); // the code leaves the URL
    const flow = stored(FLOW_KEY);
    store(FLOW_KEY, null);
    if (!flow || flow.state !== answer.get("state") || flow.issuer !== this.config.issuer) {
      throw new Error("the answer does not match a sign-in this tab started");
    }
    if (answer.has("iss") && answer.get("iss") !== this.config.issuer) {
      throw new Error("the answer came from another issuer");
    }
    if (answer.has("error")) {
      throw new Error(answer.get("error_description") || answer.get("error"));
    }
    const { endpoints, config } = this;
    const code = answer.get("code");
    const tokens = await exchangeCode(endpoints, config, code, flow.verifier, redirectUri());
    checkIdToken(tokens.id_token, this.config, flow.nonce);
    this.keep(tokens);
  }

  keep(tokens) {
    const previous = this.session || {};
    this.session = {
      id_token: tokens.id_token || previous.id_token,
      access_token: tokens.access_token,
      refresh_token: tokens.refresh_token || previous.refresh_token, // kept when not rotated
      expires_at: Date.now() / 1000 + (Number(tokens.expires_in) || 0),
    };
    this.problem = null;
    store(SESSION_KEY, this.session);
  }

  bearer() {
    const { access_token: access, id_token: id } = this.session;
    return claimsOf(access) ? access : id;
  }

  expiresAt() {
    const claims = claimsOf(this.bearer());
    return claims && typeof claims.exp === "number" ? claims.exp : this.session.expires_at;
  }

  // The token to send now, refreshed first when it is about to run out; null when signed
  // out (then a pasted token, if any, is sent).
  async token() {
    if (!this.session) return null;
    if (this.expiresAt() - Date.now() / 1000 > MARGIN_S) return this.bearer();
    if (this.session.refresh_token && this.available) {
      this.refreshing = this.refreshing || this.renew();
      await this.refreshing;
      this.refreshing = null;
      if (this.session) return this.bearer();
    } else {
      this.clear("Your sign-in expired: sign in again.");
    }
    return null;
  }

  async renew() {
    try {
      const tokens = await refresh(this.endpoints, this.config, this.session.refresh_token);
      if (tokens.id_token) checkIdToken(tokens.id_token, this.config);
      this.keep(tokens);
      this.onChange();
    } catch (err) {
      this.clear(`Your sign-in expired (${err.message}): sign in again.`);
    }
  }

  // Forget the tokens; then, if the issuer has one, end its session too (it sends the
  // browser back here).
  signOut() {
    const idToken = this.session && this.session.id_token;
    this.clear();
    const end = this.endpoints && this.endpoints.endSession;
    if (!end) return;
    const url = new URL(end);
    url.searchParams.set("client_id", this.config.client_id);
    url.searchParams.set("post_logout_redirect_uri", redirectUri());
    if (idToken) url.searchParams.set("id_token_hint", idToken);
    location.assign(url.href);
  }

  clear(problem = null) {
    this.session = null;
    this.problem = problem;
    store(SESSION_KEY, null);
    this.onChange();
  }
}
