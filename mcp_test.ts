// Tests of mcp.ts, in the order of its sections. Pure pieces are tested in
// process; everything about the server process is tested by spawning
// `mcp.ts serve` with the runtime running these tests and speaking raw NDJSON.
//
//   deno test -A mcp_test.ts   |   bun test ./mcp_test.ts   |   node --test mcp_test.ts

import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { createHash } from "node:crypto";
import * as nodeModule from "node:module";
import { Buffer } from "node:buffer";
import { createServer as createHttpServer, request as httpRequest } from "node:http";
import { createConnection, createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import process from "node:process";
import { PassThrough } from "node:stream";
import { setImmediate } from "node:timers";
import { after, before, describe as nodeDescribe, test } from "node:test";
import {
  argsFromPairs,
  CassettePlayer,
  claudeDesktopConfigPath,
  closestNames,
  connect,
  createHandler,
  daemonPaths,
  defineTool,
  DpopVerifier,
  editJsonMember,
  editTomlTable,
  encodeHeaderValue,
  ErrorCode,
  expandVariables,
  FrameReader,
  FrameWriter,
  gatewayName,
  httpFront,
  invalidHeaderAnnotation,
  isPluginFile,
  javaScriptOf,
  JsonRpcPeer,
  LATEST_PROTOCOL_VERSION,
  LineSplitter,
  loadTools,
  main,
  type McpHandler,
  McpServer,
  Metrics,
  NotFoundError,
  parseJsonText,
  parseStateUrl,
  parseTomlText,
  parseYamlSubset,
  randomWord,
  redact,
  renderCallResult,
  renderInfo,
  renderToolDetail,
  renderToolList,
  resolveServer,
  respCommand,
  RespReader,
  RpcError,
  serve,
  ServerError,
  skillFrontmatter,
  splitCommand,
  SseReader,
  StoreReplyError,
  Telemetry,
  telemetryFromEnv,
  TimeoutError,
  toCallToolResult,
  type ToolContext,
  traceContextOf,
  unsupportedRuntime,
  UsageError,
  validate,
  VERSION,
  visible,
  windowsCommand,
  zipArchive,
} from "./mcp.ts";

// --- Helpers every section's tests use -----------------------------------------------------------

const HERE = new URL(".", import.meta.url).pathname;
// install asks the npm registry whether our package is there: no test reaches the real one (a closed port: "cannot
// tell", said nothing of); the test of that line gives a registry of its own.
process.env.npm_config_registry = "http://127.0.0.1:9/";
/**
 * Each runtime's suite its own login callback port (see runCli), below Linux's ephemeral range (32768-60999): a port
 * in it can be a moment's local end of any test's outgoing connection (CI once found 33432 taken so).
 */
const CALLBACK_PORT = "Deno" in globalThis ? "23431" : process.versions.bun ? "23432" : "23433";
/** The file itself, for the tests that read it. */
const MCP_SOURCE = HERE + "mcp.ts";
/**
 * What spawned processes run. On Node, the same code with its types stripped once, by Node's own stripper: Node
 * strips mcp.ts at every start (~0.2 s a process, most of a spawned command's time here; a one-shot `call` 0.57 s →
 * 0.15 s). In-process tests import mcp.ts itself.
 */
const MCP = nodeStrippedCopy() ?? MCP_SOURCE;

function nodeStrippedCopy(): string | undefined {
  if ("Deno" in globalThis || process.versions.bun) return undefined;
  const strip = (nodeModule as { stripTypeScriptTypes?: (code: string) => string }).stripTypeScriptTypes;
  if (!strip) return undefined;
  // A folder of this run's own: two Node suites at once in one checkout (CI and a person) must not remove each
  // other's copy when the first ends. mcp.ts imports only node: modules, so the copy runs from anywhere.
  const folder = mkdtempSync(join(tmpdir(), "mcp-node-test-"));
  const copy = join(folder, "mcp.mjs");
  writeFileSync(copy, strip(readFileSync(MCP_SOURCE, "utf8")));
  process.once("exit", () => rmSync(folder, { recursive: true, force: true }));
  return copy;
}
// The runtime running the tests runs the server too.
const RUNTIME: string[] = "Deno" in globalThis ? [process.execPath, "run", "-A"] : [process.execPath];

// deno-lint-ignore no-explicit-any
type Message = Record<string, any>;

const INIT = {
  jsonrpc: "2.0",
  id: "init",
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "mcp_test", version: "1" } },
};

/** A `mcp.ts serve` child process spoken to in raw NDJSON. */
class ServerProcess {
  child: ChildProcess;
  messages: Message[] = [];
  stdoutText = "";
  stderr = "";
  exit: Promise<{ code: number | null; signal: string | null }>;
  #waiters: (() => void)[] = [];
  #buffer = "";

  /** With `raw`, stdout is only collected in stdoutText, not parsed as NDJSON. */
  constructor(args: string[], raw = false, command = "serve", env?: Record<string, string>) {
    this.child = spawn(RUNTIME[0], [...RUNTIME.slice(1), MCP, command, ...args], {
      cwd: HERE,
      env: env && { ...process.env, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child.stdout!.setEncoding("utf8");
    this.child.stdout!.on("data", (text: string) => {
      this.stdoutText += text;
      if (raw) return this.#wake();
      this.#buffer += text;
      let newline;
      while ((newline = this.#buffer.indexOf("\n")) >= 0) {
        const line = this.#buffer.slice(0, newline);
        this.#buffer = this.#buffer.slice(newline + 1);
        this.messages.push(JSON.parse(line)); // stdout must carry JSON only: a stray line throws here
      }
      this.#wake();
    });
    this.child.stderr!.setEncoding("utf8");
    this.child.stderr!.on("data", (text: string) => {
      this.stderr += text;
      this.#wake();
    });
    this.child.stdin!.on("error", () => {}); // the server may be gone before we stop writing
    this.exit = new Promise((resolve) => this.child.on("close", (code, signal) => resolve({ code, signal })));
  }

  #wake() {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }

  send(...messages: unknown[]) {
    this.child.stdin!.write(messages.map((m) => (typeof m === "string" ? m : JSON.stringify(m)) + "\n").join(""));
  }

  /** Waits until `predicate` holds, or fails after `ms`. */
  async until(predicate: () => boolean, what: string, ms = 10_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!predicate()) {
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `timed out waiting for ${what}; stdout: ${this.stdoutText.slice(-500)} stderr: ${this.stderr.slice(-500)}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** The response to request `id`, waiting for it. */
  async response(id: unknown, ms?: number): Promise<Message> {
    await this.until(() => this.messages.some((m) => m.id === id && !("method" in m)), `response ${id}`, ms);
    return this.messages.find((m) => m.id === id && !("method" in m))!;
  }

  /** Sends a request and waits for its response. */
  async request(id: unknown, method: string, params?: unknown): Promise<Message> {
    this.send(params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params });
    return await this.response(id);
  }

  async initialize(params: Message = {}): Promise<Message> {
    const response = await this.request("init", "initialize", { ...INIT.params, ...params });
    this.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    return response;
  }

  call(id: unknown, name: string, args?: unknown, meta?: unknown) {
    const params: Message = { name };
    if (args !== undefined) params.arguments = args;
    if (meta !== undefined) params._meta = meta;
    this.send({ jsonrpc: "2.0", id, method: "tools/call", params });
  }

  /** Closes stdin and waits for the exit. */
  async end() {
    this.child.stdin!.end();
    return await this.exit;
  }

  kill() {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
  }
}

/** Runs `body` with a fresh server, killing it whatever happens. */
async function withServer(args: string[], body: (server: ServerProcess) => Promise<void>, raw = false) {
  const server = new ServerProcess(args, raw);
  try {
    await body(server);
  } finally {
    server.kill();
    await server.exit;
  }
}

function text(result: Message): string {
  return result.content.map((item: Message) => item.text).join("");
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Reads `read` until `done` holds of what it gave, and gives that (what comes on its own time: a task's status, a
 * process's end). Its 20 s are a deadline for a failure only, far over any wait here: no test measures with it.
 */
async function pollUntil<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (let wait = 5;; wait = Math.min(wait * 2, 100)) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await sleep(wait);
  }
}

/** Resolves once `done()` holds, checked on each chunk `child` prints and at its end; fails after `ms`. */
function whenPrinted(child: ChildProcess, done: () => boolean, what: string, ms = 15_000): Promise<void> {
  return within(
    new Promise<void>((resolve, reject) => {
      const check = () => done() && (off(), resolve());
      const ended = () => (off(), done() ? resolve() : reject(new Error(`${what}: the process ended first`)));
      const off = () => {
        child.stdout?.off("data", check);
        child.stderr?.off("data", check);
        child.off("close", ended);
      };
      child.stdout?.on("data", check);
      child.stderr?.on("data", check);
      child.on("close", ended);
      check();
    }),
    what,
    ms,
  );
}

/** `promise`, or a failure naming `what` after `ms`: a deadline for a failure only (its timer cleared either way). */
async function within<T>(promise: Promise<T>, what: string, ms = 15_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing in ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

// Peak resident memory of a process, in bytes (Linux).
function peakRss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

// --- Helpers: 3. Framing -------------------------------------------------------------------------

function frames(chunks: (string | Uint8Array)[], maxBytes = 100) {
  const messages: string[] = [];
  let oversize = 0;
  let framing = "";
  const reader = new FrameReader({
    message: (text) => messages.push(text),
    oversize: () => oversize++,
    framing: (kind) => framing = kind,
  }, maxBytes);
  for (const chunk of chunks) reader.push(typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk);
  reader.end();
  return { messages, oversize, framing };
}

const NEWLINE_BYTE = 0x0a;

// --- Helpers: 7. and 10. the server over Streamable HTTP -----------------------------------------

const URL_MCP = "http://127.0.0.1:8080/mcp";
const JSON_HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };

/**
 * A 2026-07-28 POST with its mirror headers; `headers` adds to or overrides them (null removes one). To `url`
 * (default a handler's in-process URL): fetch takes it as it is.
 */
function modernPost(
  method: string,
  params: Message = {},
  headers: Record<string, string | null> = {},
  id: unknown = 1,
  url = URL_MCP,
) {
  const body = { jsonrpc: "2.0", id, method, params: modern(params) };
  const all: Record<string, string | null> = {
    ...JSON_HEADERS,
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": method,
    ...(params.name !== undefined ? { "mcp-name": String(params.name) } : {}),
    ...(params.uri !== undefined ? { "mcp-name": String(params.uri) } : {}),
    ...headers,
  };
  const sent = Object.fromEntries(Object.entries(all).filter(([, value]) => value !== null)) as Record<string, string>;
  return new Request(url, { method: "POST", headers: sent, body: JSON.stringify(body) });
}

function legacyPost(message: Message, headers: Record<string, string> = {}) {
  return new Request(URL_MCP, {
    method: "POST",
    headers: { ...JSON_HEADERS, ...headers },
    body: JSON.stringify(message),
  });
}

/**
 * A 2026-07-28 POST from a client that declares the tasks extension (and `capabilities` besides), with Mcp-Name
 * when given: a tools/call (the tool's name) or a tasks/* request (the task id).
 */
function taskPost(method: string, params: Message, name?: string, url = URL_MCP, capabilities: Message = {}) {
  return new Request(url, {
    method: "POST",
    headers: {
      ...JSON_HEADERS,
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": method,
      ...(name === undefined ? {} : { "mcp-name": name }),
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method,
      params: {
        ...params,
        _meta: {
          "io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {
            ...capabilities,
            extensions: { "io.modelcontextprotocol/tasks": {} },
          },
        },
      },
    }),
  });
}

/** The JSON-RPC messages of an SSE body, read until it ends or `count` arrived. */
async function sseMessages(response: Response, count = Infinity): Promise<Message[]> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  const messages: Message[] = [];
  while (messages.length < count) {
    const { done, value } = await reader.read();
    if (done) break;
    text += value;
    let end;
    while ((end = text.indexOf("\n\n")) >= 0) {
      const data = text.slice(0, end).split("\n").filter((line) => line.startsWith("data: ")).map((line) =>
        line.slice(6)
      );
      text = text.slice(end + 2);
      if (data.length && data.join("") !== "") messages.push(JSON.parse(data.join("\n")));
    }
  }
  void reader.cancel().catch(() => {});
  return messages;
}

/** The JSON-RPC answer of a response, whether a JSON body or the last event of an SSE stream. */
async function rpcAnswer(response: Response): Promise<Message> {
  if (response.headers.get("content-type") !== "text/event-stream") return await response.json();
  return (await sseMessages(response)).filter((m) => !("method" in m)).at(-1)!;
}

const HTTP_TOOLS = [
  {
    name: "add",
    inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } },
    run: ({ a, b }: Message) => a + b,
  },
  {
    name: "regional",
    inputSchema: {
      type: "object",
      properties: { region: { type: "string", "x-mcp-header": "Region" }, n: { type: "integer", "x-mcp-header": "N" } },
    },
    run: ({ region }: Message) => `in ${region}`,
  },
  {
    name: "slow",
    run: async (_: unknown, ctx: ToolContext) => {
      ctx.progress(1, 2);
      await new Promise((resolve, reject) => {
        const timer = setTimeout(resolve, 100);
        ctx.signal.addEventListener("abort", () => (clearTimeout(timer), reject(ctx.signal.reason)));
      });
      return "slow done";
    },
  },
  {
    name: "ask",
    run: async (_: unknown, ctx: ToolContext) =>
      `hi ${((await ctx.elicit({ message: "?" }, { key: "who" })).content as Message).name}`,
  },
];

// --- Helpers: 11.-14. Server configs, client transports, MCP client ------------------------------

const quote = (word: string) => `'${word.replaceAll("'", "'\\''")}'`;
/** The fake server as a <server> command line. */
const FAKE = [...RUNTIME, HERE + "testdata/fake_server.ts"].map(quote).join(" ");
/** Our own server as a <server> command line. */
const SERVE = [...RUNTIME, MCP, "serve", HERE + "testdata/tools"].map(quote).join(" ");

// --- Helpers: Hostile peers: the fakes that attack the client, terminal sinks for main() ---------

const HOSTILE = [...RUNTIME, HERE + "testdata/hostile_server.ts"].map(quote).join(" ");

/** An in-process sink that says it is (or is not) a terminal and keeps what is written. */
function sink(terminal: boolean) {
  const sink = {
    text: "",
    isTTY: terminal,
    columns: 200,
    write(chunk: string | Uint8Array, callback?: () => void) {
      sink.text += typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk);
      callback?.();
      return true;
    },
  };
  return sink;
}

/** Runs `main(argv)` in process with stdout and stderr that are terminals (or not). */
const mainWith = (argv: string[], terminal: boolean) => runInProcess(argv, "", { terminal });

/** Starts testdata/hostile_http_server.ts in `mode`; the URLs it prints and its /_log. */
async function hostileHttp(mode: string, env: Record<string, string> = {}) {
  const child = spawn(RUNTIME[0], [...RUNTIME.slice(1), HERE + "testdata/hostile_http_server.ts"], {
    env: { ...process.env, HOSTILE_MODE: mode, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stderr!.setEncoding("utf8").on("data", () => {});
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout!.setEncoding("utf8").on("data", (text: string) => {
      output += text;
      if (output.includes("\n")) resolve(output.split("\n")[0]);
    });
    child.on("exit", () => reject(new Error(`hostile_http_server ${mode} exited: ${output}`)));
  });
  const [url, other] = [...line.matchAll(/http:\S+/g)].map((match) => match[0]);
  return {
    url,
    other,
    log: async (): Promise<Message[]> => await (await fetch(new URL("/_log", url))).json(),
    close: () => void child.kill("SIGTERM"),
  };
}

interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  pid: number;
}

/** Runs `mcp.ts ARGS` to the end; kills it after `ms`. */
// Client commands run in this process through main(argv, io) (a runtime's start is the suite's main cost: ~0.3 s
// of CPU on Node); what needs a process of its own (another cwd or environment, its pid, signals) is spawned.
const IN_PROCESS_COMMANDS = new Set([
  "call",
  "list",
  "info",
  "ping",
  "batch",
  "resources",
  "read",
  "prompts",
  "prompt",
]);

function runCli(
  args: string[],
  options: {
    stdin?: string;
    cwd?: string;
    env?: Record<string, string>;
    ms?: number;
    onStart?: (pid: number) => void;
    /** The stderr so far, on each chunk of it (a spawned CLI only): await a line instead of sleeping. */
    onStderr?: (text: string, pid: number) => void;
    /** A process of its own even where main() in process would do. */
    spawn?: boolean;
    /** Each wait of a stdio server's stop ladder (in process only; the CLI's own is 2 s). */
    stopStepMs?: number;
  } = {},
): Promise<CliRun> {
  const own = options.spawn || options.cwd || options.env || options.onStart || options.onStderr || options.ms ||
    process.cwd() + "/" !== HERE; // relative paths in ARGS name files of the checkout
  if (!own && IN_PROCESS_COMMANDS.has(args[0])) {
    return runInProcess(args, options.stdin ?? "", { stopStepMs: options.stopStepMs });
  }
  assert.equal(options.stopStepMs, undefined, "stopStepMs is injected in process only");
  // CI runs the three runtimes' suites at once: each takes its own login callback port, or two logins would race
  // for the default one (a port probed free can be taken before it is listened on).
  if (args[0] === "login" && !args.includes("--callback-port")) args = [...args, "--callback-port", CALLBACK_PORT];
  const child = spawn(RUNTIME[0], [...RUNTIME.slice(1), MCP, ...args], {
    cwd: options.cwd ?? HERE,
    env: { ...process.env, ...options.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => stdout += text);
  child.stderr!.setEncoding("utf8").on("data", (text: string) => {
    stderr += text;
    options.onStderr?.(stderr, child.pid!);
  });
  child.stdin!.on("error", () => {});
  child.stdin!.end(options.stdin ?? "");
  options.onStart?.(child.pid!);
  const timer = setTimeout(() => child.kill("SIGKILL"), options.ms ?? 20_000);
  return new Promise((resolve) =>
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, pid: child.pid! });
    })
  );
}

async function runInProcess(
  args: string[],
  stdin: string,
  { terminal = false, stopStepMs }: { terminal?: boolean; stopStepMs?: number } = {},
): Promise<CliRun> {
  const stdout = sink(terminal);
  const stderr = sink(terminal);
  const code = await main(args, {
    stdin: new PassThrough().end(stdin) as unknown as never,
    stdout,
    stderr,
    stopStepMs,
  });
  return { code, stdout: stdout.text, stderr: stderr.text, pid: process.pid };
}

/** A wait a command made (CliIo.wait): what it was for, how long it would have been, how much stderr came before. */
interface SeenWait {
  why: string;
  ms: number;
  after: number;
}

/**
 * Runs `main(argv)` in process with its waits seen (the probe's silence, each step of a stop ladder) and ended by
 * `settle` (default: on the next turn of the event loop), so a test asserts what was waited for and in what order,
 * never how long a step took. `before(pattern, wait)`: the stderr text matching `pattern` came before that wait.
 */
async function runWatched(
  args: string[],
  options: { settle?: (wait: SeenWait) => Promise<unknown> } = {},
) {
  const stdout = sink(false);
  const stderr = sink(false);
  const waits: SeenWait[] = [];
  const settle = options.settle ?? (() => new Promise((resolve) => setImmediate(resolve)));
  const code = await main(args, {
    stdin: new PassThrough().end("") as unknown as never,
    stdout,
    stderr,
    wait: (ms, why) => {
      const wait = { why, ms, after: stderr.text.length };
      waits.push(wait);
      return settle(wait);
    },
  });
  const offset = (pattern: RegExp): number => {
    const match = pattern.exec(stderr.text);
    assert.ok(match, `${pattern} in ${stderr.text}`);
    return match.index;
  };
  return { code, stdout: stdout.text, stderr: stderr.text, waits, offset };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface DenoForTests {
  Command: new (command: string, options: object) => {
    output(): Promise<{ code: number; stdout: Uint8Array; stderr: Uint8Array }>;
  };
}

const TOOL_SCHEMA_FOR_PAIRS = {
  type: "object",
  properties: {
    zip: { type: "string" },
    n: { type: "integer" },
    on: { type: "boolean" },
    list: { type: "array" },
    obj: { type: "object" },
  },
};

// --- Helpers: 12. and 14. the client over HTTP ---------------------------------------------------

interface FakeHttp {
  url: string;
  /** Every request the fake received on its MCP endpoint (and other paths), in order. */
  log(): Promise<{ method: string; path: string; headers: Record<string, string>; body: Message; time: number }[]>;
  stderr(): string;
  /** Resolves once `done` holds of its stderr, checked as it prints. */
  untilStderr(done: (stderr: string) => boolean, what: string): Promise<void>;
  close(): void;
}

/** Starts testdata/fake_http_server.ts with FAKE_MODE=`mode`; resolves once it listens. */
async function fakeHttp(mode: string, env: Record<string, string> = {}): Promise<FakeHttp> {
  const child = spawn(RUNTIME[0], [...RUNTIME.slice(1), HERE + "testdata/fake_http_server.ts"], {
    env: { ...process.env, FAKE_MODE: mode, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (text: string) => stderr += text);
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.setEncoding("utf8").on("data", (text: string) => {
      out += text;
      const match = /listening (\S+)/.exec(out);
      if (match) resolve(match[1]);
    });
    child.on("exit", () => reject(new Error(`the fake HTTP server exited: ${stderr}`)));
  });
  return {
    url,
    log: async () => await (await fetch(url.replace(/\/mcp$/, "/_log"))).json(),
    stderr: () => stderr,
    untilStderr: (done, what) => whenPrinted(child, () => done(stderr), what),
    close: () => void child.kill("SIGTERM"),
  };
}

/** Runs `body` with a fresh temporary directory, removed after it whatever happens. */
async function withTempDir<T>(prefix: string, body: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  try {
    return await body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function withFakeHttp(mode: string, body: (fake: FakeHttp) => Promise<void>, env?: Record<string, string>) {
  const fake = await fakeHttp(mode, env);
  try {
    await body(fake);
  } finally {
    fake.close();
  }
}

/**
 * Whether a process has ended (a zombie waiting for init to reap it counts as ended), waiting up to `ms`: a
 * deadline for a failure only (a busy machine may take seconds to end a process), never the time the test checks.
 */
async function isGone(pid: number, ms = 15_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (!isAlive(pid)) return true;
    try {
      if (/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"))) return true;
    } catch {
      // no /proc here: wait and ask again
    }
    if (Date.now() > deadline) return false;
    // Polled: a process that is not our child (a grandchild, a tool's process group) has no exit event to await.
    await sleep(50);
  }
}

// --- Helpers: 10e. and 13. OAuth: the protected server and the client that logs in ---------------

/** An access token from testdata/fake_auth_server.ts at `asUrl`, with these claims. */
async function mintToken(asUrl: string, claims: Message): Promise<string> {
  const response = await fetch(asUrl + "/_mint", { method: "POST", body: JSON.stringify(claims) });
  return (await response.json()).access_token;
}

interface Started {
  url: string;
  pid: number;
  log(): Promise<Message[]>;
  close(): void;
  /** Resolves once its stdout and stderr so far match `pattern` (its text then). */
  printed(pattern: RegExp): Promise<string>;
  /** Resolves on its next output (or its exit), or after `ms`. */
  next(ms: number): Promise<void>;
  /** How it ended. */
  exited: Promise<{ code: number | null; signal: string | null }>;
}

/** Starts a process that prints its URL (`pattern`'s first group) on stdout or stderr; resolves once it does. */
async function startListening(args: string[], pattern: RegExp, env: Record<string, string> = {}): Promise<Started> {
  const child = spawn(RUNTIME[0], [...RUNTIME.slice(1), ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  let waiters: (() => void)[] = [];
  const heard = () => {
    const woken = waiters;
    waiters = [];
    for (const wake of woken) wake();
  };
  const take = (text: string) => {
    output += text;
    heard();
  };
  child.stdout!.setEncoding("utf8").on("data", take);
  child.stderr!.setEncoding("utf8").on("data", take);
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.on("close", (code, signal) => {
      resolve({ code, signal });
      heard();
    })
  );
  const printed = async (wanted: RegExp) => {
    while (!wanted.test(output)) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${args.join(" ")} exited: ${output}`);
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
    return output;
  };
  const next = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      waiters.push(() => (clearTimeout(timer), resolve()));
    });
  const url = pattern.exec(await printed(pattern))![1];
  return {
    url,
    pid: child.pid!,
    log: async () => await (await fetch(new URL("/_log", url))).json(),
    close: () => void child.kill("SIGTERM"),
    printed,
    next,
    exited,
  };
}

/** The fake authorization server, and mcp.ts serve --http protected by it (testdata/auth: the whoami tool). */
async function withProtectedServer(
  body: (as: Started, server: Started, store: string) => Promise<void>,
  options: { asEnv?: Record<string, string>; serveArgs?: string[] } = {},
): Promise<void> {
  const home = mkdtempSync(join(tmpdir(), "mcp-oauth-"));
  const as = await startListening([HERE + "testdata/fake_auth_server.ts"], /listening (\S+)/, options.asEnv);
  let server: Started | undefined;
  try {
    server = await startListening(
      [MCP, "serve", HERE + "testdata/auth", "--http", "0", "--auth-issuer", as.url, ...(options.serveArgs ?? [])],
      /serving (\S+)/,
    );
    await body(as, server, join(home, "store", "credentials.json"));
  } finally {
    server?.close();
    as.close();
    rmSync(home, { recursive: true, force: true });
  }
}

const BROWSER = [...RUNTIME, HERE + "testdata/browser.ts"].map(quote).join(" ");

// --- Helpers: 7. MCP server: resources, prompts, completion --------------------------------------

/** An in-process server with a message log; `ask` sends a request and returns its answer. */
/**
 * An McpServer in process and what it sent; `ask` sends a request and waits for its answer: in the legacy era
 * after initialize, or (`modern`) as a 2026-07-28 request with the envelope and `meta` added to it.
 */
function inProcess(options: ConstructorParameters<typeof McpServer>[0], era: "legacy" | "modern" = "legacy") {
  const { sent, record, until } = recorder();
  const server = new McpServer(options, record);
  let nextId = 0;
  const answer = (id: unknown) => sent.find((m) => m.id === id && !("method" in m));
  const ask = async (method: string, params: unknown = {}, meta: Message = {}) => {
    const id = era === "modern" ? ++nextId : `q${++nextId}`;
    const sentParams = era === "modern" ? modern(params as Message, meta) : params;
    server.receive(JSON.stringify({ jsonrpc: "2.0", id, method, params: sentParams }));
    return await until(() => answer(id), `the answer to ${method}`);
  };
  if (era === "legacy") server.receive(JSON.stringify(INIT));
  return { server, sent, ask, until };
}

/**
 * What an in-process peer sends (`record` is its send callback), and `until`: waits for `found` to return a value,
 * checked again on each message sent (or `wake()`), not polled; fails after `ms` (a deadline for a failure only).
 */
function recorder() {
  const sent: Message[] = [];
  let waiters: (() => void)[] = [];
  const wake = () => {
    const woken = waiters;
    waiters = [];
    for (const resolve of woken) resolve();
  };
  const record = (line: string) => {
    sent.push(JSON.parse(line));
    wake();
  };
  const until = async <T>(found: () => T | undefined | null | false, what: string, ms = 15_000): Promise<T> => {
    const deadline = Date.now() + ms;
    for (;;) {
      const value = found();
      if (value) return value;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; sent: ${JSON.stringify(sent).slice(-500)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        waiters.push(() => (clearTimeout(timer), resolve()));
      });
    }
  };
  return { sent, record, until, wake };
}

/** The 2026-07-28 envelope for a request's params. */
function modern(params: Message = {}, meta: Message = {}): Message {
  return {
    ...params,
    _meta: {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": { elicitation: {}, sampling: {}, roots: {} },
      ...meta,
    },
  };
}

/** An in-process server spoken to only in the 2026-07-28 era (no initialize). */
/** {@linkcode inProcess} in the 2026-07-28 era. */
const stateless = (options: ConstructorParameters<typeof McpServer>[0]) => inProcess(options, "modern");

const SERVER_INFO = { "io.modelcontextprotocol/serverInfo": { name: "mcp.ts", version: VERSION } };

// === The tests, in the order of mcp.ts's sections (each describe names its section) =================

/**
 * CI runs each runtime's suite as two halves at once (MCP_TEST_PART=1: sections 0-12 and 17; 2: 13-16), about
 * equally long; without it, the whole file. What a test holds alone stays in one half: every login (its fixed callback
 * port) is in 13.
 */
const TEST_PART = process.env.MCP_TEST_PART;
if (TEST_PART !== undefined && TEST_PART !== "1" && TEST_PART !== "2") {
  throw new Error(`MCP_TEST_PART is 1 or 2 (or unset: every test), not "${TEST_PART}"`);
}
const describe = ((name: string, ...rest: unknown[]) => {
  const section = parseInt(name, 10);
  const part = section >= 13 && section < 17 ? "2" : "1";
  if (TEST_PART === undefined || part === TEST_PART) (nodeDescribe as (...args: unknown[]) => void)(name, ...rest);
}) as typeof nodeDescribe;

/** A comparison in a test of a duration measured by the clock, found by the scan below. @internal */
interface TimedComparison {
  test: string;
  line: number;
  text: string;
}

// Reading the clock: a duration starts or ends with one of these.
const CLOCK = /\bDate\.now\(\)|\bperformance\.now\(\)|\bprocess\.hrtime\b/;

/**
 * Every comparison (<, >, <=, >=) in a test's body of a clock reading, or of a value made from one (a name or a
 * property assigned from it, followed through later assignments), with anything: what a busy machine can fail.
 */
function timedComparisons(source: string): TimedComparison[] {
  const found: TimedComparison[] = [];
  for (const start of source.matchAll(/^( *)test\(\s*"((?:[^"\\]|\\.)*)"/gm)) {
    if (start[2] === SCAN_SELF_TEST) continue; // its cases are timed on purpose
    const from = start.index!;
    const end = source.indexOf(`\n${start[1]}});`, from);
    const body = source.slice(from, end < 0 ? source.length : end);
    const timed = new Set<string>();
    const taints = (text: string) =>
      CLOCK.test(text) || [...timed].some((name) => new RegExp(`(?<![\\w$])${name}(?![\\w$])`).test(text));
    // A value is its line, or a function's whole body where the line opens one.
    const assignments = [
      ...body.matchAll(/^( *).*?(?:\b(?:const|let)\s+|[{,]\s*)([\w$]+)\s*(?:=(?![=>])|:)([^;\n]*)/gm),
    ]
      .map(([, , name, value]): [string, string] => [name, value]);
    for (const opened of body.matchAll(/^( *)(?:const|let)\s+([\w$]+)\s*=.*(?:=>|\{)\s*$/gm)) {
      const close = body.indexOf(`\n${opened[1]}}`, opened.index!);
      assignments.push([opened[2], body.slice(opened.index!, close < 0 ? undefined : close)]);
    }
    for (let grew = true; grew;) {
      grew = false;
      for (const [name, value] of assignments) {
        if (!timed.has(name) && taints(value)) grew = timed.add(name) !== undefined;
      }
    }
    // A destructured { name } of a timed value is timed too.
    for (const [, names, value] of body.matchAll(/\b(?:const|let)\s+\{([^}]*)\}\s*=([^;\n]*)/g)) {
      if (taints(value)) { for (const name of names.split(",")) timed.add(name.trim().split(/[:\s]/)[0]); }
    }
    body.split("\n").forEach((text, offset) => {
      if (!/(?<![=<>])(?:<=?|>=?)(?![=>&])/.test(text.replace(/=>/g, "")) || !taints(text)) return;
      if (/^\s*(?:\/\/|\*)/.test(text) || /<\w+(?:\[\])?>|<[\w"]+\s*[|,]/.test(text)) return; // comments, type arguments
      found.push({ test: start[2], line: source.slice(0, from).split("\n").length + offset, text: text.trim() });
    });
  }
  return found;
}

const SCAN_SELF_TEST =
  "the scan finds a duration compared directly, through a name, through a property and a destructuring";

/**
 * The only tests allowed to compare a measured duration with a number, each bound at least 10x what the step takes
 * on a quiet machine: a busy machine slows a step a few times over, not ten. Everything else asserts what happened,
 * in what order (frames, waits seen through CliIo.wait, counts, exit codes), never how long it took.
 */
const TIMED_BOUNDS: readonly { test: string; boundMs: number; typicalMs: number; why: string }[] = [
  {
    test:
      "linear-time parsing: every regex literal in mcp.ts, on 100,000 repeats of each character it names, runs in linear time",
    boundMs: 250,
    typicalMs: 5,
    why: "a linear regex reads 100 KB in about a millisecond; a backtracking one takes seconds (three tries)",
  },
  {
    test:
      "linear-time parsing: a closest-match search compares bounded text (a 4 MiB name, candidates, a replayed request)",
    boundMs: 2_000,
    typicalMs: 20,
    why: "at least 100x the JSON parse of the same text, measured beside it; an unbounded edit distance takes hours",
  },
  {
    test: "notifications/cancelled aborts ctx.signal and the call gets no response",
    boundMs: 20_000,
    typicalMs: 300,
    why: "EOF ends the server at once; still running the cancelled call, it would take its minute",
  },
  {
    test: "--timeout aborts the call's signal and answers isError 'timed out'",
    boundMs: 20_000,
    typicalMs: 300,
    why: "the 200 ms --timeout answers; without it the call takes its minute",
  },
  {
    test: "requestState is bound to the arguments, the principal and 10 minutes; any other use is -32602",
    boundMs: 600_000,
    typicalMs: 0,
    why: "an expiry no later than 10 minutes from now: a slow machine only brings the two closer",
  },
  {
    test: "an executable as a task: @progress sets its statusMessage, tasks/cancel and stdin's end stop its group",
    boundMs: 20_000,
    typicalMs: 500,
    why: "EOF stops the server without waiting for the task's 30 s",
  },
  {
    test: "SIGINT ends a server whose call outlives the grace period",
    boundMs: 15_000,
    typicalMs: 1_500,
    why: "the 2 s grace, then the end; without the bound the call's 30 s",
  },
  {
    test: "an over-long answer fails the request at once naming --max-line-bytes: stdio line, SSE event",
    boundMs: 25_000,
    typicalMs: 1_000,
    why: "the cap fails the request at once; without it the 60 s request timeout",
  },
  {
    test: "login: discovery, registration, PKCE through the browser; the token kept 0600 and used after",
    boundMs: 3_600_000,
    typicalMs: 1_000,
    why: "the kept token's expiry is an hour away: the run takes seconds",
  },
  {
    test: "--detach prints the task's id at once; task get, result and cancel find it by id; unknown ids are exit 2",
    boundMs: 20_000,
    typicalMs: 500,
    why: "--detach returns at once; waiting for the task would take its minute",
  },
];

describe("0. The suite tells the truth on any machine", () => {
  const suite = readFileSync(HERE + "mcp_test.ts", "utf8");

  test("no test compares a measured duration with a number, outside TIMED_BOUNDS (each bound 10x its step)", () => {
    const found = timedComparisons(suite);
    const listed = new Set(TIMED_BOUNDS.map((bound) => bound.test));
    const outside = found.filter((comparison) => !listed.has(comparison.test));
    assert.deepEqual(outside.map(({ line, text }) => `line ${line}: ${text}`), [], "durations compared with numbers");
    for (const bound of TIMED_BOUNDS) {
      assert.ok(bound.boundMs >= 10 * bound.typicalMs, `${bound.test}: ${bound.boundMs} ms is not 10x its step`);
      assert.ok(found.some((comparison) => comparison.test === bound.test), `no longer timed: ${bound.test}`);
    }
  });

  test(SCAN_SELF_TEST, () => {
    const cases = [
      'test("direct", () => {\n  const started = Date.now();\n  assert.ok(Date.now() - started < 5_000);\n});',
      'test("named", () => {\n  const t0 = performance.now();\n  const took = performance.now() - t0;\n' +
      "  const margin = took * 2;\n  assert.ok(margin <= 100);\n});",
      'test("property", async () => {\n  const timed = async () => ({ ms: Date.now() });\n' +
      "  const run = await timed();\n  assert.ok(run.ms > 3);\n});",
      'test("destructured", () => {\n  const { ms } = { ms: Date.now() };\n  assert.ok(ms >= 950);\n});',
    ];
    for (const text of cases) assert.equal(timedComparisons(text).length, 1, text);
    const untimed = 'test("order", () => {\n  const waits = [1];\n  assert.ok(waits.length > 0);\n  f((x) => x);\n});';
    assert.deepEqual(timedComparisons(untimed), []);
  });
});

describe("0. The file's map", () => {
  test("the header's contents list every section in order, and every sub-section under its section", () => {
    const source = readFileSync(MCP_SOURCE, "utf8");
    const header = source.slice(0, source.indexOf("// === 1."));
    const contents = header.slice(header.indexOf("// Contents"));
    const listed = [...contents.matchAll(/^\/\/\s+(\d+)\. (\S.*?)(?:\s{2,}|$)/gm)].map(([, n, title]) =>
      `${n}. ${title}`
    );
    const banners = [...source.matchAll(/^\/\/ === (\d+)\. (.+?) =+$/gm)].map(([, n, title]) => `${n}. ${title}`);
    assert.deepEqual(listed, banners, "the contents name the sections of the banners, in their order");
    for (const [, section, letter] of source.matchAll(/^\/\/ --- (\d+)([a-z])\. /gm)) {
      // A sub-section is named on its section's lines of the contents (its first line and those indented below it).
      const start = contents.search(new RegExp(`^//\\s+${section}\\. `, "m"));
      const rest = contents.slice(start).split("\n");
      const lines = [
        rest[0],
        ...rest.slice(1).filter((_, i, all) => all.slice(0, i + 1).every((line) => /^\/\/\s{20,}/.test(line))),
      ];
      assert.match(lines.join(" "), new RegExp(`\\b${section}${letter}\\b`), `${section}${letter} in the contents`);
    }
    const numbers = banners.map((banner) => Number(banner.split(".")[0]));
    assert.deepEqual(numbers, numbers.map((_, i) => i + 1), "sections numbered 1, 2, 3, … with none missing");
  });

  test("the sections above Runtime are the protocol alone: no process, Deno, Bun or node: built-in", () => {
    const source = readFileSync(MCP_SOURCE, "utf8");
    const pure = source.slice(source.indexOf("// === 1. "), source.search(/^\/\/ === \d+\. Runtime /m));
    assert.ok(pure.includes("class McpServer"), "the MCP server is above the line");
    const code = pure.split("\n").filter((line) =>
      !/^\s*(\/\/|\*|\/\*)/.test(line) && !line.includes("// layering-ok:")
    )
      .map((line) => line.replace(/\/\/ .*$/, "").replace(/"(?:[^"\\]|\\.)*"|`(?:[^`\\]|\\.)*`/g, '""'));
    const runtime = /\b(process|Deno|Bun|deno|bun|proc|sys|files)\b(?=\s*[.(])|\bimport\s*\(|from\s+""/;
    const uses = code.filter((line) => runtime.test(line));
    assert.deepEqual(uses, [], "runtime uses above the line (mark a deliberate one // layering-ok: <why>)");
  });

  test("between Runtime and the CLI, a runtime's API is used only where a comment says why (layering-ok)", () => {
    const source = readFileSync(MCP_SOURCE, "utf8");
    const from = source.search(/^\/\/ === \d+\. Plugins /m);
    const lines = source.slice(from, source.search(/^\/\/ === \d+\. CLI /m)).split("\n");
    const runtime = /\b(process|Deno|Bun|deno|bun|proc)\b(?=\s*[.(])|\bimport\s*\(\s*"node:/;
    const unmarked = lines.filter((line, i) =>
      !/^\s*(\/\/|\*|\/\*)/.test(line) && runtime.test(line.replace(/\/\/ .*$/, "")) &&
      !line.includes("// layering-ok:") && !lines[i - 1]?.includes("// layering-ok:")
    );
    assert.deepEqual(unmarked.map((line) => line.trim()), [], "move it into Runtime, or say why it is here");
  });

  test("the test file's describe blocks name sections of mcp.ts, in the file's order", () => {
    const banners = new Map(
      [...readFileSync(MCP_SOURCE, "utf8").matchAll(/^\/\/ (?:===|---) (\d+[a-z]?)\. (.+?)(?: =+| ---)?$/gm)]
        .map(([, number, title]) => [number, title]),
    );
    const blocks = [...readFileSync(HERE + "mcp_test.ts", "utf8").matchAll(/^describe\("(\d+)([a-z]?)\. ([^"]+)"/gm)];
    let last = [0, ""] as [number, string];
    for (const [, number, letter, title] of blocks) {
      if (number === "0") continue; // the file's map: the header
      const banner = banners.get(number + letter);
      assert.ok(banner, `describe "${number}${letter}. ${title}" names no section`);
      const head = title.split(/:| \(/)[0];
      assert.ok(
        banner.startsWith(head) || head.startsWith(banner),
        `"${title}" is not section ${number}${letter}, "${banner}"`,
      );
      const at = [Number(number), letter] as [number, string];
      assert.ok(at[0] > last[0] || (at[0] === last[0] && at[1] >= last[1]), `"${title}" comes before ${last.join("")}`);
      last = at;
    }
  });

  test("every login the suite runs is in section 13, so in one of CI's halves: its callback port is the runtime's own", () => {
    let section = "";
    let logins = 0;
    for (const line of readFileSync(HERE + "mcp_test.ts", "utf8").split("\n")) {
      section = /^describe\("(\d+)/.exec(line)?.[1] ?? section;
      if (!/\["login",/.test(line) || line.includes('/\\["login",/')) continue;
      logins++;
      assert.equal(section, "13", `a login in section ${section}: ${line.trim()}`);
    }
    assert.ok(logins >= 10, `${logins} logins found`);
  });

  test("every export is named in the README's code or marked @internal in the comment right above it", () => {
    const source = readFileSync(MCP_SOURCE, "utf8");
    // Its code blocks and code spans: a word of its prose ("Protected Resource Metadata") names no export.
    const readme = [...readFileSync(HERE + "README.md", "utf8").matchAll(/```[\s\S]*?```|`[^`\n]+`/g)]
      .map(([code]) => code).join("\n");
    const unmeant: string[] = [];
    for (const match of source.matchAll(/^export (?:async )?(?:function|class|const|interface|type) (\w+)/gm)) {
      const name = match[1];
      if (new RegExp(`\\b${name}\\b`).test(readme)) continue;
      const before = source.slice(0, match.index).trimEnd();
      const doc = before.endsWith("*/") ? before.slice(before.lastIndexOf("/**")) : "";
      if (!doc.includes("@internal")) unmeant.push(name);
    }
    assert.deepEqual(unmeant, []);
  });

  test("no function takes six positional parameters or more (a record says what each is)", () => {
    const source = readFileSync(MCP_SOURCE, "utf8");
    const found: string[] = [];
    const head =
      /^\s*(?:export )?(?:async )?(?:function\*? ([\w$]+)\s*(?:<[^>]*>)?\(|(?:static |async |get |set )*(#?[\w$]+)\s*(?:<[^>]*>)?\(|const ([\w$]+) = (?:async )?\()/gm;
    for (const match of source.matchAll(head)) {
      const name = match[1] ?? match[2] ?? match[3];
      if (["if", "for", "while", "switch", "catch", "return", "function"].includes(name)) continue;
      let depth = 0;
      let commas = 0;
      let last = "";
      let at = match.index + match[0].length;
      for (; at < source.length; at++) {
        const c = source[at];
        const before = source[at - 1];
        // Brackets, and a generic's <…> (not an arrow's =>): commas inside them separate no parameters.
        if ("([{".includes(c) || (c === "<" && /[\w$]/.test(before))) depth++;
        else if (")]}".includes(c) || (c === ">" && before !== "=" && depth > 0)) {
          if (depth === 0) break;
          depth--;
        } else if (c === "," && depth === 0) commas++;
        if (!/\s/.test(c)) last = c;
      }
      if (last === "" || !/^\s*[:{=]/.test(source.slice(at + 1, at + 3))) continue; // no parameters, or a call
      const count = commas + (last === "," ? 0 : 1);
      if (count >= 6) found.push(`${source.slice(0, match.index).split("\n").length}: ${name} (${count})`);
    }
    assert.deepEqual(found, []);
  });

  test("no function or method is longer than 200 lines (a unit a reader can hold)", () => {
    const lines = readFileSync(MCP_SOURCE, "utf8").split("\n");
    const long: string[] = [];
    const head = /^( {0,2})(?:export )?(?:async )?(?:function\*? [\w$]+|(?:get |set |static |async )?#?[\w$]+\s*)\(/;
    lines.forEach((line, i) => {
      const match = head.exec(line);
      if (!match || /^\s*(if|for|while|switch|return|catch|else)\b/.test(line) || !/[({]$/.test(line.trimEnd())) return;
      const indent = match[1];
      const end = lines.findIndex((other, j) =>
        j > i && other.startsWith(indent + "}") && /^\}[);,]?$/.test(other.slice(indent.length))
      );
      if (end - i + 1 > 200) long.push(`${i + 1}: ${line.trim().slice(0, 60)} (${end - i + 1} lines)`);
    });
    assert.deepEqual(long, []);
  });
});

// --- The safety rules the whole file keeps (CONTRACT "Safety rules every role keeps"): each rule is one mechanism
// in mcp.ts §2b, and each test here scans or fuzzes the whole file for it, so a new feature inherits the rule. ---

/** A TypeScript source's regular-expression literals and string literals (a template: its first part), by a
 * small lexer: strings, templates and their substitutions, comments, and a `/` after an operator or a keyword. */
function literalsOf(source: string) {
  const regexes: { source: string; flags: string; line: number }[] = [];
  const strings: { text: string; at: number }[] = [];
  const keywords = new Set(["return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void", "throw"]);
  let i = source.startsWith("#!") ? source.indexOf("\n") : 0;
  let previous = ""; // the last token: a word, a punctuator, "str" or "re"
  const substitutions: number[] = []; // the brace depth outside each template substitution we are in
  let depth = 0;
  const lineOf = (at: number) => source.slice(0, at).split("\n").length;
  const template = (start: number) => { // from after a backtick, or after the } that ends a substitution
    while (i < source.length) {
      if (source[i] === "\\") i += 2;
      else if (source[i] === "`") {
        strings.push({ text: source.slice(start, i), at: start });
        i++;
        previous = "str";
        return;
      } else if (source[i] === "$" && source[i + 1] === "{") {
        strings.push({ text: source.slice(start, i), at: start });
        i += 2;
        substitutions.push(depth);
        depth = 0;
        previous = "{";
        return;
      } else i++;
    }
  };
  while (i < source.length) {
    const c = source[i];
    if (c === " " || c === "\t" || c === "\n" || c === "\r") i++;
    else if (c === "/" && source[i + 1] === "/") {
      i = source.indexOf("\n", i) < 0 ? source.length : source.indexOf("\n", i);
    } else if (c === "/" && source[i + 1] === "*") i = source.indexOf("*/", i + 2) + 2;
    else if (c === "'" || c === '"') {
      const start = ++i;
      while (i < source.length && source[i] !== c) i += source[i] === "\\" ? 2 : 1;
      strings.push({ text: source.slice(start, i), at: start });
      i++;
      previous = "str";
    } else if (c === "`") template(++i);
    else if (c === "{") {
      depth++;
      i++;
      previous = "{";
    } else if (c === "}") {
      i++;
      if (depth === 0 && substitutions.length > 0) {
        depth = substitutions.pop()!;
        template(i);
      } else {
        depth--;
        previous = "}";
      }
    } else if (/[\w$]/.test(c)) {
      const start = i;
      while (i < source.length && /[\w$]/.test(source[i])) i++;
      previous = source.slice(start, i);
    } else if (c === "/" && (keywords.has(previous) || !/^([\w$]|[)\]}]$|str$|re$)/.test(previous))) {
      let end = i + 1;
      for (let inClass = false; end < source.length; end++) {
        const d = source[end];
        if (d === "\\") end++;
        else if (d === "\n") throw new Error(`a regex literal runs over its line at ${lineOf(i)}`);
        else if (inClass) inClass = d !== "]";
        else if (d === "[") inClass = true;
        else if (d === "/") break;
      }
      let flagsEnd = end + 1;
      while (/[a-z]/.test(source[flagsEnd] ?? "")) flagsEnd++;
      regexes.push({ source: source.slice(i + 1, end), flags: source.slice(end + 1, flagsEnd), line: lineOf(i) });
      i = flagsEnd;
      previous = "re";
    } else {
      previous = c;
      i++;
    }
  }
  return { regexes, strings };
}

/** The text of the function that `head` starts (up to its closing brace at the start of a line). */
function functionText(source: string, head: string): string {
  const start = source.indexOf(head);
  assert.ok(start >= 0, `${head} is in mcp.ts`);
  return source.slice(start, source.indexOf("\n}\n", start) + 2);
}

describe("0. Safety rules, each held for the whole file", () => {
  const source = readFileSync(MCP_SOURCE, "utf8");

  test("bounded memory: a tool's progress and log lines leave only through the one notify that drops them for a client that is behind", () => {
    const sent = [...source.matchAll(/^.*\bnotify\([^)]*"notifications\/(?:progress|message)".*$/gm)].map((m) =>
      m[0].trim()
    );
    assert.ok(sent.length >= 2, `found ${sent.length}`);
    assert.deepEqual(sent.filter((line) => !line.startsWith("host.notify(work, ")), [], "sent past the context host");
    // The host's notify is where the rule is: a lagging client's lines are counted, not sent.
    assert.match(
      source,
      /notify: \(work, method, params\) => \{\n\s+if \(this\.lagging\?\.\(work\.id\)\) work\.dropped\+\+;/,
    );
  });

  test("linear-time parsing: every regex literal in mcp.ts, on 100,000 repeats of each character it names, runs in linear time", () => {
    const { regexes } = literalsOf(source);
    assert.ok(regexes.length > 100, `the lexer found ${regexes.length} regex literals`);
    const slow: string[] = [];
    // A linear match of 100,000 characters takes well under a millisecond; one that tries every start of a run
    // and scans the run from each (the X+$ shape) takes seconds. The bound is hundreds of times the first.
    const boundMs = 250;
    for (const { source: pattern, flags, line } of regexes) {
      const regex = new RegExp(pattern, flags.replace(/[gy]/g, ""));
      const characters = new Set(" \t\n\r\u0001" + "0aA_-.,:;=/\\\"'@#?*+()[]{}<>!&|~`^%$é");
      for (const [, named] of pattern.replace(/\\[dDwWsSbB]/g, "").matchAll(/\\?(.)/gs)) characters.add(named);
      search: for (const character of characters) {
        for (const end of ["\u0001", "\n!"]) {
          const input = character.repeat(100_000) + end;
          const timed = () => {
            const started = performance.now();
            regex.exec(input);
            return performance.now() - started;
          };
          // A busy machine may stop a run for a while, not three in a row: only a regex slow three times counts.
          let ms = timed();
          for (let again = 0; again < 2 && ms > boundMs; again++) ms = Math.min(ms, timed());
          if (ms > boundMs) {
            slow.push(`line ${line}: /${pattern}/${flags} took ${Math.round(ms)} ms on ${JSON.stringify(character)}`);
            break search;
          }
        }
      }
    }
    assert.deepEqual(slow, [], "regexes that backtrack (use a loop: trimEnd, or a bounded input)");
  });

  test("linear-time parsing: a closest-match search compares bounded text (a 4 MiB name, candidates, a replayed request)", () => {
    const timed = (run: () => unknown) => {
      const started = performance.now();
      const value = run();
      return { value, ms: performance.now() - started };
    };
    // The work a 4 MiB request needs anyway (reading it as JSON text), measured here: the search may take many
    // times that, never the edit distance of two whole texts (60 KB against 60 KB: seconds; 4 MiB: hours).
    const big = "a".repeat(4 << 20);
    const baseline = timed(() => JSON.parse(JSON.stringify({ big }))).ms;
    const bound = Math.max(2_000, 100 * baseline);
    for (const size of [60_000, 4 << 20]) {
      const name = "x".repeat(size);
      const near = timed(() => closestNames(name, ["y".repeat(size), "x".repeat(size - 1), "add"]));
      assert.ok(near.ms < bound, `closestNames of ${size} characters: ${Math.round(near.ms)} ms`);
      const player = new CassettePlayer([
        {
          t: 0,
          dir: "send",
          message: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "t", arguments: { v: name } } },
        },
        { t: 1, dir: "recv", message: { jsonrpc: "2.0", id: 1, result: { content: [] } } },
      ]);
      const unmatched = { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "t", arguments: { w: name } } };
      const replayed = timed(() => player.answer(unmatched));
      assert.ok(replayed.ms < bound, `replay's closest request, ${size} characters: ${Math.round(replayed.ms)} ms`);
      assert.match((replayed.value as Message[])[0].error.message, /no recorded request matches/);
    }
  });

  test("one outbound fetch: the global fetch is named only inside fetchSameOrigin", () => {
    const allowed = functionText(source, "async function fetchSameOrigin(");
    const elsewhere = source.replace(allowed, "").split("\n").flatMap((line, i) => {
      const code = /^\s*(\*|\/\*\*|\/\/)/.test(line) ? "" : line.replace(/\/\/.*$/, "").replace(/typeof fetch\b/g, "");
      // The global by name: called, passed or aliased (a property or method named fetch is another thing).
      return /(?<![\w.#$])fetch\b(?!\?:|: |\(\w+: )/.test(code) ? [`${i + 1}: ${line.trim()}`] : [];
    });
    assert.deepEqual(elsewhere, [], "route it through fetchSameOrigin");
  });

  test("peer text never forges output: every `mcp: …` line is written by logLine (a marked exception says why)", () => {
    const { strings } = literalsOf(source);
    const logLine = functionText(source, "function logLine(");
    const start = source.indexOf(logLine);
    const unmarked = strings.filter(({ text, at }) => {
      if (!text.startsWith("mcp: ")) return false;
      if (at > start && at < start + logLine.length) return false;
      const before = source.slice(source.lastIndexOf("\n", source.lastIndexOf("\n", at) - 1), at);
      return !before.includes("own-line-ok:") &&
        !source.slice(source.lastIndexOf("\n", at - 1) - 300, at).includes("own-line-ok:");
    }).map(({ text, at }) => `${source.slice(0, at).split("\n").length}: ${text.slice(0, 60)}`);
    assert.deepEqual(unmarked, [], "write such a line with logLine(sink, msg)");
  });

  test("peer text never forges output: runtime error messages are redacted (URL credentials and query) in every sink", () => {
    assert.equal(
      redact("fetch failed: http://user:p4ss@127.0.0.1:9/v1/traces?key=s3cret refused; https://a.test/x#frag"),
      "fetch failed: http://127.0.0.1:9/v1/traces refused; https://a.test/x",
    );
    assert.equal(redact("no URL here: a://b"), "no URL here: a://b");
    assert.equal(redact(`"http://u@h.test/?q" said`), `"http://h.test/" said`);
    // errorMessage is the one way a thrown value becomes text: it redacts, so every sink does.
    const text = functionText(source, "function errorMessage(");
    assert.match(text, /return redact\(/);
  });

  test("parsed maps have no prototype: __proto__, constructor and prototype are keys like any other", () => {
    const yaml = "__proto__:\n  name: smuggled\nconstructor: c\nprototype: p\ndescription: d\n";
    for (const parsed of [parseYamlSubset(yaml), skillFrontmatter(`---\n${yaml}---\n`)] as Message[]) {
      assert.equal(Object.getPrototypeOf(parsed), null);
      assert.deepEqual(Object.keys(parsed), ["__proto__", "constructor", "prototype", "description"]);
      assert.equal(parsed.name, undefined, "nothing read through a prototype");
      assert.deepEqual(JSON.parse(JSON.stringify(parsed)).__proto__, { name: "smuggled" });
    }
    const args = argsFromPairs(["__proto__=x", "constructor=y"], { type: "object" }) as Message;
    assert.deepEqual(Object.keys(args), ["__proto__", "constructor"]);
  });
});

describe("3. Framing", () => {
  test("LineSplitter: lines across chunks and split characters, CRLF, a bounded unfinished line, the last on finish", () => {
    const lines: string[] = [];
    const splitter = new LineSplitter(8, (line) => lines.push(line));
    const bytes = new TextEncoder().encode("one\r\ntwé\nthree-four-five-six");
    for (const byte of bytes) splitter.push(new Uint8Array([byte]));
    assert.deepEqual(lines, ["one", "twé"]);
    splitter.finish();
    assert.deepEqual(lines, ["one", "twé", "five-six"], "only the end of an over-long unfinished line is kept");
  });

  test("FrameReader splits lines, accepts CRLF and ignores blank lines", () => {
    const { messages } = frames(['{"a":1}\r\n\n  \r\n{"b"', ':2}\n{"c":3}']);
    assert.deepEqual(messages, ['{"a":1}', '{"b":2}', '{"c":3}']);
  });

  test("FrameReader joins UTF-8 characters split across chunks", () => {
    const bytes = new TextEncoder().encode('{"t":"é😀"}\n');
    const chunks = [...bytes].map((byte) => new Uint8Array([byte]));
    assert.deepEqual(frames(chunks).messages, ['{"t":"é😀"}']);
  });

  test("FrameReader skips a line over maxBytes once and keeps the next", () => {
    const long = "x".repeat(250);
    const result = frames(['{"a":1}\n', long.slice(0, 90), long.slice(90), long, '\n{"b":2}\n'], 100);
    assert.deepEqual(result.messages, ['{"a":1}', '{"b":2}']);
    assert.equal(result.oversize, 1);
  });

  test("FrameReader accepts a line of exactly maxBytes and rejects one byte more", () => {
    const ok = "y".repeat(100);
    assert.deepEqual(frames([ok + "\n"]).messages, [ok]);
    assert.equal(frames([ok + "z\n"]).oversize, 1);
  });

  test("FrameReader recognises Content-Length framing from the first bytes", () => {
    const body = '{"jsonrpc":"2.0","id":1,"method":"ping"}';
    const framed = `Content-Length: ${body.length}\r\n\r\n${body}`;
    const result = frames([framed.slice(0, 7), framed.slice(7, 30), framed.slice(30) + framed], 1000);
    assert.equal(result.framing, "content-length");
    assert.deepEqual(result.messages, [body, body]);
  });

  test("FrameReader skips a Content-Length body over maxBytes", () => {
    const big = "z".repeat(50);
    const result = frames([`Content-Length: 50\r\n\r\n${big}Content-Length: 2\r\n\r\n{}`], 10);
    assert.equal(result.oversize, 1);
    assert.deepEqual(result.messages, ["{}"]);
  });

  test("FrameReader work stays linear on a long line in small chunks", () => {
    const chunk = new Uint8Array(64 * 1024).fill(0x61);
    // CPU time, not wall time: a busy machine takes the CPU away from a long run more often than from a short one.
    const timeFor = (count: number) => {
      const reader = new FrameReader({ message: () => {}, oversize: () => {} }, 64 * 1024 * 1024);
      const start = process.cpuUsage();
      for (let i = 0; i < count; i++) reader.push(chunk);
      reader.push(new Uint8Array([NEWLINE_BYTE]));
      const used = process.cpuUsage(start);
      return (used.user + used.system) / 1000;
    };
    timeFor(16); // warm up
    // The best of five of each: a collection of garbage or a busy neighbour slows a run now and then, not all five.
    const best = (count: number) => Math.min(...Array.from({ length: 5 }, () => timeFor(count)));
    const small = best(32);
    const large = best(512); // 16x the bytes: linear work is 16x, quadratic 256x
    assert.ok(large < small * 16 * 4 + 50, `512 chunks took ${large} ms of CPU, 32 took ${small} ms`);
  });

  test("FrameWriter sends everything queued in one turn as one write", async () => {
    const writes: string[] = [];
    const writer = new FrameWriter((text) => {
      writes.push(text);
      return true;
    });
    const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
    writer.send("a");
    writer.send("b");
    await nextTurn();
    writer.framing = "content-length";
    writer.send("é");
    await nextTurn();
    assert.deepEqual(writes, ["a\nb\n", "Content-Length: 2\r\n\r\né"]);
  });
});

describe("4. JSON-RPC peer", () => {
  test("two peers in process: answers matched to requests, errors as RpcError, final marked, abort cancels, close fails what is pending", async () => {
    const sent: { text: string; context?: { requestId?: unknown; final?: boolean; errorCode?: number } }[] = [];
    const heard: string[] = [];
    // b answers "add" at once, "slow" never, "bad" with -32602; a's messages reach b and b's reach a.
    const a: JsonRpcPeer = new JsonRpcPeer({
      send: (text) => b.receive(text),
      request: () => ({}),
      notification: (method) => void heard.push(`a heard ${method}`),
    });
    const b: JsonRpcPeer = new JsonRpcPeer({
      send: (text, context) => {
        sent.push({ text, context });
        a.receive(text);
      },
      request: (method, params) => {
        if (method === "add") return { sum: (params.a as number) + (params.b as number) };
        if (method === "bad") throw new RpcError(ErrorCode.InvalidParams, "Invalid params: no");
        return new Promise(() => {});
      },
      notification: (method, params) => void heard.push(`b heard ${method} ${JSON.stringify(params)}`),
    });
    const [one, two] = await Promise.all([a.request("add", { a: 1, b: 2 }), a.request("add", { a: 5, b: 5 })]);
    assert.deepEqual([one, two], [{ sum: 3 }, { sum: 10 }], "each answer to its own request");
    await assert.rejects(a.request("bad", {}), (error: unknown) => error instanceof RpcError && error.code === -32602);
    const answers = sent.filter((item) => item.context?.final);
    assert.equal(answers.length, 3, "every response is marked final");
    assert.equal(answers[2].context?.errorCode, -32602, "and an error names its code");
    const controller = new AbortController();
    const slow = a.request("slow", {}, { signal: controller.signal });
    controller.abort(new Error("enough"));
    await assert.rejects(slow, /enough/);
    assert.match(heard.at(-1)!, /^b heard notifications\/cancelled \{"requestId":4,"reason":"enough"\}/);
    const pending = a.request("slow", {});
    a.close(new Error("closed under it"));
    await assert.rejects(pending, /closed under it/);
    await assert.rejects(a.request("add", { a: 1, b: 1 }), /closed under it/, "a closed peer sends nothing more");
  });

  test("serve answers malformed frames with the right error and keeps serving", async () => {
    await withServer(["testdata/tools"], async (server) => {
      server.send(
        "{not json",
        "[1,2]",
        '"just a string"',
        '{"id":1,"method":"ping"}',
        '{"jsonrpc":"2.0","id":null,"method":"ping"}',
        '{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}',
        '{"jsonrpc":"2.0","id":2}',
        '{"jsonrpc":"2.0","id":3,"method":"no/such/method"}',
        '{"jsonrpc":"2.0","id":4,"method":"ping","params":[1]}',
        '{"jsonrpc":"2.0","method":"no/such/notification"}',
        '{"jsonrpc":"2.0","id":"5","method":"ping"}',
      );
      await server.response("5");
      const errors = server.messages.filter((m) => m.error).map((m) => [m.id, m.error.code]);
      assert.deepEqual(errors, [
        [null, ErrorCode.ParseError],
        [null, ErrorCode.InvalidRequest],
        [null, ErrorCode.InvalidRequest],
        [1, ErrorCode.InvalidRequest],
        [null, ErrorCode.InvalidRequest],
        [null, ErrorCode.InvalidRequest],
        [2, ErrorCode.InvalidRequest],
        [3, ErrorCode.MethodNotFound],
        [4, ErrorCode.InvalidParams],
      ]);
      assert.deepEqual(server.messages.at(-1), { jsonrpc: "2.0", id: "5", result: {} });
      assert.equal(server.messages.length, 10, "the notification got no answer");
      for (const message of server.messages) assert.ok(!("stack" in (message.error ?? {})));
    });
  });

  test("serve answers an over-long line once with -32600, buffers none of it, and keeps serving", async () => {
    await withServer(["testdata/tools", "--max-line-bytes", "1048576"], async (server) => {
      await server.initialize();
      const before = peakRss(server.child.pid!);
      const chunk = "x".repeat(64 * 1024);
      // 160 MiB in one line, written with backpressure: buffering it would need more than that.
      for (let i = 0; i < 2560; i++) {
        if (!server.child.stdin!.write(chunk)) {
          await new Promise((resolve) => server.child.stdin!.once("drain", resolve));
        }
      }
      server.send("", { jsonrpc: "2.0", id: "after", method: "ping" });
      assert.deepEqual((await server.response("after", 30_000)).result, {});
      const oversize = server.messages.filter((m) => m.error?.code === ErrorCode.InvalidRequest);
      assert.equal(oversize.length, 1);
      assert.equal(oversize[0].id, null);
      assert.match(oversize[0].error.message, /1048576-byte/);
      const grown = peakRss(server.child.pid!) - before;
      // Garbage collectors lag behind 64 KiB chunks (Deno's most), but never by the whole line.
      assert.ok(grown < 100 * 1024 * 1024, `peak RSS grew by ${grown} bytes while skipping 160 MiB`);
    });
  });

  test("serve answers 200 concurrent calls once each, out of order when they finish out of order", async () => {
    await withServer(["testdata/tools"], async (server) => {
      await server.initialize();
      // The first call waits 2 s, far longer than a busy machine takes to start the other 199 (then 198 ms down).
      const waitOf = (i: number) => i === 0 ? 2_000 : 200 - i;
      const batch: unknown[] = [];
      for (let i = 0; i < 200; i++) {
        batch.push({
          jsonrpc: "2.0",
          id: i,
          method: "tools/call",
          params: i % 2
            ? { name: "echo", arguments: { text: `echo ${i}` } }
            : { name: "slow", arguments: { steps: 1, ms: waitOf(i) } },
        });
      }
      server.send(...batch);
      await server.until(() => server.messages.filter((m) => typeof m.id === "number").length >= 200, "200 answers");
      // A ping after them all: a second answer to any call would come before the ping's.
      await server.request("after", "ping");
      const answers = server.messages.filter((m) => typeof m.id === "number");
      assert.equal(answers.length, 200);
      assert.equal(new Set(answers.map((m) => m.id)).size, 200);
      for (const answer of answers) {
        assert.equal(text(answer.result), answer.id % 2 ? `echo ${answer.id}` : `waited 1 x ${waitOf(answer.id)} ms`);
      }
      const order = answers.map((m) => m.id);
      assert.ok(order.indexOf(198) < order.indexOf(0), "the shortest wait finished before the longest");
    });
  });
});

describe("5. Protocol eras", () => {
  test("traceContextOf: a valid W3C traceparent, its tracestate (512 characters at most) and baggage; else nothing", () => {
    const id = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    assert.deepEqual(traceContextOf({ traceparent: id, tracestate: "a=1", baggage: "k=v" }), {
      traceparent: id,
      tracestate: "a=1",
      baggage: "k=v",
    });
    assert.deepEqual(traceContextOf({ traceparent: id, tracestate: "x".repeat(513) }), { traceparent: id });
    assert.deepEqual(
      traceContextOf({ traceparent: "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-future" }),
      {
        traceparent: "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-future",
      },
      "a higher version is read by its first four fields",
    );
    for (
      const bad of [
        id.toUpperCase(),
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        id + "-extra",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033-01",
        42,
      ]
    ) {
      assert.equal(traceContextOf({ traceparent: bad, baggage: "k=v" }), undefined, String(bad));
    }
    assert.equal(traceContextOf(undefined), undefined);
  });
});

describe("6. Schema validation", () => {
  const schema = {
    type: "object",
    properties: {
      name: { type: "string", minLength: 2, maxLength: 4, pattern: "^[a-z]+$" },
      age: { type: "integer", minimum: 0, maximum: 150 },
      tags: { type: "array", items: { type: "string" } },
      mode: { enum: ["a", "b"] },
      kind: { const: "x" },
      either: { anyOf: [{ type: "string" }, { type: "number" }] },
      one: { oneOf: [{ type: "number" }, { type: "integer" }] },
      all: { allOf: [{ type: "number" }, { minimum: 5 }] },
      nested: { type: "object", properties: { deep: { type: "boolean" } }, additionalProperties: false },
    },
    required: ["name"],
  };

  test("validate() accepts a valid value", () => {
    assert.deepEqual(
      validate(schema, { name: "ab", age: 3, tags: ["x"], mode: "a", kind: "x", either: 1, one: 1.5, all: 6 }),
      [],
    );
  });

  test("validate() names the path and the rule of each violation", () => {
    assert.deepEqual(
      validate(schema, {
        age: 1.5,
        tags: ["ok", 2],
        mode: "c",
        kind: "y",
        either: true,
        one: 1,
        all: 2,
        nested: { deep: "no", extra: 1 },
      }),
      [
        "arguments.name is required (required)",
        "arguments.age must be integer, got number (type)",
        "arguments.tags[1] must be string, got integer (type)",
        'arguments.mode must be one of ["a","b"] (enum)',
        'arguments.kind must equal "x" (const)',
        "arguments.either must match at least one schema of anyOf (anyOf)",
        "arguments.one must match exactly one schema of oneOf, matched 2 (oneOf)",
        "arguments.all must be >= 5 (minimum)",
        "arguments.nested.deep must be boolean, got string (type)",
        "arguments.nested.extra is not an allowed property (additionalProperties)",
      ],
    );
  });

  test("validate() counts string length in code points and checks patterns", () => {
    assert.deepEqual(validate(schema, { name: "😀😀" }), ['arguments.name must match "^[a-z]+$" (pattern)']);
    assert.deepEqual(validate(schema, { name: "abcde" }), [
      "arguments.name must be at most 4 characters long (maxLength)",
    ]);
    assert.deepEqual(validate(schema, { name: "a" }), [
      "arguments.name must be at least 2 characters long (minLength)",
    ]);
  });

  test("validate() ignores unknown keywords and invalid patterns", () => {
    assert.deepEqual(validate({ type: "object", format: "x", properties: { a: { pattern: "(" } } }, { a: "b" }), []);
    assert.deepEqual(validate({ type: "object" }, []), ["arguments must be object, got array (type)"]);
  });
});

describe("7. MCP server", () => {
  test("initialize echoes each supported version and answers the latest for others", () => {
    for (
      const [asked, answered] of [
        ["2025-11-25", "2025-11-25"],
        ["2025-06-18", "2025-06-18"],
        ["2025-03-26", "2025-03-26"],
        ["2024-11-05", "2024-11-05"],
        ["1999-01-01", LATEST_PROTOCOL_VERSION],
      ]
    ) {
      const sent: Message[] = [];
      const tools = [{ name: "t", run: () => "" }];
      const server = new McpServer({ name: "n", version: "v", tools }, (line) => sent.push(JSON.parse(line)));
      server.receive(JSON.stringify({ ...INIT, params: { ...INIT.params, protocolVersion: asked } }));
      assert.equal(sent[0].result.protocolVersion, answered);
      assert.deepEqual(sent[0].result.serverInfo, { name: "n", version: "v" });
      assert.deepEqual(sent[0].result.capabilities, { tools: { listChanged: false }, logging: {} });
    }
  });

  test("serve sends --name, --server-version and --instructions in the initialize result", async () => {
    await withServer(
      ["testdata/tools", "--name", "calc", "--server-version", "9.9", "--instructions", "Use add for sums."],
      async (server) => {
        const { result } = await server.initialize();
        assert.deepEqual(result.serverInfo, { name: "calc", version: "9.9" });
        assert.equal(result.instructions, "Use add for sums.");
        assert.deepEqual(await server.request(2, "ping"), { jsonrpc: "2.0", id: 2, result: {} });
      },
    );
  });

  test("initialize without a protocolVersion is -32602", () => {
    const sent: Message[] = [];
    const server = new McpServer({}, (line) => sent.push(JSON.parse(line)));
    server.receive('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}');
    assert.equal(sent[0].error.code, ErrorCode.InvalidParams);
  });

  test("tools/list pages with an opaque cursor and rejects an invalid one", async () => {
    await withServer(["testdata/tools", "--page-size", "2"], async (server) => {
      await server.initialize();
      const names: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const { result } = await server.request(`page${pages}`, "tools/list", cursor ? { cursor } : {});
        names.push(...result.tools.map((tool: Message) => tool.name));
        cursor = result.nextCursor;
        pages++;
      } while (cursor);
      assert.equal(pages, 4);
      assert.deepEqual(names, ["add", "echo", "fail", "shout", "slow", "wc", "weather"]);
      const bad = await server.request("bad", "tools/list", { cursor: "not-a-cursor" });
      assert.equal(bad.error.code, ErrorCode.InvalidParams);
    });
  });

  test("tools/list passes the optional fields through", async () => {
    await withServer(["testdata/tools"], async (server) => {
      await server.initialize();
      const { result } = await server.request(2, "tools/list");
      const weather = result.tools.find((tool: Message) => tool.name === "weather");
      assert.equal(weather.title, "Weather");
      assert.equal(weather.outputSchema.type, "object");
      const add = result.tools.find((tool: Message) => tool.name === "add");
      assert.deepEqual(add.annotations, { readOnlyHint: true, idempotentHint: true });
      const fail = result.tools.find((tool: Message) => tool.name === "fail");
      assert.deepEqual(fail.inputSchema, { type: "object" });
    });
  });

  test("tools/call maps return values, validates arguments, reports throws and unknown tools", async () => {
    await withServer(["testdata/tools"], async (server) => {
      await server.initialize();
      server.call(1, "add", { a: 2, b: 3 });
      server.call(2, "add", { a: "x" });
      server.call(3, "fail", { message: "boom" });
      server.call(4, "nope", {});
      server.call(5, "weather", { city: "Oslo" });
      server.call(6, "add", "not an object");
      assert.deepEqual((await server.response(1)).result, { content: [{ type: "text", text: "5" }] });
      const invalid = (await server.response(2)).result;
      assert.equal(invalid.isError, true);
      assert.match(text(invalid), /arguments\.b is required \(required\)/);
      assert.match(text(invalid), /arguments\.a must be number, got string \(type\)/);
      assert.deepEqual((await server.response(3)).result, { content: [{ type: "text", text: "boom" }], isError: true });
      const unknown = await server.response(4);
      assert.equal(unknown.error.code, ErrorCode.InvalidParams);
      assert.match(unknown.error.message, /nope/);
      const weather = (await server.response(5)).result;
      assert.deepEqual(weather.structuredContent, { city: "Oslo", temperature: 28, unit: "celsius" });
      assert.deepEqual(JSON.parse(text(weather)), weather.structuredContent);
      assert.equal((await server.response(6)).error.code, ErrorCode.InvalidParams);
    });
  });

  test("toCallToolResult() follows the contract for every kind of return value", () => {
    assert.deepEqual(toCallToolResult("hi"), { content: [{ type: "text", text: "hi" }] });
    assert.deepEqual(toCallToolResult(undefined), { content: [] });
    assert.deepEqual(toCallToolResult(null), { content: [] });
    const whole = { content: [{ type: "text", text: "x" }], isError: true, structuredContent: { a: 1 } };
    assert.equal(toCallToolResult(whole), whole);
    assert.deepEqual(toCallToolResult(42), { content: [{ type: "text", text: "42" }] });
    assert.deepEqual(toCallToolResult([1, 2]), { content: [{ type: "text", text: "[1,2]" }] });
    assert.deepEqual(toCallToolResult({ a: 1 }), {
      content: [{ type: "text", text: '{"a":1}' }],
      structuredContent: { a: 1 },
    });
  });

  test("defineTool() checks the name rule and the schema", () => {
    assert.throws(() => defineTool({ name: "bad name", run() {} }), /bad name.*1-128 characters/);
    assert.throws(() => defineTool({ name: "x".repeat(129), run() {} }), /1-128/);
    assert.throws(() => defineTool({ name: "ok" }), /run/);
    assert.throws(() => defineTool({ name: "ok", inputSchema: { type: "string" }, run() {} }), /inputSchema/);
    assert.equal(defineTool({ run() {} }, "from_file.v2-x").name, "from_file.v2-x");
  });

  test("notifications/cancelled aborts ctx.signal and the call gets no response", async () => {
    await withServer(["testdata/tools"], async (server) => {
      await server.initialize();
      server.call("c", "slow", { steps: 1, ms: 60_000 });
      // The ping's answer says the server has read the call (it reads in order).
      assert.deepEqual((await server.request("p0", "ping")).result, {});
      server.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "c", reason: "user" } });
      assert.deepEqual((await server.request("p", "ping")).result, {});
      // The server is not waiting for the cancelled call: EOF ends it at once (EOF waits for the calls in flight, and
      // answers them: a call still running would keep it a minute, then be answered).
      const started = Date.now();
      assert.equal((await server.end()).code, 0);
      assert.ok(Date.now() - started < 20_000, `ended ${Date.now() - started} ms after EOF`);
      assert.ok(!server.messages.some((m) => m.id === "c"), "a cancelled call is not answered");
    });
  });

  test("ctx.progress sends notifications only when the request carried a progressToken", async () => {
    await withServer(["testdata/tools"], async (server) => {
      await server.initialize();
      server.call(1, "slow", { steps: 3, ms: 10 }, { progressToken: "tok" });
      server.call(2, "slow", { steps: 3, ms: 10 });
      await server.response(1);
      await server.response(2);
      const progress = server.messages.filter((m) => m.method === "notifications/progress");
      assert.deepEqual(
        progress.map((m) => m.params),
        [1, 2, 3].map((step) => ({
          progressToken: "tok",
          progress: step,
          total: 3,
          message: `step ${step} of 3`,
        })),
      );
      const last = server.messages.findIndex((m) => m.id === 1);
      assert.ok(server.messages.findLastIndex((m) => m.method === "notifications/progress") < last);
    });
  });

  test("ctx.log honours logging/setLevel", async () => {
    await withServer(["testdata/tools"], async (server) => {
      await server.initialize();
      server.call(1, "slow", { steps: 2, ms: 1 });
      await server.response(1);
      assert.equal(server.messages.filter((m) => m.method === "notifications/message").length, 0, "debug < info");
      assert.deepEqual((await server.request(2, "logging/setLevel", { level: "debug" })).result, {});
      server.call(3, "slow", { steps: 2, ms: 1 });
      await server.response(3);
      const logs = server.messages.filter((m) => m.method === "notifications/message");
      assert.deepEqual(logs.map((m) => m.params), [
        { level: "debug", logger: "slow", data: "step 1" },
        { level: "debug", logger: "slow", data: "step 2" },
      ]);
      assert.equal(
        (await server.request(4, "logging/setLevel", { level: "loud" })).error.code,
        ErrorCode.InvalidParams,
      );
    });
  });

  test("--timeout aborts the call's signal and answers isError 'timed out'", async () => {
    await withServer(["testdata/tools", "--timeout", "200"], async (server) => {
      await server.initialize();
      const started = Date.now();
      server.call(1, "slow", { steps: 1, ms: 60_000 });
      const { result } = await server.response(1);
      assert.equal(result.isError, true);
      assert.match(text(result), /timed out after 200 ms/);
      // Far under the minute the call would take, far over what even a busy machine adds to the 200 ms.
      assert.ok(Date.now() - started < 20_000, `answered after ${Date.now() - started} ms`);
      assert.equal(server.messages.filter((m) => m.id === 1).length, 1);
    });
  });

  test("ctx.sample, ctx.elicit and ctx.roots refuse when the client declared no such capability; a declared one asks", async () => {
    const refused: string[] = [];
    const tool = defineTool({
      name: "ask",
      run: async (_args: unknown, ctx: ToolContext) => {
        const tries = [
          () => ctx.sample({ messages: [], maxTokens: 1 }),
          () => ctx.elicit({ message: "?" }),
          () => ctx.roots(),
        ];
        const got: unknown[] = [];
        for (const attempt of tries) {
          try {
            got.push(await attempt());
          } catch (error) {
            refused.push((error as Error).message);
          }
        }
        return got;
      },
    });
    const { sent, record, until } = recorder();
    const bare = new McpServer({ tools: [tool] }, record);
    bare.receive(JSON.stringify(INIT));
    bare.receive('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask"}}');
    await until(() => sent.find((m) => m.id === 2), "the call's answer");
    assert.deepEqual(refused.map((message) => /"(\w+)" capability/.exec(message)?.[1]), [
      "sampling",
      "elicitation",
      "roots",
    ]);
    assert.equal(sent.filter((m) => m.method !== undefined).length, 0, "nothing was asked");
    assert.deepEqual(sent.find((m) => m.id === 2)!.result.content, [{ type: "text", text: "[]" }]);
    refused.length = 0;
    sent.length = 0;
    const withRoots = new McpServer({ tools: [tool] }, record);
    withRoots.receive(JSON.stringify({ ...INIT, params: { ...INIT.params, capabilities: { roots: {} } } }));
    withRoots.receive('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask"}}');
    const rootsRequest = await until(() => sent.find((m) => m.method === "roots/list"), "roots/list");
    assert.equal(refused.length, 2, "sampling and elicitation still refused");
    withRoots.receive(
      JSON.stringify({ jsonrpc: "2.0", id: rootsRequest.id, result: { roots: [{ uri: "file:///x" }] } }),
    );
    const answer = await until(() => sent.find((m) => m.id === 2), "the call's answer");
    assert.deepEqual(answer.result.content, [{ type: "text", text: '[[{"uri":"file:///x"}]]' }]);
  });
});

describe("7. MCP server: the 2026-07-28 era", () => {
  test("server/discover, resultType, cache hints and serverInfo on every result", async () => {
    const { server, ask } = stateless({ instructions: "Be kind.", tools: [{ name: "hi", run: () => "hello" }] });
    try {
      assert.deepEqual((await ask("server/discover")).result, {
        supportedVersions: ["2026-07-28"],
        capabilities: { tools: { listChanged: false }, logging: {} },
        instructions: "Be kind.",
        resultType: "complete",
        ttlMs: 300000,
        cacheScope: "public",
        _meta: SERVER_INFO,
      });
      const listed = (await ask("tools/list")).result;
      assert.deepEqual([listed.resultType, listed.ttlMs, listed.cacheScope, listed._meta], [
        "complete",
        300000,
        "public",
        SERVER_INFO,
      ]);
      assert.deepEqual((await ask("tools/call", { name: "hi" })).result, {
        content: [{ type: "text", text: "hello" }],
        resultType: "complete",
        _meta: SERVER_INFO,
      });
    } finally {
      server.close();
    }
  });

  test("the envelope is checked on every request: -32602, -32022, and -32601 for methods of the old era", async () => {
    const { server, ask } = stateless({ tools: [{ name: "hi", run: () => "hello" }] });
    try {
      const missing = await ask("tools/list", {}, { "io.modelcontextprotocol/clientCapabilities": undefined });
      assert.equal(missing.error.code, -32602);
      assert.match(missing.error.message, /clientCapabilities/);
      const version = await ask("tools/list", {}, { "io.modelcontextprotocol/protocolVersion": "v999.0.0" });
      assert.deepEqual(version.error, {
        code: -32022,
        message: "Unsupported protocol version",
        data: { supported: ["2026-07-28"], requested: "v999.0.0" },
      });
      const level = await ask("tools/list", {}, { "io.modelcontextprotocol/logLevel": "loud" });
      assert.equal(level.error.code, -32602);
      for (const method of ["initialize", "ping", "logging/setLevel", "resources/subscribe", "unknown/method"]) {
        assert.equal((await ask(method)).error.code, -32601, method);
      }
    } finally {
      server.close();
    }
  });

  test("log messages only for a request that asks with logLevel; resources not found are -32602", async () => {
    const tool = {
      name: "chatty",
      run: (_: unknown, ctx: ToolContext) => {
        ctx.log("info", "hello");
        ctx.log("debug", "details");
        return "done";
      },
    };
    const resources = [{ uri: "mem://a", name: "a", read: () => "a" }];
    const { server, sent, ask } = stateless({ tools: [tool], resources });
    try {
      await ask("tools/call", { name: "chatty" });
      assert.equal(sent.filter((m) => m.method === "notifications/message").length, 0);
      await ask("tools/call", { name: "chatty" }, { "io.modelcontextprotocol/logLevel": "info" });
      assert.deepEqual(sent.filter((m) => m.method === "notifications/message").map((m) => m.params.data), ["hello"]);
      const read = await ask("resources/read", { uri: "mem://nope" });
      assert.equal(read.error.code, -32602);
      assert.equal((await ask("resources/read", { uri: "mem://a" })).result.ttlMs, 0);
    } finally {
      server.close();
    }
  });

  test("input-required: a question ends the call, the retry with the answers runs it again", async () => {
    const runs: string[] = [];
    const tool = {
      name: "greet",
      run: async (_: unknown, ctx: ToolContext) => {
        runs.push("run");
        const [who, roots] = await Promise.all([
          ctx.elicit({ message: "Who?", requestedSchema: { type: "object" } }, { key: "who" }),
          ctx.roots({ key: "where" }),
        ]);
        const more = await ctx.sample({ messages: [], maxTokens: 5 }); // key sample-1
        return `hi ${(who.content as Message).name} in ${roots[0].uri}, ${(more.content as Message).text}`;
      },
    };
    const { server, ask } = stateless({ tools: [tool], stateKey: "test key" });
    try {
      const first = (await ask("tools/call", { name: "greet" })).result;
      assert.equal(first.resultType, "input_required");
      assert.deepEqual(Object.keys(first.inputRequests), ["who", "where"], "asked together");
      assert.equal(first.inputRequests.who.method, "elicitation/create");
      assert.equal(first.inputRequests.where.method, "roots/list");
      assert.equal(first.ttlMs, undefined, "no cache hints on input_required");
      const answers = {
        who: { action: "accept", content: { name: "Ada" } },
        where: { roots: [{ uri: "file:///home/ada" }] },
        extra: { ignored: true },
      };
      const second = (await ask("tools/call", {
        name: "greet",
        inputResponses: answers,
        requestState: first.requestState,
      })).result;
      assert.equal(second.resultType, "input_required", "a new question");
      assert.deepEqual(Object.keys(second.inputRequests), ["sample-1"]);
      const third = (await ask("tools/call", {
        name: "greet",
        inputResponses: { "sample-1": { role: "assistant", content: { type: "text", text: "welcome" } } },
        requestState: second.requestState, // carries who and where
      })).result;
      assert.deepEqual(third.content, [{ type: "text", text: "hi Ada in file:///home/ada, welcome" }]);
      assert.equal(runs.length, 3);

      const wrong =
        (await ask("tools/call", { name: "greet", inputResponses: { who: 12345, where: { roots: [] } } })).result;
      assert.deepEqual(Object.keys(wrong.inputRequests), ["who"], "an answer of the wrong shape is asked again");
      assert.equal((await ask("tools/call", { name: "greet", inputResponses: null })).error.code, -32602);
      const [body, mac] = second.requestState.split(".");
      const tampered = await ask("tools/call", { name: "greet", requestState: `${body}x.${mac}` });
      assert.equal(tampered.error.code, -32602);
      const elsewhere = await stateless({ tools: [tool], stateKey: "another key" }).ask("tools/call", {
        name: "greet",
        requestState: second.requestState,
      });
      assert.equal(elsewhere.error.code, -32602, "a state signed under another key");
      const shared = stateless({ tools: [tool], stateKey: "test key" });
      const resumed = await shared.ask("tools/call", {
        name: "greet",
        inputResponses: { "sample-1": { role: "assistant", content: { type: "text", text: "again" } } },
        requestState: second.requestState,
      });
      assert.equal(resumed.result.content[0].text, "hi Ada in file:///home/ada, again", "another instance, one key");
      shared.server.close();
    } finally {
      server.close();
    }
  });

  test("a question needing an undeclared capability is -32021 naming it", async () => {
    const tool = { name: "needs_sampling", run: (_: unknown, ctx: ToolContext) => ctx.sample({ messages: [] }) };
    const { server, ask } = stateless({ tools: [tool] });
    try {
      const answer = await ask("tools/call", { name: "needs_sampling" }, {
        "io.modelcontextprotocol/clientCapabilities": {},
      });
      assert.equal(answer.error.code, -32021);
      assert.deepEqual(answer.error.data, { requiredCapabilities: { sampling: {} } });
    } finally {
      server.close();
    }
  });

  test("subscriptions/listen: acknowledged first, stamped, only the kinds asked for, until cancelled", async () => {
    const { server, sent } = stateless({ listChanged: true, tools: [{ name: "a", run: () => "a" }] });
    try {
      server.receive(JSON.stringify({
        jsonrpc: "2.0",
        id: "sub",
        method: "subscriptions/listen",
        params: modern({ notifications: { toolsListChanged: true, resourceSubscriptions: ["mem://none"] } }),
      }));
      const stamp = { "io.modelcontextprotocol/subscriptionId": "sub" };
      assert.deepEqual(sent[0], {
        jsonrpc: "2.0",
        method: "notifications/subscriptions/acknowledged",
        params: { _meta: stamp, notifications: { toolsListChanged: true } },
      });
      server.setTools([{ name: "b", run: () => "b" }]);
      server.setCatalog({ ...server.core.catalog, prompts: [] });
      assert.deepEqual(sent.slice(1), [
        { jsonrpc: "2.0", method: "notifications/tools/list_changed", params: { _meta: stamp } },
      ]);
      server.receive(
        JSON.stringify({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "sub" } }),
      );
      server.setTools([{ name: "c", run: () => "c" }]);
      await sleep(10); // nothing to await: what is checked is that nothing comes, not even after a timer's turn
      assert.equal(sent.length, 2, "nothing after the cancel, not even a response");
    } finally {
      server.close();
    }
  });

  test("over stdio: discover, a call with progress, an input-required round trip, cancelling a listen", async () => {
    await withTempDir("mcp-modern-", async (dir) => {
      writeFileSync(
        join(dir, "ask.ts"),
        `export default { run: async (_a: unknown, ctx: any) => {
          ctx.progress(1, 2);
          const answer = await ctx.elicit({ message: "name?", requestedSchema: { type: "object" } }, { key: "name" });
          return "hello " + answer.content.name;
        } };`,
      );
      await withServer([dir, "--watch"], async (server) => {
        const discover = await server.request(1, "server/discover", modern());
        assert.deepEqual(discover.result.supportedVersions, ["2026-07-28"]);
        server.send({
          jsonrpc: "2.0",
          id: 2,
          method: "tools/call",
          params: modern({ name: "ask" }, { progressToken: "p" }),
        });
        const first = (await server.response(2)).result;
        assert.equal(first.resultType, "input_required");
        assert.ok(server.messages.some((m) => m.method === "notifications/progress" && m.params.progressToken === "p"));
        const retry = await server.request(
          3,
          "tools/call",
          modern({
            name: "ask",
            inputResponses: { name: { action: "accept", content: { name: "Ada" } } },
            requestState: first.requestState,
          }),
        );
        assert.equal(retry.result.content[0].text, "hello Ada");
        server.send({
          jsonrpc: "2.0",
          id: 4,
          method: "subscriptions/listen",
          params: modern({ notifications: { toolsListChanged: true } }),
        });
        await server.until(
          () => server.messages.some((m) => m.method === "notifications/subscriptions/acknowledged"),
          "ack",
        );
        writeFileSync(join(dir, "two.ts"), 'export default { run: () => "two" };');
        await server.until(
          () => server.messages.some((m) => m.method === "notifications/tools/list_changed"),
          "list_changed on the listen stream",
        );
        const changed = server.messages.find((m) => m.method === "notifications/tools/list_changed")!;
        assert.deepEqual(changed.params, { _meta: { "io.modelcontextprotocol/subscriptionId": 4 } });
        server.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 4 } });
        assert.deepEqual((await server.request(5, "tools/list", modern())).result.tools.length, 2);
        assert.ok(!server.messages.some((m) => m.id === 4), "a cancelled listen gets no response");
      });
    });
  });

  test("initialize pins the legacy era: an envelope after it is plain _meta", async () => {
    const { server, sent, ask, until } = inProcess({ tools: [{ name: "hi", run: () => "hello" }] });
    try {
      await until(() => sent.find((m) => m.id === "init"), "initialize's answer");
      const pinged = await ask("ping", modern());
      assert.deepEqual(pinged.result, {});
      assert.ok(sent.every((m) => m.result?.resultType === undefined));
    } finally {
      server.close();
    }
  });

  test("requestState is bound to the arguments, the principal and 10 minutes; any other use is -32602", async () => {
    const tool = {
      name: "rm",
      inputSchema: { type: "object", properties: { path: { type: "string" } } },
      run: async ({ path }: Message, ctx: ToolContext) => {
        const answer = await ctx.elicit({ message: `remove ${path}?`, requestedSchema: { type: "object" } });
        return `${answer.action} ${path}`;
      },
    };
    const { server, ask } = stateless({ tools: [tool], stateKey: "k" });
    try {
      const first = (await ask("tools/call", { name: "rm", arguments: { path: "/tmp/harmless" } })).result;
      const yes = { "elicit-1": { action: "accept", content: {} } };
      const state = first.requestState;
      const payload = JSON.parse(Buffer.from(state.split(".")[0], "base64url").toString());
      assert.ok(payload.x - Date.now() <= 10 * 60_000, "expires within 10 minutes");
      const other = await ask("tools/call", {
        name: "rm",
        arguments: { path: "/etc/passwd" },
        inputResponses: yes,
        requestState: state,
      });
      assert.equal(other.error?.code, -32602, "other arguments");
      const reordered = await ask("tools/call", {
        name: "rm",
        arguments: { path: "/tmp/harmless" },
        inputResponses: yes,
        requestState: state,
      });
      assert.equal(reordered.result.content[0].text, "accept /tmp/harmless");
      server.auth = { sub: "mallory", scopes: [], clientId: "x", claims: {} };
      const stolen = await ask("tools/call", {
        name: "rm",
        arguments: { path: "/tmp/harmless" },
        inputResponses: yes,
        requestState: state,
      });
      assert.equal(stolen.error?.code, -32602, "another principal");
    } finally {
      server.close();
    }
  });
});

describe("7. MCP server: resources, prompts, completion", () => {
  test("capabilities name only what DIR provides", async () => {
    const caps = async (dir: string, extra: string[] = []) => {
      let capabilities: Message = {};
      await withServer([dir, ...extra], async (server) => {
        capabilities = (await server.initialize()).result.capabilities;
      });
      return capabilities;
    };
    assert.deepEqual(await caps("testdata/tools"), { tools: { listChanged: false }, logging: {} });
    assert.deepEqual(await caps("testdata/conformance"), {
      tools: { listChanged: false },
      resources: { subscribe: true, listChanged: false },
      prompts: { listChanged: false },
      completions: {},
      logging: {},
      // Its task fixtures, for a 2025-11-25 client: that revision's experimental tasks.
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    });
    assert.deepEqual((await caps("testdata/tools", ["--watch"])).tools, { listChanged: true });
  });

  test("resources: list, templates, read text, binary and templated, not found", async () => {
    const { ask } = inProcess({
      resources: [
        { uri: "mem://a", name: "a", mimeType: "text/plain", read: () => "text of a" },
        { uri: "mem://b", name: "b", read: () => new Uint8Array([0, 1, 255]) },
        { uri: "mem://c", name: "c", read: () => ({ k: 1 }) },
        {
          uriTemplate: "mem://users/{id}/posts{?page}",
          name: "posts",
          read: (uri: string, p: Record<string, string>) => `${p.id}:${p.page}:${uri}`,
        },
      ],
    });
    assert.deepEqual((await ask("resources/list")).result.resources.map((r: Message) => r.uri), [
      "mem://a",
      "mem://b",
      "mem://c",
    ]);
    assert.deepEqual((await ask("resources/templates/list")).result.resourceTemplates, [
      { uriTemplate: "mem://users/{id}/posts{?page}", name: "posts" },
    ]);
    assert.deepEqual((await ask("resources/read", { uri: "mem://a" })).result, {
      contents: [{ uri: "mem://a", text: "text of a", mimeType: "text/plain" }],
    });
    assert.deepEqual((await ask("resources/read", { uri: "mem://b" })).result.contents[0], {
      uri: "mem://b",
      blob: "AAH/",
      mimeType: "application/octet-stream",
    });
    assert.deepEqual((await ask("resources/read", { uri: "mem://c" })).result.contents[0].mimeType, "application/json");
    assert.equal(
      (await ask("resources/read", { uri: "mem://users/42/posts?page=2" })).result.contents[0].text,
      "42:2:mem://users/42/posts?page=2",
    );
    const missing = await ask("resources/read", { uri: "mem://zzz" });
    assert.equal(missing.error.code, -32002);
    assert.equal((await ask("prompts/list")).error.code, ErrorCode.MethodNotFound, "no prompts, no prompts/list");
  });

  test("resources/subscribe sends notifications/resources/updated until unsubscribe", async () => {
    let fire = () => {};
    let stopped = 0;
    const { ask, sent } = inProcess({
      resources: [{
        uri: "mem://w",
        name: "w",
        read: () => "w",
        watch: (_uri: string, onUpdate: () => void) => {
          fire = onUpdate;
          return () => stopped++;
        },
      }, { uri: "mem://still", name: "still", read: () => "" }],
    });
    assert.deepEqual((await ask("resources/subscribe", { uri: "mem://w" })).result, {});
    fire();
    fire();
    assert.equal(sent.filter((m) => m.method === "notifications/resources/updated").length, 2);
    assert.deepEqual(sent.find((m) => m.method === "notifications/resources/updated")!.params, { uri: "mem://w" });
    assert.deepEqual((await ask("resources/unsubscribe", { uri: "mem://w" })).result, {});
    fire();
    assert.equal(sent.filter((m) => m.method === "notifications/resources/updated").length, 2);
    assert.equal(stopped, 1);
    assert.equal((await ask("resources/subscribe", { uri: "mem://still" })).error.code, ErrorCode.InvalidParams);
  });

  test("prompts: list, get with arguments, missing and unknown ones", async () => {
    const { ask } = inProcess({
      prompts: [
        { name: "hi", description: "Greets", get: () => "hello" },
        {
          name: "pair",
          arguments: [{ name: "a", required: true }, { name: "b" }],
          get: ({ a, b }) => [{ role: "user", content: { type: "text", text: `${a}-${b}` } }],
          complete: (name: string, value: string) => [`${name}:${value}1`, `${name}:${value}2`],
        },
      ],
    });
    assert.deepEqual((await ask("prompts/list")).result.prompts.map((p: Message) => p.name), ["hi", "pair"]);
    assert.deepEqual((await ask("prompts/get", { name: "hi" })).result, {
      description: "Greets",
      messages: [{ role: "user", content: { type: "text", text: "hello" } }],
    });
    assert.equal(
      (await ask("prompts/get", { name: "pair", arguments: { a: "x", b: "y" } })).result.messages[0].content.text,
      "x-y",
    );
    assert.match((await ask("prompts/get", { name: "pair" })).error.message, /needs a/);
    assert.equal((await ask("prompts/get", { name: "nope" })).error.code, ErrorCode.InvalidParams);
    assert.equal((await ask("prompts/get", { name: "pair", arguments: { a: 1 } })).error.code, ErrorCode.InvalidParams);
    assert.deepEqual(
      (await ask("completion/complete", {
        ref: { type: "ref/prompt", name: "pair" },
        argument: { name: "a", value: "v" },
      }))
        .result,
      { completion: { values: ["a:v1", "a:v2"], total: 2, hasMore: false } },
    );
  });

  test("ctx.sample reaches a client that declared sampling, and follows the call's cancellation", async () => {
    const tool = defineTool({
      name: "ask",
      run: async (_args: unknown, ctx: { sample(p: object): Promise<Message> }) => {
        const answer = await ctx.sample({ messages: [], maxTokens: 5 });
        return answer.content.text;
      },
    });
    const { sent, record, until } = recorder();
    const server = new McpServer({ tools: [tool] }, record);
    server.receive(JSON.stringify({ ...INIT, params: { ...INIT.params, capabilities: { sampling: {} } } }));
    server.receive('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask"}}');
    const request = await until(() => sent.find((m) => m.method === "sampling/createMessage"), "the first question");
    server.receive(
      JSON.stringify({ jsonrpc: "2.0", id: request.id, result: { content: { type: "text", text: "sampled" } } }),
    );
    const first = await until(() => sent.find((m) => m.id === 1 && !m.method), "the first call's answer");
    assert.deepEqual(first.result.content, [{ type: "text", text: "sampled" }]);
    server.receive('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask"}}');
    const second = await until(
      () => sent.filter((m) => m.method === "sampling/createMessage")[1],
      "the second question",
    );
    server.receive('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}');
    await until(
      () => sent.some((m) => m.method === "notifications/cancelled" && m.params.requestId === second.id),
      "the sampling request cancelled with the call",
    );
    // A ping after the cancel: an answer to the cancelled call would come before the ping's.
    server.receive('{"jsonrpc":"2.0","id":3,"method":"ping"}');
    await until(() => sent.find((m) => m.id === 3), "the ping's answer");
    assert.ok(!sent.some((m) => m.id === 2 && !m.method));
  });
});

describe("7f. Tasks: calls that outlive their request", () => {
  test("a task id never starts with - or _ (a command-line word), whatever the randomness gives", () => {
    for (const byte of [0xfb, 0xff, 0xfe]) { // base64url: 0xfb… starts "-", 0xff… "_"
      const word = randomWord(16, (array) => array.fill(byte));
      assert.doesNotMatch(word, /^[-_]/, word);
      assert.equal(word.length, 22);
    }
  });

  const TASKS = { extensions: { "io.modelcontextprotocol/tasks": {} } };
  /** The 2026-07-28 _meta of a client that declares the tasks extension (and can answer forms). */
  const declared = { "io.modelcontextprotocol/clientCapabilities": { elicitation: {}, ...TASKS } };
  /** A promise and what settles it, for a tool the test lets finish. */
  const gate = () => {
    let open!: (value?: unknown) => void;
    const opened = new Promise((resolve) => open = resolve);
    return { open, opened };
  };
  /**
   * tasks/get until `done` says the task is there, or 15 s (a deadline for a failure only). Polled, as a client
   * follows a task: a task's status changes send nothing unless someone listens.
   */
  const until = async (
    ask: (m: string, p?: unknown, meta?: Message) => Promise<Message>,
    taskId: string,
    done: (task: Message) => boolean,
  ) => {
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const task = (await ask("tasks/get", { taskId }, declared)).result;
      if (task && done(task)) return task;
      await sleep(5);
    }
    throw new Error(`task ${taskId} never got there`);
  };

  test("a call becomes a task when run calls ctx.task() or outlives the grace; tasks/get follows it to its result", async () => {
    const release = gate();
    let slow = gate();
    const tools = [
      {
        name: "render",
        execution: { taskSupport: "optional" as const },
        run: async (_: unknown, ctx: ToolContext) => {
          ctx.progress(0, 3, "warming up");
          await ctx.task("queued");
          ctx.progress(1, 3, "rendering pages");
          await release.opened;
          return { pages: 3 };
        },
      },
      { name: "quick", execution: { taskSupport: "optional" as const }, run: () => Promise.resolve("at once") },
      {
        name: "slowish",
        execution: { taskSupport: "optional" as const, ttlMs: 60_000 },
        run: async (_: unknown, ctx: ToolContext) => {
          ctx.progress(1, 2); // before the task: its first statusMessage
          await slow.opened;
          return "done";
        },
      },
      { name: "plain", run: () => "plain" },
    ];
    const { server, ask } = stateless({ tools, taskGrace: 20, taskPollInterval: 250 });
    try {
      const discover = (await ask("server/discover")).result;
      assert.deepEqual(discover.capabilities.extensions, { "io.modelcontextprotocol/tasks": {} });
      const listed = (await ask("tools/list")).result.tools;
      assert.ok(listed.every((tool: Message) => !("execution" in tool)), "execution stays private in 2026-07-28");

      const quick = (await ask("tools/call", { name: "quick" }, declared)).result;
      assert.deepEqual([quick.resultType, quick.content[0].text], ["complete", "at once"], "settled first: no task");

      const created = (await ask("tools/call", { name: "render" }, declared)).result;
      assert.equal(created.resultType, "task");
      assert.match(created.taskId, /^[\w-]{22}$/, "128 random bits, base64url");
      assert.deepEqual([created.status, created.statusMessage, created.ttlMs, created.pollIntervalMs], [
        "working",
        "queued",
        3_600_000,
        250,
      ]);
      assert.match(created.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/);
      assert.ok(!("result" in created) && !("error" in created) && !("inputRequests" in created));
      const working = await until(ask, created.taskId, (task) => task.statusMessage === "rendering pages");
      assert.deepEqual([working.resultType, working.status], ["complete", "working"]);
      release.open();
      const completed = await until(ask, created.taskId, (task) => task.status === "completed");
      assert.deepEqual(completed.result, {
        content: [{ type: "text", text: '{"pages":3}' }],
        structuredContent: { pages: 3 },
      });

      // Its run waits until the test lets it end: the answer while it waits is a task, made by the grace.
      const graced = (await ask("tools/call", { name: "slowish" }, declared)).result;
      assert.deepEqual([graced.resultType, graced.statusMessage, graced.ttlMs], ["task", "1/2", 60_000]);
      slow.open();
      const ended = await until(ask, graced.taskId, (task) => task.status === "completed");
      assert.equal(ended.result.content[0].text, "done");

      // A client without the extension: the same tools answer as plain calls, even one that outlives the grace (its
      // 200 ms timer is due after the 20 ms grace, and timers fire in the order they are due, however busy the machine).
      slow = gate();
      setTimeout(slow.open, 200);
      const undeclared = (await ask("tools/call", { name: "slowish" })).result;
      assert.deepEqual([undeclared.resultType, undeclared.content[0].text], ["complete", "done"]);
      release.open();
      assert.equal((await ask("tools/call", { name: "render" })).result.content[0].text, '{"pages":3}');
      assert.equal((await ask("tools/call", { name: "plain" }, declared)).result.resultType, "complete");
    } finally {
      server.close();
    }
  });

  test("questions inside a task are its inputRequests, answered by tasks/update without running run again", async () => {
    let runs = 0;
    const tool = {
      name: "deploy",
      execution: { taskSupport: "required" as const },
      run: async (_: unknown, ctx: ToolContext) => {
        runs++;
        await ctx.task();
        const [region, go] = await Promise.all([
          ctx.elicit({
            message: "Region?",
            requestedSchema: { type: "object", properties: { region: { type: "string" } } },
          }, { key: "region" }),
          ctx.elicit({ message: "Go?", requestedSchema: { type: "object", properties: { go: { type: "boolean" } } } }),
        ]);
        return `${(region.content as Message).region} ${(go.content as Message).go}`;
      },
    };
    const { server, ask } = stateless({ tools: [tool] });
    try {
      const { taskId } = (await ask("tools/call", { name: "deploy" }, declared)).result;
      const asking = await until(ask, taskId, (task) => task.status === "input_required");
      assert.deepEqual(Object.keys(asking.inputRequests), ["region", "elicit-1"]);
      assert.equal(asking.inputRequests.region.method, "elicitation/create");
      const ack = (await ask("tasks/update", {
        taskId,
        inputResponses: { region: { action: "accept", content: { region: "eu" } }, "never-asked": { ignored: true } },
      }, declared)).result;
      assert.deepEqual(Object.keys(ack).sort(), ["_meta", "resultType"]);
      const partly = (await ask("tasks/get", { taskId }, declared)).result;
      assert.deepEqual([partly.status, Object.keys(partly.inputRequests)], ["input_required", ["elicit-1"]]);
      await ask(
        "tasks/update",
        { taskId, inputResponses: { "elicit-1": { action: "accept", content: { go: true } } } },
        declared,
      );
      const done = await until(ask, taskId, (task) => task.status === "completed");
      assert.equal(done.result.content[0].text, "eu true");
      assert.equal(runs, 1, "run ran once: answers resume it in place");

      // Asking for what the creating request did not declare fails the task with -32021.
      const sampler = {
        name: "summarise",
        execution: { taskSupport: "required" as const },
        run: async (_: unknown, ctx: ToolContext) => {
          await ctx.task();
          return await ctx.sample({ messages: [] });
        },
      };
      server.setTools([sampler]);
      const sampled = (await ask("tools/call", { name: "summarise" }, declared)).result;
      const failed = await until(ask, sampled.taskId, (task) => task.status === "failed");
      assert.equal(failed.error.code, -32021);
    } finally {
      server.close();
    }
  });

  test("errors: -32021 before run and for tasks/* without the extension, -32601 tasks/result, -32602 unknown ids", async () => {
    let ran = false;
    const tools = [
      {
        name: "required",
        execution: { taskSupport: "required" as const },
        run: () => Promise.resolve(void (ran = true)),
      },
      {
        name: "coded",
        execution: { taskSupport: "optional" as const },
        run: () => {
          throw Object.assign(new Error("backend said no"), { code: -32603, data: { retry: false } });
        },
      },
      {
        name: "crashing",
        execution: { taskSupport: "optional" as const },
        run: async (_: unknown, ctx: ToolContext) => {
          await ctx.task();
          throw new Error("job crashed");
        },
      },
      {
        name: "refused",
        execution: { taskSupport: "optional" as const },
        run: async (_: unknown, ctx: ToolContext) => {
          await ctx.task();
          throw new RpcError(-32001, "quota exhausted");
        },
      },
    ];
    const { server, ask } = stateless({ tools });
    try {
      const required = await ask("tools/call", { name: "required" });
      assert.deepEqual(required.error, {
        code: -32021,
        message: "Missing required client capability: the io.modelcontextprotocol/tasks extension",
        data: { requiredCapabilities: TASKS },
      });
      assert.equal(ran, false, "refused before run started");
      for (const method of ["tasks/get", "tasks/update", "tasks/cancel", "tasks/result"]) {
        assert.equal((await ask(method, { taskId: "x", inputResponses: {} })).error.code, -32021, method);
      }
      assert.equal((await ask("tasks/result", { taskId: "x" }, declared)).error.code, -32601);
      assert.equal((await ask("tasks/list", {}, declared)).error.code, -32601);
      for (const method of ["tasks/get", "tasks/update", "tasks/cancel"]) {
        assert.equal((await ask(method, { taskId: "nope", inputResponses: {} }, declared)).error.code, -32602, method);
      }
      // Not a task: a coded throw is a JSON-RPC error; in a task it fails the task, a plain throw completes it.
      assert.deepEqual((await ask("tools/call", { name: "coded" }, declared)).error, {
        code: -32603,
        message: "backend said no",
        data: { retry: false },
      });
      const crashed = (await ask("tools/call", { name: "crashing" }, declared)).result;
      const completed = await until(ask, crashed.taskId, (task) => task.status !== "working");
      assert.deepEqual([completed.status, completed.result.isError], ["completed", true]);
      assert.match(completed.result.content[0].text, /job crashed/);
      const refused = (await ask("tools/call", { name: "refused" }, declared)).result;
      const failed = await until(ask, refused.taskId, (task) => task.status !== "working");
      assert.deepEqual([failed.status, failed.error, "result" in failed], [
        "failed",
        { code: -32001, message: "quota exhausted" },
        false,
      ]);
    } finally {
      server.close();
    }
  });

  test("tasks/cancel cancels at once and drops the late result; the TTL expires a task; --max-tasks bounds them", async () => {
    const aborted: string[] = [];
    let release = gate();
    const returned = gate();
    const tools = [
      {
        name: "long",
        execution: { taskSupport: "optional" as const },
        run: async (_: unknown, ctx: ToolContext) => {
          await ctx.task();
          ctx.signal.addEventListener("abort", () => aborted.push(String((ctx.signal.reason as Error).message)));
          await release.opened;
          returned.open();
          return "late";
        },
      },
      {
        name: "must",
        execution: { taskSupport: "required" as const },
        run: async (_: unknown, ctx: ToolContext) => {
          await ctx.task();
          await release.opened;
          return "must";
        },
      },
    ];
    const { server, ask } = stateless({ tools, taskTtl: 60_000, maxTasks: 2 });
    try {
      const first = (await ask("tools/call", { name: "long" }, declared)).result;
      const cancelled = (await ask("tasks/cancel", { taskId: first.taskId }, declared)).result;
      assert.deepEqual(Object.keys(cancelled).sort(), ["_meta", "resultType"]);
      assert.equal((await ask("tasks/get", { taskId: first.taskId }, declared)).result.status, "cancelled");
      assert.deepEqual(aborted, ["cancelled by the client"]);
      assert.equal((await ask("tasks/cancel", { taskId: first.taskId }, declared)).result.resultType, "complete");
      release.open(); // its run ends now: too late, dropped
      await returned.opened;
      await new Promise((resolve) => setImmediate(resolve)); // a turn: what the server does with the late result
      const dropped = (await ask("tasks/get", { taskId: first.taskId }, declared)).result;
      assert.deepEqual([dropped.status, "result" in dropped], ["cancelled", false]);
      release = gate();

      const second = (await ask("tools/call", { name: "long" }, declared)).result;
      const third = (await ask("tools/call", { name: "long" }, declared)).result;
      assert.equal(third.resultType, "task", "the cancelled task made room");
      // Two running: the store is full. An optional tool answers as a plain call, a required one cannot.
      const full = ask("tools/call", { name: "long" }, declared);
      const refused = await ask("tools/call", { name: "must" }, declared);
      assert.deepEqual(refused.error, { code: -32603, message: "Internal error: too many tasks" });
      release.open();
      assert.deepEqual((await full).result.content, [{ type: "text", text: "late" }]);
      assert.equal((await ask("tasks/get", { taskId: first.taskId }, declared)).error.code, -32602, "made room");

      // The TTL (a minute from creation) ends them: unknown from then on. The clock is moved, not waited for.
      for (const { taskId } of [second, third]) await until(ask, taskId, (task) => task.status === "completed");
      const realNow = Date.now;
      Date.now = () => realNow() + 60_000;
      try {
        for (const { taskId } of [second, third]) {
          assert.equal((await ask("tasks/get", { taskId }, declared)).error.code, -32602);
        }
      } finally {
        Date.now = realNow;
      }
    } finally {
      server.close();
    }
  });

  test("a task is bound to its principal; subscriptions/listen sends notifications/tasks until all are terminal", async () => {
    const release = gate();
    const tool = {
      name: "job",
      execution: { taskSupport: "optional" as const },
      run: async (_: unknown, ctx: ToolContext) => {
        await ctx.task("started");
        await release.opened;
        ctx.progress(1, 1, "finishing");
        return "ok";
      },
    };
    const { server, sent, ask, until: sentUntil } = stateless({ tools: [tool], instanceId: "east-1" });
    try {
      server.auth = { sub: "alice", scopes: [], claims: {} };
      const { taskId } = (await ask("tools/call", { name: "job" }, declared)).result;
      assert.match(taskId, /^east-1\.[\w-]{22}$/);
      server.auth = { sub: "bob", scopes: [], claims: {} };
      assert.equal((await ask("tasks/get", { taskId }, declared)).error.code, -32602, "as if it did not exist");
      const refused = await ask("subscriptions/listen", { notifications: { taskIds: [taskId] } });
      assert.equal(refused.error.code, -32021);
      server.auth = { sub: "alice", scopes: [], claims: {} };
      const listening = ask("subscriptions/listen", { notifications: { taskIds: [taskId, "unknown"] } }, declared);
      const ack = await sentUntil(
        () => sent.find((m) => m.method === "notifications/subscriptions/acknowledged"),
        "the acknowledgement",
      );
      assert.deepEqual(ack.params.notifications, { taskIds: [taskId] });
      release.open();
      const ended = await listening;
      assert.equal(ended.result.resultType, "complete");
      const changes = sent.filter((m) => m.method === "notifications/tasks").map((m) => m.params);
      assert.deepEqual(changes.map((task) => [task.status, task.statusMessage]), [
        ["working", "finishing"],
        ["completed", "finishing"],
      ]);
      assert.equal(changes[1].result.content[0].text, "ok");
      assert.deepEqual(Object.keys(changes[0]._meta), ["io.modelcontextprotocol/subscriptionId"]);
    } finally {
      server.close();
    }
  });
});

describe("7f. Tasks: the 2025-11-25 experimental tasks, for a legacy client", () => {
  /** A legacy HTTP session of `handler` that declared tasks; `ask` sends a request and reads its answer. */
  const taskSession = async (handler: McpHandler) => {
    const init = await handler(legacyPost({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: { tasks: {} }, clientInfo: { name: "t", version: "1" } },
    }));
    const headers = { "mcp-session-id": init.headers.get("mcp-session-id")!, "mcp-protocol-version": "2025-11-25" };
    await init.body?.cancel();
    await handler(legacyPost({ jsonrpc: "2.0", method: "notifications/initialized" }, headers));
    let next = 0;
    return async (method: string, params: Message = {}) =>
      await rpcAnswer(await handler(legacyPost({ jsonrpc: "2.0", id: ++next, method, params }, headers)));
  };

  test("without a token subject a legacy session is its tasks' principal: another session cannot list, read or cancel them", async () => {
    const handler = createHandler({
      tools: [{ name: "job", execution: { taskSupport: "required" as const }, run: () => "alice's secret" }],
    });
    try {
      const alice = await taskSession(handler);
      const bob = await taskSession(handler);
      const { taskId } = (await alice("tools/call", { name: "job", arguments: {}, task: {} })).result.task;
      assert.equal((await alice("tasks/result", { taskId })).result.content[0].text, "alice's secret");
      assert.deepEqual((await bob("tasks/list")).result.tasks, [], "bob lists none of alice's");
      for (const method of ["tasks/result", "tasks/get", "tasks/cancel"]) {
        assert.equal((await bob(method, { taskId })).error.code, -32602, method);
      }
      assert.deepEqual((await alice("tasks/list")).result.tasks.map((task: Message) => task.taskId), [taskId]);
    } finally {
      handler.close();
    }
  });

  test("--max-tasks counts per principal: a full share refuses only its owner, and room is never another's unread result", async () => {
    // 10 tasks in all: a tenth, one, per principal (each legacy session here).
    const handler = createHandler({
      maxTasks: 10,
      tools: [{ name: "job", execution: { taskSupport: "required" as const }, run: () => "done" }],
    });
    try {
      const sessions = await Promise.all(Array.from({ length: 11 }, () => taskSession(handler)));
      const call = (ask: (typeof sessions)[number]) => ask("tools/call", { name: "job", arguments: {}, task: {} });
      const first = (await call(sessions[0])).result.task.taskId;
      // Its own finished task makes room for its next one (its own, though unread).
      const second = (await call(sessions[0])).result.task.taskId;
      assert.equal((await sessions[0]("tasks/get", { taskId: first })).error.code, -32602, "its own oldest, gone");
      for (const ask of sessions.slice(1, 10)) assert.ok((await call(ask)).result.task.taskId);
      // The store is full of ten principals' unread results: the eleventh is refused, none of theirs forgotten.
      const refused = await call(sessions[10]);
      assert.equal(refused.error.code, -32603, JSON.stringify(refused));
      assert.match(refused.error.message, /too many tasks/);
      assert.equal((await sessions[0]("tasks/result", { taskId: second })).result.content[0].text, "done");
      // Once one is read, it may make room.
      assert.ok((await call(sessions[10])).result.task.taskId);
      for (const ask of sessions.slice(1, 10)) {
        const [task] = (await ask("tasks/list")).result.tasks;
        assert.equal((await ask("tasks/result", { taskId: task.taskId })).result.content[0].text, "done");
      }
    } finally {
      handler.close();
    }
  });

  test("a client that declared tasks and sends `task` gets one: tasks/get, tasks/result, tasks/list, status notifications", async () => {
    const { sent, record, until } = recorder();
    let release!: () => void;
    const released = new Promise<void>((resolve) => release = resolve);
    const tools = [
      {
        name: "deploy",
        execution: { taskSupport: "required" as const },
        run: async (_: unknown, ctx: ToolContext) => {
          const answer = await ctx.elicit({ message: "Go?", requestedSchema: { type: "object", properties: {} } });
          await released;
          return `deployed (${answer.action})`;
        },
      },
      { name: "instant", execution: { taskSupport: "optional" as const }, run: () => "at once" },
      { name: "plain", run: () => "plain" },
    ];
    const server = new McpServer({ tools }, record);
    const answer = (id: unknown) => until(() => sent.find((m) => m.id === id && !("method" in m)), `answer ${id}`);
    const status = (wanted: string) =>
      until(
        () => sent.find((m) => m.method === "notifications/tasks/status" && m.params.status === wanted),
        `the task ${wanted}`,
      );
    const ask = (id: string, method: string, params: Message = {}) => {
      server.receive(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
      return answer(id);
    };
    try {
      const init = await ask("i", "initialize", {
        protocolVersion: "2025-11-25",
        capabilities: { tasks: {}, elicitation: {} },
        clientInfo: { name: "t", version: "1" },
      });
      assert.deepEqual(init.result.capabilities.tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } });
      const listed = (await ask("l", "tools/list")).result.tools;
      assert.deepEqual(listed.map((tool: Message) => tool.execution), [
        { taskSupport: "required" },
        { taskSupport: "optional" },
        undefined,
      ]);
      const created = (await ask("c", "tools/call", { name: "deploy", task: { ttl: 60000 } })).result;
      const { taskId } = created.task;
      assert.deepEqual(Object.keys(created.task).sort(), [
        "createdAt",
        "lastUpdatedAt",
        "pollInterval",
        "status",
        "taskId",
        "ttl",
      ]);
      // Its question is a request to the client, tagged with the task; the task is input_required meanwhile.
      const question = await until(() => sent.find((m) => m.method === "elicitation/create"), "the question");
      assert.deepEqual(question.params._meta["io.modelcontextprotocol/related-task"], { taskId });
      await status("input_required");
      assert.equal((await ask("g1", "tasks/get", { taskId })).result.status, "input_required");
      const result = ask("r", "tasks/result", { taskId }); // waits for the end
      server.receive(JSON.stringify({ jsonrpc: "2.0", id: question.id, result: { action: "accept", content: {} } }));
      await status("working");
      assert.equal((await ask("g2", "tasks/get", { taskId })).result.status, "working");
      release();
      const ended = (await result).result;
      assert.equal(ended.content[0].text, "deployed (accept)");
      assert.deepEqual(ended._meta["io.modelcontextprotocol/related-task"], { taskId });
      const statuses = sent.filter((m) => m.method === "notifications/tasks/status").map((m) => m.params.status);
      assert.deepEqual(statuses, ["input_required", "working", "completed"]);
      assert.deepEqual((await ask("ls", "tasks/list")).result.tasks.map((task: Message) => task.taskId), [taskId]);
      assert.equal((await ask("x", "tasks/cancel", { taskId })).error.code, -32602, "it has ended");
      assert.equal((await ask("u", "tasks/update", { taskId })).error.code, -32601);
      const instant = (await ask("n", "tools/call", { name: "instant", task: {} })).result;
      assert.equal(instant.task.status, "working", "asked for a task: one, even for an answer at once");
      assert.equal(
        (await ask("nr", "tasks/result", { taskId: instant.task.taskId })).result.content[0].text,
        "at once",
      );
      assert.equal(
        (await ask("p", "tools/call", { name: "instant" })).result.content[0].text,
        "at once",
        "no task param",
      );
    } finally {
      server.close();
    }
    // A client without the tasks capability: the same call runs at once, and tasks/* do not exist.
    const { server: other, ask: askOther } = inProcess({
      tools: [{ name: "job", execution: { taskSupport: "required" as const }, run: () => Promise.resolve("ran") }],
    });
    try {
      assert.equal((await askOther("tools/call", { name: "job", task: {} })).result.content[0].text, "ran");
      assert.equal((await askOther("tasks/get", { taskId: "x" })).error.code, -32601);
    } finally {
      other.close();
    }
  });
});

describe("7g. Skills: folders of instructions as skill:// resources", () => {
  test("skills/list on mcp.ts's own server pages by --page-size", async () => {
    const server = new ServerProcess([HERE + "testdata/conformance", "--page-size", "1"]);
    const meta = {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": {},
    };
    try {
      const first = (await server.request("p1", "skills/list", { _meta: meta })).result;
      assert.equal(first.skills.length, 1, JSON.stringify(first));
      assert.equal(typeof first.nextCursor, "string");
      const second = (await server.request("p2", "skills/list", { cursor: first.nextCursor, _meta: meta })).result;
      assert.equal(second.skills.length, 1);
      assert.equal(second.nextCursor, undefined);
      assert.notEqual(first.skills[0].uri, second.skills[0].uri);
    } finally {
      server.kill();
    }
  });

  test("the frontmatter's YAML subset reads as a YAML 1.2 parser reads it, and anything else names its line", () => {
    // Expected values: what the yaml package (2.9.1, the conformance suite's parser) gives for each text.
    const cases: [string, unknown][] = [
      ["name: a\ndescription: b", { name: "a", description: "b" }],
      [
        "a: 1\nb: -2\nc: +3\nd: 012\ne: 0o17\nf: 0x1F\ng: 1.5\nh: .5\ni: 1e3\nj: -1.2E-3\nk: 1_000\nl: 0b11",
        { a: 1, b: -2, c: 3, d: 12, e: 15, f: 31, g: 1.5, h: 0.5, i: 1000, j: -0.0012, k: "1_000", l: "0b11" },
      ],
      [
        "t: true\nf: False\nn: null\nn2: ~\nn3:\ny: yes\nno: no\non: on",
        { t: true, f: false, n: null, n2: null, n3: null, y: "yes", no: "no", on: "on" },
      ],
      [
        "q1: 'it''s'\nq2: \"tab\\there \\u00e9 \\x41 \\\\ \\\"\"\nq3: \"\"\nq4: ''",
        { q1: "it's", q2: 'tab\there é A \\ "', q3: "", q4: "" },
      ],
      [
        "list:\n- a\n- b\nnested:\n  k: v\n  deeper:\n    - 1\n    - two\n    - x: 1\n      y: 2",
        { list: ["a", "b"], nested: { k: "v", deeper: [1, "two", { x: 1, y: 2 }] } },
      ],
      ["seq:\n  - - a\n    - b\n  - c", { seq: [["a", "b"], "c"] }],
      [
        "url: http://example.com/x#y\ncolon: a:b\nhash: a#b\ncomment: x # comment\n# full line\nempty: # c",
        { url: "http://example.com/x#y", colon: "a:b", hash: "a#b", comment: "x", empty: null },
      ],
      [
        "key with spaces: value\n'quoted key': v\n\"dq\": w\n1: one\ntrue: yes\nnull: nothing",
        { "key with spaces": "value", "quoted key": "v", dq: "w", "1": "one", true: "yes", "": "nothing" },
      ],
      ["date: 2024-01-01\nver: 1.2.3\nneg: -.5", { date: "2024-01-01", ver: "1.2.3", neg: -0.5 }],
      // Scalars over several lines: plain ones folded, block scalars literal (|) or folded (>), chomped (- +).
      ["description: Extract text and tables\n  from PDFs.", { description: "Extract text and tables from PDFs." }],
      ["d: one\n  two\n\n  three\nnext: x", { d: "one two\nthree", next: "x" }],
      ["a: 1\n  2", { a: "1 2" }],
      ["list:\n  - item one\n    continued", { list: ["item one continued"] }],
      ["d: >\n  folded line\n  and more\n\n  para two\ne: 1", { d: "folded line and more\npara two\n", e: 1 }],
      ["d: |\n  literal\n    indented\n  end\ne: 1", { d: "literal\n  indented\nend\n", e: 1 }],
      ["d: >-\n  strip\n  me\n", { d: "strip me" }],
      ["d: |+\n  keep\n\n", { d: "keep\n\n" }],
      ["d: |\n  a # not a comment\n\n  b\n", { d: "a # not a comment\n\nb\n" }],
      ["d: >\n  a\n    more\n  b\n", { d: "a\n  more\nb\n" }],
      ["d: >\n\n  lead blank\n", { d: "\nlead blank\n" }],
    ];
    // (as JSON: its mappings have no prototype)
    for (const [text, expected] of cases) {
      assert.deepEqual(JSON.parse(JSON.stringify(parseYamlSubset(text))), expected, text);
    }
    const refused: [string, RegExp][] = [
      ["a: [1, 2]", /line 1: a flow sequence/],
      ["a: {b: 1}", /line 1: a flow mapping/],
      ["a: &x 1", /line 1: an anchor/],
      ["a: !!str 1", /line 1: a tag/],
      ["a: 1\nb: b: c", /line 2: a mapping inside a value/],
      ["a: 1\na: 2", /line 2: the key "a" appears twice/],
      ["a: .inf", /line 1: \.inf has no JSON value/],
      ['a: "open', /line 1: a quoted scalar that does not end on its line/],
      ["a: b\n  c: d", /line 2: unexpected indentation/],
      ["a: b # note\n  c", /line 2: unexpected indentation/],
      ["a:\n\tb: 1", /line 2: a tab in the indentation/],
    ];
    for (const [text, why] of refused) assert.throws(() => parseYamlSubset(text), why, text);
    assert.deepEqual({ ...skillFrontmatter("\uFEFF---\nname: x\ndescription: y\n---  \nbody") }, {
      name: "x",
      description: "y",
    });
    assert.throws(() => skillFrontmatter("name: x\n"), /no frontmatter/);
    assert.throws(() => skillFrontmatter("---\nname: x\ndescription: [y]\n---\n"), /line 3: a flow sequence/);
    assert.throws(() => skillFrontmatter("---\n- a\n---\n"), /not a mapping/);
  });
});

// --- Helpers: 7i. Telemetry: the OTLP receiver (testdata/fake_otlp_receiver.ts) ------------------

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: Record<string, unknown> }[];
  status: { code?: number; message?: string };
  resource: Record<string, unknown>;
}

/** The fake collector: what it was sent, checked strictly (an `invalid` entry names a broken rule). */
async function otlpReceiver(mode: "ok" | "503" | "hang" | "flaky" = "ok") {
  const started = await startListening([HERE + "testdata/fake_otlp_receiver.ts", mode], /listening (http:\S+)/);
  // Whole lines only: a long export's line may be half printed yet.
  const entries = async () =>
    (await started.printed(/listening/)).split("\n").slice(0, -1).filter((line) => line.startsWith("{")).map((
      line,
    ) => JSON.parse(line));
  const spans = async (): Promise<OtlpSpan[]> =>
    (await entries()).filter((entry) => entry.body?.resourceSpans).flatMap((entry) =>
      entry.body.resourceSpans.flatMap((resourceSpans: Message) => {
        const resource = Object.fromEntries(
          (resourceSpans.resource as Message).attributes.map((a: Message) => [a.key, Object.values(a.value)[0]]),
        );
        return (resourceSpans.scopeSpans as Message[]).flatMap((scope) =>
          (scope.spans as OtlpSpan[]).map((span) => ({ ...span, resource }))
        );
      })
    );
  /** Every metric exported, flattened: its name, unit, temporality and data points (each process's exports). */
  const metrics = async (): Promise<OtlpMetric[]> =>
    (await entries()).filter((entry) => entry.path === "/v1/metrics").flatMap((entry) =>
      entry.body.resourceMetrics.flatMap((r: Message) =>
        r.scopeMetrics.flatMap((scope: Message) =>
          scope.metrics.map((metric: Message) => ({
            name: metric.name as string,
            unit: metric.unit as string,
            temporality: (metric.histogram ?? metric.sum).aggregationTemporality as number,
            points: (metric.histogram ?? metric.sum).dataPoints as OtlpPoint[],
          }))
        )
      )
    );
  return {
    url: started.url,
    entries,
    printed: started.printed,
    spans,
    metrics,
    /** The metrics once `enough` says so. */
    async waitForMetrics(enough: (metrics: OtlpMetric[]) => boolean, ms = 20_000): Promise<OtlpMetric[]> {
      const deadline = Date.now() + ms;
      for (;;) {
        const found = await metrics();
        if (enough(found) || Date.now() > deadline) return found;
        await started.next(deadline - Date.now()); // the receiver prints a line per export
      }
    },
    /** The spans once `enough` says so (each process exports at its exit, or after OTEL_BSP_SCHEDULE_DELAY). */
    async waitForSpans(enough: (spans: OtlpSpan[]) => boolean, ms = 20_000): Promise<OtlpSpan[]> {
      const deadline = Date.now() + ms;
      for (;;) {
        const invalid = (await entries()).filter((entry) => entry.invalid);
        assert.deepEqual(invalid, [], "the receiver's strict checks pass");
        const found = await spans();
        if (enough(found) || Date.now() > deadline) return found;
        await started.next(deadline - Date.now());
      }
    },
    close: started.close,
  };
}

interface OtlpPoint {
  attributes: { key: string; value: Message }[];
  count?: string;
  asInt?: string;
  min?: number;
  max?: number;
  sum?: number;
}

interface OtlpMetric {
  name: string;
  unit: string;
  temporality: number;
  points: OtlpPoint[];
}

/** A metric point's labels as a plain object. */
const labelsOf = (point: OtlpPoint) =>
  Object.fromEntries(point.attributes.map((a) => [a.key, Object.values(a.value)[0]]));

const attribute = (span: OtlpSpan, key: string) => {
  const found = span.attributes.find((a) => a.key === key);
  return found && Object.values(found.value)[0];
};

describe("7i. Telemetry: spans over OTLP/HTTP JSON, trace context through every hop", () => {
  test("the parent-based sampler follows the parent's flag: a TRACEPARENT not sampled (00) makes no span, a sampled one does", async () => {
    const receiver = await otlpReceiver();
    try {
      const call = (flags: string) =>
        runCli(["call", SERVE, "add", '{"a":1,"b":2}', "-e", "OTEL_SDK_DISABLED=true"], {
          env: {
            OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
            OTEL_METRICS_EXPORTER: "none",
            TRACEPARENT: `00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-${flags}`,
          },
          spawn: true,
        });
      assert.equal((await call("00")).stdout, "3\n");
      assert.deepEqual(await receiver.spans(), [], "the parent says: not sampled");
      assert.equal((await call("01")).stdout, "3\n");
      assert.ok((await receiver.spans()).length > 0, "a sampled parent: spans");
    } finally {
      receiver.close();
    }
  });

  test("spans past the queue's size are dropped and counted (otel.sdk.processor.span.processed, error.type queue_full)", () => {
    const telemetry = new Telemetry(
      { tracesEndpoint: "http://127.0.0.1:9/v1/traces", maxQueueSize: 2, scheduleDelayMs: 600_000 },
      {},
      () => {},
    );
    telemetry.metrics = new Metrics();
    for (let i = 0; i < 5; i++) telemetry.end(telemetry.start("s", 2, undefined, {}));
    const page = telemetry.metrics.prometheus();
    assert.match(page, /^otel_sdk_processor_span_processed_total\{error_type="queue_full"\} 3$/m);
    assert.match(page, /^otel_sdk_processor_span_processed_total 2$/m);
  });

  test("without the content opt-in a span carries no tool arguments or result; with it, both", async () => {
    const receiver = await otlpReceiver();
    const telemetry = { endpoint: receiver.url, scheduleDelayMs: 10, metricsEndpoint: undefined };
    const plain = createHandler({ tools: HTTP_TOOLS, telemetry: { ...telemetry, serviceName: "plain" } });
    const opted = createHandler({
      tools: HTTP_TOOLS,
      telemetry: { ...telemetry, serviceName: "opted", captureContent: true },
    });
    try {
      for (const handler of [plain, opted]) {
        await (await handler(modernPost("tools/call", { name: "add", arguments: { a: 40, b: 2 } }))).text();
      }
      const spans = await receiver.waitForSpans((all) =>
        all.filter((span) => span.name === "tools/call add").length >= 2
      );
      const service = (span: OtlpSpan) => span.resource["service.name"];
      const of = (name: string) => spans.find((span) => span.name === "tools/call add" && service(span) === name)!;
      assert.equal(attribute(of("plain"), "gen_ai.tool.call.arguments"), undefined);
      assert.equal(attribute(of("plain"), "gen_ai.tool.call.result"), undefined);
      assert.equal(attribute(of("opted"), "gen_ai.tool.call.arguments"), '{"a":40,"b":2}');
      assert.match(String(attribute(of("opted"), "gen_ai.tool.call.result")), /42/);
    } finally {
      plain.close();
      opted.close();
      receiver.close();
    }
  });

  test("a command without TRACEPARENT is one trace (its first span the root of every other) and posts its metrics once", async () => {
    const receiver = await otlpReceiver();
    try {
      const run = await runCli(["call", SERVE, "add", '{"a":1,"b":2}', "-e", "OTEL_SDK_DISABLED=true"], {
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url },
        spawn: true,
      });
      assert.equal(run.stdout, "3\n", run.stderr);
      const spans = (await receiver.spans()).filter((span) => span.kind === 3);
      assert.ok(spans.length >= 2, spans.map((span) => span.name).join(", "));
      assert.equal(new Set(spans.map((span) => span.traceId)).size, 1, "one trace");
      const roots = spans.filter((span) => span.parentSpanId === undefined || span.parentSpanId === "");
      assert.equal(roots.length, 1, "one root");
      assert.ok(spans.every((span) => span === roots[0] || span.parentSpanId === roots[0].spanId));
      const posts = (await receiver.entries()).filter((entry) => entry.path === "/v1/metrics");
      assert.equal(posts.length, 1, "metrics posted once, at the exit");
    } finally {
      receiver.close();
    }
  });

  test("one outbound fetch: the OTLP exporter follows no redirect to another origin, so its headers and spans stay", async () => {
    const seen: { url: string; headers: Record<string, unknown> }[] = [];
    const other = createHttpServer((request, response) => {
      seen.push({ url: request.url!, headers: request.headers });
      request.resume();
      response.end();
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    const otherPort = (other.address() as { port: number }).port;
    const redirecting = createHttpServer((request, response) => {
      request.resume();
      response.writeHead(307, { location: `http://127.0.0.1:${otherPort}${request.url}` }).end();
    });
    await new Promise<void>((resolve) => redirecting.listen(0, "127.0.0.1", resolve));
    try {
      const endpoint = `http://127.0.0.1:${(redirecting.address() as { port: number }).port}`;
      const run = await runCli(["call", SERVE, "add", '{"a":1,"b":2}', "-e", "OTEL_SDK_DISABLED=true"], {
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=s3cret" },
        spawn: true,
      });
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, "3\n");
      assert.match(run.stderr, /telemetry: export to http:\/\/127\.0\.0\.1:\d+\/v1\/traces failed \(.*another origin/);
      assert.deepEqual(seen, [], "nothing reached the other origin");
    } finally {
      other.close();
      redirecting.close();
    }
  });

  test("the OTEL_* variables read as the SDKs read them; a value that does not parse warns and takes its default", () => {
    const warnings: string[] = [];
    const warn = (line: string) => warnings.push(line);
    assert.equal(telemetryFromEnv({}, warn), undefined, "no endpoint: off");
    assert.equal(telemetryFromEnv({ OTEL_SERVICE_NAME: "x" }, warn), undefined);
    const base = telemetryFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" }, warn)!;
    assert.equal(base.tracesEndpoint, "http://collector:4318/v1/traces", "a base URL gets /v1/traces");
    assert.equal(base.metricsEndpoint, "http://collector:4318/v1/metrics", "and /v1/metrics");
    assert.equal(base.exportIntervalMs, 60_000);
    assert.equal(base.scheduleDelayMs, 5000);
    assert.equal(base.maxQueueSize, 2048);
    assert.equal(base.maxExportBatchSize, 512);
    assert.equal(base.timeoutMs, 10_000);
    assert.equal(base.serviceName, undefined);
    const own = telemetryFromEnv(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://other:9999/traces",
        OTEL_EXPORTER_OTLP_HEADERS: "api-key=a%20b,x=1",
        OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x=2",
        OTEL_METRICS_EXPORTER: "none",
        OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,team=a%2Cb",
        OTEL_SERVICE_NAME: "svc",
        OTEL_TRACES_SAMPLER: "traceidratio",
        OTEL_TRACES_SAMPLER_ARG: "0.25",
        OTEL_BSP_SCHEDULE_DELAY: "100",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: "true",
      },
      warn,
      "from --name",
    )!;
    assert.equal(own.tracesEndpoint, "http://other:9999/traces", "a per-signal endpoint is used as it is");
    assert.deepEqual(own.tracesHeaders, { "api-key": "a b", x: "2" }, "a signal's own headers over the common ones");
    assert.deepEqual(own.headers, { "api-key": "a b", x: "1" });
    assert.equal(own.metricsEndpoint, undefined, "OTEL_METRICS_EXPORTER=none");
    assert.deepEqual(own.resourceAttributes, { "deployment.environment": "prod", team: "a,b" });
    assert.equal(own.serviceName, "svc");
    assert.equal(own.sampler, "traceidratio");
    assert.equal(own.samplerArg, 0.25);
    assert.equal(own.scheduleDelayMs, 100);
    assert.equal(own.captureContent, true);
    const local = telemetryFromEnv({ OTEL_TRACES_EXPORTER: "otlp" }, warn)!;
    assert.equal(local.tracesEndpoint, "http://localhost:4318/v1/traces");
    assert.equal(local.metricsEndpoint, undefined, "an exporter named for traces only");
    assert.equal(warnings.length, 0);
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" };
    assert.equal(telemetryFromEnv({ ...on, OTEL_SDK_DISABLED: "true" }, warn), undefined);
    assert.equal(
      telemetryFromEnv({ ...on, OTEL_TRACES_EXPORTER: "none", OTEL_METRICS_EXPORTER: "none" }, warn),
      undefined,
    );
    assert.equal(telemetryFromEnv({ ...on, OTEL_TRACES_EXPORTER: "none" }, warn)!.tracesEndpoint, undefined);
    assert.equal(warnings.length, 0);
    assert.equal(telemetryFromEnv({ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }, warn), undefined);
    assert.deepEqual(warnings.splice(0), [
      "telemetry: OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not spoken here (http/json is): traces are off",
      "telemetry: OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not spoken here (http/json is): metrics are off",
    ]);
    const mixed = telemetryFromEnv({ ...on, OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: "grpc" }, warn)!;
    assert.equal(mixed.tracesEndpoint, "http://c:4318/v1/traces", "one signal off, the other on");
    assert.equal(mixed.metricsEndpoint, undefined);
    assert.match(warnings.pop()!, /OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=grpc .*metrics are off/);
    assert.ok(telemetryFromEnv({ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" }, warn));
    assert.deepEqual(warnings.splice(0).length, 2, "http/protobuf: a warning per signal");
    const bad = telemetryFromEnv({
      ...on,
      OTEL_BSP_SCHEDULE_DELAY: "soon",
      OTEL_TRACES_SAMPLER: "sometimes",
      OTEL_TRACES_SAMPLER_ARG: "2",
    }, warn)!;
    assert.equal(bad.scheduleDelayMs, 5000);
    assert.equal(bad.sampler, undefined);
    assert.equal(bad.samplerArg, undefined);
    assert.deepEqual(
      warnings,
      [
        "telemetry: OTEL_BSP_SCHEDULE_DELAY=soon is not an integer; using 5000",
        "telemetry: OTEL_TRACES_SAMPLER=sometimes is not a sampler mcp.ts knows; using parentbased_always_on",
        "telemetry: OTEL_TRACES_SAMPLER_ARG=2 is not a ratio from 0 to 1; using 1",
      ].sort((a, b) => warnings.indexOf(a) - warnings.indexOf(b)),
    );
    assert.equal(warnings.length, 3);
  });

  test("one trace from TRACEPARENT: call's CLIENT span, the gateway's SERVER and CLIENT spans, the upstream's SERVER span", async () => {
    const receiver = await otlpReceiver();
    await withTempDir("mcp-otel-", async (dir) => {
      writeFileSync(
        join(dir, "seen.ts"),
        "export default { run: (_: unknown, ctx: any) => ({ traceparent: ctx.traceparent ?? null, " +
          "tracestate: ctx.tracestate ?? null, baggage: ctx.baggage ?? null }) };",
      );
      const root = { trace: "0af7651916cd43dd8448eb211c80319c", span: "b7ad6b7169203331" };
      const upstream = `${RUNTIME.join(" ")} ${MCP} serve ${dir} --name up`;
      const run = await runCli(
        ["call", `${RUNTIME.join(" ")} ${MCP} gateway --name gw t=${quote(upstream)}`, "t__seen", "{}", "--json"],
        {
          env: {
            OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
            TRACEPARENT: `00-${root.trace}-${root.span}-01`,
            TRACESTATE: "vendor=1",
            BAGGAGE: "user=7",
          },
        },
      );
      try {
        assert.equal(run.code, 0, run.stderr);
        assert.equal(run.stderr, "");
        const seen = JSON.parse(run.stdout).structuredContent;
        const spans = await receiver.waitForSpans((spans) => spans.length >= 8);
        const calls = spans.filter((span) => attribute(span, "mcp.method.name") === "tools/call");
        const find = (name: string, kind: number) => {
          const found = calls.filter((span) => span.name === name && span.kind === kind);
          assert.equal(found.length, 1, `one ${name} span of kind ${kind}: ${JSON.stringify(calls)}`);
          return found[0];
        };
        const client = find("tools/call t__seen", 3);
        const gatewayServer = find("tools/call t__seen", 2);
        const gatewayClient = find("tools/call seen", 3);
        const upstreamServer = find("tools/call seen", 2);
        for (const span of [client, gatewayServer, gatewayClient, upstreamServer]) {
          assert.equal(span.traceId, root.trace, `${span.name} (${span.kind}) is in the CI job's trace`);
          assert.deepEqual(span.status, {});
          assert.equal(attribute(span, "gen_ai.operation.name"), "execute_tool");
          assert.equal(attribute(span, "network.transport"), "pipe");
        }
        assert.equal(client.parentSpanId, root.span);
        assert.equal(gatewayServer.parentSpanId, client.spanId);
        assert.equal(gatewayClient.parentSpanId, gatewayServer.spanId);
        assert.equal(upstreamServer.parentSpanId, gatewayClient.spanId);
        assert.equal(attribute(gatewayServer, "gen_ai.tool.name"), "t__seen");
        assert.equal(attribute(gatewayClient, "gen_ai.tool.name"), "seen");
        assert.equal(attribute(gatewayClient, "mcp_ts.upstream"), "t");
        assert.equal(typeof attribute(upstreamServer, "jsonrpc.request.id"), "string");
        assert.deepEqual(seen, {
          traceparent: `00-${root.trace}-${upstreamServer.spanId}-01`,
          tracestate: "vendor=1",
          baggage: "user=7",
        }, "the plugin runs in the upstream's SERVER span; tracestate and baggage come through");
        assert.equal(client.resource["service.name"], "mcp.ts");
        assert.equal(gatewayServer.resource["service.name"], "gw", "serve/gateway --name names the service");
        assert.equal(upstreamServer.resource["service.name"], "up");
        assert.equal(upstreamServer.resource["telemetry.sdk.name"], "mcp.ts");
        assert.ok(["deno", "bun", "node"].includes(upstreamServer.resource["process.runtime.name"] as string));
        const secretFree = JSON.stringify(spans);
        assert.ok(!secretFree.includes("user=7"), "baggage never becomes an attribute");
      } finally {
        receiver.close();
      }
    });
  });

  test("over HTTP the spans name the connection; a tool error is tool_error, an ERROR status without a message; a JSON-RPC error its code", async () => {
    const receiver = await otlpReceiver();
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: "50" };
    const server = await startListening(
      [MCP, "serve", HERE + "testdata/tools", "--http", "127.0.0.1:0"],
      /serving (http:\S+)/,
      env,
    );
    try {
      const failed = await runCli(["call", server.url, "fail", "{}"], { env });
      assert.equal(failed.code, 1);
      const unknown = await runCli(["request", server.url, "tools/call", '{"name":"nosuch"}'], {
        env,
      });
      assert.notEqual(unknown.code, 0);
      const legacy = await runCli(["call", server.url, "echo", "text=hi", "--protocol", "legacy"], { env });
      assert.equal(legacy.stdout, "hi\n", legacy.stderr);
      const all = await receiver.waitForSpans((spans) =>
        spans.filter((span) => span.name.startsWith("tools/call")).length >= 6
      );
      const of = (name: string, kind: number, which = 0) =>
        all.filter((span) => span.name === name && span.kind === kind)[which];
      const failServer = of("tools/call fail", 2);
      const failClient = of("tools/call fail", 3);
      assert.equal(failServer.parentSpanId, failClient.spanId);
      // A CLIENT span names the id it sent, as the SERVER span the id it got: the same one here.
      assert.match(String(attribute(failClient, "jsonrpc.request.id")), /^\d+$/);
      assert.equal(attribute(failClient, "jsonrpc.request.id"), attribute(failServer, "jsonrpc.request.id"));
      for (const span of [failServer, failClient]) {
        assert.equal(attribute(span, "error.type"), "tool_error");
        assert.deepEqual(span.status, { code: 2 }, "ERROR with no message: a tool's text may hold data");
      }
      assert.equal(attribute(failServer, "network.transport"), "tcp");
      assert.equal(attribute(failServer, "network.protocol.name"), "http");
      assert.match(String(attribute(failServer, "client.address")), /^(127\.0\.0\.1|::ffff:127\.0\.0\.1)$/);
      assert.ok(Number(attribute(failServer, "client.port")) > 0, "the caller's port");
      assert.equal(attribute(failServer, "mcp.session.id"), undefined, "no session in the stateless era");
      assert.match(String(attribute(of("tools/call echo", 2), "mcp.session.id")), /^[0-9a-f-]{36}$/, "a legacy one's");
      assert.equal(attribute(failClient, "server.address"), "127.0.0.1");
      assert.equal(attribute(failClient, "server.port"), String(new URL(server.url).port));
      const invalidServer = of("tools/call nosuch", 2);
      const invalidClient = of("tools/call nosuch", 3);
      assert.equal(attribute(invalidServer, "error.type"), "-32602");
      assert.equal(attribute(invalidServer, "rpc.response.status_code"), "-32602");
      assert.equal(invalidServer.status.code, 2);
      assert.match(invalidServer.status.message!, /nosuch/);
      assert.equal(attribute(invalidClient, "error.type"), "-32602");
    } finally {
      server.close();
      receiver.close();
    }
  });

  test("the library's telemetry options give what the variables give: endpoint, both signals; metricsEndpoint alone, metrics", async () => {
    const [first, second] = await Promise.all([otlpReceiver(), otlpReceiver()]);
    const both = createHandler({
      tools: HTTP_TOOLS,
      telemetry: { endpoint: first.url, scheduleDelayMs: 10, exportIntervalMs: 20 },
    });
    const metricsOnly = createHandler({
      tools: HTTP_TOOLS,
      telemetry: { metricsEndpoint: `${second.url}/v1/metrics`, exportIntervalMs: 20 },
    });
    try {
      for (const handler of [both, metricsOnly]) {
        await (await handler(modernPost("tools/call", { name: "add", arguments: { a: 1, b: 2 } }))).text();
      }
      const operation = (metrics: OtlpMetric[]) => metrics.some((m) => m.name === "mcp.server.operation.duration");
      await first.waitForMetrics(operation);
      await first.waitForSpans((spans) => spans.some((span) => span.name === "tools/call add"));
      await second.waitForMetrics(operation);
      assert.deepEqual(await second.spans(), [], "no traces endpoint: no spans");
    } finally {
      both.close();
      metricsOnly.close();
      first.close();
      second.close();
    }
  });

  test("the library: createHandler and connect take telemetry options; callTool's traceparent parents the CLIENT span", async () => {
    const receiver = await otlpReceiver();
    const telemetry = { endpoint: receiver.url + "/", scheduleDelayMs: 10, serviceName: "embedded" };
    const handler = createHandler({ tools: HTTP_TOOLS, telemetry });
    const listener = createHttpServer(async (request, response) => {
      const chunks: Uint8Array[] = [];
      for await (const chunk of request) chunks.push(chunk);
      const answer = await handler(
        new Request(`http://127.0.0.1${request.url}`, {
          method: request.method,
          headers: request.headers as Record<string, string>,
          body: request.method === "POST" ? Buffer.concat(chunks) : undefined,
        }),
      );
      response.writeHead(answer.status, Object.fromEntries(answer.headers));
      response.end(Buffer.from(await answer.arrayBuffer()));
    });
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(listener.address() as { port: number }).port}/mcp`;
    const client = await connect(url, { telemetry: { ...telemetry, serviceName: "app" } });
    const off = await connect(url, { telemetry: false });
    try {
      const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
      await client.callTool("add", { a: 1, b: 2 }, { traceparent: parent, baggage: "k=v" });
      await off.callTool("add", { a: 2, b: 2 });
      // The HTTP traceparent header: the parent when _meta has none; a link when _meta names another.
      const header = "00-11111111111111111111111111111111-2222222222222222-01";
      const inMeta = "00-33333333333333333333333333333333-4444444444444444-01";
      for (const [name, meta] of [["mul", {}], ["neg", { traceparent: inMeta }]] as const) {
        const answer = await handler(
          new Request(url, {
            method: "POST",
            headers: {
              ...JSON_HEADERS,
              "mcp-protocol-version": "2026-07-28",
              "mcp-method": "tools/call",
              "mcp-name": name,
              traceparent: header,
            },
            body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: modern({ name }, meta) }),
          }),
        );
        assert.equal(answer.status, 200);
      }
      const spans = await receiver.waitForSpans((spans) =>
        spans.filter((span) => span.name === "tools/call add").length >= 3 &&
        spans.some((span) => span.name === "tools/call neg")
      );
      const byHeader = spans.find((span) => span.name === "tools/call mul")!;
      assert.equal(byHeader.traceId, "11111111111111111111111111111111");
      assert.equal(byHeader.parentSpanId, "2222222222222222");
      const both = spans.find((span) => span.name === "tools/call neg")! as OtlpSpan & { links?: Message[] };
      assert.equal(both.traceId, "33333333333333333333333333333333", "_meta wins");
      assert.equal(both.parentSpanId, "4444444444444444");
      assert.deepEqual(both.links, [{ traceId: "11111111111111111111111111111111", spanId: "2222222222222222" }]);
      const calls = spans.filter((span) => span.name === "tools/call add");
      const sent = calls.filter((span) => span.kind === 3);
      assert.equal(sent.length, 1, "the client with telemetry: false made none");
      assert.equal(sent[0].traceId, "4bf92f3577b34da6a3ce929d0e0e4736");
      assert.equal(sent[0].parentSpanId, "00f067aa0ba902b7");
      assert.equal(sent[0].resource["service.name"], "app");
      const served = calls.filter((span) => span.kind === 2);
      assert.equal(served.length, 2);
      assert.equal(served.find((span) => span.traceId === sent[0].traceId)?.parentSpanId, sent[0].spanId);
      assert.equal(served[0].resource["service.name"], "embedded");
      assert.notEqual(served[1].traceId, sent[0].traceId, "a call without a context starts a trace of its own");
    } finally {
      await client.close();
      await off.close();
      handler.close();
      listener.close();
      receiver.close();
    }
  });

  test("metrics over OTLP: each process's operation durations (cumulative histograms) and the span exporter's counters", async () => {
    const receiver = await otlpReceiver();
    try {
      const run = await runCli(["call", SERVE, "add", '{"a":1,"b":2}'], {
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: "job" },
      });
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, "3\n");
      const found = await receiver.waitForMetrics((metrics) =>
        metrics.filter((m) => m.name.endsWith("operation.duration")).length >= 2
      );
      await receiver.waitForSpans(() => true); // the strict checks passed on every export
      const label = (point: OtlpPoint, key: string) => labelsOf(point)[key];
      const call = (name: string) => {
        const metric = found.find((m) => m.name === name)!;
        assert.ok(metric, `${name} exported: ${found.map((m) => m.name)}`);
        assert.equal(metric.unit, "s");
        assert.equal(metric.temporality, 2, "cumulative");
        const point = metric.points.find((p) => label(p, "gen_ai.tool.name") === "add")!;
        assert.equal(point.count, "1");
        assert.equal(label(point, "mcp.method.name"), "tools/call");
        assert.equal(label(point, "network.transport"), "pipe");
        assert.equal(label(point, "jsonrpc.request.id"), undefined, "no per-request attribute on a metric");
        // One duration: it is its min, its max and its sum.
        assert.equal(typeof point.min, "number");
        assert.ok(point.min! > 0 && point.min === point.max && point.min === point.sum, JSON.stringify(point));
      };
      call("mcp.server.operation.duration");
      call("mcp.client.operation.duration");
      const processed = found.filter((m) => m.name === "otel.sdk.processor.span.processed");
      assert.ok(processed.length >= 1);
      assert.equal(processed[0].unit, "{span}");
      assert.ok(Number(processed[0].points[0].asInt) >= 2, "the spans of server/discover and tools/call");
      assert.ok(found.some((m) => m.name === "otel.sdk.exporter.span.exported"));
      assert.ok(found.some((m) => m.name === "mcp.client.session.duration"), "call's session, at its close");
    } finally {
      receiver.close();
    }
  });

  test("legacy: the server's question to its client is a CLIENT span under the call's SERVER span; the session's duration is recorded at its end", async () => {
    const receiver = await otlpReceiver();
    await withTempDir("mcp-otel-ask-", async (dir) => {
      writeFileSync(
        join(dir, "ask.ts"),
        "export default { run: async (_: unknown, ctx: any) => " +
          '((await ctx.elicit({ message: "who?", requestedSchema: { type: "object", properties: ' +
          '{ name: { type: "string" } } } })).content.name) };',
      );
      try {
        const run = await runCli(
          [
            "call",
            `${RUNTIME.join(" ")} ${MCP} serve ${dir}`,
            "ask",
            "{}",
            "--protocol",
            "legacy",
            "--elicit",
            "accept",
            "--elicit-json",
            '{"name":"Ada"}',
          ],
          { env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } },
        );
        assert.equal(run.code, 0, run.stderr);
        assert.equal(run.stdout, "Ada\n");
        const spans = await receiver.waitForSpans((spans) => spans.some((span) => span.name === "elicitation/create"));
        const call = spans.find((span) => span.name === "tools/call ask" && span.kind === 2)!;
        const asked = spans.find((span) => span.name === "elicitation/create")!;
        assert.ok(call && asked, JSON.stringify(spans.map((span) => span.name)));
        assert.equal(asked.kind, 3, "the server is the client of its own question");
        assert.equal(asked.parentSpanId, call.spanId);
        assert.equal(asked.traceId, call.traceId);
        const session = (metrics: OtlpMetric[]) => metrics.filter((m) => m.name === "mcp.server.session.duration");
        const found = session(await receiver.waitForMetrics((metrics) => session(metrics).length > 0, 5_000));
        assert.equal(found.length, 1, "stdin's end ended the legacy session: its duration, once");
        const point = found[0].points[0];
        assert.equal(point.count, "1");
        assert.deepEqual(labelsOf(point), { "network.transport": "pipe", "mcp.protocol.version": "2025-11-25" });
      } finally {
        receiver.close();
      }
    });
  });

  test("a dead collector (refusing, hanging, answering 503) adds at most 2 s to an exit, changes no output, warns once", async () => {
    const hanging = await otlpReceiver("hang");
    const refusing = await otlpReceiver("503");
    const closed = createNetServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    // Credentials in the URL and a collector's key in the headers: never printed (Node's fetch quotes such a URL).
    const closedUrl = `http://u:p4ss@127.0.0.1:${(closed.address() as { port: number }).port}`;
    await new Promise((resolve) => closed.close(resolve));
    try {
      // The server's own telemetry is off: this is the command's exit alone. Each export may wait 10 minutes for its
      // answer: a command whose exit waited for the hanging one would meet runCli's kill (60 s: exit code null), while
      // the flush's 2 s lets it end with its own code.
      const call = (endpoint?: string) =>
        runCli(["call", SERVE, "add", '{"a":1,"b":2}', "-e", "OTEL_SDK_DISABLED=true"], {
          env: endpoint
            ? {
              OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
              OTEL_EXPORTER_OTLP_HEADERS: "api-key=s3cret",
              OTEL_EXPORTER_OTLP_TIMEOUT: "600000",
            }
            : { OTEL_SDK_DISABLED: "true" },
          spawn: true,
          ms: 60_000,
        });
      const [off, hang, unavailable, refused] = await Promise.all([
        call(),
        call(hanging.url),
        call(refusing.url),
        call(closedUrl),
      ]);
      for (const [run, why] of [[hang, /no answer in time/], [unavailable, /HTTP 503/], [refused, /\(.+\)/]] as const) {
        assert.equal(run.code, off.code);
        assert.equal(run.stdout, off.stdout);
        assert.equal(run.stdout, "3\n");
        // One line per signal's endpoint at most: the traces' always (spans were queued), the metrics' if tried.
        const lines = run.stderr.trimEnd().split("\n");
        const signals = lines.map((line) =>
          /^mcp: telemetry: export to http:\/\/127\.0\.0\.1:\d+\/v1\/(traces|metrics) failed \(.+\); (?:spans|metrics) are dropped until it answers$/
            .exec(line)?.[1]
        );
        assert.equal(signals[0], "traces", run.stderr);
        assert.ok(signals.length === 1 || (signals.length === 2 && signals[1] === "metrics"), run.stderr);
        assert.match(lines[0], why);
        assert.doesNotMatch(run.stderr, /p4ss|s3cret/, "no credential or header value printed");
      }
      assert.equal(off.stderr, "");
      assert.ok((await hanging.entries()).length === 0);
    } finally {
      hanging.close();
      refusing.close();
    }
  });

  test("a collector that fails, then answers: one warning, then one line saying it works again", async () => {
    const receiver = await otlpReceiver("flaky");
    const env = {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: "20",
      OTEL_METRICS_EXPORTER: "none",
    };
    const server = await startListening(
      [MCP, "serve", HERE + "testdata/tools", "--http", "127.0.0.1:0"],
      /serving (http:\S+)/,
      env,
    );
    try {
      const call = () => runCli(["call", server.url, "echo", "text=hi"]);
      assert.equal((await call()).stdout, "hi\n");
      await server.printed(/export to \S+ failed \(HTTP 503\); spans are dropped until it answers/);
      assert.equal((await call()).stdout, "hi\n");
      const output = await server.printed(/works again/);
      const lines = output.split("\n").filter((line) => line.includes("telemetry"));
      assert.deepEqual(lines.map((line) => line.replace(/127\.0\.0\.1:\d+/, "HOST")), [
        "mcp: telemetry: export to http://HOST/v1/traces failed (HTTP 503); spans are dropped until it answers",
        "mcp: telemetry: export to http://HOST/v1/traces works again",
      ]);
    } finally {
      server.close();
      receiver.close();
    }
  });

  test("off: with OTEL_SDK_DISABLED nothing is exported and nothing added to a message", async () => {
    // (OTEL_TRACES_EXPORTER=none with OTEL_METRICS_EXPORTER=none is the same "off": telemetryFromEnv's test above.)
    const receiver = await otlpReceiver();
    await withTempDir("mcp-otel-off-", async (dir) => {
      writeFileSync(
        join(dir, "seen.ts"),
        "export default { run: (_: unknown, ctx: any) => ctx.traceparent ?? 'none' };",
      );
      try {
        const run = await runCli(["call", `${RUNTIME.join(" ")} ${MCP} serve ${dir}`, "seen", "{}"], {
          env: {
            OTEL_SDK_DISABLED: "true",
            OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
            TRACEPARENT: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
          },
        });
        assert.equal(run.stdout, "none\n", "nothing in the request's _meta");
        assert.equal(run.stderr, "");
        // A request of ours after the run: the receiver prints what it hears in order, an export of the run's first.
        const barrier = await fetch(receiver.url + "/barrier", { method: "POST", body: "{}" });
        await barrier.body?.cancel();
        await receiver.printed(/"path":"\/barrier"/);
        assert.deepEqual((await receiver.entries()).map((entry) => entry.path), ["/barrier"]);
      } finally {
        receiver.close();
      }
    });
  });
});

describe("9. Plugins", () => {
  test("isPluginFile() skips helpers, sidecars, docs, typings and tests", () => {
    for (const name of ["add.ts", "wc.sh", "x.mjs"]) assert.ok(isPluginFile(name), name);
    for (const name of [".hidden.ts", "_helper.ts", "wc.json", "README.md", "types.d.ts", "add_test.ts"]) {
      assert.ok(!isPluginFile(name), name);
    }
  });

  test("loadTools() reports each broken plugin with its path and reason and loads the rest", async () => {
    const { tools, errors } = await loadTools(HERE + "testdata/broken");
    assert.deepEqual(tools.map((tool) => tool.name), ["good"]);
    const byFile = Object.fromEntries(errors.map((e) => [e.file.replace(/.*\//, ""), e.message]));
    assert.deepEqual(Object.keys(byFile).sort(), ["badname.ts", "nodefault.ts", "syntax.ts", "throws.ts"]);
    assert.match(byFile["nodefault.ts"], /no default export/);
    assert.match(byFile["badname.ts"], /"bad name" is invalid/);
    assert.match(byFile["throws.ts"], /plugin exploded at import/);
  });

  test("serve reports broken plugins on stderr and still serves the good one", async () => {
    await withServer(["testdata/broken"], async (server) => {
      await server.initialize();
      const { result } = await server.request(2, "tools/list");
      assert.deepEqual(result.tools.map((tool: Message) => tool.name), ["good"]);
      await server.until(() => server.stderr.includes("throws.ts"), "the broken plugins reported");
      assert.match(server.stderr, /Cannot load testdata\/broken\/syntax\.ts: /);
      assert.match(server.stderr, /Cannot load testdata\/broken\/throws\.ts: plugin exploded at import/);
      assert.doesNotMatch(server.stderr, /_helper|good_test/);
    });
  });

  test("serve refuses to start when two tools share a name, naming both files", async () => {
    const server = new ServerProcess(["testdata/duplicate"]);
    try {
      const { code } = await server.exit;
      assert.equal(code, 1);
      assert.match(
        server.stderr,
        /two tools are named "same": testdata\/duplicate\/one\.ts and testdata\/duplicate\/two\.ts/,
      );
      assert.equal(server.stdoutText, "");
    } finally {
      server.kill();
    }
  });

  test("console output of plugins goes to stderr, never to the protocol stream", async () => {
    await withServer(["testdata/noisy"], async (server) => {
      await server.initialize();
      server.call(1, "loud");
      assert.equal(text((await server.response(1)).result), "quiet result");
      const { result } = await server.request(2, "tools/list");
      assert.deepEqual(result.tools.map((tool: Message) => tool.name), ["loud", "first", "second"]);
      await server.until(() => server.stderr.includes("process.stdout.write"), "plugin output on stderr");
      for (const line of ["loading", "console.log", "console.info", "console.debug", "process.stdout.write"]) {
        assert.match(server.stderr, new RegExp(`loud: ${line.replace(".", "\\.")}`));
      }
    });
  });

  test("serve of a missing directory is a usage error", async () => {
    const server = new ServerProcess(["testdata/no-such-dir"]);
    try {
      assert.equal((await server.exit).code, 2);
      assert.match(server.stderr, /^mcp: Cannot serve "testdata\/no-such-dir": no such directory\n$/);
    } finally {
      server.kill();
    }
  });

  test("serve rejects unknown flags and bad numbers with exit code 2", async () => {
    for (const args of [["--bogus"], ["--timeout", "soon"], ["--max-line-bytes", "0"]]) {
      const server = new ServerProcess(["testdata/tools", ...args]);
      try {
        assert.equal((await server.exit).code, 2, args.join(" "));
        assert.match(server.stderr, /^mcp: .+\n$/);
      } finally {
        server.kill();
      }
    }
  });
});

describe("9. Plugins: executable tools and --watch", () => {
  test("an executable gets its arguments on stdin only, runs in DIR, and its stdout is the answer", async () => {
    await withServer(["testdata/exec"], async (server) => {
      await server.initialize();
      const { result } = await server.request(1, "tools/list");
      assert.deepEqual(result.tools.map((t: Message) => t.name), [
        "args",
        "fails",
        "flood",
        "progress",
        "result",
        "sleepy",
      ]);
      server.call(2, "args", { a: "x y; rm -rf /", n: 1 });
      assert.equal(text((await server.response(2)).result), 'argc=0 cwd=exec stdin={"a":"x y; rm -rf /","n":1}');
      server.call(3, "fails");
      assert.deepEqual((await server.response(3)).result, {
        content: [{ type: "text", text: "disk full" }],
        isError: true,
      });
      server.call(4, "result");
      assert.deepEqual((await server.response(4)).result, {
        content: [{ type: "text", text: "from a result" }],
        structuredContent: { ok: true },
      });
    });
  });

  test("an executable's stderr becomes progress and log notifications", async () => {
    await withServer(["testdata/exec"], async (server) => {
      await server.initialize();
      server.call(1, "progress", {}, { progressToken: "t" });
      assert.equal(text((await server.response(1)).result), "done");
      const notes = server.messages.filter((m) => m.method?.startsWith("notifications/")).map((m) => m.params);
      assert.deepEqual(notes, [
        { progressToken: "t", progress: 1, total: 2, message: "first half" },
        { level: "info", logger: "progress", data: "plain line" },
        { level: "error", logger: "progress", data: "bad news" },
        { progressToken: "t", progress: 2, total: 2 },
      ]);
    });
  });

  test("output over the line cap is an error, and the server keeps serving", async () => {
    await withServer(["testdata/exec", "--max-line-bytes", "1000000"], async (server) => {
      await server.initialize();
      server.call(1, "flood");
      const { result } = await server.response(1);
      assert.equal(result.isError, true);
      assert.match(text(result), /more than 1000000 bytes/);
      assert.deepEqual((await server.request(2, "ping")).result, {});
    });
  });

  test("a client that gives up on an executable tool and stops the server leaves no tool process behind", async () => {
    // The client times out, closes the server's stdin and SIGTERMs it 250 ms later: inside the tool's own
    // SIGTERM-to-SIGKILL grace. The tool ignores SIGTERM, so only the server's SIGKILL to its group ends it.
    // The 2 s timeout leaves a busy machine ample time to start the tool and hear its pid first.
    const server = [...RUNTIME, MCP, "serve", HERE + "testdata/exec"].map(quote).join(" ");
    const run = await runCli(["call", server, "sleepy", "--timeout", "2000", "-v"]);
    assert.equal(run.code, 3, run.stderr);
    const pid = Number(/pid (\d+)/.exec(run.stderr)?.[1]);
    assert.ok(pid > 0, run.stderr);
    assert.ok(await isGone(pid), `tool process ${pid} outlived its server`);
  });

  test("cancellation and timeout stop an executable with SIGTERM, then SIGKILL: no process is left", async () => {
    await withServer(["testdata/exec", "--timeout", "1500"], async (server) => {
      await server.initialize();
      const pids = () =>
        server.messages.filter((m) => m.method === "notifications/message").map((m) =>
          Number(/pid (\d+)/.exec(m.params.data)![1])
        );
      server.call(1, "sleepy");
      await server.until(() => pids().length === 1, "the pid of the first sleeper");
      server.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1 } });
      server.call(2, "sleepy");
      const timedOut = (await server.response(2, 10_000)).result;
      assert.match(text(timedOut), /timed out after 1500 ms/);
      assert.equal(pids().length, 2, "both sleepers said who they are");
      // SIGTERM is ignored: SIGKILL follows after 1 s.
      for (const pid of pids()) assert.ok(await isGone(pid), `tool process ${pid} is still running`);
      assert.ok(!server.messages.some((m) => m.id === 1), "the cancelled call got no answer");
    });
  });

  test("an executable as a task: @progress sets its statusMessage, tasks/cancel and stdin's end stop its group", async () => {
    await withTempDir("mcp-exec-task-", async (dir) => {
      // Each run says its pid in a file, reports progress, and waits on a child (its group is what is stopped).
      writeFileSync(
        join(dir, "render.sh"),
        '#!/bin/sh\necho $$ >> pids\necho "@progress 1/3 rendering" >&2\nsleep 30\n',
      );
      spawnSync("chmod", ["+x", join(dir, "render.sh")]);
      writeFileSync(join(dir, "render.json"), JSON.stringify({ execution: { taskSupport: "optional" } }));
      const meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } },
      };
      const ask = (server: ServerProcess, id: string, method: string, params: Message) =>
        server.request(id, method, { ...params, _meta: meta });
      const pids = () =>
        existsSync(join(dir, "pids")) ? readFileSync(join(dir, "pids"), "utf8").trim().split("\n").map(Number) : [];
      const server = new ServerProcess([dir, "--task-grace", "50", "--task-poll-interval", "200"]);
      try {
        const created = (await ask(server, "c1", "tools/call", { name: "render" })).result;
        assert.deepEqual([created.resultType, created.pollIntervalMs], ["task", 200], "still working after the grace");
        // Polled, as a client follows a task (a task's changes send nothing unless someone listens); 15 s at most.
        let polls = 0;
        const task = await pollUntil(
          async () => (await ask(server, `g${polls++}`, "tasks/get", { taskId: created.taskId })).result,
          (task: Message) => task.statusMessage === "rendering",
          "the progress line",
        );
        assert.deepEqual(
          [task.status, task.statusMessage],
          ["working", "rendering"],
          "the progress line, as the statusMessage",
        );
        assert.deepEqual(
          (await ask(server, "x1", "tasks/cancel", { taskId: created.taskId })).result.resultType,
          "complete",
        );
        assert.equal((await ask(server, "g-end", "tasks/get", { taskId: created.taskId })).result.status, "cancelled");
        assert.ok(await isGone(pids()[0]), "the cancelled task's process is gone");

        const second = (await ask(server, "c2", "tools/call", { name: "render" })).result;
        assert.equal(second.resultType, "task");
        await server.until(() => pids().length === 2, "the second run started");
        const started = Date.now();
        assert.deepEqual(await server.end(), { code: 0, signal: null }, "EOF: nobody can poll it, the server ends");
        // Far under the task's 30 s, far over what a busy machine takes to stop.
        assert.ok(Date.now() - started < 20_000, `without waiting for the task: ${Date.now() - started} ms`);
        assert.ok(await isGone(pids()[1]), "the running task's process is gone");
      } finally {
        server.kill();
      }
    });
  });

  test("--watch picks up added, edited, removed and broken files and sends list_changed", async () => {
    await withTempDir("mcp-watch-", async (dir) => {
      writeFileSync(join(dir, "one.ts"), 'export default { run: () => "one v1" };');
      await withServer([dir, "--watch"], async (server) => {
        await server.initialize();
        const changes = () => server.messages.filter((m) => m.method === "notifications/tools/list_changed").length;
        const names = async (id: string) =>
          (await server.request(id, "tools/list")).result.tools.map((t: Message) => t.name);
        const answer = async (id: string, name: string) => {
          server.call(id, name);
          return text((await server.response(id)).result);
        };
        assert.equal(await answer("a", "one"), "one v1");

        writeFileSync(join(dir, "two.ts"), 'export default { run: () => "two" };');
        await server.until(() => changes() >= 1, "list_changed after adding a file");
        assert.deepEqual(await names("b"), ["one", "two"]);

        writeFileSync(join(dir, "one.ts"), 'export default { description: "edited", run: () => "one v2" };');
        await server.until(() => changes() >= 2, "list_changed after editing a file");
        assert.equal(await answer("c", "one"), "one v2");

        writeFileSync(join(dir, "bad.ts"), "export default { run: ( };");
        await server.until(() => server.stderr.includes("bad.ts"), "the broken file reported");
        rmSync(join(dir, "two.ts"));
        await server.until(() => changes() >= 3, "list_changed after removing a file");
        assert.deepEqual(await names("d"), ["one"]);
        assert.equal(await answer("e", "one"), "one v2");
      });
    });
  });
});

describe("9. Plugins: skills", () => {
  /** DIR with a tool, and DIR/skills with good skills and one of each way to be skipped. */
  const skillsDir = (dir: string) => {
    const file = (path: string, text: string | Uint8Array) => {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    };
    const front = (name: string, more = "") =>
      `---\nname: ${name}\ndescription: The ${name} skill\n${more}---\n\nBody of ${name}.\n`;
    file("add.ts", "export default { run: () => 'added' };");
    file("skills/good-skill/SKILL.md", front("good-skill", "metadata:\n  version: 2\n  tags:\n    - a\n    - b\n"));
    file("skills/good-skill/refs/guide.md", "# Guide\n");
    file("skills/good-skill/logo.png", new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 1, 2]));
    file("skills/good-skill/.hidden", "not served");
    file("skills/acme/outer/SKILL.md", front("outer"));
    file("skills/acme/outer/inner/SKILL.md", front("inner"));
    file("skills/no-front/SKILL.md", "Just text.\n");
    file("skills/wrong-name/SKILL.md", front("other-name"));
    file("skills/Bad_Name/SKILL.md", front("Bad_Name"));
    file("skills/double--dash/SKILL.md", front("double--dash"));
    file("skills/no-desc/SKILL.md", "---\nname: no-desc\n---\n");
    file("skills/flow/SKILL.md", "---\nname: flow\ndescription: x\ntags: [a, b]\n---\n");
    file("skills/linked/SKILL.md", front("linked"));
    symlinkSync(join(dir, "add.ts"), join(dir, "skills/linked/link.ts"));
  };
  const meta = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
  };
  const ask = async (server: ServerProcess, id: string, method: string, params: Message = {}) =>
    await server.request(id, method, { ...params, _meta: meta });

  test("a skill over 16 MiB is skipped from its files' sizes, before they are read (two 300 MiB files cost no memory)", async () => {
    await withTempDir("mcp-skills-big-", async (dir) => {
      mkdirSync(join(dir, "skills", "big"), { recursive: true });
      writeFileSync(join(dir, "skills", "big", "SKILL.md"), "---\nname: big\ndescription: Big\n---\n");
      for (const name of ["a.bin", "b.bin"]) {
        writeFileSync(join(dir, "skills", "big", name), "");
        truncateSync(join(dir, "skills", "big", name), 300 * 1024 * 1024); // sparse: no disk, but 300 MiB read
      }
      const server = new ServerProcess([dir]);
      try {
        await server.until(() => /skipped skill/.test(server.stderr), "the skipped skill");
        assert.match(server.stderr, /big.*629145\d+ bytes \(at most 16777216\)/);
        await server.initialize();
        assert.ok(peakRss(server.child.pid!) < 300 * 1024 * 1024, `peak RSS ${peakRss(server.child.pid!)} bytes`);
      } finally {
        server.kill();
      }
    });
  });

  test("serve DIR serves DIR/skills: each file by its digest, directories, SKILL.md listed; a skipped skill, a line", async () => {
    await withTempDir("mcp-skills-", async (dir) => {
      skillsDir(dir);
      await withServer([dir], async (server) => {
        const discover = (await ask(server, "d", "server/discover")).result;
        assert.deepEqual(discover.capabilities.extensions, {
          "io.modelcontextprotocol/skills": { directoryRead: true },
        });
        assert.ok(discover.capabilities.resources, "skill files are resources");
        const { skills } = (await ask(server, "l", "skills/list")).result;
        assert.deepEqual(skills.map((entry: Message) => entry.uri), [
          "skill://acme/outer/SKILL.md",
          "skill://acme/outer/inner/SKILL.md",
          "skill://good-skill/SKILL.md",
        ]);
        const good = skills[2];
        assert.deepEqual(good.frontmatter, {
          name: "good-skill",
          description: "The good-skill skill",
          metadata: { version: 2, tags: ["a", "b"] },
        });
        const guide = good.resources.find((item: Message) => item.uri === "skill://good-skill/refs/guide.md");
        assert.deepEqual(guide, {
          uri: "skill://good-skill/refs/guide.md",
          digest: "sha256:" + createHash("sha256").update("# Guide\n").digest("hex"),
          size: 8,
        });
        assert.deepEqual(good.resources.map((item: Message) => item.uri).sort(), [
          "skill://good-skill/SKILL.md",
          "skill://good-skill/logo.png",
          "skill://good-skill/refs/guide.md",
        ], "every file, SKILL.md included, no dot file");
        assert.ok(skills[0].resources.some((item: Message) => item.uri === "skill://acme/outer/inner/SKILL.md"));
        assert.deepEqual((await ask(server, "g", "skills/get", { uri: good.uri })).result.skill, good);
        assert.equal((await ask(server, "g2", "skills/get", { uri: "skill://nope/SKILL.md" })).error.code, -32602);

        const text = (await ask(server, "r1", "resources/read", { uri: "skill://good-skill/refs/guide.md" })).result;
        assert.deepEqual(text.contents, [{
          uri: "skill://good-skill/refs/guide.md",
          text: "# Guide\n",
          mimeType: "text/markdown",
        }]);
        const blob = (await ask(server, "r2", "resources/read", { uri: "skill://good-skill/logo.png" })).result;
        assert.deepEqual(blob.contents[0].mimeType, "image/png");
        assert.equal(blob.contents[0].blob, Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2]).toString("base64"));
        const listed = (await ask(server, "rl", "resources/list")).result.resources;
        assert.deepEqual(listed.find((item: Message) => item.uri === good.uri), {
          uri: "skill://good-skill/SKILL.md",
          name: "good-skill",
          description: "The good-skill skill",
          mimeType: "text/markdown",
          size: good.resources.find((item: Message) => item.uri === good.uri).size,
        });
        const children = (await ask(server, "dr", "resources/directory/read", { uri: "skill://good-skill" })).result;
        assert.deepEqual(children.resources.map((item: Message) => [item.name, item.mimeType]), [
          ["SKILL.md", "text/markdown"],
          ["logo.png", "image/png"],
          ["refs", "inode/directory"],
        ]);
        const prefix = (await ask(server, "dp", "resources/directory/read", { uri: "skill://acme" })).result;
        assert.deepEqual(prefix.resources.map((item: Message) => item.uri), ["skill://acme/outer"]);
        const file = await ask(server, "df", "resources/directory/read", { uri: good.uri });
        assert.equal(file.error.code, -32602, "a file is not a directory");
        const skipped = server.stderr.split("\n").filter((line) => line.includes("skipped skill"));
        assert.deepEqual(skipped.map((line) => line.replace(dir + "/", "")).sort(), [
          'mcp: warning: skipped skill skills/Bad_Name: its name "Bad_Name" breaks the naming rules (1-64 of a-z 0-9 -, no leading, trailing or double -)',
          'mcp: warning: skipped skill skills/double--dash: its name "double--dash" breaks the naming rules (1-64 of a-z 0-9 -, no leading, trailing or double -)',
          "mcp: warning: skipped skill skills/flow: SKILL.md: line 4: a flow sequence: [a, b] (not in the YAML subset mcp.ts reads)",
          "mcp: warning: skipped skill skills/linked: link.ts is a symlink or a special file",
          "mcp: warning: skipped skill skills/no-desc: SKILL.md: its frontmatter needs a name and a description, both strings",
          "mcp: warning: skipped skill skills/no-front: SKILL.md: no frontmatter: the file must start with a --- line, and a --- line end it",
          'mcp: warning: skipped skill skills/wrong-name: its name "other-name" is not its directory\'s, "wrong-name"',
        ]);
      });
    });
  });

  test("--skills DIR2 serves another folder; --watch reloads a changed skill with its new digest", async () => {
    await withTempDir("mcp-skills-", async (dir) => {
      skillsDir(dir);
      const other = join(dir, "elsewhere");
      mkdirSync(join(other, "solo"), { recursive: true });
      writeFileSync(join(other, "solo", "SKILL.md"), "---\nname: solo\ndescription: One\n---\nv1\n");
      await withServer([dir, "--skills", other, "--watch"], async (server) => {
        const uris = async (id: string) =>
          (await ask(server, id, "skills/list")).result.skills.map((entry: Message) => entry.resources[0].digest);
        const before = await uris("a");
        assert.equal(before.length, 1, "only --skills DIR2");
        writeFileSync(join(other, "solo", "SKILL.md"), "---\nname: solo\ndescription: One\n---\nv2\n");
        // Each reload is logged once it applies; one that read the folder before the write may end after it, and
        // then another follows: wait for reloads until the digest changed.
        const reloads = () => server.stderr.split("reloaded").length - 1;
        for (let seen = 0; (await uris(`b${seen}`))[0] === before[0]; seen = reloads()) {
          await server.until(() => reloads() > seen, "a reload");
        }
        const after = (await ask(server, "c", "resources/read", { uri: "skill://solo/SKILL.md" })).result;
        assert.equal(after.contents[0].text, "---\nname: solo\ndescription: One\n---\nv2\n");
        assert.notDeepEqual(await uris("d"), before);
      });
      const missing = await runCli(["serve", dir, "--skills", join(dir, "none")]);
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /Cannot serve skills from ".*none": no such directory/);
    });
  });
});

describe("9. Plugins: --watch with resources and prompts", () => {
  test("--watch sends resources and prompts list_changed only for the lists that changed", async () => {
    await withTempDir("mcp-watch-rp-", async (dir) => {
      writeFileSync(
        join(dir, "docs.ts"),
        'export const resources = [{ uri: "mem://a", name: "a", read: () => "a" }];\n' +
          'export const prompts = [{ name: "p", get: () => "p" }];\n',
      );
      await withServer([dir, "--watch"], async (server) => {
        const { result } = await server.initialize();
        assert.deepEqual(result.capabilities.resources, { subscribe: false, listChanged: true });
        assert.deepEqual(result.capabilities.prompts, { listChanged: true });
        const count = (method: string) => server.messages.filter((m) => m.method === method).length;
        writeFileSync(
          join(dir, "docs.ts"),
          'export const resources = [{ uri: "mem://a", name: "a", read: () => "a" }, { uri: "mem://b", name: "b", read: () => "b" }];\n' +
            'export const prompts = [{ name: "p", get: () => "p" }];\n',
        );
        await server.until(() => count("notifications/resources/list_changed") === 1, "resources list_changed");
        const { result: listed } = await server.request("r", "resources/list");
        assert.deepEqual(listed.resources.map((r: Message) => r.uri), ["mem://a", "mem://b"]);
        assert.equal(count("notifications/prompts/list_changed"), 0, "the prompts did not change");
        assert.equal(count("notifications/tools/list_changed"), 0, "the tools did not change");
      });
    });
  });
});

describe("9. Plugins: fault injection, load errors, fresh reloads", () => {
  test("a plugin's process.exit, a thrown object without toString and errors from its timers are answered, and serving goes on", async () => {
    await withServer(["testdata/faults"], async (server) => {
      await server.initialize();
      server.call(1, "exits");
      assert.deepEqual((await server.response(1)).result, {
        content: [{ type: "text", text: "Cannot exit while serving: a plugin called process.exit(3)" }],
        isError: true,
      });
      server.call(2, "null_proto");
      const thrown = (await server.response(2)).result;
      assert.equal(thrown.isError, true);
      assert.equal(text(thrown), "a thrown object with no message");
      server.call(3, "late_throw");
      assert.equal(text((await server.response(3)).result), "answered");
      await server.until(() => server.stderr.includes("thrown from a timer"), "the timer's error reported");
      assert.match(server.stderr, /mcp: a plugin threw outside any request: rejected and forgotten\n/);
      assert.deepEqual((await server.request(4, "ping")).result, {});
      server.call(5, "exits", { code: 0 });
      assert.equal((await server.response(5)).result.isError, true);
      assert.deepEqual((await server.request(6, "ping")).result, {}, "still serving");
    });
  });

  test("a cancelled executable's process group gets SIGKILL after the grace, even once the tool itself has exited", async () => {
    let grandchild = 0;
    await withServer(["testdata/faults"], async (server) => {
      await server.initialize();
      server.call(1, "stubborn");
      await server.until(() => server.messages.some((m) => m.method === "notifications/message"), "the grandchild");
      grandchild = Number(
        /grandchild=(\d+)/.exec(server.messages.find((m) => m.method === "notifications/message")!.params.data)![1],
      );
      assert.ok(isAlive(grandchild));
      server.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1 } });
      assert.ok(await isGone(grandchild, 5_000), `grandchild ${grandchild} ignoring SIGTERM is still running`);
      assert.deepEqual((await server.request(2, "ping")).result, {});
    });
    if (grandchild && isAlive(grandchild)) process.kill(grandchild, "SIGKILL");
  });

  test("a call to a tool whose file failed to load says why, with its line and column", async () => {
    await withServer(["testdata/broken"], async (server) => {
      await server.initialize();
      server.call(1, "syntax");
      const { error } = await server.response(1);
      assert.equal(error.code, ErrorCode.InvalidParams);
      // Node gives the line only.
      assert.match(
        error.data.loadError,
        /^testdata\/broken\/syntax\.ts failed to load: SyntaxError: .+ at syntax\.ts:2(:31)?$/,
      );
      assert.match(error.message, /^Unknown tool: syntax; testdata\/broken\/syntax\.ts failed to load/);
      server.call(2, "nosuch");
      assert.equal((await server.response(2)).error.message, "Unknown tool: nosuch");
    });
    const run = await runCli(["call", [...RUNTIME, MCP, "serve", "testdata/broken"].map(quote).join(" "), "throws"]);
    assert.equal(run.code, 2);
    assert.match(
      run.stderr,
      /^mcp: the server has no tool named "throws": testdata\/broken\/throws\.ts failed to load: plugin exploded at import at throws\.ts:2:\d+\n$/,
    );
  });

  test("--verbose shows the stack of a tool that throws", async () => {
    await withServer(["testdata/tools", "--verbose"], async (server) => {
      await server.initialize();
      server.call(1, "fail", { message: "boom" });
      assert.equal(text((await server.response(1)).result), "boom");
      await server.until(() => /"fail" threw: Error: boom\n\s+at .*fail\.ts/.test(server.stderr), "the stack");
    });
  });

  test("--watch reloads the helpers a tool imports, and a file that breaks keeps its last good version", async () => {
    const parent = mkdtempSync(join(tmpdir(), "mcp-graph-"));
    const dir = join(parent, "tools");
    mkdirSync(dir);
    try {
      writeFileSync(join(dir, "_helper.ts"), 'export const word = "v1";');
      writeFileSync(join(dir, "one.ts"), 'import { word } from "./_helper.ts";\nexport default { run: () => word };');
      await withServer([dir, "--watch"], async (server) => {
        await server.initialize();
        const reloads = () => server.stderr.split("reloaded").length - 1;
        const answer = async (id: string) => {
          server.call(id, "one");
          return text((await server.response(id)).result);
        };
        assert.equal(await answer("a"), "v1");
        writeFileSync(join(dir, "_helper.ts"), 'export const word = "v2";');
        await server.until(() => reloads() >= 1, "a reload after editing the helper");
        assert.equal(await answer("b"), "v2");
        assert.match(server.stderr, /reloaded ".+": 1 tool\n/);

        writeFileSync(join(dir, "one.ts"), "export default { run: ( };");
        await server.until(() => /last good version/.test(server.stderr), "the broken edit reported");
        assert.match(server.stderr, /Cannot load .+one\.ts: SyntaxError: .+; still serving its last good version/);
        assert.equal(await answer("c"), "v2");
        const { result } = await server.request("d", "tools/list");
        assert.deepEqual(result.tools.map((t: Message) => t.name), ["one"]);
        await server.end();
      });
      assert.deepEqual(readdirSync(parent), ["tools"], "no fresh copy is left beside DIR");
    } finally {
      rmSync(parent, { recursive: true });
    }
  });

  test("serve FILE serves that one file; a file that is no plugin is a usage error naming its folder", async () => {
    await withServer(["testdata/tools/add.ts"], async (server) => {
      await server.initialize();
      const { result } = await server.request(1, "tools/list");
      assert.deepEqual(result.tools.map((t: Message) => t.name), ["add"]);
    });
    const run = await runCli(["serve", "testdata/tools/wc.json"]);
    assert.equal(run.code, 2);
    assert.equal(
      run.stderr,
      'mcp: Cannot serve "testdata/tools/wc.json": not a plugin file; give its folder: mcp.ts serve testdata/tools\n',
    );
  });

  test("serve on a terminal says what it is and how to try it", async (t) => {
    if (spawnSync("script", ["--version"]).status !== 0) {
      return t.skip("no script(1) here to give the client a terminal");
    }
    const command = [...RUNTIME, MCP, "serve", "testdata/tools"].map(quote).join(" ");
    const child = spawn("script", ["-q", "-c", command, "/dev/null"], { cwd: HERE, stdio: ["pipe", "pipe", "pipe"] });
    let output = "";
    // The output up to the hint's line, or all of it if it ends without one (or in 20 s: a failure's deadline).
    const hinted = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 20_000);
      const done = () => (clearTimeout(timer), resolve());
      child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
        output += chunk;
        if (/Ctrl-D[^\n]*\n/.test(output)) done();
      });
      child.on("close", done);
    });
    try {
      await hinted;
      assert.match(output, /mcp: serving 7 tools from "testdata\/tools" on stdin\/stdout: .*Ctrl-D or Ctrl-C/);
      assert.match(output, /mcp\.ts list ".+ serve testdata\/tools"/);
    } finally {
      child.kill("SIGKILL");
    }
  });

  test("a module tool stuck in a loop ends serve --http after --timeout + 5 s of its watchdog, naming it; /health is never 200 meanwhile", async () => {
    const server = await startListening(
      [MCP, "serve", HERE + "testdata/stuck", "--http", "0", "--timeout", "1000"],
      /serving (\S+)/,
    );
    try {
      const ok = await fetch(server.url, { method: "POST", headers: JSON_HEADERS, body: JSON.stringify(INIT) });
      assert.equal(ok.status, 200);
      await ok.body?.cancel();
      void fetch(modernPost("tools/call", { name: "spin" }, {}, 2, server.url)).catch(() => {});
      await server.printed(/spin: looping/); // the tool says when it has begun: no waiting for time
      // The watchdog, on the wall clock of a thread of its own, ends it: that it ends at all is the proof (the loop
      // never does), and the line names the tool and how long it blocked.
      const health = await fetch(new URL("/health", server.url), { signal: AbortSignal.timeout(1_000) })
        .then((response) => response.status, () => "no answer");
      assert.notEqual(health, 200, "/health while stuck");
      const { code, signal } = await server.exited;
      assert.ok(code !== 0 || signal !== null, "a non-zero end");
      assert.match(await server.printed(/has blocked/), /mcp: tool "spin" has blocked the server for \d+ s/);
    } finally {
      server.close();
      await server.exited;
    }
  });
});

/**
 * A tool that logs 20,000 lines of 1,000 characters, as fast as it may, and answers how many it sent: 20 MB, more than
 * any pipe or loopback socket holds unread, however fast or slow the machine (a flood of 1 s sent fewer on a busy one,
 * and all of it fitted in the socket's buffers: nothing was dropped).
 */
const FLOOD_TOOL = `export default {
  description: "Logs 20,000 lines of 1,000 characters, as fast as it may",
  run: async (_args, ctx) => {
    let sent = 0;
    while (sent < 20000) {
      for (let i = 0; i < 100; i++, sent++) ctx.log("info", "#" + sent + " " + "x".repeat(1000));
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    return "logged " + sent;
  },
};
`;

describe("10. Server transports: stdio", () => {
  test("serve() as a library on the process's stdout keeps its tools' console output off the protocol", () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-lib-"));
    try {
      const script = join(dir, "server.ts");
      writeFileSync(
        script,
        `import { serve } from ${JSON.stringify(MCP)};\n` +
          `await serve({ tools: [{ name: "noisy", run: () => { console.log("chatter"); return "ok"; } }] }).done;\n`,
      );
      const child = spawnSync(RUNTIME[0], [...RUNTIME.slice(1), script], {
        input: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"noisy"}}\n',
        encoding: "utf8",
        timeout: 20_000,
      });
      assert.equal(child.stdout, '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}\n');
      assert.match(child.stderr, /chatter/);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  test("a client that stops reading does not grow the server: its tools' log lines wait or are dropped (counted), the answer comes", async () => {
    await withTempDir("mcp-flood-", async (dir) => {
      writeFileSync(join(dir, "flood.ts"), FLOOD_TOOL);
      const server = new ServerProcess([dir]);
      try {
        await server.initialize();
        await server.request("level", "logging/setLevel", { level: "debug" });
        server.call(1, "flood");
        await server.until(() => server.messages.some((m) => m.method === "notifications/message"), "the flood");
        server.child.stdout!.pause(); // a client that does not read
        // Node writes stdout synchronously on Linux: there the server waits for its client instead (nothing queues,
        // nothing ends: read again a moment later). Elsewhere the call ends meanwhile, saying what it dropped.
        const waits = !("Deno" in globalThis) && !process.versions.bun && process.platform === "linux";
        const line = /dropped (\d+) progress and log notification\(s\) of flood: the client was not reading/;
        if (waits) await sleep(500);
        else await server.until(() => line.test(server.stderr), "the count of what it dropped", 30_000);
        server.child.stdout!.resume();
        const sent = Number(/^logged (\d+)$/.exec(text((await server.response(1, 60_000)).result))?.[1]);
        const received = server.messages.filter((m) => m.method === "notifications/message").length;
        const dropped = [...server.stderr.matchAll(new RegExp(line, "g"))].reduce(
          (sum, match) => sum + Number(match[1]),
          0,
        );
        assert.ok(received > 0 && (waits ? dropped === 0 : dropped > 0), `received ${received}, dropped ${dropped}`);
        assert.equal(received + dropped, sent, "each line received or counted as dropped");
      } finally {
        await server.end();
      }
    });
  });

  test("--trace writes every frame in and out to stderr", async () => {
    await withServer(["testdata/tools", "--trace"], async (server) => {
      await server.initialize();
      await server.request(2, "ping");
      // stderr and stdout are separate pipes: the trace may arrive just after the answer.
      const traced = /^> \{"jsonrpc":"2\.0","id":2,"result":\{\}\}$/m;
      await server.until(() => traced.test(server.stderr), "the traced answer");
      assert.match(server.stderr, /^< \{"jsonrpc":"2\.0","id":2,"method":"ping"\}$/m);
    });
  });

  test("a Content-Length peer is answered in Content-Length framing", async () => {
    await withServer(["testdata/tools"], async (server) => {
      const body = JSON.stringify(INIT);
      server.child.stdin!.write(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      const ping = '{"jsonrpc":"2.0","id":2,"method":"ping"}';
      server.child.stdin!.write(`Content-Length: ${ping.length}\r\n\r\n${ping}`);
      await server.until(() => server.stdoutText.includes('"id":2'), "framed ping answer");
      const raw = server.stdoutText;
      const frames = raw.split(/Content-Length: \d+\r\n\r\n/).filter(Boolean);
      assert.equal(JSON.parse(frames[0]).result.protocolVersion, "2025-11-25");
      assert.deepEqual(JSON.parse(frames[1]), { jsonrpc: "2.0", id: 2, result: {} });
      assert.match(raw, /^Content-Length: \d+\r\n\r\n\{/);
    }, true);
  });

  test("stdin EOF finishes the calls in flight, flushes and exits 0", async () => {
    await withServer(["testdata/tools"], async (server) => {
      await server.initialize();
      server.call(1, "slow", { steps: 2, ms: 150 });
      server.call(2, "echo", { text: "x" });
      const { code } = await server.end();
      assert.equal(code, 0);
      assert.equal(text(server.messages.find((m) => m.id === 1)!.result), "waited 2 x 150 ms");
      assert.equal(text(server.messages.find((m) => m.id === 2)!.result), "x");
    });
  });

  test("SIGTERM lets a short call finish, then exits 0", async () => {
    await withServer(["testdata/tools"], async (server) => {
      await server.initialize();
      server.call(1, "slow", { steps: 1, ms: 200 });
      await server.request("p", "ping"); // its answer says the call was read
      process.kill(server.child.pid!, "SIGTERM"); // Deno's child.kill() reports the signal, not the exit
      const { code } = await server.exit;
      assert.equal(code, 0);
      assert.equal(text(server.messages.find((m) => m.id === 1)!.result), "waited 1 x 200 ms");
    });
  });

  test("SIGINT ends a server whose call outlives the grace period", async () => {
    await withServer(["testdata/tools"], async (server) => {
      await server.initialize();
      server.call(1, "slow", { steps: 1, ms: 30_000 });
      await server.request("p", "ping"); // its answer says the call was read
      const started = Date.now();
      process.kill(server.child.pid!, "SIGINT");
      const { code } = await server.exit;
      assert.equal(code, 0);
      // The grace is 2 s: far under the call's 30 s, with room for a busy machine.
      assert.ok(Date.now() - started < 15_000, `bounded by the grace period: ${Date.now() - started} ms`);
      assert.ok(!server.messages.some((m) => m.id === 1));
    });
  });

  test("a closed stdout ends the server quietly", async () => {
    await withServer(["testdata/tools"], async (server) => {
      await server.initialize();
      server.child.stdout!.destroy();
      server.call(1, "echo", { text: "into the void" });
      server.call(2, "echo", { text: "again" });
      // Nothing to await: a closed stdout is met in silence (that is what is checked). A moment for the answers to
      // meet the closed pipe before stdin ends; on a slow machine EOF may come first, which must be quiet too.
      await sleep(100);
      server.child.stdin!.end();
      const { code } = await server.exit;
      assert.equal(code, 0);
      assert.doesNotMatch(server.stderr, /EPIPE|Error/);
    });
  });

  test("serve() runs on any stream pair, with tools given in code", async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    let out = "";
    output.setEncoding("utf8");
    output.on("data", (chunk: string) => out += chunk);
    const handle = serve({
      input,
      output,
      tools: [{ name: "double", inputSchema: { type: "object" }, run: ({ n }: { n: number }) => n * 2 }],
    });
    input.write(JSON.stringify(INIT) + "\n");
    input.end('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"double","arguments":{"n":21}}}\n');
    await handle.done;
    const messages = out.trim().split("\n").map((line) => JSON.parse(line));
    assert.equal(messages.length, 2);
    assert.deepEqual(messages[1].result.content, [{ type: "text", text: "42" }]);
  });
});

describe("10. Server transports: Streamable HTTP", () => {
  test("a client that stops reading its SSE answer does not grow serve --http: its tools' log lines are dropped (counted)", async () => {
    await withTempDir("mcp-flood-http-", async (dir) => {
      writeFileSync(join(dir, "flood.ts"), FLOOD_TOOL);
      const server = await startListening([MCP, "serve", dir, "--http", "0"], /serving (\S+)/);
      try {
        const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
        const post = (body: Message, more: Record<string, string> = {}) =>
          fetch(server.url, { method: "POST", headers: { ...headers, ...more }, body: JSON.stringify(body) });
        const opened = await post(INIT);
        const on = { "mcp-session-id": opened.headers.get("mcp-session-id")!, "mcp-protocol-version": "2025-11-25" };
        await opened.text();
        await (await post({ jsonrpc: "2.0", method: "notifications/initialized" }, on)).text();
        await (await post({ jsonrpc: "2.0", id: 2, method: "logging/setLevel", params: { level: "debug" } }, on))
          .text();
        // The call's answer is an SSE stream: its head comes with the first log line, and then nothing is read.
        const call = { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "flood" } };
        const response = await new Promise<import("node:http").IncomingMessage>((resolve, reject) => {
          const request = httpRequest(server.url, { method: "POST", headers: { ...headers, ...on } }, resolve);
          request.on("error", reject);
          request.end(JSON.stringify(call));
        });
        // The call ends while its answer waits unread, saying on stderr what it dropped (none said in 30 s: none).
        const line = /dropped (\d+) progress and log notification\(s\) of flood: the client was not reading/;
        const said = await Promise.race([server.printed(line).catch(() => ""), sleep(30_000).then(() => "")]);
        let body = "";
        for await (const chunk of response) body += chunk;
        const messages = [...body.matchAll(/^data: (.+)$/gm)].map((match) => JSON.parse(match[1]));
        const received = messages.filter((m) => m.method === "notifications/message").length;
        const answer = messages.find((m) => m.id === 3);
        const sent = Number(/^logged (\d+)$/.exec(text(answer?.result))?.[1]);
        const dropped = Number(line.exec(said)?.[1] ?? 0);
        assert.ok(dropped > 0 && received > 0, `received ${received}, dropped ${dropped} of ${sent}`);
        assert.equal(received + dropped, sent, "each line received or counted as dropped");
      } finally {
        server.close();
      }
    });
  });

  test("stateless requests share one session (the fast path): none is made per request", async () => {
    const handler = createHandler({ tools: HTTP_TOOLS });
    try {
      for (let i = 0; i < 20; i++) {
        const answer = await handler(modernPost("tools/call", { name: "add", arguments: { a: i, b: 1 } }, {}, i));
        assert.equal((await rpcAnswer(answer)).result.content[0].text, String(i + 1));
      }
      assert.equal(handler.core.sessionsMade, 1);
    } finally {
      handler.close();
    }
  });

  test("--metrics under a flood of made-up names: labels only from what is served, series capped, the page bounded", async () => {
    const handler = createHandler({ tools: [{ name: "add", run: () => "3" }], metrics: true });
    try {
      const unknown = (name: string, method = "tools/call") =>
        handler(modernPost(method, { name }, { "mcp-name": name.slice(0, 100) })).then((answer) => answer.text());
      for (let i = 0; i < 2_000; i++) await unknown(`tool-${i}`);
      for (let i = 0; i < 50; i++) await unknown(`m${i}`, `made/up${i}`);
      await unknown("x".repeat(200_000));
      const page = await handler(new Request("http://127.0.0.1:8080/metrics"));
      assert.equal(page.status, 200);
      const text = await page.text();
      const series = new Set(text.split("\n").filter((line) => line.includes("_count{")));
      assert.ok(series.size <= 3, `${series.size} series: ${[...series].join("\n")}`);
      assert.match(text, /mcp_method_name="_OTHER"/);
      assert.ok(text.length < 20_000, `a page of ${text.length} characters`);
    } finally {
      handler.close();
    }
    // Past the series cap (a proxy learns names from what it is told), points go to one overflow series.
    const metrics = new Metrics();
    for (let i = 0; i < 2_500; i++) metrics.record("m", 0.001, { k: String(i) });
    const page = metrics.prometheus();
    assert.equal(page.split("\n").filter((line) => line.startsWith("m_seconds_count{")).length, 2_001);
    assert.match(page, /^m_seconds_count\{otel_metric_overflow="true"\} 500$/m);
  });

  test("--metrics-token: /metrics then always wants a credential; without --metrics it is a usage error on every transport", async () => {
    const handler = createHandler({ tools: [], metrics: true, metricsToken: "scrape" });
    try {
      const get = (headers: Record<string, string> = {}) =>
        handler(new Request("http://127.0.0.1:8080/metrics", { headers }));
      assert.equal((await get()).status, 401, "loopback, no --token: the token asked for is still wanted");
      assert.equal((await get({ authorization: "Bearer nope" })).status, 401);
      assert.equal((await get({ authorization: "Bearer scrape" })).status, 200);
    } finally {
      handler.close();
    }
    const [stdio, http, variable] = await Promise.all([
      runCli(["serve", HERE + "testdata/tools", "--metrics-token", "t"], { spawn: true }),
      runCli(["gateway", `a=${SERVE}`, "--http", "0", "--metrics-token", "t"], { spawn: true }),
      runCli(["serve", HERE + "testdata/tools"], { env: { MCP_TS_METRICS_TOKEN: "t" }, stdin: "" }),
    ]);
    for (const run of [stdio, http]) {
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, /--metrics-token goes with --metrics/);
    }
    assert.equal(variable.code, 0, `the variable alone is read only with --metrics: ${variable.stderr}`);
  });

  test("--metrics: GET /metrics has each request's duration as a Prometheus histogram, behind the endpoint's checks", async () => {
    const tools = [{ name: "add", run: () => "3" }, { name: "oops", run: () => Promise.reject(new Error("no")) }];
    const get = (handler: McpHandler, headers: Record<string, string> = {}) =>
      handler(new Request("http://127.0.0.1:8080/metrics", { headers }));
    const handler = createHandler({ tools, metrics: true, token: "secret", metricsToken: "scrape" });
    const off = createHandler({ tools });
    try {
      const auth = { authorization: "Bearer secret" };
      await (await handler(modernPost("tools/call", { name: "add" }, auth))).text();
      await (await handler(modernPost("tools/call", { name: "oops" }, auth))).text();
      await (await handler(modernPost("tools/call", { name: "nope" }, auth))).text();
      assert.equal((await get(handler)).status, 401, "the endpoint's credentials");
      assert.equal((await get(handler, { authorization: "Bearer wrong" })).status, 401);
      const scraped = await get(handler, { authorization: "Bearer scrape" });
      assert.equal(scraped.status, 200);
      assert.equal(scraped.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
      assert.equal(scraped.headers.get("access-control-allow-origin"), null, "no CORS");
      const text = await scraped.text();
      assert.equal(text, handler.metrics());
      assert.equal((await get(handler, auth)).status, 200, "the endpoint's token is good for it too");
      assert.equal(
        (await handler(modernPost("tools/call", { name: "add" }, { authorization: "Bearer scrape" }))).status,
        401,
        "the metrics token calls no tool",
      );
      assert.match(text, /^target_info\{service_name="mcp\.ts",telemetry_sdk_name="mcp\.ts",.*\} 1$/m);
      assert.match(text, /^# TYPE mcp_server_operation_duration_seconds histogram$/m);
      const added = 'mcp_method_name="tools/call",gen_ai_tool_name="add",gen_ai_operation_name="execute_tool"';
      // The one call's duration is in each bucket from the first that holds it on (cumulative), whatever it took: a busy
      // machine may take more than 10 ms for it.
      const series = (kind: string, tail: string) =>
        new RegExp(`^mcp_server_operation_duration_seconds_${kind}\\{[^}]*${added}[^}]*${tail}\\} (\\S+)$`, "gm");
      const sum = Number(series("sum", "").exec(text)?.[1]);
      assert.ok(sum > 0, text);
      const buckets = [...text.matchAll(series("bucket", ',le="([^"]+)"'))].map(([, le, count]) => [
        le === "+Inf" ? Infinity : Number(le),
        Number(count),
      ]);
      assert.ok(buckets.length > 5 && buckets.some(([le]) => le === 0.01), text);
      for (const [le, count] of buckets) assert.equal(count, sum <= le ? 1 : 0, `le=${le}, the sum ${sum} s`);
      assert.match(
        text,
        new RegExp(`^mcp_server_operation_duration_seconds_bucket\\{[^}]*${added}[^}]*,le="\\+Inf"\\} 1$`, "m"),
      );
      assert.match(text, new RegExp(`^mcp_server_operation_duration_seconds_count\\{[^}]*${added}[^}]*\\} 1$`, "m"));
      assert.match(text, /gen_ai_tool_name="oops".*error_type="tool_error"/);
      // A tool the server does not have is no label of its own: a client chooses that name (Safety: quotas).
      assert.match(text, /gen_ai_tool_name="_OTHER".*error_type="-32602"/);
      assert.match(text, /gen_ai_tool_name="_OTHER".*rpc_response_status_code="-32602"/);
      assert.doesNotMatch(text, /"nope"/);
      assert.equal((await get(off)).status, 404, "without --metrics: 404 as before");
      assert.equal(off.metrics(), "", "and nothing kept");
    } finally {
      handler.close();
      off.close();
    }
    // A legacy session's end is a session duration; a label value is escaped.
    const open = createHandler({ tools, metrics: true });
    try {
      const init = await open(legacyPost(INIT));
      const session = init.headers.get("mcp-session-id")!;
      await init.text();
      await (await open(new Request(URL_MCP, { method: "DELETE", headers: { "mcp-session-id": session } }))).text();
      const text = await (await get(open)).text();
      assert.match(text, /^mcp_server_session_duration_seconds_count\{[^}]*mcp_protocol_version="2025-11-25"\} 1$/m);
    } finally {
      open.close();
    }
    const escaped = new Metrics();
    escaped.record("x", 0.5, { "a.b": 'say "hi"\\now\n' });
    assert.match(escaped.prometheus(), /^x_seconds_bucket\{a_b="say \\"hi\\"\\\\now\\n",le="0\.5"\} 1$/m);
  });

  test("tasks over HTTP: Mcp-Name must name the task, ids carry the instance, close cancels what runs", async () => {
    const aborted: string[] = [];
    let finish!: () => void;
    let finished = new Promise<void>((resolve) => finish = resolve);
    const tool = {
      name: "build",
      execution: { taskSupport: "optional" as const },
      run: async (_: unknown, ctx: ToolContext) => {
        const waiting = finished;
        await ctx.task("compiling");
        ctx.signal.addEventListener("abort", () => aborted.push((ctx.signal.reason as Error).message));
        await waiting;
        return "built";
      },
    };
    const handler = createHandler({ tools: [tool], instanceId: "eu-1" });
    const post = (method: string, params: Message, name?: string) => handler(taskPost(method, params, name));
    try {
      const created = await (await post("tools/call", { name: "build" }, "build")).json();
      assert.equal(created.result.resultType, "task");
      const { taskId } = created.result;
      assert.match(taskId, /^eu-1\./);
      const wrong = await post("tasks/get", { taskId }, "eu-2.other");
      assert.equal(wrong.status, 400);
      assert.equal((await wrong.json()).error.code, -32020);
      const missing = await post("tasks/get", { taskId });
      assert.equal(missing.status, 400, "Mcp-Name is required on tasks/get");
      await missing.body?.cancel();
      const got = await (await post("tasks/get", { taskId }, taskId)).json();
      assert.deepEqual([got.result.status, got.result.statusMessage], ["working", "compiling"]);
      const second = await (await post("tools/call", { name: "build" }, "build")).json();
      finish();
      // Polled, as a client follows a task (its end sends nothing to a client that does not listen); 15 s at most.
      await pollUntil(
        async () => (await (await post("tasks/get", { taskId }, taskId)).json()).result,
        (task: Message) => task.status === "completed",
        "the task to complete",
      );
      assert.equal((await (await post("tasks/get", { taskId }, taskId)).json()).result.result.content[0].text, "built");
      assert.equal(second.result.resultType, "task");
      assert.deepEqual(aborted, [], "both ended by themselves");
      finished = new Promise<void>(() => {}); // the next one runs until the server closes
      assert.equal((await (await post("tools/call", { name: "build" }, "build")).json()).result.resultType, "task");
    } finally {
      handler.close();
    }
    assert.deepEqual(aborted, ["the server shut down"], "closing the handler cancelled the task still running");
  });

  test("2026-07-28: a plain answer is JSON; notifications first make an SSE stream that the answer ends", async () => {
    const handler = createHandler({ tools: HTTP_TOOLS });
    try {
      const plain = await handler(modernPost("tools/call", { name: "add", arguments: { a: 2, b: 3 } }));
      assert.equal(plain.status, 200);
      assert.match(plain.headers.get("content-type")!, /^application\/json/);
      const body = await plain.json();
      assert.deepEqual(body.result.content, [{ type: "text", text: "5" }]);
      assert.equal(body.result.resultType, "complete");
      const request = modernPost("tools/call", { name: "slow" }, {});
      const withToken = new Request(request, {
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 7,
          method: "tools/call",
          params: modern({ name: "slow" }, { progressToken: "p" }),
        }),
      });
      const sse = await handler(withToken);
      assert.equal(sse.headers.get("content-type"), "text/event-stream");
      const messages = await sseMessages(sse);
      assert.deepEqual(messages.map((m) => m.method ?? `result ${m.id}`), ["notifications/progress", "result 7"]);
    } finally {
      handler.close();
    }
  });

  test("2026-07-28: calls in flight with the same id (two clients' id 1) each get their own answer, and the id is free after", async () => {
    const gates: Record<string, () => void> = {};
    let bothRun!: () => void;
    const running = new Promise<void>((resolve) => bothRun = resolve);
    const wait = {
      name: "wait",
      inputSchema: { type: "object", properties: { key: { type: "string" } } },
      run: async ({ key }: Message) => {
        const gate = new Promise<void>((resolve) => gates[key as string] = resolve);
        if (Object.keys(gates).length === 2) bothRun();
        await gate;
        return `done ${key}`;
      },
    };
    const handler = createHandler({ tools: [wait, ...HTTP_TOOLS] });
    try {
      const first = handler(modernPost("tools/call", { name: "wait", arguments: { key: "a" } }));
      const second = handler(modernPost("tools/call", { name: "wait", arguments: { key: "b" } }));
      const sync = await handler(modernPost("tools/call", { name: "add", arguments: { a: 1, b: 1 } }));
      assert.equal((await sync.json()).error?.message, undefined, "a third id 1 is answered too");
      await running;
      assert.deepEqual(Object.keys(gates).sort(), ["a", "b"], "both calls run");
      gates.b();
      gates.a();
      const texts = [];
      for (const response of await Promise.all([first, second])) {
        const body = response.headers.get("content-type") === "text/event-stream"
          ? (await sseMessages(response)).at(-1)!
          : await response.json();
        assert.equal(body.id, 1);
        texts.push(body.result.content[0].text);
      }
      assert.deepEqual(texts, ["done a", "done b"], "each answer goes to the request that asked");
      const again = await handler(modernPost("tools/call", { name: "add", arguments: { a: 2, b: 2 } }));
      assert.equal((await again.json()).result.content[0].text, "4");
      assert.equal(handler.pending, 0);
    } finally {
      handler.close();
    }
  });

  test("2026-07-28: a closed response stream cancels its call (its plugin code sees the abort)", async () => {
    let started!: () => void;
    const running = new Promise<void>((resolve) => started = resolve);
    let abortedWith!: (reason: unknown) => void;
    const aborted = new Promise((resolve) => abortedWith = resolve);
    const hang = {
      name: "hang",
      run: (_: unknown, ctx: ToolContext) =>
        new Promise((_, reject) => {
          started();
          ctx.signal.addEventListener("abort", () => {
            abortedWith(ctx.signal.reason);
            reject(ctx.signal.reason);
          });
        }),
    };
    const handler = createHandler({ tools: [hang] });
    try {
      const controller = new AbortController();
      const request = new Request(modernPost("tools/call", { name: "hang" }), { signal: controller.signal });
      const response = handler(request);
      await running;
      assert.equal(handler.pending, 1);
      controller.abort(); // Bun, Node: the request's signal says the client went away
      // Deno gives no such signal: a call still running answers with a stream after a moment; closing it says so.
      void response.then((answered) => answered.body?.cancel());
      assert.match(String(await aborted), /closed the response stream/);
      assert.equal(handler.pending, 0, "nothing left running");
    } finally {
      handler.close();
    }
  });

  test("2026-07-28: mirror headers are checked (400 -32020), then the envelope (-32022, -32602), unknown methods are 404", async () => {
    const handler = createHandler({ tools: HTTP_TOOLS });
    const expect = async (request: Request, status: number, code: number) => {
      const response = await handler(request);
      const body = await response.json();
      assert.deepEqual([response.status, body.error?.code], [status, code], JSON.stringify(body));
      return body;
    };
    try {
      await expect(modernPost("tools/list", {}, { "mcp-protocol-version": null }), 400, -32020);
      await expect(modernPost("tools/list", {}, { "mcp-protocol-version": "2025-11-25" }), 400, -32020);
      await expect(modernPost("tools/list", {}, { "mcp-method": "tools/call" }), 400, -32020);
      await expect(modernPost("tools/list", {}, { "mcp-method": null }), 400, -32020);
      await expect(modernPost("tools/call", { name: "add" }, { "mcp-name": null }), 400, -32020);
      await expect(modernPost("tools/call", { name: "add" }, { "mcp-name": "other" }), 400, -32020);
      const sentinel = await handler(
        modernPost("tools/call", { name: "add" }, { "mcp-name": `=?base64?${btoa("add")}?=` }),
      );
      assert.equal(sentinel.status, 200, "a Base64-encoded Mcp-Name is decoded");
      const spaced = await handler(modernPost("tools/call", { name: "add" }, { "mcp-name": "  add  " }));
      assert.equal(spaced.status, 200, "surrounding whitespace is not part of the value");
      const region = { name: "regional", arguments: { region: "us-west1", n: 42 } };
      assert.equal(
        (await handler(modernPost("tools/call", region, { "mcp-param-region": "us-west1", "mcp-param-n": "42" })))
          .status,
        200,
      );
      await expect(modernPost("tools/call", region, { "mcp-param-region": "eu", "mcp-param-n": "42" }), 400, -32020);
      await expect(modernPost("tools/call", region, { "mcp-param-n": "42" }), 400, -32020);
      await expect(
        modernPost("tools/call", region, { "mcp-param-region": "=?base64?!!?=", "mcp-param-n": "42" }),
        400,
        -32020,
      );

      const version = new Request(URL_MCP, {
        method: "POST",
        headers: { ...JSON_HEADERS, "mcp-protocol-version": "v999.0.0", "mcp-method": "server/discover" },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 3,
          method: "server/discover",
          params: {
            _meta: {
              "io.modelcontextprotocol/protocolVersion": "v999.0.0",
              "io.modelcontextprotocol/clientCapabilities": {},
            },
          },
        }),
      });
      const unsupported = await expect(version, 400, -32022);
      assert.deepEqual(unsupported.error.data, { supported: ["2026-07-28"], requested: "v999.0.0" });
      assert.equal(unsupported.id, 3);
      const bare = new Request(URL_MCP, {
        method: "POST",
        headers: { ...JSON_HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 4, method: "server/discover", params: {} }),
      });
      await expect(bare, 400, -32602);
      await expect(modernPost("initialize"), 404, -32601);
      await expect(modernPost("unknown/method"), 404, -32601);
      const needs = createHandler({
        tools: [{ name: "needs", run: (_: unknown, ctx: ToolContext) => ctx.sample({}) }],
      });
      const request = new Request(URL_MCP, {
        method: "POST",
        headers: {
          ...JSON_HEADERS,
          "mcp-protocol-version": "2026-07-28",
          "mcp-method": "tools/call",
          "mcp-name": "needs",
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 5,
          method: "tools/call",
          params: {
            name: "needs",
            _meta: {
              "io.modelcontextprotocol/protocolVersion": "2026-07-28",
              "io.modelcontextprotocol/clientCapabilities": {},
            },
          },
        }),
      });
      const missing = await (async () => {
        const response = await needs(request);
        return [response.status, (await response.json()).error];
      })();
      needs.close();
      assert.deepEqual(missing, [400, {
        code: -32021,
        message: "Missing required client capability: sampling",
        data: { requiredCapabilities: { sampling: {} } },
      }]);
      const notification = new Request(URL_MCP, {
        method: "POST",
        headers: { ...JSON_HEADERS, "mcp-protocol-version": "2026-07-28" },
        body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/cancelled", params: modern({ requestId: 9 }) }),
      });
      assert.equal((await handler(notification)).status, 202);
    } finally {
      handler.close();
    }
  });

  test("2026-07-28: an input-required round trip, and a closed stream cancels its request", async () => {
    let aborted = false;
    let onAbort = () => {};
    const abortHeard = new Promise<void>((resolve) => onAbort = resolve);
    const tools = [...HTTP_TOOLS, {
      name: "wait",
      run: (_: unknown, ctx: ToolContext) =>
        new Promise((resolve) => {
          ctx.progress(1);
          ctx.signal.addEventListener("abort", () => {
            aborted = true;
            onAbort();
            resolve("stopped");
          });
        }),
    }];
    const handler = createHandler({ tools });
    try {
      // A call that answers later may stream (on Deno one still running after 250 ms does).
      const first = await rpcAnswer(await handler(modernPost("tools/call", { name: "ask" })));
      assert.equal(first.result.resultType, "input_required");
      const retry = await rpcAnswer(
        await handler(modernPost(
          "tools/call",
          {
            name: "ask",
            inputResponses: { who: { action: "accept", content: { name: "Ada" } } },
            requestState: first.result.requestState,
          },
          {},
          2,
        )),
      );
      assert.equal(retry.result.content[0].text, "hi Ada");

      const request = modernPost("tools/call", { name: "wait" });
      const withToken = new Request(request, {
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 8,
          method: "tools/call",
          params: modern({ name: "wait" }, { progressToken: 1 }),
        }),
      });
      const response = await handler(withToken);
      assert.equal(response.headers.get("content-type"), "text/event-stream");
      await response.body!.cancel();
      await within(abortHeard, "closing the stream aborted the tool's signal");
      assert.ok(aborted);
      await new Promise((resolve) => setImmediate(resolve)); // a turn: the handler's own end of the aborted call
      assert.equal(handler.pending, 0);
    } finally {
      handler.close();
    }
  });

  test("legacy: sessions from initialize, 400 without one, 404 unknown, DELETE ends one, the GET stream resumes", async () => {
    const handler = createHandler({ tools: HTTP_TOOLS, listChanged: true });
    try {
      const init = await handler(legacyPost(INIT));
      assert.equal(init.status, 200);
      const session = init.headers.get("mcp-session-id")!;
      assert.match(session, /^[\x21-\x7e]+$/);
      assert.equal((await init.json()).result.protocolVersion, "2025-11-25");
      const withSession = { "mcp-session-id": session, "mcp-protocol-version": "2025-11-25" };
      assert.equal(
        (await handler(legacyPost({ jsonrpc: "2.0", method: "notifications/initialized" }, withSession))).status,
        202,
      );
      const call = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "add", arguments: { a: 1, b: 2 } } };
      assert.equal((await (await handler(legacyPost(call, withSession))).json()).result.content[0].text, "3");
      assert.equal((await handler(legacyPost(call))).status, 400, "no session id");
      assert.equal((await handler(legacyPost(call, { "mcp-session-id": "nope" }))).status, 404);
      const badVersion = await handler(legacyPost(call, { ...withSession, "mcp-protocol-version": "1999-01-01" }));
      assert.equal(badVersion.status, 400);

      // The GET stream carries server-initiated messages; events have ids and can be resumed.
      const get = (headers: Record<string, string> = {}) =>
        handler(new Request(URL_MCP, { headers: { accept: "text/event-stream", ...withSession, ...headers } }));
      const stream = await get();
      assert.equal(stream.headers.get("content-type"), "text/event-stream");
      handler.core.setCatalog({ ...handler.core.catalog, tools: handler.core.catalog.tools.slice(1) });
      const [changed] = await sseMessages(stream, 1);
      assert.equal(changed.method, "notifications/tools/list_changed");
      handler.core.setCatalog({ ...handler.core.catalog, tools: handler.core.catalog.tools.slice(1) });
      const resumed = await get({ "last-event-id": "0-1" });
      assert.deepEqual((await sseMessages(resumed, 1)).map((m) => m.method), ["notifications/tools/list_changed"]);

      const deleted = await handler(new Request(URL_MCP, { method: "DELETE", headers: withSession }));
      assert.equal(deleted.status, 200);
      assert.equal((await handler(legacyPost(call, withSession))).status, 404, "an ended session");
    } finally {
      handler.close();
    }
  });

  test("legacy: a tool's question to the client travels on its request's SSE stream; the answer comes back as a POST", async () => {
    const tool = {
      name: "pick",
      run: async (_: unknown, ctx: ToolContext) =>
        `picked ${((await ctx.elicit({ message: "which?" })).content as Message).x}`,
    };
    const handler = createHandler({ tools: [tool] });
    try {
      const init = await handler(
        legacyPost({ ...INIT, params: { ...INIT.params, capabilities: { elicitation: {} } } }),
      );
      const headers = { "mcp-session-id": init.headers.get("mcp-session-id")! };
      const response = await handler(
        legacyPost({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "pick" } }, headers),
      );
      assert.equal(response.headers.get("content-type"), "text/event-stream");
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      while (!text.includes("elicitation/create")) text += (await reader.read()).value ?? "";
      assert.match(text, /^id: \d+-0\nretry: \d+\ndata: \n\n/, "a priming event first");
      const question = JSON.parse(/data: (\{.*elicitation\/create.*\})/.exec(text)![1]);
      const answer = { jsonrpc: "2.0", id: question.id, result: { action: "accept", content: { x: "blue" } } };
      assert.equal((await handler(legacyPost(answer, headers))).status, 202);
      while (!text.includes('"result"')) text += (await reader.read()).value ?? "";
      assert.match(text, /picked blue/);
    } finally {
      handler.close();
    }
  });

  test("legacy: notifications/cancelled ends the cancelled request's POST without a response", async () => {
    // A tool that says when it runs and ends only when aborted: the cancel comes while it runs, however slow the machine.
    let running = () => {};
    const ran = new Promise<void>((resolve) => running = resolve);
    const hold = {
      name: "hold",
      run: (_: unknown, ctx: ToolContext) =>
        new Promise((resolve) => {
          running();
          ctx.signal.addEventListener("abort", () => resolve("stopped"));
        }),
    };
    const handler = createHandler({ tools: [...HTTP_TOOLS, hold] });
    try {
      const init = await handler(legacyPost(INIT));
      const headers = { "mcp-session-id": init.headers.get("mcp-session-id")! };
      const pending = handler(
        legacyPost({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "hold" } }, headers),
      );
      await within(ran, "the call running");
      const cancel = { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 5 } };
      assert.equal((await handler(legacyPost(cancel, headers))).status, 202);
      const ended = await within(pending, "the cancelled request's POST ended");
      assert.equal(ended.headers.get("content-type"), "text/event-stream");
      assert.deepEqual(await sseMessages(ended), [], "no response for a cancelled request");
    } finally {
      handler.close();
    }
  });

  test("security: Host and Origin checks, CORS for allowed origins, bearer token, body limits, /health", async () => {
    const handler = createHandler({
      tools: HTTP_TOOLS,
      token: "s3cret",
      allowOrigins: ["https://app.example"],
      maxBodyBytes: 1000,
    });
    const auth = { authorization: "Bearer s3cret" };
    try {
      const evil = await handler(
        new Request("http://evil.example/mcp", {
          method: "POST",
          headers: { ...JSON_HEADERS, ...auth, host: "evil.example" },
          body: "{}",
        }),
      );
      assert.equal(evil.status, 403);
      const origin = await handler(legacyPost(INIT, { ...auth, origin: "http://evil.example" }));
      assert.equal(origin.status, 403);
      const same = await handler(legacyPost(INIT, { ...auth, origin: "http://localhost:8080" }));
      assert.equal(same.status, 200);
      const cors = await handler(legacyPost(INIT, { ...auth, origin: "https://app.example" }));
      assert.equal(cors.headers.get("access-control-allow-origin"), "https://app.example");
      assert.match(cors.headers.get("access-control-expose-headers")!, /mcp-session-id/);
      const preflight = await handler(
        new Request(URL_MCP, { method: "OPTIONS", headers: { origin: "https://app.example" } }),
      );
      assert.equal(preflight.status, 204);
      assert.match(preflight.headers.get("access-control-allow-headers")!, /mcp-protocol-version/);
      assert.equal((await handler(legacyPost(INIT))).status, 401);
      assert.equal((await handler(legacyPost(INIT, { authorization: "Bearer s3cres" }))).status, 401);
      const big = await handler(legacyPost({ ...INIT, pad: "x".repeat(2000) }, auth));
      assert.equal(big.status, 413);
      assert.match((await big.json()).error.message, /1000-byte limit/);
      const text = await handler(
        new Request(URL_MCP, { method: "POST", headers: { ...auth, "content-type": "text/plain" }, body: "{}" }),
      );
      assert.equal(text.status, 415);
      const broken = await handler(
        new Request(URL_MCP, { method: "POST", headers: { ...JSON_HEADERS, ...auth }, body: "{not json" }),
      );
      assert.deepEqual([broken.status, (await broken.json()).error.code], [400, -32700]);
      const batch = await handler(
        new Request(URL_MCP, { method: "POST", headers: { ...JSON_HEADERS, ...auth }, body: "[]" }),
      );
      assert.deepEqual([batch.status, (await batch.json()).error.code], [400, -32600]);
      assert.deepEqual(await (await handler(new Request("http://127.0.0.1:8080/health"))).json(), { status: "ok" });
      assert.equal((await handler(new Request("http://127.0.0.1:8080/other", { headers: auth }))).status, 404);
      assert.equal((await handler(legacyPost(INIT, auth))).status, 200, "still serving");
    } finally {
      handler.close();
    }
  });

  test("--stateless: legacy POSTs are served alone, without sessions; GET and DELETE are 405", async () => {
    const handler = createHandler({ tools: HTTP_TOOLS, stateless: true });
    try {
      const init = await handler(legacyPost(INIT));
      assert.equal(init.headers.get("mcp-session-id"), null);
      const call = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "add", arguments: { a: 1, b: 1 } } };
      assert.equal((await (await handler(legacyPost(call))).json()).result.content[0].text, "2");
      assert.equal((await handler(new Request(URL_MCP, { headers: { accept: "text/event-stream" } }))).status, 405);
      assert.equal((await handler(new Request(URL_MCP, { method: "DELETE" }))).status, 405);
    } finally {
      handler.close();
    }
  });

  test("serve --http on a real socket: both eras, a refusal to bind beyond loopback without a check, SIGTERM exits 0", async () => {
    const server = spawn(RUNTIME[0], [...RUNTIME.slice(1), MCP, "serve", "testdata/tools", "--http", "127.0.0.1:0"], {
      cwd: HERE,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    let stdout = "";
    server.stderr!.setEncoding("utf8").on("data", (text: string) => stderr += text);
    server.stdout!.setEncoding("utf8").on("data", (text: string) => stdout += text);
    const exited = new Promise<number | null>((resolve) => server.on("close", (code) => resolve(code)));
    try {
      await whenPrinted(server, () => /serving http:.*\n/.test(stderr), "serving");
      const url = /mcp: serving (http:\/\/127\.0\.0\.1:\d+\/mcp)\n/.exec(stderr)![1];
      const response = await fetch(url, {
        method: "POST",
        headers: {
          ...JSON_HEADERS,
          "mcp-protocol-version": "2026-07-28",
          "mcp-method": "tools/call",
          "mcp-name": "add",
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: modern({ name: "add", arguments: { a: 2, b: 3 } }),
        }),
      });
      assert.equal((await response.json()).result.content[0].text, "5");
      const init = await fetch(url, { method: "POST", headers: JSON_HEADERS, body: JSON.stringify(INIT) });
      assert.ok(init.headers.get("mcp-session-id"));
      await init.body?.cancel();
      server.kill("SIGTERM");
      // Deno 2.9.6's node:child_process reports a child it sent kill() as ended by that
      // signal even when the child exited 0 by itself (checked with a plain Deno.exit(0) child).
      const code = await exited;
      if (!("Deno" in globalThis)) assert.equal(code, 0);
      assert.equal(stdout, "", "stdout stays silent");
    } finally {
      server.kill("SIGKILL");
    }
    const open = await runCli(["serve", "testdata/tools", "--http", "0.0.0.0:0"]);
    assert.equal(open.code, 2);
    assert.match(open.stderr, /^mcp: Cannot serve on 0\.0\.0\.0 without a credential check: .*--token TOKEN/);
  });

  test("serve --http: a client that goes away cancels its call; SIGTERM lets a call in flight finish", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-http-cancel-"));
    writeFileSync(
      join(dir, "wait.ts"),
      `export default { run: (args: { ms: number }, ctx: any) => new Promise((resolve) => {
        console.error("started: " + args.ms);
        const timer = setTimeout(() => resolve("waited"), args.ms);
        ctx.signal.addEventListener("abort", () => { clearTimeout(timer); console.error("aborted: " + ctx.signal.reason?.message); resolve("stopped"); });
      }) };`,
    );
    const server = spawn(RUNTIME[0], [...RUNTIME.slice(1), MCP, "serve", dir, "--http", "0"], {
      cwd: HERE,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    server.stderr!.setEncoding("utf8").on("data", (text: string) => stderr += text);
    const exited = new Promise<void>((resolve) => server.on("close", () => resolve()));
    const call = (id: number, ms: number, signal?: AbortSignal) =>
      fetch(/mcp: serving (http:\/\/[^\s]+)\n/.exec(stderr)![1], {
        method: "POST",
        signal,
        headers: {
          ...JSON_HEADERS,
          "mcp-protocol-version": "2026-07-28",
          "mcp-method": "tools/call",
          "mcp-name": "wait",
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id,
          method: "tools/call",
          params: modern({ name: "wait", arguments: { ms } }),
        }),
      });
    try {
      await whenPrinted(server, () => /serving http:.*\n/.test(stderr), "serving");
      const gone = new AbortController();
      const abandoned = call(1, 60_000, gone.signal).then((response) => response.text()).catch(() => "");
      await whenPrinted(server, () => stderr.includes("started: 60000\n"), "the first call running");
      gone.abort();
      await abandoned;
      await whenPrinted(server, () => /aborted.*\n/.test(stderr), "the first call aborted");
      assert.match(stderr, /aborted: the client closed the response stream/);

      // 700 ms to go when SIGTERM comes: well inside the 2 s grace.
      const inFlight = call(2, 700).then(rpcAnswer);
      await whenPrinted(server, () => stderr.includes("started: 700\n"), "the second call running");
      server.kill("SIGTERM");
      assert.equal((await inFlight).result.content[0].text, "waited", "answered within the grace period");
      await exited;
    } finally {
      server.kill("SIGKILL");
      rmSync(dir, { recursive: true });
    }
  });

  test("scale-out: two instances with one MCP_TS_STATE_KEY behind a round-robin proxy continue each other's calls", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-scale-"));
    writeFileSync(
      join(dir, "ask.ts"),
      `export default { run: async (_a: unknown, ctx: any) => "hello " + (await ctx.elicit({ message: "?" }, { key: "who" })).content.name + " from " + Deno?.pid };`
        .replace(' + " from " + Deno?.pid', ""),
    );
    const start = () => {
      const child = spawn(RUNTIME[0], [...RUNTIME.slice(1), MCP, "serve", dir, "--http", "0"], {
        cwd: HERE,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, MCP_TS_STATE_KEY: "shared secret" },
      });
      let stderr = "";
      child.stderr!.setEncoding("utf8").on("data", (text: string) => stderr += text);
      return {
        child,
        url: async () => {
          await whenPrinted(child, () => /serving http:.*\n/.test(stderr), "serving");
          return /mcp: serving (http:\/\/[^\s]+)\n/.exec(stderr)![1];
        },
      };
    };
    const instances = [start(), start()];
    try {
      const urls = await Promise.all(instances.map((instance) => instance.url()));
      let turn = 0;
      const hits = [0, 0];
      // The round-robin proxy: each request to the next instance.
      const proxy = async (body: Message) => {
        const target = turn++ % 2;
        hits[target]++;
        const params = body.params;
        const response = await fetch(urls[target], {
          method: "POST",
          headers: {
            ...JSON_HEADERS,
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": body.method,
            "mcp-name": params.name,
          },
          body: JSON.stringify(body),
        });
        return await rpcAnswer(response);
      };
      const first = await proxy({ jsonrpc: "2.0", id: 1, method: "tools/call", params: modern({ name: "ask" }) });
      assert.equal(first.result.resultType, "input_required");
      const second = await proxy({
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: modern({
          name: "ask",
          inputResponses: { who: { action: "accept", content: { name: "Ada" } } },
          requestState: first.result.requestState,
        }),
      });
      assert.equal(second.result.content[0].text, "hello Ada");
      const listed = await proxy({ jsonrpc: "2.0", id: 3, method: "tools/list", params: modern() });
      assert.deepEqual(listed.result.tools.map((tool: Message) => tool.name), ["ask"]);
      assert.deepEqual(hits, [2, 1], "the retry landed on the other instance");
    } finally {
      for (const { child } of instances) child.kill("SIGKILL");
      rmSync(dir, { recursive: true });
    }
  });

  test("--max-sessions: the least recently used idle legacy session is closed; its client gets 404", async () => {
    const handler = createHandler({ tools: HTTP_TOOLS, maxSessions: 3 });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) {
        const response = await handler(legacyPost(INIT));
        assert.equal(response.status, 200);
        ids.push(response.headers.get("mcp-session-id")!);
        await response.body?.cancel();
      }
      const list = { jsonrpc: "2.0", id: 2, method: "tools/list" };
      const use = (id: string) =>
        handler(legacyPost(list, { "mcp-session-id": id, "mcp-protocol-version": "2025-11-25" }));
      const statuses = [];
      for (const id of ids) {
        const response = await use(id);
        statuses.push(response.status);
        await response.body?.cancel();
      }
      assert.deepEqual(statuses, [404, 200, 200, 200], "the oldest of four, with a cap of three, is gone");
    } finally {
      handler.close();
    }
  });

  test("serve --http --trace prints every frame in and out", async () => {
    const server = await startListening(
      [MCP, "serve", HERE + "testdata/tools", "--http", "0", "--trace"],
      /serving (\S+)/,
    );
    try {
      const call = await runCli(["call", server.url, "add", "a=1", "b=2", "--protocol", "legacy"]);
      assert.equal(call.stdout, "3\n");
      const frames = await server.printed(/^> .*"text":"3"/m);
      assert.match(frames, /^< \{"jsonrpc":"2.0","id":\d+,"method":"tools\/call"/m);
      assert.match(frames, /^> \{"jsonrpc":"2.0","id":\d+,"result":\{"content":\[\{"type":"text","text":"3"\}/m);
    } finally {
      server.close();
      await server.exited;
    }
  });
});

describe("10c. The HTTP front", () => {
  const front = (policy: Partial<Parameters<typeof httpFront>[0]> = {}) => {
    const seen: Message[] = [];
    const handler = httpFront({
      path: "/mcp",
      allowedHosts: ["127.0.0.1", "localhost"],
      allowOrigins: ["https://app.example"],
      methods: "POST",
      maxBodyBytes: 100,
      route: async ({ request, json }) => {
        let text = "";
        const parsed = await json((raw) => text = raw);
        if (parsed instanceof Response) return parsed;
        seen.push({ method: request.method, text });
        return new Response("routed", { headers: { "x-route": "1" } });
      },
      ...policy,
    });
    return { handler, seen };
  };
  const at = (path = "/mcp", init: RequestInit & { headers?: Record<string, string> } = {}) =>
    new Request(`http://127.0.0.1:8080${path}`, { method: "POST", body: "{}", ...init });

  test("checks Host and Origin, answers preflight and /health, 404s other paths, then hands the rest to the route", async () => {
    const { handler, seen } = front();
    const host = await handler(at("/mcp", { headers: { host: "evil.example" } }));
    assert.equal(host.status, 403);
    const foreign = await handler(at("/mcp", { headers: { origin: "http://localhost:3000" } }));
    assert.equal(foreign.status, 403);
    assert.match((await foreign.json()).error.message, /Origin "http:\/\/localhost:3000" is not allowed/);
    const own = await handler(at("/mcp", { headers: { origin: "http://127.0.0.1:8080" } }));
    assert.equal(await own.text(), "routed");
    assert.equal(own.headers.get("access-control-allow-origin"), null, "no CORS for the server's own origin");
    const allowed = await handler(at("/mcp", { headers: { origin: "https://app.example" } }));
    assert.equal(
      allowed.headers.get("access-control-allow-origin"),
      "https://app.example",
      "CORS put on the route's answer",
    );
    assert.match(allowed.headers.get("access-control-expose-headers")!, /mcp-session-id/);
    assert.equal(allowed.headers.get("x-route"), "1");
    const preflight = await handler(
      at("/mcp", { method: "OPTIONS", body: null, headers: { origin: "https://app.example" } }),
    );
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get("access-control-allow-methods"), "POST, OPTIONS");
    assert.deepEqual(await (await handler(at("/health", { method: "GET", body: null }))).json(), { status: "ok" });
    assert.equal((await handler(at("/elsewhere"))).status, 404);
    assert.equal(seen.length, 2);
  });

  test("a token is checked before the route; a body over the limit is 413 before it", async () => {
    const { handler, seen } = front({ token: "s3cret" });
    assert.equal((await handler(at())).status, 401);
    assert.equal((await handler(at("/mcp", { headers: { authorization: "Bearer s3cres" } }))).status, 401);
    const auth = { authorization: "Bearer s3cret" };
    assert.equal((await handler(at("/mcp", { headers: auth }))).status, 200);
    const big = await handler(at("/mcp", { headers: auth, body: "x".repeat(500) }));
    assert.equal(big.status, 413);
    assert.match((await big.json()).error.message, /100-byte limit/);
    assert.equal(seen.length, 1);
  });

  test("every listener stands behind it: a foreign Origin gets the same 403 from all five", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-front-"));
    const tape = join(dir, "session.ndjson");
    const started: Started[] = [];
    try {
      assert.equal((await runCli(["list", SERVE, "--record", tape])).code, 0);
      const listeners = await Promise.all([
        startListening([MCP, "serve", HERE + "testdata/tools", "--http", "0"], /serving (\S+)/),
        startListening([MCP, "gateway", `t=${SERVE}`, "--http", "0"], /serving (\S+) \(a gateway\)/),
        startListening([MCP, "proxy", SERVE, "--http", "0"], /serving (\S+) \(proxying/),
        startListening([MCP, "replay", tape, "--http", "0"], /serving (\S+) \(replaying/),
      ]);
      started.push(...listeners);
      const handler = createHandler({ tools: HTTP_TOOLS });
      const foreign = { ...JSON_HEADERS, origin: "http://localhost:3000" };
      const answers = [
        await handler(new Request("http://127.0.0.1:8080/mcp", { method: "POST", headers: foreign, body: "{}" })),
        ...await Promise.all(
          listeners.map((listener) => fetch(listener.url, { method: "POST", headers: foreign, body: "{}" })),
        ),
      ];
      handler.close();
      const seen = await Promise.all(
        answers.map(async (answer) => [answer.status, (await answer.json()).error.message]),
      );
      for (const [status, message] of seen) {
        assert.equal(status, 403);
        assert.equal(message, 'Forbidden: Origin "http://localhost:3000" is not allowed');
      }
    } finally {
      for (const listener of started) listener.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the Origin must be one of the server's own (scheme://host:port) or allowed; the same on the proxy", async () => {
    const handler = createHandler({ tools: HTTP_TOOLS, allowOrigins: ["https://app.example"] });
    try {
      const post = (origin: string) => handler(legacyPost(INIT, { origin, host: "127.0.0.1:8080" }));
      for (const origin of ["http://localhost:3000", "https://127.0.0.1:8080", "http://127.0.0.1:8081", "null"]) {
        assert.equal((await post(origin)).status, 403, origin);
      }
      for (const origin of ["http://127.0.0.1:8080", "http://localhost:8080", "https://app.example"]) {
        const response = await post(origin);
        assert.equal(response.status, 200, origin);
        await response.body?.cancel();
      }
    } finally {
      handler.close();
    }
    const proxied = await startListening([MCP, "proxy", SERVE, "--http", "0"], /serving (http:\S+) \(proxying/);
    try {
      const port = new URL(proxied.url).port;
      const forbidden = await fetch(proxied.url, {
        method: "POST",
        headers: { ...JSON_HEADERS, origin: "http://localhost:3000" },
        body: JSON.stringify(INIT),
      });
      assert.equal(forbidden.status, 403, "the proxy keeps the same rule");
      await forbidden.body?.cancel();
      const own = await fetch(proxied.url, {
        method: "POST",
        headers: { ...JSON_HEADERS, origin: `http://127.0.0.1:${port}` },
        body: JSON.stringify(INIT),
      });
      assert.equal(own.status, 200);
      await own.body?.cancel();
    } finally {
      proxied.close();
    }
  });

  test("a body shorter than its Content-Length gets 400 (on Bun a closed connection); one over the cap its 413", async () => {
    const server = await startListening([MCP, "serve", HERE + "testdata/tools", "--http", "0"], /serving (\S+)/);
    try {
      const { hostname, port, pathname } = new URL(server.url);
      const short = await new Promise<string>((resolve, reject) => {
        const socket = createConnection({ host: hostname, port: Number(port) }, () => {
          socket.end(
            `POST ${pathname} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
              `Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{"jsonrpc":`,
          );
        });
        let answer = "";
        socket.setEncoding("utf8").on("data", (text: string) => answer += text);
        socket.on("close", () => resolve(answer));
        socket.on("error", reject);
      });
      // Bun.serve closes a connection whose client has half-closed it before the handler can answer (Bun 1.4.4).
      if ("Bun" in globalThis) assert.equal(short, "", "no answer, and no 500");
      else assert.match(short, /^HTTP\/1\.1 400/, short.slice(0, 200));
      const big = Buffer.alloc(5 * 1024 * 1024, "x");
      for (let i = 0; i < 5; i++) {
        const status = await new Promise<number | string>((resolve) => {
          const request = httpRequest(server.url, {
            method: "POST",
            headers: { ...JSON_HEADERS, "content-length": String(big.length) },
          }, (response) => {
            response.resume();
            resolve(response.statusCode!);
          });
          request.on("error", (error: Error & { code?: string }) => resolve(error.code ?? error.message));
          request.end(big);
        });
        assert.equal(status, 413, `try ${i + 1}`);
      }
    } finally {
      server.close();
    }
  });
});

describe("10e. Bearer tokens: an OAuth protected resource", () => {
  test("serve --http --auth-issuer: metadata, 401 with the challenge, forged and foreign tokens refused", async () => {
    await withProtectedServer(async (as, server) => {
      const resource = server.url;
      const origin = new URL(resource).origin;
      for (const path of ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]) {
        const prm = await (await fetch(origin + path)).json();
        assert.deepEqual(prm.authorization_servers, [as.url]);
        assert.equal(prm.resource, resource);
        assert.deepEqual(prm.scopes_supported, ["mcp:read"]);
      }
      const mint = (claims: Message) => mintToken(as.url, claims);
      const call = (token?: string) =>
        fetch(
          modernPost("tools/call", { name: "whoami" }, token ? { authorization: `Bearer ${token}` } : {}, 1, resource),
        );
      const none = await call();
      assert.equal(none.status, 401);
      assert.equal(
        none.headers.get("www-authenticate"),
        `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp", scope="mcp:read"`,
      );
      const refused = {
        forged: await mint({ aud: resource, sign_with: "foreign" }),
        "another audience": await mint({ aud: "http://elsewhere.example/mcp" }),
        expired: await mint({ aud: resource, exp_in: -3600 }),
        "not yet valid": await mint({ aud: resource, nbf_in: 3600 }),
        "another issuer": await mint({ aud: resource, iss: "https://evil.example.com" }),
        "no expiry": await mint({ aud: resource, exp_in: null }),
        unsigned: await mint({ aud: resource, alg: "none" }),
      };
      for (const [why, token] of Object.entries(refused)) {
        const response = await call(token);
        assert.equal(response.status, 401, why);
        assert.match(response.headers.get("www-authenticate")!, /error="invalid_token"/, why);
        await response.body?.cancel();
      }
      const narrow = await call(await mint({ aud: resource, scope: "mcp:write" }));
      assert.equal(narrow.status, 403);
      assert.match(narrow.headers.get("www-authenticate")!, /error="insufficient_scope".*scope="mcp:read"/);
      const good = await call(await mint({ aud: resource, scope: "mcp:read mcp:write", client_id: "app-1" }));
      assert.equal(good.status, 200, good.headers.get("www-authenticate") ?? "");
      const answer = await rpcAnswer(good);
      assert.deepEqual(JSON.parse(answer.result.content[0].text), {
        sub: "user-1",
        scopes: ["mcp:read", "mcp:write"],
        clientId: "app-1",
      });
      // The audience is the server's own, whatever Host a request names (a token for another port is not ours).
      const foreignAudience = await mint({ aud: "http://127.0.0.1:1/mcp", scope: "mcp:read" });
      const spoofed = await new Promise<number>((resolve, reject) => {
        const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: modern() });
        const request = httpRequest(resource, {
          method: "POST",
          headers: {
            ...JSON_HEADERS,
            host: "127.0.0.1:1",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/list",
            authorization: `Bearer ${foreignAudience}`,
          },
        }, (response) => {
          response.resume();
          resolve(response.statusCode!);
        });
        request.on("error", reject);
        request.end(body);
      });
      assert.equal(spoofed, 401, "a Host header cannot choose the audience");
      // A legacy session is its starter's: another token's holder does not find it.
      const legacyCall = (token: string, message: Message, session?: string) =>
        fetch(resource, {
          method: "POST",
          headers: {
            ...JSON_HEADERS,
            authorization: `Bearer ${token}`,
            ...(session ? { "mcp-session-id": session, "mcp-protocol-version": "2025-11-25" } : {}),
          },
          body: JSON.stringify(message),
        });
      const alice = await mint({ aud: resource, scope: "mcp:read", sub: "alice" });
      const bob = await mint({ aud: resource, scope: "mcp:read", sub: "bob" });
      const started = await legacyCall(alice, INIT);
      const session = started.headers.get("mcp-session-id")!;
      await started.body?.cancel();
      const list = { jsonrpc: "2.0", id: 2, method: "tools/list" };
      const own = await legacyCall(alice, list, session);
      assert.equal(own.status, 200);
      await own.body?.cancel();
      const other = await legacyCall(bob, list, session);
      assert.equal(other.status, 404);
      await other.body?.cancel();
      // A new signing key: an unknown kid fetches the keys again. At most once a second by default: in process, the
      // limit is an option, 0 here, so nothing waits the second out.
      const handler = createHandler({
        tools: HTTP_TOOLS,
        auth: { issuer: as.url, audience: URL_MCP, jwksRefetchMs: 0 },
      });
      try {
        const add = async (token: string) => {
          const response = await handler(
            modernPost("tools/call", { name: "add", arguments: { a: 1, b: 2 } }, { authorization: `Bearer ${token}` }),
          );
          await response.body?.cancel();
          return response.status;
        };
        assert.equal(await add(await mint({ aud: URL_MCP })), 200, "the keys fetched");
        await fetch(as.url + "/_rotate", { method: "POST" }).then((response) => response.body?.cancel());
        assert.equal(await add(await mint({ aud: URL_MCP })), 200, "a token of the new key: the keys fetched again");
      } finally {
        handler.close();
      }
    }, { serveArgs: ["--auth-scopes", "mcp:read"] });
  });

  test("--max-sessions with OAuth: at most 100 legacy sessions per token subject, another subject's untouched", async () => {
    await withProtectedServer(async (as, server) => {
      const mint = (sub: string) => mintToken(as.url, { aud: server.url, sub });
      const [alice, bob] = await Promise.all([mint("alice"), mint("bob")]);
      const open = async (token: string) => {
        const response = await fetch(server.url, {
          method: "POST",
          headers: { ...JSON_HEADERS, authorization: `Bearer ${token}` },
          body: JSON.stringify(INIT),
        });
        await response.body?.cancel();
        assert.equal(response.status, 200);
        return response.headers.get("mcp-session-id")!;
      };
      const use = async (token: string, session: string) => {
        const response = await fetch(server.url, {
          method: "POST",
          headers: {
            ...JSON_HEADERS,
            authorization: `Bearer ${token}`,
            "mcp-session-id": session,
            "mcp-protocol-version": "2025-11-25",
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
        });
        await response.body?.cancel();
        return response.status;
      };
      const bobs = await open(bob);
      const alices: string[] = [];
      for (let i = 0; i < 101; i++) alices.push(await open(alice));
      assert.equal(await use(alice, alices[0]), 404, "alice's oldest idle session made room for her 101st");
      assert.equal(await use(alice, alices[100]), 200);
      assert.equal(await use(bob, bobs), 200, "bob's session is not alice's to evict");
    });
  });

  test("tokens: aud compared exactly, times must be numbers, typ must be an access token's", async () => {
    await withProtectedServer(async (as, server) => {
      const mint = (claims: Message) => mintToken(as.url, claims);
      const call = (token: string) =>
        fetch(server.url, {
          method: "POST",
          headers: { ...JSON_HEADERS, authorization: `Bearer ${token}` },
          body: JSON.stringify(INIT),
        });
      const refused = {
        "aud with a trailing slash": await mint({ aud: server.url + "/" }),
        "aud in other case": await mint({ aud: server.url.toUpperCase() }),
        "nbf as a string": await mint({
          aud: server.url,
          claims: { nbf: String(Math.floor(Date.now() / 1000) + 3600) },
        }),
        "iat as a string": await mint({ aud: server.url, claims: { iat: "yesterday" } }),
        "typ of an ID token": await mint({ aud: server.url, typ: "id_token+jwt" }),
      };
      for (const [why, token] of Object.entries(refused)) {
        const response = await call(token);
        assert.equal(response.status, 401, why);
        await response.body?.cancel();
      }
      // A token's own (unverified) header words go into the challenge quoted, never breaking the header.
      for (const header of [{ typ: 'dpop+"jwt' }, { alg: "RS256\nX-Injected: 1" }]) {
        const response = await call(await mint({ aud: server.url, ...header }));
        assert.equal(response.status, 401, JSON.stringify(header));
        const challenge = response.headers.get("www-authenticate")!;
        assert.match(
          challenge,
          /^Bearer error="invalid_token", error_description="(?:[^"\\]|\\.)*", resource_metadata="/,
        );
        assert.equal(response.headers.get("x-injected"), null);
        await response.body?.cancel();
      }
      for (const typ of ["at+jwt", "application/at+jwt", "JWT", null]) {
        const response = await call(await mint({ aud: server.url, typ }));
        assert.equal(response.status, 200, `typ ${typ}`);
        await response.body?.cancel();
      }
    });
  });
});

describe("10e. Bearer tokens: DPoP-bound tokens (RFC 9449)", () => {
  // A DPoP key and its proofs, made here with WebCrypto alone (not with mcp.ts's own code).
  const b64url = (bytes: Uint8Array | string) =>
    Buffer.from(typeof bytes === "string" ? new TextEncoder().encode(bytes) : bytes).toString("base64url");
  const dpopKey = async () => {
    const pair = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"]);
    const { kty, crv, x, y } = await crypto.subtle.exportKey("jwk", pair.publicKey);
    const jwk = { crv, kty, x, y };
    const jkt = b64url(
      new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(JSON.stringify(jwk)))),
    );
    const proof = async (claims: Message) => {
      const input = `${b64url(JSON.stringify({ typ: "dpop+jwt", alg: "ES256", jwk }))}.${
        b64url(JSON.stringify(claims))
      }`;
      const signature = await crypto.subtle.sign(
        { name: "ECDSA", hash: "SHA-256" },
        pair.privateKey,
        new TextEncoder().encode(input),
      );
      return `${input}.${b64url(new Uint8Array(signature))}`;
    };
    return { jkt, proof };
  };
  const ath = async (token: string) =>
    b64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token))));

  test("--auth-dpop required: a bound token with a fresh proof is served; a replay, another URL, method, time, key or token, Bearer, or an unbound token is 401 with a DPoP challenge", async () => {
    await withProtectedServer(async (as, server) => {
      const resource = server.url;
      const origin = new URL(resource).origin;
      const prm = await (await fetch(origin + "/.well-known/oauth-protected-resource/mcp")).json();
      assert.equal(prm.dpop_bound_access_tokens_required, true);
      assert.ok(prm.dpop_signing_alg_values_supported.includes("ES256"));
      const key = await dpopKey();
      const token = await mintToken(as.url, { aud: resource, scope: "mcp:read", claims: { cnf: { jkt: key.jkt } } });
      const now = () => Math.floor(Date.now() / 1000);
      const claims = async (change: Message = {}) => ({
        jti: crypto.randomUUID(),
        htm: "POST",
        htu: resource,
        iat: now(),
        ath: await ath(token),
        ...change,
      });
      const call = (headers: Record<string, string>) =>
        fetch(modernPost("tools/call", { name: "whoami" }, headers, 1, resource));
      const fresh = await key.proof(await claims());
      const good = await call({ authorization: `DPoP ${token}`, dpop: fresh });
      assert.equal(good.status, 200, await good.clone().text());
      assert.match((await rpcAnswer(good)).result.content[0].text, /"sub"/);
      const other = await dpopKey();
      const refused: Record<string, Record<string, string>> = {
        "a replayed proof": { authorization: `DPoP ${token}`, dpop: fresh },
        "another URL": {
          authorization: `DPoP ${token}`,
          dpop: await key.proof(await claims({ htu: origin + "/other" })),
        },
        "another method": { authorization: `DPoP ${token}`, dpop: await key.proof(await claims({ htm: "GET" })) },
        "a stale proof": { authorization: `DPoP ${token}`, dpop: await key.proof(await claims({ iat: now() - 600 })) },
        "another key": { authorization: `DPoP ${token}`, dpop: await other.proof(await claims()) },
        "another token": {
          authorization: `DPoP ${token}`,
          dpop: await key.proof(await claims({ ath: await ath("x") })),
        },
        "no ath": { authorization: `DPoP ${token}`, dpop: await key.proof(await claims({ ath: undefined })) },
        "no proof": { authorization: `DPoP ${token}` },
        "sent as Bearer": { authorization: `Bearer ${token}`, dpop: await key.proof(await claims()) },
        "not bound": {
          authorization: `Bearer ${await mintToken(as.url, { aud: resource, scope: "mcp:read" })}`,
        },
      };
      for (const [why, headers] of Object.entries(refused)) {
        const response = await call(headers);
        assert.equal(response.status, 401, why);
        assert.match(
          response.headers.get("www-authenticate")!,
          /^DPoP .*error="(invalid_dpop_proof|invalid_token)"/,
          why,
        );
        await response.body?.cancel();
      }
      const anonymous = await call({});
      assert.match(anonymous.headers.get("www-authenticate")!, /^DPoP resource_metadata=.*algs="ES256/);
      await anonymous.body?.cancel();
      // A proof made for another server, its Host named to match: the URL a proof must name is this resource's.
      const elsewhere = "http://127.0.0.1:1/mcp";
      const forged = await key.proof(await claims({ htu: elsewhere }));
      const status = await new Promise<number>((resolve, reject) => {
        const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping", params: {} });
        const sent = httpRequest(resource, {
          method: "POST",
          headers: { host: "127.0.0.1:1", authorization: `DPoP ${token}`, dpop: forged, ...JSON_HEADERS },
        }, (answer) => (answer.resume(), resolve(answer.statusCode!)));
        sent.on("error", reject).end(body);
      });
      assert.equal(status, 401, "a Host header does not choose the URL a proof must name");
    }, { serveArgs: ["--auth-scopes", "mcp:read", "--auth-dpop", "required"] });
  });

  test("a DPoP-bound token reads /metrics with a proof for /metrics at the resource's origin (not for the MCP endpoint)", async () => {
    await withProtectedServer(async (as, server) => {
      const origin = new URL(server.url).origin;
      const key = await dpopKey();
      const token = await mintToken(as.url, { aud: server.url, scope: "mcp:read", claims: { cnf: { jkt: key.jkt } } });
      const scrape = async (htu: string) => {
        const claims = { jti: crypto.randomUUID(), htm: "GET", htu, iat: Math.floor(Date.now() / 1000) };
        const dpop = await key.proof({ ...claims, ath: await ath(token) });
        return await fetch(origin + "/metrics", { headers: { authorization: `DPoP ${token}`, dpop } });
      };
      const read = await scrape(origin + "/metrics");
      assert.equal(read.status, 200, await read.clone().text());
      assert.match(await read.text(), /^target_info/m);
      const elsewhere = await scrape(server.url);
      assert.equal(elsewhere.status, 401, "a proof for the MCP endpoint");
      await elsewhere.body?.cancel();
    }, { serveArgs: ["--auth-scopes", "mcp:read", "--auth-dpop", "required", "--metrics"] });
  });

  test("the jti memory is bounded and windowed: past its size the oldest go, past the window a proof is refused as stale (time injected)", async () => {
    let clock = Date.now();
    const verifier = new DpopVerifier({ issuer: "https://as.example" }, { now: () => clock, seenMax: 3 });
    const key = await dpopKey();
    const token = "a.b.c";
    const url = "https://mcp.example/mcp";
    const claims = { cnf: { jkt: key.jkt } };
    const proofAt = async (jti: string) =>
      await key.proof({ jti, htm: "POST", htu: url, iat: Math.floor(clock / 1000), ath: await ath(token) });
    const check = async (proof: string) =>
      await verifier.check(
        new Request(url, { method: "POST", headers: { dpop: proof } }),
        "DPoP",
        token,
        claims,
        () => url,
      );
    const first = await proofAt("j1");
    assert.equal(await check(first), undefined);
    assert.match((await check(first))!.description, /used before/);
    for (const jti of ["j2", "j3", "j4"]) assert.equal(await check(await proofAt(jti)), undefined);
    assert.equal(verifier.remembered, 3, "at most its size");
    assert.equal(await check(first), undefined, "the oldest was let go (its iat still in the window)");
    clock += 301_000;
    assert.match((await check(first))!.description, /not fresh/, "out of the window: refused by its iat, not its jti");
  });

  test("--auth-dpop-nonce: a proof without the server's nonce gets use_dpop_nonce and a DPoP-Nonce; with it, served", async () => {
    await withProtectedServer(async (as, server) => {
      const resource = server.url;
      const key = await dpopKey();
      const token = await mintToken(as.url, { aud: resource, claims: { cnf: { jkt: key.jkt } } });
      const proof = async (nonce?: string) =>
        await key.proof({
          jti: crypto.randomUUID(),
          htm: "POST",
          htu: resource,
          iat: Math.floor(Date.now() / 1000),
          ath: await ath(token),
          ...(nonce === undefined ? {} : { nonce }),
        });
      const call = async (nonce?: string) =>
        await fetch(
          modernPost(
            "tools/call",
            { name: "whoami" },
            { authorization: `DPoP ${token}`, dpop: await proof(nonce) },
            1,
            resource,
          ),
        );
      const first = await call();
      assert.equal(first.status, 401);
      assert.match(first.headers.get("www-authenticate")!, /^DPoP error="use_dpop_nonce"/);
      const nonce = first.headers.get("dpop-nonce")!;
      assert.match(nonce, /^[A-Za-z0-9_-]{16,}$/);
      await first.body?.cancel();
      assert.equal((await call("made-up")).status, 401);
      const served = await call(nonce);
      assert.equal(served.status, 200);
      await served.body?.cancel();
    }, { serveArgs: ["--auth-dpop-nonce"] });
  });
});

describe("10e. Bearer tokens: tokens signed with RS256 and EdDSA", () => {
  test("tokens of each signing algorithm verify through the issuer's JWKS; a forged one does not", async () => {
    for (const alg of ["RS256", "EdDSA"]) {
      await withProtectedServer(async (as, server) => {
        const mint = (claims: Message) => mintToken(as.url, claims);
        const call = async (token: string) => {
          const response = await fetch(
            modernPost("tools/list", {}, { authorization: `Bearer ${token}` }, 1, server.url),
          );
          await response.body?.cancel();
          return response.status;
        };
        assert.equal(await call(await mint({ aud: server.url })), 200, alg);
        assert.equal(await call(await mint({ aud: server.url, sign_with: "foreign" })), 401, alg);
      }, { asEnv: { FAKE_AUTH_ALG: alg } });
    }
  });
});

describe("10f. State across replicas: Redis (testdata/fake_redis.ts)", () => {
  /** The fake Redis in `mode`; its URL and its log (one JSON line per command). */
  const fakeRedis = async (mode = "ok", env: Record<string, string> = {}) =>
    await startListening([HERE + "testdata/fake_redis.ts", mode], /listening (redis:\S+)/, env);
  /** Sends one command to the fake as a client would (DEBUG DOWN, for an outage on every runtime). */
  const command = (url: string, ...args: string[]) =>
    new Promise<void>((resolve, reject) => {
      const socket = createConnection({ host: "127.0.0.1", port: Number(new URL(url).port) }, () => {
        socket.end(args.reduce((out, arg) => out + `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`, `*${args.length}\r\n`));
      });
      socket.on("data", () => resolve()).on("error", reject).on("close", () => resolve());
    });
  /** A legacy session of `handler`: its id, and `ask` (a request, its answer) and `tell` (a notification). */
  const legacySession = async (handler: McpHandler, capabilities: Message = {}) => {
    const init = await handler(legacyPost({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities, clientInfo: { name: "t", version: "1" } },
    }));
    assert.equal(init.status, 200, await init.clone().text());
    const id = init.headers.get("mcp-session-id")!;
    await init.body?.cancel();
    const headers = { "mcp-session-id": id, "mcp-protocol-version": "2025-11-25" };
    let next = 0;
    return {
      id,
      headers,
      ask: async (to: McpHandler, method: string, params: Message = {}) =>
        await rpcAnswer(await to(legacyPost({ jsonrpc: "2.0", id: ++next, method, params }, headers))),
      tell: async (to: McpHandler, message: Message) => await to(legacyPost({ jsonrpc: "2.0", ...message }, headers)),
    };
  };
  /** A 2026-07-28 request declaring the tasks extension, with Mcp-Name as the method wants it. */
  const modernTask = (to: McpHandler, method: string, params: Message, name: string) =>
    to(taskPost(method, params, name, URL_MCP, { elicitation: {} })).then((response) => response.json());
  /** Polls `read` until `done` says so (15 s at most: a deadline for a failure only). */
  const until = async <T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> => {
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await sleep(10)) {
      const value = await read();
      if (done(value)) return value;
    }
    throw new Error("never got there");
  };
  /** A handler on the store at `url`, used at once: a request before its first connection waits for it. */
  const replica = (url: string, options: Parameters<typeof createHandler>[0] = {}) => {
    const lines: string[] = [];
    const handler = createHandler({
      tools: HTTP_TOOLS,
      state: url,
      onStateStore: (line) => lines.push(line),
      ...options,
    });
    return Object.assign(handler, { lines });
  };

  /** Two replicas, "a" and "b", on one fresh fake Redis; all three closed after `body`. */
  const withReplicas = async (
    options: Parameters<typeof createHandler>[0],
    body: (a: ReturnType<typeof replica>, b: ReturnType<typeof replica>, redis: Started) => Promise<void>,
  ) => {
    const redis = await fakeRedis();
    const [a, b] = [
      replica(redis.url, { ...options, instanceId: "a" }),
      replica(redis.url, { ...options, instanceId: "b" }),
    ];
    try {
      await body(a, b, redis);
    } finally {
      a.close();
      b.close();
      redis.close();
    }
  };

  test("RESP replies come out whole however the bytes are split, and the same; a bulk over the cap and a line that is not RESP are errors", () => {
    const replies =
      "+OK\r\n:42\r\n$-1\r\n$6\r\nh\xc3\xa9llo\r\n*3\r\n$7\r\nmessage\r\n$3\r\nbus\r\n$2\r\n{}\r\n*0\r\n-ERR wrong\r\n";
    const bytes = Buffer.from(replies, "latin1");
    const whole = new RespReader().push(bytes);
    assert.deepEqual(whole.slice(0, 5), ["OK", 42, null, "héllo", ["message", "bus", "{}"]]);
    assert.deepEqual(whole[5], []);
    assert.ok(whole[6] instanceof StoreReplyError && whole[6].message === "ERR wrong");
    for (let size = 1; size <= 7; size++) {
      const reader = new RespReader();
      const got = [];
      for (let at = 0; at < bytes.length; at += size) got.push(...reader.push(bytes.subarray(at, at + size)));
      assert.deepEqual(got, whole, `split every ${size} bytes`);
    }
    assert.throws(() => new RespReader().push(Buffer.from("$999999999999\r\n")), /bulk reply of length/);
    assert.throws(() => new RespReader().push(Buffer.from("HTTP/1.1 200 OK\r\n")), /not RESP/);
    assert.equal(respCommand(["SET", "k", "é€😀"]), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$9\r\né€😀\r\n", "lengths in bytes");
  });

  test("a RESP reader keeps the room of its largest reply, not of all it read (the bus's connection lives for days)", () => {
    const reader = new RespReader();
    const reply = Buffer.from(`$1000\r\n${"x".repeat(1000)}\r\n`);
    for (let i = 0; i < 20_000; i++) assert.equal(reader.push(reply).length, 1);
    assert.ok(reader.capacity <= 8192, `${reader.capacity} bytes after 20 MB of 1 KB replies`);
    assert.equal(reader.push(Buffer.from(`$100000\r\n${"y".repeat(100_000)}\r\n`)).length, 1, "a big one still fits");
  });

  test("--state: memory: is the default and redis:// the other; a bad URL is a usage error that never shows its password", () => {
    assert.equal(parseStateUrl(undefined), undefined);
    assert.equal(parseStateUrl("memory:"), undefined);
    assert.equal(parseStateUrl("redis://u:s3cret@cache:6380/2")!.port, "6380");
    for (const bad of ["http://u:s3cret@cache:6380/", "redis://u:s3cret@cache:6380/x", "redis://u:s3cret@/"]) {
      assert.throws(() => parseStateUrl(bad), (error: Error) => {
        assert.ok(error instanceof UsageError, bad);
        assert.doesNotMatch(error.message, /s3cret/);
        return true;
      });
    }
  });

  test("two replicas, one store: a legacy session made on one is served by the other, its log level follows, DELETE ends it on both", async () => {
    await withReplicas({}, async (a, b, redis) => {
      const session = await legacySession(a);
      await session.tell(b, { method: "notifications/initialized" });
      assert.equal(
        (await session.ask(b, "tools/call", { name: "add", arguments: { a: 2, b: 3 } })).result.content[0].text,
        "5",
      );
      assert.equal(
        (await session.ask(a, "tools/call", { name: "add", arguments: { a: 1, b: 1 } })).result.content[0].text,
        "2",
      );
      assert.deepEqual((await session.ask(b, "logging/setLevel", { level: "error" })).result, {});
      const other = await legacySession(b); // a session of its own: not the first one's
      assert.notEqual(other.id, session.id);
      const ended = await b(new Request(URL_MCP, { method: "DELETE", headers: session.headers }));
      assert.equal(ended.status, 200);
      for (const handler of [a, b]) {
        const gone = await until(
          () => handler(legacyPost({ jsonrpc: "2.0", id: 9, method: "ping" }, session.headers)),
          (r) => r.status === 404,
        );
        assert.equal((await gone.json()).error.message, "Session not found");
      }
      assert.equal((await other.ask(a, "ping")).result !== undefined, true, "the other session lives on");
      await redis.printed(/logLevel\\":4/); // "error", set through b, is in the store
    });
  });

  test("the bus: a question asked on one replica is answered through the other; a notification reaches the GET stream another replica holds", async () => {
    const asking = {
      name: "who",
      run: async (_: unknown, ctx: ToolContext) =>
        `hi ${((await ctx.elicit({ message: "Name?", requestedSchema: { type: "object" } })).content as Message).name}`,
    };
    await withReplicas({ tools: [asking], listChanged: true }, async (a, b) => {
      const session = await legacySession(a, { elicitation: {} });
      await session.tell(a, { method: "notifications/initialized" });
      // The call on a: its question comes on a's response stream; the answer is POSTed to b.
      const calling = await a(
        legacyPost({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "who" } }, session.headers),
      );
      const reader = calling.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      while (!/elicitation\/create/.test(text)) text += (await reader.read()).value ?? "";
      const question = JSON.parse(/data: (\{.*"elicitation\/create".*\})/.exec(text)![1]);
      const answered = await session.tell(b, {
        id: question.id,
        result: { action: "accept", content: { name: "ada" } },
      });
      assert.equal(answered.status, 202);
      while (!/"id":7,"result"/.test(text)) text += (await reader.read()).value ?? ""; // not a question's id 7…
      assert.match(text, /hi ada/);
      void reader.cancel().catch(() => {});

      // The GET stream on b; the tools change on a (whose copy of the session has no stream): b's stream hears it.
      const stream = await b(
        new Request(URL_MCP, { method: "GET", headers: { ...session.headers, accept: "text/event-stream" } }),
      );
      assert.equal(stream.status, 200);
      a.core.setCatalog({ ...a.core.catalog, tools: [] });
      const [notification] = await sseMessages(stream, 1);
      assert.equal(notification.method, "notifications/tools/list_changed");
    });
  });

  test("a task made on one replica is read, answered (tasks/update) and cancelled through the other; tasks/list lists it on both", async () => {
    const asking = {
      name: "deploy",
      execution: { taskSupport: "required" as const },
      run: async (_: unknown, ctx: ToolContext) => {
        await ctx.task();
        const answer = await ctx.elicit({
          message: "Region?",
          requestedSchema: { type: "object", properties: { region: { type: "string" } } },
        }, { key: "region" });
        return `deployed to ${(answer.content as Message).region}`;
      },
    };
    const waiting = { name: "wait", execution: { taskSupport: "required" as const }, run: () => new Promise(() => {}) };
    const job = { name: "job", execution: { taskSupport: "required" as const }, run: () => "done" };
    const tools = [asking, waiting, job];
    await withReplicas({ tools }, async (a, b) => {
      const created = await modernTask(a, "tools/call", { name: "deploy" }, "deploy");
      const { taskId } = created.result;
      assert.match(taskId, /^a\./);
      const get = () => modernTask(b, "tasks/get", { taskId }, taskId).then((answer) => answer.result);
      const asked = await until(get, (task) => task.status === "input_required");
      assert.equal(asked.inputRequests.region.method, "elicitation/create");
      const update = { taskId, inputResponses: { region: { action: "accept", content: { region: "eu" } } } };
      assert.equal((await modernTask(b, "tasks/update", update, taskId)).error, undefined);
      const done = await until(get, (task) => task.status === "completed");
      assert.equal(done.result.content[0].text, "deployed to eu");

      const running = (await modernTask(b, "tools/call", { name: "wait" }, "wait")).result.taskId;
      assert.match(running, /^b\./);
      assert.equal((await modernTask(a, "tasks/cancel", { taskId: running }, running)).error, undefined);
      const read = () => modernTask(b, "tasks/get", { taskId: running }, running).then((answer) => answer.result);
      assert.equal((await until(read, (task) => task.status === "cancelled")).statusMessage, "cancelled by the client");

      // 2025-11-25: a session's tasks/list answers from the store, whichever replica it asks.
      const session = await legacySession(a, { tasks: {} });
      const call = await session.ask(a, "tools/call", { name: "job", arguments: {}, task: {} });
      const made = call.result?.task?.taskId ?? assert.fail(JSON.stringify(call));
      for (const handler of [a, b]) {
        const listed = await until(
          () => session.ask(handler, "tasks/list"),
          (answer) => answer.result.tasks.length > 0,
        );
        assert.deepEqual(listed.result.tasks.map((task: Message) => task.taskId), [made]);
      }
      assert.equal((await session.ask(b, "tasks/result", { taskId: made })).result.content[0].text, "done");
      const stranger = await legacySession(b, { tasks: {} });
      assert.equal((await stranger.ask(b, "tasks/get", { taskId: made })).error.code, -32602, "another principal's");
    });
  });

  test("a 2025-11-25 tasks/result waiting on another replica ends when the task expires (its record gone), not never", async () => {
    const forever = {
      name: "forever",
      execution: { taskSupport: "required" as const },
      run: () => new Promise(() => {}),
    };
    await withReplicas({ tools: [forever], taskTtl: 300, taskPollInterval: 20 }, async (a, b) => {
      const session = await legacySession(a, { tasks: {} });
      const made = await session.ask(a, "tools/call", { name: "forever", arguments: {}, task: {} });
      const { taskId } = made.result.task;
      const waited = await session.ask(b, "tasks/result", { taskId });
      assert.match(waited.error.message, /was cancelled/, JSON.stringify(waited));
    });
  });

  test("a replica killed mid-task: once its heartbeat has expired, its running task reads failed on the others", async () => {
    const redis = await fakeRedis();
    const server = await startListening(
      [
        MCP,
        "serve",
        "testdata/conformance/tools_tasks.ts",
        "--http",
        "127.0.0.1:0",
        "--state",
        redis.url,
        "--instance-id",
        "doomed",
        "--heartbeat-ttl",
        "300",
      ],
      /serving (http:\S+)/,
    );
    const survivor = replica(redis.url, { instanceId: "survivor", heartbeatTtl: 300 });
    try {
      const call = taskPost(
        "tools/call",
        { name: "slow_compute", arguments: { seconds: 60 } },
        "slow_compute",
        server.url,
      );
      const created = await (await fetch(call)).json();
      const { taskId } = created.result;
      const get = () => modernTask(survivor, "tasks/get", { taskId }, taskId).then((answer) => answer.result);
      assert.equal((await get()).status, "working", "alive: working");
      process.kill(server.pid, "SIGKILL");
      const failed = await until(get, (task) => task.status === "failed");
      assert.equal(failed.statusMessage, "the server instance running it stopped");
    } finally {
      survivor.close();
      server.close();
      redis.close();
    }
  });

  test("the store lost: stateless requests are served, legacy ones get 503 at once naming the store, one line lost and one back; sessions then go on", async () => {
    const redis = await fakeRedis("ok", { FAKE_REDIS_DOWN_MS: "800" });
    const handler = replica(redis.url);
    try {
      const session = await legacySession(handler);
      await command(redis.url, "DEBUG", "DOWN", "800");
      const refused = await until(
        () => session.ask(handler, "tools/call", { name: "add", arguments: { a: 1, b: 1 } }),
        (answer) => answer.error !== undefined,
      );
      assert.match(refused.error.message, new RegExp(`the state store redis://127\\.0\\.0\\.1:\\d+ is unreachable`));
      const down = await handler(legacyPost({ jsonrpc: "2.0", id: 1, method: "ping" }, session.headers));
      assert.equal(down.status, 503);
      const modern = await rpcAnswer(
        await handler(modernPost("tools/call", { name: "add", arguments: { a: 2, b: 2 } })),
      );
      assert.equal(modern.result.content[0].text, "4", "a stateless request needs no store");
      const back = await until(() => session.ask(handler, "ping"), (answer) => answer.result !== undefined);
      assert.deepEqual(back.result, {}, "the session made before the outage goes on");
      assert.equal(handler.lines.length, 2, handler.lines.join("\n"));
      assert.match(
        handler.lines[0],
        /^the state store redis:\/\/127\.0\.0\.1:\d+ is lost \(.*\): requests that need it are refused/,
      );
      assert.match(handler.lines[1], /^the state store redis:\/\/127\.0\.0\.1:\d+ is back$/);
    } finally {
      handler.close();
      redis.close();
    }
  });

  test("a store that answers garbage, or nothing, is lost (said once): a request that needs it gets 503, none hangs; one that drops connections is reconnected to", async () => {
    for (const mode of ["garbage", "hang"]) {
      const redis = await fakeRedis(mode);
      // A store silent for a third of the heartbeat's TTL (a second at least) is lost: 1 s here, not the default 3.3.
      const handler = replica(redis.url, { heartbeatTtl: 300 });
      try {
        const answer = await handler(legacyPost(INIT));
        assert.equal(answer.status, 503, mode);
        assert.match((await answer.json()).error.message, /the state store redis:\/\/127\.0\.0\.1:\d+ is unreachable/);
        const modern = await rpcAnswer(
          await handler(modernPost("tools/call", { name: "add", arguments: { a: 1, b: 1 } })),
        );
        assert.equal(modern.result.content[0].text, "2", `${mode}: stateless requests go on`);
        assert.equal(
          handler.lines.filter((line) => /is (lost|unreachable)/.test(line)).length,
          1,
          handler.lines.join("\n"),
        );
        assert.match(handler.lines[0], mode === "garbage" ? /not RESP/ : /no reply in \d+ ms/);
      } finally {
        handler.close();
        redis.close();
      }
    }
    // Every 5th command closes its connection: the client reconnects each time, and what it was asked comes through.
    const flaky = await fakeRedis("flaky");
    const handler = replica(flaky.url);
    try {
      let served = 0;
      for (let i = 0; i < 12; i++) {
        const answer = await until(() => handler(legacyPost(INIT)), (response) => response.status !== 503);
        assert.equal(answer.status, 200);
        await answer.body?.cancel();
        served++;
      }
      assert.equal(served, 12);
      assert.ok((await flaky.printed(/"conn":4,/)).length > 0, "reconnected, more than once");
    } finally {
      handler.close();
      flaky.close();
    }
  });

  test("AUTH and SELECT come from the URL, replies split byte by byte are read whole; a wrong password is said without the password", async () => {
    const redis = await fakeRedis("split", { FAKE_REDIS_PASSWORD: "s3cret" });
    const url = redis.url.replace("redis://", "redis://default:s3cret@") + "/3";
    const handler = replica(url);
    try {
      const session = await legacySession(handler);
      assert.equal(
        (await session.ask(handler, "tools/call", { name: "add", arguments: { a: 1, b: 2 } })).result.content[0].text,
        "3",
      );
      const log = await redis.printed(/"SELECT","3"/);
      assert.doesNotMatch(log, /s3cret/);
      const lines: string[] = [];
      const wrong = createHandler({
        tools: HTTP_TOOLS,
        state: redis.url.replace("redis://", "redis://default:wrong-s3cret@"),
        onStateStore: (line) => lines.push(line),
      });
      await until(() => Promise.resolve(lines.length), (count) => count > 0);
      wrong.close();
      assert.match(lines[0], /is unreachable \(the store refused AUTH: WRONGPASS/);
      assert.doesNotMatch(lines.join("\n"), /s3cret/);
    } finally {
      handler.close();
      redis.close();
    }
  });
});

describe("11. Server configs", () => {
  test("expandVariables() takes ${VAR}, ${VAR:-default}, ${env:VAR}; an unset one is a usage error naming it", () => {
    const env = { TOKEN: "t0k", EMPTY: "" };
    assert.equal(expandVariables("Bearer ${TOKEN}", env, "x"), "Bearer t0k");
    assert.equal(
      expandVariables("${env:TOKEN}/${MISSING:-none}/${EMPTY:-fallback}/${EMPTY}", env, "x"),
      "t0k/none/fallback/",
    );
    assert.throws(() => expandVariables("${NOPE}", env, 'server "a"'), (error: Error) => {
      assert.ok(error instanceof UsageError);
      assert.match(error.message, /^Cannot use server "a": it uses \$\{NOPE\}, which is not set/);
      return true;
    });
  });

  test("configs as hosts write them: nearest .mcp.json up, .cursor, .vscode servers, ~/.claude.json, URLs", async () => {
    await withTempDir("mcp-home-", async (home) => {
      const project = join(home, "work", "app");
      const deep = join(project, "src", "lib");
      mkdirSync(deep, { recursive: true });
      mkdirSync(join(project, ".vscode"));
      mkdirSync(join(home, ".gemini"));
      writeFileSync(
        join(project, ".mcp.json"),
        JSON.stringify({
          mcpServers: { near: { command: "node", args: ["${HOME}/s.js"], env: { K: "${KEY:-dflt}" } } },
        }),
      );
      writeFileSync(
        join(project, ".vscode", "mcp.json"),
        JSON.stringify({
          servers: {
            code: { type: "http", url: "https://example.com/mcp", headers: { Authorization: "Bearer ${env:KEY}" } },
            near: { command: "shadowed" },
          },
        }),
      );
      writeFileSync(
        join(home, ".claude.json"),
        JSON.stringify({
          mcpServers: { user: { type: "sse", url: "https://old.example.com/sse" } },
          projects: { [deep]: { mcpServers: { local: { command: "local-server" } } } },
        }),
      );
      writeFileSync(
        join(home, ".gemini", "settings.json"),
        JSON.stringify({
          mcpServers: { g1: { url: "https://g.example.com/sse" }, g2: { httpUrl: "https://g.example.com/mcp" } },
        }),
      );
      writeFileSync(
        join(home, "windsurf.json"),
        JSON.stringify({ mcpServers: { w: { serverUrl: "https://w.example.com/mcp" } } }),
      );
      const env = { HOME: home, PATH: "", KEY: "k3y", XDG_CONFIG_HOME: join(home, ".config") };
      assert.deepEqual(await resolveServer("near", { cwd: deep, env }), {
        command: "node",
        args: [`${home}/s.js`],
        env: { K: "k3y" },
        name: "near",
        cwd: project, // a project's server starts in its root, as Claude Code starts it
      });
      assert.deepEqual(await resolveServer("code", { cwd: deep, env }), {
        type: "http",
        url: "https://example.com/mcp",
        headers: { Authorization: "Bearer k3y" },
        name: "code",
      });
      assert.deepEqual(await resolveServer("local", { cwd: deep, env }), {
        command: "local-server",
        args: [],
        name: "local",
      });
      assert.deepEqual(await resolveServer("user", { cwd: deep, env }), {
        type: "sse",
        url: "https://old.example.com/sse",
        name: "user",
      });
      const gemini = join(home, ".gemini", "settings.json");
      assert.equal((await resolveServer("g1", { config: gemini, env })).type, "sse", "Gemini's plain url is SSE");
      assert.equal((await resolveServer("g2", { config: gemini, env })).type, "http");
      assert.equal(
        (await resolveServer("w", { config: join(home, "windsurf.json"), env }) as { url: string }).url,
        "https://w.example.com/mcp",
      );
      await assert.rejects(
        resolveServer("code", { cwd: deep, env: { ...env, KEY: undefined } }),
        /\$\{KEY\}, which is not set/,
      );
      assert.deepEqual(await resolveServer("https://x.example/mcp", { env }), {
        type: "http",
        url: "https://x.example/mcp",
      });

      const listed = await runCli(["servers"], { cwd: deep, env: { HOME: home, KEY: "k3y" } });
      assert.equal(listed.code, 0, listed.stderr);
      const rows = listed.stdout.trim().split("\n").map((line) => line.split(/ {2,}/));
      assert.deepEqual(rows.map((row) => row.slice(0, 2)), [
        ["near", "stdio"],
        ["code", "http"],
        ["near", "stdio"],
        ["local", "stdio"],
        ["user", "sse"],
        ["g1", "sse"], // Gemini CLI's user file, read after Claude's
        ["g2", "http"],
      ]);
      assert.match(listed.stdout, /node '\$\{HOME\}\/s\.js'/);
      assert.doesNotMatch(listed.stdout, /k3y/, "values stay unexpanded");
      assert.match(rows[2][3], /shadowed/);
      const missing = await runCli(["info", "code"], { cwd: deep, env: { HOME: home } });
      assert.equal(missing.code, 2, missing.stderr);
      assert.match(
        missing.stderr,
        /^mcp: Cannot use server "code" of ".*mcp\.json": it uses \$\{KEY\}, which is not set/,
      );
    });
  });

  test("servers --check connects to each configured server: a line each, exit 3 if any failed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-check-"));
    try {
      const [runtime, ...runtimeArgs] = RUNTIME;
      writeFileSync(
        join(dir, ".mcp.json"),
        JSON.stringify({
          mcpServers: {
            good: { command: runtime, args: [...runtimeArgs, MCP, "serve", HERE + "testdata/tools"] },
            broken: {
              command: runtime,
              args: [...runtimeArgs, HERE + "testdata/fake_server.ts"],
              env: { FAKE_MODE: "crash-before" },
            },
          },
        }),
      );
      const run = await runCli(["servers", "--check"], { cwd: dir, env: { HOME: dir } });
      assert.equal(run.code, 3, run.stderr);
      assert.match(run.stdout, /^good +ok +\d+ tools, 2026-07-28, stdio, \d+ ms$/m);
      assert.match(run.stdout, /^broken +failed +the server exited with code 1/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a project's server starts in the project root, wherever below it the command runs", async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), "mcp-project-")));
    try {
      const [runtime, ...runtimeArgs] = RUNTIME;
      writeFileSync(
        join(dir, ".mcp.json"),
        JSON.stringify({
          mcpServers: { here: { command: runtime, args: [...runtimeArgs, HERE + "testdata/fake_server.ts"] } },
        }),
      );
      mkdirSync(join(dir, "src", "deep"), { recursive: true });
      const run = await runCli(["call", "here", "cwd"], { cwd: join(dir, "src", "deep"), env: { HOME: dir } });
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout.trim(), dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("11b. Host config files as text", () => {
  test("parseJsonText() reads JSON with comments and trailing commas, objects without prototypes, errors by line", () => {
    const text =
      '{\n  // a comment\n  "a": [1, 2,], /* another */\n  "__proto__": {"x": true},\n  "s": "\\u00e9\\n",\n}\n';
    const parsed = parseJsonText(text);
    assert.deepEqual(JSON.parse(JSON.stringify(parsed.value)), { a: [1, 2], ["__proto__"]: { x: true }, s: "é\n" });
    assert.equal(Object.getPrototypeOf(parsed.value), null);
    assert.equal(({} as Record<string, unknown>).x, undefined, "no prototype was touched");
    for (
      const [bad, line] of [
        ['{\n  "a": 1\n  "b": 2\n}', 3],
        ['{\n\n  "a": tru\n}', 3],
        ['{"a": "line\nbreak"}', 1],
        ["{\n /* open", 2],
        ['{"a": 1} x', 1],
      ] as const
    ) {
      assert.throws(() => parseJsonText(bad), (error: Error) => error.message.endsWith(`at line ${line}`), bad);
    }
    // Nesting is bounded: a hostile file is an error, not a stack overflow.
    assert.throws(() => parseJsonText("[".repeat(100_000)), /more than 256 levels of nesting at line 1/);
  });

  test("editJsonMember() adds, replaces and removes one server; every other byte stays as written", () => {
    const original = '{\n    // keep me\n    "theme": "dark",\n    "mcpServers": {\n        "a": {"command": "x"},\n' +
      '        "b": {"command": "y"}, // b\'s comment\n    },\n    "tail": [1,\n 2]\n}\n';
    const added = editJsonMember(original, "mcpServers", "c", { command: "z", args: ["1"] });
    assert.equal(
      added,
      original.replace(
        '"b": {"command": "y"}',
        '"b": {"command": "y"},\n        "c": {\n            "command": "z",\n            "args": [\n' +
          '                "1"\n            ]\n        }',
      ),
    );
    assert.deepEqual(JSON.parse(JSON.stringify(parseJsonText(added).value)).mcpServers.c, {
      command: "z",
      args: ["1"],
    });
    const replaced = editJsonMember(original, "mcpServers", "a", { url: "u" });
    assert.equal(replaced, original.replace('{"command": "x"}', '{\n            "url": "u"\n        }'));
    assert.equal(
      editJsonMember(original, "mcpServers", "a", undefined),
      original.replace('"a": {"command": "x"},\n        ', ""),
    );
    assert.equal(
      editJsonMember(original, "mcpServers", "b", undefined),
      original.replace(',\n        "b": {"command": "y"}', ""),
    );
    // The last one out leaves an empty object; a file without the key gets it, indented as the file is.
    const one = '{\n\t"servers": {\n\t\t"only": {}\n\t}\n}';
    assert.equal(editJsonMember(one, "servers", "only", undefined), '{\n\t"servers": {}\n}');
    assert.equal(
      editJsonMember('{\r\n  "x": 1\r\n}\r\n', "servers", "n", { type: "http" }),
      '{\r\n  "x": 1,\r\n  "servers": {\r\n    "n": {\r\n      "type": "http"\r\n    }\r\n  }\r\n}\r\n',
    );
    assert.equal(editJsonMember("", "mcpServers", "n", {}), '{\n  "mcpServers": {\n    "n": {}\n  }\n}\n');
    assert.equal(editJsonMember('{"mcpServers": {}}', "mcpServers", "n", 1), '{"mcpServers": {\n    "n": 1\n  }}');
    assert.throws(() => editJsonMember('{"mcpServers": []}', "mcpServers", "n", 1), /"mcpServers" is not an object/);
  });

  test("parseTomlText() reads Codex's config: tables, dotted and quoted keys, every string, arrays, inline tables", () => {
    const text = `# Codex
model = "o3"
approval_policy = 'never'
[projects."/home/me/app"]
trust_level = "trusted"

[mcp_servers.docs]
command = "npx"
args = [
  "-y", # the package next
  "@acme/docs",
]
env = { API_KEY = "k", "with space" = 'lit\\eral' }
startup_timeout_sec = 1_0.5
enabled = true

[mcp_servers.docs.env_extra]
n = 0x1F
when = 1979-05-27T07:32:00Z

[mcp_servers."my server"]
url = """
https://e.example/mcp\\
"""
note = '''one
two'''
quote = """ends in a quote""""
a.b.c = -3e2
[[profiles]]
name = "x"
[[profiles]]
name = "y"
`;
    const { value, headers } = parseTomlText(text);
    assert.deepEqual(JSON.parse(JSON.stringify(value)), {
      model: "o3",
      approval_policy: "never",
      projects: { "/home/me/app": { trust_level: "trusted" } },
      mcp_servers: {
        docs: {
          command: "npx",
          args: ["-y", "@acme/docs"],
          env: { API_KEY: "k", "with space": "lit\\eral" },
          startup_timeout_sec: 10.5,
          enabled: true,
          env_extra: { n: 31, when: "1979-05-27T07:32:00Z" },
        },
        "my server": {
          url: "https://e.example/mcp",
          note: "one\ntwo",
          quote: 'ends in a quote"',
          a: { b: { c: -300 } },
        },
      },
      profiles: [{ name: "x" }, { name: "y" }],
    });
    assert.deepEqual(headers.map((header) => header.path.join(".")), [
      "projects./home/me/app",
      "mcp_servers.docs",
      "mcp_servers.docs.env_extra",
      "mcp_servers.my server",
      "profiles",
      "profiles",
    ]);
    for (
      const [bad, line] of [
        ['a = "x"\na = "y"', 2],
        ["[t]\nk = ", 2],
        ['k = "open', 1],
        ["k = [1, 2", 1],
        ["\n\nk = nope", 3],
        ['k = "\\q"', 1],
      ] as const
    ) {
      assert.throws(() => parseTomlText(bad), (error: Error) => error.message.endsWith(`at line ${line}`), bad);
    }
  });

  test("editTomlTable() writes, replaces and removes [mcp_servers.NAME] and its sub-tables, nothing else", () => {
    const original = '# mine\nmodel = "o3"\n\n[mcp_servers.a]\ncommand = "x"\n\n[mcp_servers.a.env]\nK = "v"\n\n' +
      "[tui]\nnotifications = true\n";
    const added = editTomlTable(original, "mcp_servers", "b c", { command: "y", args: ["1"], env: { K: "v" } });
    assert.equal(added, original + '\n[mcp_servers."b c"]\ncommand = "y"\nargs = ["1"]\nenv = { K = "v" }\n');
    assert.deepEqual(JSON.parse(JSON.stringify(parseTomlText(added).value)).mcp_servers["b c"], {
      command: "y",
      args: ["1"],
      env: { K: "v" },
    });
    const replaced = editTomlTable(original, "mcp_servers", "a", { url: "https://e.example/mcp" });
    assert.equal(
      replaced,
      '# mine\nmodel = "o3"\n\n[mcp_servers.a]\nurl = "https://e.example/mcp"\n\n[tui]\nnotifications = true\n',
    );
    assert.equal(
      editTomlTable(original, "mcp_servers", "a", undefined),
      '# mine\nmodel = "o3"\n\n[tui]\nnotifications = true\n',
    );
    assert.equal(editTomlTable("", "mcp_servers", "n", { command: "c" }), '[mcp_servers.n]\ncommand = "c"\n');
    // An inline table is closed: a server written as one, or beside one, is said, not mangled.
    assert.throws(
      () => editTomlTable('[mcp_servers]\nn = { command = "c" }\n', "mcp_servers", "n", undefined),
      /"mcp_servers" is written as an inline table; edit it by hand at line 2$/,
    );
    assert.throws(
      () => editTomlTable('x = 1\nmcp_servers = { a = { command = "x" } }\n', "mcp_servers", "b", { command: "y" }),
      /"mcp_servers" is written as an inline table; edit it by hand at line 2$/,
    );
    assert.throws(
      () => editTomlTable('[mcp_servers]\nn.command = "c"\n', "mcp_servers", "n", undefined),
      /"mcp_servers\.n" is not written as a \[mcp_servers\.n\] table/,
    );
    // What TOML cannot hold as JSON writes it: DEL and a lone surrogate escaped, a whole number past 2^63 a float.
    assert.equal(
      editTomlTable("", "mcp_servers", "x\x7f", { command: "a\x7fb\ud800", timeout: 1e20, big: 2 ** 53 - 1 }),
      '[mcp_servers."x\\u007F"]\ncommand = "a\\u007Fb\ufffd"\ntimeout = 1e+20\nbig = 9007199254740991\n',
    );
  });
});

describe("11c. Hosts: install and uninstall, each host's file written and read back", () => {
  // Each host's user file under a temp HOME, and the key its servers sit under.
  const USER_FILES: Record<string, [string, string]> = {
    "claude-desktop": [".config/Claude/claude_desktop_config.json", "mcpServers"],
    "claude-code": [".claude.json", "mcpServers"],
    cursor: [".cursor/mcp.json", "mcpServers"],
    vscode: [".config/Code/User/mcp.json", "servers"],
    windsurf: [".codeium/windsurf/mcp_config.json", "mcpServers"],
    codex: [".codex/config.toml", "mcp_servers"],
    gemini: [".gemini/settings.json", "mcpServers"],
    zed: [".config/zed/settings.json", "context_servers"],
  };
  const read = (file: string) => {
    const text = readFileSync(file, "utf8");
    return JSON.parse(
      JSON.stringify(/\.toml(\.bak)?$/.test(file) ? parseTomlText(text).value : parseJsonText(text).value),
    );
  };

  for (const [host, [relative, key]] of Object.entries(USER_FILES)) {
    test(`install ${host}: a command and a URL written, listed by servers, removed by uninstall`, async () => {
      await withTempDir("mcp-install-", async (dir) => {
        // The working directory is not under HOME: user files are found by HOME, not by the walk up from here.
        const home = join(dir, "home");
        const cwd = join(dir, "elsewhere");
        mkdirSync(home);
        mkdirSync(cwd);
        const env = { HOME: home, XDG_CONFIG_HOME: join(home, ".config"), APPDATA: join(home, "AppData") };
        const file = join(home, relative);
        const first = await runCli(["install", host, "local", "--", "node", "server.js", "--flag"], { cwd, env });
        assert.equal(first.code, 0, first.stderr);
        assert.equal(first.stdout, `installed "local" in ${file} (${host}, user scope)\n`);
        const url = await runCli(["install", host, "remote", "https://e.example/mcp", "-H", "X-Key: s3cret"], {
          cwd,
          env,
        });
        assert.equal(url.code, 0, url.stderr);
        assert.match(
          url.stdout,
          new RegExp(`^installed "remote" in ${escape(file)} .*the previous file is ${escape(file)}\\.bak\\)\\n$`),
        );
        const servers = read(file)[key];
        const typed = host === "claude-code" || host === "vscode" ? { type: "stdio" } : {};
        assert.deepEqual(servers.local, { ...typed, command: "node", args: ["server.js", "--flag"] });
        const remote = {
          "claude-desktop": {
            command: "npx",
            args: ["-y", "@mcp-ts/mcp", "proxy", "https://e.example/mcp", "-H", "X-Key: s3cret"],
          },
          "claude-code": { type: "http", url: "https://e.example/mcp", headers: { "X-Key": "s3cret" } },
          cursor: { url: "https://e.example/mcp", headers: { "X-Key": "s3cret" } },
          vscode: { type: "http", url: "https://e.example/mcp", headers: { "X-Key": "s3cret" } },
          windsurf: { serverUrl: "https://e.example/mcp", headers: { "X-Key": "s3cret" } },
          codex: { url: "https://e.example/mcp", http_headers: { "X-Key": "s3cret" } },
          gemini: { httpUrl: "https://e.example/mcp", headers: { "X-Key": "s3cret" } },
          zed: { url: "https://e.example/mcp", headers: { "X-Key": "s3cret" } },
        }[host];
        assert.deepEqual(servers.remote, remote);
        // What install wrote, `servers` reads back from the same file, and a <server> name reaches it.
        const listed = await runCli(["servers", "--json"], { cwd, env });
        assert.equal(listed.code, 0, listed.stderr);
        const mine = JSON.parse(listed.stdout).servers.filter((server: { file: string }) => server.file === file);
        assert.deepEqual(
          mine.map((server: { name: string; transport: string }) => [server.name, server.transport]),
          [["local", "stdio"], ["remote", host === "claude-desktop" ? "stdio" : "http"]],
        );
        const refused = await runCli(["install", host, "local", "--", "other"], { cwd, env });
        assert.equal(refused.code, 2);
        assert.match(refused.stderr, /already has a server "local": give --force to replace it/);
        const removed = await runCli(["uninstall", host, "remote"], { cwd, env });
        assert.equal(removed.code, 0, removed.stderr);
        assert.deepEqual(Object.keys(read(file)[key]), ["local"]);
        assert.ok(read(`${file}.bak`)[key].remote, "the file before the change is kept beside it");
      });
    });
  }

  test("install: an entry that fetches an unpublished package says so once; --from-clone runs this file instead", async () => {
    const registry = createHttpServer((request, response) => {
      response.writeHead(request.url === "/@mcp-ts%2fmcp" ? 404 : 500).end("{}");
    });
    await new Promise<void>((resolve) => registry.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(registry.address() as { port: number }).port}/`;
    try {
      await withTempDir("mcp-install-clone-", async (dir) => {
        const env = { HOME: join(dir, "home"), npm_config_registry: url };
        const tools = join(HERE, "testdata", "tools");
        const [npx, clone, desktop, both] = await Promise.all([
          runCli(["install", "cursor", "a", "--self", tools, "--scope", "user"], { cwd: dir, env }),
          runCli(["install", "claude-code", "b", "--attach", "--from-clone", "--scope", "user"], { cwd: dir, env }),
          runCli(["install", "claude-desktop", "c", "--from-clone", "https://example.test/mcp"], { cwd: dir, env }),
          runCli(["install", "cursor", "d", "--self", tools, "--from-clone", "--runtime", "bun"], { cwd: dir, env }),
        ]);
        assert.equal(npx.code, 0, npx.stderr);
        assert.match(
          npx.stderr,
          /^mcp: @mcp-ts\/mcp is not on the npm registry yet, so the entry cannot start there; install again with --force --from-clone for one that runs this file \(.+mcp\.m?[tj]s\)\n$/,
        );
        for (const run of [clone, desktop]) assert.deepEqual([run.code, run.stderr], [0, ""]);
        assert.equal(both.code, 2);
        const self = [RUNTIME[0].includes("deno") ? "run" : undefined, RUNTIME[0].includes("deno") ? "-A" : undefined]
          .filter(Boolean);
        const claude = JSON.parse(readFileSync(join(dir, "home", ".claude.json"), "utf8")).mcpServers.b;
        assert.ok(claude.args.some((arg: string) => /\/mcp\.m?[tj]s$/.test(arg)), JSON.stringify(claude));
        assert.deepEqual(claude.args.slice(-2), ["attach", "b"]);
        assert.ok(self.every((flag) => claude.args.includes(flag)), JSON.stringify(claude));
        const desktopFile = join(dir, "home", ".config", "Claude", "claude_desktop_config.json");
        const entry = JSON.parse(readFileSync(desktopFile, "utf8")).mcpServers.c;
        assert.deepEqual(entry.args.slice(-2), ["proxy", "https://example.test/mcp"]);
        assert.ok(entry.args.some((arg: string) => /\/mcp\.m?[tj]s$/.test(arg)), JSON.stringify(entry));
      });
    } finally {
      registry.close();
    }
  });

  test("install keeps every other key, comment and the indentation; --force replaces; a broken file is left whole", async () => {
    await withTempDir("mcp-install-", async (dir) => {
      const env = { HOME: join(dir, "home") };
      mkdirSync(join(dir, ".vscode"));
      const file = join(dir, ".vscode", "mcp.json");
      const original = '{\n    // the team\'s servers\n    "inputs": [{"type": "promptString", "id": "key"}],\n' +
        '    "servers": {\n        "old": {"type": "stdio", "command": "old"}\n    }\n}\n';
      writeFileSync(file, original);
      // The project's file exists here: that is the default scope.
      const forced = await runCli(["install", "vscode", "old", "--force", "--self", "testdata/tools"], {
        cwd: dir,
        env,
      });
      assert.equal(forced.code, 2, "testdata/tools is not a folder here");
      const tools = join(HERE, "testdata", "tools");
      const ok = await runCli(["install", "vscode", "old", "--force", "--self", tools], { cwd: dir, env });
      assert.equal(ok.code, 0, ok.stderr);
      assert.equal(ok.stdout, `installed "old" in ${file} (vscode, project scope; the previous file is ${file}.bak)\n`);
      assert.equal(
        readFileSync(file, "utf8"),
        original.replace(
          '{"type": "stdio", "command": "old"}',
          `{\n            "type": "stdio",\n            "command": "npx",\n            "args": [\n                "-y",\n` +
            `                "@mcp-ts/mcp",\n                "serve",\n                ${JSON.stringify(tools)}\n` +
            `            ]\n        }`,
        ),
      );
      assert.equal(readFileSync(`${file}.bak`, "utf8"), original);
      const broken = '{\n  "servers": {\n    "a": {"command": "x"}\n    "b": 1\n  }\n}\n';
      writeFileSync(file, broken);
      const refused = await runCli(["install", "vscode", "c", "--", "c"], { cwd: dir, env });
      assert.equal(refused.code, 2);
      assert.match(
        refused.stderr,
        new RegExp(
          `Cannot edit "${escape(file)}" \\(left as it was\\): "," or "}" after the value of "a" at line 4\\n`,
        ),
      );
      assert.equal(readFileSync(file, "utf8"), broken);
      const unknown = await runCli(["install", "notepad", "c", "--", "c"], { cwd: dir, env });
      assert.equal(unknown.code, 2);
      assert.match(unknown.stderr, /"notepad" is not a host mcp\.ts knows; hosts: claude-desktop, claude-code, cursor/);
      const runtimes = await runCli(
        ["install", "cursor", "d", "--self", tools, "--runtime", "deno", "--scope", "user"],
        {
          cwd: dir,
          env,
        },
      );
      assert.equal(runtimes.code, 0, runtimes.stderr);
      assert.deepEqual(read(join(dir, "home", ".cursor", "mcp.json")).mcpServers.d, {
        command: "deno",
        args: ["run", "-A", "jsr:@mcp-ts/mcp", "serve", tools],
      });
    });
  });

  test("install --attach writes the entry that shares a session: npx -y @mcp-ts/mcp attach NAME", async () => {
    await withTempDir("mcp-attach-install-", async (home) => {
      const run = await runCli(["install", "cursor", "gh", "--attach", "--scope", "user"], { env: { HOME: home } });
      assert.equal(run.code, 0, run.stderr);
      assert.deepEqual(JSON.parse(readFileSync(join(home, ".cursor", "mcp.json"), "utf8")).mcpServers.gh, {
        command: "npx",
        args: ["-y", "@mcp-ts/mcp", "attach", "gh"],
      });
    });
  });

  test("<server> names are read from Codex (a trusted project's, then the user's), Zed and Copilot CLI too", async () => {
    await withTempDir("mcp-hosts-", async (home) => {
      const project = join(home, "app");
      mkdirSync(join(project, ".codex"), { recursive: true });
      mkdirSync(join(home, ".codex"));
      mkdirSync(join(home, ".config", "zed"), { recursive: true });
      mkdirSync(join(home, ".copilot"));
      writeFileSync(
        join(home, ".codex", "config.toml"),
        `[projects.${
          JSON.stringify(project)
        }]\ntrust_level = "trusted"\n\n[mcp_servers.docs]\nurl = "https://d.example/mcp"\n` +
          `bearer_token_env_var = "DOCS_TOKEN"\n\n[mcp_servers.off]\ncommand = "off"\nenabled = false\n`,
      );
      writeFileSync(
        join(project, ".codex", "config.toml"),
        '[mcp_servers.proj]\ncommand = "proj-server"\nargs = ["a"]\n',
      );
      writeFileSync(
        join(home, ".config", "zed", "settings.json"),
        '{\n  // Zed\n  "context_servers": {\n    "old-style": {"command": {"path": "zed-srv", "args": ["x"]}},\n  },\n}',
      );
      writeFileSync(
        join(home, ".copilot", "mcp-config.json"),
        '{"mcpServers": {"gh": {"type": "local", "command": "gh-mcp"}}}',
      );
      // A project's Zed and Gemini CLI settings, as `install zed|gemini --scope project` writes them.
      mkdirSync(join(project, ".zed"));
      mkdirSync(join(project, ".gemini"));
      writeFileSync(
        join(project, ".zed", "settings.json"),
        '{"context_servers": {"zp": {"url": "https://z.example/mcp"}}}',
      );
      writeFileSync(join(project, ".gemini", "settings.json"), '{"mcpServers": {"gp": {"command": "gp"}}}');
      const env = { HOME: home, XDG_CONFIG_HOME: join(home, ".config"), PATH: "", DOCS_TOKEN: "t0k" };
      assert.deepEqual(await resolveServer("docs", { cwd: project, env }), {
        type: "http",
        url: "https://d.example/mcp",
        headers: { Authorization: "Bearer t0k" },
        name: "docs",
      });
      assert.deepEqual(await resolveServer("proj", { cwd: project, env }), {
        command: "proj-server",
        args: ["a"],
        name: "proj",
      });
      assert.deepEqual(await resolveServer("old-style", { cwd: project, env }), {
        command: "zed-srv",
        args: ["x"],
        name: "old-style",
      });
      assert.deepEqual(await resolveServer("gh", { cwd: project, env }), { command: "gh-mcp", args: [], name: "gh" });
      assert.deepEqual(await resolveServer("zp", { cwd: project, env }), {
        type: "http",
        url: "https://z.example/mcp",
        name: "zp",
      });
      assert.deepEqual(await resolveServer("gp", { cwd: project, env }), { command: "gp", args: [], name: "gp" });
      await assert.rejects(resolveServer("off", { cwd: project, env }), /"off" is not a command on PATH/);
      // Untrusted, the project's file is not read.
      await assert.rejects(resolveServer("proj", { cwd: home, env }), /"proj" is not a command on PATH/);
    });
  });
});

describe("11d. Bundles: pack", () => {
  test("javaScriptOf() blanks types, names node in the shebang, keeps every line, writes ASCII only", () => {
    // Node's stripper keeps byte offsets: a blanked 2-byte character becomes U+00A0, a 3-byte one U+2002, a 4-byte
    // one U+FEFF (seen on Node 22.23: a type's comment with "§", "—" and an emoji).
    const strip = (code: string) =>
      code.replace(": string", "        ").replace(": \u2014", "\u2002\u2002 ").replace(
        "/* \u00a7\u{1F600} */",
        "   \u00a0\ufeff   ",
      );
    const js = javaScriptOf(
      '#!/usr/bin/env -S deno run -A\nconst a: string = "\u2014 \u{1F600}";\nlet b: \u2014;\n/* \u00a7\u{1F600} */\n',
      strip,
    );
    assert.equal(js, '#!/usr/bin/env node\nconst a         = "\\u2014 \\ud83d\\ude00";\nlet b   ;\n        \n');
    // The source holds no such space of its own: each one in the stripped text is a blanked type's.
    assert.doesNotMatch(readFileSync(MCP_SOURCE, "utf8"), /[\u00a0\u2000-\u200a\ufeff]/);
  });

  test("zipArchive() writes what a zip reader reads back: names, bytes, modes, deflated or stored", async () => {
    const big = new TextEncoder().encode("abc".repeat(10_000));
    const archive = await zipArchive([
      { name: "manifest.json", data: new TextEncoder().encode("{}"), mode: 0o644 },
      { name: "tools/run.sh", data: big, mode: 0o755 },
      { name: "tools/é.txt", data: new Uint8Array([0, 255]), mode: 0o600 },
    ]);
    const entries = await unzip(archive);
    assert.deepEqual(entries.map((entry) => [entry.name, entry.mode, entry.method]), [
      ["manifest.json", 0o644, 0],
      ["tools/run.sh", 0o755, 8],
      ["tools/é.txt", 0o600, 0],
    ]);
    assert.deepEqual(entries[1].data, big);
    assert.deepEqual(entries[2].data, new Uint8Array([0, 255]));
  });

  test("pack names the TypeScript plugins that raise the bundle's Node to >= 22.18; a folder without one says nothing", async () => {
    if (process.versions.bun) return; // Bun cannot pack (the test above): no stripper that keeps the text as it is
    await withTempDir("mcp-pack-ts-", async (dir) => {
      const tools = join(dir, "tools");
      mkdirSync(tools);
      writeFileSync(join(tools, "plain.mjs"), 'export default { run: () => "plain" };\n');
      const plain = await runCli(["pack", tools, "-o", join(dir, "plain.mcpb")], { cwd: dir });
      assert.deepEqual([plain.code, plain.stderr], [0, ""]);
      writeFileSync(join(tools, "add.ts"), "export default { run: ({ a }: { a: number }) => a + 1 };\n");
      writeFileSync(join(tools, "sub.mts"), "export default { run: ({ a }: { a: number }) => a - 1 };\n");
      const typed = await runCli(["pack", tools, "-o", join(dir, "typed.mcpb")], { cwd: dir });
      assert.equal(typed.code, 0, typed.stderr);
      assert.equal(
        typed.stderr,
        "mcp: pack: add.ts, sub.mts are TypeScript: the bundle needs Node >= 22.18 (type stripping); written as .js, " +
          "it runs on Node >= 18\n",
      );
      const entries = await unzip(new Uint8Array(readFileSync(join(dir, "typed.mcpb"))));
      const manifest = JSON.parse(new TextDecoder().decode(entries.find((e) => e.name === "manifest.json")!.data));
      assert.deepEqual(manifest.compatibility, { runtimes: { node: ">=22.18.0" } });
    });
  });

  test("pack DIR -o NAME.mcpb: the manifest lists DIR's tools, the bundle serves them", async () => {
    await withTempDir("mcp-pack-", async (dir) => {
      const tools = join(dir, "tools");
      mkdirSync(tools);
      writeFileSync(join(tools, "package.json"), JSON.stringify({ name: "@me/kit", version: "2.0.0", author: "Ann" }));
      writeFileSync(join(tools, "twice.mjs"), 'export default { description: "Twice n", run: ({ n }) => 2 * n };\n');
      writeFileSync(join(tools, "hello.sh"), "#!/bin/sh\necho hello\n", { mode: 0o755 });
      writeFileSync(join(tools, "hello.json"), JSON.stringify({ description: "Says hello" }));
      const out = join(dir, "kit.mcpb");
      const packed = await runCli(["pack", tools, "-o", out, "--description", "A kit"], { cwd: dir });
      if (process.versions.bun) {
        // Bun has no stripper that leaves the text as it is: pack says so, and where it works.
        assert.equal(packed.code, 2);
        assert.match(packed.stderr, /lacks \(Node >= 22\.18 and Deno have it\); run it as: npx -y @mcp-ts\/mcp pack/);
        return;
      }
      assert.equal(packed.code, 0, packed.stderr);
      assert.match(
        packed.stdout,
        new RegExp(`^packed 2 tools of ${escape(tools)} into ${escape(out)} \\(6 files, \\d+ KiB\\)\\n$`),
      );
      const entries = await unzip(new Uint8Array(readFileSync(out)));
      const manifest = JSON.parse(
        new TextDecoder().decode(entries.find((entry) => entry.name === "manifest.json")!.data),
      );
      assert.deepEqual(manifest, {
        manifest_version: "0.3",
        name: "kit",
        version: "2.0.0",
        description: "A kit",
        author: { name: "Ann" },
        server: {
          type: "node",
          entry_point: "server/mcp.mjs",
          mcp_config: {
            command: "node",
            args: ["${__dirname}/server/mcp.mjs", "serve", "${__dirname}/tools"],
            env: {},
          },
        },
        tools: [{ name: "hello", description: "Says hello" }, { name: "twice", description: "Twice n" }],
        compatibility: { runtimes: { node: ">=18.0.0" } },
      });
      assert.deepEqual(
        entries.map((entry) => [entry.name, entry.mode]),
        [
          ["manifest.json", 0o644],
          ["server/mcp.mjs", 0o755],
          ["tools/hello.json", 0o644],
          ["tools/hello.sh", 0o755],
          ["tools/package.json", 0o644],
          ["tools/twice.mjs", 0o644],
        ],
      );
      // Unpacked as a host unpacks it, the bundle's program serves the bundle's tools.
      const unpacked = join(dir, "unpacked");
      for (const entry of entries) {
        mkdirSync(dirname(join(unpacked, entry.name)), { recursive: true });
        writeFileSync(join(unpacked, entry.name), entry.data, { mode: entry.mode });
      }
      const program = join(unpacked, "server", "mcp.mjs");
      const server = [...RUNTIME, program, "serve", join(unpacked, "tools")].join(" ");
      const called = await runCli(["call", server, "hello"], { cwd: dir });
      assert.equal(called.code, 0, called.stderr);
      assert.equal(called.stdout, "hello\n");
      const twice = await runCli(["call", server, "twice", "n=21"], { cwd: dir });
      assert.equal(twice.stdout, "42\n");
    });
  });
});

// Reads a zip back (the central directory, then each entry, inflated with the runtime's DecompressionStream).
async function unzip(archive: Uint8Array): Promise<{ name: string; mode: number; method: number; data: Uint8Array }[]> {
  const view = new DataView(archive.buffer, archive.byteOffset, archive.byteLength);
  const end = archive.length - 22;
  assert.equal(view.getUint32(end, true), 0x06054b50, "the end record is last (no comment)");
  const count = view.getUint16(end + 10, true);
  let at = view.getUint32(end + 16, true);
  const entries = [];
  for (let i = 0; i < count; i++) {
    assert.equal(view.getUint32(at, true), 0x02014b50);
    const method = view.getUint16(at + 10, true);
    const size = view.getUint32(at + 20, true);
    const nameLength = view.getUint16(at + 28, true);
    const extra = view.getUint16(at + 30, true) + view.getUint16(at + 32, true);
    const mode = (view.getUint32(at + 38, true) >>> 16) & 0o777;
    const local = view.getUint32(at + 42, true);
    const name = new TextDecoder().decode(archive.subarray(at + 46, at + 46 + nameLength));
    const start = local + 30 + view.getUint16(local + 26, true) + view.getUint16(local + 28, true);
    let data = archive.slice(start, start + size);
    if (method === 8) {
      const stream = new Blob([data]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
      data = new Uint8Array(await new Response(stream).arrayBuffer());
    }
    entries.push({ name, mode, method, data });
    at += 46 + nameLength + extra;
  }
  return entries;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

describe("12. Client transports", () => {
  test("behind a load balancer without affinity: one new initialize after the 404, then exit 3 at once naming the cause", async () => {
    const servers = await Promise.all(
      [0, 1].map(() => startListening([MCP, "serve", "testdata/tools", "--http", "127.0.0.1:0"], /serving (http:\S+)/)),
    );
    const balancer = await startListening(
      [HERE + "testdata/round_robin_proxy.ts", ...servers.map((server) => server.url)],
      /listening (http:\S+)/,
    );
    try {
      // --timeout 60 s: a client that waited for it would end this test by the test's own timeout instead.
      const run = await runCli(["call", `${balancer.url}/mcp`, "add", "a=1", "b=2", "--protocol", "legacy"], {
        ms: 60_000,
      });
      assert.equal(run.code, 3, run.stderr);
      assert.match(
        run.stderr,
        /the session is unknown to the server it reached: .*a load balancer without session affinity/,
      );
      const initializes = (await balancer.printed(/DELETE|POST/)).split("\n").filter((line) =>
        / -> \d 200$/.test(line)
      );
      assert.ok(initializes.length <= 3, `${initializes.length} answered POSTs: the new session was made once`);
    } finally {
      balancer.close();
      for (const server of servers) server.close();
    }
  });

  test("SseReader splits events at blank lines, over any chunking, and skips comments", () => {
    const body = ': keep-alive\r\n\r\nid: 7\r\nretry: 500\r\ndata: \r\n\r\nevent: message\ndata: {"a":\ndata: 1}\n\n' +
      "event: endpoint\rdata: /messages?x=1\r\r";
    for (const size of [1, 3, body.length]) {
      const events: unknown[] = [];
      const reader = new SseReader((event) => events.push(event), 1024);
      const bytes = new TextEncoder().encode(body);
      for (let i = 0; i < bytes.length; i += size) reader.push(bytes.slice(i, i + size));
      reader.end();
      assert.deepEqual(events, [
        { event: "message", data: "", id: "7", retry: 500 },
        { event: "message", data: '{"a":\n1}' },
        { event: "endpoint", data: "/messages?x=1" },
      ], `chunks of ${size}`);
    }
    const big: unknown[] = [];
    const capped = new SseReader((event) => big.push(event), 10);
    capped.push(new TextEncoder().encode(`data: ${"x".repeat(50)}\n\ndata: ok\n\n`));
    assert.deepEqual(big, [{ event: "message", data: "ok" }], "an event over the cap is dropped whole");
  });

  test("a stdio server is stopped with its whole process group: a wrapper cannot leave it behind", async () => {
    // The wrapper starts the real server as its child and dies on SIGTERM, as npx does; the server
    // ignores stdin closing and SIGTERM, so only a SIGKILL to the group ends it.
    const wrapped = `sh ${quote(HERE + "testdata/wrapper.sh")} ${FAKE}`;
    // In process, each wait of the ladder seen and ended at once (the CLI's real 2 s steps are the SIGINT case's):
    // after the cancellation, SIGTERM to the group, then SIGKILL to it.
    const timedOut = await runWatched( // --timeout: each request's, 3 s lets a busy machine start the server first
      ["call", wrapped, "echo", "--timeout", "3000", "--trace", "-e", "FAKE_MODE=ignore-sigterm"],
    );
    assert.equal(timedOut.code, 3, timedOut.stderr);
    assert.match(timedOut.stderr, /timed out/);
    const pid = Number(/fake: pid (\d+)/.exec(timedOut.stderr)?.[1]);
    assert.ok(pid > 0, timedOut.stderr);
    const cancelled = timedOut.offset(/^> .*"notifications\/cancelled".*tools\/call timed out/m);
    const ladder = timedOut.waits.filter((wait) => wait.after > cancelled).map((wait) => wait.why);
    assert.deepEqual(ladder.slice(0, 2), ["SIGTERM", "SIGKILL"], "SIGTERM after its wait, then SIGKILL after its own");
    assert.equal(await isGone(pid), true, "the server under the wrapper is gone");

    // Ctrl-C: the server is in its own group, so only we get the SIGINT; we stop it in order.
    let signalled = false;
    const interrupted = runCli(["call", wrapped, "echo", "-v", "--trace", "-e", "FAKE_MODE=ignore-sigterm"], {
      onStderr: (text, cli) => {
        if (signalled || !/^> .*"method":"tools\/call"/m.test(text)) return; // the call is in flight
        signalled = true;
        process.kill(cli, "SIGINT");
      },
    });
    const run = await interrupted;
    // 130, not the kill runCli gives a command that never ends (the server would never end by itself).
    assert.equal(run.code, 130, run.stderr);
    const second = Number(/fake: pid (\d+)/.exec(run.stderr)?.[1]);
    assert.ok(second > 0, run.stderr);
    assert.equal(await isGone(second), true, "no process left after Ctrl-C");
  });

  test("an over-long answer fails the request at once naming --max-line-bytes: stdio line, SSE event", async () => {
    const endless = await hostileHttp("endless-sse");
    try {
      const started = Date.now();
      const [line, event] = await Promise.all([
        runCli(["call", HOSTILE, "long", "-e", "HOSTILE_MODE=long-line", "--max-line-bytes", "1000000"]),
        runCli(["call", endless.url, "echo", "text=x", "--max-line-bytes", "1000000", "--protocol", "legacy"]),
      ]);
      assert.equal(line.code, 3, line.stderr);
      assert.match(line.stderr, /over 1000000 bytes \(raise --max-line-bytes\)/);
      assert.equal(event.code, 3, event.stderr);
      assert.match(event.stderr, /an event over 1000000 bytes \(raise --max-line-bytes\)/);
      // Far under the 60 s request timeout, far over what a busy machine takes.
      assert.ok(Date.now() - started < 25_000, `took ${Date.now() - started} ms: not a timeout`);
    } finally {
      endless.close();
    }
  });
});

/** A client's ES256 key (--client-key): its public JWK for the authorization server, its private key as PEM. */
async function clientKeyPair(): Promise<{ jwk: JsonWebKey; pem: string }> {
  const { publicKey, privateKey } = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
    "sign",
    "verify",
  ]);
  const jwk = await crypto.subtle.exportKey("jwk", publicKey);
  const pkcs8 = Buffer.from(await crypto.subtle.exportKey("pkcs8", privateKey)).toString("base64");
  return {
    jwk,
    pem: `-----BEGIN PRIVATE KEY-----\n${pkcs8.match(/.{1,64}/g)!.join("\n")}\n-----END PRIVATE KEY-----\n`,
  };
}

describe("13. OAuth: the client", () => {
  test("a server of one static --token: the client says to give it with -H (not to log in), and a wrong one is named", async () => {
    const server = await startListening(
      [MCP, "serve", HERE + "testdata/tools", "--http", "0", "--token", "sekret"],
      /serving (\S+)/,
    );
    const store = join(mkdtempSync(join(tmpdir(), "mcp-plain-token-")), "credentials.json");
    try {
      const [none, wrong, login, right] = await Promise.all([
        runCli(["call", server.url, "echo", "text=hi"]),
        runCli(["call", server.url, "echo", "text=hi", "-H", "Authorization: Bearer nope"]),
        runCli(["login", server.url], { env: { MCP_TS_CREDENTIALS: store, BROWSER } }),
        runCli(["call", server.url, "echo", "text=hi", "-H", "Authorization: Bearer sekret"]),
      ]);
      for (const run of [none, login]) {
        assert.equal(run.code, 4, run.stderr);
        assert.match(
          run.stderr,
          /offers no OAuth metadata to log in with: give its token as -H 'Authorization: Bearer/,
        );
        assert.doesNotMatch(run.stderr, /Cannot register|run: mcp\.ts login/);
      }
      assert.equal(wrong.code, 4);
      assert.match(wrong.stderr, /refused the token given with -H or in the config \(HTTP 401\); check its value/);
      assert.equal(right.stdout, "hi\n");
    } finally {
      server.close();
    }
  });

  test("login: discovery, registration, PKCE through the browser; the token kept 0600 and used after", async () => {
    await withProtectedServer(async (as, server, store) => {
      const env = { MCP_TS_CREDENTIALS: store, BROWSER };
      const script = await runCli(["call", server.url, "whoami"], { env });
      assert.equal(script.code, 4, script.stderr);
      assert.equal(
        script.stderr,
        `mcp: the server at ${server.url} needs authorization; run: mcp.ts login ${server.url}\n`,
      );
      assert.deepEqual((await as.log()).filter((entry) => entry.kind !== "metadata"), [], "a script starts nothing");

      const login = await runCli(["login", server.url], { env });
      assert.equal(login.code, 0, login.stderr);
      assert.match(
        login.stderr,
        /^mcp: to authorize mcp\.ts with http:\/\/127\.0\.0\.1:\d+, open: http:\S+\/authorize\?/m,
      );
      assert.match(login.stderr, /^mcp: logged in to /m);
      if (process.platform !== "win32") {
        assert.equal(statSync(store).mode & 0o777, 0o600);
        assert.equal(statSync(dirname(store)).mode & 0o777, 0o700);
      }
      const kept = JSON.parse(readFileSync(store, "utf8"));
      const [token] = Object.values(kept.tokens) as Message[];
      assert.equal(token.resource, server.url);
      assert.ok(token.expires_at > Date.now() / 1000);
      const log = await as.log();
      const register = log.find((entry) => entry.kind === "register")!;
      assert.equal(register.body.application_type, "native");
      assert.deepEqual(register.body.grant_types, ["authorization_code", "refresh_token"]);
      const authorize = log.find((entry) => entry.kind === "authorize")!;
      assert.equal(authorize.code_challenge_method, "S256");
      assert.equal(authorize.resource, server.url);
      assert.equal(authorize.scope, "mcp:read offline_access");
      const exchange = log.find((entry) => entry.kind === "token")!;
      assert.equal(exchange.pkceOk, true);
      assert.equal(exchange.resource, server.url);

      const [call, traced] = await Promise.all([
        runCli(["call", server.url, "whoami"], { env }),
        runCli(["list", server.url, "--trace", "--record", join(dirname(store), "c.ndjson")], { env }),
      ]);
      assert.equal(call.code, 0, call.stderr);
      assert.equal(JSON.parse(call.stdout).sub, "user-1");
      assert.equal((await as.log()).filter((entry) => entry.kind === "authorize").length, 1, "no second flow");
      for (
        const text of [
          call.stdout,
          call.stderr,
          traced.stdout,
          traced.stderr,
          readFileSync(join(dirname(store), "c.ndjson"), "utf8"),
        ]
      ) {
        assert.ok(!text.includes(token.access_token as string), "no token is printed or recorded");
      }

      const out = await runCli(["logout", server.url], { env });
      assert.equal(out.code, 0, out.stderr);
      assert.match(out.stderr, /forgot 1 token/);
      assert.equal((await runCli(["call", server.url, "whoami"], { env })).code, 4);
    }, { serveArgs: ["--auth-scopes", "mcp:read"] });
  });

  test("concurrent commands with an expiring token refresh it once, under the store's lock", async () => {
    await withProtectedServer(async (as, server, store) => {
      const env = { MCP_TS_CREDENTIALS: store, BROWSER };
      assert.equal((await runCli(["login", server.url], { env })).code, 0);
      await fetch(as.url + "/_reset", { method: "POST" });
      // The token is made 25 s old, 5 s from its end: every command wants a fresh one, and one gets it.
      const kept = JSON.parse(readFileSync(store, "utf8"));
      for (const token of Object.values(kept.tokens) as Message[]) {
        token.obtained_at -= 25;
        token.expires_at -= 25;
      }
      writeFileSync(store, JSON.stringify(kept));
      const runs = await Promise.all([1, 2, 3, 4, 5].map(() => runCli(["call", server.url, "whoami"], { env })));
      for (const run of runs) assert.equal(run.code, 0, run.stderr);
      const refreshes = (await as.log()).filter((entry) => entry.kind === "token");
      assert.equal(
        refreshes.filter((entry) => entry.grant_type === "refresh_token").length,
        1,
        JSON.stringify(refreshes),
      );
      assert.ok(!refreshes.some((entry) => entry.reuse), "no refresh token was used twice");
    }, { asEnv: { FAKE_AUTH_TTL: "30" } });
  });

  test("--grant client_credentials: tokens for the client itself, with a secret or a private key, no browser", async () => {
    const { jwk, pem } = await clientKeyPair();
    await withProtectedServer(async (as, server, store) => {
      mkdirSync(dirname(store), { recursive: true });
      const keyFile = join(dirname(store), "key.pem");
      writeFileSync(keyFile, pem, { mode: 0o600 });
      const env = { MCP_TS_CREDENTIALS: store };
      const common = ["call", server.url, "whoami", "--grant", "client_credentials", "--client-id", "ci-bot"];
      const secret = await runCli([...common, "--client-secret", "s3cret"], { env });
      assert.equal(secret.code, 0, secret.stderr);
      assert.equal(JSON.parse(secret.stdout).sub, "ci-bot");
      rmSync(store);
      const keyed = await runCli([...common, "--client-key", keyFile], { env });
      assert.equal(keyed.code, 0, keyed.stderr);
      const grants = (await as.log()).filter((entry) => entry.kind === "token");
      assert.deepEqual(grants.map((entry) => [entry.grant_type, entry.clientAuth]), [
        ["client_credentials", "basic"],
        ["client_credentials", "private_key_jwt"],
      ]);
      assert.ok(!(await as.log()).some((entry) => entry.kind === "authorize"));
    }, {
      asEnv: {
        FAKE_AUTH_CLIENT_ID: "ci-bot",
        FAKE_AUTH_CLIENT_SECRET: "s3cret",
        FAKE_AUTH_CLIENT_JWK: JSON.stringify(jwk),
      },
    });
  });

  test("what the client refuses: metadata of another issuer, no PKCE, a wrong iss; exit 4 naming it", async () => {
    for (
      const [mode, why] of [
        ["wrong-issuer", /its issuer "https:\/\/attacker\.example\.com" is not/],
        ["no-pkce", /does not advertise PKCE S256/],
        ["iss-wrong", /came from "https:\/\/evil\.example\.com"/],
        ["iss-slash", /came from "http:\/\/127\.0\.0\.1:\d+\/"/],
        ["deny", /authorization was refused \(access_denied\)/],
      ] as const
    ) {
      await withProtectedServer(async (as, server, store) => {
        const run = await runCli(["login", server.url], { env: { MCP_TS_CREDENTIALS: store, BROWSER } });
        assert.equal(run.code, 4, `${mode}: ${run.stderr}`);
        assert.match(run.stderr, why, `${mode}: ${run.stderr}`);
        assert.ok(!(await as.log()).some((entry) => entry.kind === "token"), `${mode}: no token request`);
      }, { asEnv: { FAKE_AUTH_MODE: mode } });
    }
  });

  test("login: a callback with the wrong state gets 400 and the real one still logs in", async () => {
    await withProtectedServer(async (_as, server, store) => {
      const forged = join(tmpdir(), `mcp-forged-${process.pid}`);
      const login = await runCli(["login", server.url], {
        env: { MCP_TS_CREDENTIALS: store, BROWSER, BROWSER_FORGE: forged },
      });
      assert.equal(readFileSync(forged, "utf8"), "400");
      rmSync(forged);
      assert.equal(login.code, 0, login.stderr);
      assert.match(login.stderr, /^mcp: logged in to /m);
    });
  });

  test("a step-up in a later command asks for the granted scopes and the challenged ones", async () => {
    // The same server (URL) first needs mcp:read, then, restarted on the port it got, mcp:admin. (A port probed
    // free and bound later could be taken in between by a parallel suite's server.)
    let port = 0;
    const home = mkdtempSync(join(tmpdir(), "mcp-stepup-"));
    const as = await startListening([HERE + "testdata/fake_auth_server.ts"], /listening (\S+)/);
    const serveWith = (scope: string) =>
      startListening(
        [
          MCP,
          "serve",
          HERE + "testdata/auth",
          "--http",
          `127.0.0.1:${port}`,
          "--auth-issuer",
          as.url,
          "--auth-scopes",
          scope,
        ],
        /serving (\S+)/,
      );
    try {
      const env = { MCP_TS_CREDENTIALS: join(home, "credentials.json"), BROWSER };
      const reader = await serveWith("mcp:read");
      port = Number(new URL(reader.url).port);
      const login = await runCli(["login", reader.url], { env });
      reader.close();
      await reader.exited; // its port is free again
      assert.equal(login.code, 0, login.stderr);
      const admin = await serveWith("mcp:admin");
      try {
        const call = await runCli(["call", admin.url, "whoami", "--login"], { env });
        assert.equal(call.code, 0, call.stderr);
      } finally {
        admin.close();
      }
      const asked = (await as.log()).filter((entry) => entry.kind === "authorize").map((entry) => entry.scope);
      assert.equal(asked.length, 2, JSON.stringify(asked));
      assert.deepEqual(asked[0].split(" ").sort(), ["mcp:read", "offline_access"]);
      assert.deepEqual(asked[1].split(" ").sort(), ["mcp:admin", "mcp:read", "offline_access"], "the union");
    } finally {
      as.close();
      rmSync(home, { recursive: true, force: true });
    }
  });

  test("a credentials directory or file others can read is tightened, with one warning", async () => {
    if (process.platform === "win32") return;
    const home = mkdtempSync(join(tmpdir(), "mcp-perms-"));
    try {
      const dir = join(home, "creds");
      mkdirSync(dir, { mode: 0o755 });
      const file = join(dir, "credentials.json");
      writeFileSync(file, JSON.stringify({ tokens: {}, clients: {} }), { mode: 0o644 });
      const fake = await hostileHttp("redirect-same");
      try {
        const run = await runCli(["call", fake.url, "echo", "text=hi"], { env: { MCP_TS_CREDENTIALS: file } });
        assert.equal(run.code, 0, run.stderr);
        assert.equal(statSync(dir).mode & 0o777, 0o700);
        assert.equal(statSync(file).mode & 0o777, 0o600);
        assert.equal(run.stderr.match(/was readable by others/g)?.length, 2, run.stderr);
      } finally {
        fake.close();
      }
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  test("login says it waits, on which port, and ends with exit 4 after --login-timeout, not a request timeout", async () => {
    await withProtectedServer(async (_as, server, store) => {
      // --timeout long enough for each request of discovery and registration on a busy machine, and the wait longer
      // still: a request's clock applied to the wait would end it a second early, with exit 3.
      const run = await runCli(
        ["login", server.url, "--no-browser", "--login-timeout", "4000", "--timeout", "3000"],
        { env: { MCP_TS_CREDENTIALS: store } },
      );
      assert.equal(run.code, 4, run.stderr);
      assert.match(
        run.stderr,
        /^mcp: waiting for the authorization at http:\/\/127\.0\.0\.1:\d+\/callback \(up to 4000 ms; Ctrl-C/m,
      );
      assert.match(run.stderr, /no authorization arrived within 4000 ms \(--login-timeout\)/);
    });
  });
});

describe("13. OAuth: logins without a person, and DPoP", () => {
  /** The fake authorization server with its own MCP server at /mcp (modes: `mcp` and these), a store, and a folder. */
  const withFakeMcp = async (
    modes: string,
    body: (as: Started, mcp: string, dir: string, env: Record<string, string>) => Promise<void>,
    asEnv: Record<string, string> = {},
  ) => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-headless-"));
    const as = await startListening([HERE + "testdata/fake_auth_server.ts"], /listening (\S+)/, {
      FAKE_AUTH_MODE: ["mcp", modes].filter(Boolean).join(","),
      ...asEnv,
    });
    try {
      await body(as, `${as.url}/mcp`, dir, { MCP_TS_CREDENTIALS: join(dir, "store", "credentials.json") });
    } finally {
      as.close();
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
  const mintText = async (url: string, claims: Message = {}) =>
    await (await fetch(url, { method: "POST", body: JSON.stringify(claims) })).text();

  test("a bad --assertion is refused (exit 2) before a kept token is used: unreadable, not a JWT; its text never printed", async () => {
    await withFakeMcp("", async (as, mcp, dir, env) => {
      const file = join(dir, "token.jwt");
      writeFileSync(file, await mintText(`${as.url}/_assertion`, { sub: "workload-1" }));
      const grant = ["--grant", "jwt-bearer", "--client-id", "ci"];
      const first = await runCli(["call", mcp, "whoami", ...grant, "--assertion", `@${file}`], { env });
      assert.equal(first.stdout, "workload-1\n", first.stderr); // a token is kept now
      const garbled = join(dir, "garbled.jwt");
      writeFileSync(garbled, "s3cret-but-no-jwt\n");
      const [missing, notJwt] = await Promise.all([
        runCli(["call", mcp, "whoami", ...grant, "--assertion", `@${join(dir, "nope.jwt")}`], { env }),
        runCli(["call", mcp, "whoami", ...grant, "--assertion", `@${garbled}`], { env }),
      ]);
      assert.deepEqual([missing.code, missing.stdout], [2, ""], missing.stderr);
      assert.match(missing.stderr, /^mcp: Cannot read --assertion @\S+nope\.jwt: /);
      assert.deepEqual([notJwt.code, notJwt.stdout], [2, ""], notJwt.stderr);
      assert.match(notJwt.stderr, /^mcp: Cannot use --assertion @\S+garbled\.jwt: it is not a JWT/);
      assert.doesNotMatch(notJwt.stderr, /s3cret/);
    });
  });

  test("--grant jwt-bearer --assertion @FILE: a token without a browser, the file read at each token request; a refused assertion is exit 4 with the server's reason, asked once", async () => {
    await withFakeMcp("", async (as, mcp, dir, env) => {
      const file = join(dir, "token.jwt");
      writeFileSync(file, await mintText(`${as.url}/_assertion`, { sub: "workload-1" }));
      const args = ["--grant", "jwt-bearer", "--assertion", `@${file}`, "--client-id", "ci"];
      const first = await runCli(["call", mcp, "whoami", ...args], { env });
      assert.equal(first.code, 0, first.stderr);
      assert.equal(first.stdout, "workload-1\n");
      // The file rotated (a projected service-account token): a new token request reads the new one.
      writeFileSync(file, await mintText(`${as.url}/_assertion`, { sub: "workload-2" }));
      assert.equal((await runCli(["login", mcp, ...args], { env })).code, 0);
      assert.equal((await runCli(["call", mcp, "whoami"], { env })).stdout, "workload-2\n", "the stored token used");
      const grants = (await as.log()).filter((entry) => entry.kind === "token");
      assert.deepEqual(grants.map((entry) => entry.body.grant_type), [JWT_BEARER, JWT_BEARER]);
      // A token about to expire (inside the refresh margin, not yet expired) is got again before it is sent, as a
      // refresh would be: it could expire on its way.
      const store = JSON.parse(readFileSync(env.MCP_TS_CREDENTIALS, "utf8"));
      const now = Math.floor(Date.now() / 1000);
      for (const token of Object.values(store.tokens) as Message[]) {
        Object.assign(token, { obtained_at: now - 3600, expires_at: now + 5 });
      }
      writeFileSync(env.MCP_TS_CREDENTIALS, JSON.stringify(store), { mode: 0o600 });
      writeFileSync(file, await mintText(`${as.url}/_assertion`, { sub: "workload-3" }));
      assert.equal((await runCli(["call", mcp, "whoami", ...args], { env })).stdout, "workload-3\n", "got again");
      assert.equal((await as.log()).filter((entry) => entry.kind === "token").length, 3);

      await fetch(`${as.url}/_reset`, { method: "POST" });
      writeFileSync(file, await mintText(`${as.url}/_assertion`, { exp_in: -60 }));
      const refused = await runCli(["call", mcp, "whoami", ...args], {
        env: { MCP_TS_CREDENTIALS: join(dir, "other.json") },
      });
      assert.equal(refused.code, 4, refused.stderr);
      assert.match(refused.stderr, /refused the token request: invalid_grant \("?assertion expired/);
      assert.equal((await as.log()).filter((entry) => entry.kind === "token").length, 1, "never asked again");
      const secret = readFileSync(file, "utf8");
      assert.ok(!refused.stderr.includes(secret) && !first.stderr.includes(secret), "the assertion is never printed");
    });
  });

  test("--grant token-exchange: the ID token for an ID-JAG at the identity provider, then a token as the client (client_secret_basic); a refusal is exit 4 with the reason", async () => {
    await withFakeMcp("", async (as, mcp, dir, env) => {
      const idToken = join(dir, "id.jwt");
      writeFileSync(idToken, await mintText(`${as.url}/_id_token`, { sub: "alice@example.com" }));
      const args = [
        "--grant",
        "token-exchange",
        "--id-token",
        `@${idToken}`,
        "--idp-token-endpoint",
        `${as.url}/idp/token`,
        "--idp-client-id",
        "idp-client",
        "--client-id",
        "xaa-client",
      ];
      const run = await runCli(["call", mcp, "whoami", ...args], { env: { ...env, MCP_TS_CLIENT_SECRET: "s3cret" } });
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, "alice@example.com\n");
      const log = await as.log();
      const exchange = log.find((entry) => entry.kind === "idp-token")!;
      assert.equal(exchange.audience, as.url, "audience: the authorization server's issuer");
      assert.equal(exchange.resource, mcp, "resource: the MCP server");
      assert.equal(exchange.requested_token_type, "urn:ietf:params:oauth:token-type:id-jag");
      const grant = log.find((entry) => entry.kind === "token")!;
      assert.deepEqual([grant.assertionType, grant.clientAuth], ["id-jag", "basic"]);

      writeFileSync(idToken, await mintText(`${as.url}/_id_token`, { exp_in: -60 }));
      const refused = await runCli(["call", mcp, "whoami", ...args], {
        env: { MCP_TS_CREDENTIALS: join(dir, "other.json"), MCP_TS_CLIENT_SECRET: "s3cret" },
      });
      assert.equal(refused.code, 4, refused.stderr);
      assert.match(refused.stderr, /the identity provider refused the token exchange: invalid_grant/);
      const usage = await runCli(["call", mcp, "whoami", "--grant", "token-exchange", "--id-token", "x"]);
      assert.equal(usage.code, 2);
      assert.match(usage.stderr, /--grant token-exchange needs --idp-token-endpoint, --idp-client-id, --client-id/);
    }, { FAKE_AUTH_CLIENT_ID: "xaa-client", FAKE_AUTH_CLIENT_SECRET: "s3cret" });
  });

  test("DPoP: a fresh proof on the token request and on every MCP request, the nonce dance with both servers, the key kept with the token (0600) and refreshed with it", async () => {
    await withFakeMcp("dpop-nonce", async (as, mcp, dir, env) => {
      const file = join(dir, "token.jwt");
      writeFileSync(file, await mintText(`${as.url}/_assertion`));
      const run = await runCli(
        ["call", mcp, "whoami", "--grant", "jwt-bearer", "--assertion", `@${file}`, "--dpop", "--protocol", "legacy"],
        { env },
      );
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, "workload\n");
      const log = await as.log();
      const tokens = log.filter((entry) => entry.kind === "token");
      assert.deepEqual(tokens.map((entry) => [entry.status, entry.error ?? null, entry.proof?.nonce]), [
        [400, "use_dpop_nonce", false],
        [200, null, true],
      ], "the authorization server's nonce, asked for once");
      const mcpCalls = log.filter((entry) => entry.kind === "mcp" && entry.scheme !== null);
      assert.ok(mcpCalls.length >= 3, `${mcpCalls.length} MCP requests`);
      assert.equal(mcpCalls[0].status, 401, "the MCP server's nonce challenge");
      for (const entry of mcpCalls) {
        assert.equal(entry.scheme, "DPoP");
        assert.equal(entry.proof.ath, true);
        assert.equal(entry.proof.htu, mcp);
      }
      const jtis = [...tokens, ...mcpCalls].map((entry) => entry.proof.jti);
      assert.equal(new Set(jtis).size, jtis.length, "every proof fresh");
      const store = JSON.parse(readFileSync(env.MCP_TS_CREDENTIALS, "utf8"));
      const [token] = Object.values(store.tokens) as Message[];
      assert.equal(token.token_type, "DPoP");
      assert.deepEqual([token.dpop_jwk.kty, token.dpop_jwk.crv, typeof token.dpop_jwk.d], ["EC", "P-256", "string"]);
      assert.equal(statSync(env.MCP_TS_CREDENTIALS).mode & 0o777, 0o600);
      assert.ok(!run.stderr.includes(token.dpop_jwk.d) && !run.stderr.includes(token.access_token));
    });
  });

  test("DPoP with a client key: the nonce retry carries a new client assertion (its jti is used once)", async () => {
    const { jwk, pem } = await clientKeyPair();
    await withFakeMcp("dpop-nonce,spend-first", async (as, mcp, dir, env) => {
      const keyFile = join(dir, "key.pem");
      writeFileSync(keyFile, pem, { mode: 0o600 });
      const run = await runCli([
        "call",
        mcp,
        "whoami",
        "--grant",
        "client_credentials",
        "--client-id",
        "ci-bot",
        "--client-key",
        keyFile,
        "--dpop",
        "--protocol",
        "legacy",
      ], { env });
      assert.equal(run.code, 0, run.stderr);
      const tokens = (await as.log()).filter((entry) => entry.kind === "token");
      assert.deepEqual(tokens.map((entry) => [entry.status, entry.error ?? null]), [[400, "use_dpop_nonce"], [
        200,
        null,
      ]]);
    }, { FAKE_AUTH_CLIENT_ID: "ci-bot", FAKE_AUTH_CLIENT_JWK: JSON.stringify(jwk) });
  });

  test("DPoP through a browser login: the refresh carries a proof of the same key (the server binds its refresh token to it); --dpop where none is offered is exit 4, --no-dpop asks for a Bearer token", async () => {
    await withFakeMcp("dpop", async (as, mcp, dir, env) => {
      const login = await runCli(["login", mcp], { env: { ...env, BROWSER } });
      assert.equal(login.code, 0, login.stderr);
      const store = JSON.parse(readFileSync(env.MCP_TS_CREDENTIALS, "utf8"));
      const key = Object.keys(store.tokens)[0];
      assert.equal(store.tokens[key].token_type, "DPoP");
      // Expired in the store (no waiting): the next call refreshes, with a proof the server checks is the same key.
      store.tokens[key].expires_at = Math.floor(Date.now() / 1000) - 10;
      writeFileSync(env.MCP_TS_CREDENTIALS, JSON.stringify(store), { mode: 0o600 });
      const after = await runCli(["call", mcp, "whoami"], { env });
      assert.equal(after.code, 0, after.stderr);
      const refreshes = (await as.log()).filter((entry) =>
        entry.kind === "token" && entry.body.grant_type === "refresh_token"
      );
      assert.deepEqual(refreshes.map((entry) => entry.status), [200]);
      const again = JSON.parse(readFileSync(env.MCP_TS_CREDENTIALS, "utf8")).tokens[key];
      assert.deepEqual(again.dpop_jwk, store.tokens[key].dpop_jwk, "the same key, kept");

      const bearer = await runCli(["login", mcp, "--no-dpop"], {
        env: { MCP_TS_CREDENTIALS: join(dir, "b.json"), BROWSER },
      });
      assert.equal(bearer.code, 0, bearer.stderr);
      const plain = Object.values(JSON.parse(readFileSync(join(dir, "b.json"), "utf8")).tokens)[0] as Message;
      assert.deepEqual([plain.token_type, plain.dpop_jwk], ["Bearer", undefined]);
    });
    await withFakeMcp("", async (_as, mcp, _dir, env) => {
      const run = await runCli(["login", mcp, "--dpop"], { env: { ...env, BROWSER } });
      assert.equal(run.code, 4, run.stderr);
      assert.match(run.stderr, /does not list ES256 in dpop_signing_alg_values_supported/);
    });
  });

  test("a config entry's oauth takes the headless grant (grant, assertion): `call NAME`, and a `connect` session, log in without a person", async () => {
    await withFakeMcp("dpop", async (as, mcp, dir, env) => {
      const file = join(dir, "token.jwt");
      writeFileSync(file, await mintText(`${as.url}/_assertion`, { sub: "from-config" }));
      const config = join(dir, "mcp.json");
      writeFileSync(
        config,
        JSON.stringify({
          mcpServers: {
            remote: { url: mcp, oauth: { grant: "jwt-bearer", assertion: `@${file}` } },
            halves: { url: mcp, oauth: { grant: "jwt-bearer" } },
          },
        }),
      );
      const run = await runCli(["call", "remote", "whoami", "--config", config], { env });
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, "from-config\n");
      // The grant from the config, its assertion from the command line: one set of options, checked together.
      const other = join(dir, "other.jwt");
      writeFileSync(other, await mintText(`${as.url}/_assertion`, { sub: "half-and-half" }));
      const halves = await runCli(["call", "halves", "whoami", "--config", config, "--assertion", `@${other}`], {
        env: { ...env, MCP_TS_CREDENTIALS: join(dir, "halves.json") },
      });
      assert.deepEqual([halves.code, halves.stdout], [0, "half-and-half\n"], halves.stderr);
      writeFileSync(file, await mintText(`${as.url}/_assertion`, { sub: "from-config" })); // a jti is good once
      const stateDir = join(dir, "state");
      const daemonEnv = { ...env, MCP_TS_STATE_DIR: stateDir, MCP_TS_CREDENTIALS: join(dir, "daemon.json") };
      try {
        const connected = await runCli(
          ["connect", "wl", mcp, "--grant", "jwt-bearer", "--assertion", `@${file}`],
          { env: daemonEnv },
        );
        assert.equal(connected.code, 0, connected.stderr);
        const called = await runCli(["call", "@wl", "whoami"], { env: daemonEnv });
        assert.equal(called.stdout, "from-config\n", called.stderr);
      } finally {
        await runCli(["daemon", "stop"], { env: daemonEnv });
      }
    });
  });
});

describe("14. MCP client", () => {
  test("the probe: a 2026-07-28-only server slow to start answers it after initialize went out, and its answer wins", async () => {
    const late = [...RUNTIME, HERE + "testdata/fake_modern_late.ts"].map(quote).join(" ");
    const [called, info] = await Promise.all([
      runCli(["call", late, "echo", "text=hi"]),
      runCli(["info", late]),
    ]);
    assert.equal(called.code, 0, called.stderr);
    assert.equal(called.stdout, "hi\n");
    assert.equal(info.code, 0, info.stderr);
    assert.match(info.stdout, /^protocol: +2026-07-28, stateless/m);
  });

  test("splitCommand() follows POSIX quoting without expanding anything", () => {
    assert.deepEqual(splitCommand(`deno run -A  mcp.ts serve ./tools`), [
      "deno",
      "run",
      "-A",
      "mcp.ts",
      "serve",
      "./tools",
    ]);
    assert.deepEqual(splitCommand(`a 'b c' "d \\"e\\" \\$f \\x" g\\ h ''`), ["a", "b c", 'd "e" $f \\x', "g h", ""]);
    assert.deepEqual(splitCommand(`echo '$HOME' "*" ~`), ["echo", "$HOME", "*", "~"]);
    assert.throws(() => splitCommand(`a 'b`), /unterminated '/);
    assert.throws(() => splitCommand(`a "b`), /unterminated "/);
  });

  test("resolveServer() finds names in --config, then ./.mcp.json, and lists known names otherwise", async () => {
    await withTempDir("mcp-config-", async (dir) => {
      const config = { mcpServers: { fake: { command: "node", args: ["x.js"], env: { A: "1" }, cwd: "sub" } } };
      writeFileSync(join(dir, ".mcp.json"), JSON.stringify(config));
      writeFileSync(join(dir, "other.json"), JSON.stringify({ mcpServers: { web: { url: "https://x" } } }));
      const env = { PATH: "", XDG_CONFIG_HOME: dir };
      assert.deepEqual(await resolveServer("fake", { cwd: dir, env }), {
        command: "node",
        args: ["x.js"],
        env: { A: "1" },
        cwd: join(dir, "sub"),
        name: "fake",
      });
      await assert.rejects(
        resolveServer("nope", { cwd: dir, env }),
        /"nope" is not a command on PATH nor a server in .*; servers it knows: fake/,
      );
      assert.deepEqual(await resolveServer("web", { cwd: dir, env, config: "other.json" }), {
        type: "http",
        url: "https://x/",
        name: "web",
      });
      assert.deepEqual(await resolveServer("node server.js", { cwd: dir, env }), {
        command: "node",
        args: ["server.js"],
      });
    });
  });

  test("claudeDesktopConfigPath() knows each OS", () => {
    assert.equal(
      claudeDesktopConfigPath({}, "darwin", "/Users/me"),
      "/Users/me/Library/Application Support/Claude/claude_desktop_config.json",
    );
    assert.equal(
      claudeDesktopConfigPath({}, "linux", "/home/me"),
      "/home/me/.config/Claude/claude_desktop_config.json",
    );
    assert.match(
      claudeDesktopConfigPath({ APPDATA: "C:\\AppData" }, "win32", "C:\\me"),
      /Claude.claude_desktop_config\.json$/,
    );
  });

  test("argsFromPairs() types values by the schema", () => {
    const schema = TOOL_SCHEMA_FOR_PAIRS;
    assert.deepEqual(
      argsFromPairs(["zip=007", "n=5", "on=true", "list=[1,2]", 'obj={"k":1}', "free=12", "word=hi", "eq=a=b"], schema),
      { zip: "007", n: 5, on: true, list: [1, 2], obj: { k: 1 }, free: 12, word: "hi", eq: "a=b" },
    );
    assert.throws(() => argsFromPairs(["n=1.5"], schema), /n must be an integer/);
    assert.throws(() => argsFromPairs(["on=yes"], schema), /true or false/);
    assert.throws(() => argsFromPairs(["list={}"], schema), /JSON array/);
    assert.throws(() => argsFromPairs(["=x"], schema), /key=value/);
  });

  test("argsFromPairs() makes an array of a key given again when the schema says array, and refuses it otherwise", () => {
    const schema = {
      type: "object",
      properties: { tags: { type: "array", items: { type: "integer" } }, text: { type: "string" } },
    };
    assert.deepEqual(argsFromPairs(["tags=1", "text=a", "tags=2"], schema), { tags: [1, 2], text: "a" });
    assert.throws(() => argsFromPairs(["text=a", "text=b"], schema), /text is given 2 times but is not an array/);
    assert.throws(() => argsFromPairs(["free=a", "free=b"], schema), /free is given 2 times/);
  });

  test("closestNames() suggests near misses first", () => {
    assert.deepEqual(closestNames("ad", ["add", "echo", "read_file"]), ["add", "read_file"]);
    assert.deepEqual(closestNames("reed_file", ["read_file", "write_file", "zzz"]), ["read_file"]);
    assert.deepEqual(closestNames("file", ["read_file", "write_file", "add"]), ["read_file", "write_file"]);
    assert.deepEqual(closestNames("qqqqqq", ["add"]), []);
  });

  test("connect() gives a library client: listTools over pages, callTool with progress, ping, close", async () => {
    const client = await connect(FAKE, { env: { FAKE_MODE: "pages" } });
    try {
      assert.equal(client.protocolVersion, LATEST_PROTOCOL_VERSION);
      const ms = await client.ping();
      assert.ok(ms >= 0 && Math.abs(ms * 1000 - Math.round(ms * 1000)) < 1e-6, `ping() in ms, to the µs: ${ms}`);
      assert.equal((await client.listTools()).length, 11);
      const progress: unknown[] = [];
      const result = await client.callTool("slow", { ms: 10 }, {
        onProgress: (params) => progress.push(params.progress),
      });
      assert.deepEqual(result.content, [{ type: "text", text: "slow done" }]);
      assert.deepEqual(progress, [1, 2, 3]);
      assert.ok(await client.ping() >= 0);
      await assert.rejects(client.callTool("nope"), (error: Error) => error instanceof NotFoundError);
    } finally {
      await client.close();
    }
    await assert.rejects(client.ping(), (error: Error) => error instanceof ServerError);
  });

  test("connect() reports each failure as its own error type", async () => {
    await assert.rejects(connect(FAKE, { env: { FAKE_MODE: "crash-before" } }), (error: ServerError) => {
      assert.ok(error instanceof ServerError);
      assert.match(error.message, /exited with code 1 before answering server\/discover/);
      assert.match(error.stderr, /cannot open the database/);
      return true;
    });
    await assert.rejects(
      connect(FAKE, { env: { FAKE_MODE: "silent" }, timeout: 300 }),
      (error: Error) => error instanceof TimeoutError,
    );
    const client = await connect(FAKE, { env: { FAKE_MODE: "hang" } });
    try {
      await assert.rejects(
        client.callTool("echo", {}, { timeout: 200 }),
        (error: Error) => error instanceof TimeoutError,
      );
      const controller = new AbortController();
      setTimeout(() => controller.abort(new Error("user stop")), 100);
      await assert.rejects(client.callTool("echo", {}, { signal: controller.signal }), /user stop/);
    } finally {
      await client.close();
    }
    await assert.rejects(connect("/no/such/command"), /Cannot start "\/no\/such\/command": command not found/);
  });
});

describe("14. MCP client: the 2026-07-28 header rules", () => {
  test("encodeHeaderValue() keeps plain ASCII and sends the rest as =?base64?…?=", () => {
    assert.equal(encodeHeaderValue("us-west1"), "us-west1");
    assert.equal(encodeHeaderValue("a b"), "a b");
    assert.equal(encodeHeaderValue(""), "");
    for (const value of [" lead", "trail ", "tab\there", "crlf\r\n", "né", "=?base64?abc?="]) {
      assert.equal(encodeHeaderValue(value), `=?base64?${Buffer.from(value).toString("base64")}?=`, value);
    }
  });

  test("invalidHeaderAnnotation() names what makes a tool's x-mcp-header invalid", () => {
    const tool = (properties: Message) => ({ type: "object", properties });
    assert.equal(invalidHeaderAnnotation(tool({ a: { type: "string", "x-mcp-header": "Region" } })), undefined);
    assert.equal(
      invalidHeaderAnnotation(
        tool({ o: { type: "object", properties: { b: { type: "boolean", "x-mcp-header": "B" } } } }),
      ),
      undefined,
    );
    for (
      const [properties, why] of [
        [{ a: { type: "string", "x-mcp-header": "" } }, /not a valid header name/],
        [{ a: { type: "number", "x-mcp-header": "N" } }, /of type "number"/],
        [{ a: { type: "string", "x-mcp-header": "X" }, b: { type: "string", "x-mcp-header": "x" } }, /used twice/],
        [{ a: { type: "string", "x-mcp-header": "a:b" } }, /not a valid header name/],
        [{ a: { type: "array", items: { type: "string", "x-mcp-header": "I" } } }, /not reached through properties/],
      ] as const
    ) {
      assert.match(invalidHeaderAnnotation(tool(properties)) ?? "", why);
    }
  });
});

describe("14. MCP client over HTTP and in both eras", () => {
  test("the probe: a legacy server's error costs one round trip; silence, one wait of 1 s; dying, exit 3 or a retry", async () => {
    const starts = join(mkdtempSync(join(tmpdir(), "mcp-starts-")), "starts");
    const HOSTILE = [...RUNTIME, HERE + "testdata/hostile_server.ts"].map(quote).join(" ");
    const dying = ["-e", "HOSTILE_MODE=die-on-probe-count", "-e", `HOSTILE_STARTS=${starts}`];
    // The answered probe's wait for silence never ends: the run can end only on the probe's answer.
    const answered = (wait: SeenWait) =>
      wait.why === "probe silence" ? new Promise(() => {}) : new Promise((resolve) => setImmediate(resolve));
    const [legacy, silent, dies, modern] = await Promise.all([
      runWatched(["info", FAKE, "--trace"], { settle: answered }),
      runWatched(["info", FAKE, "--trace", "-e", "FAKE_MODE=silent-probe"]),
      runCli(["info", HOSTILE, ...dying]),
      runCli(["info", SERVE, "--trace"]),
    ]);
    assert.equal(legacy.code, 0, legacy.stderr);
    const sent = legacy.stderr.split("\n").filter((line) => line.startsWith("> ")).map((line) =>
      JSON.parse(line.slice(2))
    );
    assert.deepEqual(sent.map((message) => message.method), [
      "server/discover",
      "initialize",
      "notifications/initialized",
    ]);
    assert.match(legacy.stdout, /^protocol: +2025-11-25, legacy/);
    assert.equal(silent.code, 0, silent.stderr);
    assert.match(silent.stdout, /legacy/);
    // Silence: one wait of 1 s, begun once the probe went out; initialize goes out when it ends, and the run needs
    // no other wait to end (the probe is never answered).
    const silence = silent.waits.filter((wait) => wait.why === "probe silence");
    assert.deepEqual(silence.map((wait) => wait.ms), [1_000]);
    assert.ok(silent.offset(/^> .*"server\/discover"/m) < silence[0].after, "the probe went out before the wait");
    assert.ok(silent.offset(/^> .*"initialize"/m) >= silence[0].after, "initialize went out after it");
    // One start per command: a server that dies of the probe is not started again behind the user's back.
    assert.equal(dies.code, 3, dies.stderr);
    assert.match(dies.stderr, /server\/discover.*--protocol legacy/);
    assert.match(dies.stderr, /dying on server\/discover/, "its stderr is shown");
    assert.equal(readFileSync(starts, "utf8"), "start\n", "started once");
    const retried = await runCli(["info", HOSTILE, ...dying, "--retries", "1"]);
    assert.equal(retried.code, 0, retried.stderr);
    assert.match(retried.stdout, /legacy/);
    assert.equal(readFileSync(starts, "utf8"), "start\n".repeat(3), "--retries 1: one restart, straight to initialize");
    assert.equal(modern.code, 0, modern.stderr);
    assert.match(modern.stdout, /^protocol: +2026-07-28, stateless/);
    assert.doesNotMatch(modern.stderr, /"initialize"/);
    const [pinned, legacyOnly] = await Promise.all([
      runCli(["info", FAKE, "--protocol", "2026-07-28"]),
      runCli(["info", SERVE, "--protocol", "legacy", "--trace"]),
    ]);
    assert.equal(pinned.code, 3, "a pinned modern version does not fall back");
    assert.match(legacyOnly.stdout, /legacy/);
    assert.doesNotMatch(legacyOnly.stderr, /server\/discover/);
  });

  test("a legacy HTTP session: the id on every later request, the version header, DELETE at the end", async () => {
    await withFakeHttp("sse", async (fake) => {
      const [call, list] = await Promise.all([
        runCli(["call", fake.url, "slow", "steps=2", "ms=20", "-v"]),
        runCli(["list", fake.url, "--json"]),
      ]);
      assert.equal(call.code, 0, call.stderr);
      assert.equal(call.stdout, "done 2\n");
      assert.match(call.stderr, /progress 2\/2/);
      assert.equal(list.code, 0, list.stderr);
      assert.ok(JSON.parse(list.stdout).tools.some((tool: Message) => tool.name === "whoami"));
      const log = await fake.log();
      const posts = log.filter((entry) => entry.method === "POST");
      for (const entry of posts) {
        assert.match(entry.headers.accept, /application\/json/);
        assert.match(entry.headers.accept, /text\/event-stream/);
      }
      const afterInit = posts.filter((entry) => !["initialize", "server/discover"].includes(entry.body.method));
      assert.ok(afterInit.length >= 4);
      for (const entry of afterInit) {
        assert.ok(entry.headers["mcp-session-id"], `${entry.body.method} carries the session`);
        assert.equal(entry.headers["mcp-protocol-version"], "2025-11-25");
      }
      assert.equal(log.filter((entry) => entry.method === "DELETE").length, 2, "each command ends its session");
    });
  });

  test("an expired session (404) gets one new initialize and the request again", async () => {
    await withFakeHttp("expire", async (fake) => {
      const lines = ["1", "2", "3", "4", "5"].map((b) =>
        JSON.stringify({ tool: "add", arguments: { a: 1, b: Number(b) } })
      );
      const run = await runCli(["batch", fake.url], { stdin: lines.join("\n") + "\n" });
      assert.equal(run.code, 0, run.stderr);
      assert.deepEqual(run.stdout.trim().split("\n").map((line) => JSON.parse(line).content[0].text), [
        "2",
        "3",
        "4",
        "5",
        "6",
      ]);
      const inits = (await fake.log()).filter((entry) => entry.body?.method === "initialize");
      // The fake says so on its stderr, which may come a moment after its log.
      const expiredCount = () => fake.stderr().match(/session \S+ expired/g)?.length ?? 0;
      await fake.untilStderr(() => expiredCount() >= inits.length - 1, "a line per expired session");
      const expired = expiredCount();
      assert.ok(expired >= 1, fake.stderr());
      assert.equal(inits.length, 1 + expired, "one new initialize for each session that expired");
      assert.equal(inits[1].headers["mcp-session-id"], undefined, "the new initialize carries no old id");
    }, { FAKE_EXPIRE_AFTER: "2" });
  });

  test("a broken SSE answer is resumed by GET with Last-Event-ID after the server's retry", async () => {
    await withFakeHttp("sse-retry", async (fake) => {
      const run = await runCli(["call", fake.url, "echo", "text=again"]);
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, "again\n");
      const log = await fake.log();
      const cut = log.find((entry) => entry.method === "SERVER-CLOSED")!;
      const resumed = log.find((entry) => entry.method === "GET" && entry.headers["last-event-id"])!;
      assert.equal(resumed.headers["last-event-id"], "ev-1");
      const gap = resumed.time - cut.time;
      assert.ok(gap >= 450 && gap < 1_500, `reconnected ${gap} ms after the cut (retry: 500)`);
    });
  });

  test("2026-07-28 over HTTP: envelope, mirror headers, x-mcp-header arguments, invalid tools left out", async () => {
    await withFakeHttp("modern", async (fake) => {
      const [list, call, dropped, retried] = await Promise.all([
        runCli(["list", fake.url]),
        runCli(["call", fake.url, "region", "region= us-wést", "priority=7"]),
        runCli(["call", fake.url, "bad_space", "{}"]),
        runCli(["read", fake.url, "fake://hello"]),
      ]);
      assert.equal(list.code, 0, list.stderr);
      assert.doesNotMatch(list.stdout, /bad_/);
      assert.match(list.stderr, /warning: left out tool "bad_number"/);
      assert.equal(call.code, 0, call.stderr);
      assert.deepEqual(JSON.parse(call.stdout), { region: " us-wést", priority: 7 });
      assert.equal(dropped.code, 2);
      assert.match(dropped.stderr, /no tool named "bad_space": mcp.ts leaves it out/);
      assert.equal(retried.stdout, "hello\n");
      const posts = (await fake.log()).filter((entry) => entry.method === "POST");
      for (const { headers, body } of posts) {
        const meta = body.params._meta;
        assert.equal(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
        // A tools/call declares the tasks extension (it follows a task); nothing else declares anything.
        const declared = body.method === "tools/call" ? { extensions: { "io.modelcontextprotocol/tasks": {} } } : {};
        assert.deepEqual(meta["io.modelcontextprotocol/clientCapabilities"], declared, body.method);
        assert.equal(headers["mcp-protocol-version"], "2026-07-28");
        assert.equal(headers["mcp-method"], body.method);
      }
      const region = posts.find((entry) => entry.body.params.name === "region")!;
      assert.equal(region.headers["mcp-name"], "region");
      assert.equal(region.headers["mcp-param-priority"], "7");
      assert.equal(region.headers["mcp-param-region"], `=?base64?${Buffer.from(" us-wést").toString("base64")}?=`);
      assert.equal(posts.find((entry) => entry.body.method === "resources/read")!.headers["mcp-name"], "fake://hello");
      assert.ok(!posts.some((entry) => entry.body.params.name === "bad_space"), "a left-out tool is never called");
    });
  });

  test("input_required: answered and retried with a new id and the requestState as given, or exit 3", async () => {
    await withFakeHttp("modern", async (fake) => {
      const [confirmed, roots, sampled, refused, noType, badType] = await Promise.all([
        runCli(["call", fake.url, "confirm", "--elicit", "accept"]),
        runCli(["call", fake.url, "roots_needed", "--root", HERE + "testdata"]),
        runCli(["call", fake.url, "sample", "--sample-command", "echo Paris"]),
        runCli(["call", fake.url, "confirm"]),
        runCli(["call", fake.url, "no_result_type"]),
        runCli(["call", fake.url, "weird_type"]),
      ]);
      assert.equal(confirmed.stdout, 'confirmed: {"action":"accept","content":{"ok":true}}\n', confirmed.stderr);
      assert.match(roots.stdout, /file:\/\/.*testdata/);
      assert.equal(sampled.stdout, "Paris\n", sampled.stderr);
      assert.equal(refused.code, 3);
      assert.match(refused.stderr, /elicitation.*give --elicit accept\|decline\|cancel/);
      assert.equal(noType.stdout, "no type\n", "an absent resultType is complete");
      assert.equal(badType.code, 3);
      assert.match(badType.stderr, /invalid tools\/call result: resultType "mystery"/);
      const calls = (await fake.log()).filter((entry) => entry.body?.params?.name === "confirm");
      const first = calls.find((entry) => !entry.body.params.requestState)!;
      const retry = calls.find((entry) => entry.body.params.requestState)!;
      assert.notEqual(retry.body.id, first.body.id);
      assert.deepEqual(retry.body.params.inputResponses.confirm, { action: "accept", content: { ok: true } });
      const rootsRetry = (await fake.log()).find((entry) =>
        entry.body?.params?.name === "roots_needed" && entry.body.params.inputResponses
      )!;
      assert.equal("requestState" in rootsRetry.body.params, false, "no requestState when none was given");
    });
  });

  test("a 400 -32020 re-lists the tools and retries once; a -32022 naming our version retries once", async () => {
    // What the client POSTed, as method names in order.
    const posted = async (fake: FakeHttp) =>
      (await fake.log()).filter((entry) => entry.method === "POST").map((entry) => entry.body.method);
    for (const mode of ["header-mismatch-once", "version-retry"]) {
      await withFakeHttp(mode, async (fake) => {
        const run = await runCli(["call", fake.url, "add", '{"a":2,"b":2}']);
        assert.equal(run.code, 0, `${mode}: ${run.stderr}`);
        assert.equal(run.stdout, "4\n");
        const methods = await posted(fake);
        const calls = methods.filter((method) => method === "tools/call").length;
        if (mode === "header-mismatch-once") {
          assert.equal(calls, 2, `the call, and once again: ${methods}`);
          const [first, second] = [methods.indexOf("tools/call"), methods.lastIndexOf("tools/call")];
          assert.ok(methods.slice(first, second).includes("tools/list"), `the tools re-listed between: ${methods}`);
        } else {
          assert.equal(calls, 1, `${methods}`);
          assert.equal(methods[0], methods[1], `the refused first request sent again, once: ${methods}`);
          assert.notEqual(methods[1], methods[2], `${methods}`);
        }
      });
    }
    await withFakeHttp("header-mismatch-always", async (fake) => {
      const run = await runCli(["call", fake.url, "add", '{"a":2,"b":2}']);
      assert.equal(run.code, 3, run.stderr);
      assert.match(run.stderr, /-32020|[Hh]eader mismatch/);
      const methods = await posted(fake);
      assert.equal(methods.filter((method) => method === "tools/call").length, 2, `once, not more: ${methods}`);
    });
  });

  test("old servers: the 2024-11-05 HTTP+SSE transport after a refused POST; a config's type sse", async () => {
    await withFakeHttp("old-sse", async (fake) => {
      await withTempDir("mcp-sse-", async (dir) => {
        writeFileSync(join(dir, "c.json"), JSON.stringify({ mcpServers: { old: { type: "sse", url: fake.url } } }));
        const [fallback, typed] = await Promise.all([
          runCli(["call", fake.url, "add", "a=1", "b=5"]),
          runCli(["info", "old", "--config", join(dir, "c.json")]),
        ]);
        assert.equal(fallback.code, 0, fallback.stderr);
        assert.equal(fallback.stdout, "6\n");
        assert.match(typed.stdout, /over HTTP\+SSE/);
      });
    });
  });

  test("server requests on a legacy session: roots, elicitation, sampling as given; declared only then", async () => {
    await withFakeHttp("server-requests", async (fake) => {
      const [given, none] = await Promise.all([
        runCli([
          "call",
          fake.url,
          "ask",
          "--root",
          "/srv/data",
          "--elicit",
          "accept",
          "--elicit-json",
          '{"age":3}',
          "--sample-command",
          "sh -c 'read -r request; echo four'",
        ]),
        runCli(["call", fake.url, "ask"]),
      ]);
      assert.equal(given.code, 0, given.stderr);
      const answers = JSON.parse(given.stdout);
      assert.deepEqual(answers.roots, { roots: [{ uri: "file:///srv/data", name: "data" }] });
      assert.deepEqual(answers.elicitation, { action: "accept", content: { name: "anon", age: 3 } });
      assert.equal(answers.sampling.content.text, "four");
      assert.deepEqual(JSON.parse(none.stdout), {
        roots: "not declared",
        elicitation: "not declared",
        sampling: "not declared",
      });
    });
  });

  test("a legacy session's GET stream: opened when the client offers answers; its requests are answered", async () => {
    await withFakeHttp("get-stream", async (fake) => {
      const run = await runCli(["call", fake.url, "slow", "steps=6", "ms=100", "--root", "/srv/data"]);
      assert.equal(run.code, 0, run.stderr);
      const log = await fake.log();
      const get = log.find((entry) => entry.method === "GET")!;
      assert.equal(get.headers.accept, "text/event-stream");
      assert.ok(get.headers["mcp-session-id"]);
      const answer = log.find((entry) => entry.method === "POST" && entry.body.id === "srv-1")!;
      assert.deepEqual(answer.body.result, { roots: [{ uri: "file:///srv/data", name: "data" }] });
      const first = log.find((entry) => entry.body?.method === "tools/call")!;
      assert.ok(get.time <= first.time, "listening before the first request");
    });
  });

  test("HTTP failures: each one line and exit 3 (a 401 exit 4); -H headers sent, never printed", async () => {
    const closed = await new Promise<number>((resolve) => {
      const server = createNetServer().listen(0, "127.0.0.1", () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    const fakes = await Promise.all(["error500", "garbage", "unauthorized", ""].map((mode) => fakeHttp(mode)));
    try {
      const [five, garbage, unauthorized, refused, headers] = await Promise.all([
        runCli(["info", fakes[0].url]),
        runCli(["info", fakes[1].url]),
        runCli(["info", fakes[2].url]),
        runCli(["info", `http://127.0.0.1:${closed}/mcp`]),
        runCli(["call", fakes[3].url, "whoami", "-H", "X-Api-Key: s3cret-value", "--trace"]),
      ]);
      assert.equal(five.code, 3);
      assert.match(
        five.stderr,
        /^mcp: the server answered \S+ with HTTP 500 Internal Server Error: "internal failure"\n$/,
      );
      assert.equal(garbage.code, 3);
      assert.match(garbage.stderr, /^mcp: the server answered \S+ with a body that is not JSON/);
      assert.equal(unauthorized.code, 4);
      assert.match(unauthorized.stderr, /^mcp: the server at \S+ needs authorization; run: mcp\.ts login http:\S+\n$/);
      assert.equal(refused.code, 3);
      assert.match(refused.stderr, /^mcp: Cannot reach http:\/\/127\.0\.0\.1:\d+: connection refused/);
      assert.equal(headers.code, 0, headers.stderr);
      assert.equal(JSON.parse(headers.stdout)["x-api-key"], "s3cret-value");
      assert.doesNotMatch(headers.stderr.replace(/^< \{.*$/gm, ""), /s3cret/, "--trace shows no header values");
      assert.match(headers.stderr, /^> POST \/mcp$/m);
      assert.match(headers.stderr, /^< 200 application\/json$/m);
      const [authorized, retried] = await Promise.all([
        runCli(["info", fakes[2].url, "-H", "Authorization: Bearer secret-token"]),
        runCli(["info", `http://127.0.0.1:${closed}/mcp`, "--retries", "2", "-v"]),
      ]);
      assert.equal(authorized.code, 0, authorized.stderr);
      assert.equal(retried.code, 3);
      assert.match(retried.stderr, /connection refused \(is the server running\?\); retrying \(2 of 2\)/);
    } finally {
      for (const fake of fakes) fake.close();
    }
  });

  test("timeouts and cancellation over HTTP: modern closes the stream, legacy sends notifications/cancelled", async () => {
    // The calls take a minute, far over the 20 s runCli gives a command before its kill: exit 3 is the time-out's.
    // --max-time 2 s leaves a busy machine time to connect first.
    await withFakeHttp("sse-modern", async (fake) => {
      const run = await runCli(["call", fake.url, "slow", "steps=600", "ms=100", "--max-time", "2000"]);
      assert.equal(run.code, 3);
      assert.match(run.stderr, /timed out after 2000 ms/);
      await fake.untilStderr((text) => /fake: cancelled /.test(text), "the fake seeing its stream closed");
      assert.ok((await fake.log()).some((entry) => entry.method === "CLOSED"), "the stream was closed");
    });
    await withFakeHttp("sse", async (fake) => {
      const run = await runCli([
        "call",
        fake.url,
        "slow",
        "steps=100",
        "ms=100",
        "--max-time",
        "2000",
        "--protocol",
        "legacy",
      ]);
      assert.equal(run.code, 3);
      assert.match(run.stderr, /timed out after 2000 ms/);
      const bodies = (await fake.log()).map((entry) => entry.body);
      const call = bodies.find((body) => body?.method === "tools/call");
      const cancelled = bodies.find((body) => body?.method === "notifications/cancelled");
      assert.ok(call && cancelled, `a notifications/cancelled was POSTed: ${bodies.map((body) => body?.method)}`);
      assert.equal(cancelled.params.requestId, call.id, "naming the call");
    });
    await withFakeHttp("slow", async (fake) => {
      const run = await runCli(["call", fake.url, "echo", "text=x", "--timeout", "400", "--protocol", "legacy"]);
      assert.equal(run.code, 3);
      assert.match(run.stderr, /initialize timed out/);
    }, { FAKE_DELAY_MS: "5000" });
  });

  test("mcp.ts serve --http end to end, by URL, in both eras", async () => {
    const server = await startListening([MCP, "serve", HERE + "testdata/tools", "--http", "0"], /serving (http:\S+)/);
    try {
      const { url } = server;
      const [modern, legacy, slow, prompt] = await Promise.all([
        runCli(["call", url, "add", "a=2", "b=3"]),
        runCli(["call", url, "add", '{"a":2,"b":4}', "--protocol", "legacy"]),
        runCli(["call", url, "slow", "steps=2", "ms=10", "-v", "--protocol", "legacy"]),
        runCli(["info", url, "--json"]),
      ]);
      assert.equal(modern.stdout, "5\n", modern.stderr);
      assert.equal(legacy.stdout, "6\n", legacy.stderr);
      assert.equal(slow.code, 0, slow.stderr);
      assert.match(slow.stderr, /progress 2\/2/);
      assert.deepEqual([JSON.parse(prompt.stdout).era, JSON.parse(prompt.stdout).transport], ["modern", "http"]);
    } finally {
      server.close();
    }
  });

  test("--record writes a cassette: a header line, then each message with its time and direction", async () => {
    await withTempDir("mcp-record-", async (dir) => {
      await withFakeHttp("", async (fake) => {
        const file = join(dir, "session.ndjson");
        const run = await runCli([
          "call",
          fake.url,
          "echo",
          '{"text":"hi"}',
          "--record",
          file,
          "-H",
          "Authorization: Bearer tok3n",
        ]);
        assert.equal(run.code, 0, run.stderr);
        const text = readFileSync(file, "utf8");
        assert.doesNotMatch(text, /tok3n/);
        const [header, ...lines] = text.trim().split("\n").map((line) => JSON.parse(line));
        assert.equal(header.mcpCassette, 1);
        assert.equal(header.server, fake.url);
        assert.ok(lines.every((line) => typeof line.t === "number" && ["send", "recv"].includes(line.dir)));
        assert.deepEqual(lines.filter((line) => line.dir === "send").map((line) => line.message.method), [
          "server/discover",
          "initialize",
          "notifications/initialized",
          "tools/call",
        ]);
        assert.equal(lines.at(-1).message.result.content[0].text, "hi");
      });
    });
  });

  test("a redirect is followed within its origin only: -HOSTILE values never reach another origin (exit 3 naming it)", async () => {
    const cross = await hostileHttp("redirect-cross");
    const same = await hostileHttp("redirect-same");
    try {
      const secret = "X-Api-Key: k-123";
      const [away, home] = await Promise.all([
        runCli(["call", cross.url, "echo", "text=hi", "-H", secret, "-H", "Authorization: Bearer t-456"]),
        runCli(["call", same.url, "echo", "text=hi", "-H", secret]),
      ]);
      assert.equal(away.code, 3, away.stderr);
      assert.match(away.stderr, new RegExp(`redirects to ${new URL(cross.other).origin}/mcp, another origin`));
      const reachedOther = (await cross.log()).filter((entry) => entry.port === Number(new URL(cross.other).port));
      assert.deepEqual(reachedOther, [], "nothing was sent to the other origin");
      assert.equal(home.code, 0, home.stderr);
      assert.equal(home.stdout, "hi\n");
      assert.ok((await same.log()).some((entry) => entry.path === "/real" && entry.headers["x-api-key"] === "k-123"));
    } finally {
      cross.close();
      same.close();
    }
  });
});

describe("14f. Tasks: following a call that became one", () => {
  test("the client polls a task as often as its pollIntervalMs says (150 ms here, not the 1 s default)", async () => {
    const tasks = [
      ...RUNTIME,
      MCP,
      "serve",
      HERE + "testdata/conformance/tools_tasks.ts",
      "--task-poll-interval",
      "150",
    ];
    const run = await runCli(["call", [...tasks, "--trace"].map(quote).join(" "), "slow_compute", "seconds=3", "-v"]);
    assert.equal(run.code, 0, run.stderr);
    const polls = run.stderr.match(/"method":"tasks\/get"/g)?.length ?? 0;
    assert.ok(polls >= 5, `${polls} polls in 3 s`);
  });

  const FIXTURES = HERE + "testdata/conformance/tools_tasks.ts";
  // One serve --http of the task fixtures for every test here (each test's tasks are its own).
  let shared: Started | undefined;
  before(async () => shared = await startListening([MCP, "serve", FIXTURES, "--http", "0"], /serving (\S+)/));
  after(() => shared?.close());
  const withTaskServer = async (body: (url: string) => Promise<void>) => await body(shared!.url);

  test("call follows a task to its end: its result, its questions answered, a failed task exit 3 naming it", async () => {
    await withTaskServer(async (url) => {
      const [done, failed, crashed, asked, stdio] = await Promise.all([
        runCli(["call", url, "slow_compute", "seconds=1", "label=x", "-v"]),
        runCli(["call", url, "protocol_error_job"]),
        runCli(["call", url, "failing_job", "--json"]),
        runCli(["call", url, "multi_input", "--elicit", "accept", "--elicit-json", '{"name":"Ada","confirm":true}']),
        runCli([
          "call",
          `${RUNTIME.join(" ")} ${MCP} serve ${FIXTURES}`,
          "test_tool_with_task",
          "--elicit",
          "accept",
          "--elicit-json",
          '{"name":"Alice"}',
        ]),
      ]);
      assert.deepEqual([done.code, done.stdout], [0, 'Computation "x" completed after 1 seconds. Result: 42.\n']);
      const changes = done.stderr.match(/^mcp: task \S+: .*$/gm) ?? [];
      assert.ok(changes.length >= 2, done.stderr);
      assert.match(changes[0]!, /^mcp: task [\w-]+\.[\w-]+: working: computing "x"$/);
      assert.match(changes.at(-1)!, /: completed: 1\/1 seconds$/);
      assert.equal(failed.code, 3);
      assert.match(
        failed.stderr,
        /^mcp: task \S+ failed: simulated protocol error: the job's backend refused it \(-32603\)\n/,
      );
      assert.equal(crashed.code, 1, "a completed task with an isError result is a tool error, as a call's");
      assert.equal(JSON.parse(crashed.stdout).content[0].text, "simulated failure: job crashed");
      assert.deepEqual([asked.code, asked.stdout], [0, 'name="Ada" confirmed=true\n']);
      assert.deepEqual([stdio.code, stdio.stdout], [0, "Hello, Alice! (computed in task)\n"], stdio.stderr);
    });
  });

  test("on a real terminal (a pty) a task's status line is cleared before the result is printed", () => {
    const run = (args: string[]) => [...RUNTIME, MCP, ...args].map(quote).join(" ");
    const tasks = run(["serve", HERE + "testdata/conformance/tools_tasks.ts"]);
    const pty = spawnSync("script", ["-qec", run(["call", tasks, "slow_compute", "seconds=1"]), "/dev/null"], {
      encoding: "utf8",
      timeout: 30_000,
    });
    if (pty.error !== undefined) return; // no script(1) here
    assert.match(pty.stdout, /task \S+: working/, pty.stdout);
    const after = pty.stdout.slice(pty.stdout.lastIndexOf("\x1b[K") + 3);
    assert.match(
      after,
      /^Computation "job" completed after 1 seconds\. Result: 42\.\r?\n$/,
      JSON.stringify(pty.stdout),
    );
  });

  test("batch awaits each line's task; on a terminal a task is one updating status line", async () => {
    const server = shared!.url;
    const lines = [
      { tool: "slow_compute", arguments: { seconds: 1, label: "b" } },
      { tool: "greet", arguments: { name: "Ada" } },
    ].map((line) => JSON.stringify(line)).join("\n") + "\n";
    const batch = await runCli(["batch", server], { stdin: lines });
    assert.equal(batch.code, 0, batch.stderr);
    assert.deepEqual(batch.stdout.trim().split("\n").map((line) => JSON.parse(line).content[0].text), [
      'Computation "b" completed after 1 seconds. Result: 42.',
      "Hello, Ada!",
    ]);
    const shown = await runInProcess(["call", server, "slow_compute", "seconds=1"], "", { terminal: true });
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stderr, new RegExp(`\r\x1b\\[Ktask [\\w.-]+: working: computing "job"`));
    assert.ok(shown.stderr.endsWith("\r\x1b[K"), "the status line is cleared before the result");
  });

  test("--detach prints the task's id at once; task get, result and cancel find it by id; unknown ids are exit 2", async () => {
    await withTaskServer(async (url) => {
      const detached = await runCli(["call", url, "slow_compute", "seconds=1", "--detach"]);
      assert.equal(detached.code, 0, detached.stderr);
      const taskId = detached.stdout.trim();
      assert.match(taskId, /^[\w-]+\.[\w-]{22}$/);
      const got = await runCli(["task", url, "get", taskId]);
      assert.equal(got.code, 0, got.stderr);
      // Working, or (on a loaded machine, a second later) already completed: found by its id either way.
      assert.match(got.stdout, /^(working: computing "job"|completed: 1\/1 seconds)\n$/);
      const result = await runCli(["task", url, "result", taskId]);
      assert.deepEqual([result.code, result.stdout], [0, 'Computation "job" completed after 1 seconds. Result: 42.\n']);
      const json = JSON.parse((await runCli(["task", url, "get", taskId, "--json"])).stdout);
      assert.deepEqual([json.status, json.result.content[0].type], ["completed", "text"]);
      // A task of a minute: detached at once, not waited for (far under its minute, far over a busy machine's time).
      const started = Date.now();
      const long = (await runCli(["call", url, "slow_compute", "seconds=60", "--detach", "--json"])).stdout;
      assert.ok(Date.now() - started < 20_000, `without waiting for the task: ${Date.now() - started} ms`);
      const created = JSON.parse(long);
      assert.equal(created.resultType, "task");
      assert.equal((await runCli(["task", url, "cancel", created.taskId])).code, 0);
      assert.equal((await runCli(["task", url, "get", created.taskId])).stdout, "cancelled: cancelled by the client\n");
      const unknown = await runCli(["task", url, "get", "nope"]);
      assert.equal(unknown.code, 2);
      assert.match(unknown.stderr, /^mcp: the server does not know task nope \(unknown, expired, or not yours\)/);
      const instant = await runCli(["call", url, "slow_compute", "seconds=0", "--detach"]);
      assert.deepEqual([instant.code, instant.stdout], [0, 'Computation "job" completed instantly. Result: 42.\n']);
      assert.match(instant.stderr, /answered at once: there is no task to detach/);
    });
    const stdio = await runCli(["call", `${RUNTIME.join(" ")} ${MCP} serve ${FIXTURES}`, "slow_compute", "--detach"]);
    assert.equal(stdio.code, 2);
    assert.match(stdio.stderr, /--detach needs an HTTP server/);
  });

  test("Ctrl-C and --max-time cancel the task they follow, naming it: exit 130 and 3", async () => {
    await withTaskServer(async (url) => {
      let taskLine = "";
      const interrupted = await runCli(["call", url, "slow_compute", "seconds=60", "-v"], {
        onStderr: (text, pid) => {
          if (taskLine || !/^mcp: task (\S+): working/m.test(text)) return;
          taskLine = /^mcp: task (\S+):/m.exec(text)![1];
          process.kill(pid, "SIGINT");
        },
      });
      assert.equal(interrupted.code, 130, interrupted.stderr);
      assert.ok(interrupted.stderr.includes(`mcp: interrupted; task ${taskLine} cancelled\n`), interrupted.stderr);
      assert.equal((await runCli(["task", url, "get", taskLine])).stdout, "cancelled: cancelled by the client\n");
      // 2 s: the task exists long before on a busy machine, and its minute is far off.
      const timedOut = await runCli(["call", url, "slow_compute", "seconds=60", "--max-time", "2000", "--json"]);
      assert.equal(timedOut.code, 3);
      const report = JSON.parse(timedOut.stderr);
      assert.match(report.error, /^task (\S+) timed out after 2000 ms \(--max-time\); cancelled$/);
      const id = /^task (\S+) /.exec(report.error)![1];
      assert.equal((await runCli(["task", url, "get", id])).stdout, "cancelled: cancelled by the client\n");
    });
  });

  test("a 2025-11-25 task: asked for only when the tool requires it, followed through tasks/get and tasks/result", async () => {
    const server = `${RUNTIME.join(" ")} ${HERE}testdata/fake_task_server.ts`;
    const [researched, plain, doomed, bad, timedOut] = await Promise.all([
      runCli(["call", server, "research", "-v", "--elicit", "accept", "--elicit-json", '{"topic":"mcp"}']),
      runCli(["call", server, "render", "-v"]),
      runCli(["call", server, "doomed"]),
      runCli(["call", server, "render", "--detach", "-e", "FAKE_TASK_MODE=bad-status"]),
      runCli(["call", server, "forever", "--max-time", "2000", "-v"]), // the task made long before, on a busy machine
    ]);
    assert.deepEqual([researched.code, researched.stdout], [0, 'researched {"topic":"mcp"}\n'], researched.stderr);
    assert.match(researched.stderr, /fake-task: tools\/call research task=yes/);
    assert.match(researched.stderr, /^mcp: task t-1: working: starting$/m);
    assert.match(researched.stderr, /^mcp: task t-1: input_required: which topic\?$/m);
    assert.match(researched.stderr, /fake-task: answer \{"action":"accept","content":\{"topic":"mcp"\}\}/);
    assert.deepEqual([plain.code, plain.stdout], [0, "render at once\n"], "optional: a plain call unless detached");
    assert.match(plain.stderr, /fake-task: tools\/call render task=no/);
    assert.equal(doomed.code, 3);
    assert.match(doomed.stderr, /^mcp: task t-1 failed: the job's backend is gone \(-32000\)\n/);
    assert.equal(bad.code, 2, "--detach needs an HTTP server");
    assert.equal(timedOut.code, 3);
    assert.match(timedOut.stderr, /mcp: task t-1 timed out after 2000 ms \(--max-time\); cancelled\n/);
    assert.match(timedOut.stderr, /fake-task: cancelled t-1/);
    const invalid = await runCli(["call", server, "forever", "-e", "FAKE_TASK_MODE=bad-status"]);
    assert.equal(invalid.code, 3);
    assert.match(invalid.stderr, /^mcp: the server sent an invalid task t-1: status "sleeping"\n/);
  });

  test("the library: callTool hides the polling, detach hands the task back, client.tasks get, result and cancel", async () => {
    await withTaskServer(async (url) => {
      const client = await connect(url, { auth: false });
      try {
        const seen: string[] = [];
        const result = await client.callTool("slow_compute", { seconds: 1 }, {
          onTask: (task) => seen.push(String(task.status)),
        });
        assert.equal((result as Message).content[0].text, 'Computation "job" completed after 1 seconds. Result: 42.');
        assert.deepEqual([seen[0], seen.at(-1)], ["working", "completed"]);
        const created = await client.callTool("slow_compute", { seconds: 60 }, { detach: true });
        assert.equal(created.resultType, "task");
        const taskId = String(created.taskId);
        assert.equal((await client.tasks.get(taskId)).status, "working");
        await client.tasks.cancel(taskId);
        await assert.rejects(client.tasks.result(taskId), (error: Error) => {
          assert.equal(error.name, "TaskEndedError");
          assert.equal(error.message, `task ${taskId} was cancelled: cancelled by the client`);
          return true;
        });
      } finally {
        await client.close();
      }
    });
  });
});

describe("15a. Gateway", () => {
  test("gateway --http --metrics serves its upstream calls' durations beside what it serves", async () => {
    const gateway = await startListening(
      [MCP, "gateway", `t=${SERVE}`, "--http", "0", "--metrics"],
      /serving (\S+) \(a gateway\)/,
    );
    const client = await connect(gateway.url, { protocol: "legacy" });
    try {
      assert.equal(text(await client.callTool("t__add", { a: 1, b: 2 })), "3");
      const page = await (await fetch(new URL("/metrics", gateway.url))).text();
      assert.match(page, /^mcp_server_operation_duration_seconds_count\{[^}]*gen_ai_tool_name="t__add"[^}]*\} 1$/m);
      assert.match(
        page,
        /^mcp_client_operation_duration_seconds_count\{[^}]*gen_ai_tool_name="add"[^}]*mcp_ts_upstream="t"[^}]*\} 1$/m,
      );
    } finally {
      await client.close();
      gateway.close();
    }
  });

  test("gatewayName(): only [A-Za-z0-9_-], at most 64 characters, a long one cut with a stable hash", () => {
    assert.equal(gatewayName("gh", "create_issue", true), "gh__create_issue");
    assert.equal(gatewayName("gh", "create.issue", false), "create_issue");
    const long = gatewayName(
      "a-very-long-upstream-name-for-the-test",
      "and-an-even-longer-tool-name-that-goes-on",
      true,
    );
    assert.equal(long.length, 64);
    assert.match(long, /^[A-Za-z0-9_-]+_[0-9a-f]{8}$/);
    assert.equal(
      long,
      gatewayName("a-very-long-upstream-name-for-the-test", "and-an-even-longer-tool-name-that-goes-on", true),
    );
    assert.notEqual(
      long,
      gatewayName("a-very-long-upstream-name-for-the-test", "and-an-even-longer-tool-name-that-goes-ON", true),
    );
  });

  test("the union of the upstreams, forwarded: names, collisions, --tools, progress; a dead upstream restarts", async () => {
    await withTempDir("mcp-gateway-", async (dir) => {
      const state = join(dir, "crashed");
      const gateway = new ServerProcess(
        [
          `one=${SERVE}`,
          `two=${FAKE}`,
          `flaky=env FAKE_MODE=crash-call-once FAKE_STATE=${quote(state)} ${FAKE}`,
          "gone=/nonexistent/server",
          "--prefix",
          "collisions",
          "--tools",
          "!*fail*",
        ],
        false,
        "gateway",
      );
      try {
        await gateway.initialize();
        const listed = await gateway.request(2, "tools/list");
        const names = (listed.result.tools as Message[]).map((tool) => tool.name);
        assert.ok(
          names.includes("one__echo") && names.includes("two__echo") && names.includes("flaky__echo"),
          names.join(),
        );
        assert.ok(names.includes("weather") && names.includes("wc"), "a name only one upstream has stays bare");
        assert.ok(names.includes("two__zip") && names.includes("flaky__zip"), "a name two upstreams share is prefixed");
        assert.ok(!names.some((name: string) => name.includes("fail")), "--tools !*fail* leaves them out");
        assert.match(
          (listed.result.tools as Message[]).find((tool) => tool.name === "weather")!.description,
          /\(from one\)$/,
        );
        assert.match(gateway.stderr, /upstream "gone" did not start: .*; trying again in 1 s/);

        const add = await gateway.request(4, "tools/call", { name: "one__add", arguments: { a: 2, b: 3 } });
        assert.equal(add.result.content[0].text, "5");
        gateway.call(5, "one__slow", { steps: 2, ms: 10 }, { progressToken: "p" });
        const slow = await gateway.response(5);
        assert.match(slow.result.content[0].text, /waited 2 x 10 ms/);
        assert.equal(gateway.messages.filter((m) => m.method === "notifications/progress").length, 2);

        const died = await gateway.request(6, "tools/call", { name: "flaky__echo", arguments: { text: "x" } });
        assert.equal(died.result.isError, true);
        assert.match(died.result.content[0].text, /upstream "flaky"/);
        await gateway.until(
          () => /upstream "flaky" is up/.test(gateway.stderr.split("is gone")[1] ?? ""),
          "the restart",
          8_000,
        );
        const back = await gateway.request(7, "tools/call", { name: "flaky__echo", arguments: { text: "back" } });
        assert.equal(back.result.content[0].text, "back");
        const pids = [...gateway.stderr.matchAll(/fake: pid (\d+)/g)].map((match) => Number(match[1]));
        assert.deepEqual(await gateway.end(), { code: 0, signal: null });
        for (const pid of pids) assert.equal(await isGone(pid), true, `upstream ${pid} is gone`);
      } finally {
        gateway.kill();
      }
    });
  });

  test("an upstream that names nothing runnable is one stderr line and an isError per call while the others serve; all such: exit 2", async () => {
    const gateway = new ServerProcess([`t=${SERVE}`, "bad=no-such-command-mcp-ts"], false, "gateway");
    try {
      await gateway.initialize();
      const names = ((await gateway.request(2, "tools/list")).result.tools as Message[]).map((tool) => tool.name);
      assert.ok(names.includes("t__add") && !names.some((name) => name.startsWith("bad__")), names.join());
      assert.equal(
        text((await gateway.request(3, "tools/call", { name: "t__add", arguments: { a: 1, b: 2 } })).result),
        "3",
      );
      const down = (await gateway.request(4, "tools/call", { name: "bad__echo", arguments: {} })).result;
      assert.equal(down.isError, true, JSON.stringify(down));
      assert.match(
        text(down),
        /^upstream "bad" is down \("no-such-command-mcp-ts" is not a command on PATH .*it is not started again$/,
      );
      const said = gateway.stderr.split("\n").filter((line) => line.includes('"bad"'));
      assert.equal(said.length, 1, gateway.stderr);
      assert.match(
        said[0],
        /^mcp: upstream "bad" cannot start: "no-such-command-mcp-ts" is not a command on PATH .*the others serve without it$/,
      );
    } finally {
      gateway.kill();
      await gateway.exit;
    }
    const none = await runCli(["gateway", "bad=no-such-command-mcp-ts"]);
    assert.equal(none.code, 2, none.stderr);
    assert.match(none.stderr, /^mcp: "no-such-command-mcp-ts" is not a command on PATH/);
  });

  test("a slow upstream does not hold the others back; --http serves the same union", async () => {
    // The slow upstream starts only once the test says so (a file appears, after the first list): that the gateway
    // answers at all proves it serves while the slow one is not up, however busy the machine.
    const folder = mkdtempSync(join(tmpdir(), "mcp-gateway-slow-"));
    const go = join(folder, "go");
    const slow = `sh -c ${quote(`until [ -e ${quote(go)} ]; do sleep 0.05; done; exec ${FAKE}`)}`;
    const gateway = new ServerProcess([`fast=${SERVE}`, `slow=${slow}`], false, "gateway");
    try {
      await gateway.initialize();
      const first = await gateway.request(2, "tools/list");
      const names = (first.result.tools as Message[]).map((tool) => tool.name);
      assert.ok(names.includes("fast__add") && !names.some((name: string) => name.startsWith("slow__")), names.join());
      writeFileSync(go, "");
      await gateway.until(
        () => gateway.messages.some((m) => m.method === "notifications/tools/list_changed"),
        "list_changed",
        15_000,
      );
      const later = await gateway.request(3, "tools/list");
      assert.ok((later.result.tools as Message[]).some((tool) => tool.name === "slow__echo"));
    } finally {
      writeFileSync(go, ""); // a slow upstream still waiting starts, and ends with its gateway's stdin
      gateway.kill();
      await gateway.exit;
      rmSync(folder, { recursive: true, force: true });
    }
    const http = await startListening([MCP, "gateway", `t=${SERVE}`, "--http", "0"], /serving (\S+) \(a gateway\)/);
    try {
      const [list, call] = await Promise.all([
        runCli(["list", http.url]),
        runCli(["call", http.url, "t__add", "a=1", "b=2"]),
      ]);
      assert.match(list.stdout, /^t__add /m);
      assert.equal(call.stdout, "3\n", call.stderr);
    } finally {
      http.close();
    }
  });

  test("an upstream's list change is the gateway's list_changed; resources/read kept with --cache-ttl", async () => {
    await withTempDir("mcp-gateway-watch-", async (dir) => {
      writeFileSync(
        join(dir, "counter.ts"),
        'export const resources = [{ uri: "test://counter", name: "counter", read: () => String(Math.random()) }];\n',
      );
      const upstream = [...RUNTIME, MCP, "serve", dir, "--watch"].map(quote).join(" ");
      const gateway = new ServerProcess([`w=${upstream}`, "--cache-ttl", "60000"], false, "gateway");
      try {
        await gateway.initialize();
        const read = async (id: number) =>
          (await gateway.request(id, "resources/read", { uri: "test://counter" })).result.contents[0].text;
        const first = await read(2);
        assert.equal(await read(3), first, "kept for --cache-ttl");
        writeFileSync(join(dir, "hello.ts"), 'export default { description: "Hi", run: () => "hi" };\n');
        await gateway.until(
          () => gateway.messages.some((m) => m.method === "notifications/tools/list_changed"),
          "list_changed",
          8_000,
        );
        const listed = await gateway.request(4, "tools/list");
        assert.deepEqual((listed.result.tools as Message[]).map((tool) => tool.name), ["w__hello"]);
        assert.notEqual(await read(5), first, "a list change drops what was kept");
      } finally {
        gateway.kill();
        await gateway.exit;
      }
    });
  });

  test("two clients behind gateway --http: each upstream question reaches only the client whose call asked it", async () => {
    const asker = await hostileHttp("ask-late", { HOSTILE_DELAY_MS: "300" });
    const STDIO_ASKER = [...RUNTIME, HERE + "testdata/hostile_stdio_asker.ts"].map(quote).join(" ");
    const gateway = await startListening(
      [MCP, "gateway", `web=${asker.url}`, `local=${STDIO_ASKER}`, "--http", "0", "--token", "t"],
      /serving (\S+) \(a gateway\)/,
    );
    const clients: Awaited<ReturnType<typeof connect>>[] = [];
    try {
      const client = async (pin: string) => {
        const made = await connect(gateway.url, {
          headers: { authorization: "Bearer t" },
          protocol: "legacy",
          capabilities: { elicitation: {}, roots: {} },
          onRequest: (method) =>
            method === "roots/list" ? { roots: [{ uri: `file:///${pin}` }] } : { action: "accept", content: { pin } },
        });
        clients.push(made);
        return made;
      };
      const [alice, bob] = await Promise.all([client("alice-pin"), client("bob-pin")]);
      const [a, b] = await Promise.all([
        alice.callTool("web__ask", { label: "A" }),
        bob.callTool("web__ask", { label: "B" }),
      ]);
      assert.match(text(a), /^A got .*alice-pin/);
      assert.match(text(b), /^B got .*bob-pin/);
      // A stdio upstream cannot say which call a question is about: with both clients' calls in flight it is refused.
      const [c, d] = await Promise.all([
        // Each asks once both calls are in flight (the fake waits for the second: no race with a loaded machine).
        alice.callTool("local__ask", { label: "C", after: 2 }),
        bob.callTool("local__ask", { label: "D", after: 2 }),
      ]);
      for (const result of [c, d]) {
        assert.doesNotMatch(text(result), /pin/, text(result));
        assert.match(text(result), /several clients/);
      }
      const alone = await alice.callTool("local__ask", { label: "E", delay_ms: 10 });
      assert.match(text(alone), /^E got .*alice-pin/, "one client's call alone is answered by that client");
      const roots = await alice.callTool("local__roots", {});
      assert.doesNotMatch(text(roots), /alice-pin/, "no roots to a shared upstream");
    } finally {
      await Promise.all(clients.map((client) => client.close()));
      gateway.close();
      asker.close();
    }
  });

  test("a forwarded prompts/get result is the upstream's, unchanged; templates shared by two upstreams only warn", async () => {
    const CONFORMANCE_SERVER = [...RUNTIME, MCP, "serve", HERE + "testdata/conformance"].map(quote).join(" ");
    const gateway = await startListening(
      [MCP, "gateway", `a=${CONFORMANCE_SERVER}`, `b=${CONFORMANCE_SERVER}`, "--http", "0"],
      /serving (\S+) \(a gateway\)/,
    );
    const [direct, through] = await Promise.all([
      connect(CONFORMANCE_SERVER, { protocol: "legacy" }),
      connect(gateway.url, { protocol: "legacy" }),
    ]);
    try {
      const prompts = await direct.listPrompts();
      const described = prompts.find((prompt) => typeof prompt.description === "string")!;
      const name = String(described.name);
      const args = Object.fromEntries(
        (Array.isArray(described.arguments) ? described.arguments : []).map((arg: Message) => [arg.name, "x"]),
      );
      const want = await direct.getPrompt(name, args);
      const got = await through.getPrompt(`a__${name}`, args);
      assert.deepEqual(got, want);
      assert.ok((await through.listResourceTemplates()).length > 0, "the gateway serves despite the shared templates");
    } finally {
      await Promise.all([direct.close(), through.close()]);
      gateway.close();
    }
  });
});

describe("15a. Gateway: tasks and skills", () => {
  test("two gateway replicas on one store: an upstream task given out by one is read and cancelled through the other", async () => {
    const redis = await startListening([HERE + "testdata/fake_redis.ts"], /listening (redis:\S+)/);
    const gateways: Started[] = [];
    try {
      for (const name of ["g1", "g2"]) {
        const upstream = `j=${
          [...RUNTIME, MCP, "serve", HERE + "testdata/conformance/tools_tasks.ts"].map(quote).join(" ")
        }`;
        const args = ["gateway", upstream, "--protocol", "auto", "--http", "0", "--state", redis.url];
        gateways.push(await startListening([MCP, ...args, "--instance-id", name], /serving (\S+)/));
      }
      for (const gateway of gateways) await gateway.printed(/upstream "j" is up/);
      const [g1, g2] = gateways;
      const ask = async (url: string, method: string, params: Message, name: string) =>
        await rpcAnswer(await fetch(taskPost(method, params, name, url)));
      const created = await ask(
        g1.url,
        "tools/call",
        { name: "j__slow_compute", arguments: { seconds: 60 } },
        "j__slow_compute",
      );
      const { taskId } = created.result;
      assert.match(taskId, /^j__/);
      assert.equal((await ask(g2.url, "tasks/get", { taskId }, taskId)).result.status, "working", "read through g2");
      assert.deepEqual(Object.keys((await ask(g2.url, "tasks/cancel", { taskId }, taskId)).result).sort(), [
        "_meta",
        "resultType",
      ]);
      assert.equal((await ask(g1.url, "tasks/get", { taskId }, taskId)).result.status, "cancelled");
      const made = (await ask(g2.url, "tasks/get", { taskId: "j__made-up" }, "j__made-up")).error;
      assert.equal(made.code, -32602, "an id no gateway gave out is unknown, at once");
    } finally {
      for (const gateway of gateways) gateway.close();
      redis.close();
    }
  });

  test("two principals: an upstream task's <upstream>__<id> is its caller's alone, and a listen of made-up ids asks nothing upstream", async () => {
    const jobs = await startListening(
      [MCP, "serve", HERE + "testdata/conformance/tools_tasks.ts", "--http", "0", "--trace"],
      /serving (\S+)/,
    );
    const as = await startListening([HERE + "testdata/fake_auth_server.ts"], /listening (\S+)/);
    let gateway: Started | undefined;
    try {
      gateway = await startListening(
        [MCP, "gateway", `jobs=${jobs.url}`, "--protocol", "auto", "--http", "0", "--auth-issuer", as.url],
        /serving (\S+)/,
      );
      await gateway.printed(/upstream "jobs" is up/);
      const [alice, bob] = await Promise.all(
        ["alice", "bob"].map((sub) => mintToken(as.url, { aud: gateway!.url, sub })),
      );
      const meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } },
      };
      const post = (token: string, method: string, params: Message) =>
        fetch(gateway!.url, {
          method: "POST",
          headers: {
            ...JSON_HEADERS,
            authorization: `Bearer ${token}`,
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": method,
            ...(method === "subscriptions/listen" ? {} : { "mcp-name": String(params.name ?? params.taskId) }),
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: { ...params, _meta: meta } }),
        });
      const ask = async (token: string, method: string, params: Message) =>
        await rpcAnswer(await post(token, method, params));
      const created =
        (await ask(alice, "tools/call", { name: "jobs__slow_compute", arguments: { seconds: 60 } })).result;
      const { taskId } = created;
      assert.match(taskId, /^jobs__/);
      const upstreamGets = async () => ((await jobs.printed(/serving/)).match(/"method":"tasks\/get"/g) ?? []).length;
      const before = await upstreamGets();
      for (const method of ["tasks/get", "tasks/update", "tasks/cancel"]) {
        const refused = await ask(bob, method, { taskId, inputResponses: {} });
        assert.equal(refused.error?.code, -32602, `${method} as bob: ${JSON.stringify(refused)}`);
      }
      // A listen for alice's id and 300 made-up ones: acknowledged, none honored, nothing asked upstream.
      const listen = await post(bob, "subscriptions/listen", {
        notifications: { taskIds: [taskId, ...Array.from({ length: 300 }, (_, i) => `jobs__made-up-${i}`)] },
      });
      const [ack] = await sseMessages(listen, 1);
      assert.equal(ack.method, "notifications/subscriptions/acknowledged");
      assert.deepEqual(ack.params.notifications.taskIds, []);
      assert.equal(await upstreamGets(), before, "bob's requests reached no upstream");
      const got = (await ask(alice, "tasks/get", { taskId })).result;
      assert.equal(got.status, "working", "alice's task was not cancelled by bob");
      assert.equal((await ask(alice, "tasks/cancel", { taskId })).result.resultType, "complete");
    } finally {
      gateway?.close();
      as.close();
      jobs.close();
    }
  });

  test("--protocol auto: an upstream's task passes through as <upstream>__<id>, tasks/* routed back; skills merged", async () => {
    const jobs = await startListening(
      [MCP, "serve", HERE + "testdata/conformance/tools_tasks.ts", "--http", "0"],
      /serving (\S+)/,
    );
    const docs = `${RUNTIME.join(" ")} ${MCP} serve ${HERE}testdata/conformance`;
    const gateway = new ServerProcess([`jobs=${jobs.url}`, `docs=${docs}`, "--protocol", "auto"], false, "gateway");
    try {
      const declared = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } },
      };
      const plain = { ...declared, "io.modelcontextprotocol/clientCapabilities": {} };
      const ask = (id: string, method: string, params: Message, meta: Message = declared) =>
        gateway.request(id, method, { ...params, _meta: meta });
      await gateway.until(
        () => /upstream "docs" is up/.test(gateway.stderr) && /upstream "jobs" is up/.test(gateway.stderr),
        "both upstreams",
      );
      const discover = (await ask("d", "server/discover", {})).result;
      assert.deepEqual(discover.capabilities.extensions, {
        "io.modelcontextprotocol/tasks": {},
        "io.modelcontextprotocol/skills": { directoryRead: true },
      });
      const created = (await ask("c", "tools/call", { name: "jobs__slow_compute", arguments: { seconds: 60 } })).result;
      assert.equal(created.resultType, "task");
      assert.match(created.taskId, /^jobs__[\w-]+\.[\w-]{22}$/);
      const got = (await ask("g", "tasks/get", { taskId: created.taskId })).result;
      assert.deepEqual([got.taskId, got.status], [created.taskId, "working"]);
      assert.equal((await ask("x", "tasks/cancel", { taskId: created.taskId })).result.resultType, "complete");
      assert.equal((await ask("g2", "tasks/get", { taskId: created.taskId })).result.status, "cancelled");
      assert.equal((await ask("u", "tasks/get", { taskId: "nobody__x" })).error.code, -32602);
      // A listen for an upstream task: its changes, renamed, from the upstream's own listen; it ends with the task.
      const short = (await ask("c2", "tools/call", { name: "jobs__slow_compute", arguments: { seconds: 1 } })).result;
      const listened = await ask("ln", "subscriptions/listen", { notifications: { taskIds: [short.taskId] } });
      assert.equal(listened.result.resultType, "complete");
      const ack = gateway.messages.find((m) => m.method === "notifications/subscriptions/acknowledged");
      assert.deepEqual(ack!.params.notifications, { taskIds: [short.taskId] });
      const changes = gateway.messages.filter((m) => m.method === "notifications/tasks").map((m) => m.params);
      assert.ok(changes.length > 0 && changes.every((task) => task.taskId === short.taskId), JSON.stringify(changes));
      assert.ok(changes.every((task) => task._meta["io.modelcontextprotocol/subscriptionId"] === "ln"));
      assert.equal(changes.at(-1)!.status, "completed");
      assert.match(changes.at(-1)!.result.content[0].text, /completed after 1 seconds/);
      const sync =
        (await ask("s", "tools/call", { name: "jobs__slow_compute", arguments: { seconds: 1 } }, plain)).result;
      assert.equal(
        sync.content[0].text,
        'Computation "job" completed after 1 seconds. Result: 42.',
        "undeclared: a plain call",
      );

      const skills = (await ask("l", "skills/list", {})).result.skills.map((entry: Message) => entry.uri);
      assert.deepEqual(skills, ["skill://pdf-processing/SKILL.md", "skill://team/data/csv-cleaning/SKILL.md"]);
      const file = (await ask("r", "resources/read", { uri: "skill://pdf-processing/references/FORMS.md" })).result;
      assert.match(file.contents[0].text, /^# Filling PDF forms/);
      const dir = (await ask("dr", "resources/directory/read", { uri: "skill://team" })).result;
      assert.deepEqual(dir.resources.map((item: Message) => item.uri), ["skill://team/data"]);
      assert.equal((await ask("sg", "skills/get", { uri: "skill://nope/SKILL.md" })).error.code, -32602);
    } finally {
      gateway.kill();
      jobs.close();
    }
  });
});

describe("15a. Gateway: trace context", () => {
  test("with telemetry off the caller's trace context reaches plugins, executables and, through the gateway, upstreams", async () => {
    await withTempDir("mcp-trace-", async (dir) => {
      writeFileSync(
        join(dir, "seen.ts"),
        "export default { run: (_: unknown, ctx: any) => ({ traceparent: ctx.traceparent ?? null, " +
          "tracestate: ctx.tracestate ?? null, baggage: ctx.baggage ?? null }) };",
      );
      writeFileSync(
        join(dir, "env.sh"),
        '#!/bin/sh\necho "${TRACEPARENT:-none} ${TRACESTATE:-none} ${BAGGAGE:-none}"\n',
      );
      spawnSync("chmod", ["+x", join(dir, "env.sh")]);
      const context = {
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        tracestate: "vendor=1",
        baggage: "user=7",
      };
      const serve = `${RUNTIME.join(" ")} ${MCP} serve ${dir}`;
      // An inherited TRACEPARENT must not reach a tool: a call without a context runs without one.
      const inherited = process.env.TRACEPARENT;
      process.env.TRACEPARENT = "00-11111111111111111111111111111111-2222222222222222-01";
      const direct = await connect(serve, { protocol: "legacy" });
      const gateway = await connect(`${RUNTIME.join(" ")} ${MCP} gateway t=${quote(serve)}`, { protocol: "legacy" });
      try {
        const seen = await direct.callTool("seen", {}, context);
        assert.deepEqual(seen.structuredContent, context);
        const env = await direct.callTool("env", {}, context);
        assert.equal((env.content as Message[])[0].text, `${context.traceparent} vendor=1 user=7`);
        assert.equal(((await direct.callTool("env", {})).content as Message[])[0].text, "none none none");
        const bad = await direct.callTool("seen", {}, { traceparent: "not-a-traceparent" });
        assert.deepEqual(bad.structuredContent, { traceparent: null, tracestate: null, baggage: null });
        const through = await gateway.callTool("t__seen", {}, context);
        assert.deepEqual(through.structuredContent, context, "the gateway passes it on unchanged");
      } finally {
        if (inherited === undefined) delete process.env.TRACEPARENT;
        else process.env.TRACEPARENT = inherited;
        await direct.close();
        await gateway.close();
      }
    });
  });
});

describe("15b. Proxy and replay", () => {
  test("proxy --http with two principals: a question goes to its request's stream; answers and cancellations count only from its principal", async () => {
    const asking = await hostileHttp("ask-late");
    const tools = await startListening(
      [MCP, "serve", HERE + "testdata/tools", "--http", "0", "--trace"],
      /serving (\S+)/,
    );
    const as = await startListening([HERE + "testdata/fake_auth_server.ts"], /listening (\S+)/);
    const proxies: Started[] = [];
    const aborts = new AbortController();
    // within(promise, what): fails after 15 s naming `what` (a misrouted message never comes).
    /** An SSE response read one message at a time. */
    const events = (response: Response) => {
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      const queue: Message[] = [];
      return async (): Promise<Message> => {
        while (queue.length === 0) {
          const { done, value } = await reader.read();
          if (done) throw new Error("the stream ended");
          text += value;
          for (let end; (end = text.indexOf("\n\n")) >= 0; text = text.slice(end + 2)) {
            const data = text.slice(0, end).split("\n").filter((line) => line.startsWith("data: "));
            if (data.length > 0) queue.push(JSON.parse(data.map((line) => line.slice(6)).join("\n")));
          }
        }
        return queue.shift()!;
      };
    };
    try {
      for (const upstream of [asking.url, tools.url]) {
        proxies.push(
          await startListening([MCP, "proxy", upstream, "--http", "0", "--auth-issuer", as.url], /serving (\S+)/),
        );
      }
      const clients = async (url: string) =>
        (await Promise.all(["alice", "bob"].map((sub) => mintToken(as.url, { aud: url, sub })))).map(
          (token) => (message: Message) =>
            fetch(url, {
              method: "POST",
              headers: { ...JSON_HEADERS, authorization: `Bearer ${token}`, "mcp-protocol-version": "2025-11-25" },
              body: JSON.stringify({ jsonrpc: "2.0", ...message }),
              signal: aborts.signal,
            }),
        );
      const initialize = {
        id: 0,
        method: "initialize",
        params: {
          protocolVersion: "2025-11-25",
          capabilities: { elicitation: {} },
          clientInfo: { name: "t", version: "1" },
        },
      };
      const call = (name: string, args: Message) => ({
        id: 1,
        method: "tools/call",
        params: { name, arguments: args },
      });
      const answer = (id: unknown, pin: string) => ({ id, result: { action: "accept", content: { pin } } });

      // The asking upstream asks on each call's own stream.
      const [alice, bob] = await clients(proxies[0].url);
      await (await alice(initialize)).text();
      // Both calls are open upstream before either question comes (an SSE response starts with its first event).
      const aliceResponse = alice(call("ask", { label: "a" }));
      const bobResponse = bob(call("ask", { label: "b" }));
      const aliceNext = events(await within(aliceResponse, "alice's stream"));
      const bobNext = events(await within(bobResponse, "bob's stream"));
      const aliceQuestion = await within(aliceNext(), "alice's question on her stream");
      const bobQuestion = await within(bobNext(), "bob's question on his stream");
      assert.equal(aliceQuestion.params.message, "PIN for a");
      assert.equal(bobQuestion.params.message, "PIN for b");
      // Bob answers alice's question first: not taken. Hers is.
      assert.equal((await bob(answer(aliceQuestion.id, "from-bob"))).status, 202);
      assert.equal((await alice(answer(aliceQuestion.id, "from-alice"))).status, 202);
      assert.equal((await bob(answer(bobQuestion.id, "bob-own"))).status, 202);
      const aliceResult = await within(aliceNext(), "alice's result");
      assert.match(aliceResult.result.content[0].text, /^a got .*from-alice/);
      assert.match((await within(bobNext(), "bob's result")).result.content[0].text, /^b got .*bob-own/);

      // Both send id 1; alice cancels her id 1: bob's call, the newest with that id, goes on.
      const [alice2, bob2] = await clients(proxies[1].url);
      await (await alice2({ ...initialize, params: { ...initialize.params, capabilities: {} } })).text();
      await alice2({ method: "notifications/initialized" });
      const slow = call("slow", { steps: 10, ms: 100 });
      void alice2(slow).catch(() => {});
      const bobSlow = bob2(slow);
      await tools.printed(/"method":"tools\/call"[\s\S]*"method":"tools\/call"/); // both upstream
      assert.equal((await alice2({ method: "notifications/cancelled", params: { requestId: 1 } })).status, 202);
      const bobAnswer = await within(bobSlow.then(rpcAnswer), "bob's slow call");
      assert.equal(bobAnswer.result.content[0].text, "waited 10 x 100 ms");
      const cancelled = (await tools.printed(/notifications\/cancelled/)).match(/"requestId":"(proxy-\d+)"/)?.[1];
      assert.ok(cancelled, "alice's cancellation went upstream, naming her request");
    } finally {
      aborts.abort();
      for (const proxy of proxies) proxy.close();
      as.close();
      tools.close();
      asking.close();
    }
  });

  // One scripted session, in raw NDJSON: every message the client receives, in order.
  const session = async (server: ServerProcess) => {
    await server.initialize();
    await server.request(2, "tools/list");
    server.call(3, "add", { a: 2, b: 3 });
    await server.response(3);
    server.call(4, "slow", { steps: 2, ms: 10 }, { progressToken: "p" });
    await server.response(4);
    await server.request(5, "ping");
    await server.request(6, "no/such/method");
    await server.request(7, "resources/list");
    return server.messages;
  };
  const run = async (args: string[], command = "serve") => {
    const server = new ServerProcess(args, false, command);
    try {
      return await session(server);
    } finally {
      server.kill();
      await server.exit;
    }
  };

  test("a proxied server answers message for message as the real one: stdio→stdio, stdio→HTTP", async () => {
    const http = await startListening([MCP, "serve", HERE + "testdata/tools", "--http", "0"], /serving (\S+)/);
    try {
      const [direct, viaStdio, viaHttp] = await Promise.all([
        run(["testdata/tools"]),
        run([SERVE], "proxy"),
        run([http.url], "proxy"),
      ]);
      assert.ok(direct.length >= 9, JSON.stringify(direct));
      assert.deepEqual(viaStdio, direct);
      assert.deepEqual(viaHttp, direct);
    } finally {
      http.close();
    }
  });

  test("a task through the proxy to an HTTP upstream: tasks/get, tasks/update, tasks/cancel carry Mcp-Name", async () => {
    const http = await startListening(
      [MCP, "serve", HERE + "testdata/conformance/tools_tasks.ts", "--http", "0"],
      /serving (\S+)/,
    );
    const proxy = new ServerProcess([http.url], false, "proxy");
    try {
      const meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
          elicitation: {},
          extensions: { "io.modelcontextprotocol/tasks": {} },
        },
      };
      const ask = (id: string, method: string, params: Message) =>
        proxy.request(id, method, { ...params, _meta: meta });
      const created =
        (await ask("c", "tools/call", { name: "confirm_delete", arguments: { filename: "a.txt" } })).result;
      assert.equal(created.resultType, "task");
      // tasks/get polled, as a client follows a task (its changes send nothing to a client that does not listen).
      let polls = 0;
      const until = (status: string) =>
        pollUntil(
          async () => (await ask(`g${polls++}`, "tasks/get", { taskId: created.taskId })).result as Message,
          (task) => task.status === status,
          `the task to be ${status}`,
        );
      let task = await until("input_required");
      const [key] = Object.keys(task.inputRequests);
      const ack = await ask("u", "tasks/update", {
        taskId: created.taskId,
        inputResponses: { [key]: { action: "accept", content: { confirm: true } } },
      });
      assert.equal(ack.result.resultType, "complete", JSON.stringify(ack));
      task = await until("completed");
      assert.equal(task.result.content[0].text, "deleted 'a.txt'");
      assert.equal((await ask("x", "tasks/cancel", { taskId: created.taskId })).result.resultType, "complete");
    } finally {
      proxy.kill();
      http.close();
    }
  });

  test("proxy --http in front of a stdio server answers as serve --http does; --log has every frame", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-proxy-"));
    const log = join(dir, "frames.log");
    const direct = await startListening([MCP, "serve", HERE + "testdata/tools", "--http", "0"], /serving (\S+)/);
    const proxied = await startListening(
      [MCP, "proxy", SERVE, "--http", "0", "--log", log],
      /serving (http:\S+) \(proxying/,
    );
    try {
      const ask = async (url: string, method: string, params: Message = {}) => {
        const response = await fetch(modernPost(method, params, {}, 1, url));
        return await rpcAnswer(response);
      };
      for (
        const [method, params] of [["server/discover", {}], ["tools/list", {}], ["tools/call", {
          name: "add",
          arguments: { a: 1, b: 2 },
        }]] as const
      ) {
        assert.deepEqual(await ask(proxied.url, method, params), await ask(direct.url, method, params), method);
      }
      const lines = readFileSync(log, "utf8").trim().split("\n");
      assert.equal(lines.length, 6);
      for (const [i, line] of lines.entries()) {
        const match = /^(\d{4}-\d\d-\d\dT\S+Z) ([<>]) (\{.*\})$/.exec(line);
        assert.ok(match, line);
        assert.equal(match[2], i % 2 === 0 ? "<" : ">");
        JSON.parse(match[3]);
      }
    } finally {
      direct.close();
      proxied.close();
      rmSync(dir, { recursive: true });
    }
  });

  test("CassettePlayer: what the server sent after an answer comes after it; ids and progress tokens made live", () => {
    const player = new CassettePlayer([
      { t: 1, dir: "send", message: { jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: "x" } } },
      { t: 2, dir: "recv", message: { jsonrpc: "2.0", id: 0, result: { protocolVersion: "2025-11-25" } } },
      { t: 3, dir: "recv", message: { jsonrpc: "2.0", method: "notifications/tools/list_changed" } },
      {
        t: 4,
        dir: "send",
        message: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "a", _meta: { progressToken: 7 } } },
      },
      {
        t: 5,
        dir: "recv",
        message: { jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: 7, progress: 1 } },
      },
      { t: 6, dir: "recv", message: { jsonrpc: "2.0", id: 1, result: { content: [] } } },
    ]);
    assert.deepEqual(player.answer({ jsonrpc: "2.0", id: "i", method: "initialize", params: {} }), [
      { jsonrpc: "2.0", id: "i", result: { protocolVersion: "2025-11-25" } },
      { jsonrpc: "2.0", method: "notifications/tools/list_changed" },
    ]);
    assert.deepEqual(
      player.answer({
        jsonrpc: "2.0",
        id: 9,
        method: "tools/call",
        params: { name: "a", _meta: { progressToken: "live" } },
      }),
      [
        { jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: "live", progress: 1 } },
        { jsonrpc: "2.0", id: 9, result: { content: [] } },
      ],
    );
    assert.deepEqual(player.answer({ jsonrpc: "2.0", method: "notifications/initialized" }), []);
  });

  test("proxy --http serves several clients on one upstream: their ids do not collide, a second initialize is answered", async () => {
    const proxied = await startListening([MCP, "proxy", SERVE, "--http", "0"], /serving (http:\S+) \(proxying/);
    try {
      const post = async (message: Message) => {
        const response = await fetch(proxied.url, {
          method: "POST",
          headers: JSON_HEADERS,
          body: JSON.stringify(message),
        });
        return await rpcAnswer(response);
      };
      const [first, second] = await Promise.all([post(INIT), post(INIT)]);
      assert.equal(first.result.protocolVersion, second.result.protocolVersion);
      const calls = await Promise.all(
        [1, 2, 3].map((b) =>
          post({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "add", arguments: { a: 1, b } } })
        ),
      );
      assert.deepEqual(calls.map((answer) => [answer.id, answer.result.content[0].text]), [[1, "2"], [1, "3"], [
        1,
        "4",
      ]]);
    } finally {
      proxied.close();
    }
  });

  test("the upstream's life follows the client's: EOF ends both; an upstream that dies ends the proxy, exit 1", async () => {
    const started = async () => {
      const proxied = new ServerProcess([FAKE], false, "proxy");
      await proxied.initialize();
      await proxied.until(() => /fake: pid \d+/.test(proxied.stderr), "the upstream's pid");
      return { proxied, pid: Number(/fake: pid (\d+)/.exec(proxied.stderr)![1]) };
    };
    const eof = await started();
    assert.deepEqual(await eof.proxied.end(), { code: 0, signal: null });
    assert.equal(await isGone(eof.pid), true, "no orphan");
    const dies = await started();
    process.kill(dies.pid, "SIGKILL");
    assert.equal((await dies.proxied.exit).code, 1);
    assert.match(dies.proxied.stderr, /mcp: the upstream server is gone: the server exited on SIGKILL/);
  });

  test("record, then replay: the same output byte for byte; --strict; an unmatched request, and replay goes on", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-replay-"));
    const tape = join(dir, "session.ndjson");
    try {
      const live = await runCli(["call", SERVE, "slow", "steps=2", "ms=10", "-v", "--record", tape]);
      assert.equal(live.code, 0, live.stderr);
      const replayer = [...RUNTIME, MCP, "replay", tape].map(quote).join(" ");
      const replayed = await runCli(["call", replayer, "slow", "steps=2", "ms=10", "-v"]);
      assert.equal(replayed.stdout, live.stdout);
      assert.equal(replayed.stderr, live.stderr);
      assert.equal(replayed.code, 0);

      const lines = ['{"tool":"add","arguments":{"a":2,"b":3}}', '{"tool":"add","arguments":{"a":9,"b":9}}'];
      const recorded = await runCli(["batch", SERVE, "--record", tape], { stdin: lines[0] + "\n" });
      assert.equal(recorded.code, 0, recorded.stderr);
      const batch = await runCli(["batch", replayer], { stdin: [lines[0], lines[1], lines[0]].join("\n") + "\n" });
      const [first, missing, again] = batch.stdout.trim().split("\n").map((line) => JSON.parse(line));
      assert.equal(first.content[0].text, "5");
      assert.match(
        missing.error,
        /replay: no recorded request matches tools\/call .*"b":9.*closest recorded request is tools\/call .*"b":3/,
      );
      assert.equal(again.content[0].text, "5", "a used match answers again");
      const strict = [...RUNTIME, MCP, "replay", tape, "--strict"].map(quote).join(" ");
      const inOrder = await runCli(["batch", strict], { stdin: lines[0] + "\n" });
      assert.equal(JSON.parse(inOrder.stdout).content[0].text, "5");
      const twice = await runCli(["batch", strict], { stdin: [lines[0], lines[0]].join("\n") + "\n" });
      assert.match(twice.stdout.trim().split("\n")[1], /--strict expects|the cassette has none|no recorded request/);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  test("replay of a task: its tasks/get polls answer in the recorded order, matched by method and taskId", () => {
    const poll = (id: number, taskId: string) => ({ jsonrpc: "2.0", id, method: "tasks/get", params: { taskId } });
    const state = (id: number, taskId: string, status: string) => ({ jsonrpc: "2.0", id, result: { taskId, status } });
    const player = new CassettePlayer([
      { t: 1, dir: "send", message: poll(1, "a") },
      { t: 2, dir: "recv", message: state(1, "a", "working") },
      { t: 3, dir: "send", message: poll(2, "b") },
      { t: 4, dir: "recv", message: state(2, "b", "completed") },
      { t: 5, dir: "send", message: poll(3, "a") },
      { t: 6, dir: "recv", message: state(3, "a", "completed") },
    ]);
    const statusOf = (id: string, taskId: string) =>
      (player.answer({ ...poll(0, taskId), id }).at(-1) as Message).result.status;
    assert.deepEqual([statusOf("x", "a"), statusOf("y", "a"), statusOf("z", "a")], [
      "working",
      "completed",
      "completed",
    ]);
    assert.equal(statusOf("w", "b"), "completed");
    assert.equal(
      (player.answer({ ...poll(0, "c"), id: "v" }).at(-1) as Message).error.code,
      -32603,
      "an unrecorded task",
    );
  });

  test("replay --strict: a cassette opened by the dual-era probe replays to a legacy client", () => {
    const player = new CassettePlayer([
      { t: 0, dir: "send", message: { jsonrpc: "2.0", id: 0, method: "server/discover", params: {} } },
      { t: 1, dir: "recv", message: { jsonrpc: "2.0", id: 0, error: { code: -32601, message: "Method not found" } } },
      { t: 2, dir: "send", message: { jsonrpc: "2.0", id: 1, method: "initialize", params: INIT.params } },
      { t: 3, dir: "recv", message: { jsonrpc: "2.0", id: 1, result: { protocolVersion: "2025-11-25" } } },
      { t: 4, dir: "send", message: { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} } },
      { t: 5, dir: "recv", message: { jsonrpc: "2.0", id: 2, result: { tools: [] } } },
    ], { strict: true });
    const init = player.answer({ jsonrpc: "2.0", id: "a", method: "initialize", params: INIT.params });
    assert.deepEqual(init.at(-1)!.result, { protocolVersion: "2025-11-25" });
    const list = player.answer({ jsonrpc: "2.0", id: "b", method: "tools/list", params: {} });
    assert.deepEqual(list.at(-1)!.result, { tools: [] });
    const again = player.answer({ jsonrpc: "2.0", id: "c", method: "tools/list", params: {} });
    assert.ok(again.at(-1)!.error, "the rest keeps its order: each once");
  });
});

describe("15b. Proxy: telemetry, metrics, access lines", () => {
  test("with telemetry on, call → proxy → serve is one trace (the proxy's SERVER and CLIENT spans between); proxy --http --metrics serves /metrics", async () => {
    const receiver = await otlpReceiver();
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: "50" };
    const proxied = `${RUNTIME.join(" ")} ${MCP} proxy ${quote(SERVE)}`;
    const server = await startListening(
      [MCP, "proxy", SERVE, "--http", "127.0.0.1:0", "--token", "secret", "--metrics", "--metrics-token", "scrape"],
      /serving (http:\S+)/,
      env,
    );
    try {
      const run = await runCli(["call", proxied, "add", '{"a":1,"b":2}'], { env });
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, "3\n");
      const spans = await receiver.waitForSpans((spans) =>
        spans.filter((span) => span.name === "tools/call add").length >= 4
      );
      const calls = spans.filter((span) => span.name === "tools/call add");
      const byParent = new Map(calls.map((span) => [span.parentSpanId, span]));
      const client = calls.find((span) =>
        span.kind === 3 && span.resource["service.name"] === "mcp.ts" &&
        !calls.some((other) => other.spanId === span.parentSpanId)
      )!;
      const proxyServer = byParent.get(client.spanId)!;
      const proxyClient = byParent.get(proxyServer?.spanId)!;
      const upstreamServer = byParent.get(proxyClient?.spanId)!;
      assert.deepEqual([proxyServer?.kind, proxyClient?.kind, upstreamServer?.kind], [2, 3, 2], JSON.stringify(calls));
      assert.equal(new Set(calls.map((span) => span.traceId)).size, 1, "one trace");

      // Off (no OTEL_*), the proxy is transparent: over HTTP it counts what it forwards for a scraper.
      const viaHttp = await runCli(["call", server.url, "add", '{"a":1,"b":2}', "-H", "Authorization: Bearer secret"]);
      assert.equal(viaHttp.stdout, "3\n", viaHttp.stderr);
      // Over HTTP the traceparent header parents the proxy's SERVER span when _meta has none.
      const byHeader = await fetch(server.url, {
        method: "POST",
        headers: {
          ...JSON_HEADERS,
          authorization: "Bearer secret",
          "mcp-protocol-version": "2026-07-28",
          "mcp-method": "tools/call",
          "mcp-name": "add",
          traceparent: "00-11111111111111111111111111111111-2222222222222222-01",
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 9,
          method: "tools/call",
          params: modern({ name: "add", arguments: { a: 2, b: 2 } }),
        }),
      });
      assert.equal(byHeader.status, 200);
      await byHeader.body?.cancel();
      const fromHeader = (span: OtlpSpan) =>
        span.kind === 2 && span.traceId === "11111111111111111111111111111111" &&
        span.parentSpanId === "2222222222222222";
      const headerSpans = await receiver.waitForSpans((spans) => spans.some(fromHeader));
      const byProxy = headerSpans.find(fromHeader)!;
      assert.ok(
        byProxy,
        JSON.stringify(headerSpans.map((span) => [span.name, span.kind, span.traceId, span.parentSpanId])),
      );
      assert.equal(attribute(byProxy, "mcp.protocol.version"), "2026-07-28");
      const scrape = await fetch(new URL("/metrics", server.url), { headers: { authorization: "Bearer scrape" } });
      assert.equal(scrape.status, 200);
      const text = await scrape.text();
      for (const side of ["server", "client"]) {
        assert.match(
          text,
          new RegExp(
            `^mcp_${side}_operation_duration_seconds_count\\{[^}]*mcp_method_name="tools/call",gen_ai_tool_name="add"[^}]*\\} 2$`, // the call, then the one parented by its header
            "m",
          ),
        );
      }
      const tool = await fetch(server.url, {
        method: "POST",
        headers: { ...JSON_HEADERS, authorization: "Bearer scrape" },
        body: JSON.stringify(INIT),
      });
      assert.equal(tool.status, 401, "the metrics token is no key to the MCP endpoint");
      const anonymous = await fetch(new URL("/metrics", server.url));
      assert.equal(anonymous.status, 401, "nor is /metrics open without a token");
    } finally {
      server.close();
      receiver.close();
    }
  });
});

// Four tests at a time where the runner allows it (Node's does; Deno's and Bun's run them in order): each test has a
// daemon of its own, and most of their time is waiting for processes (35 s in order, 11 s so, on Node).
describe("15d. Sessions: the per-user daemon", { concurrency: 4 }, () => {
  // Each test its own state directory (mkdtemp makes it 0700), so its own daemon; stopped at the end whatever happens.
  async function withDaemon(body: (env: Record<string, string>, dir: string) => Promise<void>): Promise<void> {
    await withTempDir("mcp-daemon-", async (dir) => {
      const env = { MCP_TS_STATE_DIR: dir };
      try {
        await body(env, dir);
      } finally {
        await runCli(["daemon", "stop"], { env });
      }
    });
  }
  const status = async (env: Record<string, string>) =>
    JSON.parse((await runCli(["daemon", "status", "--json"], { env })).stdout);
  // Polls `check` until it holds: a daemon ends, a process dies, on its own time (no fixed sleep).
  async function eventually(check: () => Promise<boolean> | boolean, what: string, ms = 20_000): Promise<void> {
    const deadline = Date.now() + ms;
    for (let wait = 20; !(await check()); wait = Math.min(wait * 2, 250)) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(wait);
    }
  }

  test("the daemon's files are in the state directory; on Windows every session command is one usage error", () => {
    assert.deepEqual(daemonPaths({ MCP_TS_STATE_DIR: "/run/x" }, "linux"), {
      dir: "/run/x",
      socket: "/run/x/daemon.sock",
      token: "/run/x/daemon.token",
      log: "/run/x/daemon.log",
    });
    assert.equal(daemonPaths({ XDG_RUNTIME_DIR: "/run/user/7" }, "darwin").dir, "/run/user/7/mcp.ts");
    assert.throws(
      () => daemonPaths({ MCP_TS_STATE_DIR: "C:\\state" }, "win32"),
      (error: Error) =>
        error.name === "UsageError" && /^Cannot use sessions on Windows yet: .*named pipe/.test(error.message),
    );
  });

  test("connect, then call, list, batch and request @NAME; sessions; disconnect; the daemon ends with its last session", async () => {
    await withDaemon(async (env) => {
      const opened = await runCli(["connect", "tools", SERVE], { env });
      assert.equal(opened.code, 0, opened.stderr);
      // The era a command alone finds (serve speaks 2026-07-28): @NAME answers as the server does.
      assert.match(opened.stdout, /^session "@tools" is open: .* \(modern 2026-07-28\)\n$/);
      const { pid } = await status(env);
      assert.ok(pid > 0);
      const called = await runCli(["call", "@tools", "add", "a=2", "b=3", "--trace"], { env });
      assert.equal(called.stdout, "5\n", called.stderr);
      // The session's server/discover answer came with the daemon's hello: the command asks only what it needs.
      assert.deepEqual([...called.stderr.matchAll(/"method":"([^"]+)"/g)].map((match) => match[1]), [
        "tools/list",
        "tools/call",
      ]);
      // Exactly what the server itself answers, in either era (a 2025-11-25 server's answer has no envelope).
      for (const [server, name] of [[SERVE, "@tools"], [FAKE, "@fake"]]) {
        if (name === "@fake") assert.equal((await runCli(["connect", "fake", FAKE], { env })).code, 0);
        const through = await runCli(["call", name, "add", "a=2", "b=3", "--json"], { env });
        const direct = await runCli(["call", server, "add", "a=2", "b=3", "--json"], { env });
        assert.equal(through.stdout, direct.stdout, name);
      }
      assert.equal((await runCli(["disconnect", "fake"], { env })).code, 0);
      const listed = await runCli(["list", "@tools"], { env });
      assert.match(
        listed.stdout,
        /^add +a\*: number, b\*: number +Add two numbers$/m,
        "names and descriptions as served",
      );
      const batch = await runCli(["batch", "@tools"], {
        env,
        stdin: '{"tool":"add","arguments":{"a":1,"b":1}}\n{"tool":"echo","arguments":{"text":"hi"}}\n',
      });
      assert.equal(batch.code, 0, batch.stderr);
      assert.equal(batch.stdout.trim().split("\n").length, 2);
      const requested = await runCli(["request", "@tools", "tools/list"], { env });
      assert.equal(requested.code, 0, requested.stderr);
      assert.ok(JSON.parse(requested.stdout).tools.some((tool: Message) => tool.name === "slow"));
      // One daemon, one server: the commands came and went, the session stayed.
      assert.equal((await status(env)).pid, pid);
      const sessions = JSON.parse((await runCli(["sessions", "--json"], { env })).stdout).sessions;
      assert.deepEqual(
        sessions.map((s: Message) => [s.name, s.era, s.protocolVersion, s.calls, s.lastError]),
        [["tools", "modern", "2026-07-28", 4, null]], // two calls and a batch of two (calls count tools/call)
      );
      const closed = await runCli(["disconnect", "tools"], { env });
      assert.equal(closed.code, 0, closed.stderr);
      await eventually(async () => (await status(env)).pid === null, "the daemon to end");
      const log = await runCli(["daemon", "log"], { env });
      assert.match(
        log.stdout,
        /session "tools" opened[\s\S]*session "tools" closed: disconnected[\s\S]*daemon stopped/,
      );
    });
  });

  test("an unknown @NAME is exit 2 naming mcp.ts sessions; a connection flag with @NAME names connect --force", async () => {
    await withDaemon(async (env) => {
      const none = await runCli(["call", "@nope", "add"], { env });
      assert.equal(none.code, 2);
      assert.match(none.stderr, /no session "@nope" \(no daemon is running\); see: mcp\.ts sessions/);
      assert.equal((await runCli(["connect", "tools", SERVE], { env })).code, 0);
      const unknown = await runCli(["list", "@nope"], { env });
      assert.equal(unknown.code, 2);
      assert.match(unknown.stderr, /no session "@nope"; see: mcp\.ts sessions/);
      const flagged = await runCli(["call", "@tools", "add", "-H", "X: y", "--protocol", "legacy"], { env });
      assert.equal(flagged.code, 2);
      assert.match(
        flagged.stderr,
        /--header, --protocol set the connection of @tools, made at connect: .*connect --force tools/,
      );
      const again = await runCli(["connect", "tools", SERVE], { env });
      assert.equal(again.code, 2);
      assert.match(again.stderr, /session "tools" is open already; give --force/);
    });
  });

  test("a session to a URL: sessions and the daemon's log show it without its query (a token there stays unprinted)", async () => {
    await withDaemon(async (env) => {
      await withFakeHttp("dual", async (fake) => {
        const opened = await runCli(["connect", "web", `${fake.url}?key=s3cret`], { env });
        assert.equal(opened.code, 0, opened.stderr);
        assert.equal((await runCli(["call", "@web", "echo", "text=hi"], { env })).code, 0);
        const listed = await runCli(["sessions", "--json"], { env });
        assert.equal(JSON.parse(listed.stdout).sessions[0].server, fake.url);
        assert.doesNotMatch((await runCli(["sessions"], { env })).stdout, /s3cret/);
        assert.doesNotMatch((await runCli(["daemon", "log"], { env })).stdout, /s3cret/);
      });
    });
  });

  test("the state directory must be the user's own with mode 0700, else exit 2 saying why", async () => {
    await withTempDir("mcp-state-", async (dir) => {
      chmodSync(dir, 0o755);
      const run = await runCli(["connect", "tools", SERVE], { env: { MCP_TS_STATE_DIR: dir } });
      assert.equal(run.code, 2);
      assert.match(
        run.stderr,
        /Cannot use the state directory .*: its mode is 755: others may use it \(chmod 700 it\)/,
      );
      assert.deepEqual(readdirSync(dir), [], "nothing started, nothing written");
    });
  });

  test("a connection without the daemon's token is refused; with it, only a session that exists", async () => {
    await withDaemon(async (env, dir) => {
      assert.equal((await runCli(["connect", "tools", SERVE], { env })).code, 0);
      const hello = (line: string) =>
        new Promise<string>((resolve, reject) => {
          const socket = createConnection(join(dir, "daemon.sock"));
          let got = "";
          socket.on("data", (chunk) => got += chunk);
          socket.on("close", () => resolve(got));
          socket.on("error", reject);
          socket.write(line + "\n");
          setTimeout(() => socket.end(), 2_000);
        });
      const token = readFileSync(join(dir, "daemon.token"), "utf8").trim();
      assert.equal(statSync(join(dir, "daemon.token")).mode & 0o777, 0o600);
      assert.equal(statSync(join(dir, "daemon.sock")).mode & 0o777, 0o600);
      assert.match(
        await hello(JSON.stringify({ token: "x".repeat(token.length), session: "tools" })),
        /"ok":false.*not this daemon's token/,
      );
      assert.match(await hello("not json"), /"ok":false/);
      assert.match(await hello(JSON.stringify({ token, session: "other" })), /"ok":false.*no session \\"@other\\"/);
      const welcome = JSON.parse((await hello(JSON.stringify({ token, session: "tools" }))).split("\n")[0]);
      assert.deepEqual([welcome.ok, welcome.era], [true, "modern"]);
      // A modern session's server/discover answer comes with it (the command skips that round trip).
      assert.ok(welcome.discovered.supportedVersions.includes("2026-07-28"));
    });
  });

  test("two commands racing to start the daemon end with one daemon holding both sessions", async () => {
    await withDaemon(async (env) => {
      const [a, b] = await Promise.all([
        runCli(["connect", "a", SERVE], { env }),
        runCli(["connect", "b", SERVE], { env }),
      ]);
      assert.equal(a.code, 0, a.stderr);
      assert.equal(b.code, 0, b.stderr);
      const sessions = JSON.parse((await runCli(["sessions", "--json"], { env })).stdout).sessions;
      assert.deepEqual(sessions.map((s: Message) => s.name).sort(), ["a", "b"]);
      assert.equal((await status(env)).sessions, 2);
    });
  });

  test("a daemon killed with SIGKILL leaves no server process behind", async () => {
    await withDaemon(async (env, dir) => {
      mkdirSync(join(dir, "tools"));
      writeFileSync(
        join(dir, "tools", "pid.ts"),
        'import process from "node:process";\nexport default { run: () => String(process.pid) };\n',
      );
      const server = [...RUNTIME, MCP, "serve", join(dir, "tools")].map(quote).join(" ");
      assert.equal((await runCli(["connect", "s", server], { env })).code, 0);
      const serverPid = Number((await runCli(["call", "@s", "pid"], { env })).stdout);
      assert.ok(serverPid > 0);
      process.kill((await status(env)).pid, "SIGKILL");
      await eventually(() => !alive(serverPid), "the server to end with its stdin");
      // The next command finds the socket stale, starts a daemon afresh.
      const again = await runCli(["connect", "s", server], { env });
      assert.equal(again.code, 0, again.stderr);
    });
  });

  test("connect to a server that cannot start fails as a call would: exit 3, one line, the tail of its stderr", async () => {
    await withDaemon(async (env) => {
      const args = [FAKE, "-e", "FAKE_MODE=crash-before"];
      const [direct, opened] = [await runCli(["list", ...args]), await runCli(["connect", "broken", ...args], { env })];
      assert.equal(direct.code, 3, direct.stderr);
      assert.equal(opened.code, 3, opened.stderr);
      assert.match(
        opened.stderr,
        /^mcp: .*\nmcp: the server's stderr ends with:\nfake: fatal: cannot open the database\n$/,
      );
      assert.equal(opened.stderr, direct.stderr, "what the command alone would say");
      const json = await runCli(["connect", "broken", ...args, "--json"], { env });
      assert.match(JSON.parse(json.stderr).stderr, /fake: fatal: cannot open the database/);
    });
  });

  test("disconnect answers a call in flight with an error (exit 3); a crashed server is reported, restarted only with --retries", async () => {
    await withDaemon(async (env, dir) => {
      assert.equal((await runCli(["connect", "tools", SERVE], { env })).code, 0);
      const slow = runCli(["call", "@tools", "slow", "steps=100", "ms=100"], { env });
      await eventually(async () => {
        const sessions = JSON.parse((await runCli(["sessions", "--json"], { env })).stdout).sessions;
        return sessions[0]?.calls === 1;
      }, "the call to be in flight");
      assert.equal((await runCli(["disconnect", "tools"], { env })).code, 0);
      const ended = await slow;
      assert.equal(ended.code, 3, ended.stderr);

      const state = join(dir, "fake-state");
      const crashing = await runCli([
        "connect",
        "c",
        FAKE,
        "-e",
        "FAKE_MODE=crash-call-once",
        "-e",
        `FAKE_STATE=${state}`,
      ], {
        env,
      });
      assert.equal(crashing.code, 0, crashing.stderr);
      assert.equal((await runCli(["call", "@c", "echo", "text=x"], { env })).code, 3, "it died under the call");
      const next = await runCli(["call", "@c", "echo", "text=x"], { env });
      assert.equal(next.code, 3, "reported on the next use, not restarted");
      assert.match(next.stderr, /is down \(the server exited with code \d+\); it is not started again\n/);
      const lastError = JSON.parse((await runCli(["sessions", "--json"], { env })).stdout).sessions[0].lastError;
      assert.match(lastError, /exited/);
      rmSync(state, { force: true });
      const retried = await runCli(
        [
          "connect",
          "c",
          FAKE,
          "--force",
          "--retries",
          "1",
          "-e",
          "FAKE_MODE=crash-call-once",
          "-e",
          `FAKE_STATE=${state}`,
        ],
        { env },
      );
      assert.equal(retried.code, 0, retried.stderr);
      assert.equal((await runCli(["call", "@c", "echo", "text=x"], { env })).code, 3);
      await eventually(async () => (await runCli(["call", "@c", "echo", "text=x"], { env })).code === 0, "the restart");
    });
  });

  test("a task made through @NAME outlives the command: call --detach, then task @NAME get and result (either era)", async () => {
    await withDaemon(async (env) => {
      const server = [...RUNTIME, MCP, "serve", HERE + "testdata/conformance/tools_tasks.ts"].map(quote).join(" ");
      for (const protocol of ["legacy", "auto"]) {
        // legacy: the 2025-11-25 experimental tasks (server-everything's kind), turned into SEP-2663 ones.
        const opened = await runCli(["connect", "t", server, "--protocol", protocol, "--force"], { env });
        assert.equal(opened.code, 0, opened.stderr);
        const detached = await runCli(["call", "@t", "slow_compute", "seconds=1", "--detach"], { env });
        assert.equal(detached.code, 0, detached.stderr);
        const id = detached.stdout.trim();
        assert.match(id, /^t__\S+$/);
        const got = await runCli(["task", "@t", "get", id], { env });
        assert.match(got.stdout, /^(working: computing "job"|completed: 1\/1 seconds)\n$/, got.stderr);
        const result = await runCli(["task", "@t", "result", id], { env });
        assert.deepEqual([result.code, result.stdout], [
          0,
          'Computation "job" completed after 1 seconds. Result: 42.\n',
        ], protocol);
      }
    });
  });

  test("--idle ends an unused session, and the daemon with it; a connection in use keeps it", async () => {
    await withDaemon(async (env) => {
      // (2 s: the next command must start within it on a busy machine, where Node takes half a second.)
      assert.equal((await runCli(["connect", "brief", SERVE, "--idle", "2000"], { env })).code, 0);
      // A call that takes longer than the idle time keeps the session: it is in use.
      const slow = await runCli(["call", "@brief", "slow", "steps=25", "ms=100"], { env });
      assert.equal(slow.code, 0, slow.stderr);
      await eventually(async () => (await status(env)).pid === null, "the idle session and the daemon to end");
      assert.match((await runCli(["daemon", "log"], { env })).stdout, /session "brief" closed: idle for 2000 ms/);
    });
  });

  test("a hung server does not hang another session", async () => {
    await withDaemon(async (env) => {
      assert.equal((await runCli(["connect", "hung", FAKE, "-e", "FAKE_MODE=hang"], { env })).code, 0);
      assert.equal((await runCli(["connect", "tools", SERVE], { env })).code, 0);
      const stuck = runCli(["call", "@hung", "echo", "text=x", "--timeout", "60000"], { env });
      const calls = async (name: string) =>
        JSON.parse((await runCli(["sessions", "--json"], { env })).stdout).sessions.find((s: Message) =>
          s.name === name
        )
          ?.calls;
      await eventually(async () => (await calls("hung")) === 1, "the hung call to be in flight");
      const called = await runCli(["call", "@tools", "add", "a=1", "b=2"], { env });
      assert.equal(called.stdout, "3\n", called.stderr);
      assert.equal((await runCli(["disconnect", "hung"], { env })).code, 0);
      assert.equal((await stuck).code, 3);
    });
  });

  test("a window that stops reading: the session holds back, drops its progress and log lines (counted), never the answer", async () => {
    await withDaemon(async (env) => {
      const flooding = [HOSTILE, "-e", "HOSTILE_MODE=flood", "-e", "HOSTILE_FLOOD_COUNT=20000"];
      assert.equal((await runCli(["connect", "flood", ...flooding], { env })).code, 0);
      const window = new ServerProcess(["flood"], false, "attach", env);
      try {
        await window.initialize();
        await window.request("level", "logging/setLevel", { level: "debug" });
        window.call(1, "flood");
        await window.until(() => window.messages.some((m) => m.method === "notifications/message"), "the flood");
        window.child.stdout!.pause(); // a host window that does not read
        // The call ends meanwhile, and the daemon's log says what it dropped.
        const line = /@flood: dropped (\d+) progress and log notification\(s\) of flood: the client was not reading/;
        let log = "";
        await eventually(async () => line.test(log = (await runCli(["daemon", "log"], { env })).stdout), "the count");
        window.child.stdout!.resume();
        const sent = Number(/^flooded (\d+)$/.exec(text((await window.response(1, 60_000)).result))?.[1]);
        const received = window.messages.filter((m) => m.method === "notifications/message").length;
        const dropped = [...log.matchAll(new RegExp(line, "g"))].reduce((sum, match) => sum + Number(match[1]), 0);
        assert.ok(dropped > 0 && received > 0, `received ${received}, dropped ${dropped} of ${sent}`);
        assert.equal(received + dropped, sent, "each line received or counted as dropped");
      } finally {
        await window.end();
      }
    });
  });

  test("two attach clients share one session: overlapping calls with the same ids, each its own answers and questions", async () => {
    await withDaemon(async (env) => {
      const server = [...RUNTIME, MCP, "serve", HERE + "testdata/conformance/tools.ts"].map(quote).join(" ");
      assert.equal((await runCli(["connect", "conf", server], { env })).code, 0);
      const a = new ServerProcess(["conf"], false, "attach", env);
      const b = new ServerProcess(["conf"], false, "attach", env);
      try {
        await a.request("init", "initialize", { ...INIT.params, capabilities: { elicitation: {} } });
        a.send({ jsonrpc: "2.0", method: "notifications/initialized" });
        await b.initialize();
        // Fifty requests, each its own write: attach forwards every byte as it came (none re-read from a buffer its
        // stdin filled again before the socket took the last chunk).
        for (let id = 100; id < 150; id++) {
          b.call(id, "test_simple_text");
          await new Promise((resolve) => setImmediate(resolve)); // separate reads of its stdin
        }
        for (let id = 100; id < 150; id++) assert.ok((await b.response(id)).result, `answer ${id}`);
        assert.ok(!b.messages.some((m) => m.error), JSON.stringify(b.messages.find((m) => m.error)));
        // The same id on both, the calls overlapping: each gets its own answer.
        a.call(1, "test_tool_with_progress", {});
        b.call(1, "test_simple_text");
        assert.match(text((await b.response(1)).result), /This is a simple text response for testing/);
        assert.ok((await a.response(1)).result, "a's own answer to its id 1");
        // A question while only a's call is in flight goes to a, never to b.
        a.call(2, "test_elicitation", { message: "for a" });
        await a.until(() => a.messages.some((m) => m.method === "elicitation/create"), "a's question");
        const question = a.messages.find((m) => m.method === "elicitation/create")!;
        assert.equal(question.params.message, "for a");
        assert.ok(!b.messages.some((m) => m.method === "elicitation/create"), "b never sees a's question");
        a.send({
          jsonrpc: "2.0",
          id: question.id,
          result: { action: "accept", content: { username: "a", email: "a@x" } },
        });
        assert.match(text((await a.response(2)).result), /action=accept, content=\{"username":"a"/);
        // Over stdio a server's question names no call: while both clients' calls are in flight it is refused, not
        // guessed; once b's is done (a busy machine) it is a's alone. Either way b is never asked.
        b.call(3, "test_tool_with_progress", {});
        a.call(3, "test_elicitation", { message: "whose?" });
        await a.until(
          () =>
            a.messages.some((m) => m.id === 3 && !m.method) || a.messages.some((m) => m.params?.message === "whose?"),
          "a's answer or a's question",
        );
        const asked = a.messages.find((m) => m.method === "elicitation/create" && m.params?.message === "whose?");
        if (asked) a.send({ jsonrpc: "2.0", id: asked.id, result: { action: "decline" } });
        else assert.match(text((await a.response(3)).result), /calls of several clients are in flight/);
        assert.ok((await a.response(3)).result);
        assert.ok((await b.response(3)).result);
        assert.ok(!b.messages.some((m) => m.params?.message === "whose?"), "b is never asked a's question");
      } finally {
        a.kill();
        b.kill();
        await Promise.all([a.exit, b.exit]);
      }
    });
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("16. Output", () => {
  test("peer text never forges output: a progress value, an upstream's stderr and its errors are shown, never acted on", async () => {
    // deno-lint-ignore no-control-regex
    const acting = /[\x07\x1b\x9b]/;
    // A string progress value on a terminal's status line.
    const progress = await mainWith(["call", HOSTILE, "slow", "-e", "HOSTILE_MODE=progress-escapes"], true);
    assert.equal(progress.code, 0, progress.stderr);
    assert.equal(progress.stdout, "done\n");
    assert.match(progress.stderr, /progress 50\^\[\]0;pwned\^G\/100\^\[\[2J m\^\[\]52;c;SGVsbG8=\^G/);
    assert.doesNotMatch(progress.stderr.replaceAll("\r\x1b[K", ""), acting, "only our own erase is a control");
    // The proxy passes an upstream's stderr on: on a real terminal (a pty), visible.
    const forge = ["env", "HOSTILE_MODE=forge-log", HOSTILE];
    const initialize = JSON.stringify(INIT);
    const proxied = [...RUNTIME, MCP, "proxy", forge.join(" ")].map(quote).join(" ");
    const pty = spawnSync("script", ["-qec", `printf '%s\\n' ${quote(initialize)} | ${proxied}`, "/dev/null"], {
      encoding: "utf8",
      timeout: 20_000,
    });
    if (pty.error === undefined) {
      assert.match(pty.stdout, /\^\[\]0;t\^G/, pty.stdout);
      assert.ok(!pty.stdout.includes("\x1b]0;t"), "the upstream's OSC never reached the terminal");
    }
    // With --log-format json an upstream's error, newlines and all, is one entry of the gateway's; only the real
    // ready line has a url.
    const gateway = await startListening(
      [MCP, "gateway", `evil=${forge.join(" ")}`, "--http", "0", "--log-format", "json"],
      /"url":"([^"]+)"/,
    );
    try {
      const text = await gateway.printed(/evil\.test/);
      const entries = text.trimEnd().split("\n").map((line) => JSON.parse(line)); // each line is one JSON entry
      assert.deepEqual(entries.filter((entry) => entry.url !== undefined).map((entry) => entry.url), [gateway.url]);
      const told = entries.filter((entry) => entry.msg.includes("evil.test"));
      assert.equal(told.length, 1, "one entry holds the upstream's whole text");
      assert.match(told[0].msg, /nope\nmcp: serving http:\/\/evil\.test\/mcp\n/);
    } finally {
      gateway.close();
    }
  });

  test("peer text never forges output: a runtime's error message loses a URL's credentials and query where it is printed and logged", async () => {
    const closed = createNetServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as { port: number }).port;
    await new Promise((resolve) => closed.close(resolve));
    const url = `http://u:p4ss@127.0.0.1:${port}/mcp?key=s3cret`;
    const [text, json] = await Promise.all([
      runCli(["call", url, "echo"]),
      runCli(["call", url, "echo", "--log-format", "json"], { spawn: true }),
    ]);
    for (const run of [text, json]) {
      assert.equal(run.code, 3, run.stderr);
      assert.doesNotMatch(run.stderr, /p4ss|s3cret/);
    }
    assert.equal(JSON.parse(json.stderr.trimEnd().split("\n").at(-1)!).level, "error");
  });

  test("renderCallResult() on a terminal sums up binary items, and never prints structured content that repeats them", () => {
    const png = btoa("x".repeat(27_340));
    const image = { type: "image", data: png, mimeType: "image/png" };
    const audio = { type: "audio", data: "AAAA", mimeType: "audio/wav" };
    const blob = { type: "resource", resource: { uri: "test://b", mimeType: "image/png", blob: "AAA=" } };
    assert.deepEqual(renderCallResult({ content: [image, audio, blob] }, { terminal: true }), {
      stdout: "[image image/png, 26.7 KB]\n[audio audio/wav, 3 B]\n[resource test://b image/png, 2 B]\n",
      stderr: "",
    });
    const repeated = { content: [image], structuredContent: { image: { ...image } } };
    assert.equal(renderCallResult(repeated, { terminal: true }).stdout, "[image image/png, 26.7 KB]\n");
    assert.equal(renderCallResult(repeated).stdout, JSON.stringify(image) + "\n", "piped: the item once, as JSON");
  });

  test("renderCallResult() prints text items, then other content as JSON lines", () => {
    const image = { type: "image", data: "AA==", mimeType: "image/png" };
    assert.deepEqual(renderCallResult({ content: [{ type: "text", text: "a" }, image, { type: "text", text: "b" }] }), {
      stdout: `a\n${JSON.stringify(image)}\nb\n`,
      stderr: "",
    });
    assert.deepEqual(renderCallResult({ content: [], structuredContent: { x: 1 } }), {
      stdout: '{"x":1}\n',
      stderr: "",
    });
    assert.deepEqual(
      renderCallResult({ content: [{ type: "text", text: "t" }], structuredContent: { x: 1 } }),
      { stdout: "t\n", stderr: "" },
    );
    assert.deepEqual(renderCallResult({ content: [{ type: "text", text: "bad" }], isError: true }), {
      stdout: "",
      stderr: "bad\n",
    });
  });

  test("renderToolList() and renderInfo() are one line per item", () => {
    assert.equal(
      renderToolList([{ name: "a", description: "First\nsecond" }, { name: "long_name" }, {
        name: "b",
        description: "B",
      }]),
      "a          First\nlong_name\nb          B\n",
    );
    const tools = [
      {
        name: "weather",
        description: "Weather",
        inputSchema: {
          type: "object",
          properties: {
            city: { type: "string" },
            days: { type: "integer" },
            tags: { type: "array", items: { enum: ["a", "b"] } },
          },
          required: ["city"],
        },
      },
      {
        name: "add",
        description: "Add",
        inputSchema: { type: "object", properties: { a: { type: ["number", "null"] } } },
      },
    ];
    assert.equal(
      renderToolList(tools),
      'weather  city*: string, days: integer, tags: ("a"|"b")[]  Weather\n' +
        `add      ${"a: number|null".padEnd(47)}  Add\n`,
      "piped: every cell whole, the columns aligned",
    );
    assert.equal(
      renderToolList(tools, { width: 200 }),
      `weather  ${'city*: string, days: integer, tags: ("a…'}  Weather\n` +
        `add      ${"a: number|null".padEnd(40)}  Add\n`,
      "on a terminal: a cell over 40 cut, the table kept",
    );
    assert.equal(renderToolList(tools, { width: 24 }), "weather  city*: string,…\nadd      a: number|null…\n");
    const info = renderInfo({
      protocolVersion: "2025-11-25",
      serverInfo: { name: "s", version: "1" },
      capabilities: { tools: { listChanged: true }, logging: {} },
      instructions: "Hi",
    });
    assert.equal(
      info,
      "protocol:      2025-11-25\nserver:        s 1\ncapabilities:  tools (listChanged), logging\ninstructions:  Hi\n",
    );
  });

  test("a server's control sequences are shown, never acted on, on a terminal; piped and --json stay exact", async () => {
    const server = [HOSTILE, "-e", "HOSTILE_MODE=escapes"];
    // deno-lint-ignore no-control-regex
    const acting = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/; // what a terminal would act on (newline and tab aside)
    for (
      const argv of [
        ["call", ...server.slice(0, 1), "evil", ...server.slice(1), "-v"],
        ["call", ...server.slice(0, 1), "fail", ...server.slice(1)],
        ["list", ...server],
        ["list", server[0], "evil", ...server.slice(1)],
        ["info", ...server],
        ["prompts", ...server],
        ["prompt", server[0], "p", ...server.slice(1)],
        ["resources", ...server],
        ["read", server[0], "hostile://r", ...server.slice(1)],
      ]
    ) {
      const shown = await mainWith(argv, true);
      assert.doesNotMatch(shown.stdout + shown.stderr, acting, `${argv[0]} ${argv[2] ?? ""}: ${shown.stderr}`);
      assert.match(shown.stdout + shown.stderr, /\^\[/, `${argv[0]}: the escape is shown as ^[`);
    }
    const call = await mainWith(["call", HOSTILE, "evil", "-e", "HOSTILE_MODE=escapes"], true);
    assert.equal(call.stdout, "before^Mafter^[[2J\\x9b31m^G end\n");
    const failed = await mainWith(["call", HOSTILE, "fail", "-e", "HOSTILE_MODE=escapes"], true);
    assert.equal(failed.code, 3);
    assert.match(failed.stderr, /boom\^\[\]0;title\^G/);
    const piped = await mainWith(["call", HOSTILE, "evil", "-e", "HOSTILE_MODE=escapes"], false);
    assert.equal(piped.stdout, "before\rafter\x1b[2J\x9b31m\x07 end\n", "piped: exact");
    const json = await mainWith(["call", HOSTILE, "evil", "-e", "HOSTILE_MODE=escapes", "--json"], true);
    assert.equal(JSON.parse(json.stdout).content[0].text, "before\rafter\x1b[2J\x9b31m\x07 end", "--json: exact");
    // deno-lint-ignore no-control-regex
    assert.doesNotMatch(json.stdout, /[\x00-\x09\x0b-\x1f\x7f-\x9f]/, "--json on a terminal: the same value, escaped");
    assert.equal(visible("a\tb\nc\x1b]52;c;SGVsbG8=\x07\x7f\x9b"), "a\tb\nc^[]52;c;SGVsbG8=^G^?\\x9b");
  });

  test("list keeps its columns with a long argument list; list TOOL shows nested fields as an indented list", () => {
    const long = {
      name: "x",
      inputSchema: {
        type: "object",
        properties: Object.fromEntries(
          Array.from({ length: 12 }, (_, i) => [`argument_${i}`, { type: "string" }]),
        ),
      },
      description: "Long",
    };
    const rows = renderToolList([long, { name: "y", inputSchema: { type: "object" }, description: "Short" }], {
      width: 200,
    }).split("\n");
    assert.equal(rows[0].indexOf("Long"), rows[1].indexOf("Short"), rows.join("\n"));
    assert.match(rows[0], /…/);
    const detail = renderToolDetail({
      name: "order",
      inputSchema: {
        type: "object",
        properties: {
          items: {
            type: "array",
            items: {
              type: "object",
              properties: { sku: { type: "string" }, qty: { type: "integer" } },
              required: ["sku"],
            },
          },
        },
      },
      outputSchema: { type: "object", properties: { total: { type: "number" } }, required: ["total"] },
    });
    assert.match(detail, /\n {2}items +object\[\]\n {4}sku\* +string\n {4}qty +integer\n/);
    assert.match(detail, /\noutput \(\* = always there\):\n {2}total\* +number\n/);
  });
});

describe("16b. Logs as JSON lines", () => {
  test("--log-format json (or MCP_TS_LOG_FORMAT): a failure is one JSON line with its level, message and exit code", async () => {
    const flag = await runCli(["call", SERVE, "nosuch", "{}", "--log-format", "json"]);
    const env = await runCli(["call", SERVE, "nosuch", "{}"], { env: { MCP_TS_LOG_FORMAT: "json" } });
    for (const run of [flag, env]) {
      assert.equal(run.code, 2);
      assert.equal(run.stdout, "");
      const lines = run.stderr.trimEnd().split("\n");
      assert.equal(lines.length, 1, run.stderr);
      const entry = JSON.parse(lines[0]);
      assert.match(entry.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.equal(entry.level, "error");
      assert.match(entry.msg, /^the server has no tool named "nosuch"/);
      assert.equal(entry.exit_code, 2);
    }
    const bad = await runCli(["list", SERVE, "--log-format", "yaml"]);
    assert.equal(bad.code, 2);
    assert.equal(bad.stderr, 'mcp: --log-format takes text or json, got "yaml"\n');
  });

  test("serve --log-format json: an access line per request, a plugin's console, stdout and an executable's stderr as lines of its call", async () => {
    await withTempDir("mcp-jsonlog-", async (dir) => {
      writeFileSync(
        join(dir, "chatty.ts"),
        'export default { run: () => { console.log("hello %s", "world"); console.error("oops"); ' +
          'process.stdout.write("raw\\n"); return "done"; } };',
      );
      writeFileSync(join(dir, "noisy.sh"), '#!/bin/sh\necho "@warning careful" >&2\necho plain >&2\necho fine\n');
      spawnSync("chmod", ["+x", join(dir, "noisy.sh")]);
      const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
      const call = {
        jsonrpc: "2.0",
        id: 7,
        method: "tools/call",
        params: { name: "chatty", arguments: {}, _meta: { traceparent } },
      };
      const executable = { ...call, id: 8, params: { ...call.params, name: "noisy" } };
      const stdin = [INIT, { jsonrpc: "2.0", method: "notifications/initialized" }, call, executable]
        .map((message) => JSON.stringify(message) + "\n").join("");
      const run = await runCli(["serve", dir, "--log-format", "json"], { stdin, spawn: true });
      assert.equal(run.code, 0, run.stderr);
      const answers = run.stdout.trimEnd().split("\n").map((line) => JSON.parse(line));
      assert.ok(answers.every((message) => message.jsonrpc === "2.0"), "stdout carries the protocol alone");
      const ids = answers.filter((message) => "id" in message).map((message) => message.id);
      assert.deepEqual(ids.sort(), [7, 8, "init"]);
      assert.equal(answers.find((answer) => answer.id === 7).result.content[0].text, "done");
      const entries = run.stderr.trimEnd().split("\n").map((line) => JSON.parse(line));
      const trace = { trace_id: "0af7651916cd43dd8448eb211c80319c", span_id: "b7ad6b7169203331", trace_flags: "01" };
      const plugin = entries.filter((entry) => entry.source === "plugin");
      assert.deepEqual(plugin.filter((entry) => entry.tool === "chatty").map(({ time: _, ...rest }) => rest), [
        { level: "info", msg: "hello world", source: "plugin", tool: "chatty", ...trace },
        { level: "error", msg: "oops", source: "plugin", tool: "chatty", ...trace },
      ]);
      assert.deepEqual(plugin.filter((entry) => entry.tool === "noisy").map(({ time: _, ...rest }) => rest), [
        { level: "warn", msg: "careful", source: "plugin", tool: "noisy", ...trace },
        { level: "info", msg: "plain", source: "plugin", tool: "noisy", ...trace },
      ]);
      assert.ok(entries.some((entry) => entry.msg === "raw"), "a plugin's stdout is a line too, never protocol");
      const access = entries.find((entry) => entry.msg === "tools/call chatty");
      assert.ok(access, run.stderr);
      assert.equal(access["mcp.method.name"], "tools/call");
      assert.equal(access["gen_ai.tool.name"], "chatty");
      assert.equal(access["jsonrpc.request.id"], "7");
      assert.equal(typeof access.duration_ms, "number");
      assert.equal(access.trace_id, trace.trace_id);
      assert.ok(entries.some((entry) => entry.msg === "initialize" && entry.level === "info"));
    });
  });

  test("serve --log-format json gives the console back as it found it: after serving, console.log is stdout again", async () => {
    await withTempDir("mcp-console-", async (dir) => {
      // The plugin's exit handler runs after serve has undone its wrappers (the JSON lines', then the stdout guard's).
      writeFileSync(
        join(dir, "probe.ts"),
        'import process from "node:process";\nprocess.on("exit", () => console.log("after-serve"));\n' +
          'export default { run: () => "ok" };\n',
      );
      const run = await runCli(["serve", dir, "--log-format", "json"], { stdin: "", spawn: true });
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, "after-serve\n", `stderr: ${run.stderr}`);
    });
  });

  test("--log-format json levels: a plugin that fails to load is error; a request answered with an error and a tool's error text warn", async () => {
    await withTempDir("mcp-jsonlevels-", async (dir) => {
      writeFileSync(join(dir, "broken.ts"), "export default {");
      mkdirSync(join(dir, "skills", "nofront"), { recursive: true });
      writeFileSync(join(dir, "skills", "nofront", "SKILL.md"), "no frontmatter\n");
      writeFileSync(
        join(dir, "ok.ts"),
        'export default { run: () => ({ content: [{ type: "text", text: "bad" }], isError: true }) };',
      );
      const calls = [
        { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "nosuch", arguments: {} } },
        { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "ok", arguments: {} } },
      ];
      const stdin = [INIT, ...calls].map((message) => JSON.stringify(message) + "\n").join("");
      const served = await runCli(["serve", dir, "--log-format", "json"], { stdin, spawn: true });
      const entries = served.stderr.trimEnd().split("\n").map((line) => JSON.parse(line));
      const levelOf = (pattern: RegExp) => entries.find((entry) => pattern.test(entry.msg))?.level;
      assert.equal(levelOf(/^Cannot load .*broken\.ts/), "error", served.stderr);
      assert.equal(levelOf(/^tools\/call nosuch$/), "warn");
      assert.equal(levelOf(/^tools\/call ok$/), "warn");
      assert.equal(levelOf(/^initialize$/), "info");
      assert.equal(levelOf(/^warning: skipped skill /), "warn", "a warning: line is level warn");
      const called = await runCli([
        "call",
        [...RUNTIME, MCP, "serve", dir].map(quote).join(" "),
        "ok",
        "--log-format",
        "json",
      ]);
      assert.equal(called.code, 1);
      const told = called.stderr.trimEnd().split("\n").map((line) => JSON.parse(line)).find((entry) =>
        entry.msg === "bad"
      );
      assert.deepEqual([told?.level, told?.source], ["warn", "tool"], called.stderr);
    });
  });
});

describe("17. CLI", () => {
  test("ARGS: key=@@x is the text @x, and a value read from a file that does not fit is shown by its start only", async () => {
    await withTempDir("mcp-args-at-", async (dir) => {
      writeFileSync(join(dir, "n.txt"), "not a number\n" + "x".repeat(10_000));
      const [escaped, wrong] = await Promise.all([
        runCli(["call", SERVE, "echo", "text=@@handle"]),
        runCli(["call", SERVE, "add", `a=@${join(dir, "n.txt")}`, "b=1"]),
      ]);
      assert.equal(escaped.stdout, "@handle\n", escaped.stderr);
      assert.equal(wrong.code, 2);
      assert.match(wrong.stderr, /^mcp: Cannot read a="not a number\\nx+\.\.\.: a must be a number$/m);
      assert.ok(wrong.stderr.length < 300, wrong.stderr);
    });
  });

  test("each client command takes its own flags: one that does not apply is exit 2 naming it, before anything starts", async () => {
    const refused = await Promise.all([
      runCli(["ping", SERVE, "--force"]),
      runCli(["ping", SERVE, "--concurrency", "3"]),
      runCli(["list", SERVE, "--out", "/x"]),
      runCli(["info", SERVE, "--detach"]),
      runCli(["read", SERVE, "x://y", "--meta", "{}"]),
      runCli(["batch", SERVE, "-o", "f"]),
    ]);
    for (
      const [run, flag] of refused.map((run, i) =>
        [run, ["--force", "--concurrency", "--out", "--detach", "--meta", "-o"][i]] as const
      )
    ) {
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, new RegExp(`Unknown option '${flag}'`), run.stderr);
    }
  });

  test("call ↔ serve end to end: JSON, key=value, stdin and @file ARGS", async () => {
    await withTempDir("mcp-args-", async (dir) => {
      writeFileSync(join(dir, "args.json"), '{"a":20,"b":22}');
      const runs = await Promise.all([
        runCli(["call", SERVE, "add", '{"a":2,"b":3}']),
        runCli(["call", SERVE, "add", "a=2", "b=3.5"]),
        runCli(["call", SERVE, "add", "-"], { stdin: '{"a":1,"b":1}' }),
        runCli(["call", SERVE, "add", "@" + join(dir, "args.json")]),
        runCli(["call", SERVE, "weather", "city=Oslo", "--json"]),
      ]);
      assert.deepEqual(runs.map((run) => [run.code, run.stdout, run.stderr]), [
        [0, "5\n", ""],
        [0, "5.5\n", ""],
        [0, "2\n", ""],
        [0, "42\n", ""],
        [0, runs[4].stdout, ""],
      ]);
      assert.deepEqual(JSON.parse(runs[4].stdout).structuredContent, {
        city: "Oslo",
        temperature: 28,
        unit: "celsius",
      });
    });
  });

  test("call: isError prints to stderr and exits 1; an unknown tool exits 2 with the closest names", async () => {
    const [failed, unknown, invalid] = await Promise.all([
      runCli(["call", SERVE, "fail", "message=nope"]),
      runCli(["call", SERVE, "ad", "{}"]),
      runCli(["call", SERVE, "add", '{"a":"x","b":1}']),
    ]);
    assert.deepEqual([failed.code, failed.stdout, failed.stderr], [1, "", "nope\n"]);
    assert.equal(unknown.code, 2);
    assert.equal(unknown.stderr, 'mcp: the server has no tool named "ad"; did you mean add?\n');
    assert.equal(invalid.code, 1);
    assert.match(invalid.stderr, /arguments\.a must be number/);
  });

  test("call: bad ARGS exit 2 before anything is spawned", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-nospawn-"));
    const marker = join(dir, "spawned");
    try {
      for (const args of [["[1,2]"], ["{not json"], ["a", "b"], ["@" + join(dir, "missing.json")]]) {
        const run = await runCli(["call", `touch ${quote(marker)}`, "tool", ...args]);
        assert.equal(run.code, 2, args.join(" "));
        assert.match(run.stderr, /^mcp: .+\n$/);
      }
      assert.ok(!existsSync(marker), "the server command never ran");
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  test("call prints other content as JSON lines and structuredContent when there is no text", async () => {
    const [image, structured] = await Promise.all([
      runCli(["call", FAKE, "image"]),
      runCli(["call", FAKE, "structured"]),
    ]);
    assert.equal(image.stdout, 'a pixel:\n{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}\n');
    assert.equal(structured.stdout, '{"temperature":21,"unit":"celsius"}\n');
  });

  test("call: key=value follows the tool's schema", async () => {
    const run = await runCli(["call", FAKE, "zip", "zip=007", "n=7", "on=false", "list=[1]", "extra=x"]);
    assert.deepEqual(JSON.parse(run.stdout), { zip: "007", n: 7, on: false, list: [1], extra: "x" });
    const bad = await runCli(["call", FAKE, "zip", "n=seven"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /n must be an integer/);
  });

  test("a server that cannot start or dies exits 3 with one line and the tail of its stderr", async () => {
    const [missing, before, after] = await Promise.all([
      runCli(["call", "no-such-command-xyz --flag", "echo"]),
      runCli(["call", FAKE, "echo", "-e", "FAKE_MODE=crash-before"]),
      runCli(["call", FAKE, "echo", "-e", "FAKE_MODE=crash-after"]),
    ]);
    assert.equal(missing.code, 3);
    assert.equal(missing.stderr, 'mcp: Cannot start "no-such-command-xyz": command not found\n');
    assert.equal(before.code, 3);
    assert.match(
      before.stderr,
      /^mcp: the server exited with code 1 before answering server\/discover, .*--protocol legacy/,
    );
    assert.match(before.stderr, /fake: fatal: cannot open the database/);
    assert.equal(after.code, 3);
    assert.match(after.stderr, /^mcp: the server exited with code 3\n/);
    assert.match(after.stderr, /fake: crashing on tools\/call/);
  });

  test("--timeout is idle time: a call that sends progress goes on past it", async () => {
    // 2 s: a busy machine starts the server within it; progress comes every 0.7 s, the whole call takes 3.5 s.
    const alive = await runCli(["call", SERVE, "slow", "steps=5", "ms=700", "--timeout", "2000"]);
    assert.deepEqual([alive.code, alive.stdout], [0, "waited 5 x 700 ms\n"], alive.stderr);
  });

  test("a request that times out is cancelled, exits 3, and the server is shut down", async () => {
    // --timeout is each request's: 3 s lets a busy machine start the server and answer initialize first.
    const run = await runCli(["call", FAKE, "echo", "--timeout", "3000", "-e", "FAKE_MODE=hang"]);
    assert.equal(run.code, 3);
    assert.match(run.stderr, /^mcp: tools\/call timed out: no answer or progress for 3000 ms \(--timeout\)\n/);
    assert.match(run.stderr, /fake: got notifications\/cancelled/);
    const pid = Number(/fake: pid (\d+)/.exec(run.stderr)?.[1]);
    assert.ok(pid > 0 && await isGone(pid), `the server (pid ${pid}) was stopped with the client`);
    const silent = await runCli(["info", FAKE, "--timeout", "300", "-e", "FAKE_MODE=silent"]);
    assert.equal(silent.code, 3);
    assert.match(silent.stderr, /initialize timed out/);
  });

  test("a server that ignores SIGTERM is killed: no orphan is left", { timeout: 30_000 }, async () => {
    // --timeout is each request's: 3 s lets a busy machine start the server and answer initialize first.
    const ignoring = ["-e", "FAKE_MODE=ignore-sigterm"];
    const run = await runWatched(["call", FAKE, "echo", "--timeout", "3000", "--trace", ...ignoring]);
    assert.equal(run.code, 3);
    // Its "ignoring SIGTERM" may not come: the waits here end at once, so SIGKILL follows SIGTERM straight away.
    const pid = Number(/fake: pid (\d+)/.exec(run.stderr)![1]);
    assert.ok(await isGone(pid), `fake server ${pid} is still running`);
    // A server that let a request time out gets SIGTERM 250 ms after its stdin closes, SIGKILL 2 s later: the waits
    // the ladder made after the call's cancellation (--trace prints it as it goes), in order.
    const cancelled = run.offset(/^> .*"notifications\/cancelled".*tools\/call timed out/m);
    const ladder = run.waits.filter((wait) => wait.after > cancelled).map(({ why, ms }) => [why, ms]);
    assert.deepEqual(ladder.slice(0, 2), [["SIGTERM", 250], ["SIGKILL", 2_000]], "not also 2 s after closing stdin");
  });

  test("SIGINT cancels the request and exits 130", async () => {
    let signalled = false;
    const run = await runCli(["call", FAKE, "echo", "--trace", "-e", "FAKE_MODE=hang"], {
      onStderr: (text, pid) => {
        if (signalled || !/^> .*"method":"tools\/call"/m.test(text)) return; // the call is in flight
        signalled = true;
        process.kill(pid, "SIGINT");
      },
    });
    assert.equal(run.code, 130);
    assert.match(run.stderr, /^> .*"method":"notifications\/cancelled"/m);
    assert.match(run.stderr, /mcp: interrupted\n/);
  });

  test("garbage on the server's stdout is tolerated and reported in one warning", async () => {
    const [quiet, verbose] = await Promise.all([
      runCli(["call", FAKE, "echo", "text=hi", "-e", "FAKE_MODE=garbage"]),
      runCli(["call", FAKE, "echo", "text=hi", "-e", "FAKE_MODE=garbage", "--verbose"]),
    ]);
    assert.equal(quiet.code, 0);
    assert.equal(quiet.stdout, "hi\n");
    assert.match(quiet.stderr, /^mcp: warning: ignored 4 line\(s\) on the server's stdout that were not JSON-RPC/);
    assert.match(verbose.stderr, /not JSON-RPC on the server's stdout: Starting fake server/);
  });

  test("a 10 MiB answer arrives whole", async () => {
    const run = await runCli(["call", FAKE, "huge"]);
    assert.equal(run.code, 0);
    assert.equal(run.stdout.length, 10 * 1024 * 1024 + 1);
  });

  test("server→client requests: ping is answered, the rest are -32601, strays are ignored", async () => {
    const run = await runCli(["call", FAKE, "ask", "-e", "FAKE_MODE=server-requests"]);
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout), {
      "ping": {},
      "roots/list": { code: -32601 },
      "sampling/createMessage": { code: -32601 },
      "elicitation/create": { code: -32601 },
      "no/such/method": { code: -32601 },
    });
  });

  test("list follows every page and stops a cursor that does not advance", async () => {
    const [pages, stuck, json] = await Promise.all([
      runCli(["list", FAKE, "-e", "FAKE_MODE=pages"]),
      runCli(["list", FAKE, "-e", "FAKE_MODE=stuck-cursor"]),
      runCli(["list", SERVE, "--json"]),
    ]);
    assert.equal(pages.code, 0);
    const lines = pages.stdout.trimEnd().split("\n");
    assert.equal(lines.length, 11);
    assert.match(lines[1], /^add +a: number, b: integer +Add numbers$/);
    assert.equal(stuck.code, 3);
    assert.match(stuck.stderr, /repeated the tools\/list cursor "same"/);
    assert.deepEqual(JSON.parse(json.stdout).tools.map((tool: Message) => tool.name), [
      "add",
      "echo",
      "fail",
      "shout",
      "slow",
      "wc",
      "weather",
    ]);
  });

  test("info accepts an older protocol version and refuses an unsupported one", async () => {
    const [info, old, bad, json] = await Promise.all([
      runCli(["info", FAKE]),
      runCli(["info", FAKE, "-e", "FAKE_MODE=old-version"]),
      runCli(["info", FAKE, "-e", "FAKE_MODE=bad-version"]),
      runCli(["info", SERVE, "--json", "--protocol", "2025-06-18"]),
    ]);
    assert.equal(
      info.stdout,
      "protocol:      2025-11-25, legacy (initialize handshake), over stdio\nserver:        fake 1.0\n" +
        "capabilities:  tools, logging\ninstructions:  A fake server.\n",
    );
    assert.match(old.stdout, /^protocol: +2024-11-05, legacy/m);
    assert.equal(bad.code, 3);
    assert.match(bad.stderr, /answered protocol version "1999-01-01", which mcp\.ts does not speak/);
    assert.equal(JSON.parse(json.stdout).protocolVersion, "2025-06-18");
  });

  test("ping prints the round-trip time", async () => {
    const [plain, json] = await Promise.all([runCli(["ping", SERVE]), runCli(["ping", FAKE, "--json"])]);
    assert.match(plain.stdout, /^\d+\.\d ms\n$/);
    assert.ok(JSON.parse(json.stdout).ms >= 0);
  });

  test("--retries retries start-up failures with backoff", async () => {
    await withTempDir("mcp-flaky-", async (dir) => {
      // --protocol legacy: a server that dies on the server/discover probe is restarted for the handshake.
      const env = ["-e", "FAKE_MODE=flaky", "-e", "FAKE_FAILS=2", "--protocol", "legacy"];
      const ok = await runCli(["call", FAKE, "echo", "text=up", "--retries", "2", ...env, "-e", `FAKE_STATE=${dir}/a`]);
      assert.equal(ok.code, 0, ok.stderr);
      assert.equal(ok.stdout, "up\n");
      assert.equal(readFileSync(`${dir}/a`, "utf8"), "3", "two failed starts and the one that worked");
      const [first, second, third] = readFileSync(`${dir}/a.times`, "utf8").trim().split("\n").map(Number);
      assert.ok(second - first >= 200, `200 ms before the first retry: ${second - first}`);
      assert.ok(third - second >= 400, `then twice that: ${third - second}`);
      const fails = await runCli(["call", FAKE, "echo", "--retries", "1", ...env, "-e", `FAKE_STATE=${dir}/b`]);
      assert.equal(fails.code, 3);
      assert.equal(readFileSync(`${dir}/b`, "utf8"), "2", "one try and one retry");
    });
  });

  test("--retries repeats a call the server died under only for an idempotent tool", async () => {
    await withTempDir("mcp-idempotent-", async (dir) => {
      const env = ["-e", "FAKE_MODE=crash-call-once"];
      const idempotent = await runCli([
        "call",
        FAKE,
        "echo",
        "text=again",
        "--retries",
        "1",
        ...env,
        "-e",
        `FAKE_STATE=${dir}/a`,
      ]);
      assert.equal(idempotent.code, 0, idempotent.stderr);
      assert.equal(idempotent.stdout, "again\n");
      assert.match(idempotent.stderr, /calling idempotent "echo" again \(1 of 1\)/);
      const other = await runCli([
        "call",
        FAKE,
        "add",
        "a=1",
        "b=2",
        "--retries",
        "1",
        ...env,
        "-e",
        `FAKE_STATE=${dir}/b`,
      ]);
      assert.equal(other.code, 3, "add is not idempotent: not sent twice");
      const none = await runCli(["call", FAKE, "echo", "text=x", ...env, "-e", `FAKE_STATE=${dir}/c`]);
      assert.equal(none.code, 3, "without --retries nothing is repeated");
    });
  });

  test("-e, --cwd and config names reach the server", async () => {
    await withTempDir("mcp-cfg-", async (dir) => {
      const [command, ...args] = splitCommand(FAKE);
      writeFileSync(
        join(dir, ".mcp.json"),
        JSON.stringify({ mcpServers: { fake: { command, args, env: { FROM_CONFIG: "yes" } } } }),
      );
      // A bare command found on PATH, as `mcp.ts list mcp-server-everything` would be.
      const bin = join(dir, "bin");
      mkdirSync(bin);
      writeFileSync(join(bin, "fake-mcp"), `#!/bin/sh\nexec ${FAKE} "$@"\n`, { mode: 0o755 });
      const [env, cwd, named, namedElsewhere, onPath, unknown] = await Promise.all([
        runCli(["call", FAKE, "env", "name=GREETING", "-e", "GREETING=hello"]),
        runCli(["call", FAKE, "cwd", "--cwd", dir]),
        runCli(["call", "fake", "env", "name=FROM_CONFIG"], { cwd: dir }),
        runCli(["call", "fake", "cwd", "--cwd", tmpdir()], { cwd: dir }),
        runCli(["call", "fake-mcp", "echo", "text=on path"], { env: { PATH: `${bin}:${process.env.PATH}` } }),
        runCli(["list", "fakr"], { cwd: dir }),
      ]);
      assert.equal(env.stdout, "hello\n");
      assert.equal(realpathSync(cwd.stdout.trim()), realpathSync(dir));
      assert.equal(named.stdout, "yes\n");
      assert.equal(
        realpathSync(namedElsewhere.stdout.trim()),
        realpathSync(tmpdir()),
        "--cwd is the server's, not ours",
      );
      assert.equal(onPath.stdout, "on path\n", onPath.stderr);
      assert.equal(unknown.code, 2);
      assert.match(
        unknown.stderr,
        /"fakr" is not a command on PATH nor a server in .*\.mcp\.json.*; servers it knows: fake/,
      );
    });
  });

  test("progress is one updating line when stderr is a terminal", (t) => {
    // `script` (util-linux) runs the command on a pseudo-terminal; without it there is nothing to check.
    if (spawnSync("script", ["--version"]).status !== 0) {
      return t.skip("no script(1) here to give the client a terminal");
    }
    const command = [...RUNTIME, MCP, "call", SERVE, "slow", "steps=3", "ms=50"].map(quote).join(" ");
    const run = spawnSync("script", ["-q", "-c", command, "/dev/null"], {
      cwd: HERE,
      encoding: "utf8",
      timeout: 20_000,
    });
    const clear = "\r\u001b[K"; // back to the start of the line, erase it
    assert.ok(run.stdout.includes(`${clear}progress 1/3 step 1 of 3${clear}progress 2/3`), JSON.stringify(run.stdout));
    assert.ok(run.stdout.includes(`${clear}waited 3 x 50 ms`), "the line is cleared before the result");
  });

  test("--verbose streams the server's log messages and progress", async () => {
    const run = await runCli(["call", FAKE, "slow", "ms=10", "--verbose"]);
    assert.equal(run.stdout, "slow done\n");
    assert.match(run.stderr, /mcp: progress 1\/3 step 1\n/);
    assert.match(run.stderr, /mcp: \[info\] step 3\n/);
    assert.match(run.stderr, /fake: got tools\/call/);
  });

  test("batch answers each line in input order, with the worst exit code", async () => {
    const input = [
      '{"tool":"slow","arguments":{"ms":60}}',
      '{"tool":"echo","arguments":{"text":"second"}}',
      "not json",
      '{"tool":"fail"}',
      "",
      '{"tool":"nope"}',
    ].join("\n") + "\n";
    const run = await runCli(["batch", FAKE, "--concurrency", "4"], { stdin: input });
    const lines = run.stdout.trimEnd().split("\n").map((line) => JSON.parse(line));
    assert.equal(lines.length, 5);
    assert.equal(lines[0].content[0].text, "slow done");
    assert.equal(lines[1].content[0].text, "second");
    assert.match(lines[2].error, /line 3: expected/);
    assert.equal(lines[3].isError, true);
    assert.match(lines[4].error, /no tool named "nope"/);
    assert.equal(run.code, 2);
    const dying = await runCli(["batch", FAKE, "-e", "FAKE_MODE=crash-after"], {
      stdin: '{"tool":"echo"}\n{"tool":"echo"}\n',
    });
    assert.equal(dying.code, 3);
    assert.equal(dying.stdout.trimEnd().split("\n").length, 2);
  });

  test("Deno without -A gets a one-line hint and exit code 2", async (t) => {
    // A Deno permission story only. Deno.Command, because Deno's node:child_process
    // hands its own permissions to a `deno` it spawns.
    const Deno = (globalThis as { Deno?: DenoForTests }).Deno;
    if (!Deno) return t.skip("a Deno permission story: only Deno asks for permissions");
    // --version needs no permission (MCP_TS_LOG_FORMAT is read only when allowed).
    const version = await new Deno.Command(process.execPath, { args: ["run", MCP, "--version"], stdin: "null" })
      .output();
    assert.equal(new TextDecoder().decode(version.stdout), `mcp.ts ${VERSION}\n`);
    for (const args of [["serve", "testdata/tools"], ["call", SERVE, "add", "a=1", "b=2"]]) {
      const { code, stderr } = await new Deno.Command(process.execPath, {
        args: ["run", MCP, ...args],
        cwd: HERE,
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(stderr);
      assert.equal(code, 2, `${args[0]}: ${text}`);
      assert.match(text, /^mcp: .*run it as: deno run -A mcp\.ts …\n$/);
    }
  });

  test("usage errors exit 2 with one line", async () => {
    for (
      const args of [
        ["call"],
        ["call", SERVE],
        ["list", SERVE, "add", "extra"],
        ["ping", SERVE, "--bogus"],
        ["ping", SERVE, "--json=yes"],
        ["ping", SERVE, "--timeout"],
        ["nope"],
      ]
    ) {
      const run = await runCli(args);
      assert.equal(run.code, 2, args.join(" "));
      assert.match(run.stderr, /^mcp: [^\n]+\n$/);
    }
    const flags = await runCli(["call", "--timeout=5000", "-e", "GREETING=hi", "--", FAKE, "env", "name=GREETING"]);
    assert.equal(flags.stdout, "hi\n", "--flag=value, a short flag and -- all work");
    const help = await runCli(["help", "call"]);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^Usage: mcp\.ts call <server> <tool> \[ARGS\]/);
    const bare = await runCli([]);
    assert.equal(bare.code, 2);
    assert.match(
      bare.stderr,
      /^mcp\.ts .+ the Model Context Protocol[\s\S]+\nmcp: no command given \(exit code 2; mcp\.ts help prints this and exits 0\)\n$/,
    );
  });

  test("unsupportedRuntime() names a runtime that is too old and the way out", () => {
    assert.equal(
      unsupportedRuntime({ node: "22.11.0" }, true),
      "Cannot run on Node 22.11.0: mcp.ts needs Node >= 22.18.0; upgrade it, or run the npm package, which is " +
        "JavaScript for Node >= 18: npx -y @mcp-ts/mcp …",
    );
    // The package's JavaScript needs no type stripping: Node 18 runs it, Node 16 is told to upgrade.
    assert.equal(unsupportedRuntime({ node: "18.0.0" }, false), undefined);
    assert.equal(unsupportedRuntime({ node: "20.11.1" }, false), undefined);
    assert.equal(
      unsupportedRuntime({ node: "16.20.2" }, false),
      "Cannot run on Node 16.20.2: mcp.ts needs Node >= 18.0.0; upgrade it",
    );
    assert.match(
      unsupportedRuntime({ deno: "1.46.3" })!,
      /^Cannot run on Deno 1\.46\.3: mcp\.ts needs Deno >= 2\.0\.0/,
    );
    assert.match(unsupportedRuntime({ bun: "1.1.38" })!, /needs Bun >= 1\.2\.0/);
    for (const ok of [{ node: "22.18.0" }, { node: "24.1.0" }, { deno: "2.0.0" }, { bun: "1.2.0-canary.3" }]) {
      assert.equal(unsupportedRuntime(ok, true), undefined, JSON.stringify(ok));
    }
  });

  test("windowsCommand() finds npx as npx.cmd through PATHEXT and runs it under cmd.exe", async () => {
    await withTempDir("mcp-win-", async (dir) => {
      writeFileSync(join(dir, "npx"), "#!/bin/sh\n"); // npm puts a shell script beside npx.cmd
      writeFileSync(join(dir, "npx.cmd"), "@echo off\n");
      writeFileSync(join(dir, "deno.exe"), "");
      const env = { PATH: `C:\\nowhere;${dir}`, PATHEXT: ".COM;.EXE;.BAT;.CMD", ComSpec: "C:\\Windows\\cmd.exe" };
      assert.deepEqual(await windowsCommand("npx", ["-y", "@scope/server", "a b", 'say "hi"'], env), {
        command: "C:\\Windows\\cmd.exe",
        args: ["/d", "/s", "/c", `"${join(dir, "npx.cmd")} -y @scope/server "a b" "say ""hi"""\"`],
        verbatim: true,
      });
      assert.deepEqual(await windowsCommand("deno", ["run"], env), {
        command: join(dir, "deno.exe"),
        args: ["run"],
        verbatim: false,
      });
      assert.deepEqual(await windowsCommand("missing", [], env), { command: "missing", args: [], verbatim: false });
    });
  });

  test("an unquoted server command is answered with the quoted command line to use", async () => {
    const server = [...RUNTIME, MCP, "serve", "testdata/tools"];
    const [call, list, quoted] = await Promise.all([
      runCli(["call", ...server, "add", "a=2", "--json"]),
      runCli(["list", ...server]),
      runCli(["call", "my-tools", "add", "a=2", "--bogus"]),
    ]);
    const expected = (command: string, tail: string) =>
      `mcp: the server command must be one argument: quote it, as in mcp.ts ${command} "${server.join(" ")}"${tail}\n`;
    assert.equal(call.code, 2);
    assert.equal(JSON.parse(call.stderr).error, expected("call", " add a=2 --json").slice(5, -1));
    assert.equal(list.stderr, expected("list", ""));
    assert.equal(quoted.stderr, "mcp: Unknown option '--bogus' (see: mcp.ts help call)\n", "not a program: no hint");
  });

  test("list shows each tool's arguments; list TOOL shows one tool in full", async () => {
    const [all, one, json, missing] = await Promise.all([
      runCli(["list", SERVE]),
      runCli(["list", SERVE, "weather"]),
      runCli(["list", SERVE, "add", "--json"]),
      runCli(["list", SERVE, "wether"]),
    ]);
    assert.match(all.stdout, /^add +a\*: number, b\*: number +Add two numbers$/m);
    assert.match(all.stdout, /^fail +Always fails/m);
    assert.match(
      one.stdout,
      /^weather — Weather\nMade-up weather for a city[^\n]*\n\narguments \(\* = required\):\n {2}city\* +string\n/,
    );
    assert.match(one.stdout, /\noutput \(\* = always there\):\n {2}city\* +string\n {2}temperature\* +number\n/);
    assert.equal(JSON.parse(json.stdout).name, "add");
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /no tool named "wether"; did you mean weather/);
  });

  test("an unknown tool answered as an isError result, as SDK servers do, is still exit 2 with the closest names", async () => {
    const run = await runCli(["call", FAKE, "ech", "-e", "FAKE_MODE=sdk-unknown"]);
    assert.equal(run.code, 2);
    assert.equal(run.stderr, 'mcp: the server has no tool named "ech"; did you mean echo?\n');
    const failing = await runCli(["call", FAKE, "fail", "-e", "FAKE_MODE=sdk-unknown"]);
    assert.equal(failing.code, 1, "a real tool's error stays exit 1");
  });

  test("with --json a failure is one JSON object on stderr", async () => {
    const [unknown, died, usage] = await Promise.all([
      runCli(["call", FAKE, "ech", "--json"]),
      runCli(["call", FAKE, "echo", "--json", "-e", "FAKE_MODE=crash-after"]),
      runCli(["ping", SERVE, "--json", "--bogus"]),
    ]);
    assert.deepEqual(JSON.parse(unknown.stderr), {
      error: 'the server has no tool named "ech"; did you mean echo?',
      exitCode: 2,
      suggestions: ["echo"],
    });
    const failure = JSON.parse(died.stderr);
    assert.equal(failure.exitCode, 3);
    assert.match(failure.error, /the server exited with code 3/);
    assert.match(failure.stderr, /fake: crashing on tools\/call/);
    assert.deepEqual(JSON.parse(usage.stderr), {
      error: "Unknown option '--bogus' (see: mcp.ts help ping)",
      exitCode: 2,
    });
  });

  test("--verbose on a terminal clears the progress line before a log line, then draws it again", (t) => {
    if (spawnSync("script", ["--version"]).status !== 0) {
      return t.skip("no script(1) here to give the client a terminal");
    }
    const command = [...RUNTIME, MCP, "call", SERVE, "slow", "steps=2", "ms=50", "--verbose"].map(quote).join(" ");
    const run = spawnSync("script", ["-q", "-c", command, "/dev/null"], {
      cwd: HERE,
      encoding: "utf8",
      timeout: 20_000,
    });
    const clear = "\r\u001b[K";
    assert.doesNotMatch(run.stdout, /of 2mcp:/, "a log line glued onto the progress line");
    assert.ok(
      run.stdout.includes(`${clear}mcp: [debug] slow: step 1\r\nprogress 1/2 step 1 of 2`),
      JSON.stringify(run.stdout),
    );
  });

  test("a notification flood with -v while stderr is not read: memory stays bounded, drops are counted", async () => {
    const child = spawn(RUNTIME[0], [
      ...RUNTIME.slice(1),
      MCP,
      "call",
      HOSTILE,
      "flood",
      "-e",
      "HOSTILE_MODE=flood",
      "-e",
      "HOSTILE_FLOOD_MS=3000",
      "-v",
    ], { cwd: HERE, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let flooded = () => {};
    child.stdout!.setEncoding("utf8").on("data", (text: string) => {
      stdout += text;
      if (stdout.includes("flooded")) flooded();
    });
    child.stderr!.pause(); // a terminal or pipe that cannot keep up
    let peak = 0;
    const sampler = setInterval(() => {
      try {
        peak = Math.max(peak, peakRss(child.pid!));
      } catch {
        // gone
      }
    }, 200);
    // The call ends while stderr is still not read: its writes were dropped, not queued (nor blocking it).
    await new Promise<void>((resolve) => flooded = resolve);
    child.stderr!.setEncoding("utf8").on("data", (text: string) => stderr += text);
    child.stderr!.resume();
    const code = await new Promise((resolve) => child.on("close", resolve));
    clearInterval(sampler);
    assert.equal(code, 0, stderr.slice(-500));
    assert.match(stdout, /^flooded \d+/);
    assert.ok(peak < 400 * 1024 * 1024, `peak RSS ${Math.round(peak / 1048576)} MB`);
    if ("Deno" in globalThis || "Bun" in globalThis) assert.match(stderr, /line\(s\) of output dropped/);
  });

  test("request sends any method and prints its result; --meta, key=@file and key:=json reach the server", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-args-"));
    try {
      writeFileSync(join(dir, "text.txt"), "from a file");
      const [listed, unknown, echoed, added, badJson, badMeta] = await Promise.all([
        runCli(["request", SERVE, "tools/list"]),
        runCli(["request", SERVE, "no/such"]),
        runCli(["call", FAKE, "echo", `text=@${join(dir, "text.txt")}`, "--trace"]),
        runCli(["call", SERVE, "add", "a:=2", "b:=3", "--meta", '{"trace-id":"t-1"}', "--trace"]),
        runCli(["call", SERVE, "add", "a:=nope"]),
        runCli(["call", SERVE, "add", "a=1", "b=2", "--meta", "[1]"]),
      ]);
      assert.equal(listed.code, 0, listed.stderr);
      assert.ok(JSON.parse(listed.stdout).tools.some((tool: Message) => tool.name === "add"));
      assert.equal(unknown.code, 3);
      assert.match(unknown.stderr, /-32601/);
      assert.equal(echoed.stdout, "from a file\n", echoed.stderr);
      assert.equal(added.stdout, "5\n", added.stderr);
      assert.match(added.stderr, /"_meta":\{"trace-id":"t-1"/);
      assert.equal(badJson.code, 2);
      assert.match(badJson.stderr, /a:=nope: the value after := is not JSON/);
      assert.equal(badMeta.code, 2);
      assert.match(badMeta.stderr, /--meta: a JSON object is needed/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("messages that carry the fix: busy port, a URL without its scheme, an HTML 404, stdout noise, hidden tools", async () => {
    const page = createHttpServer((_request, response) => {
      response.writeHead(404, { "content-type": "text/html" }).end("<!DOCTYPE html><html><body>Not here</body></html>");
    });
    await new Promise<void>((resolve) => page.listen(0, "127.0.0.1", resolve));
    const pagePort = (page.address() as { port: number }).port;
    const server = await startListening([MCP, "serve", HERE + "testdata/tools", "--http", "0"], /serving (\S+)/);
    const starts = join(mkdtempSync(join(tmpdir(), "mcp-starts-")), "starts");
    try {
      const busyPort = new URL(server.url).port;
      const [busy, schemeless, html, noisy, hidden, elicit] = await Promise.all([
        runCli(["serve", HERE + "testdata/tools", "--http", busyPort]),
        runCli(["list", "localhost:3001/mcp"]),
        runCli(["list", `http://127.0.0.1:${pagePort}/wrong`]),
        runCli(["list", HOSTILE, "-e", "HOSTILE_MODE=stdout-noise", "--timeout", "3000"]), // its noise comes first
        runCli(["call", HOSTILE, "sample", "-e", "HOSTILE_MODE=capable", "-e", `HOSTILE_STARTS=${starts}`]),
        runCli(["call", HOSTILE, "form", "-e", "HOSTILE_MODE=form", "--elicit", "accept"]),
      ]);
      assert.equal(busy.code, 2, busy.stderr);
      assert.match(busy.stderr, new RegExp(`address is in use.*--http 127\\.0\\.0\\.1:0`));
      assert.match(schemeless.stderr, /give its URL: http:\/\/localhost:3001\/mcp/);
      assert.equal(html.code, 3);
      assert.match(html.stderr, /a web page: \/wrong is probably not its MCP endpoint/);
      assert.doesNotMatch(html.stderr, /DOCTYPE/);
      assert.equal(noisy.code, 3);
      assert.match(
        noisy.stderr,
        /printed 2 line\(s\) on stdout that are not JSON-RPC, the first: "Starting hostile server/,
      );
      assert.equal(hidden.code, 2);
      assert.match(
        hidden.stderr,
        /a server may list a tool only to clients that can answer its questions: try --sample/,
      );
      assert.equal(readFileSync(starts, "utf8"), "start\n", "the server started once: no second start to look");
      assert.match(elicit.stderr, /declined the server's form \(--elicit accept\): required fields color, size, email/);
      assert.match(elicit.stderr, /--elicit-json/);
      assert.match(elicit.stdout, /"action":"decline"/);
    } finally {
      server.close();
      page.close();
    }
  });

  test("the elicitation form on a terminal: choices by number, formats re-asked, no listener warning", async (t) => {
    if (spawnSync("script", ["--version"]).status !== 0) {
      return t.skip("no script(1) here to give the client a terminal");
    }
    // Each answer is typed once its question is on the screen (a label's n-th appearance).
    const steps: [string, string][] = [
      ["color (", "purple"],
      ["color (", "2"],
      ["size (", "m"],
      ["tags (", "1,3"],
      ["email (", "not-an-email"],
      ["email (", "ada@example.com"],
      ["day (", "2026-13-01"],
      ["day (", "2026-11-25"],
      ...Array.from({ length: 8 }, (_, i) => [`note${i + 1} (`, ""] as [string, string]),
      ["send it?", "y"],
    ];
    const command = [...RUNTIME, MCP, "call", HOSTILE, "form", "-e", "HOSTILE_MODE=form"].map(quote).join(" ");
    const child = spawn("script", ["-q", "-c", command, "/dev/null"], { cwd: HERE, stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let changed: () => void = () => {};
    child.stdout!.setEncoding("utf8").on("data", (text: string) => {
      out += text;
      changed();
    });
    let ended = false;
    const closed = new Promise((resolve) =>
      child.on("close", () => {
        ended = true;
        changed();
        resolve(undefined);
      })
    );
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    try {
      const seen = new Map<string, number>();
      for (const [label, answer] of steps) {
        const wanted = (seen.get(label) ?? 0) + 1;
        seen.set(label, wanted);
        while (!ended && out.split(label).length - 1 < wanted) await new Promise<void>((resolve) => changed = resolve);
        assert.ok(!ended, `the form ended before asking ${label}: ${out.slice(-300)}`);
        child.stdin!.write(answer + "\r");
      }
      await closed;
    } finally {
      clearTimeout(timer);
    }
    assert.match(out, /1\) red\r?\n {4}2\) green/);
    assert.match(out, /not one of the choices/);
    assert.match(out, /not a valid email/);
    assert.match(out, /not a valid date/);
    assert.doesNotMatch(out, /MaxListeners/);
    assert.match(out, /"color":"green","size":"m","tags":\["a","c"\],"email":"ada@example.com","day":"2026-11-25"/);
  });
});

describe("17. CLI: resources and prompts", () => {
  const CONFORMANCE = [...RUNTIME, MCP, "serve", HERE + "testdata/conformance"].map(quote).join(" ");

  test("resources lists resources and templates; read prints text, raw binary, or JSON", async () => {
    const [list, textRun, binary, json, missing] = await Promise.all([
      runCli(["resources", CONFORMANCE]),
      runCli(["read", CONFORMANCE, "test://template/7/data"]),
      runCli(["read", CONFORMANCE, "test://static-binary"]),
      runCli(["read", CONFORMANCE, "test://static-binary", "--json"]),
      runCli(["read", CONFORMANCE, "test://static-txt"]),
    ]);
    assert.match(list.stdout, /^test:\/\/static-text +static-text — A static text resource$/m);
    assert.match(list.stdout, /^test:\/\/template\/\{id\}\/data +template — /m);
    assert.equal(textRun.stdout, '{"id":"7","templateTest":true,"data":"Data for ID: 7"}\n');
    assert.ok(binary.stdout.startsWith("\uFFFDPNG"), "raw PNG bytes");
    assert.match(JSON.parse(json.stdout).contents[0].blob, /^iVBORw0KGgo/);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /no resource named "test:\/\/static-txt"; did you mean test:\/\/static-text/);
  });

  test("a list the server does not offer prints nothing and says so; asking for one of its items is exit 2", async () => {
    await withTempDir("mcp-empty-", async (empty) => {
      const NOTHING = [...RUNTIME, MCP, "serve", empty].map(quote).join(" ");
      const [tools, prompts, resources, json, prompt, read] = await Promise.all([
        runCli(["list", NOTHING]),
        runCli(["prompts", SERVE]),
        runCli(["resources", SERVE]),
        runCli(["prompts", SERVE, "--json"]),
        runCli(["prompt", SERVE, "review"]),
        runCli(["read", SERVE, "docs://readme"]),
      ]);
      assert.deepEqual([tools.code, tools.stdout, tools.stderr], [0, "", "mcp: the server offers no tools\n"]);
      assert.deepEqual([prompts.code, prompts.stdout, prompts.stderr], [0, "", "mcp: the server offers no prompts\n"]);
      assert.deepEqual([resources.code, resources.stderr], [0, "mcp: the server offers no resources\n"]);
      assert.deepEqual([json.code, json.stdout, json.stderr], [0, '{"prompts":[]}\n', ""]);
      assert.deepEqual([prompt.code, prompt.stderr], [
        2,
        'mcp: Cannot get prompt "review": the server offers no prompts\n',
      ]);
      assert.deepEqual([read.code, read.stderr], [
        2,
        "mcp: Cannot read docs://readme: the server offers no resources\n",
      ]);
    });
  });

  test("a missing required prompt argument is a usage error naming it, before the prompt is asked for", async () => {
    const run = await runCli(["prompt", CONFORMANCE, "test_prompt_with_arguments", "arg1=a", "--trace"]);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /mcp: prompt "test_prompt_with_arguments" needs arg2 \(required\); give it: arg2=…\n$/);
    assert.doesNotMatch(run.stderr, /prompts\/get/, "nothing was asked");
  });

  test("binary contents: -o FILE writes them; read refuses to print them on a terminal", async (t) => {
    await withTempDir("mcp-out-", async (dir) => {
      const file = join(dir, "px.png");
      const [read, json] = await Promise.all([
        runCli(["read", CONFORMANCE, "test://static-binary", "-o", file]),
        runCli(["read", CONFORMANCE, "test://static-binary", "--json"]),
      ]);
      assert.deepEqual([read.code, read.stdout, read.stderr], [0, "", ""]);
      const blob = JSON.parse(json.stdout).contents[0].blob;
      assert.deepEqual(readFileSync(file), Buffer.from(blob, "base64"));

      const photo = join(dir, "photo.png");
      const call = await runCli(["call", FAKE, "photo", "{}", "-o", photo]);
      assert.deepEqual([call.code, call.stdout, call.stderr], [0, "", ""]);
      assert.equal(readFileSync(photo, "latin1"), "\x89PNG fake image bytes");
      const two = await runCli(["call", FAKE, "echo", "{}", "-o", photo]);
      assert.equal(two.code, 2);
      assert.match(two.stderr, /-o takes a result with one binary item, this one has 0/);
    });
    if (spawnSync("script", ["--version"]).status !== 0) {
      return t.skip("no script(1) here to give the client a terminal");
    }
    const command = [...RUNTIME, MCP, "read", CONFORMANCE, "test://static-binary"].map(quote).join(" ");
    const run = spawnSync("script", ["-q", "-c", command, "/dev/null"], {
      cwd: HERE,
      encoding: "utf8",
      timeout: 20_000,
    });
    assert.match(
      run.stdout,
      /mcp: Cannot print binary contents \[resource test:\/\/static-binary image\/png, \d+ B\] to a terminal: write them to a file with -o FILE/,
    );
    assert.doesNotMatch(run.stdout, /PNG/);
  });

  test("prompts lists prompts with their arguments; prompt prints messages", async () => {
    const [list, got, unknown] = await Promise.all([
      runCli(["prompts", CONFORMANCE]),
      runCli(["prompt", CONFORMANCE, "test_prompt_with_arguments", "arg1=007", "arg2=true"]),
      runCli(["prompt", CONFORMANCE, "test_simple_promt"]),
    ]);
    assert.match(list.stdout, /^test_prompt_with_arguments +arg1\*, arg2\* +A prompt with two required arguments$/m);
    assert.equal(got.stdout, "[user] Prompt with arguments: arg1='007', arg2='true'\n");
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /did you mean test_simple_prompt/);
  });
});

describe("17. CLI: skills", () => {
  const FAKE_SKILLS = [...RUNTIME, HERE + "testdata/fake_skills_server.ts"].map(quote).join(" ");
  /** The skill files the fake served in a run, as it logged them. */
  const reads = (run: CliRun) => [...run.stderr.matchAll(/fake-skills: read (\S+)/g)].map((match) => match[1]);

  test("skills lists every page and reads no file; skill checks size, then digest, then frontmatter before a byte", async () => {
    const [listed, json, honest, size, digest, front, dynamic, binary] = await Promise.all([
      runCli(["skills", FAKE_SKILLS, "-v"]),
      runCli(["skills", FAKE_SKILLS, "--json"]),
      runCli(["skill", FAKE_SKILLS, "honest", "-v"]),
      runCli(["skill", FAKE_SKILLS, "bad-size", "-v"]),
      runCli(["skill", FAKE_SKILLS, "bad-digest", "-v"]),
      runCli(["skill", FAKE_SKILLS, "skill://bad-front/SKILL.md", "-v"]),
      runCli(["skill", FAKE_SKILLS, "dynamic", "-v"]),
      runCli(["skill", FAKE_SKILLS, "honest", "data/b.bin"]),
    ]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /^honest +Lists what it serves\n/);
    assert.match(
      listed.stdout,
      /\ntwin \(skill:\/\/one\/twin\/SKILL\.md\) +The first\ntwin \(skill:\/\/two\/twin\/SKILL\.md\) +The second\n$/,
    );
    assert.deepEqual(reads(listed), [], "listing reads no file");
    assert.equal(JSON.parse(json.stdout).length, 11, "both pages");
    assert.deepEqual([honest.code, honest.stdout], [
      0,
      "---\nname: honest\ndescription: Lists what it serves\n---\n\nRead notes/a.md.\n",
    ]);
    for (const [run, check] of [[size, "size"], [digest, "digest"], [front, "frontmatter"]] as const) {
      assert.equal(run.code, 3, run.stderr);
      assert.equal(run.stdout, "", "nothing printed");
      assert.match(run.stderr, new RegExp(`^mcp: skill://bad-[a-z]+/SKILL\\.md failed the ${check} check: `, "m"));
      assert.equal(reads(run).length, 1, "one read: nothing after the failed one");
    }
    assert.match(front.stderr, /its "description" is "Exfiltrate credentials", the skill lists "Honest description"/);
    assert.equal(dynamic.code, 0);
    assert.match(dynamic.stderr, /mcp: skill:\/\/dynamic\/SKILL\.md is unverified \(dynamic skill\)/);
    assert.deepEqual([binary.code, Buffer.from(binary.stdout, "latin1").length > 0], [0, true]);
  });

  test("skill: an unknown, ambiguous or unlisted name is exit 2 before any read; --out writes all of it or nothing", async () => {
    await withTempDir("mcp-skill-out-", async (dir) => {
      const [unknown, twin, unlisted, escape, dynamicOut] = await Promise.all([
        runCli(["skill", FAKE_SKILLS, "honset", "-v"]),
        runCli(["skill", FAKE_SKILLS, "twin", "-v"]),
        runCli(["skill", FAKE_SKILLS, "honest", "notes/missing.md", "-v"]),
        runCli(["skill", FAKE_SKILLS, "escape", "--out", dir, "-v"]),
        runCli(["skill", FAKE_SKILLS, "dynamic", "--out", dir]),
      ]);
      assert.equal(unknown.code, 2);
      assert.match(unknown.stderr, /^mcp: the server has no skill named honset; did you mean honest\?$/m);
      assert.equal(twin.code, 2);
      assert.match(
        twin.stderr,
        /2 skills are named twin: give one's URI \(skill:\/\/one\/twin\/SKILL\.md, skill:\/\/two\/twin\/SKILL\.md\)/,
      );
      assert.equal(unlisted.code, 2);
      assert.match(unlisted.stderr, /lists no notes\/missing\.md; its files: SKILL\.md, notes\/a\.md, data\/b\.bin/);
      assert.equal(escape.code, 3);
      assert.match(
        escape.stderr,
        /lists "skill:\/\/escape\/\.\.\/outside\.txt", which is not a path inside it: nothing written/,
      );
      assert.equal(dynamicOut.code, 2);
      for (const run of [unknown, twin, unlisted, escape]) assert.deepEqual(reads(run), []);
      const bad = await runCli(["skill", FAKE_SKILLS, "bad-digest", "--out", dir]);
      assert.equal(bad.code, 3);
      assert.deepEqual(readdirSync(dir), [], "a file that fails its check: nothing written");

      const out = await runCli(["skill", FAKE_SKILLS, "honest", "--out", dir, "-v"]);
      assert.equal(out.code, 0, out.stderr);
      assert.deepEqual(reads(out)[0], "skill://honest/SKILL.md", "SKILL.md read and checked first");
      assert.equal(readFileSync(join(dir, "honest", "notes", "a.md"), "utf8"), "note a\n");
      assert.deepEqual(
        [...readFileSync(join(dir, "honest", "data", "b.bin"))],
        [0, 1, ..."binary"].map((c) => typeof c === "number" ? c : c.charCodeAt(0)),
      );
      assert.deepEqual(readdirSync(dir), ["honest"], "no temporary directory left");
      const again = await runCli(["skill", FAKE_SKILLS, "honest", "--out", dir]);
      assert.equal(again.code, 2);
      assert.match(again.stderr, /honest exists: give --force to replace it/);
      assert.equal((await runCli(["skill", FAKE_SKILLS, "honest", "--out", dir, "--force"])).code, 0);
    });
    const none = await runCli(["skills", SERVE]);
    assert.equal(none.code, 2);
    assert.equal(none.stderr, "mcp: the server does not offer skills\n");
  });

  test("skill --out: a skill over --max-bytes is refused before a byte is read; two names for one file are refused", async () => {
    await withTempDir("mcp-skill-caps-", async (dir) => {
      const [huge, small, alias, twin] = await Promise.all([
        runCli(["skill", FAKE_SKILLS, "huge", "--out", dir, "-v"]),
        runCli(["skill", FAKE_SKILLS, "honest", "--out", dir, "--max-bytes", "10"]),
        runCli(["skill", FAKE_SKILLS, "alias", "--out", dir, "-v"]),
        runCli(["skill", FAKE_SKILLS, "twin-path", "--out", dir, "-v"]),
      ]);
      // The manifest says 96 MiB: over the 64 MiB default, said before any file is read (the fake logs each read).
      assert.equal(huge.code, 3, huge.stderr);
      assert.match(huge.stderr, /^mcp: the skill lists \d+ bytes, over --max-bytes 67108864: nothing written$/m);
      assert.deepEqual(reads(huge), []);
      assert.equal(small.code, 3);
      assert.match(small.stderr, /over --max-bytes 10: nothing written/);
      // SKILL%2Emd would be written as SKILL.md without the frontmatter check: another name for it is refused.
      assert.equal(alias.code, 3, alias.stderr);
      assert.match(
        alias.stderr,
        /"skill:\/\/alias\/SKILL\.md" and "skill:\/\/alias\/SKILL%2Emd", two names for one file/,
      );
      assert.equal(twin.code, 3, twin.stderr);
      assert.match(
        twin.stderr,
        /"skill:\/\/twin-path\/a\.md" and "skill:\/\/twin-path\/%61\.md", two names for one file/,
      );
      for (const run of [alias, twin]) assert.deepEqual(reads(run), [], "refused before any read");
      assert.deepEqual(readdirSync(dir), [], "nothing written");
    });
  });
});
