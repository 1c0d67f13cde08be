// A hand-written hostile Streamable HTTP MCP server for testing that the HTTP client (and a gateway) survive servers
// that attack them. It does not import mcp.ts, so a bug in our server cannot hide a bug in our client. It listens on
// 127.0.0.1 port HOSTILE_PORT (default 0: any free port), prints exactly one line on stdout when ready, "listening
// http://127.0.0.1:PORT/mcp" (redirect-cross: "listening http://127.0.0.1:A/mcp other http://127.0.0.1:B/mcp"), notes
// every request on stderr ("fake: got POST :PORT /mcp tools/call"), and exits at once on SIGTERM or SIGINT.
//
// It speaks just enough legacy Streamable HTTP (2025-11-25) on its MCP endpoint: POST with a JSON body; initialize →
// 200 application/json, header Mcp-Session-Id: s1 (the session is never checked; capabilities are those of the latest
// initialize); notifications and responses → 202; ping, logging/setLevel → {}; tools/list → tool "echo" {text} (ask-late:
// tool "ask" {label} instead); tools/call echo → its text; server/discover → 400 with JSON-RPC error -32601 "Method not
// found"; other methods → 200 with -32601, unknown tools → -32602; a body that is not JSON → 400 -32700; DELETE → 200;
// GET → 405; any other path → 404. HOSTILE_MODE (required; an unknown or missing one exits 2) picks the attack:
//
//   redirect-cross  listens on TWO ports, A (HOSTILE_PORT) and B (HOSTILE_OTHER_PORT, default 0): every POST and
//                   DELETE to A's /mcp → 307 Location: http://127.0.0.1:B/mcp (another origin); B's /mcp is the MCP
//                   endpoint; the other requests to A's /mcp → 405
//   redirect-same   one port: every POST and DELETE to /mcp → 307 Location: /real (same origin); /real is the MCP
//                   endpoint; the other requests to /mcp → 405
//   endless-sse     every tools/call → 200 text/event-stream "event: message\ndata: " then 'x' forever, in 64 KiB
//                   chunks awaiting 'drain', never ending the line, until the client goes away
//   ask-late        tools/call ask → 200 text/event-stream at once; after HOSTILE_DELAY_MS (300) ms, on that stream,
//                   elicitation/create (id "q-N", {message "PIN for <label>", requestedSchema {type object, properties
//                   {pin: {type string}}, required [pin]}}); the client POSTs its answer (202), matched by id, so several
//                   calls may be in flight; then on the stream the result, text "<label> got <JSON of the answer's
//                   result, or else its error>", and the stream ends. If the latest initialize did not declare
//                   elicitation: a JSON answer, isError text "no elicitation"
//
// Always, on every port: GET /_log is a JSON array of {port, method, path, headers} for every request received (on
// A and B alike, except /_log and /_reset themselves), so a test can assert that a header such as Authorization or
// X-Api-Key never reached B; POST /_reset empties it.
import { Buffer } from "node:buffer";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";

// deno-lint-ignore no-explicit-any
type Json = any;
type Id = string | number | null;
type Message = { jsonrpc?: string; id?: Id; method?: string; params?: Json; result?: Json; error?: Json };

const MODES = ["redirect-cross", "redirect-same", "endless-sse", "ask-late"];
const mode = process.env.HOSTILE_MODE ?? "";
const DELAY_MS = Number(process.env.HOSTILE_DELAY_MS ?? 300);
const note = (text: string) => process.stderr.write(`fake: ${text}\n`);
if (!MODES.includes(mode)) {
  note(`unknown HOSTILE_MODE '${mode}'; known: ${MODES.join(" ")}`);
  process.exit(2);
}

const log: { port: number; method: string; path: string; headers: Json }[] = [];
const pending = new Map<Id, (message: Message) => void>(); // our questions to the client (ask-late), by id
let capabilities: Json = {}; // what the latest initialize declared
let asked = 0;
let portA = 0;
let portB = 0; // redirect-cross

const ECHO = { name: "echo", description: "Echo text", inputSchema: object({ text: { type: "string" } }, ["text"]) };
const ASK = {
  name: "ask",
  description: "Asks the client for a PIN",
  inputSchema: object({ label: { type: "string" } }, ["label"]),
};
const PIN_SCHEMA = object({ pin: { type: "string" } }, ["pin"]);
function object(properties: Json, required: string[]) {
  return { type: "object", properties, required };
}

const text = (value: string) => ({ content: [{ type: "text", text: value }] });
const frame = (message: Message) => `event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", ...message })}\n\n`;
const json = (res: ServerResponse, status: number, body: unknown, headers: Json = {}) =>
  res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
const ok = (res: ServerResponse, id: Id, result: Json, headers: Json = {}) =>
  json(res, 200, { jsonrpc: "2.0", id, result }, headers);
const fail = (res: ServerResponse, status: number, id: Id | undefined, code: number, message: string) =>
  json(res, status, { jsonrpc: "2.0", id: id ?? null, error: { code, message } });
const openStream = (res: ServerResponse) => {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  res.flushHeaders();
};
// Watches a response: gone once the client closed it; wait() resolves on the next 'drain' or close.
function watch(res: ServerResponse) {
  let wake = () => {};
  const state = { gone: false, wait: () => new Promise<void>((resolve) => (wake = resolve)) };
  res.on("drain", () => wake());
  res.on("close", () => {
    state.gone = true;
    wake();
  });
  return state;
}

async function endless(res: ServerResponse, id: Id) {
  const stream = watch(res);
  openStream(res);
  res.write("event: message\ndata: ");
  const chunk = "x".repeat(64 * 1024);
  let sent = 0;
  while (!stream.gone) {
    if (!res.write(chunk)) await stream.wait();
    else await new Promise((resolve) => setTimeout(resolve, 0)); // lets the close in, should writes never push back
    sent += chunk.length;
  }
  note(`endless answer to ${id} closed by the client after ${sent} x`);
}

async function ask(res: ServerResponse, id: Id, label: string) {
  if (!capabilities?.elicitation) return ok(res, id, { ...text("no elicitation"), isError: true });
  const stream = watch(res);
  openStream(res);
  await new Promise((resolve) => setTimeout(resolve, DELAY_MS));
  if (stream.gone) return note(`call ${id} closed by the client before its question`);
  const question = `q-${++asked}`;
  const answer = new Promise<Message>((resolve) => pending.set(question, resolve));
  res.on("close", () => pending.delete(question));
  res.write(
    frame({
      id: question,
      method: "elicitation/create",
      params: { message: `PIN for ${label}`, requestedSchema: PIN_SCHEMA },
    }),
  );
  const reply = await answer;
  if (stream.gone) return note(`call ${id} closed by the client before its answer`);
  res.end(frame({ id, result: text(`${label} got ${JSON.stringify(reply.result ?? reply.error)}`) }));
}

function post(res: ServerResponse, message: Message) {
  if (message.method === undefined) { // the client's answer to one of our questions
    const waiting = pending.get(message.id ?? null);
    if (!waiting) note(`answer to unknown id ${message.id}`);
    pending.delete(message.id ?? null);
    waiting?.(message);
    return res.writeHead(202).end();
  }
  if (message.id === undefined) return res.writeHead(202).end(); // notifications
  const { id } = message;
  const params = message.params ?? {};
  switch (message.method) {
    case "initialize": {
      capabilities = params.capabilities ?? {};
      const versions = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
      return ok(res, id, {
        protocolVersion: versions.includes(params.protocolVersion) ? params.protocolVersion : versions[0],
        capabilities: { tools: {} },
        serverInfo: { name: `hostile-${mode}`, version: "1.0" },
      }, { "mcp-session-id": "s1" });
    }
    case "server/discover":
      return fail(res, 400, id, -32601, "Method not found");
    case "ping":
    case "logging/setLevel":
      return ok(res, id, {});
    case "tools/list":
      return ok(res, id, { tools: mode === "ask-late" ? [ASK] : [ECHO] });
    case "tools/call": {
      const { name, arguments: args = {} } = params;
      if (mode === "endless-sse") return endless(res, id);
      if (mode === "ask-late" && name === "ask") return ask(res, id, String(args.label ?? ""));
      if (mode !== "ask-late" && name === "echo") return ok(res, id, text(String(args.text ?? "")));
      return fail(res, 200, id, -32602, `Unknown tool: ${name}`);
    }
  }
  return fail(res, 200, id, -32601, `Method not found: ${message.method}`);
}

async function handle(req: IncomingMessage, res: ServerResponse) {
  const port = req.socket.localPort ?? 0;
  const path = req.url ?? "/";
  const pathname = new URL(path, "http://127.0.0.1").pathname;
  const method = req.method ?? "?";
  if (pathname === "/_log" && method === "GET") return json(res, 200, log);
  if (pathname === "/_reset" && method === "POST") {
    log.length = 0;
    return json(res, 200, {});
  }
  log.push({ port, method, path, headers: req.headers });
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks).toString("utf8");
  let message: Message | undefined;
  try {
    message = JSON.parse(raw);
  } catch { /* not JSON */ }
  const what = message?.method ?? (message?.id !== undefined ? `response ${message.id}` : raw ? "(not JSON)" : "");
  note(`got ${method} :${port} ${path} ${what}`.trimEnd());

  const redirected = method === "POST" || method === "DELETE";
  const endpoint = mode === "redirect-same" ? "/real" : "/mcp";
  if (pathname !== "/mcp" && pathname !== endpoint) return fail(res, 404, null, -32000, "Not found");
  if (mode === "redirect-cross" && port === portA) {
    if (redirected) return res.writeHead(307, { location: `http://127.0.0.1:${portB}/mcp` }).end();
    return fail(res, 405, null, -32000, "Method not allowed.");
  }
  if (mode === "redirect-same" && pathname === "/mcp" && redirected) {
    return res.writeHead(307, { location: "/real" }).end();
  }
  if (method === "DELETE") return res.writeHead(200).end();
  if (method !== "POST") return fail(res, 405, null, -32000, "Method not allowed.");
  if (typeof message !== "object" || message === null || Array.isArray(message)) {
    return fail(res, 400, null, -32700, "Parse error");
  }
  return post(res, message);
}

const serve = (port: number) =>
  new Promise<Server>((resolve) => {
    const server = createServer((req, res) => {
      handle(req, res).catch((error) => {
        note(`error: ${error?.stack ?? error}`);
        if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
        res.end("fake server error");
      });
    });
    server.listen(port, "127.0.0.1", () => resolve(server));
  });
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    note(`${signal}, exiting`);
    process.exit(0);
  });
}
const portOf = (server: Server) => (server.address() as AddressInfo).port;
portA = portOf(await serve(Number(process.env.HOSTILE_PORT ?? 0)));
if (mode === "redirect-cross") portB = portOf(await serve(Number(process.env.HOSTILE_OTHER_PORT ?? 0)));
note(`pid ${process.pid}, mode ${mode}`);
const other = portB ? ` other http://127.0.0.1:${portB}/mcp` : "";
process.stdout.write(`listening http://127.0.0.1:${portA}/mcp${other}\n`);
