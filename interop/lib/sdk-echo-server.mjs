// A stdio MCP server built with the official TypeScript SDK v1's McpServer: one tool, `echo` ({text} -> text).
// The benchmark's peer (MCP_BENCH_PEERS="interop/sdk-echo-server.sh" deno task bench).
import { createRequire } from "node:module";
import { fromCache } from "./cache.mjs";

const mcp = fromCache.resolve("@modelcontextprotocol/sdk/server/mcp.js");
const { McpServer } = fromCache(mcp);
const { StdioServerTransport } = fromCache("@modelcontextprotocol/sdk/server/stdio.js");
const { z } = createRequire(mcp)("zod"); // the zod the SDK itself resolves

const server = new McpServer({ name: "sdk-echo", version: "1.0.0" });
server.registerTool(
  "echo",
  { description: "Echo the text back", inputSchema: { text: z.string() } },
  ({ text }) => ({ content: [{ type: "text", text }] }),
);
await server.connect(new StdioServerTransport());
