// Drives a stdio MCP server with the official TypeScript SDK v2 client (@modelcontextprotocol/client) and prints what
// it received.
//   node sdk-v2-client.mjs "<server command>" list
//   node sdk-v2-client.mjs "<server command>" ping
//   node sdk-v2-client.mjs "<server command>" call TOOL '{"json":"arguments"}' [--progress] [--cancel-after MS]
// with --wire anywhere: one stderr line per JSON-RPC message either way, the probe's included.
// Client + StdioClientTransport with versionNegotiation { mode: "auto" } (the default is "legacy"): connect() spawns a
// short-lived sibling of the server from the same command, sends it server/discover, reaps it, then starts the server
// for the session: 2026-07-28 (stateless, a _meta envelope on every request and notification) when the discover
// result offers it, else (an error, an unusable answer, silence until the probe timeout, the sibling exiting) the legacy
// initialize handshake. Results go to stdout as JSON; the era, progress, log messages and the server's identity to
// stderr. Exit 1 on any error the SDK raised (an isError result is a result: exit 0), 2 on bad usage.
import process from "node:process";
import { fromCache, stdioServer } from "./cache.mjs";

const { Client } = fromCache("@modelcontextprotocol/client");
const { StdioClientTransport } = fromCache("@modelcontextprotocol/client/stdio");

const USAGE =
  'usage: sdk-v2-client.mjs "<server command>" list|ping|call TOOL [JSON] [--progress] [--cancel-after MS] [--wire]';
const [server, verb, ...rest] = process.argv.slice(2);
const progress = rest.includes("--progress");
const wire = rest.includes("--wire");
const cancelAfter = rest.includes("--cancel-after") ? Number(rest[rest.indexOf("--cancel-after") + 1]) : undefined;
const [tool, json = "{}"] = rest.filter((arg, i) => !arg.startsWith("--") && rest[i - 1] !== "--cancel-after");
if (!server || !["list", "ping", "call"].includes(verb) || (verb === "call" && !tool)) {
  console.error(USAGE);
  process.exit(2);
}
const print = (value) => console.log(JSON.stringify(value, null, 2));

const transport = new StdioClientTransport({ ...stdioServer(server), stderr: "inherit" });

// --wire: the SDK probes on a sibling transport it builds itself (`new transport.constructor(params)`), and only the
// base class's own prototype qualifies for that (a subclass probes in place, on the session's process). So the
// logging goes on the prototype: send() for what goes out, and the read buffer's readMessage() (tied to its transport
// in start()) for what comes in. A line names the process: "probe" (the sibling) or "session", and its pid.
const PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion";
const started = performance.now();
const elapsed = () => `+${Math.round(performance.now() - started)}ms`.padStart(8);
const MAX_WIRE = 400;
const describe = (m) => {
  const version = m.params?._meta?.[PROTOCOL_VERSION_META];
  const head = m.method
    ? `${m.method}${m.id === undefined ? "" : `#${m.id}`}${version ? ` _meta.protocolVersion=${version}` : ""}`
    : `(response #${m.id})${
      m.error ? ` error ${m.error.code}` : m.result?.resultType ? ` ${m.result.resultType}` : ""
    }`;
  const body = JSON.stringify(m);
  return `${head} ${body.length > MAX_WIRE ? `${body.slice(0, MAX_WIRE)}...` : body}`;
};
if (wire) {
  const proto = StdioClientTransport.prototype;
  const owners = new WeakMap(); // read buffer -> transport
  const who = (t) => `${t === transport ? "session" : "probe"} ${t.pid ?? "-"}`.padEnd(13);
  const { send, start } = proto;
  proto.start = function () {
    owners.set(this._readBuffer, this);
    const readBuffer = Object.getPrototypeOf(this._readBuffer);
    if (!readBuffer.__mcpInteropWire) {
      const { readMessage } = readBuffer;
      readBuffer.readMessage = function () {
        const message = readMessage.call(this);
        const owner = owners.get(this);
        if (message !== null && owner) console.error(`wire ${elapsed()} ${who(owner)} < ${describe(message)}`);
        return message;
      };
      readBuffer.__mcpInteropWire = true;
    }
    return start.call(this);
  };
  proto.send = function (message, options) {
    console.error(`wire ${elapsed()} ${who(this)} > ${describe(message)}`);
    return send.call(this, message, options);
  };
}

const client = new Client({ name: "mcp-interop-sdk-v2-client", version: "1.0.0" }, {
  versionNegotiation: { mode: "auto" },
});
client.setNotificationHandler("notifications/message", (n) => console.error("log", JSON.stringify(n.params)));
// v2 caches tools/list: always ask the server.
const allTools = async () => {
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined, { cacheMode: "bypass" });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
};

try {
  const before = performance.now();
  await client.connect(transport);
  const discover = client.getDiscoverResult();
  console.error(
    `era ${client.getProtocolEra()} ${client.getNegotiatedProtocolVersion()}` +
      (discover
        ? ` (server/discover offered ${discover.supportedVersions.join(", ")})`
        : " (server/discover offered no 2026-07-28: fell back to initialize)") +
      `, connected in ${Math.round(performance.now() - before)} ms, session pid ${transport.pid}`,
  );
  console.error("server", JSON.stringify(client.getServerVersion()));
  if (verb === "list") {
    print({ tools: await allTools() });
  } else if (verb === "ping") {
    const before = performance.now();
    await client.ping();
    console.log(`pong in ${(performance.now() - before).toFixed(1)} ms`);
  } else {
    const abort = new AbortController();
    if (cancelAfter !== undefined) setTimeout(() => abort.abort(`cancelled after ${cancelAfter} ms`), cancelAfter);
    try {
      print(
        await client.callTool({ name: tool, arguments: JSON.parse(json) }, {
          signal: abort.signal,
          onprogress: progress ? (p) => console.error("progress", JSON.stringify(p)) : undefined,
        }),
      );
    } catch (error) {
      if (!abort.signal.aborted) throw error;
      console.log(`cancelled: ${abort.signal.reason} (the SDK raised ${error?.name}: ${error?.message})`);
      // the server must still be serving after a cancellation
      const tools = await allTools();
      console.log(`tools/list after the cancellation: ${tools.map((t) => t.name).join(", ")}`);
    }
  }
} catch (error) {
  console.error(`sdk-v2-client: ${error?.message ?? error}`);
  process.exitCode = 1;
} finally {
  await client.close().catch(() => {});
}
