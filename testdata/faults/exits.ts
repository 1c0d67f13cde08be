// Fault injection: a tool that tries to end the server.
import process from "node:process";

export default {
  description: "Calls process.exit(code) (default 3)",
  inputSchema: { type: "object", properties: { code: { type: "integer" } } },
  run: ({ code }: { code?: number }) => process.exit(code ?? 3),
};
