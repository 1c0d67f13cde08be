// A Streamable HTTP MCP server built with the SDK v2 (@modelcontextprotocol/server) that serves ONLY the 2026-07-28
// revision: createMcpHandler(factory, { legacy: "reject" }). A legacy request (initialize, anything without the _meta
// envelope) gets 400 -32022 naming the supported versions; GET and DELETE get 405; a legacy notification 202.
//   node sdk-v2-modern-server.mjs [[HOST:]PORT]     default 127.0.0.1:0 (a free port); the endpoint is /mcp
// Ready line on stderr, the same shape as `mcp.ts serve --http`: mcp: serving http://127.0.0.1:PORT/mcp
// SIGTERM/SIGINT: closes the handler (aborting exchanges in flight) and the listener, exit 0.
//
// Tools:     echo {text}                      the text back
//            add {a, b}                       their sum, as text
//            where {region*, priority, note}  region and priority are x-mcp-header'd (Mcp-Param-Region, -Priority):
//                                             the SDK checks the mirror headers against the body before the tool
//            slow {steps, ms}                 progress step/steps every ms (when the call has a progressToken), then
//                                             "waited STEPS x MS ms"; stops when the request is aborted
//            confirm {action}                 MRTR: an input_required result with an elicitation/create form
//                                             {confirm: boolean} and a requestState; on the retry that accepts,
//                                             "confirmed: ACTION" (declined: isError). Needs the elicitation capability
//                                             (else 400 -32021)
// Resources: demo://greeting (text), demo://item/{id} (a template; JSON). Prompts: greet {name*}, hello (no arguments).
import { createServer } from "node:http";
import process from "node:process";
import { fromCache } from "./cache.mjs";

const {
  McpServer,
  ResourceTemplate,
  acceptedContent,
  createMcpHandler,
  fromJsonSchema,
  hostHeaderValidationResponse,
  inputRequired,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  originValidationResponse,
} = fromCache("@modelcontextprotocol/server");

const USAGE = "usage: sdk-v2-modern-server.mjs [[HOST:]PORT]";
const where = process.argv[2] ?? "0";
const match = /^(?:(.+):)?(\d+)$/.exec(where);
if (!match || process.argv.length > 3) {
  console.error(USAGE);
  process.exit(2);
}
const host = match[1] ?? "127.0.0.1";
const port = Number(match[2]);
const PATH = "/mcp";

const text = (value) => ({ content: [{ type: "text", text: String(value) }] });
const wait = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });

/** One McpServer per request (createMcpHandler calls the factory for each exchange): the tools, resources, prompts. */
function factory() {
  const server = new McpServer(
    { name: "mcp-interop-sdk-v2-modern", version: "1.0.0" },
    { instructions: "An SDK v2 server that speaks only 2026-07-28 (interop/lib/sdk-v2-modern-server.mjs)." },
  );

  server.registerTool("echo", {
    description: "Echo the text back",
    inputSchema: fromJsonSchema({
      type: "object",
      properties: { text: { type: "string" } },
      required: ["text"],
    }),
  }, ({ text: value }) => text(value));

  server.registerTool("add", {
    description: "Add two numbers",
    inputSchema: fromJsonSchema({
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
    }),
  }, ({ a, b }) => text(a + b));

  server.registerTool("where", {
    description: "Report the region and priority (both mirrored as Mcp-Param-* headers)",
    inputSchema: fromJsonSchema({
      type: "object",
      properties: {
        region: { type: "string", "x-mcp-header": "Region" },
        priority: { type: "integer", "x-mcp-header": "Priority" },
        note: { type: "string" },
      },
      required: ["region"],
    }),
  }, ({ region, priority, note }, ctx) => {
    const headers = ctx.http?.req?.headers;
    const seen = headers
      ? ` (headers: Mcp-Param-Region=${headers.get("mcp-param-region")}, Mcp-Param-Priority=${
        headers.get("mcp-param-priority")
      })`
      : "";
    return text(`region=${region} priority=${priority ?? "-"} note=${note ?? "-"}${seen}`);
  });

  server.registerTool("slow", {
    description: "Wait, reporting progress (for trying progress, timeouts and cancellation)",
    inputSchema: fromJsonSchema({
      type: "object",
      properties: {
        steps: { type: "integer", minimum: 1, maximum: 1000 },
        ms: { type: "integer", minimum: 0, maximum: 60000 },
      },
    }),
  }, async ({ steps = 3, ms = 100 }, ctx) => {
    const token = ctx.mcpReq._meta?.progressToken;
    for (let step = 1; step <= steps; step++) {
      await wait(ms, ctx.mcpReq.signal);
      if (token !== undefined) {
        await ctx.mcpReq.notify({
          method: "notifications/progress",
          params: { progressToken: token, progress: step, total: steps, message: `step ${step} of ${steps}` },
        });
      }
    }
    return text(`waited ${steps} x ${ms} ms`);
  });

  server.registerTool("confirm", {
    description: "Ask the client to confirm (a 2026-07-28 input_required result with an elicitation)",
    inputSchema: fromJsonSchema({
      type: "object",
      properties: { action: { type: "string" } },
      required: ["action"],
    }),
  }, ({ action }, ctx) => {
    const responses = ctx.mcpReq.inputResponses;
    const answer = responses?.confirm;
    if (answer && typeof answer === "object" && answer.action && answer.action !== "accept") {
      return { ...text(`not confirmed (${answer.action}): ${action}`), isError: true };
    }
    const content = acceptedContent(responses, "confirm");
    if (content === undefined || ctx.mcpReq.requestState() !== `confirm:${action}`) {
      return inputRequired({
        inputRequests: {
          confirm: inputRequired.elicit({
            message: `Really ${action}?`,
            requestedSchema: {
              type: "object",
              properties: { confirm: { type: "boolean", title: "Confirm", default: true } },
              required: ["confirm"],
            },
          }),
        },
        requestState: `confirm:${action}`,
      });
    }
    if (content.confirm !== true) return { ...text(`not confirmed: ${action}`), isError: true };
    return text(`confirmed: ${action}`);
  });

  const greeting = (uri) => ({
    contents: [{ uri: uri.href, mimeType: "text/plain", text: "Hello from the SDK v2 modern server." }],
  });
  server.registerResource("greeting", "demo://greeting", { description: "A text", mimeType: "text/plain" }, greeting);

  server.registerResource("item", new ResourceTemplate("demo://item/{id}", { list: undefined }), {
    description: "An item by id (JSON)",
    mimeType: "application/json",
  }, (uri, { id }) => ({
    contents: [{ uri: uri.href, mimeType: "application/json", text: JSON.stringify({ id, name: `item ${id}` }) }],
  }));

  server.registerPrompt("greet", {
    description: "Greet someone by name",
    argsSchema: fromJsonSchema({
      type: "object",
      properties: { name: { type: "string", description: "who to greet" } },
      required: ["name"],
    }),
  }, ({ name }) => ({
    messages: [{ role: "user", content: { type: "text", text: `Please greet ${name}.` } }],
  }));

  server.registerPrompt("hello", { description: "A prompt without arguments" }, () => ({
    messages: [{ role: "user", content: { type: "text", text: "Say hello." } }],
  }));

  return server;
}

const handler = createMcpHandler(factory, {
  legacy: "reject",
  onerror: (error) => console.error(`sdk-v2-modern-server: ${error?.message ?? error}`),
});

// node:http ⇄ fetch: the body is read whole (MCP POSTs are one message), the answer streamed chunk by chunk (SSE); and
// a client that goes away aborts the Request's signal, which the SDK treats as cancelling the exchange.
const listener = createServer(async (req, res) => {
  const aborted = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) aborted.abort();
  });
  try {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      for (const one of [value].flat()) if (one !== undefined) headers.append(name, one);
    }
    const hasBody = !["GET", "HEAD"].includes(req.method);
    const request = new Request(`http://${req.headers.host ?? `${host}:${port}`}${req.url}`, {
      method: req.method,
      headers,
      body: hasBody ? Buffer.concat(chunks) : undefined,
      signal: aborted.signal,
    });
    let response;
    if (new URL(request.url).pathname !== PATH) {
      response = new Response("Not Found\n", { status: 404, headers: { "content-type": "text/plain" } });
    } else {
      response = hostHeaderValidationResponse(request, localhostAllowedHostnames()) ??
        originValidationResponse(request, localhostAllowedOrigins()) ??
        await handler.fetch(request);
    }
    res.writeHead(response.status, [...response.headers].flat());
    if (!response.body) return void res.end();
    const reader = response.body.getReader();
    aborted.signal.addEventListener("abort", () => reader.cancel().catch(() => {}), { once: true });
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      res.write(value);
    }
    res.end();
  } catch (error) {
    if (aborted.signal.aborted) return;
    console.error(`sdk-v2-modern-server: ${error?.stack ?? error}`);
    if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
    res.end();
  }
});

listener.on("error", (error) => {
  console.error(`sdk-v2-modern-server: cannot listen on ${host}:${port}: ${error.message}`);
  process.exit(1);
});
listener.listen(port, host, () => {
  const { port: bound } = listener.address();
  const shown = host.includes(":") ? `[${host}]` : host;
  console.error(`mcp: serving http://${shown}:${bound}${PATH}`);
});

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await handler.close().catch(() => {});
  listener.closeAllConnections?.();
  listener.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
