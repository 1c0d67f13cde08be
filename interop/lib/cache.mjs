// Loads npm packages from the interop cache that interop/setup.sh fills ($IOP_CACHE, else $MCP_INTEROP_CACHE, else
// ~/.cache/mcp-interop), never from the repository, which has no node_modules.
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join } from "node:path";
import process from "node:process";

const cache = process.env.IOP_CACHE || process.env.MCP_INTEROP_CACHE || join(homedir(), ".cache", "mcp-interop");

/** `require` as if from the cache's root: `fromCache("@modelcontextprotocol/sdk/client/index.js")`. */
export const fromCache = createRequire(join(cache, "package.json"));

/** StdioClientTransport options for a server command line: run by `sh -c` (shell quoting), with our environment. */
export const stdioServer = (commandLine) => ({ command: "sh", args: ["-c", `exec ${commandLine}`], env: process.env });
