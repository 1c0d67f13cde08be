// A hand-written stdio MCP server for testing the client. It does not import
// mcp.ts, so a bug in our server cannot hide a bug in our client. FAKE_MODE
// switches it into each behaviour a client must survive:
//
//   ok               well-behaved (the default); tools: echo, add, zip, fail, image, structured, env, cwd, slow, huge,
//                    and unlisted "photo" (an image repeated in structuredContent, as some servers do)
//   garbage          non-JSON lines on stdout before and between answers
//   crash-before     exits 1 before answering initialize, saying why on stderr
//   crash-after      answers initialize, dies on the first tools/call
//   silent           never answers anything
//   hang             answers initialize, never answers tools/call
//   ignore-sigterm   like hang, and ignores both stdin EOF and SIGTERM
//   server-requests  on tools/call "ask": sends the client ping, roots/list, sampling, elicitation and an
//                    unknown request, a stray notification and a response to an unknown id; answers with
//                    what the client replied
//   pages            tools/list in three pages
//   stuck-cursor     tools/list whose nextCursor never advances
//   old-version      answers initialize with 2024-11-05
//   bad-version      answers initialize with 1999-01-01
//   flaky            crashes before initialize while FAKE_STATE (a file) counts fewer than FAKE_FAILS starts;
//                    FAKE_STATE.times gets each start's time (ms), a line each
//   crash-call-once  dies on its first tools/call, unless FAKE_STATE (a file) says it already did
//   sdk-unknown      answers a call to an unknown tool with an isError result "Tool X not found", as the SDK does
//   silent-probe     never answers server/discover (a legacy server that ignores what it does not know)
//   die-on-probe     exits 1 on server/discover (a legacy server that crashes on what it does not know)
//
// Every message received is noted on stderr ("fake: got <method>"), which the client shows when it fails.
import { appendFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import process from "node:process";
import { readMessages } from "./ndjson_stdin.ts";

// deno-lint-ignore no-explicit-any
type Message = { jsonrpc?: string; id?: string | number; method?: string; params?: any; result?: any; error?: any };

const mode = process.env.FAKE_MODE ?? "ok";
const write = (message: unknown) => process.stdout.write(JSON.stringify(message) + "\n");
const note = (text: string) => process.stderr.write(`fake: ${text}\n`);

if (mode === "crash-before") {
  note("fatal: cannot open the database");
  process.exit(1);
}
if (mode === "flaky") {
  const state = process.env.FAKE_STATE!;
  const starts = existsSync(state) ? Number(readFileSync(state, "utf8")) : 0;
  writeFileSync(state, String(starts + 1));
  appendFileSync(`${state}.times`, `${Date.now()}\n`); // when each start began: the backoff between them
  if (starts < Number(process.env.FAKE_FAILS ?? "1")) {
    note(`flaky start ${starts + 1}: failing`);
    process.exit(1);
  }
}
if (mode === "ignore-sigterm") {
  process.on("SIGTERM", () => note("ignoring SIGTERM"));
  setInterval(() => {}, 1000);
}
note(`pid ${process.pid}`);

const TOOLS = [
  {
    name: "echo",
    description: "Echo text",
    inputSchema: { type: "object", properties: { text: { type: "string" } } },
    annotations: { idempotentHint: true },
  },
  {
    name: "add",
    description: "Add numbers\nSecond line of the description",
    inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "integer" } } },
  },
  {
    name: "zip",
    description: "Typed arguments",
    inputSchema: {
      type: "object",
      properties: {
        zip: { type: "string" },
        n: { type: "integer" },
        on: { type: "boolean" },
        list: { type: "array" },
        obj: { type: "object" },
      },
    },
  },
  { name: "fail", description: "Reports an error", inputSchema: { type: "object" } },
  { name: "image", description: "An image and a text", inputSchema: { type: "object" } },
  { name: "structured", description: "Only structured content", inputSchema: { type: "object" } },
  { name: "env", description: "An environment variable", inputSchema: { type: "object" } },
  { name: "cwd", description: "The working directory", inputSchema: { type: "object" } },
  { name: "slow", description: "Reports progress, then answers", inputSchema: { type: "object" } },
  { name: "huge", description: "A 10 MiB answer", inputSchema: { type: "object" } },
  { name: "ask", description: "Sends the client requests", inputSchema: { type: "object" } },
];

const pendingFromUs = new Map<string | number, (message: Message) => void>();
let ourNextId = 0;
function askClient(method: string, params?: unknown): Promise<Message> {
  const id = `fake-${++ourNextId}`;
  write({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) });
  return new Promise((resolve) => pendingFromUs.set(id, resolve));
}

const text = (value: string) => ({ content: [{ type: "text", text: value }] });

async function callTool(name: string, args: Record<string, unknown>, token: unknown) {
  switch (name) {
    case "echo":
      return text(String(args.text ?? ""));
    case "add":
      return text(String(Number(args.a) + Number(args.b)));
    case "zip":
      return text(JSON.stringify(args));
    case "fail":
      return { content: [{ type: "text", text: "it went wrong" }], isError: true };
    case "image":
      return {
        content: [{ type: "text", text: "a pixel:" }, { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }],
      };
    case "photo": {
      const image = { type: "image", data: btoa("\x89PNG fake image bytes"), mimeType: "image/png" };
      return { content: [image], structuredContent: { image } };
    }
    case "structured":
      return { content: [], structuredContent: { temperature: 21, unit: "celsius" } };
    case "env":
      return text(process.env[String(args.name)] ?? "(unset)");
    case "cwd":
      return text(process.cwd());
    case "slow":
      for (let step = 1; step <= 3; step++) {
        await new Promise((resolve) => setTimeout(resolve, Number(args.ms ?? 100)));
        if (token !== undefined) {
          write({
            jsonrpc: "2.0",
            method: "notifications/progress",
            params: { progressToken: token, progress: step, total: 3, message: `step ${step}` },
          });
        }
        write({ jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: `step ${step}` } });
      }
      return text("slow done");
    case "huge":
      return text("h".repeat(10 * 1024 * 1024));
    case "ask": {
      const answers: Record<string, unknown> = {};
      for (const method of ["ping", "roots/list", "sampling/createMessage", "elicitation/create", "no/such/method"]) {
        const reply = await askClient(method, method === "ping" ? undefined : {});
        answers[method] = reply.error ? { code: reply.error.code } : reply.result;
      }
      write({ jsonrpc: "2.0", method: "notifications/something_new", params: {} });
      write({ jsonrpc: "2.0", id: "never-asked", result: {} });
      return text(JSON.stringify(answers));
    }
  }
  return undefined;
}

async function handle(message: Message) {
  note(`got ${message.method ?? `response ${message.id}`}`);
  if (message.method === undefined) {
    pendingFromUs.get(message.id!)?.(message);
    pendingFromUs.delete(message.id!);
    return;
  }
  if (message.id === undefined) return; // notifications need no answer
  const reply = (result: unknown) => {
    if (mode === "garbage") process.stdout.write("this line is not JSON\n");
    write({ jsonrpc: "2.0", id: message.id, result });
  };
  const fail = (code: number, text: string) =>
    write({ jsonrpc: "2.0", id: message.id, error: { code, message: text } });
  if (mode === "silent") return;
  if (message.method === "server/discover" && mode === "silent-probe") return;
  if (message.method === "server/discover" && mode === "die-on-probe") {
    note("server/discover? never heard of it: exiting");
    process.exit(1);
  }
  switch (message.method) {
    case "initialize": {
      const asked = message.params?.protocolVersion;
      const version = mode === "old-version" ? "2024-11-05" : mode === "bad-version" ? "1999-01-01" : asked;
      return reply({
        protocolVersion: version,
        capabilities: { tools: {}, logging: {} },
        serverInfo: { name: "fake", version: "1.0" },
        instructions: "A fake server.",
      });
    }
    case "ping":
      return reply({});
    case "tools/list": {
      if (mode === "stuck-cursor") return reply({ tools: TOOLS.slice(0, 1), nextCursor: "same" });
      if (mode !== "pages") return reply({ tools: TOOLS });
      const page = Number(message.params?.cursor ?? 0);
      const size = Math.ceil(TOOLS.length / 3);
      const next = page + 1 < 3 ? { nextCursor: String(page + 1) } : {};
      return reply({ tools: TOOLS.slice(page * size, (page + 1) * size), ...next });
    }
    case "tools/call": {
      if (mode === "crash-after" || (mode === "crash-call-once" && !existsSync(process.env.FAKE_STATE!))) {
        if (mode === "crash-call-once") writeFileSync(process.env.FAKE_STATE!, "crashed");
        note("crashing on tools/call");
        process.exit(3);
      }
      if (mode === "hang" || mode === "ignore-sigterm") return;
      const { name, arguments: args = {}, _meta } = message.params ?? {};
      const result = await callTool(name, args, _meta?.progressToken);
      if (result === undefined && mode === "sdk-unknown") {
        // As the SDK's McpServer does: an isError result, not a JSON-RPC error.
        return reply({ content: [{ type: "text", text: `MCP error -32602: Tool ${name} not found` }], isError: true });
      }
      if (result === undefined) return fail(-32602, `Unknown tool: ${name}`);
      return reply(result);
    }
    default:
      return fail(-32601, `Method not found: ${message.method}`);
  }
}

if (mode === "garbage") process.stdout.write("Starting fake server v1.0...\n");
readMessages(handle, () => {
  note("stdin closed");
  if (mode !== "ignore-sigterm") process.exit(0);
});
