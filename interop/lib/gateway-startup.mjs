// How long a stdio server takes from its spawn to its first tools/list answer (and to a list with every tool it will
// have), over plain newline-delimited JSON-RPC, without an SDK:
//   node gateway-startup.mjs RUNS TOOLS "<stdio server command>"
// Each run spawns the command (through sh, as `exec COMMAND`), writes `initialize` at once, on its answer
// `notifications/initialized` and `tools/list`; the time of that answer is the start-up time. When it lists fewer
// than TOOLS tools (a gateway that served before every upstream was up), the list is asked again after each
// notifications/tools/list_changed until it has TOOLS: that time is "all". Then stdin is closed and the time until
// the process exits is "stop" (SIGKILL after 10 s). Prints one line per run, then the medians.
import { spawn } from "node:child_process";
import process from "node:process";

const [runsArg, toolsArg, command] = process.argv.slice(2);
const runs = Number(runsArg);
const want = Number(toolsArg);
if (!(runs > 0) || !(want > 0) || !command) {
  console.error('usage: gateway-startup.mjs RUNS TOOLS "<stdio server command>"');
  process.exit(2);
}

function once() {
  return new Promise((resolve, reject) => {
    const began = performance.now();
    const child = spawn("sh", ["-c", `exec ${command}`], { stdio: ["pipe", "pipe", "ignore"] });
    const result = { first: undefined, firstCount: undefined, all: undefined, stop: undefined };
    const send = (message) => child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
    let buffer = "";
    let next = 2;
    let listing = false;
    let closedAt;
    const list = () => {
      listing = true;
      send({ id: next++, method: "tools/list" });
    };
    const finish = () => {
      closedAt = performance.now();
      child.stdin.end();
      setTimeout(() => child.kill("SIGKILL"), 10_000).unref();
    };
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`no list of ${want} tools in 60 s: ${JSON.stringify(result)}`));
    }, 60_000);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      if (closedAt === undefined) reject(new Error(`it exited (${signal ?? code}) before listing ${want} tools`));
      else resolve({ ...result, stop: performance.now() - closedAt, signal });
    });
    child.stdout.on("data", (chunk) => {
      buffer += chunk;
      for (let end = buffer.indexOf("\n"); end >= 0; end = buffer.indexOf("\n")) {
        const line = buffer.slice(0, end).trim();
        buffer = buffer.slice(end + 1);
        if (!line) continue;
        const message = JSON.parse(line);
        if (message.id === 1 && message.result) {
          send({ method: "notifications/initialized" });
          list();
        } else if (message.id !== undefined && message.result?.tools) {
          listing = false;
          const count = message.result.tools.length;
          const at = performance.now() - began;
          if (result.first === undefined) [result.first, result.firstCount] = [at, count];
          if (count >= want) {
            result.all = at;
            finish();
          }
        } else if (message.method === "notifications/tools/list_changed" && result.first !== undefined && !listing) {
          list();
        } else if (message.id !== undefined && message.method) {
          send({ id: message.id, error: { code: -32601, message: "Method not found" } }); // roots/list, ...
        }
      }
    });
    send({
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-11-25",
        capabilities: {},
        clientInfo: { name: "mcp-interop-gateway-startup", version: "1.0.0" },
      },
    });
  });
}

const ms = (value) => `${value.toFixed(0)} ms`;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const results = [];
for (let run = 1; run <= runs; run++) {
  const result = await once();
  results.push(result);
  console.log(
    `run ${run}: first tools/list ${ms(result.first)} (${result.firstCount} tools), all ${want} at ${ms(result.all)},` +
      ` stopped ${ms(result.stop)} after stdin closed${result.signal ? ` (${result.signal})` : ""}`,
  );
}
const partial = results.filter((result) => result.firstCount < want).length;
console.log(
  `median of ${runs}: first tools/list ${ms(median(results.map((r) => r.first)))}, all ${want} tools ` +
    `${ms(median(results.map((r) => r.all)))}, stop ${ms(median(results.map((r) => r.stop)))}` +
    (partial ? ` (${partial} of ${runs} first lists had fewer than ${want} tools)` : ""),
);
