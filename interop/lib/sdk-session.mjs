// One scripted session against server-everything (or anything that has its tools, resources and prompts), driven by
// an official TypeScript SDK client, printing every JSON-RPC message the client RECEIVED, one per line, in order:
//   node sdk-session.mjs v1|v2 "<stdio server command>" [--wire] [--settle MS]
//   node sdk-session.mjs v1|v2 http://HOST:PORT/mcp [--wire] [--settle MS]
// The script: tools/list, call echo {message: "hi"}, call get-sum {a: 2, b: 3}, call trigger-long-running-operation
// {duration: 1, steps: 2} with a progress token, resources/list, resources/read (the first resource), prompts/list,
// prompts/get args-prompt {city: "Oslo"}; then close (v1 over HTTP: DELETE the session). --settle MS: wait that long
// after connecting, before the first request, so that what the server sends on its own after the handshake
// (server-everything: notifications/tools/list_changed once it knows the client's capabilities) does not race it.
// Over HTTP that decides whether the client sees it at all: server-everything sends it while the SDK v1 client has no
// GET stream open yet (so nobody gets it), and mcp.ts proxy --http puts it on whichever request is open at the time.
// stdout: "<transport> < JSON" per received message (transport: "session", or "probe" for the v2 client's
// server/discover sibling over stdio); nothing else, so that two runs can be compared with diff. stderr: a one-line
// summary of each step; with --wire also every message sent ("> ") and received ("< ") with its time.
// v1: @modelcontextprotocol/sdk's Client. v2: @modelcontextprotocol/client's, versionNegotiation { mode: "auto" }.
// Exit 1 on any error the SDK raised, 2 on bad usage.
import process from "node:process";
import { fromCache, stdioServer } from "./cache.mjs";

const [sdk, server, ...rest] = process.argv.slice(2);
const wire = rest.includes("--wire");
const settle = rest.includes("--settle") ? Number(rest[rest.indexOf("--settle") + 1]) : 0;
if (!["v1", "v2"].includes(sdk) || !server) {
  console.error('usage: sdk-session.mjs v1|v2 "<stdio server command>"|URL [--wire] [--settle MS]');
  process.exit(2);
}
const http = /^https?:\/\//.test(server);

const started = performance.now();
const elapsed = () => `+${Math.round(performance.now() - started)}ms`.padStart(8);
const note = (line) => console.error(`session: ${line}`);

// Every message a transport hands the client: the SDK sets `transport.onmessage` (a class field on the instance) in
// connect(), so an accessor on the instance wraps whatever it sets. send() is wrapped for --wire.
function watch(transport, label) {
  let handler;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () => handler,
    set: (fn) => {
      handler = fn && ((message, extra) => {
        console.log(`${label} < ${JSON.stringify(message)}`);
        if (wire) console.error(`wire ${elapsed()} ${label} < ${JSON.stringify(message)}`);
        return fn(message, extra);
      });
    },
  });
  if (wire) {
    const send = transport.send;
    transport.send = function (message, options) {
      console.error(`wire ${elapsed()} ${label} > ${JSON.stringify(message)}`);
      return send.call(this, message, options);
    };
  }
  return transport;
}

const clientInfo = { name: "mcp-interop-sdk-session", version: "1.0.0" };
let client, transport, v1;
if (sdk === "v1") {
  const { Client } = fromCache("@modelcontextprotocol/sdk/client/index.js");
  client = new Client(clientInfo);
  if (http) {
    const { StreamableHTTPClientTransport } = fromCache("@modelcontextprotocol/sdk/client/streamableHttp.js");
    transport = new StreamableHTTPClientTransport(new URL(server));
  } else {
    const { StdioClientTransport } = fromCache("@modelcontextprotocol/sdk/client/stdio.js");
    transport = new StdioClientTransport({ ...stdioServer(server), stderr: "ignore" });
  }
  v1 = true;
} else {
  const { Client, StreamableHTTPClientTransport } = fromCache("@modelcontextprotocol/client");
  client = new Client(clientInfo, { versionNegotiation: { mode: "auto" } });
  if (http) {
    transport = new StreamableHTTPClientTransport(new URL(server));
  } else {
    const { StdioClientTransport } = fromCache("@modelcontextprotocol/client/stdio");
    const Stdio = StdioClientTransport;
    transport = new Stdio({ ...stdioServer(server), stderr: "ignore" });
    // The SDK probes server/discover on a sibling it builds with `new transport.constructor(params)`: watch it too.
    transport.constructor = function Sibling(params) {
      return watch(new Stdio(params), "probe");
    };
  }
  v1 = false;
}
watch(transport, "session");

const text = (result) =>
  (result.content ?? result.contents ?? result.messages ?? [])
    .map((item) => item.text ?? item.content?.text ?? item.type).join(" | ").replace(/\s+/g, " ");
try {
  await client.connect(transport);
  note(`connected to ${JSON.stringify(client.getServerVersion())}`);
  if (settle > 0) await new Promise((resolve) => setTimeout(resolve, settle));
  const tools = await client.listTools(undefined, v1 ? undefined : { cacheMode: "bypass" });
  note(`tools/list: ${tools.tools.length} tools`);
  const call = (name, args, options) =>
    v1
      ? client.callTool({ name, arguments: args }, undefined, options)
      : client.callTool({ name, arguments: args }, options);
  note(`echo: ${text(await call("echo", { message: "hi" }))}`);
  note(`get-sum: ${text(await call("get-sum", { a: 2, b: 3 }))}`);
  const progress = [];
  const long = await call("trigger-long-running-operation", { duration: 1, steps: 2 }, {
    onprogress: (p) => progress.push(`${p.progress}/${p.total}`),
  });
  // onprogress: what the SDK passed on. Both SDKs dispatch a notification a microtask later but settle a response at
  // once, so progress read in the same chunk as the response (a replay sends them back to back) never gets here.
  note(`trigger-long-running-operation: onprogress [${progress.join(", ")}]; ${text(long)}`);
  const resources = await client.listResources();
  note(`resources/list: ${resources.resources.length} resources`);
  const uri = resources.resources[0].uri;
  note(`resources/read ${uri}: ${text(await client.readResource({ uri })).slice(0, 60)}`);
  note(`prompts/list: ${(await client.listPrompts()).prompts.map((p) => p.name).join(", ")}`);
  note(
    `prompts/get args-prompt: ${text(await client.getPrompt({ name: "args-prompt", arguments: { city: "Oslo" } }))}`,
  );
} catch (error) {
  note(`the SDK raised ${error?.name}: ${error?.message ?? error}`);
  process.exitCode = 1;
} finally {
  if (v1 && http && transport.sessionId) await transport.terminateSession().catch(() => {}); // DELETE
  await client.close().catch(() => {});
}
