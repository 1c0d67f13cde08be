// A hand-written OAuth 2.1 authorization server (AS) for testing the OAuth client of mcp.ts and its resource-server
// side (JWT access tokens checked against the AS's JWKS). It does not import mcp.ts, so a bug in our client cannot
// hide behind the same bug here. Only node: built-ins and WebCrypto: it runs unchanged under deno run -A, bun and node
// (>= 22.18). It listens on 127.0.0.1 port FAKE_AUTH_PORT (default 0: any free port), prints exactly one line
// "listening http://127.0.0.1:PORT" on stdout when ready, notes every request on stderr ("fake-auth: got POST /token
// grant_type=authorization_code"; never a token, secret, code or verifier), and exits at once on SIGTERM or SIGINT.
// The issuer is http://127.0.0.1:PORT plus FAKE_AUTH_ISSUER_PATH (e.g. /tenant1; default none). FAKE_AUTH_MODE is a
// comma-separated list of switches (several may combine; an unknown one exits 2):
//
//   (none)            metadata at /.well-known/oauth-authorization-server{path}, /.well-known/openid-configuration{path}
//                     and {path}/.well-known/openid-configuration; DCR; PKCE S256; iss on the redirect (advertised);
//                     rotating refresh tokens with reuse detection
//   oidc-only         only the two openid-configuration forms (oauth-authorization-server → 404)
//   path-oidc-only    only {path}/.well-known/openid-configuration
//   wrong-issuer      the metadata's issuer is https://attacker.example.com (its endpoints are still ours, so a
//                     client that uses them shows in the log)
//   no-dcr            no registration_endpoint in the metadata; POST /register → 404
//   no-pkce           no code_challenge_methods_supported in the metadata (/authorize still demands S256)
//   cimd              client_id_metadata_document_supported: true; an https client_id URL with a path is accepted at
//                     /authorize (never fetched) with any loopback redirect_uri, and authenticates with "none"
//   require-app-type  POST /register without application_type "native" or "web" → 400 invalid_client_metadata
//   iss-missing       the /authorize redirect has no iss (though the metadata advertises it)
//   iss-wrong         the /authorize redirect has iss=https://evil.example.com
//   iss-slash         the /authorize redirect has iss = issuer + "/" (a client must not normalize)
//   iss-unadvertised  no authorization_response_iss_parameter_supported in the metadata
//   deny              /authorize redirects with error=access_denied (after checking client_id and redirect_uri)
//   no-refresh        /token never hands out a refresh token
//   no-exp            access tokens (and minted ones, unless exp_in is given) have no exp
//   rotate-drop       after POST /_rotate the JWKS serves only the new key (default: the old ones and the new)
//   jwt-bearer-unauthorized  every jwt-bearer grant request → 400 unauthorized_client, before any other check
//   dpop              DPoP (RFC 9449): dpop_signing_alg_values_supported in the metadata; a /token request with a
//                     DPoP proof gets tokens bound to its key (below), one without a Bearer token as before
//   dpop-nonce        dpop, and a proof must carry our nonce: at /token the AS one (else 400 use_dpop_nonce with a
//                     DPoP-Nonce header), at /mcp the RS one, another value (else 401 use_dpop_nonce, DPoP-Nonce)
//   dpop-required     dpop, and a /token request without a proof → 400 invalid_dpop_proof "a DPoP proof is required"
//   spend-first       with dpop-nonce: a client authenticates (its client_assertion's jti spent) before the proof's
//                     nonce is checked, as an authorization server may: a nonce retry needs a new assertion
//   mcp               an MCP server at /mcp that takes our access tokens, and its protected resource metadata (below)
//
// Tunables: FAKE_AUTH_METHODS (token_endpoint_auth_methods_supported, comma-separated; default
// none,client_secret_basic,client_secret_post,private_key_jwt), FAKE_AUTH_SCOPES (scopes_supported, space-separated;
// default "mcp:read mcp:write offline_access"), FAKE_AUTH_TTL (expires_in and exp, s; 3600), FAKE_AUTH_ALG (the AS's
// signing alg: ES256 (default), RS256 or EdDSA), FAKE_AUTH_AUDIENCE (aud of every token instead of the resource),
// FAKE_AUTH_DPOP_ALGS (dpop_signing_alg_values_supported and the algs a proof may use, comma-separated; default ES256;
// ES256, ES384, RS256, PS256 and EdDSA can be verified), FAKE_AUTH_IDP_CLIENT_ID (the IdP's one client; idp-client)
// with FAKE_AUTH_IDP_CLIENT_SECRET (then client_secret_basic or client_secret_post; default none: the client_id
// alone), FAKE_AUTH_XAA_CLIENT_ID (the client_id claim of the ID-JAGs the IdP issues; xaa-client).
// A pre-registered client: FAKE_AUTH_CLIENT_ID with FAKE_AUTH_CLIENT_SECRET (client_secret_basic/post) and/or
// FAKE_AUTH_CLIENT_JWK (a public JWK, or a {keys} set, as JSON: private_key_jwt), else a public client ("none"); it
// may use every method of FAKE_AUTH_METHODS its credentials allow, every grant, and any loopback redirect_uri.
// A second ES256 key, the platform key (kid platform-…; never in /jwks, served at /idp/jwks), plays the workload's
// platform and the enterprise IdP (issuer http://127.0.0.1:PORT/idp): it signs workload JWTs (POST /_assertion), ID
// tokens (POST /_id_token) and ID-JAGs (POST /idp/token).
//
// Endpoints (all at the root, whatever the issuer path; the metadata names them):
//   POST /register   RFC 7591. redirect_uris must be loopback http or https (else 400 invalid_redirect_uri). The
//                    token_endpoint_auth_method (default client_secret_basic) becomes FAKE_AUTH_METHODS' first one
//                    when not listed there; private_key_jwt needs jwks {keys}; grant_types defaults to
//                    ["authorization_code"]. Answers 201 with the request's fields, a random client_id, client_secret
//                    (unless none / private_key_jwt), client_id_issued_at.
//   GET /authorize   checks client_id and redirect_uri (exactly a registered one) → else 400 JSON, no redirect; then
//                    response_type=code, code_challenge (43 base64url chars) with code_challenge_method=S256, state,
//                    resource (an absolute URI without fragment) → else a redirect with error, error_description,
//                    state, iss. Success: 302 at once to redirect_uri?code=&state=&iss=. Codes: one use, 60 s, bound
//                    to client_id, redirect_uri, code_challenge, scope (granted as asked) and resource.
//   POST /token      form-encoded only; one client authentication: Basic base64(urlencode(id):urlencode(secret)),
//                    client_id + client_secret in the form, client_id alone (none), or client_assertion_type
//                    jwt-bearer + client_assertion (ES256, RS256 or EdDSA; iss = sub = client_id, aud the issuer or
//                    the token endpoint, exp in the future, a jti not seen before) — it must be the client's method.
//                    Grants: authorization_code (code, redirect_uri, code_verifier, resource as at /authorize),
//                    refresh_token (resource as at /authorize; scope optional, a subset; rotates; reusing a used
//                    refresh token, or a used code, revokes every refresh token of that authorization → 400
//                    invalid_grant), client_credentials (a confidential client; scope optional; resource required;
//                    no refresh token), jwt-bearer (RFC 7523, listed in grant_types_supported; below). Errors:
//                    {error, error_description}, 400 (401 invalid_client). Success: {access_token, token_type:
//                    "Bearer", expires_in, refresh_token?, scope}, Cache-Control: no-store. A refresh token comes only
//                    when the client's grant_types list refresh_token (pre-registered and CIMD clients: always), and
//                    never in mode no-refresh.
//                    jwt-bearer with assertion = a workload JWT (SEP-1933): no client authentication (client_id
//                    optional, taken as given) or a registered client's; signed by the platform key (else 400
//                    invalid_grant "assertion signature invalid"), aud the issuer or the token endpoint (else
//                    "assertion audience … is not this authorization server"), exp in the future ("assertion
//                    expired"), a sub, a jti no accepted assertion had ("assertion replayed"); iss unchecked;
//                    resource required, scope optional. Or = an ID-JAG (header typ oauth-id-jag+jwt; SEP-990):
//                    client_secret_basic of the pre-registered client, whose id must be the ID-JAG's client_id (else
//                    401 invalid_client); signed by the platform key, iss the IdP, aud the issuer, exp, sub and jti
//                    as above; resource optional, else it must be its resource claim (invalid_grant); scope optional
//                    (default its scope claim). Both: sub the assertion's, resource the audience, no refresh token.
//                    DPoP modes, before anything is checked or spent: a DPoP header must hold one proof valid as
//                    RFC 9449 §4.3 says (typ dpop+jwt, an alg of FAKE_AUTH_DPOP_ALGS, a public jwk it verifies with,
//                    a jti no accepted proof had, htm POST, htu the token endpoint with no query or fragment, iat
//                    within 300 s) else 400 invalid_dpop_proof saying why; dpop-nonce: its nonce the AS nonce.
//                    Its key (jkt: the RFC 7638 SHA-256 thumbprint) then binds the access token (cnf {jkt},
//                    token_type "DPoP") and the refresh token: a refresh without a proof of that key → 400
//                    invalid_grant "refresh token is bound to another key".
//   Access tokens    JWT, header {alg, typ: "at+jwt", kid}; claims iss (the real issuer), sub ("user-1", or the
//                    client_id for client_credentials), aud (the resource, or FAKE_AUTH_AUDIENCE), client_id, scope
//                    (space-separated, "" when none was asked), iat, exp, jti, cnf {jkt} when DPoP-bound. They stay
//                    valid until exp (no introspection): revocation only reaches refresh tokens.
//   POST /idp/token  the IdP: RFC 8693 token exchange for its one client FAKE_AUTH_IDP_CLIENT_ID (its client_id in
//                    the form or Basic; with FAKE_AUTH_IDP_CLIENT_SECRET its secret, basic or post; else 401
//                    invalid_client). grant_type …:token-exchange (else unsupported_grant_type); subject_token,
//                    subject_token_type …:id_token, requested_token_type …:id-jag, audience, resource (an absolute
//                    URI) else 400 invalid_request naming each; audience not the issuer → invalid_target;
//                    subject_token an unexpired ID token of the IdP (platform key, aud the client_id) else
//                    invalid_grant. Success: {access_token: an ID-JAG, issued_token_type …:id-jag, token_type "N_A",
//                    expires_in 300}. The ID-JAG: header {alg ES256, typ oauth-id-jag+jwt, kid}, claims iss (the
//                    IdP), sub (the ID token's), aud (audience), resource, client_id (FAKE_AUTH_XAA_CLIENT_ID),
//                    scope (if asked), jti, iat, exp (300 s).
//   GET /idp/.well-known/openid-configuration  the IdP's metadata (issuer, token_endpoint, jwks_uri)
//   GET /idp/jwks    {keys: [the platform key]}
//   /mcp             mode mcp: an MCP server, JSON answers only. First a token of ours (signed by a JWKS key, exp,
//                    aud http://127.0.0.1:PORT/mcp), else 401 with WWW-Authenticate: Bearer resource_metadata=
//                    "…/.well-known/oauth-protected-resource/mcp" (DPoP modes: DPoP algs="ES256" (FAKE_AUTH_DPOP_ALGS,
//                    space-separated), resource_metadata="…"), with error="invalid_token", error_description="…" when
//                    a token came. A token with cnf.jkt must come as "Authorization: DPoP <token>" with a proof as at
//                    /token but htm the method, htu …/mcp, ath the token's SHA-256, its key the cnf.jkt (else 401 DPoP
//                    error="invalid_dpop_proof", error_description="…"), in dpop-nonce carrying the RS nonce (else 401
//                    DPoP error="use_dpop_nonce", resource_metadata="…" and DPoP-Nonce); an unbound one as Bearer
//                    (as DPoP: 401 invalid_token). POST: initialize → {protocolVersion echoed, capabilities {tools},
//                    serverInfo} and an Mcp-Session-Id (never checked); notifications and responses → 202; ping → {};
//                    tools/list → whoami (no arguments); tools/call whoami → text: the token's sub; else -32601. With
//                    params._meta["io.modelcontextprotocol/protocolVersion"] "2026-07-28" (stateless, resultType
//                    "complete"): server/discover → {supportedVersions ["2026-07-28"], capabilities {tools}}, tools/*,
//                    else -32601. DELETE → 200; GET → 405.
//   GET /.well-known/oauth-protected-resource and …/mcp  mode mcp: {resource: http://127.0.0.1:PORT/mcp,
//                    authorization_servers: [issuer]} (DPoP modes: dpop_signing_alg_values_supported; dpop-required:
//                    dpop_bound_access_tokens_required: true).
//   GET /jwks        {keys: [{kty, crv/x/y or n/e, kid, alg, use: "sig"}]}
//   POST /_rotate    a new signing key (new kid) → {kid, kids}: the JWKS then serves the old and the new (rotate-drop:
//                    only the new), to test a resource server that refetches the JWKS for an unknown kid.
//   POST /_mint      JSON {sub?, aud?, scope?, client_id?, iss?, exp_in?, nbf_in?, alg?, kid?, typ?, sign_with?, claims?}
//                    → {access_token}: a JWT minted directly. Defaults: sub user-1, aud FAKE_AUTH_AUDIENCE (else no
//                    aud), scope all of FAKE_AUTH_SCOPES, client_id "minted", iss the issuer, exp now + FAKE_AUTH_TTL;
//                    a field given as null is left out; exp_in/nbf_in are seconds from now (negative: the past);
//                    sign_with "current" (default) or "foreign" (a key of FAKE_AUTH_ALG not in the JWKS); alg, kid
//                    and typ (default at+jwt) only change the header (alg "none" leaves the signature empty); claims
//                    are merged in last. cnf (e.g. {jkt}) is the claim as given; dpop_jwk (a public JWK) makes it
//                    {jkt: its thumbprint}: a DPoP-bound token.
//   POST /_assertion JSON {sub?, aud?, exp_in?, iss?, jti?, sign_with?, claims?} → text/plain: a workload JWT signed by
//                    the platform key, header typ JWT. Defaults: iss https://platform.example, sub workload, aud the
//                    issuer, exp in 300 s, iat, a random jti; null leaves a claim out; sign_with "foreign": an ES256
//                    key known nowhere; claims are merged in last.
//   POST /_id_token  the same for an ID token of the IdP: iss http://127.0.0.1:PORT/idp, sub user@example.com, aud
//                    FAKE_AUTH_IDP_CLIENT_ID.
//   GET /_nonce      {as, rs}: the DPoP nonces dpop-nonce demands; POST /_nonce changes both first.
//   GET /_log        a JSON array of every request but the /_ ones, oldest first (below); POST /_reset empties it
//                    (keys, clients, codes and refresh tokens stay).
//
// A log entry: {method, path (with query), headers (names lower-case), body (the form or JSON as an object, else the
// text, else null), time (ms since the epoch), status, error? (the OAuth error code we answered), kind:
// "metadata" | "jwks" | "register" | "authorize" | "token" | "idp-token" | "mcp" | "other"}, plus for kind
//   register   client_id (issued), token_endpoint_auth_method (granted)
//   authorize  client_id, scope (null if absent), resource (null if absent), state (true if present),
//              code_challenge_method (null if absent), code (hashed, when one was issued)
//   token      grant_type, client_id, clientAuth ("basic" | "post" | "none" | "private_key_jwt" | "bad"; null when the
//              request was refused before), pkceOk (authorization_code with a known code, else null), resource (null
//              if absent), scope and token_type (on success), reuse: true (a used code or refresh token came back),
//              assertionType ("workload" | "id-jag": jwt-bearer)
//   idp-token  grant_type, client_id, clientAuth, subject_token_type, requested_token_type, audience, resource
//   mcp        (mode mcp; else /mcp is "other") rpc (the JSON-RPC method), sub (the token's, once accepted)
// and for token and mcp: scheme (of the Authorization header, as sent, or null) and proof (null without a DPoP
// header, else {jti, htm, htu, iat (null when absent), ath, nonce (true when present), jkt (of its jwk, or null),
// problem (why it was refused, null once it passed; absent when not checked)}).
// Secrets never reach the log: the values of authorization (after its scheme), dpop, client_secret, code,
// code_verifier, refresh_token, client_assertion, access_token, assertion, subject_token and actor_token (in bodies and
// queries) become "sha:" + the first 8 hex digits of their SHA-256, so a test can still compare them.
import { Buffer } from "node:buffer";
import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";

// deno-lint-ignore no-explicit-any
type Json = any;

const KNOWN = "oidc-only path-oidc-only wrong-issuer no-dcr no-pkce cimd require-app-type iss-missing iss-wrong " +
  "iss-slash iss-unadvertised deny no-refresh no-exp rotate-drop jwt-bearer-unauthorized dpop dpop-nonce " +
  "dpop-required spend-first mcp";
const modes = new Set((process.env.FAKE_AUTH_MODE ?? "").split(",").map((mode) => mode.trim()).filter(Boolean));
const has = (mode: string) => modes.has(mode);
const note = (text: string) => process.stderr.write(`fake-auth: ${text}\n`);
for (const mode of modes) {
  if (!KNOWN.split(" ").includes(mode)) {
    note(`unknown FAKE_AUTH_MODE ${mode}; known: ${KNOWN}`);
    process.exit(2);
  }
}

const env = process.env;
const METHODS = (env.FAKE_AUTH_METHODS ?? "none,client_secret_basic,client_secret_post,private_key_jwt")
  .split(",").map((method) => method.trim()).filter(Boolean);
const SCOPES = (env.FAKE_AUTH_SCOPES ?? "mcp:read mcp:write offline_access").split(/[\s,]+/).filter(Boolean);
const TTL = Number(env.FAKE_AUTH_TTL ?? 3600);
const ALG = env.FAKE_AUTH_ALG ?? "ES256";
const AUDIENCE = env.FAKE_AUTH_AUDIENCE;
const PREFIX = (env.FAKE_AUTH_ISSUER_PATH ?? "").replace(/\/+$/, "").replace(/^(?=[^/])/, "/");
const CODE_TTL = 60;
const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
const JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"; // RFC 7523 §2.1: workload JWTs and ID-JAGs
const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"; // RFC 8693
const ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token";
const ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag";
const ID_JAG_TYP = "oauth-id-jag+jwt";
const PLATFORM_TTL = 300; // workload JWTs, ID tokens and ID-JAGs
const IDP_CLIENT_ID = env.FAKE_AUTH_IDP_CLIENT_ID ?? "idp-client";
const IDP_CLIENT_SECRET = env.FAKE_AUTH_IDP_CLIENT_SECRET || undefined;
const XAA_CLIENT_ID = env.FAKE_AUTH_XAA_CLIENT_ID ?? "xaa-client";
const IDP_CLIENT: Client = {
  id: IDP_CLIENT_ID,
  secret: IDP_CLIENT_SECRET,
  methods: IDP_CLIENT_SECRET ? ["client_secret_basic", "client_secret_post"] : ["none"],
  jwks: [],
};
const DPOP = has("dpop") || has("dpop-nonce") || has("dpop-required");
const DPOP_ALGS = (env.FAKE_AUTH_DPOP_ALGS ?? "ES256").split(",").map((alg) => alg.trim()).filter(Boolean);
const SECRET_FIELDS = [
  "client_secret",
  "code",
  "code_verifier",
  "refresh_token",
  "client_assertion",
  "access_token",
  "assertion",
  "subject_token",
  "actor_token",
];
const FULL: Record<string, string> = { basic: "client_secret_basic", post: "client_secret_post" }; // else the same
const KINDS: Record<string, string> = {
  "/register": "register",
  "/authorize": "authorize",
  "/token": "token",
  "/idp/token": "idp-token",
  ...(has("mcp") && { "/mcp": "mcp" }),
};

let origin = ""; // http://127.0.0.1:PORT, once listening
let issuer = ""; // origin + PREFIX
const now = () => Math.floor(Date.now() / 1000);
const random = (bytes = 32) => randomBytes(bytes).toString("base64url");
const b64url = (data: Uint8Array | string) => Buffer.from(data).toString("base64url");
const unb64url = (text: string) => new Uint8Array(Buffer.from(text, "base64url"));
const sha256 = (text: string) => createHash("sha256").update(text).digest();
const fingerprint = (value: string) => `sha:${sha256(value).toString("hex").slice(0, 8)}`;

// --- Keys and JWTs (WebCrypto) --------------------------------------------------------------------------------------

// Per JWS alg: the WebCrypto parameters to generate, import and sign, and the JWK kty.
const ALGS: Record<string, { gen: Json; imp: Json; sign: Json; kty: string }> = {
  ES256: {
    gen: { name: "ECDSA", namedCurve: "P-256" },
    imp: { name: "ECDSA", namedCurve: "P-256" },
    sign: { name: "ECDSA", hash: "SHA-256" },
    kty: "EC",
  },
  RS256: {
    gen: { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
    imp: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
    sign: { name: "RSASSA-PKCS1-v1_5" },
    kty: "RSA",
  },
  EdDSA: { gen: { name: "Ed25519" }, imp: { name: "Ed25519" }, sign: { name: "Ed25519" }, kty: "OKP" },
};
if (!ALGS[ALG]) {
  note(`unknown FAKE_AUTH_ALG ${ALG}; known: ${Object.keys(ALGS).join(" ")}`);
  process.exit(2);
}

type Key = { kid: string; alg: string; privateKey: CryptoKey; publicKey: CryptoKey; jwk: Json };
const keyTag = randomBytes(3).toString("hex"); // so two fake ASes never share a kid
let keyCount = 0;
async function newKey(alg: string, name?: string): Promise<Key> {
  const pair = await crypto.subtle.generateKey(ALGS[alg].gen, true, ["sign", "verify"]) as CryptoKeyPair;
  const { kty, crv, x, y, n, e } = await crypto.subtle.exportKey("jwk", pair.publicKey);
  const kid = name ?? `key-${++keyCount}-${keyTag}`;
  const jwk = { kty, crv, x, y, n, e, kid, alg, use: "sig" };
  return { kid, alg, privateKey: pair.privateKey, publicKey: pair.publicKey, jwk };
}
let keys: Key[] = []; // served in the JWKS
let current: Key; // signs access tokens
let foreign: Key | undefined; // never in the JWKS (/_mint sign_with: "foreign")
let platform: Key; // ES256, never in the JWKS: workload JWTs, ID tokens, ID-JAGs (/idp/jwks)
let foreignPlatform: Key | undefined; // ES256, nowhere (/_assertion, /_id_token sign_with: "foreign")

async function signJwt(header: Json, claims: Json, key: Key): Promise<string> {
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
  if (header.alg === "none") return `${input}.`;
  const signature = await crypto.subtle.sign(ALGS[key.alg].sign, key.privateKey, new TextEncoder().encode(input));
  return `${input}.${b64url(new Uint8Array(signature))}`;
}

function decodeJwt(jwt: string): { header: Json; claims: Json; parts: string[] } | undefined {
  const parts = jwt.split(".");
  if (parts.length !== 3) return undefined;
  try {
    const [header, claims] = parts.slice(0, 2).map((part) => JSON.parse(Buffer.from(part, "base64url").toString()));
    return { header, claims, parts };
  } catch {
    return undefined;
  }
}

// Why a private_key_jwt client assertion fails, or undefined when it is good.
const seenJtis = new Set<string>();
async function assertionProblem(jwt: string, clientId: string, jwks: Json[]): Promise<string | undefined> {
  const decoded = decodeJwt(jwt);
  if (!decoded) return "client_assertion is not a JWS";
  const { header, claims, parts } = decoded;
  const spec = ALGS[header.alg];
  if (!spec) return `client_assertion alg ${header.alg} not accepted`;
  const jwk = jwks.find((k) =>
    k.kty === spec.kty && (header.kid === undefined || [undefined, header.kid].includes(k.kid))
  );
  if (!jwk) return `no registered ${spec.kty} key${header.kid ? ` with kid ${header.kid}` : ""}`;
  const { kty, crv, x, y, n, e } = jwk;
  let ok = false;
  try {
    const key = await crypto.subtle.importKey("jwk", { kty, crv, x, y, n, e }, spec.imp, false, ["verify"]);
    const input = new TextEncoder().encode(`${parts[0]}.${parts[1]}`);
    ok = await crypto.subtle.verify(spec.sign, key, unb64url(parts[2]), input);
  } catch (error) {
    return `client_assertion key unusable: ${(error as Error).message}`;
  }
  if (!ok) return "client_assertion signature invalid";
  if (claims.iss !== clientId || claims.sub !== clientId) return "client_assertion iss and sub must be the client_id";
  const audience = [claims.aud].flat();
  if (!audience.includes(issuer) && !audience.includes(`${origin}/token`)) {
    return "client_assertion aud must be the issuer or the token endpoint";
  }
  if (typeof claims.exp !== "number" || claims.exp <= now()) return "client_assertion has no exp or is expired";
  if (claims.jti !== undefined) {
    if (seenJtis.has(claims.jti)) return "client_assertion jti replayed";
    seenJtis.add(claims.jti);
  }
  return undefined;
}

const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);

// The JWT's header and claims when it is signed by `key` (its alg, whatever its kid), else undefined.
async function signedBy(jwt: string, key: Key): Promise<{ header: Json; claims: Json } | undefined> {
  const decoded = decodeJwt(jwt);
  if (!decoded || !isObject(decoded.header) || !isObject(decoded.claims) || decoded.header.alg !== key.alg) {
    return undefined;
  }
  const { header, claims, parts } = decoded;
  try {
    const input = new TextEncoder().encode(`${parts[0]}.${parts[1]}`);
    return await crypto.subtle.verify(ALGS[key.alg].sign, key.publicKey, unb64url(parts[2]), input)
      ? { header, claims }
      : undefined;
  } catch {
    return undefined;
  }
}

const audiences = (claims: Json): unknown[] => [claims.aud].flat();

// --- DPoP (RFC 9449) ------------------------------------------------------------------------------------------------

// The asymmetric algs a proof may use (those of FAKE_AUTH_DPOP_ALGS we can verify), their WebCrypto parameters.
const PROOF_ALGS: Record<string, { imp: Json; verify: Json; kty: string }> = {
  ES256: {
    imp: { name: "ECDSA", namedCurve: "P-256" },
    verify: { name: "ECDSA", hash: "SHA-256" },
    kty: "EC",
  },
  ES384: {
    imp: { name: "ECDSA", namedCurve: "P-384" },
    verify: { name: "ECDSA", hash: "SHA-384" },
    kty: "EC",
  },
  RS256: { imp: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, verify: { name: "RSASSA-PKCS1-v1_5" }, kty: "RSA" },
  PS256: { imp: { name: "RSA-PSS", hash: "SHA-256" }, verify: { name: "RSA-PSS", saltLength: 32 }, kty: "RSA" },
  EdDSA: { imp: { name: "Ed25519" }, verify: { name: "Ed25519" }, kty: "OKP" },
};
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];
const PROOF_WINDOW = 300; // s either side of now for iat
const proofJtis = new Set<string>(); // of every accepted proof, at /token and /mcp
const nonces = { as: random(16), rs: random(16) }; // dpop-nonce: what /token and /mcp demand

// RFC 7638: the SHA-256 thumbprint of a public JWK (its required members, in order), or undefined.
function thumbprint(jwk: unknown): string | undefined {
  if (!isObject(jwk)) return undefined;
  const members = ({ EC: ["crv", "kty", "x", "y"], RSA: ["e", "kty", "n"], OKP: ["crv", "kty", "x"] } as Json)[jwk.kty];
  if (!members || members.some((name: string) => typeof jwk[name] !== "string")) return undefined;
  return b64url(sha256(JSON.stringify(Object.fromEntries(members.map((name: string) => [name, jwk[name]])))));
}
const headerText = (value: string | string[] | undefined) => Array.isArray(value) ? value.join(", ") : value;

// What the log keeps of a DPoP proof (unverified): never the proof itself.
function proofSummary(text: string | undefined): Json {
  if (text === undefined) return null;
  const decoded = decodeJwt(text);
  const header = isObject(decoded?.header) ? decoded!.header : {};
  const claims = isObject(decoded?.claims) ? decoded!.claims : {};
  const field = (value: unknown) => value === undefined ? null : value;
  return {
    jti: field(claims.jti),
    htm: field(claims.htm),
    htu: field(claims.htu),
    iat: field(claims.iat),
    ath: claims.ath !== undefined,
    nonce: claims.nonce !== undefined,
    jkt: thumbprint(header.jwk) ?? null,
  };
}

// RFC 9449 §4.3: why the proof in a DPoP header fails for `method` at `url` (the access token's hash in ath and the
// key it is bound to, when given), or its claims and the thumbprint of its key. The nonce is the caller's to check.
async function checkProof(
  text: string,
  method: string,
  url: string,
  bound: { token?: string; jkt?: string } = {},
): Promise<{ problem: string } | { jkt: string; claims: Json }> {
  const fail = (problem: string) => ({ problem });
  if (text.includes(",")) return fail("more than one DPoP header");
  const decoded = decodeJwt(text.trim());
  if (!decoded || !isObject(decoded.header) || !isObject(decoded.claims)) return fail("the DPoP proof is not a JWT");
  const { header, claims, parts } = decoded;
  if (header.typ !== "dpop+jwt") return fail(`typ ${header.typ} is not dpop+jwt`);
  const spec = PROOF_ALGS[header.alg];
  if (!spec) return fail(`alg ${header.alg} is not an asymmetric algorithm`);
  if (!DPOP_ALGS.includes(header.alg)) return fail(`alg ${header.alg} is not one of ${DPOP_ALGS.join(" ")}`);
  const jwk = header.jwk;
  if (!isObject(jwk)) return fail("the jwk header is missing");
  if (PRIVATE_MEMBERS.some((name) => name in jwk)) return fail("the jwk is not a public key");
  if (jwk.kty !== spec.kty) return fail(`a jwk of kty ${jwk.kty} cannot verify ${header.alg}`);
  let ok = false;
  try {
    const { kty, crv, x, y, n, e } = jwk;
    const key = await crypto.subtle.importKey("jwk", { kty, crv, x, y, n, e }, spec.imp, false, ["verify"]);
    ok = await crypto.subtle.verify(
      spec.verify,
      key,
      unb64url(parts[2]),
      new TextEncoder().encode(`${parts[0]}.${parts[1]}`),
    );
  } catch (error) {
    return fail(`the jwk is unusable: ${(error as Error).message}`);
  }
  if (!ok) return fail("the signature does not verify with the jwk");
  if (typeof claims.jti !== "string" || !claims.jti) return fail("jti is missing");
  if (claims.htm !== method) return fail(`htm ${claims.htm} is not ${method}`);
  const htu = parse(claims.htu);
  if (typeof claims.htu !== "string" || !htu) return fail("htu is not an absolute URL");
  if (/[?#]/.test(claims.htu)) return fail("htu has a query or fragment");
  if (htu.origin + htu.pathname !== url) return fail(`htu ${claims.htu} is not ${url}`);
  if (typeof claims.iat !== "number") return fail("iat is missing");
  if (Math.abs(claims.iat - now()) > PROOF_WINDOW) return fail(`iat is more than ${PROOF_WINDOW} s from now`);
  if (bound.token !== undefined) {
    if (claims.ath === undefined) return fail("ath is missing");
    if (claims.ath !== b64url(sha256(bound.token))) return fail("ath is not the hash of the access token");
  }
  const jkt = thumbprint(jwk)!;
  if (bound.jkt !== undefined && jkt !== bound.jkt) return fail("the proof key is not the one the token is bound to");
  if (proofJtis.has(claims.jti)) return fail("jti replayed");
  proofJtis.add(claims.jti);
  return { jkt, claims };
}

// --- State ----------------------------------------------------------------------------------------------------------

type Client = {
  id: string;
  secret?: string;
  methods: string[]; // token endpoint auth methods it may use
  redirects?: string[]; // exact redirect_uris; undefined: any loopback (pre-registered, CIMD)
  grants?: string[]; // undefined: any
  jwks: Json[];
};
const clients = new Map<string, Client>();
type Grant = { clientId: string; scope: string; resource: string; family: string }; // family: one authorization
type Code = Grant & { redirectUri: string; challenge: string; expires: number; used: boolean };
const codes = new Map<string, Code>();
const refreshTokens = new Map<string, Grant & { used: boolean; jkt?: string }>(); // jkt: bound to a DPoP key
const spentAssertions = new Set<string>(); // jti of every accepted jwt-bearer assertion
const revoked = new Set<string>(); // families

function parseJwks(text: string | undefined): Json[] {
  if (!text) return [];
  const parsed = JSON.parse(text);
  return Array.isArray(parsed?.keys) ? parsed.keys : [parsed];
}
if (env.FAKE_AUTH_CLIENT_ID) {
  const secret = env.FAKE_AUTH_CLIENT_SECRET || undefined;
  const jwks = parseJwks(env.FAKE_AUTH_CLIENT_JWK);
  const can = [
    ...(secret ? ["client_secret_basic", "client_secret_post"] : []),
    ...(jwks.length ? ["private_key_jwt"] : []),
  ];
  const methods = (can.length ? can : ["none"]).filter((method) => METHODS.includes(method));
  if (!methods.length) note(`the pre-registered client can use none of FAKE_AUTH_METHODS ${METHODS.join(",")}`);
  clients.set(env.FAKE_AUTH_CLIENT_ID, { id: env.FAKE_AUTH_CLIENT_ID, secret, methods, jwks });
}

// The URL, or undefined when it is not an absolute URL with no fragment.
const parse = (uri: unknown) => {
  try {
    return typeof uri === "string" && !uri.includes("#") ? new URL(uri) : undefined;
  } catch {
    return undefined;
  }
};
const LOOPBACK = ["127.0.0.1", "localhost", "[::1]"];
const isLoopback = (uri: unknown) =>
  /^https?:$/.test(parse(uri)?.protocol ?? "") && LOOPBACK.includes(parse(uri)!.hostname);
const isHttpsOrLoopback = (uri: unknown) => isLoopback(uri) || parse(uri)?.protocol === "https:";
const isCimdId = (id: string) => parse(id)?.protocol === "https:" && parse(id)!.pathname !== "/";
const clientOf = (id: string | undefined): Client | undefined =>
  id === undefined
    ? undefined
    : clients.get(id) ?? (has("cimd") && isCimdId(id) ? { id, methods: ["none"], jwks: [] } : undefined);
const redirectAllowed = (client: Client, uri: string | undefined) =>
  uri !== undefined && (client.redirects ? client.redirects.includes(uri) : isLoopback(uri));
const isResource = (value: string) => parse(value) !== undefined;

// --- The log --------------------------------------------------------------------------------------------------------

type Entry = {
  method: string;
  path: string;
  headers: Json;
  body: unknown;
  time: number;
  status?: number;
  error?: string;
  kind: string;
  [derived: string]: unknown;
};
const log: Entry[] = [];

const redactFields = (object: Json) =>
  Object.fromEntries(
    Object.entries(object).map(([name, value]) => [
      name,
      SECRET_FIELDS.includes(name) && typeof value === "string" ? fingerprint(value) : value,
    ]),
  );
function redactPath(path: string): string {
  const url = new URL(path, "http://x");
  if (![...url.searchParams.keys()].some((name) => SECRET_FIELDS.includes(name))) return path;
  for (const name of SECRET_FIELDS) {
    const value = url.searchParams.get(name);
    if (value !== null) url.searchParams.set(name, fingerprint(value));
  }
  return url.pathname + url.search;
}
function redactHeaders(headers: IncomingMessage["headers"]) {
  const copy: Json = { ...headers };
  if (typeof copy.authorization === "string") {
    const [scheme, ...rest] = copy.authorization.split(" ");
    copy.authorization = rest.length ? `${scheme} ${fingerprint(rest.join(" "))}` : fingerprint(scheme);
  }
  if (typeof copy.dpop === "string") copy.dpop = fingerprint(copy.dpop);
  return copy;
}

// --- HTTP plumbing --------------------------------------------------------------------------------------------------

type Ctx = {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  entry: Entry;
  form: Record<string, string>;
  jkt?: string; // the thumbprint of the key of the token request's accepted DPoP proof
};

const json = (res: ServerResponse, status: number, body: unknown, headers: Json = {}) => {
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store", ...headers });
  res.end(JSON.stringify(body));
};
// An OAuth error answered as JSON (RFC 6749 §5.2), noted without any secret.
function oauthError(ctx: Ctx, status: number, error: string, description: string, headers: Json = {}) {
  ctx.entry.error = error;
  note(`${ctx.entry.kind} → ${status} ${error}: ${description}`);
  json(ctx.res, status, { error, error_description: description }, headers);
}

function metadataPaths(): string[] {
  const paths = [
    `/.well-known/oauth-authorization-server${PREFIX}`,
    `/.well-known/openid-configuration${PREFIX}`,
    `${PREFIX}/.well-known/openid-configuration`,
  ];
  if (has("path-oidc-only")) return paths.slice(2);
  return has("oidc-only") ? paths.slice(1) : paths;
}

function metadata(oidc: boolean) {
  return {
    issuer: has("wrong-issuer") ? "https://attacker.example.com" : issuer,
    authorization_endpoint: `${origin}/authorize`,
    token_endpoint: `${origin}/token`,
    ...(!has("no-dcr") && { registration_endpoint: `${origin}/register` }),
    jwks_uri: `${origin}/jwks`,
    response_types_supported: ["code"],
    grant_types_supported: ["authorization_code", "refresh_token", "client_credentials", JWT_GRANT],
    ...(!has("no-pkce") && { code_challenge_methods_supported: ["S256"] }),
    token_endpoint_auth_methods_supported: METHODS,
    ...(METHODS.includes("private_key_jwt") &&
      { token_endpoint_auth_signing_alg_values_supported: Object.keys(ALGS) }),
    scopes_supported: SCOPES,
    ...(!has("iss-unadvertised") && { authorization_response_iss_parameter_supported: true }),
    ...(has("cimd") && { client_id_metadata_document_supported: true }),
    ...(oidc && { subject_types_supported: ["public"], id_token_signing_alg_values_supported: [ALG] }),
    ...(DPOP && { dpop_signing_alg_values_supported: DPOP_ALGS }),
  };
}

// The IdP's own metadata (OIDC discovery at its issuer).
function idpMetadata() {
  return {
    issuer: `${origin}/idp`,
    token_endpoint: `${origin}/idp/token`,
    jwks_uri: `${origin}/idp/jwks`,
    grant_types_supported: [TOKEN_EXCHANGE],
    token_endpoint_auth_methods_supported: IDP_CLIENT_SECRET ? ["client_secret_basic", "client_secret_post"] : ["none"],
    subject_types_supported: ["public"],
    id_token_signing_alg_values_supported: ["ES256"],
  };
}

// --- Registration and authorization ---------------------------------------------------------------------------------

function register(ctx: Ctx, body: unknown) {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return oauthError(ctx, 400, "invalid_client_metadata", "the body must be an application/json object");
  }
  const request = body as Json;
  const redirects = request.redirect_uris;
  if (!Array.isArray(redirects) || !redirects.length || !redirects.every(isHttpsOrLoopback)) {
    return oauthError(ctx, 400, "invalid_redirect_uri", "redirect_uris must be loopback http or https URLs");
  }
  if (has("require-app-type") && !["native", "web"].includes(request.application_type)) {
    return oauthError(ctx, 400, "invalid_client_metadata", 'application_type must be "native" or "web"');
  }
  const asked = request.token_endpoint_auth_method ?? "client_secret_basic";
  const method = METHODS.includes(asked) ? asked : METHODS[0];
  const jwks = Array.isArray(request.jwks?.keys) ? request.jwks.keys : [];
  if (method === "private_key_jwt" && !jwks.length) {
    return oauthError(ctx, 400, "invalid_client_metadata", "private_key_jwt needs jwks {keys}");
  }
  const grants = Array.isArray(request.grant_types) ? request.grant_types : ["authorization_code"];
  const id = `client-${randomBytes(8).toString("hex")}`;
  const secret = ["none", "private_key_jwt"].includes(method) ? undefined : random();
  clients.set(id, { id, secret, methods: [method], redirects, grants, jwks });
  Object.assign(ctx.entry, { client_id: id, token_endpoint_auth_method: method });
  note(`registered a ${method} client${asked === method ? "" : ` (asked for ${asked})`}`);
  const { client_secret: _, ...echo } = request;
  json(ctx.res, 201, {
    ...echo,
    client_id: id,
    ...(secret && { client_secret: secret, client_secret_expires_at: 0 }),
    client_id_issued_at: now(),
    token_endpoint_auth_method: method,
    grant_types: grants,
    response_types: request.response_types ?? ["code"],
  });
}

function authorize(ctx: Ctx) {
  const query = Object.fromEntries(ctx.url.searchParams);
  Object.assign(ctx.entry, {
    client_id: query.client_id ?? null,
    scope: query.scope ?? null,
    resource: query.resource ?? null,
    state: query.state !== undefined,
    code_challenge_method: query.code_challenge_method ?? null,
  });
  const client = clientOf(query.client_id);
  if (!client) return oauthError(ctx, 400, "invalid_client", "unknown client_id");
  if (!redirectAllowed(client, query.redirect_uri)) {
    return oauthError(ctx, 400, "invalid_request", "redirect_uri is not registered for this client");
  }
  const iss = has("iss-missing")
    ? undefined
    : has("iss-wrong")
    ? "https://evil.example.com"
    : has("iss-slash")
    ? `${issuer}/`
    : issuer;
  const back = (params: Record<string, string | undefined>) => {
    const to = new URL(query.redirect_uri);
    for (const [name, value] of Object.entries({ ...params, iss })) {
      if (value !== undefined) to.searchParams.set(name, value);
    }
    ctx.res.writeHead(302, { location: to.href, "cache-control": "no-store" }).end();
  };
  const refuse = (error: string, description: string) => {
    ctx.entry.error = error;
    note(`authorize → redirect with ${error}: ${description}`);
    back({ error, error_description: description, state: query.state });
  };
  if (query.response_type !== "code") return refuse("unsupported_response_type", "response_type must be code");
  if (!/^[A-Za-z0-9_-]{43}$/.test(query.code_challenge ?? "")) {
    return refuse("invalid_request", "code_challenge (43 base64url characters) is required");
  }
  if (query.code_challenge_method !== "S256") return refuse("invalid_request", "code_challenge_method must be S256");
  if (!query.state) return refuse("invalid_request", "state is required");
  if (!query.resource) return refuse("invalid_request", "resource is required");
  if (!isResource(query.resource)) return refuse("invalid_target", "resource must be an absolute URI, no fragment");
  if (has("deny")) return refuse("access_denied", "the user denied the request");
  const code = random();
  codes.set(code, {
    clientId: client.id,
    redirectUri: query.redirect_uri,
    challenge: query.code_challenge,
    scope: query.scope ?? "",
    resource: query.resource,
    family: random(9),
    expires: now() + CODE_TTL,
    used: false,
  });
  ctx.entry.code = fingerprint(code);
  note(`authorize → code for ${client.id}${iss === issuer ? "" : ` (iss ${iss ?? "left out"})`}`);
  back({ code, state: query.state });
}

// --- The token endpoint ---------------------------------------------------------------------------------------------

// The credentials of an Authorization: Basic header (undefined: none; "bad": not urlencode(id):urlencode(secret)).
function basicCredentials(header: string | undefined): { id: string; secret: string } | "bad" | undefined {
  if (header === undefined || !/^basic /i.test(header)) return undefined;
  const decoded = Buffer.from(header.slice(6).trim(), "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  const unform = (text: string) => decodeURIComponent(text.replace(/\+/g, " "));
  try {
    if (colon < 0) throw new Error("no colon");
    return { id: unform(decoded.slice(0, colon)), secret: unform(decoded.slice(colon + 1)) };
  } catch {
    return "bad";
  }
}

// The client and how it authenticated, or why it failed (→ 401 invalid_client); `lookup` finds the clients there are.
async function authenticate(
  ctx: Ctx,
  lookup: (id: string | undefined) => Client | undefined = clientOf,
): Promise<{ client?: Client; method: string; problem?: string }> {
  const { form } = ctx;
  const used: string[] = [];
  const credentials = basicCredentials(ctx.req.headers.authorization);
  if (credentials === "bad") {
    return { method: "basic", problem: "the Basic credentials are not urlencode(id):urlencode(secret)" };
  }
  const basic = credentials;
  if (basic) used.push("basic");
  if (form.client_assertion !== undefined || form.client_assertion_type !== undefined) used.push("private_key_jwt");
  if (form.client_secret !== undefined) used.push("post");
  if (used.length > 1) return { method: used.join("+"), problem: `more than one client authentication: ${used}` };
  const method = used[0] ?? "none";
  const fromAssertion = method === "private_key_jwt" ? decodeJwt(form.client_assertion ?? "")?.claims?.iss : undefined;
  const id = basic?.id ?? form.client_id ?? fromAssertion;
  if (basic && form.client_id !== undefined && form.client_id !== basic.id) {
    return { method, problem: "client_id in the form differs from the Basic one" };
  }
  const client = lookup(id);
  if (!client) return { method, problem: id === undefined ? "no client_id" : "unknown client_id" };
  const full = FULL[method] ?? method;
  if (!client.methods.includes(full)) {
    return { method, problem: `the client must use ${client.methods.join(" or ") || "nothing"}, not ${full}` };
  }
  if (method === "basic" || method === "post") {
    const secret = method === "basic" ? basic!.secret : form.client_secret;
    if (client.secret === undefined || secret !== client.secret) return { method, problem: "wrong client secret" };
  }
  if (method === "private_key_jwt") {
    if (form.client_assertion_type !== JWT_BEARER) {
      return { method, problem: `client_assertion_type is not ${JWT_BEARER}` };
    }
    const problem = await assertionProblem(form.client_assertion ?? "", client.id, client.jwks);
    if (problem) return { method, problem };
  }
  return { client, method };
}

// Answers 401 invalid_client for a failed client authentication.
function refuseClient(ctx: Ctx, auth: { method: string; problem?: string }) {
  ctx.entry.clientAuth = "bad";
  const challenge = auth.method === "basic" ? { "www-authenticate": 'Basic realm="fake-auth"' } : {};
  return oauthError(ctx, 401, "invalid_client", auth.problem ?? "client authentication failed", challenge);
}

// DPoP modes: checks the token request's proof (setting ctx.jkt) and answers when it fails; true when it answered.
async function tokenProof(ctx: Ctx): Promise<boolean> {
  const text = headerText(ctx.req.headers.dpop);
  if (text === undefined) {
    if (!has("dpop-required")) return false;
    oauthError(ctx, 400, "invalid_dpop_proof", "a DPoP proof is required");
    return true;
  }
  const checked = await checkProof(text, "POST", `${origin}/token`);
  const summary = ctx.entry.proof as Json;
  if ("problem" in checked) {
    if (summary) summary.problem = checked.problem;
    oauthError(ctx, 400, "invalid_dpop_proof", checked.problem);
    return true;
  }
  if (summary) summary.problem = null;
  if (has("dpop-nonce") && checked.claims.nonce !== nonces.as) {
    const why = checked.claims.nonce === undefined
      ? "a DPoP nonce is required"
      : "the DPoP nonce is not the current one";
    oauthError(ctx, 400, "use_dpop_nonce", why, { "dpop-nonce": nonces.as });
    return true;
  }
  ctx.jkt = checked.jkt;
  return false;
}

async function token(ctx: Ctx, duplicated: string[], formEncoded: boolean) {
  const { entry, form } = ctx;
  Object.assign(entry, {
    grant_type: form.grant_type ?? null,
    client_id: null,
    clientAuth: null,
    pkceOk: null,
    resource: form.resource ?? null,
  });
  if (!formEncoded) {
    return oauthError(ctx, 400, "invalid_request", "the body must be application/x-www-form-urlencoded");
  }
  if (duplicated.length) return oauthError(ctx, 400, "invalid_request", `repeated parameters: ${duplicated}`);
  // Before anything is spent (a code, a refresh token, an assertion's jti), so a nonce retry finds them intact;
  // spend-first: after the client's authentication.
  if (DPOP && !has("spend-first") && await tokenProof(ctx)) return;
  if (form.grant_type === JWT_GRANT) return await jwtBearer(ctx);
  const auth = await authenticate(ctx);
  if (!auth.client) return refuseClient(ctx, auth);
  if (DPOP && has("spend-first") && await tokenProof(ctx)) return;
  const client = auth.client;
  Object.assign(entry, { client_id: client.id, clientAuth: auth.method });
  const grantAllowed = (grant: string) => !client.grants || client.grants.includes(grant);
  const needResource = (expected?: string) => {
    if (!form.resource) return "resource is required";
    if (expected !== undefined && form.resource !== expected) return "resource differs from the authorization's";
    return isResource(form.resource) ? undefined : "resource must be an absolute URI, no fragment";
  };
  switch (form.grant_type) {
    case "authorization_code": {
      const code = codes.get(form.code ?? "");
      if (!code) return oauthError(ctx, 400, "invalid_grant", "unknown code");
      const verifier = form.code_verifier ?? "";
      entry.pkceOk = /^[A-Za-z0-9._~-]{43,128}$/.test(verifier) && b64url(sha256(verifier)) === code.challenge;
      if (code.used) {
        entry.reuse = true;
        revoked.add(code.family);
        return oauthError(ctx, 400, "invalid_grant", "code already used; its tokens are revoked");
      }
      if (code.expires < now()) return oauthError(ctx, 400, "invalid_grant", "code expired");
      if (code.clientId !== client.id) {
        return oauthError(ctx, 400, "invalid_grant", "code was issued to another client");
      }
      if (form.redirect_uri !== code.redirectUri) {
        return oauthError(ctx, 400, "invalid_grant", "redirect_uri differs from the authorization request's");
      }
      if (!entry.pkceOk) return oauthError(ctx, 400, "invalid_grant", "PKCE verification failed");
      const problem = needResource(code.resource);
      if (problem) return oauthError(ctx, 400, form.resource ? "invalid_target" : "invalid_request", problem);
      code.used = true;
      return await issue(ctx, client, "user-1", code.scope, code.resource, code.family);
    }
    case "refresh_token": {
      const old = refreshTokens.get(form.refresh_token ?? "");
      if (!old) return oauthError(ctx, 400, "invalid_grant", "unknown refresh token");
      if (old.clientId !== client.id) return oauthError(ctx, 400, "invalid_grant", "refresh token of another client");
      if (old.jkt !== undefined && old.jkt !== ctx.jkt) {
        return oauthError(ctx, 400, "invalid_grant", "refresh token is bound to another key");
      }
      if (old.used) {
        entry.reuse = true;
        revoked.add(old.family);
        return oauthError(ctx, 400, "invalid_grant", "refresh token reused; the whole family is revoked");
      }
      if (revoked.has(old.family)) return oauthError(ctx, 400, "invalid_grant", "refresh token revoked");
      const problem = needResource(old.resource);
      if (problem) return oauthError(ctx, 400, form.resource ? "invalid_target" : "invalid_request", problem);
      const granted = old.scope.split(" ");
      const scope = form.scope ?? old.scope;
      if (!scope.split(" ").filter(Boolean).every((s) => granted.includes(s))) {
        return oauthError(ctx, 400, "invalid_scope", "scope exceeds the original grant");
      }
      old.used = true;
      return await issue(ctx, client, "user-1", scope, old.resource, old.family, old.scope);
    }
    case "client_credentials": {
      if (auth.method === "none") {
        return oauthError(ctx, 400, "unauthorized_client", "client_credentials needs a confidential client");
      }
      if (!grantAllowed("client_credentials")) {
        return oauthError(ctx, 400, "unauthorized_client", "client_credentials is not among the client's grant_types");
      }
      const problem = needResource();
      if (problem) return oauthError(ctx, 400, form.resource ? "invalid_target" : "invalid_request", problem);
      return await issue(ctx, client, client.id, form.scope ?? "", form.resource);
    }
  }
  return oauthError(ctx, 400, "unsupported_grant_type", `grant_type ${form.grant_type ?? "(missing)"} not supported`);
}

// RFC 7523 §2.1 jwt-bearer: a workload JWT of the platform (SEP-1933), or an ID-JAG of our IdP (SEP-990).
async function jwtBearer(ctx: Ctx) {
  const { entry, form } = ctx;
  if (has("jwt-bearer-unauthorized")) {
    return oauthError(ctx, 400, "unauthorized_client", "the client may not use the jwt-bearer grant");
  }
  if (!form.assertion) return oauthError(ctx, 400, "invalid_request", "assertion is required");
  const unverified = decodeJwt(form.assertion);
  const idJag = isObject(unverified?.header) && unverified!.header.typ === ID_JAG_TYP;
  entry.assertionType = idJag ? "id-jag" : "workload";
  let client: Client;
  const secretless = basicCredentials(ctx.req.headers.authorization) === undefined &&
    form.client_secret === undefined &&
    form.client_assertion === undefined && form.client_assertion_type === undefined;
  if (!idJag && secretless && !clientOf(form.client_id)) {
    // No client authentication: a workload needs none (its client_id, if any, is taken as given).
    client = { id: form.client_id ?? "", methods: ["none"], jwks: [] };
    Object.assign(entry, { client_id: form.client_id ?? null, clientAuth: "none" });
  } else {
    const auth = await authenticate(ctx);
    if (!auth.client) return refuseClient(ctx, auth);
    client = auth.client;
    Object.assign(entry, { client_id: client.id, clientAuth: auth.method });
  }
  if (idJag) {
    const claimed = isObject(unverified!.claims) ? unverified!.claims.client_id : undefined;
    const used = FULL[String(entry.clientAuth)] ?? entry.clientAuth;
    const problem = entry.clientAuth !== "basic"
      ? `an ID-JAG needs client_secret_basic, not ${used}`
      : client.id !== env.FAKE_AUTH_CLIENT_ID
      ? "an ID-JAG needs the pre-registered client"
      : claimed !== client.id
      ? `the ID-JAG was issued to client ${claimed}, not ${client.id}`
      : undefined;
    if (problem) {
      entry.clientAuth = "bad";
      return oauthError(ctx, 401, "invalid_client", problem);
    }
  }
  const verified = await signedBy(form.assertion, platform);
  if (!verified) {
    return oauthError(ctx, 400, "invalid_grant", unverified ? "assertion signature invalid" : "assertion is not a JWT");
  }
  const { claims } = verified;
  if (idJag && claims.iss !== `${origin}/idp`) {
    return oauthError(ctx, 400, "invalid_grant", `ID-JAG issuer ${claims.iss} is not our IdP ${origin}/idp`);
  }
  const aud = audiences(claims);
  if (!aud.includes(issuer) && (idJag || !aud.includes(`${origin}/token`))) {
    const description = `assertion audience ${JSON.stringify(claims.aud)} is not this authorization server`;
    return oauthError(ctx, 400, "invalid_grant", description);
  }
  if (typeof claims.exp !== "number") return oauthError(ctx, 400, "invalid_grant", "assertion has no exp");
  if (claims.exp <= now()) return oauthError(ctx, 400, "invalid_grant", "assertion expired");
  if (typeof claims.nbf === "number" && claims.nbf > now()) {
    return oauthError(ctx, 400, "invalid_grant", "assertion not yet valid (nbf)");
  }
  if (typeof claims.sub !== "string" || !claims.sub) {
    return oauthError(ctx, 400, "invalid_grant", "assertion has no sub");
  }
  if (typeof claims.jti !== "string" || !claims.jti) {
    return oauthError(ctx, 400, "invalid_grant", "assertion has no jti");
  }
  if (spentAssertions.has(claims.jti)) return oauthError(ctx, 400, "invalid_grant", "assertion replayed");
  let resource = form.resource;
  if (idJag) {
    if (typeof claims.resource !== "string" || !isResource(claims.resource)) {
      return oauthError(ctx, 400, "invalid_grant", "the ID-JAG has no resource");
    }
    if (resource !== undefined && resource !== claims.resource) {
      return oauthError(ctx, 400, "invalid_grant", "resource differs from the ID-JAG's");
    }
    resource = claims.resource;
  } else {
    if (!resource) return oauthError(ctx, 400, "invalid_request", "resource is required");
    if (!isResource(resource)) {
      return oauthError(ctx, 400, "invalid_target", "resource must be an absolute URI, no fragment");
    }
  }
  spentAssertions.add(claims.jti);
  const scope = form.scope ?? (idJag && typeof claims.scope === "string" ? claims.scope : "");
  if (!client.id) client = { ...client, id: claims.sub };
  return await issue(ctx, client, claims.sub, scope, resource!);
}

// Answers a token request: a fresh access token, and a refresh token when family is given (unless no-refresh).
async function issue(
  ctx: Ctx,
  client: Client,
  sub: string,
  scope: string,
  resource: string,
  family?: string,
  familyScope = scope,
) {
  const iat = now();
  const claims = {
    iss: issuer,
    sub,
    aud: AUDIENCE ?? resource,
    client_id: client.id,
    scope,
    iat,
    ...(!has("no-exp") && { exp: iat + TTL }),
    jti: random(12),
    ...(ctx.jkt && { cnf: { jkt: ctx.jkt } }),
  };
  const accessToken = await signJwt({ alg: current.alg, typ: "at+jwt", kid: current.kid }, claims, current);
  let refreshToken: string | undefined;
  if (family !== undefined && !has("no-refresh") && (!client.grants || client.grants.includes("refresh_token"))) {
    refreshToken = random();
    const grant = { clientId: client.id, scope: familyScope, resource, family, used: false, jkt: ctx.jkt };
    refreshTokens.set(refreshToken, grant);
  }
  const tokenType = ctx.jkt ? "DPoP" : "Bearer";
  Object.assign(ctx.entry, { scope, token_type: tokenType });
  note(
    `token → ${ctx.jkt ? "DPoP-bound " : ""}access token for ${sub}${refreshToken ? " and a refresh token" : ""}, ` +
      `scope "${scope}"`,
  );
  json(ctx.res, 200, {
    access_token: accessToken,
    token_type: tokenType,
    expires_in: TTL,
    ...(refreshToken && { refresh_token: refreshToken }),
    scope,
  }, { pragma: "no-cache" });
}

// --- The IdP: token exchange (RFC 8693) of our ID tokens for ID-JAGs (SEP-990) -------------------------------------

async function idpToken(ctx: Ctx, duplicated: string[], formEncoded: boolean) {
  const { entry, form } = ctx;
  Object.assign(entry, {
    grant_type: form.grant_type ?? null,
    client_id: null,
    clientAuth: null,
    subject_token_type: form.subject_token_type ?? null,
    requested_token_type: form.requested_token_type ?? null,
    audience: form.audience ?? null,
    resource: form.resource ?? null,
  });
  if (!formEncoded) {
    return oauthError(ctx, 400, "invalid_request", "the body must be application/x-www-form-urlencoded");
  }
  if (duplicated.length) return oauthError(ctx, 400, "invalid_request", `repeated parameters: ${duplicated}`);
  // The IdP's one client: FAKE_AUTH_IDP_CLIENT_ID, with FAKE_AUTH_IDP_CLIENT_SECRET (basic or post) or none.
  const auth = await authenticate(ctx, (id) => id === IDP_CLIENT_ID ? IDP_CLIENT : undefined);
  if (!auth.client) return refuseClient(ctx, auth);
  const id = auth.client.id;
  Object.assign(entry, { client_id: id, clientAuth: auth.method });
  if (form.grant_type !== TOKEN_EXCHANGE) {
    const description = `grant_type ${form.grant_type ?? "(missing)"} not supported; only ${TOKEN_EXCHANGE}`;
    return oauthError(ctx, 400, "unsupported_grant_type", description);
  }
  const missing = [
    !form.subject_token && "subject_token is required",
    form.subject_token_type !== ID_TOKEN_TYPE && `subject_token_type must be ${ID_TOKEN_TYPE}`,
    form.requested_token_type !== ID_JAG_TYPE && `requested_token_type must be ${ID_JAG_TYPE}`,
    !form.audience && "audience is required",
    !form.resource
      ? "resource is required"
      : !isResource(form.resource) && "resource must be an absolute URI, no fragment",
  ].filter(Boolean);
  if (missing.length) return oauthError(ctx, 400, "invalid_request", missing.join("; "));
  if (form.audience !== issuer) {
    return oauthError(
      ctx,
      400,
      "invalid_target",
      `audience ${form.audience} is not the authorization server ${issuer}`,
    );
  }
  const verified = await signedBy(form.subject_token, platform);
  if (!verified) {
    const description = decodeJwt(form.subject_token)
      ? "subject_token signature invalid"
      : "subject_token is not a JWT";
    return oauthError(ctx, 400, "invalid_grant", description);
  }
  const { claims } = verified;
  if (claims.iss !== `${origin}/idp`) {
    return oauthError(ctx, 400, "invalid_grant", `subject_token issuer ${claims.iss} is not this IdP ${origin}/idp`);
  }
  if (!audiences(claims).includes(id)) {
    const description = `subject_token audience ${JSON.stringify(claims.aud)} is not the client ${id}`;
    return oauthError(ctx, 400, "invalid_grant", description);
  }
  if (typeof claims.exp !== "number" || claims.exp <= now()) {
    return oauthError(ctx, 400, "invalid_grant", "subject_token has no exp or is expired");
  }
  if (typeof claims.sub !== "string" || !claims.sub) {
    return oauthError(ctx, 400, "invalid_grant", "subject_token has no sub");
  }
  const iat = now();
  const jag = {
    iss: `${origin}/idp`,
    sub: claims.sub,
    aud: form.audience,
    resource: form.resource,
    client_id: XAA_CLIENT_ID,
    ...(form.scope && { scope: form.scope }),
    jti: random(12),
    iat,
    exp: iat + PLATFORM_TTL,
  };
  const idJag = await signJwt({ alg: platform.alg, typ: ID_JAG_TYP, kid: platform.kid }, jag, platform);
  note(`idp token → an ID-JAG for ${claims.sub}, client ${XAA_CLIENT_ID}`);
  json(ctx.res, 200, {
    access_token: idJag,
    issued_token_type: ID_JAG_TYPE,
    token_type: "N_A",
    expires_in: PLATFORM_TTL,
  }, { pragma: "no-cache" });
}

// --- The MCP resource server (mode mcp) ------------------------------------------------------------------------------

const mcpUrl = () => `${origin}/mcp`;
const prmUrl = () => `${origin}/.well-known/oauth-protected-resource/mcp`;

function resourceMetadata() {
  return {
    resource: mcpUrl(),
    authorization_servers: [issuer],
    ...(DPOP && { dpop_signing_alg_values_supported: DPOP_ALGS }),
    ...(has("dpop-required") && { dpop_bound_access_tokens_required: true }),
  };
}

// A 401 with its WWW-Authenticate challenge (RFC 6750 §3, RFC 9449 §7.1), quoted strings kept to plain ASCII.
function challenge(ctx: Ctx, scheme: string, error?: string, description?: string, headers: Json = {}) {
  const quoted = (text: string) => text.replace(/[^\x20-\x7e]|["\\]/g, "'");
  const params = [
    ...(error ? [`error="${error}"`] : []),
    ...(description ? [`error_description="${quoted(description)}"`] : []),
    ...(scheme === "DPoP" && error !== "use_dpop_nonce" ? [`algs="${DPOP_ALGS.join(" ")}"`] : []),
    `resource_metadata="${prmUrl()}"`,
  ];
  if (error) ctx.entry.error = error;
  note(`mcp → 401 ${error ?? "no token"}${description ? `: ${description}` : ""}`);
  json(ctx.res, 401, { error: error ?? "unauthorized", ...(description && { error_description: description }) }, {
    "www-authenticate": `${scheme} ${params.join(", ")}`,
    ...headers,
  });
}

// Why an access token is not one of ours for /mcp, or its claims.
async function accessTokenProblem(token: string): Promise<{ problem: string } | { claims: Json }> {
  const decoded = decodeJwt(token);
  if (!decoded || !isObject(decoded.header)) return { problem: "the access token is not a JWT" };
  const key = keys.find((k) => k.kid === decoded.header.kid) ??
    (decoded.header.kid === undefined ? current : undefined);
  if (!key) return { problem: `no signing key ${decoded.header.kid}` };
  const verified = await signedBy(token, key);
  if (!verified) return { problem: "the access token signature is invalid" };
  const { claims } = verified;
  if (typeof claims.exp === "number" && claims.exp <= now()) return { problem: "the access token expired" };
  if (typeof claims.nbf === "number" && claims.nbf > now()) return { problem: "the access token is not yet valid" };
  if (!audiences(claims).includes(mcpUrl())) {
    return { problem: `the access token is for ${JSON.stringify(claims.aud)}, not ${mcpUrl()}` };
  }
  return { claims };
}

// The caller's token claims, or undefined once it answered 401.
async function mcpAuth(ctx: Ctx): Promise<Json | undefined> {
  const { req } = ctx;
  const [scheme = "", ...rest] = (req.headers.authorization ?? "").trim().split(/\s+/);
  const token = rest.join(" ");
  const dpop = /^dpop$/i.test(scheme);
  if (!token || !(dpop || /^bearer$/i.test(scheme))) return void challenge(ctx, DPOP ? "DPoP" : "Bearer");
  const checked = await accessTokenProblem(token);
  if ("problem" in checked) return void challenge(ctx, dpop ? "DPoP" : "Bearer", "invalid_token", checked.problem);
  const jkt = checked.claims.cnf?.jkt;
  if (jkt === undefined) {
    if (dpop) {
      return void challenge(ctx, "DPoP", "invalid_token", "the access token is not DPoP-bound: send it as Bearer");
    }
    return checked.claims;
  }
  const proofError = (description: string) => challenge(ctx, "DPoP", "invalid_dpop_proof", description);
  if (!dpop) return void proofError("a DPoP-bound access token must come with the DPoP scheme");
  const text = headerText(req.headers.dpop);
  if (text === undefined) return void proofError("the DPoP header is missing");
  const proof = await checkProof(text, req.method ?? "?", mcpUrl(), { token, jkt: String(jkt) });
  const summary = ctx.entry.proof as Json;
  if ("problem" in proof) {
    if (summary) summary.problem = proof.problem;
    return void proofError(proof.problem);
  }
  if (summary) summary.problem = null;
  if (has("dpop-nonce") && proof.claims.nonce !== nonces.rs) {
    return void challenge(ctx, "DPoP", "use_dpop_nonce", undefined, { "dpop-nonce": nonces.rs });
  }
  return checked.claims;
}

const MODERN = "2026-07-28";
const SERVER_INFO = { name: "fake-auth-mcp", version: "1.0.0" };
const WHOAMI = {
  name: "whoami",
  description: "The subject of the access token",
  inputSchema: { type: "object", properties: {} },
};

// POST /mcp: one JSON-RPC message, answered as JSON (initialize mints an Mcp-Session-Id that nothing checks).
async function mcp(ctx: Ctx, raw: string) {
  const { req, res, entry } = ctx;
  const claims = await mcpAuth(ctx);
  if (claims === undefined) return;
  entry.sub = claims.sub ?? null;
  if (req.method === "DELETE") return void res.writeHead(200, { "cache-control": "no-store" }).end();
  if (req.method !== "POST") return void res.writeHead(405, { allow: "POST, DELETE" }).end();
  let message: Json;
  try {
    message = JSON.parse(raw);
  } catch {
    return json(res, 400, { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
  }
  if (!isObject(message)) {
    return json(res, 400, { jsonrpc: "2.0", id: null, error: { code: -32600, message: "one JSON-RPC message only" } });
  }
  if (typeof message.method !== "string" || message.id === undefined) {
    return void res.writeHead(202).end(); // a notification or a response
  }
  const { id, method, params } = message;
  entry.rpc = method;
  const modern = params?._meta?.["io.modelcontextprotocol/protocolVersion"] === MODERN;
  const answer = (result: Json, headers: Json = {}) =>
    json(res, 200, { jsonrpc: "2.0", id, result: modern ? { resultType: "complete", ...result } : result }, headers);
  const fail = (code: number, text: string) => json(res, 200, { jsonrpc: "2.0", id, error: { code, message: text } });
  if (method === "initialize" && !modern) {
    return answer({
      protocolVersion: params?.protocolVersion,
      capabilities: { tools: {} },
      serverInfo: SERVER_INFO,
    }, { "mcp-session-id": random(12) });
  }
  if (method === "server/discover" && modern) {
    return answer({
      supportedVersions: [MODERN],
      capabilities: { tools: {} },
      _meta: { "io.modelcontextprotocol/serverInfo": SERVER_INFO },
    });
  }
  if (method === "ping" && !modern) return answer({});
  if (method === "tools/list") return answer({ tools: [WHOAMI] });
  if (method === "tools/call") {
    if (params?.name !== WHOAMI.name) return fail(-32602, `Unknown tool: ${params?.name}`);
    return answer({ content: [{ type: "text", text: String(claims.sub) }] });
  }
  return fail(-32601, `Method not found: ${method}`);
}

// --- Test helpers ---------------------------------------------------------------------------------------------------

// POST /_assertion (a workload JWT) and POST /_id_token (an ID token of our IdP), signed with the platform key.
async function mintPlatformJwt(res: ServerResponse, raw: string, kind: "workload" | "id_token") {
  let spec: Json;
  try {
    spec = raw.trim() ? JSON.parse(raw) : {};
  } catch {
    return json(res, 400, { error: "invalid_request", error_description: "the body must be JSON" });
  }
  const key = spec.sign_with === "foreign"
    ? (foreignPlatform ??= await newKey("ES256", `foreign-platform-${keyTag}`))
    : platform;
  const pick = (name: string, fallback: unknown) => spec[name] === null ? undefined : spec[name] ?? fallback;
  const workload = kind === "workload";
  const iat = now();
  const expIn = spec.exp_in === undefined ? PLATFORM_TTL : spec.exp_in;
  const claims = {
    iss: pick("iss", workload ? "https://platform.example" : `${origin}/idp`),
    sub: pick("sub", workload ? "workload" : "user@example.com"),
    aud: pick("aud", workload ? issuer : IDP_CLIENT_ID),
    iat,
    ...(typeof expIn === "number" && { exp: iat + expIn }),
    jti: pick("jti", random(12)),
    ...spec.claims,
  };
  const jwt = await signJwt({ alg: key.alg, typ: "JWT", kid: key.kid }, claims, key);
  note(`minted ${workload ? "a workload assertion" : "an ID token"}${key === platform ? "" : " with a foreign key"}`);
  res.writeHead(200, { "content-type": "text/plain", "cache-control": "no-store" }).end(jwt);
}

async function mint(res: ServerResponse, raw: string) {
  let spec: Json;
  try {
    spec = raw.trim() ? JSON.parse(raw) : {};
  } catch {
    return json(res, 400, { error: "invalid_request", error_description: "the body must be JSON" });
  }
  const key = spec.sign_with === "foreign" ? (foreign ??= await newKey(ALG)) : current;
  const pick = (name: string, fallback: unknown) => spec[name] === null ? undefined : spec[name] ?? fallback;
  const iat = now();
  const expIn = spec.exp_in === undefined ? (has("no-exp") ? null : TTL) : spec.exp_in;
  const claims = {
    iss: pick("iss", issuer),
    sub: pick("sub", "user-1"),
    aud: pick("aud", AUDIENCE),
    client_id: pick("client_id", "minted"),
    scope: pick("scope", SCOPES.join(" ")),
    iat,
    ...(typeof expIn === "number" && { exp: iat + expIn }),
    ...(typeof spec.nbf_in === "number" && { nbf: iat + spec.nbf_in }),
    jti: random(12),
    ...(isObject(spec.cnf) && { cnf: spec.cnf }),
    ...(spec.dpop_jwk !== undefined && { cnf: { jkt: thumbprint(spec.dpop_jwk) } }),
    ...spec.claims,
  };
  const header = { alg: spec.alg ?? key.alg, typ: pick("typ", "at+jwt"), kid: pick("kid", key.kid) };
  note(`minted a token${key === foreign ? " with the foreign key" : ""}`);
  json(res, 200, { access_token: await signJwt(header, claims, key) });
}

async function rotate(res: ServerResponse) {
  const key = await newKey(ALG);
  keys = has("rotate-drop") ? [key] : [...keys, key];
  current = key;
  note(`rotated the signing key to ${key.kid}; JWKS has ${keys.length}`);
  json(res, 200, { kid: key.kid, kids: keys.map((k) => k.kid) });
}

async function handle(req: IncomingMessage, res: ServerResponse) {
  const path = req.url ?? "/";
  const url = new URL(`http://127.0.0.1${path.startsWith("/") ? "" : "/"}${path}`);
  const { pathname } = url;
  const method = req.method ?? "?";
  if (pathname === "/_log" && method === "GET") return json(res, 200, log);
  if (pathname === "/_reset" && method === "POST") {
    log.length = 0;
    return json(res, 200, {});
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks).toString("utf8");
  if (pathname === "/_rotate" && method === "POST") return await rotate(res);
  if (pathname === "/_mint" && method === "POST") return await mint(res, raw);
  if (pathname === "/_assertion" && method === "POST") return await mintPlatformJwt(res, raw, "workload");
  if (pathname === "/_id_token" && method === "POST") return await mintPlatformJwt(res, raw, "id_token");
  if (pathname === "/_nonce" && (method === "GET" || method === "POST")) {
    if (method === "POST") Object.assign(nonces, { as: random(16), rs: random(16) });
    return json(res, 200, nonces);
  }

  const type = (req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
  const formEncoded = type === "application/x-www-form-urlencoded";
  const form: Record<string, string> = {};
  const duplicated: string[] = [];
  let body: unknown = raw === "" ? null : raw;
  if (formEncoded) {
    for (const [name, value] of new URLSearchParams(raw)) {
      if (name in form) duplicated.push(name);
      form[name] = value;
    }
    body = form;
  } else if (type === "application/json") {
    try {
      body = JSON.parse(raw);
    } catch { /* kept as text */ }
  }
  // A text body that looks like a form with a secret in it (a wrong content-type) is logged as that form, redacted.
  const textForm = typeof body === "string" &&
    SECRET_FIELDS.some((name) => new URLSearchParams(body as string).has(name));
  const logged = textForm
    ? redactFields(Object.fromEntries(new URLSearchParams(raw)))
    : typeof body === "object" && body !== null && !Array.isArray(body)
    ? redactFields(body)
    : body;
  const entry: Entry = {
    method,
    path: redactPath(path),
    headers: redactHeaders(req.headers),
    body: logged,
    time: Date.now(),
    kind: pathname.includes("/.well-known/") ? "metadata" : pathname === "/jwks" ? "jwks" : KINDS[pathname] ?? "other",
  };
  if (entry.kind === "token" || entry.kind === "mcp") {
    // How it authenticated, and its DPoP proof (what the log keeps of it).
    const scheme = (req.headers.authorization ?? "").trim().split(/\s+/)[0];
    Object.assign(entry, { scheme: scheme || null, proof: proofSummary(headerText(req.headers.dpop)) });
  }
  log.push(entry);
  res.on("finish", () => entry.status = res.statusCode);
  const rpc = pathname === "/mcp" && isObject(body) && typeof body.method === "string" ? ` ${body.method}` : "";
  const grant = ["/token", "/idp/token"].includes(pathname) && form.grant_type ? ` grant_type=${form.grant_type}` : "";
  note(`got ${method} ${pathname}${grant}${rpc}`);
  const ctx: Ctx = { req, res, url, entry, form };

  if (entry.kind === "metadata") {
    if (method === "GET" && metadataPaths().includes(pathname)) {
      return json(res, 200, metadata(pathname.includes("openid-configuration")));
    }
    if (method === "GET" && pathname === "/idp/.well-known/openid-configuration") return json(res, 200, idpMetadata());
    const prm = ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"];
    if (method === "GET" && has("mcp") && prm.includes(pathname)) return json(res, 200, resourceMetadata());
    return oauthError(ctx, 404, "not_found", `no metadata at ${pathname}`);
  }
  if (pathname === "/jwks" && method === "GET") {
    return json(res, 200, { keys: keys.map((key) => key.jwk) });
  }
  if (pathname === "/register" && method === "POST" && !has("no-dcr")) return register(ctx, body);
  if (pathname === "/authorize" && method === "GET") return authorize(ctx);
  if (pathname === "/token" && method === "POST") return await token(ctx, duplicated, formEncoded);
  if (pathname === "/idp/token" && method === "POST") return await idpToken(ctx, duplicated, formEncoded);
  if (pathname === "/idp/jwks" && method === "GET") return json(res, 200, { keys: [platform.jwk] });
  if (pathname === "/mcp" && has("mcp")) return await mcp(ctx, raw);
  return oauthError(ctx, 404, "not_found", `no ${method} ${pathname}`);
}

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    note(`${signal}, exiting`);
    process.exit(0);
  });
}

async function main() {
  current = await newKey(ALG);
  keys = [current];
  platform = await newKey("ES256", `platform-${keyTag}`);
  const server = createServer((req, res) => {
    handle(req, res).catch((error) => {
      note(`error: ${error?.stack ?? error}`);
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end("fake auth server error");
    });
  });
  server.listen(Number(env.FAKE_AUTH_PORT ?? 0), "127.0.0.1", () => {
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    issuer = origin + PREFIX;
    note(`pid ${process.pid}, issuer ${issuer}, alg ${ALG}, modes: ${[...modes].join(",") || "(none)"}`);
    process.stdout.write(`listening ${origin}\n`);
  });
}
main().catch((error) => {
  note(`start-up failed: ${error?.stack ?? error}`);
  process.exit(1);
});
