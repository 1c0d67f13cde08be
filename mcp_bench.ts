// Benchmarks of mcp.ts against their floors, measured in one run on one runtime.
//
//   deno task bench            (deno run -A mcp_bench.ts)
//   bun mcp_bench.ts
//   MCP_BENCH_PEERS="interop/sdk-echo-server.sh" deno task bench
//   MCP_BENCH_QUICK=1 deno task bench        fewer calls and rounds, for a smoke test
//   MCP_BENCH_ONLY=http deno task bench      only the HTTP part (6); MCP_BENCH_ONLY=stdio: only 1-5
//   MCP_BENCH_LOADGEN=fetch deno task bench  HTTP load from fetch loops on the runtime even when wrk is on PATH
//   MCP_BENCH_ONLY=package node mcp_bench.ts   only the npm package's start-up on Node (8)
//   MCP_BENCH_ONLY=session deno task bench   only the daemon's sessions (9)
//   MCP_BENCH_ONLY=state deno task bench     only replicas' state in Redis (10)
//
// 1. Server throughput: a driver pipelines N tools/call of `echo` (256 in flight, after a warm-up) over
//    stdio and checks every response; the same driver runs against a raw NDJSON echo loop (the floor).
// 2. Peers: each command in MCP_BENCH_PEERS (separated by ";") through the same driver.
// 3. One-shot latency: `mcp.ts call` against two bare start-ups of an empty file.
// 4. Big messages and memory: framing cost per byte; a 4 MiB − 1 round trip; peak RSS.
// 5. Start-up with 1 and 100 plugins: time to the first tools/list answer.
// 6. HTTP: 2026-07-28 stateless tools/call of `echo` over 64 keep-alive connections, from wrk (apt-get install wrk)
//    or else fetch loops in a process of their own, every answer checked, against `mcp.ts serve --http`, a raw JSON
//    echo on the runtime's own server (the floor), the official SDK v2's createMcpHandler (the peer, installed from
//    npm into ~/.cache/mcp-bench or $MCP_BENCH_CACHE on first use), and on Deno `deno serve --parallel` with 2
//    workers against 1.
// 8. The npm package on Node (MCP_BENCH_ONLY=package; part of a run under Node): the package built by
//    build/dist.mjs, its `mcp --version` against a bare `node -e 0`, and a one-shot `call` of `add` (client and
//    server both the package) against two bare Node starts; the same two with `node mcp.ts` (types stripped at each
//    start) as the before.
// 9. Sessions (MCP_BENCH_ONLY=session; part of every full run): a session opened in the per-user daemon (a state
//    directory of the run's own), `call @NAME echo` against `mcp.ts --version` on the same runtime (what is left is
//    the client's own start-up), and `batch @NAME` of 1,000 calls against the same batch spawning the server.
// 10. Replicas (MCP_BENCH_ONLY=state; part of every full run when redis-server is on PATH): part 6's stateless
//    and legacy-session loads against `serve --http --state redis://…` (a redis-server of the run's own) and
//    against the same server on memory:, alternating.
// 7. Telemetry (MCP_BENCH_ONLY=telemetry): part 1's driver against `mcp.ts serve` with telemetry off, and with
//    OTLP traces and metrics on (always_on sampler; a 10% sampler) to a collector in this process that answers 200,
//    to a closed port, and to one that never answers (then also the peak RSS after the calls).
//
// The machine is noisy: every figure is a median of alternating rounds, and the ratios are what to read.

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer as createNetServer } from "node:net";
import { cpus, homedir, tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { FrameReader } from "./mcp.ts";

const HERE = new URL(".", import.meta.url).pathname;
const MCP = join(HERE, "mcp.ts");
const IS_DENO = "Deno" in globalThis;
const RUNTIME_NAME = IS_DENO ? "deno" : process.versions.bun ? "bun" : "node";
const RUNTIME: string[] = IS_DENO ? [process.execPath, "run", "-A"] : [process.execPath];
const RUNTIME_VERSION = process.versions.bun ?? (IS_DENO ? process.versions.deno : process.version);
const QUICK = process.env.MCP_BENCH_QUICK === "1";
const ONLY = process.env.MCP_BENCH_ONLY ?? ""; // "stdio" or "http": run that part alone
const CALLS = QUICK ? 20_000 : 100_000;
const ROUNDS = QUICK ? 3 : 5;
const IN_FLIGHT = 256;
const CLOCK_TICKS = 100; // USER_HZ on Linux

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function cpuSeconds(pid: number, file = `/proc/${pid}/stat`): number {
  const stat = readFileSync(file, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS; // utime + stime
}

function peakRssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

// --- the floor: a raw NDJSON echo loop on the same runtime ---------------------------------

const FLOOR_SOURCE = `
import process from "node:process";
let rest = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  const lines = (rest + chunk).split("\\n");
  rest = lines.pop();
  let out = "";
  for (const line of lines) {
    if (!line) continue;
    const message = JSON.parse(line);
    if (message.id === undefined) continue;
    const text = message.params?.arguments?.text ?? "";
    out += JSON.stringify({ jsonrpc: "2.0", id: message.id, result: message.method === "tools/call"
      ? { content: [{ type: "text", text }] }
      : message.method === "initialize"
      ? { protocolVersion: "2025-11-25", capabilities: { tools: {} }, serverInfo: { name: "floor", version: "0" } }
      : { tools: [] } }) + "\\n";
  }
  if (out) process.stdout.write(out);
});
`;

// --- the driver ------------------------------------------------------------------------------

interface Run {
  callsPerSecond: number;
  cpuMicrosPerCall: number;
  peakRssMiB: number;
}

/** A failure the bench reports as one line (`bench: ...`), without a stack trace. */
class BenchError extends Error {}

/**
 * Spawns `argv`, handshakes, pipelines `calls` echo calls with IN_FLIGHT in flight, checks every answer.
 * When the program cannot start, dies or answers wrongly, throws a BenchError naming it (`name`) and saying why.
 */
async function drive(argv: string[], calls: number, name: string, env?: Record<string, string>): Promise<Run> {
  const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"], cwd: HERE, env });
  const stderr = stderrReader(child);
  child.stdin!.on("error", () => {}); // EPIPE when the child is gone: its exit status and stderr say why
  let answered = false;
  try {
    const lines = lineReader(child);
    const send = (text: string) => child.stdin!.write(text);
    send(
      JSON.stringify({
        jsonrpc: "2.0",
        id: "init",
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "bench", version: "0" } },
      }) + "\n",
    );
    const [answer] = await lines.next();
    if (!isInitializeResult(answer)) throw new Error(`not an initialize result: ${answer.slice(0, 200)}`);
    answered = true;
    stderr.passThrough();
    send('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
    const request = (id: number) =>
      `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":{"text":"m${id}"}}}\n`;
    const run = async (count: number, firstId: number) => {
      let sent = 0;
      let received = 0;
      let batch = "";
      for (; sent < Math.min(IN_FLIGHT, count); sent++) batch += request(firstId + sent);
      send(batch);
      while (received < count) {
        const got = await lines.next();
        let refill = "";
        for (const line of got) {
          const message = JSON.parse(line);
          const id = message.id as number;
          if (message.result?.content?.[0]?.text !== `m${id}`) throw new Error(`wrong answer: ${line.slice(0, 200)}`);
          received++;
          if (sent < count) refill += request(firstId + sent++);
        }
        if (refill) send(refill);
      }
    };
    await run(Math.min(5_000, calls), 1_000_000); // warm-up
    const cpuBefore = cpuSeconds(child.pid!);
    const started = performance.now();
    await run(calls, 1);
    const seconds = (performance.now() - started) / 1000;
    const cpu = cpuSeconds(child.pid!) - cpuBefore;
    return { callsPerSecond: calls / seconds, cpuMicrosPerCall: cpu / calls * 1e6, peakRssMiB: peakRssMiB(child.pid!) };
  } catch (error) {
    const status = await exitStatus(child);
    const reason = status === undefined
      ? (error as Error).message
      : `${stderr.lastLine() || (error as Error).message} (${status})`;
    const what = !answered ? `Cannot start ${name}` : status === undefined ? `${name} failed` : `${name} died`;
    throw new BenchError(`${what}: ${reason}`);
  } finally {
    child.kill("SIGKILL");
  }
}

/** Is `line` the answer to the driver's initialize request? */
function isInitializeResult(line: string): boolean {
  try {
    const message = JSON.parse(line);
    return message.id === "init" && message.result !== undefined;
  } catch {
    return false;
  }
}

/** "exit code N" or "signal S" once the child has exited (waiting up to a second), else undefined. */
async function exitStatus(child: ChildProcess): Promise<string | undefined> {
  if (child.exitCode === null && child.signalCode === null) {
    await Promise.race([new Promise((resolve) => child.once("exit", resolve)), sleep(1000)]);
  }
  if (child.signalCode !== null) return `signal ${child.signalCode}`;
  return child.exitCode === null ? undefined : `exit code ${child.exitCode}`;
}

/** Holds a child's stderr until `passThrough()` (so a failed start is reported in one line), then passes it on. */
function stderrReader(child: ChildProcess) {
  let held = "";
  let tail = "";
  let passing = false;
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (chunk: string) => {
    tail = (tail + chunk).slice(-4096);
    if (passing) process.stderr.write(chunk);
    else held = (held + chunk).slice(-65536);
  });
  return {
    passThrough() {
      passing = true;
      if (held) process.stderr.write(held);
      held = "";
    },
    lastLine: () => tail.trim().split("\n").pop()!.trim(),
  };
}

/** Answers lines from a child's stdout in batches: one await per chunk, not per line. */
function lineReader(child: ChildProcess) {
  let rest = "";
  let ready: string[] = [];
  let wake: (() => void) | undefined;
  let ended = false;
  child.stdout!.setEncoding("utf8");
  child.stdout!.on("data", (chunk: string) => {
    const parts = (rest + chunk).split("\n");
    rest = parts.pop()!;
    for (const part of parts) if (part) ready.push(part);
    wake?.();
  });
  child.stdout!.on("end", () => {
    ended = true;
    wake?.();
  });
  return {
    async next(): Promise<string[]> {
      while (ready.length === 0) {
        if (ended) throw new Error("the server closed its stdout");
        await new Promise<void>((resolve) => wake = resolve);
        wake = undefined;
      }
      const got = ready;
      ready = [];
      return got;
    },
  };
}

// --- helpers for the sections ---------------------------------------------------------------

function timeCommand(argv: string[], options: { env?: NodeJS.ProcessEnv; input?: string } = {}): number {
  const started = performance.now();
  const result = spawnSync(argv[0], argv.slice(1), { cwd: HERE, env: options.env, input: options.input ?? "" });
  if (result.status !== 0) throw new Error(`${argv.join(" ")} failed: ${result.stderr}`);
  return performance.now() - started;
}

const fmt = (value: number, digits = 0) => value.toLocaleString("en-US", { maximumFractionDigits: digits });
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;

// --- 1 and 2: throughput ----------------------------------------------------------------------

async function stdioBench(work: string): Promise<void> {
  const floorFile = join(work, "floor.mjs");
  writeFileSync(floorFile, FLOOR_SOURCE);
  const echoDir = join(work, "echo");
  spawnSync("mkdir", ["-p", echoDir]);
  writeFileSync(join(echoDir, "echo.ts"), readFileSync(join(HERE, "testdata/tools/echo.ts")));

  const serverArgv = [...RUNTIME, MCP, "serve", echoDir];
  const floorArgv = [...RUNTIME, floorFile];
  const peers = (process.env.MCP_BENCH_PEERS ?? "").split(";").map((peer) => peer.trim()).filter(Boolean);
  const peerArgv = (peer: string) => ["sh", "-c", `exec ${peer}`];
  const results: Record<string, Run[]> = { server: [], floor: [] };
  for (const peer of peers) results[peer] = [];
  for (const peer of peers) await drive(peerArgv(peer), 1, `peer "${peer}"`); // a peer that cannot start fails now
  for (let round = 0; round < ROUNDS; round++) {
    results.server.push(await drive(serverArgv, CALLS, "mcp.ts serve"));
    results.floor.push(await drive(floorArgv, CALLS, "the floor"));
    for (const peer of peers) results[peer].push(await drive(peerArgv(peer), CALLS, `peer "${peer}"`));
    await sleep(100);
  }
  const summary = (runs: Run[]) => ({
    callsPerSecond: median(runs.map((run) => run.callsPerSecond)),
    cpuMicrosPerCall: median(runs.map((run) => run.cpuMicrosPerCall)),
    peakRssMiB: Math.max(...runs.map((run) => run.peakRssMiB)),
  });
  const server = summary(results.server);
  const floor = summary(results.floor);
  console.log(
    `# mcp.ts benchmark — ${RUNTIME_NAME} ${
      process.versions.bun ?? (IS_DENO ? process.versions.deno : process.version)
    }`,
  );
  console.log(
    `machine: ${cpus().length} × ${
      cpus()[0]?.model ?? "?"
    }; ${CALLS} calls × ${ROUNDS} rounds, ${IN_FLIGHT} in flight\n`,
  );
  console.log("| measure | mcp.ts | floor / peer | ratio | target |");
  console.log("|---|---|---|---|---|");
  console.log(
    `| calls/s (raw NDJSON echo floor) | ${fmt(server.callsPerSecond)} | ${fmt(floor.callsPerSecond)} | ${
      ratio(server.callsPerSecond, floor.callsPerSecond)
    } | ≥ 0.70x |`,
  );
  console.log(
    `| server CPU µs/call (floor) | ${fmt(server.cpuMicrosPerCall, 1)} | ${fmt(floor.cpuMicrosPerCall, 1)} | ${
      ratio(server.cpuMicrosPerCall, floor.cpuMicrosPerCall)
    } | ≤ 1.5x |`,
  );
  for (const peer of peers) {
    const other = summary(results[peer]);
    console.log(
      `| calls/s vs ${peer.split("/").pop()} | ${fmt(server.callsPerSecond)} | ${fmt(other.callsPerSecond)} | ${
        ratio(server.callsPerSecond, other.callsPerSecond)
      } | ≥ 5x (SDK) |`,
    );
    console.log(
      `| CPU µs/call vs ${peer.split("/").pop()} | ${fmt(server.cpuMicrosPerCall, 1)} | ${
        fmt(other.cpuMicrosPerCall, 1)
      } | ${ratio(server.cpuMicrosPerCall, other.cpuMicrosPerCall)} | |`,
    );
  }
  console.log(
    `| server peak RSS during the calls, MiB | ${fmt(server.peakRssMiB, 1)} | ${fmt(floor.peakRssMiB, 1)} | | |`,
  );

  // --- 3: one-shot latency -----------------------------------------------------------------
  const empty = join(work, "empty.ts");
  writeFileSync(empty, "");
  const serverCommand = [...RUNTIME, MCP, "serve", echoDir].join(" ");
  const callTimes: number[] = [];
  const floorTimes: number[] = [];
  for (let round = 0; round < 10; round++) {
    callTimes.push(timeCommand([...RUNTIME, MCP, "call", serverCommand, "echo", '{"text":"x"}']));
    floorTimes.push(timeCommand([...RUNTIME, empty]) + timeCommand([...RUNTIME, empty]));
  }
  console.log(
    `| one-shot \`call\` ms (two bare start-ups) | ${fmt(median(callTimes), 1)} | ${fmt(median(floorTimes), 1)} | ${
      ratio(median(callTimes), median(floorTimes))
    } | ≤ 1.5x |`,
  );

  // --- 4: big messages and memory ---------------------------------------------------------------
  const chunk = 64 * 1024;
  const framingNsPerByte = (lineBytes: number) => {
    const line = new Uint8Array(lineBytes + 1).fill(0x61);
    line[lineBytes] = 0x0a;
    const total = Math.max(64 * 1024 * 1024, lineBytes * 4);
    const stream = new Uint8Array(total);
    for (let offset = 0; offset + line.length <= total; offset += line.length) stream.set(line, offset);
    const reader = new FrameReader({ message: () => {}, oversize: () => {} }, 8 * 1024 * 1024);
    const times: number[] = [];
    for (let round = 0; round < 5; round++) {
      const started = performance.now();
      for (let offset = 0; offset < total; offset += chunk) reader.push(stream.subarray(offset, offset + chunk));
      times.push((performance.now() - started) * 1e6 / total);
    }
    return median(times);
  };
  const perByte = [1024, 64 * 1024, 4 * 1024 * 1024].map(framingNsPerByte);
  console.log(
    `| framing ns/byte: 1 KiB / 64 KiB / 4 MiB lines (64 KiB chunks) | ${
      perByte.map((n) => n.toFixed(2)).join(" / ")
    } | | ${ratio(perByte[2], perByte[0])} (4 MiB vs 1 KiB) | ≤ 2x |`,
  );

  const big = await bigMessages(serverArgv);
  console.log(`| round trip of a 4 MiB − 1 line, ms | ${fmt(big.roundTripMs, 1)} | | | |`);
  console.log(`| server peak RSS, 64 MiB over-long lines, MiB | ${fmt(big.overlongPeakMiB, 1)} | | | < 100 MB |`);

  // --- 5: start-up with many plugins ----------------------------------------------------------
  const pluginDir = (count: number) => {
    const dir = join(work, `plugins-${count}`);
    spawnSync("mkdir", ["-p", dir]);
    for (let i = 0; i < count; i++) {
      writeFileSync(join(dir, `tool${i}.ts`), `export default { description: "Tool ${i}", run: () => "${i}" };\n`);
    }
    return dir;
  };
  const one = pluginDir(1);
  const hundred = pluginDir(100);
  const firstList: Record<string, number[]> = { one: [], hundred: [] };
  for (let round = 0; round < 5; round++) {
    firstList.one.push(await timeToFirstList([...RUNTIME, MCP, "serve", one]));
    firstList.hundred.push(await timeToFirstList([...RUNTIME, MCP, "serve", hundred]));
  }
  console.log(
    `| start-up to first tools/list ms: 100 plugins (1 plugin) | ${fmt(median(firstList.hundred), 1)} | ${
      fmt(median(firstList.one), 1)
    } | ${ratio(median(firstList.hundred), median(firstList.one))} | < 2x |`,
  );
}

async function bigMessages(argv: string[]): Promise<{ roundTripMs: number; overlongPeakMiB: number }> {
  const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "ignore"] });
  try {
    const lines = lineReader(child);
    const prefix = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"';
    const suffix = '"}}}';
    const text = "y".repeat(4 * 1024 * 1024 - 1 - prefix.length - suffix.length);
    const started = performance.now();
    child.stdin!.write(prefix + text + suffix + "\n");
    const [answer] = await lines.next();
    const roundTripMs = performance.now() - started;
    if (JSON.parse(answer).result?.content?.[0]?.text !== text) throw new Error("the 4 MiB − 1 echo came back wrong");
    return { roundTripMs, overlongPeakMiB: await overlongPeak(argv) };
  } finally {
    child.kill("SIGKILL");
  }
}

/** Peak RSS of a fresh server fed four 64 MiB lines, far over the cap, then a ping it must still answer. */
async function overlongPeak(argv: string[]): Promise<number> {
  const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "ignore"] });
  try {
    const lines = lineReader(child);
    const piece = "z".repeat(64 * 1024);
    for (let line = 0; line < 4; line++) {
      for (let i = 0; i < 1024; i++) {
        if (!child.stdin!.write(piece)) await new Promise((resolve) => child.stdin!.once("drain", resolve));
      }
      child.stdin!.write("\n");
    }
    child.stdin!.write('{"jsonrpc":"2.0","id":"after","method":"ping"}\n');
    for (;;) if ((await lines.next()).some((line) => line.includes('"after"'))) break;
    return peakRssMiB(child.pid!);
  } finally {
    child.kill("SIGKILL");
  }
}

async function timeToFirstList(argv: string[]): Promise<number> {
  const started = performance.now();
  const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "ignore"] });
  try {
    const lines = lineReader(child);
    child.stdin!.write(
      '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}\n' +
        '{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n',
    );
    for (;;) if ((await lines.next()).some((line) => line.startsWith('{"jsonrpc":"2.0","id":2'))) break;
    return performance.now() - started;
  } finally {
    child.kill("SIGKILL");
  }
}

// --- 6: HTTP ----------------------------------------------------------------------------------
// A load generator in a process of its own (wrk when it is on PATH, else a fetch loop on this runtime) keeps
// HTTP_CONNECTIONS keep-alive connections busy with 2026-07-28 stateless tools/call of `echo` for HTTP_SECONDS,
// against each server in turn, HTTP_ROUNDS alternating rounds; every server is started afresh for each run.

const HTTP_CONNECTIONS = 64;
const HTTP_SECONDS = QUICK ? 2 : 5;
const HTTP_ROUNDS = QUICK ? 3 : 5;
const HTTP_CHECKED = QUICK ? 1_000 : 4_000; // calls checked with fetch (32 at a time) after each start-up
const SDK_PACKAGE = "@modelcontextprotocol/server@2.4.0";
const SDK_CACHE = process.env.MCP_BENCH_CACHE || join(homedir(), ".cache", "mcp-bench");
const MODERN = "2026-07-28";
const HTTP_HEADERS: Record<string, string> = {
  "content-type": "application/json",
  "accept": "application/json, text/event-stream",
  "mcp-protocol-version": MODERN,
  "mcp-method": "tools/call",
  "mcp-name": "echo",
};
const BODY_HEAD = '{"jsonrpc":"2.0","id":';
const BODY_TAIL = ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{' +
  `"io.modelcontextprotocol/protocolVersion":"${MODERN}","io.modelcontextprotocol/clientCapabilities":{}}}}`;
const ECHO_TOOL_SOURCE = `{
  name: "echo",
  description: "Echo the text back",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  run: ({ text }: { text: string }) => text,
}`;

// The floor: the least an HTTP JSON-RPC echo can do on this runtime's own server.
const HTTP_FLOOR_SOURCE = `
const answer = (message) => JSON.stringify({
  jsonrpc: "2.0",
  id: message.id,
  result: { content: [{ type: "text", text: message.params.arguments.text }] },
});
// request.json(): the runtime's cheapest way to a parsed body (Deno 2.9.6: 1.7 µs a request less than text()).
const fetchHandler = async (request) =>
  new Response(answer(await request.json()), { headers: { "content-type": "application/json" } });
if ("Deno" in globalThis) {
  Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: ({ port }) => console.error("listening " + port) }, fetchHandler);
} else if ("Bun" in globalThis) {
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, idleTimeout: 0, fetch: fetchHandler });
  console.error("listening " + server.port);
} else {
  const { createServer } = await import("node:http");
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const text = answer(JSON.parse(Buffer.concat(chunks).toString()));
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
      res.end(text);
    });
  });
  server.listen(0, "127.0.0.1", () => console.error("listening " + server.address().port));
}
`;

// The peer: the official SDK v2's stateless createMcpHandler with one echo tool, put on this runtime's server by
// mcp.ts's own listenHttp (Deno.serve, Bun.serve, or node:http through the same adapter mcp.ts uses on Node).
// Written into the cache, next to its node_modules, so that bare imports resolve on every runtime.
const sdkPeerSource = (mcpUrl: string) => `
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { z } from "zod";
import { listenHttp } from ${JSON.stringify(mcpUrl)};

const handler = createMcpHandler(() => {
  const server = new McpServer({ name: "sdk-echo", version: "1.0.0" });
  server.registerTool(
    "echo",
    { description: "Echo the text back", inputSchema: z.object({ text: z.string() }) },
    ({ text }) => ({ content: [{ type: "text", text }] }),
  );
  return server;
});
const listener = await listenHttp((request) => handler.fetch(request), { hostname: "127.0.0.1", port: 0 });
console.error("listening " + listener.port);
`;

// What a load sends: its headers, and each body as head + id + tail.
interface Wire {
  headers: Record<string, string>;
  head: string;
  tail: string;
}
const MODERN_WIRE: Wire = { headers: HTTP_HEADERS, head: BODY_HEAD, tail: BODY_TAIL };

// The same call on a legacy session (2025-11-25): initialize, notifications/initialized, then calls that name it.
async function legacyWire(url: string): Promise<Wire> {
  const headers = { "content-type": "application/json", "accept": "application/json, text/event-stream" };
  const initialize = await fetch(url, {
    method: "POST",
    headers,
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "bench", version: "0" } },
    }),
  });
  const session = initialize.headers.get("mcp-session-id");
  await initialize.text();
  if (!session) throw new BenchError(`initialize answered ${initialize.status} without an Mcp-Session-Id`);
  const on = { ...headers, "mcp-protocol-version": "2025-11-25", "mcp-session-id": session };
  const body = '{"jsonrpc":"2.0","method":"notifications/initialized"}';
  await (await fetch(url, { method: "POST", headers: on, body })).text();
  return {
    headers: on,
    head: BODY_HEAD,
    tail: ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}',
  };
}

// wrk: a fixed request (id 1) on every connection; each answer must be a 200 that echoes "hi".
const wrkScript = (wire: Wire) => `
wrk.method = "POST"
${Object.entries(wire.headers).map(([name, value]) => `wrk.headers["${name}"] = "${value}"`).join("\n")}
wrk.body = '${wire.head}1${wire.tail}'
local expect = '"text":"hi"'
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) bad = 0; sample = "" end
function response(status, headers, body)
  if status ~= 200 or not string.find(body, expect, 1, true) then
    bad = bad + 1
    if sample == "" then sample = (status .. " " .. string.sub(body, 1, 200)):gsub("%s", " ") end
  end
end
function done(summary, latency, requests)
  local bad, sample = 0, ""
  for _, thread in ipairs(threads) do
    bad = bad + thread:get("bad")
    if sample == "" then sample = thread:get("sample") end
  end
  local e = summary.errors
  io.write(string.format("LOAD requests=%d duration_us=%d bad=%d errors=%d p50_us=%d p99_us=%d sample=%s\\n",
    summary.requests, summary.duration, bad, e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99), sample))
end
`;

// Without wrk: CONNECTIONS fetch loops in a process on this runtime, each answer parsed and checked.
const FETCH_LOAD_SOURCE = `
import process from "node:process";
const { url, connections, seconds, headers, head, tail } = JSON.parse(process.env.MCP_BENCH_LOAD);
let requests = 0, bad = 0, errors = 0, sample = "";
const latencies = [];
const end = performance.now() + seconds * 1000;
const loop = async (k) => {
  for (let n = 0; performance.now() < end; n++) {
    const id = k * 10_000_000 + n;
    const started = performance.now();
    try {
      const response = await fetch(url, { method: "POST", headers, body: head + id + tail });
      const text = await response.text();
      latencies.push(performance.now() - started);
      requests++;
      let ok = response.status === 200;
      try {
        const message = JSON.parse(text);
        ok &&= message.id === id && message.result?.content?.[0]?.text === "hi";
      } catch {
        ok = false;
      }
      if (!ok) {
        bad++;
        sample ||= (response.status + " " + text.slice(0, 200)).replace(/\\s/g, " ");
      }
    } catch (error) {
      errors++;
      sample ||= String(error);
    }
  }
};
const started = performance.now();
await Promise.all(Array.from({ length: connections }, (_, k) => loop(k)));
const durationUs = Math.round((performance.now() - started) * 1000);
latencies.sort((a, b) => a - b);
const at = (q) => Math.round((latencies[Math.floor(latencies.length * q)] ?? 0) * 1000);
console.log("LOAD requests=" + requests + " duration_us=" + durationUs + " bad=" + bad + " errors=" + errors +
  " p50_us=" + at(0.5) + " p99_us=" + at(0.99) + " sample=" + sample);
`;

interface HttpRun {
  callsPerSecond: number;
  cpuMicrosPerCall: number;
  p50Ms: number;
  p99Ms: number;
  peakRssMiB: number;
  /** deno serve --parallel: the busiest worker thread's share of the workers' CPU time (0.5 is an even split of 2). */
  busiestWorker?: number;
}

/** CPU seconds of each serving thread of `pid`: its main thread and deno serve's `serve-worker-N` threads. */
function workerCpu(pid: number): Map<string, number> {
  const seconds = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim();
      if (tid !== String(pid) && !name.startsWith("serve-worker")) continue;
      seconds.set(tid, cpuSeconds(Number(tid), `/proc/${pid}/task/${tid}/stat`));
    } catch {
      // the thread ended
    }
  }
  return seconds;
}

/** A server under test: how to start it and how to tell its port from what it prints. */
interface HttpTarget {
  name: string;
  argv: string[];
  ready: RegExp; // on stdout or stderr; group 1 is the port
  cwd?: string;
  env?: Record<string, string>;
  port?: () => Promise<number>; // a port chosen up front (deno serve), substituted for "{port}" in argv
  legacy?: boolean; // the calls go on one legacy session (2025-11-25) instead of 2026-07-28 stateless requests
}

interface Served {
  child: ChildProcess;
  port: number;
  tail: () => string;
}

/** Starts `target` and resolves once it says where it listens; its output is drained and its tail kept. */
async function startServer(target: HttpTarget): Promise<Served> {
  const port = target.port ? String(await target.port()) : "";
  const argv = target.argv.map((arg) => arg.replaceAll("{port}", port));
  const child = spawn(argv[0], argv.slice(1), {
    stdio: ["ignore", "pipe", "pipe"],
    cwd: target.cwd ?? HERE,
    env: { ...process.env, ...target.env },
  });
  let text = "";
  const tail = () => text.trim().split("\n").pop()!.trim();
  return await new Promise<Served>((resolve, reject) => {
    let listening = false;
    const fail = (why: string) => {
      clearTimeout(timer);
      child.kill("SIGKILL");
      reject(new BenchError(`Cannot start ${target.name}: ${tail() || why}`));
    };
    const timer = setTimeout(() => fail("it said nothing of listening within 60 s"), 60_000);
    const onData = (chunk: string) => {
      text = (text + chunk).slice(-8192);
      const match = listening ? null : target.ready.exec(text);
      if (!match) return;
      listening = true;
      clearTimeout(timer);
      resolve({ child, port: Number(match[1]), tail });
    };
    for (const stream of [child.stdout!, child.stderr!]) {
      stream.setEncoding("utf8");
      stream.on("data", onData);
    }
    child.once("error", (error) => fail(error.message));
    child.once("exit", (code, signal) => listening || fail(`exit ${signal ?? code}`));
  });
}

async function stopServer(served: Served): Promise<void> {
  if (served.child.exitCode === null && served.child.signalCode === null) {
    const exited = new Promise((resolve) => served.child.once("exit", resolve));
    served.child.kill("SIGKILL");
    await exited;
  }
}

/** A port nothing listens on now, for servers that cannot be given port 0 (deno serve --parallel). */
async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** `count` calls through this process's fetch, `concurrency` at a time, each with its own id; checks every answer. */
async function checkedCalls(url: string, count: number, concurrency: number, name: string, wire: Wire): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const id = next++;
      const response = await fetch(url, { method: "POST", headers: wire.headers, body: wire.head + id + wire.tail });
      const text = await response.text();
      let ok = response.status === 200 && /^application\/json\b/.test(response.headers.get("content-type") ?? "");
      try {
        const message = JSON.parse(text);
        ok &&= message.jsonrpc === "2.0" && message.id === id && message.result?.content?.[0]?.text === "hi";
      } catch {
        ok = false;
      }
      if (!ok) throw new BenchError(`${name} answered wrongly: ${response.status} ${text.slice(0, 200)}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

interface LoadResult {
  requests: number;
  seconds: number;
  p50Ms: number;
  p99Ms: number;
}

/** Runs the load generator against `url` for `seconds`; fails on any wrong answer or socket error. */
async function load(
  generator: { wrk: boolean; script: string },
  url: string,
  seconds: number,
  name: string,
  wire: Wire,
): Promise<LoadResult> {
  let script = generator.script;
  if (generator.wrk && wire !== MODERN_WIRE) writeFileSync(script = `${script}.${process.pid}.lua`, wrkScript(wire));
  const argv = generator.wrk
    ? ["wrk", "-t1", `-c${HTTP_CONNECTIONS}`, `-d${seconds}s`, "--timeout", "10s", "-s", script, url]
    : [...RUNTIME, script];
  const env = generator.wrk ? process.env : {
    ...process.env,
    MCP_BENCH_LOAD: JSON.stringify({
      url,
      connections: HTTP_CONNECTIONS,
      seconds,
      headers: wire.headers,
      head: wire.head,
      tail: wire.tail,
    }),
  };
  const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "pipe", "pipe"], env });
  let out = "";
  child.stdout!.setEncoding("utf8");
  child.stdout!.on("data", (chunk: string) => out += chunk);
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (chunk: string) => out += chunk);
  const status = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", resolve);
  });
  const match = /LOAD requests=(\d+) duration_us=(\d+) bad=(\d+) errors=(\d+) p50_us=(\d+) p99_us=(\d+) sample=(.*)/
    .exec(out);
  if (status !== 0 || !match) throw new BenchError(`the load generator failed (${status}): ${out.trim().slice(-300)}`);
  const [requests, durationUs, bad, errors, p50Us, p99Us] = match.slice(1, 7).map(Number);
  if (bad || errors || !requests) {
    throw new BenchError(`${name}: ${bad} wrong answers, ${errors} socket errors of ${requests}: ${match[7]}`);
  }
  return { requests, seconds: durationUs / 1e6, p50Ms: p50Us / 1000, p99Ms: p99Us / 1000 };
}

/** One run: a fresh server, checked calls through fetch, a 1 s unmeasured load, then the measured load. */
async function driveHttp(target: HttpTarget, generator: { wrk: boolean; script: string }): Promise<HttpRun> {
  const served = await startServer(target);
  try {
    const url = `http://127.0.0.1:${served.port}/mcp`;
    const wire = target.legacy ? await legacyWire(url) : MODERN_WIRE;
    await checkedCalls(url, HTTP_CHECKED, 32, target.name, wire);
    await load(generator, url, 1, target.name, wire);
    const pid = served.child.pid!;
    const cpuBefore = cpuSeconds(pid);
    const workersBefore = target.port ? workerCpu(pid) : undefined;
    const result = await load(generator, url, HTTP_SECONDS, target.name, wire);
    const cpu = cpuSeconds(pid) - cpuBefore;
    let busiestWorker: number | undefined;
    if (workersBefore) {
      const used = [...workerCpu(pid)].map(([tid, seconds]) => seconds - (workersBefore.get(tid) ?? 0));
      busiestWorker = Math.max(...used) / used.reduce((sum, seconds) => sum + seconds, 0);
    }
    return {
      callsPerSecond: result.requests / result.seconds,
      cpuMicrosPerCall: cpu / result.requests * 1e6,
      p50Ms: result.p50Ms,
      p99Ms: result.p99Ms,
      peakRssMiB: peakRssMiB(pid),
      busiestWorker,
    };
  } catch (error) {
    if (served.child.exitCode !== null || served.child.signalCode !== null) {
      const status = served.child.signalCode ?? `exit code ${served.child.exitCode}`;
      throw new BenchError(`${target.name} died (${status}): ${served.tail()}`);
    }
    throw error;
  } finally {
    await stopServer(served);
  }
}

/** Installs the SDK v2 server package into SDK_CACHE once; answers why not when it cannot. */
function installSdk(): string | undefined {
  const [name, version] = [SDK_PACKAGE.slice(0, SDK_PACKAGE.lastIndexOf("@")), SDK_PACKAGE.split("@").pop()];
  try {
    const installed = JSON.parse(readFileSync(join(SDK_CACHE, "node_modules", name, "package.json"), "utf8"));
    if (installed.version === version) return undefined;
  } catch {
    // not installed yet
  }
  mkdirSync(SDK_CACHE, { recursive: true });
  const manifest = join(SDK_CACHE, "package.json");
  if (!existsSync(manifest)) writeFileSync(manifest, '{ "name": "mcp-bench-cache", "private": true }\n');
  console.error(`bench: installing ${SDK_PACKAGE} into ${SDK_CACHE}`);
  const result = spawnSync(
    "npm",
    ["install", "--no-audit", "--no-fund", "--loglevel=error", "--save-exact", SDK_PACKAGE],
    { cwd: SDK_CACHE, stdio: ["ignore", "pipe", "pipe"], encoding: "utf8" },
  );
  if (result.error) return `npm: ${result.error.message}`;
  if (result.status !== 0) return `npm install failed: ${String(result.stderr).trim().split("\n").pop()}`;
  return undefined;
}

/** wrk when it is on PATH (or MCP_BENCH_LOADGEN says so), else fetch loops on this runtime (said in `notes`). */
function loadGenerator(work: string, notes: string[]): { wrk: boolean; script: string } {
  const want = process.env.MCP_BENCH_LOADGEN ?? "";
  if (want !== "" && want !== "wrk" && want !== "fetch") {
    throw new BenchError(`MCP_BENCH_LOADGEN must be wrk or fetch, not "${want}"`);
  }
  const hasWrk = spawnSync("wrk", ["--version"], { stdio: "ignore" }).error === undefined;
  if (want === "wrk" && !hasWrk) throw new BenchError("MCP_BENCH_LOADGEN=wrk but wrk is not on PATH");
  const useWrk = want === "wrk" || (want === "" && hasWrk);
  const script = join(work, useWrk ? "load.lua" : "load.mjs");
  writeFileSync(script, useWrk ? wrkScript(MODERN_WIRE) : FETCH_LOAD_SOURCE);
  if (!useWrk) {
    notes.push(
      `The load came from fetch loops on ${RUNTIME_NAME}${hasWrk ? "" : " (no wrk on PATH: apt-get install wrk)"}: ` +
        "they cost more CPU per call than the floor, so calls/s and the ratios to the floor read high.",
    );
  }
  return { wrk: useWrk, script };
}

async function httpBench(work: string, withHeader: boolean): Promise<void> {
  const echoDir = join(work, "http-echo");
  mkdirSync(echoDir, { recursive: true });
  writeFileSync(join(echoDir, "echo.ts"), readFileSync(join(HERE, "testdata/tools/echo.ts")));
  const floorFile = join(work, "http-floor.mjs");
  writeFileSync(floorFile, HTTP_FLOOR_SOURCE);

  const notes: string[] = [];
  const generator = loadGenerator(work, notes);
  const useWrk = generator.wrk;

  const ready = /listening (\d+)/;
  const targets: HttpTarget[] = [
    {
      name: "mcp.ts serve --http",
      argv: [...RUNTIME, MCP, "serve", echoDir, "--http", "127.0.0.1:0"],
      ready: /mcp: serving http:\/\/127\.0\.0\.1:(\d+)\//,
    },
    { name: "the HTTP floor", argv: [...RUNTIME, floorFile], ready },
    {
      name: "mcp.ts serve --http, legacy session",
      argv: [...RUNTIME, MCP, "serve", echoDir, "--http", "127.0.0.1:0"],
      ready: /mcp: serving http:\/\/127\.0\.0\.1:(\d+)\//,
      legacy: true,
    },
  ];
  const sdkProblem = installSdk();
  if (sdkProblem) notes.push(`SDK v2 createMcpHandler: not measured: ${sdkProblem}`);
  else {
    const peerFile = join(SDK_CACHE, "sdk-echo-http.mjs");
    writeFileSync(peerFile, sdkPeerSource(pathToFileURL(MCP).href));
    targets.push({ name: "SDK v2 createMcpHandler", argv: [...RUNTIME, peerFile], ready, cwd: SDK_CACHE });
  }
  if (IS_DENO) {
    const moduleFile = join(work, "parallel.ts");
    writeFileSync(
      moduleFile,
      `import { createHandler } from ${JSON.stringify(pathToFileURL(MCP).href)};\n\n` +
        `export default createHandler({ tools: [${ECHO_TOOL_SOURCE}] });\n`,
    );
    for (const jobs of [1, 2]) {
      targets.push({
        name: `deno serve --parallel, ${jobs} worker${jobs > 1 ? "s" : ""}`,
        argv: [process.execPath, "serve", "--parallel", "-A", "--host", "127.0.0.1", "--port", "{port}", moduleFile],
        // "deno serve: Listening on http://127.0.0.1:P/" for one worker, "... with 2 threads" for two
        ready: new RegExp(`Listening on http://127\\.0\\.0\\.1:(\\d+)/${jobs > 1 ? ` with ${jobs} threads` : "\\n"}`),
        env: { DENO_JOBS: String(jobs) },
        port: freePort,
      });
    }
  }

  const runs = new Map<HttpTarget, HttpRun[]>(targets.map((target) => [target, []]));
  for (let round = 0; round < HTTP_ROUNDS; round++) {
    for (const target of [...targets]) {
      try {
        const run = await driveHttp(target, generator);
        runs.get(target)!.push(run);
        console.error(
          `bench: HTTP round ${round + 1}/${HTTP_ROUNDS}, ${target.name}: ${fmt(run.callsPerSecond)} calls/s, ${
            fmt(run.cpuMicrosPerCall, 1)
          } µs CPU/call${
            run.busiestWorker === undefined
              ? ""
              : `, busiest worker ${Math.round(run.busiestWorker * 100)}% of workers' CPU`
          }`,
        );
      } catch (error) {
        // The SDK may not run on every runtime: say so once and go on without it.
        if (target.name !== "SDK v2 createMcpHandler" || round > 0 || !(error instanceof BenchError)) throw error;
        notes.push(`SDK v2 createMcpHandler: cannot run on ${RUNTIME_NAME}: ${error.message}`);
        targets.splice(targets.indexOf(target), 1);
        runs.delete(target);
      }
      await sleep(200);
    }
  }

  const [server, floor, legacy] = targets.map((target) => runs.get(target)!);
  const sdk = [...runs].find(([target]) => target.name === "SDK v2 createMcpHandler")?.[1];
  const parallel = targets.filter((target) => target.port).map((target) => runs.get(target)!);
  const values = (list: HttpRun[], key: Exclude<keyof HttpRun, "busiestWorker">) => list.map((run) => run[key]);
  const fixed = (value: number, digits: number) =>
    value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  const spread = (list: number[], digits = 0) =>
    `${fixed(median(list), digits)} (${fixed(Math.min(...list), digits)}–${fixed(Math.max(...list), digits)})`;
  // The ratio of the medians, and in brackets the range of the same ratio within each round.
  const ratios = (a: number[], b: number[]) => {
    const each = a.map((value, i) => value / b[i]);
    return `${ratio(median(a), median(b))} (${Math.min(...each).toFixed(2)}–${Math.max(...each).toFixed(2)}x)`;
  };
  const row = (measure: string, a: number[], b: number[], target: string, digits = 0) =>
    console.log(`| ${measure} | ${spread(a, digits)} | ${spread(b, digits)} | ${ratios(a, b)} | ${target} |`);

  if (withHeader) {
    console.log(`# mcp.ts benchmark — ${RUNTIME_NAME} ${RUNTIME_VERSION}`);
    console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? "?"}`);
  }
  console.log(
    `\n## HTTP: ${MODERN} stateless tools/call of echo; ${
      useWrk ? "wrk -t1" : `fetch loops on ${RUNTIME_NAME}`
    }, ${HTTP_CONNECTIONS} keep-alive connections × ${HTTP_SECONDS} s × ${HTTP_ROUNDS} alternating rounds; ` +
      `medians (min–max across rounds)\n`,
  );
  console.log("| measure | mcp.ts | floor / peer | ratio | target |");
  console.log("|---|---|---|---|---|");
  const floorName = IS_DENO ? "Deno.serve" : process.versions.bun ? "Bun.serve" : "node:http";
  row(
    `HTTP calls/s (raw ${floorName} JSON echo floor)`,
    values(server, "callsPerSecond"),
    values(floor, "callsPerSecond"),
    "≥ 0.80x",
  );
  row(
    "HTTP server CPU µs/call (floor)",
    values(server, "cpuMicrosPerCall"),
    values(floor, "cpuMicrosPerCall"),
    "≤ 1.30x",
    1,
  );
  row(
    "HTTP CPU µs/call: a legacy session's calls (2026-07-28 stateless)",
    values(legacy, "cpuMicrosPerCall"),
    values(server, "cpuMicrosPerCall"),
    "≤ 1.50x",
    1,
  );
  if (sdk) {
    row(
      "HTTP calls/s vs SDK v2 createMcpHandler",
      values(server, "callsPerSecond"),
      values(sdk, "callsPerSecond"),
      "≥ 5x",
    );
    row("HTTP CPU µs/call vs SDK v2", values(server, "cpuMicrosPerCall"), values(sdk, "cpuMicrosPerCall"), "", 1);
  }
  const others = sdk ? [floor, sdk] : [floor];
  const latency = (list: HttpRun[]) =>
    `${fixed(median(values(list, "p50Ms")), 2)} / ${fixed(median(values(list, "p99Ms")), 2)}`;
  console.log(
    `| HTTP latency p50 / p99 ms (floor${sdk ? "; SDK v2" : ""}) | ${latency(server)} | ${
      others.map(latency).join("; ")
    } | | |`,
  );
  console.log(
    `| HTTP server peak RSS, MiB (floor${sdk ? "; SDK v2" : ""}) | ${
      fmt(Math.max(...values(server, "peakRssMiB")), 1)
    } | ${others.map((list) => fmt(Math.max(...values(list, "peakRssMiB")), 1)).join("; ")} | | |`,
  );
  if (parallel.length === 2) {
    const [one, two] = parallel;
    row(
      "deno serve --parallel calls/s: 2 workers (1 worker)",
      values(two, "callsPerSecond"),
      values(one, "callsPerSecond"),
      "",
    );
    row(
      "deno serve --parallel CPU µs/call: 2 workers (1)",
      values(two, "cpuMicrosPerCall"),
      values(one, "cpuMicrosPerCall"),
      "",
      1,
    );
    const shares = two.map((run) => run.busiestWorker! * 100);
    console.log(
      `| deno serve --parallel, 2 workers: busiest worker's share of the workers' CPU, % | ${spread(shares)} | 50 ` +
        "is even (they share one listening socket) | | |",
    );
  }
  for (const note of notes) console.log(`\n${note}`);
}

// --- 7: telemetry --------------------------------------------------------------------------------

async function telemetryBench(work: string): Promise<void> {
  const { createServer } = await import("node:http");
  const collector = (answer: boolean) =>
    new Promise<{ url: string; close(): void }>((resolve) => {
      const server = createServer((request, response) => {
        request.resume();
        request.on("end", () => answer && response.writeHead(200, { "content-type": "application/json" }).end("{}"));
      });
      server.listen(0, "127.0.0.1", () =>
        resolve({
          url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
          close: () => (server.closeAllConnections(), server.close()),
        }));
    });
  const [ok, hanging] = [await collector(true), await collector(false)];
  const closed = await freePort();
  const echoDir = join(work, "echo");
  mkdirSync(echoDir, { recursive: true });
  writeFileSync(join(echoDir, "echo.ts"), readFileSync(join(HERE, "testdata/tools/echo.ts")));
  const base = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OTEL_"))) as Record<
    string,
    string
  >;
  const on = (endpoint: string, extra: Record<string, string> = {}) => ({
    ...base,
    OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
    OTEL_TRACES_SAMPLER: "always_on",
    ...extra,
  });
  const variants: [string, Record<string, string>][] = [
    ["off", base],
    ["traces and metrics, always_on", on(ok.url)],
    ["traces only", on(ok.url, { OTEL_METRICS_EXPORTER: "none" })],
    ["metrics only", on(ok.url, { OTEL_TRACES_EXPORTER: "none" })],
    [
      "traces and metrics, 10% sampled",
      on(ok.url, { OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.1" }),
    ],
    ["collector down (refused)", on(`http://127.0.0.1:${closed}`)],
    ["collector hanging", on(hanging.url)],
  ];
  const argv = [...RUNTIME, MCP, "serve", echoDir];
  const runs = new Map<string, Run[]>(variants.map(([name]) => [name, []]));
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, env] of variants) runs.get(name)!.push(await drive(argv, CALLS, `mcp.ts serve (${name})`, env));
    }
    const long = await drive(argv, 100_000, "mcp.ts serve (collector hanging, 100,000 calls)", on(hanging.url));
    const longOff = await drive(argv, 100_000, "mcp.ts serve (off, 100,000 calls)", base);
    console.log(`# mcp.ts telemetry benchmark — ${RUNTIME_NAME} ${RUNTIME_VERSION}`);
    console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? "?"}; ${CALLS} calls × ${ROUNDS} rounds\n`);
    console.log("| stdio, telemetry | server CPU µs/call | vs off | calls/s | peak RSS, MiB |");
    console.log("|---|---|---|---|---|");
    const off = median(runs.get("off")!.map((run) => run.cpuMicrosPerCall));
    for (const [name] of variants) {
      const list = runs.get(name)!;
      const cpu = median(list.map((run) => run.cpuMicrosPerCall));
      console.log(
        `| ${name} | ${fmt(cpu, 1)} | ${ratio(cpu, off)} | ${fmt(median(list.map((run) => run.callsPerSecond)))} | ${
          fmt(Math.max(...list.map((run) => run.peakRssMiB)), 1)
        } |`,
      );
    }
    console.log(
      `| 100,000 calls, collector hanging (off) | ${fmt(long.cpuMicrosPerCall, 1)} (${
        fmt(longOff.cpuMicrosPerCall, 1)
      }) | ${ratio(long.cpuMicrosPerCall, longOff.cpuMicrosPerCall)} | | ${fmt(long.peakRssMiB, 1)} (${
        fmt(longOff.peakRssMiB, 1)
      }) |`,
    );
  } finally {
    ok.close();
    hanging.close();
  }
}

// --- 8: the npm package on Node ---------------------------------------------------------------------

function packageBench(work: string): void {
  const node = IS_DENO || process.versions.bun ? "node" : process.execPath;
  const out = join(work, "npm");
  const built = spawnSync(node, ["--no-warnings", join(HERE, "build", "dist.mjs"), out], { encoding: "utf8" });
  if (built.status !== 0) throw new BenchError(`build/dist.mjs failed (it needs Node >= 22.18): ${built.stderr}`);
  const bin = join(out, "bin.js");
  const version = spawnSync(node, ["--version"], { encoding: "utf8" }).stdout.trim();
  timeCommand([node, bin, "--version"]); // the compile cache's first fill, as after an install
  const rounds = QUICK ? 5 : 15;
  const times: Record<string, number[]> = { bare: [], package: [], source: [], call: [], callSource: [], floor: [] };
  const tools = join(HERE, "testdata", "tools");
  for (let round = 0; round < rounds; round++) {
    times.bare.push(timeCommand([node, "-e", "0"]));
    times.package.push(timeCommand([node, bin, "--version"]));
    times.source.push(timeCommand([node, MCP, "--version"]));
    times.floor.push(timeCommand([node, "-e", "0"]) + timeCommand([node, "-e", "0"]));
    times.call.push(timeCommand([node, bin, "call", `${node} ${bin} serve ${tools}`, "add", "a=2", "b=3"]));
    times.callSource.push(timeCommand([node, MCP, "call", `${node} ${MCP} serve ${tools}`, "add", "a=2", "b=3"]));
  }
  const m = (name: string) => median(times[name]);
  console.log(`\n# The npm package on Node ${version} (${rounds} rounds, medians)\n`);
  console.log("| measure | ms | floor ms | ratio | target |");
  console.log("|---|---|---|---|---|");
  console.log(
    `| package \`mcp --version\` (node -e 0) | ${fmt(m("package"), 1)} | ${fmt(m("bare"), 1)} | ${
      ratio(m("package"), m("bare"))
    } | ≤ 1.5x |`,
  );
  console.log(
    `| \`node mcp.ts --version\`, before (node -e 0) | ${fmt(m("source"), 1)} | ${fmt(m("bare"), 1)} | ${
      ratio(m("source"), m("bare"))
    } | |`,
  );
  console.log(
    `| package one-shot \`call\` (two bare starts) | ${fmt(m("call"), 1)} | ${fmt(m("floor"), 1)} | ${
      ratio(m("call"), m("floor"))
    } | ≤ 3x |`,
  );
  console.log(
    `| \`node mcp.ts call\`, before (two bare starts) | ${fmt(m("callSource"), 1)} | ${fmt(m("floor"), 1)} | ${
      ratio(m("callSource"), m("floor"))
    } | |`,
  );
}

// --- 9: sessions in the per-user daemon -------------------------------------------------------------

function sessionBench(work: string): void {
  const state = join(work, "state");
  mkdirSync(state, { mode: 0o700 });
  const env = { ...process.env, MCP_TS_STATE_DIR: state };
  const echoDir = join(work, "session-echo");
  mkdirSync(echoDir, { recursive: true });
  writeFileSync(join(echoDir, "echo.ts"), readFileSync(join(HERE, "testdata/tools/echo.ts")));
  const server = [...RUNTIME, MCP, "serve", echoDir].join(" ");
  const run = (args: string[], input?: string) => timeCommand([...RUNTIME, MCP, ...args], { env, input });
  run(["connect", "bench", server]);
  try {
    const rounds = QUICK ? 5 : 15;
    const times: Record<string, number[]> = { version: [], call: [], direct: [], batch: [], batchDirect: [] };
    const lines = Array.from({ length: 1000 }, (_, i) => `{"tool":"echo","arguments":{"text":"${i}"}}\n`).join("");
    run(["call", "@bench", "echo", "text=warm"]);
    for (let round = 0; round < rounds; round++) {
      times.version.push(run(["--version"]));
      times.call.push(run(["call", "@bench", "echo", "text=x"]));
      times.direct.push(run(["call", server, "echo", "text=x"]));
      if (round < 5) {
        times.batch.push(run(["batch", "@bench"], lines));
        times.batchDirect.push(run(["batch", server], lines));
      }
    }
    const m = (name: string) => median(times[name]);
    console.log(
      `\n# Sessions in the per-user daemon (${RUNTIME_NAME} ${RUNTIME_VERSION}; ${rounds} rounds, medians)\n`,
    );
    console.log("| measure | ms | against, ms | ratio | target |");
    console.log("|---|---|---|---|---|");
    console.log(
      `| \`call @NAME echo\` (\`mcp.ts --version\`) | ${fmt(m("call"), 1)} | ${fmt(m("version"), 1)} | ${
        ratio(m("call"), m("version"))
      } | ≤ 1.3x |`,
    );
    console.log(
      `| \`call @NAME echo\` (the same \`call\` spawning the server) | ${fmt(m("call"), 1)} | ${
        fmt(m("direct"), 1)
      } | ${ratio(m("call"), m("direct"))} | |`,
    );
    console.log(
      `| \`batch @NAME\`, 1,000 calls: throughput (the batch spawning the server) | ${fmt(m("batch"), 1)} | ${
        fmt(m("batchDirect"), 1)
      } | ${ratio(m("batchDirect"), m("batch"))} | ≥ 0.8x |`,
    );
  } finally {
    spawnSync(RUNTIME[0], [...RUNTIME.slice(1), MCP, "daemon", "stop"], { env });
  }
}

// --- 10: replicas' state in Redis ------------------------------------------------------------------

/**
 * `serve --http --state redis://…` against the same server on memory (its default), to a real redis-server on
 * this machine (a port of its own, nothing saved): stateless calls touch no state, a legacy session's calls read
 * their session from the replica's cache.
 */
async function stateBench(work: string): Promise<void> {
  if (spawnSync("redis-server", ["--version"], { stdio: "ignore" }).error !== undefined) {
    console.log("\n## Replicas: not measured: no redis-server on PATH (apt-get install redis-server)");
    return;
  }
  const notes: string[] = [];
  const generator = loadGenerator(work, notes);
  const echoDir = join(work, "state-echo");
  mkdirSync(echoDir, { recursive: true });
  writeFileSync(join(echoDir, "echo.ts"), readFileSync(join(HERE, "testdata/tools/echo.ts")));
  // Its own port, nothing saved; ready when it says so (the port it took is the one asked).
  const redis = await startServer({
    name: "redis-server",
    argv: ["redis-server", "--port", "{port}", "--save", "", "--appendonly", "no"],
    port: freePort,
    ready: /Running mode=\S+, port=(\d+)[\s\S]*Ready to accept connections/,
  });
  const port = redis.port;
  try {
    const serve = [...RUNTIME, MCP, "serve", echoDir, "--http", "127.0.0.1:0"];
    const ready = /mcp: serving http:\/\/127\.0\.0\.1:(\d+)\//;
    const state = ["--state", `redis://127.0.0.1:${port}`];
    const targets: HttpTarget[] = [
      { name: "stateless, memory", argv: serve, ready },
      { name: "stateless, redis", argv: [...serve, ...state], ready },
      { name: "legacy session, memory", argv: serve, ready, legacy: true },
      { name: "legacy session, redis", argv: [...serve, ...state], ready, legacy: true },
    ];
    const runs = new Map<HttpTarget, HttpRun[]>(targets.map((target) => [target, []]));
    for (let round = 0; round < HTTP_ROUNDS; round++) {
      for (const target of targets) {
        const run = await driveHttp(target, generator);
        runs.get(target)!.push(run);
        console.error(
          `bench: replicas round ${round + 1}/${HTTP_ROUNDS}, ${target.name}: ${fmt(run.callsPerSecond)} calls/s`,
        );
        await sleep(200);
      }
    }
    const [statelessMemory, statelessRedis, legacyMemory, legacyRedis] = targets.map((target) => runs.get(target)!);
    const calls = (list: HttpRun[]) => list.map((run) => run.callsPerSecond);
    const cpu = (list: HttpRun[]) => list.map((run) => run.cpuMicrosPerCall);
    console.log(
      `\n## Replicas: --state redis:// (redis-server on this machine) against memory:, ${HTTP_ROUNDS} rounds\n`,
    );
    console.log("| measure | with redis | memory | ratio | target |");
    console.log("|---|---|---|---|---|");
    const row = (measure: string, a: number[], b: number[], target: string, digits = 0) =>
      console.log(
        `| ${measure} | ${fmt(median(a), digits)} | ${fmt(median(b), digits)} | ${
          ratio(median(a), median(b))
        } | ${target} |`,
      );
    row("stateless calls/s", calls(statelessRedis), calls(statelessMemory), "≥ 0.95x");
    row("legacy session calls/s", calls(legacyRedis), calls(legacyMemory), "≥ 0.6x");
    row("stateless server CPU µs/call", cpu(statelessRedis), cpu(statelessMemory), "", 1);
    row("legacy session server CPU µs/call", cpu(legacyRedis), cpu(legacyMemory), "", 1);
    for (const note of notes) console.log(`\n${note}`);
  } finally {
    await stopServer(redis);
  }
}

// --- main ---------------------------------------------------------------------------------------

const work = mkdtempSync(join(tmpdir(), "mcp-bench-"));
try {
  if (!["", "stdio", "http", "telemetry", "package", "session", "state"].includes(ONLY)) {
    throw new BenchError(`MCP_BENCH_ONLY must be stdio, http, telemetry, package, session or state, not "${ONLY}"`);
  }
  if (ONLY === "telemetry") await telemetryBench(work);
  else if (ONLY === "state") await stateBench(work);
  else if (ONLY === "package") packageBench(work);
  else if (ONLY === "session") sessionBench(work);
  else {
    if (ONLY !== "http") await stdioBench(work);
    if (ONLY !== "stdio") await httpBench(work, ONLY === "http");
    if (ONLY === "" && RUNTIME_NAME === "node") packageBench(work);
    if (ONLY === "") sessionBench(work);
    if (ONLY === "") await stateBench(work);
  }
} catch (error) {
  if (!(error instanceof BenchError)) throw error;
  console.error(`bench: ${error.message}`);
  process.exitCode = 1;
} finally {
  rmSync(work, { recursive: true, force: true });
}
