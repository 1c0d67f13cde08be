// Two SDK v1 clients of one `mcp.ts gateway --http --token TOKEN` in front of server-everything twice: over stdio
// (named everything) and over Streamable HTTP (named web):
//   node sdk-two-principals.mjs URL TOKEN
// Each client (A and B) has its own Streamable HTTP session (Authorization: Bearer TOKEN, the same for both), declares
// roots and elicitation, and answers elicitation/create with values of its own (name "client-A-Ada", email
// ada@client-a.example; "client-B-Bob", bob@client-b.example: server-everything's form requires only name, the rest
// valid for their formats). The contract: an upstream's question goes only to the client whose call caused it (known
// from the HTTP stream it came on, or from the call's input_required result); when the gateway cannot tell (a stdio
// upstream with calls of several clients in flight) it refuses the question with a JSON-RPC error rather than guess;
// with more than one principal behind --http, roots are not offered to shared upstreams. The checks:
//   1 stdio at once     A and B call everything__trigger-elicitation-request together (Promise.all): neither result
//                       may show the other's values; each is its own answer or a refusal saying the gateway cannot
//                       tell (which one is printed); each handler is asked at most once, and only about its own call
//                       (its answer shows in its own result, in no other)
//   2 stdio in turn     A calls it, then B (not overlapping): each gets its own answer, each handler asked once
//   3 http at once      A and B call web__trigger-elicitation-request together: each gets exactly its own answer (the
//                       question comes on the call's own stream), each handler asked exactly once
//   4 roots             A's everything__get-roots-list is not listed or fails (never shows a root), and no client was
//                       asked roots/list during the whole run
// stdout: one line per step (STEP has no ":"), "ok   STEP: what came" or "FAIL STEP: what came (expected ...)". Exit 1 when a step
// failed or the SDK raised, 2 on bad usage. A call waits CALL_TIMEOUT_MS (20 s) at most.
import process from "node:process";
import { fromCache } from "./cache.mjs";

const [url, token] = process.argv.slice(2);
if (!/^https?:\/\//.test(url ?? "") || !token) {
  console.error("usage: sdk-two-principals.mjs URL TOKEN");
  process.exit(2);
}
const CALL_TIMEOUT_MS = 20_000;
const ELICIT = "trigger-elicitation-request";
const CANNOT_TELL = /cannot tell/i; // the gateway's refusal: "... the gateway cannot tell which one this is about"

const { Client } = fromCache("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = fromCache("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ElicitRequestSchema, ListRootsRequestSchema } = fromCache("@modelcontextprotocol/sdk/types.js");

const started = performance.now();
const elapsed = () => `+${Math.round(performance.now() - started)}ms`;
let failures = 0;
const step = (name, ok, detail, expected) => {
  if (!ok) failures++;
  console.log(`${ok ? "ok  " : "FAIL"} ${name}: ${detail}${ok || !expected ? "" : ` (expected ${expected})`}`);
};
const oneLine = (value) => String(value).replace(/\s+/g, " ").trim();
const short = (value, length = 200) => (value.length > length ? `${value.slice(0, length)}...` : value);
const text = (result) => oneLine((result.content ?? []).map((item) => item.text ?? item.type).join(" | "));

// A principal: its client, its transport, what it answers and what it was asked.
function principal(letter) {
  const lower = letter.toLowerCase();
  const self = {
    letter,
    marker: `client-${letter}`,
    root: { uri: `file:///tmp/mcp-interop-principal-${letter}-${process.pid}`, name: `root of client ${letter}` },
    answer: {
      name: `client-${letter}-${letter === "A" ? "Ada" : "Bob"}`,
      check: letter === "A",
      email: `${letter === "A" ? "ada" : "bob"}@client-${lower}.example`,
      homepage: `https://client-${lower}.example/`,
      birthdate: letter === "A" ? "1815-12-10" : "1912-06-23",
      integer: letter === "A" ? 1 : 2,
      number: letter === "A" ? 101 : 202,
    },
    elicited: [], // each elicitation/create asked of this client in the current check, with when
    rootsAsked: 0, // roots/list asked of this client during the whole run
  };
  self.client = new Client(
    { name: `mcp-interop-principal-${letter}`, version: "1.0.0" },
    { capabilities: { roots: { listChanged: true }, elicitation: {} } },
  );
  self.client.setRequestHandler(ElicitRequestSchema, (request) => {
    self.elicited.push(`${elapsed()} "${short(oneLine(request.params?.message ?? ""), 60)}"`);
    return { action: "accept", content: self.answer };
  });
  self.client.setRequestHandler(ListRootsRequestSchema, () => {
    self.rootsAsked++;
    return { roots: [self.root] };
  });
  self.transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  // A call's result text, or the error it raised (as text: the checks read both).
  self.call = async (name, args = {}) => {
    try {
      const result = await self.client.callTool({ name, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS });
      return { failed: Boolean(result.isError), text: `${result.isError ? "isError: " : ""}${text(result)}` };
    } catch (error) {
      return { failed: true, text: `the SDK raised ${error?.name}: ${oneLine(error?.message ?? error)}` };
    }
  };
  self.has = (got) => got.includes(self.answer.name) && got.includes(self.answer.email);
  return self;
}

const a = principal("A");
const b = principal("B");
const both = [a, b];
const other = (p) => (p === a ? b : a);
const shown = (got) => short(got.replace(/ \| Raw result: .*$/, ""), 300);
const times = (n) => (n === 1 ? "once" : `${n} times`);
const asked = (p) => (p.elicited.length ? `asked ${times(p.elicited.length)}: ${p.elicited.join(", ")}` : "not asked");

// The mixing check: P's result shows nothing of the other client's answer.
function unmixed(label, p, got) {
  const o = other(p);
  const mixed = got.includes(o.marker);
  step(
    `${label}, ${p.letter}'s result, nothing of ${o.letter}'s answer`,
    !mixed,
    mixed ? `${o.letter}'s values in it (${o.marker}): ${shown(got)}` : shown(got),
    `nothing of ${o.marker}`,
  );
}

// P's result is its own answer (or, with refusal allowed, the gateway's refusal: it cannot tell).
function ownAnswer(label, p, got, refusal) {
  const own = p.has(got);
  const refused = !own && CANNOT_TELL.test(got);
  const detail = own
    ? `its own answer ("${p.answer.name}", ${p.answer.email})`
    : refused
    ? `refused: the gateway cannot tell (${short(got, 160)})`
    : `neither its answer nor a refusal: ${shown(got)}`;
  step(
    `${label}, ${p.letter}'s result, ${refusal ? `${p.letter}'s answer or a refusal` : `${p.letter}'s answer`}`,
    own || (refusal && refused),
    detail,
    refusal
      ? `"${p.answer.name}" or an error saying the gateway cannot tell`
      : `"${p.answer.name}" and ${p.answer.email}`,
  );
}

// P's handler asked exactly once (or at most once), and only about P's call: P's answer in P's result, in no other.
function askedOwn(label, p, results, atMostOnce) {
  const n = p.elicited.length;
  const inOwn = p.has(results.get(p));
  const inOther = results.get(other(p)).includes(p.marker);
  const often = atMostOnce ? "at most once" : "exactly once";
  let ok = atMostOnce ? n <= 1 : n === 1;
  let where = "";
  if (n > 0) {
    where = inOther
      ? `; its answer came back in ${other(p).letter}'s result: asked about ${other(p).letter}'s call`
      : inOwn
      ? `; its answer came back in its own result`
      : `; its answer is in neither result`;
    ok &&= inOwn && !inOther;
  } else if (inOwn) {
    where = "; yet its answer is in its result";
    ok = false;
  }
  step(
    `${label}, ${p.letter}'s elicitation handler asked ${often}, about its own call`,
    ok,
    `${asked(p)}${where}`,
    `${often}, its answer in ${p.letter}'s result only`,
  );
}

// A and B call TOOL, together or one after the other; the checks as above.
async function elicitBoth(label, tool, { together, refusal }) {
  for (const p of both) p.elicited = [];
  const results = new Map();
  if (together) {
    const got = await Promise.all(both.map((p) => p.call(tool)));
    both.forEach((p, at) => results.set(p, got[at].text));
  } else {
    for (const p of both) results.set(p, (await p.call(tool)).text);
  }
  for (const p of both) {
    unmixed(label, p, results.get(p));
    ownAnswer(label, p, results.get(p), refusal);
  }
  for (const p of both) askedOwn(label, p, results, refusal);
}

try {
  await Promise.all(both.map((p) => p.client.connect(p.transport)));
  const sessions = both.map((p) => p.transport.sessionId);
  step(
    "connect A and B",
    both.every((p) => p.client.getServerVersion()?.name === "mcp.ts gateway") && sessions[0] !== sessions[1],
    `server ${JSON.stringify(a.client.getServerVersion())}; sessions A ${sessions[0]}, B ${sessions[1]}`,
    'serverInfo.name "mcp.ts gateway" and two sessions',
  );

  // 1. A stdio upstream, calls of both clients in flight: the gateway may not be able to tell, then it refuses.
  await elicitBoth("1 stdio at once", `everything__${ELICIT}`, { together: true, refusal: true });
  // 2. One call in flight at a time: the gateway can tell.
  await elicitBoth("2 stdio in turn", `everything__${ELICIT}`, { together: false, refusal: false });
  // 3. An HTTP upstream: the question comes on the call's own stream, so the gateway can tell even with both.
  await elicitBoth("3 http at once", `web__${ELICIT}`, { together: true, refusal: false });

  // 4. Roots are one client's: the gateway does not offer them to a shared upstream.
  const listed = (await a.client.listTools()).tools.map((tool) => tool.name).filter((name) =>
    name.endsWith("__get-roots-list")
  );
  const roots = await a.call("everything__get-roots-list");
  const leaked = [a, b].filter((p) => roots.text.includes(p.root.uri));
  const shownList = listed.length ? `listed: ${listed.join(", ")}` : "no *__get-roots-list listed";
  step(
    "4 roots, A's everything__get-roots-list not listed or failing",
    (!listed.includes("everything__get-roots-list") || roots.failed) && leaked.length === 0,
    `${shownList}; the call: ${short(roots.text, 200)}` +
      (leaked.length ? `; it shows the roots of ${leaked.map((p) => p.letter).join(" and ")}` : ""),
    "not listed, or an error; no client's root in it",
  );
  step(
    "4 roots, no client asked roots/list",
    a.rootsAsked === 0 && b.rootsAsked === 0,
    `roots/list asked of A ${a.rootsAsked} times, of B ${b.rootsAsked} (during the whole run)`,
    "0 and 0",
  );
} catch (error) {
  step("session", false, `the SDK raised ${error?.name}: ${oneLine(error?.message ?? error)}`);
} finally {
  for (const p of both) {
    if (p.transport.sessionId) await p.transport.terminateSession().catch(() => {}); // DELETE
    await p.client.close().catch(() => {});
  }
}
console.log(`${failures === 0 ? "all steps as expected" : `${failures} steps FAILED`} (${elapsed()})`);
process.exitCode = failures === 0 ? 0 : 1;
