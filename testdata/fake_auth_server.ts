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
//
// Tunables: FAKE_AUTH_METHODS (token_endpoint_auth_methods_supported, comma-separated; default
// none,client_secret_basic,client_secret_post,private_key_jwt), FAKE_AUTH_SCOPES (scopes_supported, space-separated;
// default "mcp:read mcp:write offline_access"), FAKE_AUTH_TTL (expires_in and exp, s; 3600), FAKE_AUTH_ALG (the AS's
// signing alg: ES256 (default), RS256 or EdDSA), FAKE_AUTH_AUDIENCE (aud of every token instead of the resource).
// A pre-registered client: FAKE_AUTH_CLIENT_ID with FAKE_AUTH_CLIENT_SECRET (client_secret_basic/post) and/or
// FAKE_AUTH_CLIENT_JWK (a public JWK, or a {keys} set, as JSON: private_key_jwt), else a public client ("none"); it
// may use every method of FAKE_AUTH_METHODS its credentials allow, every grant, and any loopback redirect_uri.
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
//                    no refresh token). Errors: {error, error_description}, 400 (401 invalid_client). Success:
//                    {access_token, token_type: "Bearer", expires_in, refresh_token?, scope}, Cache-Control: no-store.
//                    A refresh token comes only when the client's grant_types list refresh_token (pre-registered and
//                    CIMD clients: always), and never in mode no-refresh.
//   Access tokens    JWT, header {alg, typ: "at+jwt", kid}; claims iss (the real issuer), sub ("user-1", or the
//                    client_id for client_credentials), aud (the resource, or FAKE_AUTH_AUDIENCE), client_id, scope
//                    (space-separated, "" when none was asked), iat, exp, jti. They stay valid until exp (no
//                    introspection): revocation only reaches refresh tokens.
//   GET /jwks        {keys: [{kty, crv/x/y or n/e, kid, alg, use: "sig"}]}
//   POST /_rotate    a new signing key (new kid) → {kid, kids}: the JWKS then serves the old and the new (rotate-drop:
//                    only the new), to test a resource server that refetches the JWKS for an unknown kid.
//   POST /_mint      JSON {sub?, aud?, scope?, client_id?, iss?, exp_in?, nbf_in?, alg?, kid?, typ?, sign_with?, claims?}
//                    → {access_token}: a JWT minted directly. Defaults: sub user-1, aud FAKE_AUTH_AUDIENCE (else no
//                    aud), scope all of FAKE_AUTH_SCOPES, client_id "minted", iss the issuer, exp now + FAKE_AUTH_TTL;
//                    a field given as null is left out; exp_in/nbf_in are seconds from now (negative: the past);
//                    sign_with "current" (default) or "foreign" (a key of FAKE_AUTH_ALG not in the JWKS); alg, kid
//                    and typ (default at+jwt) only change the header (alg "none" leaves the signature empty); claims
//                    are merged in last.
//   GET /_log        a JSON array of every request but the /_ ones, oldest first (below); POST /_reset empties it
//                    (keys, clients, codes and refresh tokens stay).
//
// A log entry: {method, path (with query), headers (names lower-case), body (the form or JSON as an object, else the
// text, else null), time (ms since the epoch), status, error? (the OAuth error code we answered), kind:
// "metadata" | "jwks" | "register" | "authorize" | "token" | "other"}, plus for kind
//   register   client_id (issued), token_endpoint_auth_method (granted)
//   authorize  client_id, scope (null if absent), resource (null if absent), state (true if present),
//              code_challenge_method (null if absent), code (hashed, when one was issued)
//   token      grant_type, client_id, clientAuth ("basic" | "post" | "none" | "private_key_jwt" | "bad"; null when the
//              request was refused before), pkceOk (authorization_code with a known code, else null), resource (null
//              if absent), scope (granted, on success), reuse: true (a used code or refresh token came back)
// Secrets never reach the log: the values of authorization (after its scheme), client_secret, code, code_verifier,
// refresh_token, client_assertion and access_token (in bodies and queries) become "sha:" + the first 8 hex digits of
// their SHA-256, so a test can still compare them.
import { Buffer } from "node:buffer";
import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";

// deno-lint-ignore no-explicit-any
type Json = any;

const KNOWN = "oidc-only path-oidc-only wrong-issuer no-dcr no-pkce cimd require-app-type iss-missing iss-wrong " +
  "iss-slash iss-unadvertised deny no-refresh no-exp rotate-drop";
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
const SECRET_FIELDS = ["client_secret", "code", "code_verifier", "refresh_token", "client_assertion", "access_token"];
const FULL: Record<string, string> = { basic: "client_secret_basic", post: "client_secret_post" }; // else the same
const KINDS: Record<string, string> = { "/register": "register", "/authorize": "authorize", "/token": "token" };

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

type Key = { kid: string; alg: string; privateKey: CryptoKey; jwk: Json };
const keyTag = randomBytes(3).toString("hex"); // so two fake ASes never share a kid
let keyCount = 0;
async function newKey(alg: string): Promise<Key> {
  const pair = await crypto.subtle.generateKey(ALGS[alg].gen, true, ["sign", "verify"]) as CryptoKeyPair;
  const { kty, crv, x, y, n, e } = await crypto.subtle.exportKey("jwk", pair.publicKey);
  const kid = `key-${++keyCount}-${keyTag}`;
  return { kid, alg, privateKey: pair.privateKey, jwk: { kty, crv, x, y, n, e, kid, alg, use: "sig" } };
}
let keys: Key[] = []; // served in the JWKS
let current: Key; // signs access tokens
let foreign: Key | undefined; // never in the JWKS (/_mint sign_with: "foreign")

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
const refreshTokens = new Map<string, Grant & { used: boolean }>();
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
  return copy;
}

// --- HTTP plumbing --------------------------------------------------------------------------------------------------

type Ctx = { req: IncomingMessage; res: ServerResponse; url: URL; entry: Entry; form: Record<string, string> };

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
    grant_types_supported: ["authorization_code", "refresh_token", "client_credentials"],
    ...(!has("no-pkce") && { code_challenge_methods_supported: ["S256"] }),
    token_endpoint_auth_methods_supported: METHODS,
    ...(METHODS.includes("private_key_jwt") &&
      { token_endpoint_auth_signing_alg_values_supported: Object.keys(ALGS) }),
    scopes_supported: SCOPES,
    ...(!has("iss-unadvertised") && { authorization_response_iss_parameter_supported: true }),
    ...(has("cimd") && { client_id_metadata_document_supported: true }),
    ...(oidc && { subject_types_supported: ["public"], id_token_signing_alg_values_supported: [ALG] }),
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

// The client and how it authenticated, or why it failed (→ 401 invalid_client).
async function authenticate(ctx: Ctx): Promise<{ client?: Client; method: string; problem?: string }> {
  const { form } = ctx;
  const header = ctx.req.headers.authorization;
  const used: string[] = [];
  let basic: { id: string; secret: string } | undefined;
  if (header !== undefined && /^basic /i.test(header)) {
    used.push("basic");
    const decoded = Buffer.from(header.slice(6).trim(), "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    const unform = (text: string) => decodeURIComponent(text.replace(/\+/g, " "));
    try {
      if (colon < 0) throw new Error("no colon");
      basic = { id: unform(decoded.slice(0, colon)), secret: unform(decoded.slice(colon + 1)) };
    } catch {
      return { method: "basic", problem: "the Basic credentials are not urlencode(id):urlencode(secret)" };
    }
  }
  if (form.client_assertion !== undefined || form.client_assertion_type !== undefined) used.push("private_key_jwt");
  if (form.client_secret !== undefined) used.push("post");
  if (used.length > 1) return { method: used.join("+"), problem: `more than one client authentication: ${used}` };
  const method = used[0] ?? "none";
  const fromAssertion = method === "private_key_jwt" ? decodeJwt(form.client_assertion ?? "")?.claims?.iss : undefined;
  const id = basic?.id ?? form.client_id ?? fromAssertion;
  if (basic && form.client_id !== undefined && form.client_id !== basic.id) {
    return { method, problem: "client_id in the form differs from the Basic one" };
  }
  const client = clientOf(id);
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
  const auth = await authenticate(ctx);
  if (!auth.client) {
    entry.clientAuth = "bad";
    const challenge = auth.method === "basic" ? { "www-authenticate": 'Basic realm="fake-auth"' } : {};
    return oauthError(ctx, 401, "invalid_client", auth.problem ?? "client authentication failed", challenge);
  }
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
  };
  const accessToken = await signJwt({ alg: current.alg, typ: "at+jwt", kid: current.kid }, claims, current);
  let refreshToken: string | undefined;
  if (family !== undefined && !has("no-refresh") && (!client.grants || client.grants.includes("refresh_token"))) {
    refreshToken = random();
    refreshTokens.set(refreshToken, { clientId: client.id, scope: familyScope, resource, family, used: false });
  }
  ctx.entry.scope = scope;
  note(`token → access token for ${sub}${refreshToken ? " and a refresh token" : ""}, scope "${scope}"`);
  json(ctx.res, 200, {
    access_token: accessToken,
    token_type: "Bearer",
    expires_in: TTL,
    ...(refreshToken && { refresh_token: refreshToken }),
    scope,
  }, { pragma: "no-cache" });
}

// --- Test helpers ---------------------------------------------------------------------------------------------------

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
  log.push(entry);
  res.on("finish", () => entry.status = res.statusCode);
  note(`got ${method} ${pathname}${pathname === "/token" && form.grant_type ? ` grant_type=${form.grant_type}` : ""}`);
  const ctx: Ctx = { req, res, url, entry, form };

  if (entry.kind === "metadata") {
    if (method === "GET" && metadataPaths().includes(pathname)) {
      return json(res, 200, metadata(pathname.includes("openid-configuration")));
    }
    return oauthError(ctx, 404, "not_found", `no metadata at ${pathname}`);
  }
  if (pathname === "/jwks" && method === "GET") {
    return json(res, 200, { keys: keys.map((key) => key.jwk) });
  }
  if (pathname === "/register" && method === "POST" && !has("no-dcr")) return register(ctx, body);
  if (pathname === "/authorize" && method === "GET") return authorize(ctx);
  if (pathname === "/token" && method === "POST") return await token(ctx, duplicated, formEncoded);
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
