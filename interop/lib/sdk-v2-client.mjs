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
import { checkUsage, runVerb, verbOptions } from "./drive.mjs";

const { Client } = fromCache("@modelcontextprotocol/client");
const { StdioClientTransport } = fromCache("@modelcontextprotocol/client/stdio");

const USAGE =
  'usage: sdk-v2-client.mjs "<server command>" list|ping|call TOOL [JSON] [--progress] [--cancel-after MS] [--wire]';
const [server, verb, ...rest] = process.argv.slice(2);
const options = verbOptions(rest);
const { wire } = options;
checkUsage(server, verb, options.tool, USAGE);

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
const listTools = (params) => client.listTools(params, { cacheMode: "bypass" });

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
  await runVerb(verb, options, {
    listTools,
    ping: () => client.ping(),
    callTool: (params, callOptions) => client.callTool(params, callOptions),
  });
} catch (error) {
  console.error(`sdk-v2-client: ${error?.message ?? error}`);
  process.exitCode = 1;
} finally {
  await client.close().catch(() => {});
}
