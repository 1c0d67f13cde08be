// A hand-written Streamable HTTP MCP server for testing the HTTP client. It does not import mcp.ts, so a bug in our
// server cannot hide a bug in our client. It listens on 127.0.0.1 port FAKE_PORT (default 0: any free port), prints
// exactly one line "listening http://127.0.0.1:PORT/mcp" on stdout when ready, notes every request on stderr
// ("fake: got POST tools/call"), and exits at once on SIGTERM or SIGINT. FAKE_MODE is a comma-separated list of
// switches (several may combine; an unknown one exits 2):
//
//   (none)                legacy Streamable HTTP 2025-11-25: initialize mints an Mcp-Session-Id; a later request
//                         without it → 400, with an unknown one → 404; a bad MCP-Protocol-Version → 400 (a missing
//                         one is fine); POST needs Accept with both types (else 406); non-JSON → 400 -32700;
//                         notifications and responses → 202; DELETE ends the session; GET → 405; answers are JSON
//   sse                   legacy answers are text/event-stream, progress notifications before the result
//   expire                a session is forgotten after FAKE_EXPIRE_AFTER (2) requests past initialize (notifications
//                         and responses do not count); then → 404 until a fresh initialize
//   sse-retry             tools/call answers "id: ev-1, retry: FAKE_RETRY_MS (500), empty data" and closes after
//                         50 ms; a GET with Last-Event-ID: ev-1 then gets the result (id: ev-2); other GETs → 405
//   get-stream            a GET opens a standalone stream; 300 ms later it carries notifications/tools/list_changed
//                         and the request roots/list (id "srv-1"), whose answer the client POSTs (202)
//   server-requests       legacy tool "ask": on its SSE answer, asks roots/list, elicitation/create and
//                         sampling/createMessage (each only if declared in initialize), then returns the answers
//   modern                2026-07-28 only, stateless: server/discover; _meta protocolVersion + clientCapabilities
//                         (else 400 -32602); strict MCP-Protocol-Version, Mcp-Method, Mcp-Name and Mcp-Param-*
//                         headers (else 400 -32020); other versions → 400 -32022; unknown method → 404 -32601;
//                         legacy initialize → 400 -32022, GET/DELETE → 405; MRTR tools; ttlMs FAKE_TTL_MS (0)
//   dual                  both eras on one endpoint: requests with a modern _meta as in modern, the rest legacy
//   sse-modern            modern answers as SSE (with progress); a client closing one is noted as cancelled;
//                         implies modern unless dual is given
//   header-mismatch-once  the first modern tools/call gets 400 -32020, as if the client's tool list were stale;
//                         implies modern unless dual is given
//   header-mismatch-always  every modern tools/call gets it (a client must not retry forever); implies modern
//   version-retry         modern, but the very first POST, whatever it is, gets 400 -32022
//   old-sse               only the 2024-11-05 HTTP+SSE transport: POST /mcp → 405; GET /mcp streams an "endpoint"
//                         event naming /messages?sessionId=ID; POSTs there get 202 and answers go on the GET stream
//   slow                  every request waits FAKE_DELAY_MS (2000) ms first (a client abort ends the wait)
//   error500              every POST → 500 text/plain "internal failure"
//   garbage               every request → 200 application/json "<html>not json</html>"
//   unauthorized          every request without "Authorization: Bearer FAKE_TOKEN" (secret-token) → 401 with
//                         WWW-Authenticate: Bearer resource_metadata="http://127.0.0.1:PORT/.well-known/..."
//   silent-discover       legacy server that never answers server/discover or any request with a modern _meta
//
// Tools in both eras: echo {text}, add {a, b}, slow {steps = 3, ms = 100} (progress each step, then "done N"), fail
// (isError), whoami (the request headers as JSON). Legacy adds ask (server-requests). Modern adds region {region,
// priority} (mirrored as Mcp-Param-Region / -Priority), bad_number, bad_dup, bad_space (invalid x-mcp-header: a
// client must drop them), confirm / roots_needed / sample (input_required first; only confirm hands out a
// requestState, and a retry must echo it byte for byte), no_result_type, weird_type. One resource fake://hello
// ("hello"), one prompt greet {name}. A JSON answer drops progress notifications; ask always answers with SSE.
//
// Always: GET /_log is a JSON array of every request received, except these two ({method, path with query, headers,
// body (parsed JSON or raw text), time (ms since the epoch)}), plus {method: "CLOSED", body: {id}} when a client
// closed a connection before its answer, and {method: "SERVER-CLOSED", body: {id}} when sse-retry cut a stream.
// POST /_reset empties it.
import { Buffer } from "node:buffer";
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";

// deno-lint-ignore no-explicit-any
type Json = any;
type Id = string | number | null;
type Message = { jsonrpc?: string; id?: Id; method?: string; params?: Json; result?: Json; error?: Json };
type Session = {
  id: string;
  capabilities: Json; // what the client declared in initialize
  requests: number; // requests since initialize (expire)
  pending: Map<Id, (message: Message) => void>; // our requests to the client, by id
  stream?: ServerResponse; // the standalone GET stream (get-stream) or the old-sse stream
  events: number; // SSE event ids handed out (sse-retry)
  resumable: Map<string, Promise<{ eventId: string; message: Message }>>; // by the Last-Event-ID that resumes it
};
// One HTTP request: aborted once the client closes it before our answer, which wakes onAbort.
type Ctx = { req: IncomingMessage; res: ServerResponse; path: string; aborted: boolean; onAbort: (() => void)[] };
// What a method handler may do besides returning its result.
type Out = {
  headers: IncomingMessage["headers"];
  notify: (message: Message) => void; // a notification for this request (dropped from a JSON answer)
  ask?: (method: string, params: Json) => Promise<Message>; // a server→client request (legacy only)
  aborted: () => boolean;
  onAbort: (() => void)[];
};

const KNOWN = "sse expire sse-retry get-stream server-requests modern dual sse-modern header-mismatch-once " +
  "header-mismatch-always " +
  "version-retry old-sse slow error500 garbage unauthorized silent-discover";
const modes = new Set((process.env.FAKE_MODE ?? "").split(",").map((mode) => mode.trim()).filter(Boolean));
const has = (mode: string) => modes.has(mode);
const tunable = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const EXPIRE_AFTER = tunable("FAKE_EXPIRE_AFTER", 2);
const RETRY_MS = tunable("FAKE_RETRY_MS", 500);
const DELAY_MS = tunable("FAKE_DELAY_MS", 2000);
const TTL_MS = tunable("FAKE_TTL_MS", 0);
const TOKEN = process.env.FAKE_TOKEN ?? "secret-token";
const MODERN = "2026-07-28";
const LEGACY = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
const PV = "io.modelcontextprotocol/protocolVersion";
const CAPS = "io.modelcontextprotocol/clientCapabilities";
// sse-modern and header-mismatch-once imply modern, unless dual.
const servesLegacy = !has("modern") && !has("version-retry") && !has("header-mismatch-always") &&
  (has("dual") || !has("sse-modern") && !has("header-mismatch-once"));
const servesModern = !servesLegacy || has("dual");
const SSE = { "content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no" };

const note = (text: string) => process.stderr.write(`fake: ${text}\n`);
for (const mode of modes) {
  if (!KNOWN.split(" ").includes(mode)) {
    note(`unknown FAKE_MODE ${mode}; known: ${KNOWN}`);
    process.exit(2);
  }
}

type Entry = { method: string; path: string; headers: Json; body: unknown; time: number };
const log: Entry[] = [];
const record = (method: string, path: string, headers: Json, body: unknown) =>
  log.push({ method, path, headers, body, time: Date.now() });

// A JSON-RPC error; status is the HTTP status when the answer is not already streaming.
type RpcError = Error & { code: number; status: number; data?: unknown };
const rpcError = (code: number, message: string, status = 200, data?: unknown): RpcError =>
  Object.assign(new Error(message), { code, status, data });

// --- Tools, resources, prompts --------------------------------------------------------------------------------------

const object = (properties: Json, required?: string[]) => ({
  type: "object",
  properties,
  ...(required && { required }),
});
const tool = (name: string, description: string, inputSchema = object({})) => ({ name, description, inputSchema });
const BASE_TOOLS = [
  tool("echo", "Echo text", object({ text: { type: "string" } }, ["text"])),
  tool("add", "Add two numbers", object({ a: { type: "number" }, b: { type: "number" } }, ["a", "b"])),
  tool("slow", "Reports progress, then answers", object({ steps: { type: "integer" }, ms: { type: "integer" } })),
  tool("fail", "Reports an error"),
  tool("whoami", "The request headers it received, as JSON"),
];
const ASK_TOOL = tool("ask", "Asks the client for roots, a form and a sample");
const header = (name: string, type: string) => ({ type, "x-mcp-header": name });
const MODERN_TOOLS = [
  ...BASE_TOOLS,
  tool("region", "Mirrored", object({ region: header("Region", "string"), priority: header("Priority", "integer") })),
  tool("bad_number", "x-mcp-header on a number", object({ n: header("N", "number") })),
  tool("bad_dup", "x-mcp-header twice", object({ a: header("Same", "string"), b: header("same", "string") })),
  tool("bad_space", "x-mcp-header with a space", object({ a: header("has space", "string") })),
  tool("confirm", "Asks for a confirmation (elicitation), with requestState"),
  tool("roots_needed", "Asks for the client's roots"),
  tool("sample", "Asks the client's LLM"),
  tool("no_result_type", "A result without resultType"),
  tool("weird_type", "A result with resultType mystery"),
];
const RESOURCE = { uri: "fake://hello", name: "hello", mimeType: "text/plain" };
const PROMPT = { name: "greet", description: "Greets someone", arguments: [{ name: "name", required: true }] };
const ELICIT = {
  mode: "form",
  message: "Your name?",
  requestedSchema: {
    type: "object",
    properties: { name: { type: "string", default: "anon" }, age: { type: "integer" } },
    required: ["name"],
  },
};
const CONFIRM = {
  method: "elicitation/create",
  params: {
    mode: "form",
    message: "Proceed?",
    requestedSchema: { type: "object", properties: { ok: { type: "boolean", default: true } }, required: ["ok"] },
  },
};
const SAMPLE = { messages: [{ role: "user", content: { type: "text", text: "2+2?" } }], maxTokens: 10 };

const text = (value: string) => ({ content: [{ type: "text", text: value }] });
const sleep = (ms: number, onAbort?: (() => void)[]) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    onAbort?.push(() => {
      clearTimeout(timer);
      resolve();
    });
  });
const need = (capabilities: Json, name: string) => {
  const data = { requiredCapabilities: { [name]: {} } };
  if (!capabilities?.[name]) throw rpcError(-32021, `Missing required client capability: ${name}`, 400, data);
};
const inputRequired = (inputRequests: Json, requestState?: string) => ({
  resultType: "input_required",
  inputRequests,
  ...(requestState !== undefined && { requestState }),
});

async function callTool(modern: boolean, session: Session | undefined, params: Json, out: Out): Promise<Json> {
  const { name, arguments: args = {}, _meta } = params;
  switch (name) {
    case "echo":
      return text(String(args.text ?? ""));
    case "add":
      return text(String(Number(args.a) + Number(args.b)));
    case "fail":
      return { ...text("it went wrong"), isError: true };
    case "whoami":
      return text(JSON.stringify(out.headers));
    case "slow": {
      const steps = Number(args.steps ?? 3);
      for (let step = 1; step <= steps; step++) {
        await sleep(Number(args.ms ?? 100), out.onAbort);
        if (out.aborted()) return text(`aborted at step ${step}`);
        const progress = { progressToken: _meta?.progressToken, progress: step, total: steps, message: `step ${step}` };
        if (progress.progressToken !== undefined) out.notify({ method: "notifications/progress", params: progress });
      }
      return text(`done ${steps}`);
    }
  }
  if (!modern) {
    if (name !== "ask" || !has("server-requests") || !out.ask) throw rpcError(-32602, `Unknown tool: ${name}`);
    const answers: Record<string, unknown> = {};
    const questions: [string, string, Json][] = [
      ["roots", "roots/list", {}],
      ["elicitation", "elicitation/create", ELICIT],
      ["sampling", "sampling/createMessage", SAMPLE],
    ];
    for (const [key, method, question] of questions) {
      if (!session?.capabilities?.[key]) {
        answers[key] = "not declared";
        continue;
      }
      const reply = await out.ask(method, question);
      answers[key] = reply.error ? { error: reply.error } : reply.result;
    }
    return text(JSON.stringify(answers));
  }
  const capabilities = _meta?.[CAPS];
  const responses = params.inputResponses ?? {};
  // Only confirm hands out a requestState; a client must never invent one.
  if (["roots_needed", "sample"].includes(name) && params.requestState !== undefined) {
    throw rpcError(-32602, `requestState sent to ${name}, which never gave one`);
  }
  switch (name) {
    case "region":
      return text(JSON.stringify({ region: args.region, priority: args.priority }));
    case "bad_number":
    case "bad_dup":
    case "bad_space":
      return text("should have been dropped");
    case "confirm": {
      need(capabilities, "elicitation");
      const state = "fake+state/v1=" + Buffer.from(JSON.stringify({ tool: "confirm", args })).toString("base64");
      if (responses.confirm === undefined) return inputRequired({ confirm: CONFIRM }, state);
      if (params.requestState !== state) throw rpcError(-32602, "Invalid requestState");
      return text(`confirmed: ${JSON.stringify(responses.confirm)}`);
    }
    case "roots_needed": {
      need(capabilities, "roots");
      if (responses.roots === undefined) return inputRequired({ roots: { method: "roots/list", params: {} } });
      return text(`roots: ${(responses.roots.roots ?? []).map((root: Json) => root.uri).join(", ")}`);
    }
    case "sample": {
      need(capabilities, "sampling");
      const llm = responses.llm;
      if (llm === undefined) return inputRequired({ llm: { method: "sampling/createMessage", params: SAMPLE } });
      const content = Array.isArray(llm.content) ? llm.content[0] : llm.content;
      return text(String(content?.text ?? JSON.stringify(llm)));
    }
    case "no_result_type":
      return { ...text("no type"), resultType: undefined }; // present, so not filled in; JSON.stringify drops it
    case "weird_type":
      return { ...text("weird"), resultType: "mystery" };
  }
  throw rpcError(-32602, `Unknown tool: ${name}`);
}

// The answer to one request (initialize aside), or an RpcError.
async function serve(modern: boolean, session: Session | undefined, message: Message, out: Out): Promise<Json> {
  const params = message.params ?? {};
  switch (message.method) {
    case "ping":
    case "logging/setLevel":
      if (modern) break;
      return {};
    case "server/discover":
      if (!modern) break;
      return {
        supportedVersions: [MODERN],
        capabilities: { tools: {}, resources: {}, prompts: {} },
        _meta: { "io.modelcontextprotocol/serverInfo": { name: "fake-http-modern", version: "1.0.0" } },
      };
    case "tools/list":
      return { tools: modern ? MODERN_TOOLS : has("server-requests") ? [...BASE_TOOLS, ASK_TOOL] : BASE_TOOLS };
    case "tools/call":
      return await callTool(modern, session, params, out);
    case "resources/list":
      return { resources: [RESOURCE] };
    case "resources/read":
      if (params.uri !== RESOURCE.uri) throw rpcError(-32602, `Unknown resource: ${params.uri}`);
      return { contents: [{ uri: RESOURCE.uri, mimeType: "text/plain", text: "hello" }] };
    case "prompts/list":
      return { prompts: [PROMPT] };
    case "prompts/get":
      if (params.name !== PROMPT.name) throw rpcError(-32602, `Unknown prompt: ${params.name}`);
      return {
        description: PROMPT.description,
        messages: [{ role: "user", content: { type: "text", text: `Hello, ${params.arguments?.name ?? "you"}!` } }],
      };
  }
  throw rpcError(-32601, `Method not found: ${message.method}`, modern ? 404 : 200);
}

// Every 2026-07-28 result carries resultType; the cacheable ones carry ttlMs and cacheScope.
function modernize(method: string, result: Json) {
  if ("resultType" in result) return result;
  const cacheable = ["server/discover", "tools/list", "prompts/list", "resources/list", "resources/read"];
  const hints = cacheable.includes(method) && { ttlMs: TTL_MS, cacheScope: "public" };
  return { resultType: "complete", ...result, ...hints };
}

function initialize(session: Session, params: Json) {
  session.capabilities = params?.capabilities ?? {};
  const asked = params?.protocolVersion;
  return {
    protocolVersion: LEGACY.includes(asked) ? asked : LEGACY[0],
    capabilities: { tools: { listChanged: true }, resources: {}, prompts: {}, logging: {} },
    serverInfo: { name: "fake-http", version: "1.0.0" },
  };
}

// --- HTTP plumbing --------------------------------------------------------------------------------------------------

const sessions = new Map<string, Session>();
const newSession = (id: string): Session => {
  const session = { id, capabilities: {}, requests: 0, pending: new Map(), events: 0, resumable: new Map() };
  sessions.set(id, session);
  return session;
};
let asked = 0; // requests sent by the ask tool, for their ids
let firstPost = true; // version-retry
let mismatched = false; // header-mismatch-once

const get = (req: IncomingMessage, name: string) => {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(", ") : value;
};
const accepts = (req: IncomingMessage, type: string) => (get(req, "accept") ?? "").includes(type);
const frame = (message: Message, id?: string) =>
  `${id ? `id: ${id}\n` : ""}event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", ...message })}\n\n`;
const json = (res: ServerResponse, status: number, body: unknown, headers: Json = {}) => {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
};
const fail = (res: ServerResponse, status: number, id: Id | undefined, code: number, message: string, data?: unknown) =>
  json(res, status, { jsonrpc: "2.0", id: id ?? null, error: { code, message, ...(data !== undefined && { data }) } });
const accepted = (res: ServerResponse) => res.writeHead(202).end();
const openStream = (res: ServerResponse, headers: Json = {}) => {
  res.writeHead(200, { ...SSE, ...headers });
  res.flushHeaders();
};

async function settle(id: Id | undefined, work: () => Json): Promise<{ message: Message; status: number }> {
  try {
    return { message: { jsonrpc: "2.0", id, result: await work() }, status: 200 };
  } catch (caught) {
    const { code, message, data, status } = caught as RpcError;
    if (typeof code !== "number") throw caught;
    return { message: { jsonrpc: "2.0", id, error: { code, message, ...(data !== undefined && { data }) } }, status };
  }
}

// Answers a request on its own response: JSON, or SSE when `sse` or once the handler sends a request.
async function reply(ctx: Ctx, message: Message, sse: boolean, work: (out: Out) => Json, session?: Session) {
  const { res } = ctx;
  const send = (event: Message) => {
    if (ctx.aborted) return;
    if (!res.headersSent) openStream(res);
    res.write(frame(event));
  };
  const out: Out = {
    headers: ctx.req.headers,
    notify: (event) => sse ? send(event) : note(`dropped ${event.method} (JSON answer)`),
    ask: session && askVia(session, send),
    aborted: () => ctx.aborted,
    onAbort: ctx.onAbort,
  };
  const answer = await settle(message.id, () => work(out));
  if (ctx.aborted) return;
  if (!res.headersSent && (!sse || answer.status !== 200)) return json(res, answer.status, answer.message);
  send(answer.message);
  res.end();
}

const askVia = (session: Session, send: (message: Message) => void) => (method: string, params: Json) => {
  const id = `ask-${++asked}`;
  send({ id, method, params });
  return new Promise<Message>((resolve) => session.pending.set(id, resolve));
};

// The session named by Mcp-Session-Id, or undefined once it answered 400 (no header) or 404 (unknown or ended).
function sessionOf(ctx: Ctx, id?: Id) {
  const name = get(ctx.req, "mcp-session-id");
  if (name === undefined) return fail(ctx.res, 400, id, -32000, "Bad Request: Mcp-Session-Id header is required");
  return sessions.get(name) ?? fail(ctx.res, 404, id, -32001, "Session not found");
}
const notAllowed = (res: ServerResponse) => fail(res, 405, null, -32000, "Method not allowed.");
const notAcceptable = (res: ServerResponse, types: string) =>
  fail(res, 406, null, -32000, `Not Acceptable: Accept must list ${types}`);

function legacyPost(ctx: Ctx, message: Message) {
  const { req, res } = ctx;
  if (message.method === "initialize") {
    const session = newSession(`fake-${randomBytes(12).toString("base64")}`);
    note(`session ${session.id} started`);
    res.setHeader("Mcp-Session-Id", session.id);
    return reply(ctx, message, has("sse"), () => initialize(session, message.params), session);
  }
  const session = sessionOf(ctx, message.id);
  if (!session) return;
  const version = get(req, "mcp-protocol-version");
  if (version !== undefined && !LEGACY.includes(version)) {
    return fail(res, 400, message.id, -32000, `Bad Request: unsupported MCP-Protocol-Version ${version}`);
  }
  if (message.method === undefined) { // the client's answer to one of our requests
    const waiting = session.pending.get(message.id ?? null);
    if (!waiting) note(`answer to unknown id ${message.id}`);
    session.pending.delete(message.id ?? null);
    waiting?.(message);
    return accepted(res);
  }
  if (message.id === undefined) return accepted(res);
  if (has("expire") && ++session.requests > EXPIRE_AFTER) {
    sessions.delete(session.id);
    note(`session ${session.id} expired after ${EXPIRE_AFTER} requests`);
    return fail(res, 404, message.id, -32001, "Session not found");
  }
  if (has("sse-retry") && message.method === "tools/call" && message.params?.name !== "ask") {
    return pollable(ctx, session, message);
  }
  const sse = has("sse") || message.method === "tools/call" && message.params?.name === "ask";
  return reply(ctx, message, sse, (out) => serve(false, session, message, out), session);
}

// sse-retry: prime the stream, cut it after 50 ms, and keep the answer for the GET that resumes it.
function pollable(ctx: Ctx, session: Session, message: Message) {
  const prime = `ev-${++session.events}`;
  const eventId = `ev-${++session.events}`;
  const out: Out = {
    headers: ctx.req.headers,
    notify: (event) => note(`dropped ${event.method} (sse-retry)`),
    aborted: () => false,
    onAbort: [],
  };
  const answer = settle(message.id, () => serve(false, session, message, out));
  session.resumable.set(prime, answer.then(({ message }) => ({ eventId, message })));
  openStream(ctx.res);
  ctx.res.write(`id: ${prime}\nretry: ${RETRY_MS}\ndata: \n\n`);
  setTimeout(() => {
    ctx.res.end();
    record("SERVER-CLOSED", ctx.path, {}, { id: message.id });
    note(`closed the stream of ${message.id} after ${prime}`);
  }, 50);
}

async function legacyGet(ctx: Ctx) {
  const { req, res } = ctx;
  const lastEventId = get(req, "last-event-id");
  const resuming = has("sse-retry") && lastEventId !== undefined;
  if (!resuming && !has("get-stream")) return notAllowed(res);
  if (!accepts(req, "text/event-stream")) return notAcceptable(res, "text/event-stream");
  const session = sessionOf(ctx);
  if (!session) return;
  if (resuming) {
    const answer = session.resumable.get(lastEventId);
    if (!answer) return fail(res, 400, null, -32000, `Unknown Last-Event-ID ${lastEventId}`);
    session.resumable.delete(lastEventId);
    openStream(res);
    const { eventId, message } = await answer;
    if (!ctx.aborted) res.end(frame(message, eventId));
    return;
  }
  if (session.stream) return fail(res, 409, null, -32000, "Conflict: only one GET stream per session");
  session.stream = res;
  res.on("close", () => session.stream === res && (session.stream = undefined));
  openStream(res);
  await sleep(300, ctx.onAbort);
  if (ctx.aborted || res.writableEnded) return;
  res.write(frame({ method: "notifications/tools/list_changed" }));
  res.write(frame({ id: "srv-1", method: "roots/list", params: {} }));
  session.pending.set("srv-1", (answer) => note(`srv-1 answered ${JSON.stringify(answer.result ?? answer.error)}`));
}

function legacyDelete(ctx: Ctx) {
  const session = sessionOf(ctx);
  if (!session) return;
  sessions.delete(session.id);
  session.stream?.end();
  note(`session ${session.id} deleted`);
  ctx.res.writeHead(200).end();
}

function modernPost(ctx: Ctx, message: Message) {
  const { req, res } = ctx;
  const id = message.id;
  const mismatch = (why: string) => fail(res, 400, id, -32020, `Header mismatch: ${why}`);
  if (message.method === undefined) return fail(res, 400, id, -32600, "Clients must not send JSON-RPC responses");
  if (id === undefined) return accepted(res);
  const meta = message.params?._meta;
  if (message.method === "initialize" && meta?.[PV] === undefined) {
    const requested = message.params?.protocolVersion;
    return fail(res, 400, id, -32022, "Unsupported protocol version", { supported: [MODERN], requested });
  }
  if (typeof meta?.[PV] !== "string" || typeof meta?.[CAPS] !== "object" || meta?.[CAPS] === null) {
    return fail(res, 400, id, -32602, `params._meta must carry ${PV} and ${CAPS}`);
  }
  const version = get(req, "mcp-protocol-version");
  if (version === undefined) return mismatch("MCP-Protocol-Version header missing");
  if (version !== meta[PV]) return mismatch(`MCP-Protocol-Version header '${version}' but body '${meta[PV]}'`);
  if (version !== MODERN) {
    return fail(res, 400, id, -32022, "Unsupported protocol version", { supported: [MODERN], requested: version });
  }
  const method = get(req, "mcp-method");
  if (method !== message.method) return mismatch(`Mcp-Method header '${method}' but body '${message.method}'`);
  const name = message.method === "resources/read"
    ? message.params.uri
    : ["tools/call", "prompts/get"].includes(message.method)
    ? message.params.name
    : undefined;
  const nameHeader = get(req, "mcp-name");
  if (name !== undefined && (nameHeader === undefined || decode(nameHeader) !== String(name))) {
    return mismatch(`Mcp-Name header '${nameHeader}' but body '${name}'`);
  }
  if (message.method === "tools/call") {
    if ((has("header-mismatch-once") && !mismatched) || has("header-mismatch-always")) {
      mismatched = true;
      return mismatch("Mcp-Param headers do not match the tool's schema (header-mismatch-once)");
    }
    const tool = MODERN_TOOLS.find((tool) => tool.name === name);
    const problem = tool && !tool.name.startsWith("bad_") && paramProblem(tool.inputSchema, message.params, req);
    if (problem) return mismatch(problem);
  }
  const work = async (out: Out) => modernize(method, await serve(true, undefined, message, out));
  return reply(ctx, message, has("sse-modern"), work);
}

// Undoes the =?base64?...?= sentinel; undefined when the Base64 or its UTF-8 is invalid.
function decode(value: string): string | undefined {
  const match = /^=\?base64\?(.*)\?=$/.exec(value);
  if (!match) return value;
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(match[1]) || match[1].length % 4 !== 0) return undefined;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(match[1], "base64"));
  } catch {
    return undefined;
  }
}

// Each argument annotated with x-mcp-header NAME must come as Mcp-Param-NAME, and only when not null or absent.
function paramProblem(schema: Json, params: Json, req: IncomingMessage): string | undefined {
  for (const [property, spec] of Object.entries<Json>(schema.properties ?? {})) {
    const name = spec["x-mcp-header"];
    if (!name) continue;
    const raw = get(req, `mcp-param-${name.toLowerCase()}`);
    const value = params.arguments?.[property];
    if (value === undefined || value === null) {
      if (raw !== undefined) return `Mcp-Param-${name} sent, but ${property} is ${value}`;
      continue;
    }
    if (raw === undefined) return `Mcp-Param-${name} header missing for ${property}`;
    const got = decode(raw);
    if (got === undefined) return `Mcp-Param-${name} has invalid Base64: '${raw}'`;
    const same = typeof value === "number" ? got.trim() !== "" && Number(got) === value : got === String(value);
    if (!same) return `Mcp-Param-${name} header '${raw}' but body ${JSON.stringify(value)}`;
  }
  return undefined;
}

// old-sse: the 2024-11-05 HTTP+SSE transport, GET /mcp for the stream and POST /messages?sessionId= for the rest.
function oldSse(ctx: Ctx, body: unknown, parsed: boolean) {
  const { req, res } = ctx;
  const url = new URL(ctx.path, "http://127.0.0.1");
  if (url.pathname === "/mcp" && req.method === "GET") {
    if (!accepts(req, "text/event-stream")) return notAcceptable(res, "text/event-stream");
    const session = newSession(randomBytes(16).toString("hex"));
    session.stream = res;
    res.on("close", () => sessions.delete(session.id));
    openStream(res);
    res.write(`event: endpoint\ndata: /messages?sessionId=${session.id}\n\n`);
    return note(`old-sse session ${session.id} started`);
  }
  if (url.pathname !== "/messages" || req.method !== "POST") return notAllowed(res);
  const session = sessions.get(url.searchParams.get("sessionId") ?? "");
  if (!session) return fail(res, 404, null, -32001, "Session not found");
  if (!parsed) return fail(res, 400, null, -32700, "Parse error");
  const message = body as Message;
  res.writeHead(202).end("Accepted");
  if (message.method === undefined) return session.pending.get(message.id ?? null)?.(message);
  if (message.id === undefined) return;
  const stream = session.stream!;
  const send = (event: Message) => stream.writableEnded || stream.write(frame(event));
  const aborted = () => stream.writableEnded || stream.destroyed;
  const out: Out = { headers: req.headers, notify: send, ask: askVia(session, send), aborted, onAbort: [] };
  const work = () =>
    message.method === "initialize" ? initialize(session, message.params) : serve(false, session, message, out);
  return settle(message.id, work).then(({ message }) => send(message));
}

async function handle(req: IncomingMessage, res: ServerResponse) {
  const path = req.url ?? "/";
  const pathname = new URL(path, "http://127.0.0.1").pathname;
  if (pathname === "/_log" && req.method === "GET") return json(res, 200, log);
  if (pathname === "/_reset" && req.method === "POST") {
    log.length = 0;
    return json(res, 200, {});
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks).toString("utf8");
  let body: unknown = raw;
  let parsed = false;
  try {
    body = JSON.parse(raw);
    parsed = true;
  } catch { /* kept as text */ }
  record(req.method ?? "?", path, req.headers, body);
  const ctx: Ctx = { req, res, path, aborted: false, onAbort: [] };
  const message = (parsed && typeof body === "object" && body !== null ? body : {}) as Message;
  const id = message.method !== undefined ? message.id : undefined; // a request's id, for CLOSED
  res.on("close", () => {
    if (res.writableFinished) return;
    ctx.aborted = true;
    for (const wake of ctx.onAbort) wake();
    note(id !== undefined ? `cancelled ${id}` : `client closed ${req.method} ${path}`);
    record("CLOSED", path, {}, { id: id ?? null });
  });
  const what = message.method ??
    (message.id !== undefined ? `response ${message.id}` : raw && !parsed ? "(not JSON)" : "");
  note(`got ${req.method} ${path === "/mcp" ? "" : path + " "}${what}`.trimEnd());

  if (pathname !== "/mcp" && !(has("old-sse") && pathname === "/messages")) {
    return fail(res, 404, null, -32000, "Not found");
  }
  if (has("error500") && req.method === "POST") {
    return res.writeHead(500, { "content-type": "text/plain" }).end("internal failure");
  }
  if (has("garbage")) return res.writeHead(200, { "content-type": "application/json" }).end("<html>not json</html>");
  if (has("unauthorized") && get(req, "authorization") !== `Bearer ${TOKEN}`) {
    const metadata = `http://127.0.0.1:${port}/.well-known/oauth-protected-resource`;
    return json(res, 401, { error: "invalid_token", error_description: "Bearer token required" }, {
      "WWW-Authenticate": `Bearer resource_metadata="${metadata}"`,
    });
  }
  if (has("slow")) {
    await sleep(DELAY_MS, ctx.onAbort);
    if (ctx.aborted) return;
  }
  if (has("old-sse")) return oldSse(ctx, body, parsed);
  if (req.method === "GET" && servesLegacy) return legacyGet(ctx);
  if (req.method === "DELETE" && servesLegacy) return legacyDelete(ctx);
  if (req.method !== "POST") return notAllowed(res);
  if (!accepts(req, "application/json") || !accepts(req, "text/event-stream")) {
    return notAcceptable(res, "application/json and text/event-stream");
  }
  if (!parsed) return fail(res, 400, null, -32700, "Parse error");
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return fail(res, 400, null, -32600, "Invalid Request: one JSON-RPC message per POST");
  }
  const claim = message.params?._meta?.[PV];
  if (has("version-retry") && firstPost) {
    firstPost = false;
    const requested = claim ?? get(req, "mcp-protocol-version") ?? message.params?.protocolVersion ?? null;
    return fail(res, 400, message.id, -32022, "Unsupported protocol version", { supported: [MODERN], requested });
  }
  if (servesModern && (claim !== undefined || !servesLegacy)) return modernPost(ctx, message);
  if (has("silent-discover") && (claim !== undefined || message.method === "server/discover")) {
    return note(`holding ${message.method} ${message.id} unanswered`);
  }
  return legacyPost(ctx, message);
}

const server = createServer((req, res) => {
  handle(req, res).catch((error) => {
    note(`error: ${error?.stack ?? error}`);
    if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
    res.end("fake server error");
  });
});
let port = 0;
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    note(`${signal}, exiting`);
    process.exit(0);
  });
}
server.listen(Number(process.env.FAKE_PORT ?? 0), "127.0.0.1", () => {
  port = (server.address() as AddressInfo).port;
  note(`pid ${process.pid}, modes: ${[...modes].join(",") || "(none)"}`);
  process.stdout.write(`listening http://127.0.0.1:${port}/mcp\n`);
});
