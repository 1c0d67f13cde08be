// Serves a stdio MCP server over Streamable HTTP, for test suites that speak only HTTP (the conformance suite's
// server scenarios). Each HTTP session gets its own child process running the command.
//   node http-to-stdio.mjs "<stdio server command>" [PORT]
// Prints its URL (http://127.0.0.1:PORT/mcp) on stdout once it listens; PORT defaults to any free port.
import { randomUUID } from "node:crypto";
import http from "node:http";
import process from "node:process";
import { fromCache, stdioServer } from "./cache.mjs";

const { StreamableHTTPServerTransport } = fromCache("@modelcontextprotocol/sdk/server/streamableHttp.js");
const { StdioClientTransport } = fromCache("@modelcontextprotocol/sdk/client/stdio.js");
const { InMemoryEventStore } = fromCache("@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js");

const [command, port = "0"] = process.argv.slice(2);
const sessions = new Map(); // Mcp-Session-Id -> StreamableHTTPServerTransport
const warn = (what) => (error) => console.error(`http-to-stdio: ${what}: ${error?.message ?? error}`);

/** A child process behind an HTTP transport, with each child message routed to the HTTP stream it belongs to. */
async function openSession() {
  const child = new StdioClientTransport({ ...stdioServer(command), stderr: "inherit" });
  const front = new StreamableHTTPServerTransport({
    sessionIdGenerator: randomUUID,
    eventStore: new InMemoryEventStore(), // SSE event ids, so a client can resume a stream (2025-11-25)
    retryInterval: 1000,
    onsessioninitialized: (id) => sessions.set(id, front),
  });
  const pending = []; // ids of the client's requests the child has not answered yet, oldest first
  const progressTokens = new Map(); // progressToken -> the request that carried it
  const settle = (id) => pending.includes(id) && pending.splice(pending.indexOf(id), 1);
  const fail = (id, why) =>
    front.send({ jsonrpc: "2.0", id, error: { code: -32603, message: `http-to-stdio: ${why}` } }).catch(() => {});

  front.onmessage = (message) => {
    if (message.method && message.id !== undefined) {
      pending.push(message.id);
      const token = message.params?._meta?.progressToken;
      if (token !== undefined) progressTokens.set(token, message.id);
    }
    if (message.method === "notifications/cancelled") settle(message.params?.requestId);
    child.send(message).catch((error) => {
      if (message.method === undefined || message.id === undefined) return warn("to the child")(error);
      settle(message.id);
      fail(message.id, `the server process is gone (${error.message})`);
    });
  };
  child.onmessage = (message) => {
    // A response goes with its request. Progress goes with the request that carried the token. Anything else the
    // child says (log messages, sampling or elicitation requests) goes with the newest open request, or on the
    // session's GET stream when none is open (resource updates, list_changed).
    let related;
    if (message.method === undefined) settle(message.id);
    else if (message.method === "notifications/progress") related = progressTokens.get(message.params?.progressToken);
    else related = pending.at(-1);
    front.send(message, related === undefined ? undefined : { relatedRequestId: related }).catch(warn("to HTTP"));
  };
  front.onclose = () => {
    if (front.sessionId) sessions.delete(front.sessionId);
    child.close().catch(() => {});
  };
  child.onclose = async () => {
    // Requests the child never answered get an error rather than a stream that stays open until the client gives up.
    await Promise.all(pending.splice(0).map((id) => fail(id, "the server process exited")));
    await front.close().catch(() => {});
  };
  await child.start();
  return front;
}

// DNS rebinding protection: only local Host and Origin headers are served.
const LOCAL = new Set(["localhost", "127.0.0.1", "[::1]"]);
const isLocal = (url) => URL.canParse(url) && LOCAL.has(new URL(url).hostname);

function refuse(res, status, message) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message } }));
}

const server = http.createServer(async (req, res) => {
  try {
    if (new URL(req.url, "http://x").pathname !== "/mcp") return refuse(res, 404, "Not found: the endpoint is /mcp");
    if (!isLocal(`http://${req.headers.host}`) || (req.headers.origin && !isLocal(req.headers.origin))) {
      return refuse(res, 403, "Forbidden: not a local Host or Origin");
    }
    const id = req.headers["mcp-session-id"];
    if (id) {
      const front = sessions.get(id);
      return front ? await front.handleRequest(req, res) : refuse(res, 404, "Session not found");
    }
    if (req.method !== "POST") return refuse(res, 400, "Bad Request: no Mcp-Session-Id");
    const front = await openSession(); // the transport itself rejects a first POST that is not an initialize
    await front.handleRequest(req, res);
    if (!front.sessionId) await front.close();
  } catch (error) {
    warn(`${req.method} ${req.url}`)(error);
    if (!res.headersSent) refuse(res, 500, "Internal error in the bridge");
  }
});
server.listen(Number(port), "127.0.0.1", () => console.log(`http://127.0.0.1:${server.address().port}/mcp`));
process.on("SIGTERM", async () => {
  await Promise.allSettled([...sessions.values()].map((front) => front.close())); // ends the children too
  process.exit(0);
});
