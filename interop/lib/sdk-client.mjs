// Drives a stdio MCP server with the official TypeScript SDK v1 client and prints what it received.
//   node sdk-client.mjs "<server command>" list
//   node sdk-client.mjs "<server command>" ping
//   node sdk-client.mjs "<server command>" call TOOL '{"json":"arguments"}' [--progress] [--cancel-after MS]
// Results go to stdout as JSON; progress, log messages and the server's identity to stderr. Exit 1 on any error the
// SDK raised (an isError result is a result: exit 0), 2 on bad usage.
import process from "node:process";
import { fromCache, stdioServer } from "./cache.mjs";
import { checkUsage, runVerb, verbOptions } from "./drive.mjs";

const { Client } = fromCache("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = fromCache("@modelcontextprotocol/sdk/client/stdio.js");
const { LoggingMessageNotificationSchema } = fromCache("@modelcontextprotocol/sdk/types.js");

const USAGE = 'usage: sdk-client.mjs "<server command>" list|ping|call TOOL [JSON] [--progress] [--cancel-after MS]';
const [server, verb, ...rest] = process.argv.slice(2);
const options = verbOptions(rest);
checkUsage(server, verb, options.tool, USAGE);

const client = new Client({ name: "mcp-interop-sdk-client", version: "1.0.0" });
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => console.error("log", JSON.stringify(n.params)));
const transport = new StdioClientTransport({ ...stdioServer(server), stderr: "inherit" });

try {
  await client.connect(transport);
  console.error("server", JSON.stringify(client.getServerVersion()));
  await runVerb(verb, options, {
    listTools: (params) => client.listTools(params ?? {}),
    ping: () => client.ping(),
    callTool: (params, callOptions) => client.callTool(params, undefined, callOptions),
    afterCancel: async () => {
      await client.ping(); // the server must still be serving after a cancellation
      console.log("ping after the cancellation: ok");
    },
  });
} catch (error) {
  console.error(`sdk-client: ${error?.message ?? error}`);
  process.exitCode = 1;
} finally {
  await client.close().catch(() => {});
}
