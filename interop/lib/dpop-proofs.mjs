// DPoP (RFC 9449) at mcp.ts's resource server, with proofs made by an independent library, jose (installed by
// interop/dpop.sh into $IOP_CACHE/dpop). interop/dpop.sh starts the servers; this script makes the requests:
//   node dpop-proofs.mjs required ISSUER URL   URL is `serve --http --auth-issuer ISSUER --auth-dpop required`
//   node dpop-proofs.mjs nonce ISSUER URL      ... --auth-dpop required --auth-dpop-nonce
//   node dpop-proofs.mjs allowed ISSUER URL    ... --auth-dpop allowed
// It makes an ES256 key pair with jose (generateKeyPair), its JWK thumbprint (calculateJwkThumbprint), has the fake AS
// (testdata/fake_auth_server.ts, POST ISSUER/_mint) mint an access token for URL with scope mcp:read bound to it
// (claims.cnf.jkt), and an unbound one, then POSTs 2026-07-28 stateless tools/call requests of whoami (testdata/auth)
// to URL, each with a proof made by jose's SignJWT: {jti, htm, htu, iat, ath[, nonce]}, header {alg: ES256, typ:
// dpop+jwt, jwk}. One line per check, "ok: WHAT: ..." or "FAIL: [PART] WHAT: WHY" (then the answer, indented); exit 1
// when a check failed, 2 on bad usage. Every token and proof it sends is appended to $DPOP_SECRETS_FILE (when set), a
// line each, so that the caller can look for them where they must not be (the server's stderr).
//   required  a valid proof: 200 and whoami's answer; a second proof (new jti) with the same token: 200; tokens bound
//             to an RS256 and to an Ed25519 key, with their proofs: 200; iat 4 minutes old: 200; the first proof again
//             (replay), a wrong htu, a wrong htm, iat 10 minutes old, iat 10 minutes ahead, signed by another key (its
//             thumbprint not the token's cnf.jkt), no ath, a wrong ath (another token's hash), typ JWT, the private key
//             in the jwk header, HS256 with an oct jwk: each 401 with a DPoP challenge, error="invalid_dpop_proof"; a
//             proof for http://127.0.0.1:1/mcp sent with Host 127.0.0.1:1: 4xx (the URL is the server's, not the
//             Host's); a POST to URL?probe=1 with htu URL: 200 (htu has no query); the bound token as Bearer, or as
//             DPoP with no proof: 401, a DPoP challenge; no token: 401, a DPoP challenge; the unbound token as Bearer,
//             or as DPoP with a valid proof: 401, a DPoP challenge (required refuses unbound tokens)
//   nonce     a proof without nonce: 401, a DPoP challenge with error="use_dpop_nonce" and a DPoP-Nonce header; the
//             same request with that nonce in a new proof: 200 and whoami's answer; a nonce the server never gave: 401
//             use_dpop_nonce
//   allowed   the unbound token as Bearer: 200; the bound token as DPoP with a valid proof: 200; the bound token as
//             Bearer: 401, a DPoP challenge
import { createHash, randomUUID } from "node:crypto";
import { Buffer } from "node:buffer";
import { appendFileSync } from "node:fs";
import { request } from "node:http";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join } from "node:path";
import process from "node:process";

const [part, issuer, url] = process.argv.slice(2);
if (
  !["required", "nonce", "allowed"].includes(part) || !/^https?:\/\//.test(issuer ?? "") ||
  !/^https?:\/\//.test(url ?? "")
) {
  console.error("usage: dpop-proofs.mjs required|nonce|allowed ISSUER URL");
  process.exit(2);
}
const cache = process.env.IOP_CACHE || process.env.MCP_INTEROP_CACHE || join(homedir(), ".cache", "mcp-interop");
const jose = createRequire(join(cache, "dpop", "package.json"))("jose");

const secrets = process.env.DPOP_SECRETS_FILE;
const secret = (value) => {
  if (secrets) appendFileSync(secrets, `${value}\n`, { mode: 0o600 });
  return value;
};

// --- keys, tokens, proofs ---

const newKey = async (alg = "ES256", options = {}) => {
  const { publicKey, privateKey } = await jose.generateKeyPair(alg, { extractable: true, ...options });
  const jwk = await jose.exportJWK(publicKey);
  return {
    alg,
    privateKey,
    jwk,
    privateJwk: await jose.exportJWK(privateKey),
    jkt: await jose.calculateJwkThumbprint(jwk),
  };
};

const mint = async (claims) => {
  const response = await fetch(`${issuer}/_mint`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ aud: url, scope: "mcp:read", ...(claims && { claims }) }),
  });
  const { access_token: token } = await response.json();
  if (!response.ok || typeof token !== "string") throw new Error(`${issuer}/_mint answered ${response.status}`);
  return secret(token);
};

const ath = (token) => createHash("sha256").update(token, "ascii").digest("base64url");
const now = () => Math.floor(Date.now() / 1000);

// proof(options): a DPoP proof made by jose for a POST to URL with token; each option replaces one part (alg and
// signing key: the key's, unless given).
const proof = async (
  { key, token, htm = "POST", htu = url, iat = now(), nonce, typ = "dpop+jwt", jwk, athOf = token, alg, signWith },
) => {
  const claims = { jti: randomUUID(), htm, htu, iat };
  if (athOf !== null) claims.ath = ath(athOf);
  if (nonce !== undefined) claims.nonce = nonce;
  const signed = await new jose.SignJWT(claims)
    .setProtectedHeader({ alg: alg ?? key.alg, typ, jwk: jwk ?? key.jwk })
    .sign(signWith ?? key.privateKey);
  return secret(signed);
};

// --- the MCP request ---

const WHOAMI = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "tools/call",
  params: {
    name: "whoami",
    arguments: {},
    _meta: {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": {},
      "io.modelcontextprotocol/clientInfo": { name: "dpop-proofs.mjs", version: "1" },
    },
  },
});

// post({authorization, dpop, to, host}): the whoami call (node:http, so that the Host header can be another's);
// {status, challenge (WWW-Authenticate), nonce (DPoP-Nonce), text (whoami's answer, when there is one), body}.
const post = ({ authorization, dpop, to = url, host }) =>
  new Promise((resolve, reject) => {
    const headers = {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-method": "tools/call",
      "mcp-name": "whoami",
      "mcp-protocol-version": "2026-07-28",
    };
    if (authorization) headers.authorization = authorization;
    if (dpop) headers.dpop = dpop;
    if (host) headers.host = host;
    const sent = request(to, { method: "POST", headers }, (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk) => body += chunk).on("error", reject).on("end", () => {
        let text;
        const messages = (response.headers["content-type"] ?? "").startsWith("text/event-stream")
          ? body.split(/\r?\n/).filter((line) => line.startsWith("data:")).map((line) => line.slice(5))
          : [body];
        for (const message of messages) {
          try {
            const parsed = JSON.parse(message);
            if (parsed.id === 1) text = parsed.result?.content?.[0]?.text ?? JSON.stringify(parsed.error ?? parsed);
          } catch { /* not JSON: shown as the body */ }
        }
        resolve({
          status: response.statusCode,
          challenge: response.headers["www-authenticate"] ?? "",
          nonce: response.headers["dpop-nonce"],
          text,
          body,
        });
      });
    });
    sent.on("error", reject);
    sent.end(WHOAMI);
  });

// --- the checks ---

let failures = 0;
const report = (what, answer, why) => {
  const seen = `HTTP ${answer.status}${answer.challenge ? `, WWW-Authenticate: ${answer.challenge}` : ""}` +
    (answer.nonce ? `, DPoP-Nonce: ${answer.nonce}` : "");
  if (why.length === 0) {
    console.log(`ok: ${what}: ${answer.status === 200 ? `HTTP 200, whoami ${answer.text}` : seen}`);
    return;
  }
  failures++;
  console.log(`FAIL: [${part}] ${what}: ${why.join("; ")}`);
  console.log(`  got: ${seen}`);
  if (answer.body) console.log(`  body: ${answer.body.slice(0, 400).replace(/\n/g, "\\n")}`);
};

// The DPoP challenge of a WWW-Authenticate header (there may be a Bearer one too): from "DPoP " on.
const dpopChallenge = (header) => /(?:^|,\s*)(DPoP(?:\s.*)?)$/i.exec(header)?.[1];

const expectOk = (what, answer, whoami) => {
  const why = [];
  if (answer.status !== 200) why.push(`HTTP ${answer.status}, expected 200`);
  else if (answer.text !== whoami) why.push(`whoami answered ${answer.text}, expected ${whoami}`);
  report(what, answer, why);
};

// expectRefused(what, answer, error): 401 with a DPoP challenge; with error, that error="..." in the challenge.
const expectRefused = (what, answer, error) => {
  const why = [];
  if (answer.status !== 401) why.push(`HTTP ${answer.status}, expected 401`);
  const challenge = dpopChallenge(answer.challenge);
  if (!challenge) why.push("no DPoP challenge in WWW-Authenticate");
  else if (error && !challenge.includes(`error="${error}"`)) why.push(`the DPoP challenge has no error="${error}"`);
  report(what, answer, why);
};

const key = await newKey();
const other = await newKey();
const bound = await mint({ cnf: { jkt: key.jkt } });
const unbound = await mint();
const whoami = JSON.stringify({ sub: "user-1", scopes: ["mcp:read"], clientId: "minted" });
const dpop = `DPoP ${bound}`;

if (part === "required") {
  const first = await proof({ key, token: bound });
  expectOk("the bound token as DPoP with a jose proof", await post({ authorization: dpop, dpop: first }), whoami);
  expectOk(
    "the same token with a second proof (a new jti)",
    await post({ authorization: dpop, dpop: await proof({ key, token: bound }) }),
    whoami,
  );
  for (const [name, alg, options] of [["RS256", "RS256", {}], ["EdDSA (Ed25519)", "EdDSA", { crv: "Ed25519" }]]) {
    const another = await newKey(alg, options);
    const token = await mint({ cnf: { jkt: another.jkt } });
    expectOk(
      `a token bound to an ${name} key, with its proof`,
      await post({ authorization: `DPoP ${token}`, dpop: await proof({ key: another, token }) }),
      whoami,
    );
  }
  expectOk(
    "iat 4 minutes old (within 300 s)",
    await post({ authorization: dpop, dpop: await proof({ key, token: bound, iat: now() - 240 }) }),
    whoami,
  );
  const invalid = "invalid_dpop_proof";
  expectRefused("the first proof again (a replayed jti)", await post({ authorization: dpop, dpop: first }), invalid);
  expectRefused(
    "htu another URL (path /other)",
    await post({ authorization: dpop, dpop: await proof({ key, token: bound, htu: new URL("/other", url).href }) }),
    invalid,
  );
  expectRefused(
    "htm GET for a POST",
    await post({ authorization: dpop, dpop: await proof({ key, token: bound, htm: "GET" }) }),
    invalid,
  );
  expectRefused(
    "iat 10 minutes old",
    await post({ authorization: dpop, dpop: await proof({ key, token: bound, iat: now() - 600 }) }),
    invalid,
  );
  expectRefused(
    "iat 10 minutes ahead",
    await post({ authorization: dpop, dpop: await proof({ key, token: bound, iat: now() + 600 }) }),
    invalid,
  );
  expectRefused(
    "signed by another key (its thumbprint is not the token's cnf.jkt)",
    await post({ authorization: dpop, dpop: await proof({ key: other, token: bound }) }),
    invalid,
  );
  expectRefused(
    "no ath",
    await post({ authorization: dpop, dpop: await proof({ key, token: bound, athOf: null }) }),
    invalid,
  );
  expectRefused(
    "ath the hash of another token",
    await post({ authorization: dpop, dpop: await proof({ key, token: bound, athOf: unbound }) }),
    invalid,
  );
  expectRefused(
    "typ JWT, not dpop+jwt",
    await post({ authorization: dpop, dpop: await proof({ key, token: bound, typ: "JWT" }) }),
    invalid,
  );
  expectRefused(
    "the private key (d) in the jwk header",
    await post({ authorization: dpop, dpop: await proof({ key, token: bound, jwk: key.privateJwk }) }),
    invalid,
  );
  const hmac = new Uint8Array(32).fill(7);
  expectRefused(
    "HS256 (a symmetric alg, an oct jwk)",
    await post({
      authorization: dpop,
      dpop: await proof({
        key,
        token: bound,
        alg: "HS256",
        jwk: { kty: "oct", k: Buffer.from(hmac).toString("base64url") },
        signWith: hmac,
      }),
    }),
    invalid,
  );
  // The URL a proof is for is the server's own: a proof made for another server is refused even when the request's
  // Host names that server's authority (as a token for another audience is: protected.sh).
  const elsewhere = await post({
    authorization: dpop,
    dpop: await proof({ key, token: bound, htu: "http://127.0.0.1:1/mcp" }),
    host: "127.0.0.1:1",
  });
  report(
    "htu another server's URL, with that server's authority in Host",
    elsewhere,
    elsewhere.status >= 400 && elsewhere.status < 500 ? [] : [`HTTP ${elsewhere.status}, expected 4xx`],
  );
  expectOk(
    "a POST to URL?probe=1 with htu URL (htu has no query)",
    await post({ authorization: dpop, dpop: await proof({ key, token: bound }), to: `${url}?probe=1` }),
    whoami,
  );
  expectRefused("the bound token as Bearer", await post({ authorization: `Bearer ${bound}` }));
  expectRefused(
    "the bound token as Bearer, with a valid proof",
    await post({ authorization: `Bearer ${bound}`, dpop: await proof({ key, token: bound }) }),
  );
  expectRefused("the bound token as DPoP without a DPoP header", await post({ authorization: dpop }));
  expectRefused("no token", await post({}));
  expectRefused("an unbound token as Bearer (required)", await post({ authorization: `Bearer ${unbound}` }));
  expectRefused(
    "an unbound token as DPoP with a valid proof (required)",
    await post({ authorization: `DPoP ${unbound}`, dpop: await proof({ key, token: unbound }) }),
  );
} else if (part === "nonce") {
  const first = await post({ authorization: dpop, dpop: await proof({ key, token: bound }) });
  const why = [];
  if (first.status !== 401) why.push(`HTTP ${first.status}, expected 401`);
  const challenge = dpopChallenge(first.challenge);
  if (!challenge?.includes('error="use_dpop_nonce"')) why.push('no DPoP challenge with error="use_dpop_nonce"');
  if (!first.nonce) why.push("no DPoP-Nonce header");
  report("a proof without nonce", first, why);
  if (first.nonce) {
    expectOk(
      "the retry with the server's DPoP-Nonce",
      await post({ authorization: dpop, dpop: await proof({ key, token: bound, nonce: first.nonce }) }),
      whoami,
    );
  }
  const made = await post({ authorization: dpop, dpop: await proof({ key, token: bound, nonce: "not-the-servers" }) });
  const wrong = [];
  if (made.status !== 401) wrong.push(`HTTP ${made.status}, expected 401`);
  if (!dpopChallenge(made.challenge)?.includes('error="use_dpop_nonce"')) {
    wrong.push('no DPoP challenge with error="use_dpop_nonce"');
  }
  report("a nonce the server never gave", made, wrong);
} else {
  expectOk("an unbound token as Bearer (allowed)", await post({ authorization: `Bearer ${unbound}` }), whoami);
  expectOk(
    "the bound token as DPoP with a jose proof (allowed)",
    await post({ authorization: dpop, dpop: await proof({ key, token: bound }) }),
    whoami,
  );
  expectRefused("the bound token as Bearer (allowed)", await post({ authorization: `Bearer ${bound}` }));
}
process.exit(failures ? 1 : 0);
