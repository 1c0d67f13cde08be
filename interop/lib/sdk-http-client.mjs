// Drives a Streamable HTTP MCP server with an official TypeScript SDK client and prints what it received.
//   node sdk-http-client.mjs v1|v2 URL list
//   node sdk-http-client.mjs v1|v2 URL ping
//   node sdk-http-client.mjs v1|v2 URL call TOOL '{"json":"arguments"}' [--progress] [--cancel-after MS]
// with --wire anywhere: one line per HTTP request and per answer on stderr (what the SDK sent and got back).
// v1: @modelcontextprotocol/sdk's Client + StreamableHTTPClientTransport, a 2025-11-25 session (initialize,
// Mcp-Session-Id, DELETE at the end). v2: @modelcontextprotocol/client's with versionNegotiation { mode: "auto" }: it
// probes with server/discover and speaks 2026-07-28 (stateless, a _meta envelope on every request) when the server
// offers it, else falls back to initialize. Results go to stdout as JSON; the era, progress, log messages and the
// server's identity to stderr. Exit 1 on any error the SDK raised (an isError result is a result: exit 0), 2 on bad
// usage.
import process from "node:process";
import { fromCache } from "./cache.mjs";
import { checkUsage, runVerb, verbOptions } from "./drive.mjs";

const USAGE =
  "usage: sdk-http-client.mjs v1|v2 URL list|ping|call TOOL [JSON] [--progress] [--cancel-after MS] [--wire]";
const [sdk, url, verb, ...rest] = process.argv.slice(2);
const options = verbOptions(rest);
const { wire } = options;
checkUsage(["v1", "v2"].includes(sdk) && /^https?:\/\//.test(url ?? ""), verb, options.tool, USAGE);

// --wire: fetch as the SDK calls it, logging the request (method, mirror headers, the JSON-RPC method and the
// _meta protocol version) and the answer's status, content type and session id.
const PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion";
const started = performance.now();
const elapsed = () => `+${Math.round(performance.now() - started)}ms`.padStart(8);
const logged = (fetchImpl) => async (input, init = {}) => {
  const headers = new Headers(init.headers);
  const header = (name) => headers.get(name) ?? "-";
  let what = "";
  if (typeof init.body === "string") {
    try {
      const messages = [JSON.parse(init.body)].flat();
      what = messages.map((m) => {
        const version = m.params?._meta?.[PROTOCOL_VERSION_META];
        return `${m.method ?? "(response)"}${m.id === undefined ? "" : `#${m.id}`}` +
          (version ? ` _meta.protocolVersion=${version}` : "");
      }).join(", ");
    } catch {
      what = "(not JSON)";
    }
  }
  const mirrors = [...headers].filter(([name]) => /^mcp-(method|name|param-)/i.test(name))
    .map(([name, value]) => ` ${name}=${value}`).join("");
  const method = init.method ?? "GET";
  const about = what ? ` (${what})` : "";
  console.error(
    `wire ${elapsed()} > ${method}${what ? ` ${what}` : ""} mcp-protocol-version=${header("mcp-protocol-version")}` +
      ` mcp-session-id=${header("mcp-session-id")}${mirrors}`,
  );
  try {
    const response = await fetchImpl(input, init);
    const type = response.headers.get("content-type") ?? "-";
    let outcome = ""; // from a JSON answer: the error, or the result's resultType (2026-07-28 results have one)
    if (/^application\/json/.test(type)) {
      const answer = await response.clone().json().catch(() => undefined);
      if (answer?.error) outcome = ` error ${answer.error.code} ${JSON.stringify(answer.error.message)}`;
      else if (answer?.result?.resultType) outcome = ` resultType=${answer.result.resultType}`;
    }
    const session = response.headers.get("mcp-session-id") ?? "-";
    console.error(
      `wire ${elapsed()} <   ${method} ${response.status} ${type} mcp-session-id=${session}${outcome}${about}`,
    );
    return response;
  } catch (error) {
    console.error(`wire ${elapsed()} <   ${method} ${error?.name ?? "error"}: ${error?.message ?? error}${about}`);
    throw error;
  }
};
const transportOptions = wire ? { fetch: logged(globalThis.fetch) } : {};
const clientInfo = { name: "mcp-interop-sdk-http-client", version: "1.0.0" };

let client, transport;
if (sdk === "v1") {
  const { Client } = fromCache("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = fromCache("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const { LoggingMessageNotificationSchema } = fromCache("@modelcontextprotocol/sdk/types.js");
  client = new Client(clientInfo);
  client.setNotificationHandler(
    LoggingMessageNotificationSchema,
    (n) => console.error("log", JSON.stringify(n.params)),
  );
  transport = new StreamableHTTPClientTransport(new URL(url), transportOptions);
} else {
  const { Client, StreamableHTTPClientTransport } = fromCache("@modelcontextprotocol/client");
  client = new Client(clientInfo, { versionNegotiation: { mode: "auto" } });
  client.setNotificationHandler("notifications/message", (n) => console.error("log", JSON.stringify(n.params)));
  transport = new StreamableHTTPClientTransport(new URL(url), transportOptions);
}
// v1 callTool(params, resultSchema, options); v2 callTool(params, options).
const callTool = (params, options) =>
  sdk === "v1" ? client.callTool(params, undefined, options) : client.callTool(params, options);
// v2 caches tools/list: always ask the server.
const listTools = (params) => client.listTools(params, sdk === "v2" ? { cacheMode: "bypass" } : undefined);

try {
  await client.connect(transport);
  const era = sdk === "v1"
    ? `legacy ${transport.protocolVersion ?? "?"}, session ${transport.sessionId ?? "none"}`
    : `${client.getProtocolEra()} ${client.getNegotiatedProtocolVersion()}, session ${transport.sessionId ?? "none"}`;
  console.error(`era ${era}`);
  console.error("server", JSON.stringify(client.getServerVersion()));
  await runVerb(verb, options, { listTools, ping: () => client.ping(), callTool });
} catch (error) {
  console.error(`sdk-http-client: ${error?.message ?? error}`);
  process.exitCode = 1;
} finally {
  if (sdk === "v1" && transport.sessionId) await transport.terminateSession().catch(() => {}); // DELETE
  await client.close().catch(() => {});
}
