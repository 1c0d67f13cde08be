// A hand-written MCP server (NDJSON on stdio) that speaks only the stateless 2026-07-28 revision and starts slowly,
// as an `npx`-launched one does: it reads nothing for FAKE_DELAY_MS (default 1500) ms, then answers what queued up in
// order. server/discover → {supportedVersions ["2026-07-28"], capabilities {tools}}; initialize → -32601 (it has
// no handshake); tools/list → one tool "echo" {text}; tools/call echo → its text. It notes on stderr when it starts
// reading ("fake-late: reading"). It does not import mcp.ts. stdin EOF exits 0.
import process from "node:process";
import { readMessages } from "./ndjson_stdin.ts";

// deno-lint-ignore no-explicit-any
type Message = Record<string, any>;

const write = (message: Message): void =>
  void process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");
const INFO = { "io.modelcontextprotocol/serverInfo": { name: "fake-late", version: "1" } };

function handle({ id, method, params = {} }: Message): void {
  if (id === undefined) return;
  switch (method) {
    case "server/discover":
      return write({
        id,
        result: { supportedVersions: ["2026-07-28"], capabilities: { tools: {} }, _meta: INFO },
      });
    case "tools/list":
      return write({
        id,
        result: {
          tools: [{ name: "echo", inputSchema: { type: "object", properties: { text: { type: "string" } } } }],
          _meta: INFO,
        },
      });
    case "tools/call":
      if (params.name === "echo") {
        return write({ id, result: { content: [{ type: "text", text: String(params.arguments?.text ?? "") }] } });
      }
      return write({ id, error: { code: -32602, message: `Unknown tool: ${params.name}` } });
  }
  write({ id, error: { code: -32601, message: `Method not found: ${method}` } });
}

setTimeout(() => {
  process.stderr.write("fake-late: reading\n");
  readMessages(handle, () => process.exit(0));
}, Number(process.env.FAKE_DELAY_MS ?? 1500));
