// Benchmarks of mcp.ts against their floors, measured in one run on one runtime.
//
//   deno task bench            (deno run -A mcp_bench.ts)
//   bun mcp_bench.ts
//   MCP_BENCH_PEERS="interop/sdk-echo-server.sh" deno task bench
//   MCP_BENCH_QUICK=1 deno task bench        fewer calls and rounds, for a smoke test
//
// 1. Server throughput: a driver pipelines N tools/call of `echo` (256 in flight, after a warm-up) over
//    stdio and checks every response; the same driver runs against a raw NDJSON echo loop (the floor).
// 2. Peers: each command in MCP_BENCH_PEERS (separated by ";") through the same driver.
// 3. One-shot latency: `mcp.ts call` against two bare start-ups of an empty file.
// 4. Big messages and memory: framing cost per byte; a 4 MiB − 1 round trip; peak RSS.
// 5. Start-up with 1 and 100 plugins: time to the first tools/list answer.
//
// The machine is noisy: every figure is a median of alternating rounds, and the ratios are what to read.

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { FrameReader } from "./mcp.ts";

const HERE = new URL(".", import.meta.url).pathname;
const MCP = join(HERE, "mcp.ts");
const IS_DENO = "Deno" in globalThis;
const RUNTIME_NAME = IS_DENO ? "deno" : process.versions.bun ? "bun" : "node";
const RUNTIME: string[] = IS_DENO ? [process.execPath, "run", "-A"] : [process.execPath];
const QUICK = process.env.MCP_BENCH_QUICK === "1";
const CALLS = QUICK ? 20_000 : 100_000;
const ROUNDS = QUICK ? 3 : 5;
const IN_FLIGHT = 256;
const CLOCK_TICKS = 100; // USER_HZ on Linux

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
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
async function drive(argv: string[], calls: number, name: string): Promise<Run> {
  const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"], cwd: HERE });
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

function timeCommand(argv: string[]): number {
  const started = performance.now();
  const result = spawnSync(argv[0], argv.slice(1), { cwd: HERE, stdio: ["ignore", "pipe", "pipe"] });
  if (result.status !== 0) throw new Error(`${argv.join(" ")} failed: ${result.stderr}`);
  return performance.now() - started;
}

const fmt = (value: number, digits = 0) => value.toLocaleString("en-US", { maximumFractionDigits: digits });
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;

// --- 1 and 2: throughput ----------------------------------------------------------------------

const work = mkdtempSync(join(tmpdir(), "mcp-bench-"));
try {
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
} catch (error) {
  if (!(error instanceof BenchError)) throw error;
  console.error(`bench: ${error.message}`);
  process.exitCode = 1;
} finally {
  rmSync(work, { recursive: true, force: true });
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
