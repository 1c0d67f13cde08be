// A hand-written stdio MCP server (newline-delimited JSON-RPC 2.0 on stdin/stdout) that asks its client questions
// in the middle of tool calls, several at once, for testing a client (or a gateway) that routes server→client
// requests. It does not import mcp.ts, so a bug in our server cannot hide a bug in our client. No modes:
//
//   initialize          echoes the client's protocolVersion when it is 2025-11-25, 2025-06-18, 2025-03-26 or
//                       2024-11-05 (else 2025-11-25), capabilities {tools}, serverInfo {name "hostile-asker"}
//   server/discover     error -32601 "Method not found"
//   ping                {}
//   tools "ask"         {label: string, delay_ms?: number, after?: number}: waits delay_ms (300), or with `after`
//                       until that many "ask" calls are in flight (this one too: an event, not a time), sends the
//                       client elicitation/create
//                       (id "q-N", {message "PIN for <label>", requestedSchema {type object, properties {pin:
//                       {type string}}, required [pin]}}), waits for the answer with that id, then answers text
//                       "<label> got <JSON of the answer's result, or else its error>"
//   tools "roots"       sends the client roots/list (id "q-N") and answers text "<JSON of its result, or error>"
//
// Calls run concurrently: each waits only for the answer to its own question, matched by id. Notifications and
// answers to unknown ids are ignored; an unknown tool → -32602, an unknown method → -32601. Every message received is
// noted on stderr ("fake: got <method>", "fake: got response q-N"); stdin EOF exits 0.
import process from "node:process";
import { readMessages } from "./ndjson_stdin.ts";

// deno-lint-ignore no-explicit-any
type Json = any;
type Id = string | number;
type Message = { jsonrpc?: string; id?: Id; method?: string; params?: Json; result?: Json; error?: Json };

const VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
const note = (text: string) => process.stderr.write(`fake: ${text}\n`);
const write = (message: Message) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");
const text = (value: string) => ({ content: [{ type: "text", text: value }] });
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const TOOLS = [
  {
    name: "ask",
    description: "Asks the client for a PIN (elicitation), then answers with it",
    inputSchema: {
      type: "object",
      properties: { label: { type: "string" }, delay_ms: { type: "number" }, after: { type: "number" } },
      required: ["label"],
    },
  },
  { name: "roots", description: "Asks the client for its roots", inputSchema: { type: "object", properties: {} } },
];
const PIN_SCHEMA = { type: "object", properties: { pin: { type: "string" } }, required: ["pin"] };

const pending = new Map<Id, (message: Message) => void>();
let asked = 0;
function askClient(method: string, params: Json): Promise<Message> {
  const id = `q-${++asked}`;
  const answer = new Promise<Message>((resolve) => pending.set(id, resolve));
  write({ id, method, params });
  return answer;
}
const gist = (answer: Message) => JSON.stringify(answer.result ?? answer.error);

// The "ask" calls in flight, and the calls waiting for more of them (`after`).
let asking = 0;
const woken: (() => void)[] = [];

async function callTool(id: Id, params: Json) {
  const { name, arguments: args = {} } = params;
  if (name === "ask") {
    const label = String(args.label ?? "");
    asking++;
    for (const wake of woken.splice(0)) wake();
    try {
      if (args.after === undefined) await sleep(Number(args.delay_ms ?? 300));
      else while (asking < Number(args.after)) await new Promise<void>((resolve) => woken.push(resolve));
      const question = { message: `PIN for ${label}`, requestedSchema: PIN_SCHEMA };
      const answer = await askClient("elicitation/create", question);
      return write({ id, result: text(`${label} got ${gist(answer)}`) });
    } finally {
      asking--;
    }
  }
  if (name === "roots") return write({ id, result: text(gist(await askClient("roots/list", {}))) });
  write({ id, error: { code: -32602, message: `Unknown tool: ${name}` } });
}

function handle(message: Message) {
  note(`got ${message.method ?? `response ${message.id}`}`);
  if (message.method === undefined) { // an answer to one of our questions
    const waiting = pending.get(message.id!);
    if (!waiting) note(`answer to unknown id ${message.id}`);
    pending.delete(message.id!);
    return waiting?.(message);
  }
  if (message.id === undefined) return; // notifications need no answer
  const id = message.id;
  const params = message.params ?? {};
  switch (message.method) {
    case "initialize": {
      const version = VERSIONS.includes(params.protocolVersion) ? params.protocolVersion : VERSIONS[0];
      return write({
        id,
        result: {
          protocolVersion: version,
          capabilities: { tools: {} },
          serverInfo: { name: "hostile-asker", version: "1.0" },
        },
      });
    }
    case "server/discover":
      return write({ id, error: { code: -32601, message: "Method not found" } });
    case "ping":
      return write({ id, result: {} });
    case "tools/list":
      return write({ id, result: { tools: TOOLS } });
    case "tools/call":
      return callTool(id, params);
  }
  write({ id, error: { code: -32601, message: `Method not found: ${message.method}` } });
}

note(`pid ${process.pid}`);
readMessages(handle, () => {
  note("stdin closed");
  process.exit(0);
});
