// What the stdio fakes share (none of them imports mcp.ts): stdin read as newline-delimited JSON, each
// non-blank line parsed and handed to `handle`; `end` when stdin closes.
import process from "node:process";

// deno-lint-ignore no-explicit-any
export function readMessages(handle: (message: any) => void, end: () => void): void {
  let buffer = "";
  process.stdin.setEncoding("utf8");
  process.stdin.on("data", (chunk: string) => {
    buffer += chunk;
    let newline;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline).trim();
      buffer = buffer.slice(newline + 1);
      if (line) handle(JSON.parse(line));
    }
  });
  process.stdin.on("end", end);
}
