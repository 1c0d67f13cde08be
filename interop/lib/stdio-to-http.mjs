// A stdio MCP server that forwards everything to a Streamable HTTP server, so a stdio-only client (mcp.ts) can be
// tested by a suite that serves HTTP (the conformance suite's client scenarios).
//   node stdio-to-http.mjs URL
import process from "node:process";
import { fromCache } from "./cache.mjs";

const { StdioServerTransport } = fromCache("@modelcontextprotocol/sdk/server/stdio.js");
const { StreamableHTTPClientTransport } = fromCache("@modelcontextprotocol/sdk/client/streamableHttp.js");

const down = new StdioServerTransport();
const up = new StreamableHTTPClientTransport(new URL(process.argv[2]));
const initializeIds = new Set();

down.onmessage = (message) => {
  if (message.method === "initialize") initializeIds.add(message.id);
  up.send(message).catch((error) => {
    console.error(`stdio-to-http: ${error.message}`);
    if (message.method && message.id !== undefined) {
      down.send({
        jsonrpc: "2.0",
        id: message.id,
        error: { code: -32603, message: `stdio-to-http: ${error.message}` },
      }).catch(() => {});
    }
  });
};
up.onmessage = (message) => {
  // Later requests carry the negotiated version in the MCP-Protocol-Version header, as the SDK's Client does.
  if (initializeIds.delete(message.id) && message.result?.protocolVersion) {
    up.setProtocolVersion(message.result.protocolVersion);
  }
  down.send(message).catch(() => {});
};
up.onerror = (error) => console.error(`stdio-to-http: ${error.message}`);

let finishing = false;
async function finish() {
  if (finishing) return;
  finishing = true;
  await up.terminateSession().catch(() => {}); // DELETE the session, when the server gave one
  await up.close().catch(() => {});
  process.exit(0);
}
down.onclose = finish;
process.stdin.on("end", finish);
await up.start();
await down.start();
