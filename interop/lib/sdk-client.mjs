// Drives a stdio MCP server with the official TypeScript SDK v1 client and prints what it received.
//   node sdk-client.mjs "<server command>" list
//   node sdk-client.mjs "<server command>" ping
//   node sdk-client.mjs "<server command>" call TOOL '{"json":"arguments"}' [--progress] [--cancel-after MS]
// Results go to stdout as JSON; progress, log messages and the server's identity to stderr. Exit 1 on any error the
// SDK raised (an isError result is a result: exit 0), 2 on bad usage.
import process from "node:process";
import { fromCache, stdioServer } from "./cache.mjs";

const { Client } = fromCache("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = fromCache("@modelcontextprotocol/sdk/client/stdio.js");
const { LoggingMessageNotificationSchema } = fromCache("@modelcontextprotocol/sdk/types.js");

const USAGE = 'usage: sdk-client.mjs "<server command>" list|ping|call TOOL [JSON] [--progress] [--cancel-after MS]';
const [server, verb, ...rest] = process.argv.slice(2);
const progress = rest.includes("--progress");
const cancelAfter = rest.includes("--cancel-after") ? Number(rest[rest.indexOf("--cancel-after") + 1]) : undefined;
const [tool, json = "{}"] = rest.filter((arg, i) => !arg.startsWith("--") && rest[i - 1] !== "--cancel-after");
if (!server || !["list", "ping", "call"].includes(verb) || (verb === "call" && !tool)) {
  console.error(USAGE);
  process.exit(2);
}
const print = (value) => console.log(JSON.stringify(value, null, 2));

const client = new Client({ name: "mcp-interop-sdk-client", version: "1.0.0" });
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => console.error("log", JSON.stringify(n.params)));
const transport = new StdioClientTransport({ ...stdioServer(server), stderr: "inherit" });

try {
  await client.connect(transport);
  console.error("server", JSON.stringify(client.getServerVersion()));
  if (verb === "list") {
    const tools = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    print({ tools });
  } else if (verb === "ping") {
    const started = performance.now();
    await client.ping();
    console.log(`pong in ${(performance.now() - started).toFixed(1)} ms`);
  } else {
    const abort = new AbortController();
    if (cancelAfter !== undefined) setTimeout(() => abort.abort(`cancelled after ${cancelAfter} ms`), cancelAfter);
    try {
      print(
        await client.callTool({ name: tool, arguments: JSON.parse(json) }, undefined, {
          signal: abort.signal,
          onprogress: progress ? (p) => console.error("progress", JSON.stringify(p)) : undefined,
        }),
      );
    } catch (error) {
      if (!abort.signal.aborted) throw error;
      console.log(`cancelled: ${abort.signal.reason}`);
      await client.ping(); // the server must still be serving after a cancellation
      console.log("ping after the cancellation: ok");
    }
  }
} catch (error) {
  console.error(`sdk-client: ${error?.message ?? error}`);
  process.exitCode = 1;
} finally {
  await client.close().catch(() => {});
}
