#!/usr/bin/env -S deno run -A
// mcp.ts — the Model Context Protocol from a terminal, in one file, no dependencies.
//
//   deno run -A mcp.ts serve ./tools        an MCP server on stdio; tools are plugin files in ./tools
//   bun mcp.ts serve ./tools                the same on Bun
//   node mcp.ts serve ./tools               the same on Node >= 22.18 (type stripping)
//   bun mcp.ts call "<server>" add a=1 b=2  a client: spawn any MCP server, call one tool, exit
//   import { serve, connect } from "./mcp.ts"   the same server and client as a library
//
// Contents, low level to high level (a test holds this list to the banners below):
//   1. Constants           protocol versions, error codes, log levels, limits several sections share;
//                          three helpers of plain string work (encoder, basenameOf, extensionOf)
//   2. Errors              what crosses the wire (RpcError) and what a command's exit code is made of
//                          (UsageError 2, ServerError/TimeoutError 3, AuthorizationError 4, …); 2b the
//                          safety primitives, each rule of the contract's Safety section written once
//                          (linear-time text work, one outbound fetch, redact, principals and quotas)
//   3. Framing             bytes in, lines out (NDJSON or Content-Length, SSE), batched writes
//   4. JSON-RPC peer       message checks, request/response matching, notifications; each outgoing
//                          message says which request it belongs to, and whether it is the final one
//   5. Protocol eras       legacy (initialize) and 2026-07-28 (per-request _meta): one object each
//   6. Schema validation   the JSON Schema keywords tool schemas use
//   7. MCP server          7a what plugins write and the catalog, 7b options, results, the request
//                          context, 7c the core all connections share (catalog, timer, requestState),
//                          7d the session per connection: tools, resources, prompts, completion,
//                          cancellation, progress, logging, timeouts, input-required, listen, 7e helpers,
//                          7f tasks (SEP-2663): calls that outlive their request, 7g skills (SEP-2640),
//                          7h metrics (durations, in the Prometheus text format), 7i telemetry (spans,
//                          trace context, OTLP/HTTP JSON export), 7j observing each request
//      ── above: the protocol alone, no process, no Deno or Bun, no node: import (a test checks) ──
//   8. Runtime             what Deno, Bun and Node do differently, each native path with its measured
//                          reason: 8a their APIs, the process, files and paths, 8b streams (stdout,
//                          stderr, stdin), 8c child processes, 8d listenHttp, TCP out and the watchdog, 8e the
//                          daemon's ground: its private directory, a Unix socket, a process of its own
//   9. Plugins             module and executable plugins, --watch: the server's only plugin I/O
//  10. Server transports   stdio; 10b the Streamable HTTP wire, 10c the HTTP front every listener
//                          stands behind, 10d createHandler (legacy sessions, stateless requests),
//                          10e bearer tokens (a protected resource), 10f state across replicas (a Redis
//                          client of our own: sessions, tasks and quotas in the store, a bus between replicas)
//  11. Server configs      what a <server> names: a URL, a command line, a name in a host's config; 11b
//                          host files as text (JSON with comments, a TOML subset), edited in place; 11c the
//                          hosts, install and uninstall; 11d bundles (pack): the program as JavaScript, a zip
//  12. Client transports   12a stdio, 12b Streamable HTTP and HTTP+SSE, 12c the daemon's socket (@NAME)
//  13. OAuth               13a the token store, 13b discovery and signing, 13c the provider
//  14. MCP client          14a options, 14b the session (McpClient), 14c connect(), 14d the 2026-07-28
//                          rules a client keeps, 14e arguments as typed, 14f following a task, 14g skills
//  15. Gateway, proxy and replay   15a gateway, 15b proxy, 15c replay, 15d sessions: the per-user daemon
//  16. Output              what the client commands print (pure); text made safe for a terminal; 16b logs
//                          as JSON lines (--log-format json)
//  17. CLI                 argv → exit code: 17a the process's I/O and flags, 17b serve, 17c the client's
//                          help, flags and answers, 17d the client commands, 17e tasks and skills,
//                          17f login, gateway, proxy, replay, servers (each command's help beside it),
//                          17g the command table, the main help and main; `if (import.meta.main)` is last

// No built-in is imported here for its code: each costs start-up time (node:fs
// ~45 ms on Deno), so each is imported where it is used.
import type { Readable, Writable } from "node:stream";

// Deno, Bun and Node all have it as a global. On Deno the global is node:timers, loaded when first read
// (~5 ms: util, inspect, async_hooks): read on first use, so a command that sends nothing never loads it.
let immediate: ((callback: () => void) => unknown) | undefined;
const setImmediate = (callback: () => void): unknown => (immediate ??= globalThis.setImmediate)(callback);

// === 1. Constants ============================================================
// What several sections share: protocol versions, error codes, log levels, limits, and three
// helpers of plain string work. A section's own tunables sit at its top.

/** The version of mcp.ts itself. */
export const VERSION = "0.1.0";

/** Legacy-handshake protocol versions this file speaks, newest first. */
export const SUPPORTED_PROTOCOL_VERSIONS = [
  "2025-11-25",
  "2025-06-18",
  "2025-03-26",
  "2024-11-05",
] as const;

/** The version answered when a client asks for one we do not speak. */
export const LATEST_PROTOCOL_VERSION = SUPPORTED_PROTOCOL_VERSIONS[0];

/** JSON-RPC 2.0 error codes used on the wire. */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** 2026-07-28: an HTTP header disagrees with the body, or a required one is missing. */
  HeaderMismatch: -32020,
  /** 2026-07-28: the request needs a client capability the client did not declare. */
  MissingRequiredClientCapability: -32021,
  /** 2026-07-28: a protocol version the server does not speak (data: supported, requested). */
  UnsupportedProtocolVersion: -32022,
} as const;

/** Logging levels of RFC 5424, least severe first, as MCP names them. */
export const LOG_LEVELS = [
  "debug",
  "info",
  "notice",
  "warning",
  "error",
  "critical",
  "alert",
  "emergency",
] as const;

/** One of the eight MCP log levels. */
export type LogLevel = typeof LOG_LEVELS[number];

const DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024;
const DEFAULT_TOOL_TIMEOUT_MS = 60_000;
const DEFAULT_PAGE_SIZE = 100;
// Log notifications sent before the client picks a level (the spec leaves it to us).
const DEFAULT_LOG_LEVEL: LogLevel = "info";
// How long SIGINT/SIGTERM waits for calls in flight before aborting them.
const SHUTDOWN_GRACE_MS = 2_000;
// Gap between a call's last progress notification and its response (see #finish).
const PROGRESS_SETTLE_MS = 5;
// Tasks (SEP-2663): how long a task is kept from its creation, the poll interval announced, how long a
// task-capable call may run before it becomes a task, how many tasks one server keeps.
const DEFAULT_TASK_TTL_MS = 3_600_000;
const DEFAULT_TASK_POLL_MS = 500;
const DEFAULT_TASK_GRACE_MS = 100;
const DEFAULT_MAX_TASKS = 1000;
// The task ids one subscriptions/listen may name; the rest are not honored.
const LISTEN_TASKS_MAX = 100;
// A Content-Length header block longer than this is not a header block.
const MAX_HEADER_BYTES = 8 * 1024;
// MCP tool names (spec 2025-11-25, server/tools.mdx "Tool names").
const TOOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
const NEWLINE = 0x0a;

// The three helpers every level uses; plain string and byte work, no runtime.
const encoder = new TextEncoder();

function basenameOf(path: string): string {
  return path.slice(Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\")) + 1);
}

function extensionOf(name: string): string {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(dot) : "";
}

// === 2. Errors ===============================================================
// RpcError carries a JSON-RPC code to the peer. The others say what went wrong in
// a way the CLI turns into an exit code: UsageError (and NotFoundError) 2,
// ServerError (and TimeoutError; UnreachableError and HttpStatusError in §12) 3,
// AuthorizationError 4, InterruptedError 130; PluginExitError is a plugin's
// process.exit. Everything else uses the built-ins (TypeError, RangeError).

/** An error that crosses the wire as a JSON-RPC error object. */
export class RpcError extends Error {
  /** The JSON-RPC error code, e.g. -32602. */
  code: number;
  /** Optional structured detail for the peer. */
  data?: unknown;
  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.name = "RpcError";
    this.code = code;
    if (data !== undefined) this.data = data;
  }
}

/** A mistake in how mcp.ts was invoked: bad flags, bad arguments. Exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** The server failed: could not start, died, broke the protocol or answered with an error. Exit code 3. */
export class ServerError extends Error {
  /** The JSON-RPC error code, when the server answered with one. */
  code?: number;
  /** The end of the server's stderr, to explain the failure. */
  stderr = "";
  /** The JSON-RPC error's data, when the server sent some. */
  data?: unknown;
  /** A start-up failure that may go away when tried again (--retries). */
  retryable: boolean;
  /** `code` and `data`: the JSON-RPC error's; `retryable`: a start-up failure worth another try. */
  constructor(message: string, details: { code?: number; data?: unknown; retryable?: boolean } = {}) {
    super(message);
    this.name = "ServerError";
    if (details.code !== undefined) this.code = details.code;
    if (details.data !== undefined) this.data = details.data;
    this.retryable = details.retryable === true;
  }
}

/** A request got no answer (nor progress) in time. Exit code 3. */
export class TimeoutError extends ServerError {
  constructor(message: string) {
    super(message);
    this.name = "TimeoutError";
  }
}

/** A tool, prompt or resource the server does not have. Exit code 2. */
export class NotFoundError extends UsageError {
  /** The closest names the server does have. */
  suggestions: string[];
  /** What is known about it, when something is (left out by mcp.ts, failed to load). */
  why?: string;
  /** `why`: what the server said about it, e.g. that its file failed to load. */
  constructor(kind: string, name: string, known: string[], why?: string) {
    const suggestions = closestNames(name, known);
    const hint = why
      ? `: ${why}`
      : suggestions.length
      ? `; did you mean ${suggestions.join(", ")}?`
      : known.length
      ? `; it has ${known.slice(0, 10).join(", ")}${known.length > 10 ? ", …" : ""}`
      : "; it has none";
    super(`the server has no ${kind} named "${name}"${hint}`);
    this.name = "NotFoundError";
    this.suggestions = suggestions;
    this.why = why;
  }
}

/** An HTTP server wants authorization that we do not have, or refused it. Exit code 4. */
export class AuthorizationError extends Error {
  /** The HTTP status that said so (401 or 403). */
  status: number;
  constructor(message: string, status: number) {
    super(message);
    this.name = "AuthorizationError";
    this.status = status;
  }
}

/** Stopped by SIGINT. Exit code 130. */
export class InterruptedError extends Error {
  constructor(message = "interrupted") {
    super(message);
    this.name = "InterruptedError";
  }
}

/** What a plugin's process.exit or Deno.exit throws while serving: a plugin cannot end the server. */
export class PluginExitError extends Error {
  /** The exit code the plugin asked for. */
  exitCode: number | undefined;
  constructor(exitCode: number | undefined) {
    super(`Cannot exit while serving: a plugin called process.exit(${exitCode ?? ""})`);
    this.name = "PluginExitError";
    this.exitCode = exitCode;
  }
}

function noop(): void {}

// The end of a growing text (a process's stderr), at most `limit` characters.
function keepTail(tail: string, more: string, limit: number): string {
  const text = tail + more;
  return text.length > limit ? text.slice(-limit) : text;
}

/**
 * A description of any thrown value, even one that cannot be turned into a string, redacted (2b): the one way an
 * error becomes text to print, log or export, so a runtime's message never carries a URL's credentials or query.
 */
function errorMessage(error: unknown): string {
  return redact(describeThrown(error));
}

function describeThrown(error: unknown): string {
  try {
    if (error instanceof Error) return String(error.message || error.name);
    if (typeof error === "object" && error !== null && typeof error.toString !== "function") {
      const json = JSON.stringify(error);
      return json && json !== "{}" ? json : "a thrown object with no message";
    }
    return String(error);
  } catch {
    return Object.prototype.toString.call(error); // e.g. an object whose toString throws
  }
}

// --- 2b. Safety primitives: each rule of the contract's Safety section, written once ---
// What protects a user against a hostile peer lives here, one function per rule, and every path goes through it;
// a test scans or fuzzes the whole file for each (mcp_test.ts, "0. Safety rules"). Linear-time text work
// (trimEnd, a bounded closestNames), one outbound fetch (fetchSameOrigin), redact() for runtime error messages.
// Nothing here touches a process or a runtime.

// Principals. Whatever one caller creates and can later name (a task, a legacy session, a gateway's
// <upstream>__<id>, a proxied request) is stored with its principal and unknown to every other one.

// Who a request is served for, as a requestState and a legacy session are bound to it: the token's subject and
// client ("" on a server that checks no tokens).
function principalOf(auth: AuthInfo | undefined): string {
  return auth ? JSON.stringify([auth.sub ?? null, auth.clientId ?? null]) : "";
}

// Who a task (or a gateway's task id) is bound to: the token's subject and client; without a subject (no tokens,
// or one --token every client shares), the legacy session that made it — else every session would see every
// session's tasks. "" only where one client is served (stdio) or no caller can be told apart (stateless, no token).
function taskPrincipal(auth: AuthInfo | undefined, sessionId: string | undefined): string {
  return auth?.sub === undefined && sessionId !== undefined ? `session ${sessionId}` : principalOf(auth);
}

// What one principal may hold of a store shared by all: a tenth, at least one (as --max-sessions' 100 of 1000
// per token subject). The anonymous principal "" is everyone at once on a server that tells no one apart.
function perPrincipal(total: number, principal: string): number {
  return principal === "" ? total : Math.max(1, Math.floor(total / 10));
}

/**
 * Ids this process gave out and to whom (a gateway's <upstream>__<id>): `owns` is true only for the principal
 * an id was issued to, until it expires. Bounded: a principal keeps its newest perPrincipal(limit) ids, and
 * past ten times `limit` ids in all the oldest are forgotten, expired ones first.
 */
/** Makes room in a bounded map of expiring entries (kept in insertion order): at `max`, the expired go, then the oldest. */
function makeRoom<K, V>(map: Map<K, V>, max: number, expired: (value: V) => boolean): void {
  if (map.size < max) return;
  for (const [key, value] of map) if (expired(value)) map.delete(key);
  for (const key of map.keys()) {
    if (map.size < max) break;
    map.delete(key);
  }
}

class IssuedIds {
  #owners = new Map<string, { principal: string; expiresAt: number }>();
  #limit: number;
  #now: () => number;

  constructor(limit: number, now: () => number = Date.now) {
    this.#limit = limit;
    this.#now = now;
  }

  issue(id: string, principal: string, ttlMs: number): void {
    const now = this.#now();
    this.#owners.delete(id);
    const cap = perPrincipal(this.#limit, principal);
    const own = [...this.#owners].filter(([, owner]) => owner.principal === principal);
    for (let i = 0; i <= own.length - cap; i++) this.#owners.delete(own[i][0]);
    makeRoom(this.#owners, this.#limit * 10, (owner) => owner.expiresAt <= now);
    this.#owners.set(id, { principal, expiresAt: now + ttlMs });
  }

  owns(id: unknown, principal: string): boolean {
    const owner = typeof id === "string" ? this.#owners.get(id) : undefined;
    if (!owner || owner.expiresAt <= this.#now()) return false;
    return owner.principal === principal;
  }
}

// `text` without the run of `chars` at its end. A loop, not /[chars]+$/: that pattern tries every start of the
// run and scans it to the end each time, quadratic on a long run a peer sends (Safety: linear-time parsing).
function trimEnd(text: string, chars: string): string {
  let end = text.length;
  while (end > 0 && chars.includes(text[end - 1])) end--;
  return end === text.length ? text : text.slice(0, end);
}

/**
 * A runtime's error message as it may be printed, logged or exported: a URL's credentials and query removed.
 * Node's fetch quotes the whole URL when it refuses one with `user:pass@` in it, and a runtime's message may hold
 * a URL with a token in its query; the message is otherwise exact.
 * @internal
 */
export function redact(message: string): string {
  let out = "";
  let at = 0;
  for (let scheme; (scheme = message.indexOf("://", at)) >= 0;) {
    let end = scheme + 3;
    while (end < message.length && !URL_END.has(message[end])) end++;
    let rest = message.slice(scheme + 3, end); // authority, path, query, fragment
    const path = rest.search(/[/?#]/);
    const userinfo = rest.lastIndexOf("@", path < 0 ? rest.length : path);
    if (userinfo >= 0) rest = rest.slice(userinfo + 1);
    const query = rest.search(/[?#]/);
    out += message.slice(at, scheme + 3) + (query < 0 ? rest : rest.slice(0, query));
    at = end;
  }
  return out + message.slice(at);
}
// What ends a URL inside a message: space, quotes, brackets, a control character.
const URL_END = new Set([" ", "\t", "\n", "\r", '"', "'", "<", ">", "`", ")", "]", "}"]);

// A URL as a warning may show it: no credentials, query or fragment.
function safeUrl(url: string): string {
  try {
    const { origin, pathname } = new URL(url);
    return origin + pathname;
  } catch {
    return "(an invalid URL)";
  }
}

/** The server could not be reached at all: refused, DNS, TLS, a reset. Exit code 3. */
export class UnreachableError extends ServerError {
  constructor(message: string, details: { retryable?: boolean } = {}) {
    super(message, details);
    this.name = "UnreachableError";
  }
}

const MAX_REDIRECTS = 10;

/**
 * fetch, following redirects only within the origin asked (scheme, host, port):
 * the runtimes drop only Authorization on a cross-origin redirect, so an API key
 * in another header, a token or a client secret in a body would go along.
 * A redirect elsewhere is an UnreachableError naming the target.
 */
async function fetchSameOrigin(url: URL | string, init: RequestInit): Promise<Response> {
  let at = new URL(url);
  let { method = "GET", body } = init;
  for (let hops = 0;; hops++) {
    const response = await fetch(at, { ...init, method, body, redirect: "manual" });
    const location = response.headers.get("location");
    if (response.status < 300 || response.status > 399 || response.status === 304 || location === null) {
      return response;
    }
    await response.body?.cancel().catch(noop);
    const target = new URL(location, at);
    if (target.origin !== at.origin) {
      throw new UnreachableError(
        `${at.origin}${at.pathname} redirects to ${target.origin}${target.pathname}, another origin: not followed ` +
          `(headers and tokens go only where they were given; use that URL if you trust it)`,
      );
    }
    if (hops >= MAX_REDIRECTS) {
      throw new UnreachableError(`${at.origin}${at.pathname}: over ${MAX_REDIRECTS} redirects`);
    }
    // fetch.spec.whatwg.org "HTTP-redirect fetch": 303, and 301/302 after a POST, go on as a GET without a body.
    if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === "POST")) {
      method = method === "HEAD" ? "HEAD" : "GET";
      body = undefined;
    }
    at = target;
  }
}

// What a closest-match search compares: the first characters of each text, and so many candidates at most. The
// edit distance is quadratic in its texts, and a peer chooses them (a 4 MiB request, a name, a cassette's keys):
// bounded, one search costs at most about 2,000 × 256² steps whatever the texts hold (Safety: linear-time parsing).
const CLOSEST_MATCH_CHARS = 256;
const CLOSEST_MATCH_CANDIDATES = 2_000;

/** Names close to `name` (edit distance, or one containing the other), best first; bounded work. @internal */
export function closestNames(name: string, candidates: string[], limit = 3): string[] {
  const wanted = name.slice(0, CLOSEST_MATCH_CHARS).toLowerCase();
  const scored = candidates.slice(0, CLOSEST_MATCH_CANDIDATES).map((candidate) => {
    const text = candidate.slice(0, CLOSEST_MATCH_CHARS).toLowerCase();
    return { candidate, text, distance: editDistance(wanted, text) };
  }).filter(({ text, distance }) =>
    distance <= Math.max(1, Math.floor(wanted.length / 3)) || text.includes(wanted) || wanted.includes(text)
  );
  scored.sort((a, b) => a.distance - b.distance || a.candidate.localeCompare(b.candidate));
  return scored.slice(0, limit).map(({ candidate }) => candidate);
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}

// === 3. Framing ==============================================================
// Bytes in, message texts out; message texts in, bytes out. The cap applies to
// the line being read, and an over-long line is dropped as it streams past, so
// memory stays bounded whatever arrives. Knows nothing of JSON.

/** How messages are delimited on a byte stream. */
export type Framing = "ndjson" | "content-length";

/** Callbacks of a {@linkcode FrameReader}. */
export interface FrameHandlers {
  /** A complete message text (a line without its newline, or a Content-Length body). */
  message(text: string): void;
  /** A message longer than the cap was skipped; called once per such message, as soon as it outgrows the cap. */
  oversize(limit: number, head?: Uint8Array): void;
  /** The framing was recognised from the first bytes of the stream. */
  framing?(framing: Framing): void;
}

const CONTENT_LENGTH_PREFIX = "content-length:";
// How much of an over-long message its reader is told: enough to find its "id".
const OVERSIZE_HEAD_BYTES = 256;

/** The JSON-RPC id near the start of a message's text, if it is there (an over-long answer's, to fail it). */
function idNearStart(head: Uint8Array | undefined): RequestId | undefined {
  if (!head) return undefined;
  const match = /"id"\s*:\s*(-?\d+(?:\.\d+)?|"(?:[^"\\]|\\.)*")/.exec(new TextDecoder().decode(head));
  if (!match) return undefined;
  try {
    return JSON.parse(match[1]) as RequestId;
  } catch {
    return undefined;
  }
}

/**
 * Splits a byte stream into messages. Newline-delimited JSON by default; a
 * stream whose first bytes are a `Content-Length:` header (LSP style) is read
 * in that framing instead. Work is linear in the input: pieces of a line that
 * spans chunks are kept in a list and joined once.
 */
export class FrameReader {
  #handlers: FrameHandlers;
  #maxBytes: number;
  #decoder = new TextDecoder();
  #mode: "detect" | Framing = "detect";
  #parts: Uint8Array[] = []; // pieces of the message being read
  #partsBytes = 0;
  #skipping = false; // inside an over-long message: drop bytes until its end
  #bodyBytes = -1; // content-length mode: body size being read, -1 while reading headers
  #skipBody = 0; // content-length mode: bytes of an over-long body left to drop

  constructor(handlers: FrameHandlers, maxBytes = DEFAULT_MAX_LINE_BYTES) {
    this.#handlers = handlers;
    this.#maxBytes = maxBytes;
  }

  /** The framing in use ("ndjson" until the first bytes say otherwise). */
  get framing(): Framing {
    return this.#mode === "detect" ? "ndjson" : this.#mode;
  }

  /** Feeds one chunk of bytes. */
  push(chunk: Uint8Array): void {
    if (this.#mode === "detect") {
      const decided = this.#detect(chunk);
      if (decided === undefined) return;
      chunk = decided;
    }
    if (this.#mode === "ndjson") this.#pushLines(chunk);
    else this.#pushContentLength(chunk);
  }

  /** The stream ended: a last line without a newline still counts. */
  end(): void {
    if (this.#mode === "detect") {
      this.#mode = "ndjson";
      const pending = this.#take();
      this.#pushLines(pending);
    }
    if (this.#mode === "ndjson" && !this.#skipping && this.#partsBytes > 0) {
      this.#emit(this.#take());
    }
    this.#parts = [];
    this.#partsBytes = 0;
  }

  // Holds the first bytes until they show which framing the peer uses.
  #detect(chunk: Uint8Array): Uint8Array | undefined {
    this.#keep(chunk);
    const head = this.#parts.length === 1 ? this.#parts[0] : concatBytes(this.#parts, this.#partsBytes);
    let i = 0;
    while (i < head.length && (head[i] === 0x20 || head[i] === 0x09 || head[i] === 0x0d || head[i] === NEWLINE)) i++;
    const seen = head.length - i;
    if (seen === 0) {
      this.#parts = []; // only blank lines so far: nothing to keep
      this.#partsBytes = 0;
      return undefined;
    }
    const first = head[i] | 0x20; // lower case
    let mode: Framing = "ndjson";
    if (first === 0x63 /* c */) {
      const wanted = Math.min(seen, CONTENT_LENGTH_PREFIX.length);
      const text = this.#decoder.decode(head.subarray(i, i + wanted)).toLowerCase();
      if (!CONTENT_LENGTH_PREFIX.startsWith(text)) mode = "ndjson";
      else if (wanted < CONTENT_LENGTH_PREFIX.length) return undefined; // need more bytes
      else mode = "content-length";
    }
    this.#mode = mode;
    this.#parts = [];
    this.#partsBytes = 0;
    this.#handlers.framing?.(mode);
    return head;
  }

  #pushLines(chunk: Uint8Array): void {
    let start = 0;
    const length = chunk.length;
    // Fast path: no line in progress and every complete line of the chunk under the
    // cap together: one decode and a string split instead of a decode per line.
    // (0x0A never occurs inside a UTF-8 sequence, so splitting the text is exact.)
    if (this.#partsBytes === 0 && !this.#skipping) {
      const last = chunk.lastIndexOf(NEWLINE);
      if (last > 0 && last <= this.#maxBytes) {
        const lines = this.#decoder.decode(chunk.subarray(0, last)).split("\n");
        for (const line of lines) this.#emitText(line);
        start = last + 1;
      }
    }
    while (start < length) {
      const newline = chunk.indexOf(NEWLINE, start);
      if (newline === -1) {
        this.#append(chunk.subarray(start));
        return;
      }
      if (this.#skipping) {
        this.#skipping = false;
      } else if (this.#partsBytes === 0) {
        if (newline - start > this.#maxBytes) {
          this.#handlers.oversize(this.#maxBytes, chunk.subarray(start, start + OVERSIZE_HEAD_BYTES));
        } else this.#emit(chunk.subarray(start, newline));
      } else {
        this.#append(chunk.subarray(start, newline));
        if (!this.#skipping) this.#emit(this.#take());
        this.#skipping = false;
      }
      start = newline + 1;
    }
  }

  #pushContentLength(chunk: Uint8Array): void {
    let start = 0;
    while (start < chunk.length) {
      if (this.#skipBody > 0) {
        const dropped = Math.min(this.#skipBody, chunk.length - start);
        this.#skipBody -= dropped;
        start += dropped;
        continue;
      }
      if (this.#bodyBytes < 0) {
        // Reading headers: up to the blank line.
        const end = findHeaderEnd(chunk, start, this.#parts);
        if (end === -1) {
          this.#appendHeader(chunk.subarray(start));
          return;
        }
        this.#appendHeader(chunk.subarray(start, end));
        start = end;
        const headers = this.#decoder.decode(this.#take());
        const match = /content-length:\s*(\d+)/i.exec(headers);
        const size = match ? Number(match[1]) : -1;
        if (size < 0) {
          this.#handlers.message(""); // reported as a parse error by the peer
        } else if (size > this.#maxBytes) {
          this.#handlers.oversize(this.#maxBytes);
          this.#skipBody = size;
        } else {
          this.#bodyBytes = size;
        }
        continue;
      }
      const wanted = this.#bodyBytes - this.#partsBytes;
      const available = chunk.length - start;
      if (available < wanted) {
        this.#append(chunk.subarray(start));
        return;
      }
      this.#append(chunk.subarray(start, start + wanted));
      start += wanted;
      this.#bodyBytes = -1;
      this.#handlers.message(this.#decoder.decode(this.#take()));
    }
  }

  #appendHeader(piece: Uint8Array): void {
    if (this.#partsBytes + piece.length > MAX_HEADER_BYTES) {
      // Not a header block: drop it and resynchronise on the next blank line.
      this.#parts = [];
      this.#partsBytes = 0;
      return;
    }
    this.#keep(piece);
  }

  // Adds a piece of the line being read, or starts skipping it when it outgrows the cap.
  #append(piece: Uint8Array): void {
    if (this.#skipping || piece.length === 0) return;
    if (this.#mode === "ndjson" && this.#partsBytes + piece.length > this.#maxBytes) {
      const head = concatBytes([...this.#parts, piece], this.#partsBytes + piece.length).subarray(
        0,
        OVERSIZE_HEAD_BYTES,
      );
      this.#skipping = true;
      this.#parts = [];
      this.#partsBytes = 0;
      this.#handlers.oversize(this.#maxBytes, head);
      return;
    }
    this.#keep(piece);
  }

  #keep(piece: Uint8Array): void {
    // Chunks may be reused by the stream after the callback: keep a copy.
    this.#parts.push(piece.slice());
    this.#partsBytes += piece.length;
  }

  #take(): Uint8Array {
    const whole = this.#parts.length === 1 ? this.#parts[0] : concatBytes(this.#parts, this.#partsBytes);
    this.#parts = [];
    this.#partsBytes = 0;
    return whole;
  }

  #emit(bytes: Uint8Array): void {
    if (bytes.length > 0) this.#emitText(this.#decoder.decode(bytes));
  }

  #emitText(line: string): void {
    const text = line.charCodeAt(line.length - 1) === 0x0d ? line.slice(0, -1) : line; // CRLF
    if (text.length === 0) return;
    // Blank lines are keep-alives, not messages.
    const first = text.charCodeAt(0);
    if ((first === 0x20 || first === 0x09) && text.trim() === "") return;
    this.#handlers.message(text);
  }
}

function concatBytes(parts: Uint8Array[], total: number): Uint8Array {
  const whole = new Uint8Array(total);
  let offset = 0;
  for (const part of parts) {
    whole.set(part, offset);
    offset += part.length;
  }
  return whole;
}

// Finds the end of a "\r\n\r\n" (or "\n\n") header terminator that may span
// the pieces already read and this chunk; returns the index in chunk just after it.
function findHeaderEnd(chunk: Uint8Array, start: number, parts: Uint8Array[]): number {
  // The last byte already read that is not a CR (a terminator may span chunks).
  let previous = -1;
  for (let p = parts.length - 1; p >= 0 && previous === -1; p--) {
    const part = parts[p];
    for (let i = part.length - 1; i >= 0; i--) {
      if (part[i] !== 0x0d) {
        previous = part[i];
        break;
      }
    }
  }
  for (let i = start; i < chunk.length; i++) {
    const byte = chunk[i];
    if (byte === 0x0d) continue;
    if (byte === NEWLINE && previous === NEWLINE) return i + 1;
    previous = byte;
  }
  return -1;
}

// UTF-8 bytes of a string, counted without encoding it (a lone surrogate is U+FFFD: 3 bytes).
function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) continue;
    if (code < 0x800) bytes += 1;
    else if (code <= 0xdbff && code >= 0xd800 && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) bytes += 2, i++;
    else bytes += 2;
  }
  return bytes;
}

/**
 * Splits chunks of text into lines (a trailing \r dropped), as a process's stderr
 * is read: `finish` hands on the unfinished last one. A line longer than
 * `maxChars` keeps only its end, so memory stays bounded.
 * @internal
 */
export class LineSplitter {
  #partial = "";
  #decoder = new TextDecoder();
  #maxChars: number;
  #line: (line: string) => void;

  constructor(maxChars: number, line: (line: string) => void) {
    this.#maxChars = maxChars;
    this.#line = line;
  }

  push(chunk: Uint8Array): void {
    const lines = (this.#partial + this.#decoder.decode(chunk, { stream: true })).split("\n");
    this.#partial = lines.pop()!;
    if (this.#partial.length > this.#maxChars) this.#partial = this.#partial.slice(-this.#maxChars);
    for (const line of lines) this.#line(line.endsWith("\r") ? line.slice(0, -1) : line);
  }

  finish(): void {
    const rest = this.#partial + this.#decoder.decode();
    this.#partial = "";
    if (rest) this.#line(rest);
  }
}

/**
 * Queues outgoing message texts and writes them in one chunk per turn of the
 * event loop, framed as the peer expects. One write per input chunk instead of
 * one per message is most of what makes a server fast.
 */
export class FrameWriter {
  #write: (text: string, written?: () => void) => boolean;
  #queue: string[] = [];
  #scheduled = false;
  #flushBound = () => this.flush();
  #afterWrite: (() => void)[] = []; // run once the queued text has been written
  /** How messages are delimited; follows the framing the peer used. */
  framing: Framing = "ndjson";
  /** Called after a write that the sink asked us to slow down for. */
  onBackpressure?: () => void;

  constructor(write: (text: string, written?: () => void) => boolean) {
    this.#write = write;
  }

  /** Queues one message text (compact JSON, no newline). */
  send(text: string): void {
    this.#queue.push(
      this.framing === "ndjson" ? text + "\n" : `Content-Length: ${utf8Length(text)}\r\n\r\n${text}`,
    );
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(this.#flushBound);
    }
  }

  /** Runs `callback` once everything queued so far has been handed to the sink. */
  whenWritten(callback: () => void): void {
    if (this.#queue.length > 0) this.#afterWrite.push(callback);
    else setImmediate(callback);
  }

  /** Writes everything queued now. */
  flush(): void {
    this.#scheduled = false;
    if (this.#queue.length === 0) return;
    const text = this.#queue.length === 1 ? this.#queue[0] : this.#queue.join("");
    this.#queue = [];
    const after = this.#afterWrite;
    let written: (() => void) | undefined;
    if (after.length > 0) {
      this.#afterWrite = [];
      written = () => {
        for (const callback of after) callback();
      };
    }
    if (!this.#write(text, written)) this.onBackpressure?.();
  }
}

/** One server-sent event (the fields MCP uses). */
interface SseEvent {
  /** `event:`; "message" when none was given. */
  event: string;
  data: string;
  /** `id:`, when the event had one. */
  id?: string;
  /** `retry:` in ms, when the event had one. */
  retry?: number;
}

/**
 * Splits a `text/event-stream` body into events (the WHATWG "event stream"
 * format, as Streamable HTTP uses it):
 *
 *   id: 7\nretry: 500\ndata: {"jsonrpc":"2.0",...}\n\n      an event ends at a blank line
 *   : keep-alive\n\n                                       a comment, skipped
 *
 * Lines end in \n, \r\n or \r. An event longer than the cap is dropped whole,
 * and `onOversize` hears of it as soon as it outgrows the cap.
 * @internal
 */
export class SseReader {
  #onEvent: (event: SseEvent) => void;
  #onOversize: (limit: number) => void;
  #maxBytes: number;
  #decoder = new TextDecoder();
  #rest = ""; // an unfinished line
  #data: string[] = [];
  #size = 0;
  #event = "";
  #id: string | undefined;
  #retry: number | undefined;
  #oversize = false;
  #ended = false;

  constructor(onEvent: (event: SseEvent) => void, maxBytes: number, onOversize: (limit: number) => void = noop) {
    this.#onEvent = onEvent;
    this.#onOversize = onOversize;
    this.#maxBytes = maxBytes;
  }

  /** Takes the next chunk of the body. */
  push(chunk: Uint8Array): void {
    this.#lines(this.#decoder.decode(chunk, { stream: true }));
  }

  /** The body ended: an unfinished event is dropped, as the format says. */
  end(): void {
    this.#ended = true;
    this.#lines(this.#decoder.decode());
  }

  #lines(text: string): void {
    let start = 0;
    const all = this.#rest + text;
    this.#rest = "";
    for (let i = 0; i < all.length; i++) {
      const ch = all.charCodeAt(i);
      if (ch !== 10 && ch !== 13) continue;
      if (ch === 13 && i + 1 === all.length && !this.#ended) break; // a \r\n split across chunks: wait for the \n
      this.#line(all.slice(start, i));
      if (ch === 13 && all.charCodeAt(i + 1) === 10) i++;
      start = i + 1;
    }
    this.#rest = all.slice(start);
    if (this.#rest.length + this.#size > this.#maxBytes) this.#tooLong();
  }

  #tooLong(): void {
    this.#rest = "";
    this.#data = [];
    if (this.#oversize) return;
    this.#oversize = true;
    this.#onOversize(this.#maxBytes);
  }

  #line(line: string): void {
    if (line === "") {
      if (this.#data.length > 0 && !this.#oversize) {
        const event: SseEvent = { event: this.#event || "message", data: this.#data.join("\n") };
        if (this.#id !== undefined) event.id = this.#id;
        if (this.#retry !== undefined) event.retry = this.#retry;
        this.#onEvent(event);
      } else if (this.#data.length === 0 && (this.#id !== undefined || this.#retry !== undefined)) {
        // A priming event (an id and an empty data field): no message, but its id and retry count.
        this.#onEvent({ event: this.#event || "message", data: "", id: this.#id, retry: this.#retry });
      }
      this.#data = [];
      this.#size = 0;
      this.#event = "";
      this.#retry = undefined;
      this.#id = undefined;
      this.#oversize = false;
      return;
    }
    if (line.charCodeAt(0) === 58) return; // ":" a comment
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    switch (field) {
      case "data":
        this.#size += value.length;
        if (this.#size > this.#maxBytes) this.#tooLong();
        else if (!this.#oversize) this.#data.push(value);
        break;
      case "event":
        this.#event = value;
        break;
      case "id":
        if (!value.includes("\0")) this.#id = value;
        break;
      case "retry":
        if (/^\d+$/.test(value)) this.#retry = Number(value);
        break;
    }
  }
}

// === 4. JSON-RPC peer ========================================================
// Checks incoming messages against JSON-RPC 2.0, dispatches requests and
// notifications to the owner, matches responses to our own requests. Knows no
// MCP methods and no streams: the owner hands in texts and a send function.

/** A JSON-RPC request id (MCP forbids null). */
export type RequestId = string | number;

/** A JSON object as received. */
export type JsonObject = Record<string, unknown>;

/** Returned by a request handler that must not be answered (a cancelled request). */
const NO_RESPONSE: unique symbol = Symbol("no response");

/**
 * Where an outgoing message belongs: the request it answers, or on whose behalf
 * it is sent (a call's progress, a server→client request made by a tool). Over
 * HTTP it picks the response stream; stdio has one stream and ignores it.
 */
export interface SendContext {
  requestId?: RequestId;
  /** The message is the response to `requestId`: nothing more comes for it. */
  final?: boolean;
  /** The response is an error with this code. */
  errorCode?: number;
  /** HTTP headers an outgoing request carries (the 2026-07-28 mirror headers); other transports ignore them. */
  headers?: Record<string, string>;
}

/** What a {@linkcode JsonRpcPeer} needs from its owner. */
export interface PeerHandlers {
  /** Writes one message text; `context` says which request it belongs to, if any. */
  send(text: string, context?: SendContext): void;
  /** Handles a request; returns its result (or a promise of it), or throws an RpcError. */
  request(method: string, params: JsonObject, id: RequestId): unknown;
  /** Handles a notification; never answered. */
  notification(method: string, params: JsonObject): void;
  /**
   * Takes a message that is not valid JSON-RPC instead of answering it with an
   * error (a client does not answer a server's garbage, it counts it).
   */
  invalid?(text: string, reason: string): void;
  /**
   * Cancels one of our requests that was aborted; by default the peer sends
   * notifications/cancelled (an HTTP client of 2026-07-28 closes its stream instead).
   */
  cancel?(id: RequestId, reason: string, context?: SendContext): void;
}

interface PendingRequest {
  resolve(result: unknown): void;
  reject(error: Error): void;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A JSON object from text a peer or a store gave; undefined for anything else, or for text that is not JSON. */
function parseJsonObject(text: string): JsonObject | undefined {
  try {
    const value = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function isRequestId(value: unknown): value is RequestId {
  return typeof value === "string" || (typeof value === "number" && Number.isFinite(value));
}

const EMPTY_PARAMS: JsonObject = Object.freeze({}) as JsonObject;

/** One side of a JSON-RPC 2.0 conversation over any message transport. */
export class JsonRpcPeer {
  #handlers: PeerHandlers;
  #pending = new Map<RequestId, PendingRequest>();
  #nextId = 0;
  #closed: Error | undefined;

  /** The id of the request sent last (read right after `request` to know what its messages are about). */
  get lastId(): RequestId {
    return this.#nextId;
  }

  /** Whether a response with this id would answer a request of ours still waiting. */
  awaits(id: RequestId): boolean {
    return this.#pending.has(id);
  }

  /** Numbers our requests from `first` + 1 on (replicas of one session: their ids must not meet). */
  startIdsAt(first: number): void {
    this.#nextId = first;
  }
  #withContext: boolean;

  constructor(handlers: PeerHandlers) {
    this.#handlers = handlers;
    // An owner whose send takes one parameter ignores the context: make none per response.
    this.#withContext = handlers.send.length > 1;
  }

  /**
   * Handles one incoming message: its text, or with `parsed` the message already parsed (to parse it
   * once; `text` may then be left out).
   */
  receive(text: string | undefined, parsed?: unknown): void {
    let message: unknown = parsed;
    if (parsed === undefined) {
      try {
        message = JSON.parse(text!);
      } catch {
        this.#invalid(text, undefined, null, ErrorCode.ParseError, "Parse error: not valid JSON");
        return;
      }
    }
    if (!isObject(message)) {
      const what = Array.isArray(message)
        ? "a JSON array (batches are not part of MCP since 2025-06-18)"
        : "not an object";
      this.#invalid(text, message, null, ErrorCode.InvalidRequest, `Invalid request: message is ${what}`);
      return;
    }
    const { id, method } = message;
    if (method === undefined && ("result" in message || "error" in message)) {
      // A response. One without a usable id is about a message the peer could
      // not read: nothing to settle, and answering it could start an error loop.
      if (isRequestId(id)) this.#settle(id, message);
      return;
    }
    const hasId = "id" in message;
    if (hasId && !isRequestId(id)) {
      this.#invalid(text, message, null, ErrorCode.InvalidRequest, "Invalid request: id must be a string or a number");
      return;
    }
    const replyId = hasId ? id as RequestId : null;
    if (message.jsonrpc !== "2.0") {
      this.#invalid(text, message, replyId, ErrorCode.InvalidRequest, 'Invalid request: "jsonrpc" must be "2.0"');
      return;
    }
    if (typeof method !== "string") {
      this.#invalid(text, message, replyId, ErrorCode.InvalidRequest, 'Invalid request: "method" must be a string');
      return;
    }
    const params = message.params ?? EMPTY_PARAMS;
    if (!isObject(params)) {
      this.#sendError(replyId, ErrorCode.InvalidParams, 'Invalid params: "params" must be an object');
      return;
    }
    if (!hasId) {
      try {
        this.#handlers.notification(method, params);
      } catch {
        // Notifications are never answered, not even with an error.
      }
      return;
    }
    this.#dispatch(method, params, id as RequestId);
  }

  #dispatch(method: string, params: JsonObject, id: RequestId): void {
    let result: unknown;
    try {
      result = this.#handlers.request(method, params, id);
    } catch (error) {
      this.#sendFailure(id, error);
      return;
    }
    if (result instanceof Promise) {
      result.then(
        (value) => this.#sendResult(id, value),
        (error) => this.#sendFailure(id, error),
      );
    } else {
      this.#sendResult(id, result);
    }
  }

  #sendResult(id: RequestId, result: unknown): void {
    if (result === NO_RESPONSE || this.#closed) return;
    let text: string;
    try {
      // The envelope spelled out: no wrapper object to build and walk per response.
      const idText = typeof id === "number" ? String(id) : JSON.stringify(id);
      text = `{"jsonrpc":"2.0","id":${idText},"result":${JSON.stringify(result ?? {})}}`;
    } catch (error) {
      this.#sendFailure(id, error);
      return;
    }
    this.#handlers.send(text, this.#withContext ? { requestId: id, final: true } : undefined);
  }

  #sendFailure(id: RequestId, error: unknown): void {
    if (error === NO_RESPONSE) return;
    if (error instanceof RpcError) this.#sendError(id, error.code, error.message, error.data);
    else this.#sendError(id, ErrorCode.InternalError, `Internal error: ${errorMessage(error)}`);
  }

  // A message that is not JSON-RPC: answered with an error, or handed to the owner's `invalid`.
  // `text` is the message as it came, when there was one; else `parsed` stands for it (stringified only here).
  #invalid(text: string | undefined, parsed: unknown, id: RequestId | null, code: number, message: string): void {
    if (this.#handlers.invalid) this.#handlers.invalid(text ?? JSON.stringify(parsed), message);
    else this.#sendError(id, code, message);
  }

  #sendError(id: RequestId | null, code: number, message: string, data?: unknown): void {
    if (this.#closed) return;
    const error = data === undefined ? { code, message } : { code, message, data };
    this.#handlers.send(
      JSON.stringify({ jsonrpc: "2.0", id, error }),
      id === null ? undefined : { requestId: id, final: true, errorCode: code },
    );
  }

  /** Reports a message that was dropped before parsing (an over-long line). */
  reject(code: number, message: string): void {
    this.#sendError(null, code, message);
  }

  #settle(id: RequestId, message: JsonObject): void {
    const pending = this.#pending.get(id);
    if (!pending) return; // a response to nothing we asked: ignored
    this.#pending.delete(id);
    if (isObject(message.error)) {
      const { code, message: text, data } = message.error;
      pending.reject(
        new RpcError(typeof code === "number" ? code : ErrorCode.InternalError, String(text ?? "error"), data),
      );
    } else {
      pending.resolve(message.result);
    }
  }

  /**
   * Sends a request and resolves with its result; rejects with RpcError on an error response. `signal`
   * aborts it, cancelling it at the peer unless `cancelOnAbort` is false; `context` goes with what is sent.
   */
  request(
    method: string,
    params: JsonObject | undefined,
    options: {
      signal?: AbortSignal;
      cancelOnAbort?: boolean;
      context?: SendContext;
      onSent?: (id: RequestId) => void;
    } = {},
  ): Promise<unknown> {
    const { signal, cancelOnAbort = true, context } = options;
    if (this.#closed) return Promise.reject(this.#closed);
    if (signal?.aborted) return Promise.reject(signal.reason);
    const id = ++this.#nextId;
    options.onSent?.(id);
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.#pending.delete(id);
        if (cancelOnAbort) {
          const reason = errorMessage(signal?.reason);
          if (this.#handlers.cancel) this.#handlers.cancel(id, reason, context);
          else this.notify("notifications/cancelled", { requestId: id, reason }, context);
        }
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#pending.set(id, {
        resolve: (value) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(value);
        },
        reject: (error) => {
          signal?.removeEventListener("abort", onAbort);
          reject(error);
        },
      });
      this.#handlers.send(
        JSON.stringify(params ? { jsonrpc: "2.0", id, method, params } : { jsonrpc: "2.0", id, method }),
        context,
      );
    });
  }

  /** Sends a notification; `context` names the request it belongs to, if any. */
  notify(method: string, params?: JsonObject, context?: SendContext): void {
    if (this.#closed) return;
    this.#handlers.send(
      JSON.stringify(params ? { jsonrpc: "2.0", method, params } : { jsonrpc: "2.0", method }),
      context,
    );
  }

  /** Fails one pending request with `error` (its transport could not deliver it or its answer). */
  fail(id: RequestId, error: Error): void {
    const pending = this.#pending.get(id);
    if (!pending) return;
    this.#pending.delete(id);
    pending.reject(error);
  }

  /** Fails every pending request with `error`; the conversation goes on. */
  failPending(error: Error): void {
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }

  /** Ends the conversation: pending requests fail with `reason`, later sends are dropped. */
  close(reason: Error): void {
    if (this.#closed) return;
    this.#closed = reason;
    for (const pending of this.#pending.values()) pending.reject(reason);
    this.#pending.clear();
  }
}

// === 5. Protocol eras ========================================================
// The two ways a request can be spoken. Legacy (2024-11-05 … 2025-11-25): an
// `initialize` handshake fixes the client's version and capabilities for the
// connection. 2026-07-28: stateless, every request carries them in its `_meta`
// envelope (basic/index.mdx, basic/versioning.mdx):
//
//   {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1},
//    "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
//             "io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"}}}
//
// One object per era says which methods it lacks, how a session opens, how a
// question reaches the client and a request is cancelled, and encodes results and
// errors. The server and the client ask the era; nothing branches on its name.
// Pure: no I/O.

/** Versions of the stateless era this file speaks. */
export const MODERN_PROTOCOL_VERSIONS = ["2026-07-28"] as const;

/** The `_meta` keys of the 2026-07-28 envelope. */
export const META = {
  protocolVersion: "io.modelcontextprotocol/protocolVersion",
  clientCapabilities: "io.modelcontextprotocol/clientCapabilities",
  clientInfo: "io.modelcontextprotocol/clientInfo",
  logLevel: "io.modelcontextprotocol/logLevel",
  serverInfo: "io.modelcontextprotocol/serverInfo",
  subscriptionId: "io.modelcontextprotocol/subscriptionId",
} as const;

/** The official extensions of 2026-07-28 this file speaks, as `capabilities.extensions` names them. @internal */
export const EXTENSIONS = {
  tasks: "io.modelcontextprotocol/tasks",
  skills: "io.modelcontextprotocol/skills",
} as const;

/** Whether capabilities declare extension `id` (its value an object, as SEP-2133 says). */
function declaresExtension(capabilities: JsonObject, id: string): boolean {
  const extensions = capabilities.extensions;
  return isObject(extensions) && isObject(extensions[id]);
}

/**
 * The W3C Trace Context a request's `_meta` carries (`traceparent`, `tracestate`, `baggage`: reserved keys, SEP-414),
 * checked: a traceparent of version 00 is exactly `00-<32 hex>-<16 hex>-<2 hex>`, lowercase, ids not all zeros (a
 * higher version is read by its first four fields, ff is invalid); a tracestate over 512 characters is dropped; what
 * is not valid is absent. Undefined when there is no valid traceparent.
 * @internal
 */
export function traceContextOf(
  meta: unknown,
): { traceparent: string; tracestate?: string; baggage?: string } | undefined {
  if (!isObject(meta) || typeof meta.traceparent !== "string") return undefined;
  const match = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/.exec(meta.traceparent);
  if (!match) return undefined;
  const [, version, traceId, spanId, , rest] = match;
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  const context: { traceparent: string; tracestate?: string; baggage?: string } = { traceparent: meta.traceparent };
  if (typeof meta.tracestate === "string" && meta.tracestate.length <= 512) context.tracestate = meta.tracestate;
  if (typeof meta.baggage === "string") context.baggage = meta.baggage;
  return context;
}

/** What mcpNameOf answers for a method that has no Mcp-Name header. */
const UNNAMED: unique symbol = Symbol("no Mcp-Name");

/**
 * What a request's Mcp-Name header mirrors (2026-07-28): the name of tools/call and prompts/get, the uri of
 * resources/read (streamable-http.mdx), the taskId of tasks/get, tasks/update and tasks/cancel (SEP-2663).
 */
function mcpNameOf(method: string, params: JsonObject): unknown {
  switch (method) {
    case "tools/call":
    case "prompts/get":
      return params.name;
    case "resources/read":
      return params.uri;
    case "tasks/get":
    case "tasks/update":
    case "tasks/cancel":
      return params.taskId;
  }
  return UNNAMED;
}

/** What a request is served for: the client's protocol version, capabilities and log level. */
/** A legacy session as replicas share it: what initialize, logging/setLevel and subscribe made of it. @internal */
interface SessionState {
  protocolVersion: string;
  capabilities: JsonObject;
  clientInfo?: JsonObject;
  logLevel: number;
  initialized: boolean;
  /** The resources subscribed to (watched on the replica that was asked). */
  subscriptions: string[];
}

interface ClientView {
  protocolVersion: string;
  capabilities: JsonObject;
  /** A legacy HTTP session's id (mcp.session.id on its spans). */
  sessionId?: string;
  /** Index in LOG_LEVELS of the least severe level sent; LOG_LEVELS.length sends none. */
  logLevel: number;
}

/** How a server describes itself in results: serverInfo and the cache hints of the stateless era. */
interface ServerFacts {
  serverInfo: JsonObject;
  /** ttlMs of list and discover results (0 while the lists may change, e.g. under --watch). */
  listTtlMs: number;
  cacheScope: "public" | "private";
}

/** One protocol era, as the server and the client use it. */
interface Era {
  /** What `McpClient.era` says: "legacy" (the initialize handshake) or "modern" (2026-07-28). */
  readonly name: "legacy" | "modern";
  /** Methods of the other era, answered -32601 in this one. */
  readonly removed: ReadonlySet<string>;
  /** The request a client opens with: initialize, or server/discover. */
  readonly opening: string;
  /** Requests carry the `_meta` envelope (and over HTTP its mirror headers). */
  readonly envelope: boolean;
  /**
   * A server asks the client within the call's own result (input_required, mrtr.mdx), never by a
   * request of its own; the call's retry brings the answers.
   */
  readonly asksInResult: boolean;
  /**
   * Tasks are the SEP-2663 extension, declared per request (tasks/get, tasks/update, tasks/cancel); else the
   * 2025-11-25 experimental tasks.
   */
  readonly taskExtension: boolean;
  /** What a question the client has no capability for ends in. */
  missingCapability(capability: string, method: string): Error;
  /** A cancelled request is ended by closing its stream (`transport` "http"), not by notifications/cancelled. */
  cancelsByClosing(transport: string): boolean;
  /** The error for a resource the server does not have. */
  resourceNotFound(uri: unknown): RpcError;
  /** What a result looks like on the wire in this era. */
  encode(method: string, result: unknown, facts: ServerFacts): unknown;
}

// server/utilities/caching.mdx (2026-07-28): these complete results carry ttlMs and cacheScope.
const CACHEABLE_METHODS = new Set([
  "server/discover",
  "tools/list",
  "prompts/list",
  "resources/list",
  "resources/templates/list",
  "resources/read",
  "skills/list",
  "skills/get",
]);

/** The handshake era, 2024-11-05 … 2025-11-25. */
const LEGACY_ERA: Era = {
  name: "legacy",
  removed: new Set(["server/discover", "subscriptions/listen"]),
  opening: "initialize",
  envelope: false,
  asksInResult: false,
  taskExtension: false,
  missingCapability: (capability, method) =>
    new Error(`Cannot send ${method}: the client did not declare the "${capability}" capability`),
  cancelsByClosing: () => false,
  // -32002 is resource-not-found up to 2025-11-25 (server/resources.mdx).
  resourceNotFound: (uri) => new RpcError(-32002, `Resource not found: ${uri}`, { uri }),
  encode: (_method, result) => result,
};

/** The stateless era, 2026-07-28. */
const MODERN_ERA: Era = {
  name: "modern",
  removed: new Set([
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
  ]),
  opening: "server/discover",
  envelope: true,
  asksInResult: true,
  taskExtension: true,
  // basic/index.mdx (2026-07-28): a needed capability the client did not declare is -32021.
  missingCapability: (capability) =>
    new RpcError(ErrorCode.MissingRequiredClientCapability, `Missing required client capability: ${capability}`, {
      requiredCapabilities: { [capability]: {} },
    }),
  // cancellation.mdx: over HTTP in 2026-07-28, closing the request's stream is the cancellation.
  cancelsByClosing: (transport) => transport === "http",
  // basic/index.mdx (2026-07-28): -32002 is not used any more; not found is -32602.
  resourceNotFound: (uri) => new RpcError(ErrorCode.InvalidParams, `Resource not found: ${uri}`, { uri }),
  encode(method, result, facts) {
    if (!isObject(result)) return result;
    const encoded: JsonObject = { ...result };
    encoded.resultType ??= "complete";
    if (encoded.resultType === "complete" && CACHEABLE_METHODS.has(method)) {
      encoded.ttlMs ??= method === "resources/read" ? 0 : facts.listTtlMs;
      encoded.cacheScope ??= facts.cacheScope;
    }
    encoded._meta = { ...(isObject(result._meta) ? result._meta : {}), [META.serverInfo]: facts.serverInfo };
    return encoded;
  },
};

/** Whether a request's params carry the 2026-07-28 envelope (its protocol version claim). */
function isModernRequest(params: JsonObject): boolean {
  const meta = params._meta;
  return meta !== undefined && isObject(meta) && META.protocolVersion in meta;
}

/**
 * The client view of a 2026-07-28 request, from its `_meta`: -32602 for a
 * missing or malformed field, -32022 for a version this file does not speak.
 */
function modernClientView(params: JsonObject): ClientView {
  const meta = isObject(params._meta) ? params._meta : {};
  const version = meta[META.protocolVersion];
  if (typeof version !== "string") {
    throw new RpcError(ErrorCode.InvalidParams, `Invalid params: _meta["${META.protocolVersion}"] must be a string`);
  }
  if (!(MODERN_PROTOCOL_VERSIONS as readonly string[]).includes(version)) {
    throw new RpcError(ErrorCode.UnsupportedProtocolVersion, "Unsupported protocol version", {
      supported: [...MODERN_PROTOCOL_VERSIONS],
      requested: version,
    });
  }
  const capabilities = meta[META.clientCapabilities];
  if (!isObject(capabilities)) {
    throw new RpcError(
      ErrorCode.InvalidParams,
      `Invalid params: _meta["${META.clientCapabilities}"] must be an object`,
    );
  }
  const level = meta[META.logLevel];
  let logLevel: number = LOG_LEVELS.length; // logging.mdx: no logLevel, no log messages
  if (level !== undefined) {
    logLevel = LOG_LEVELS.indexOf(level as LogLevel);
    if (logLevel < 0) {
      throw new RpcError(
        ErrorCode.InvalidParams,
        `Invalid params: _meta["${META.logLevel}"] must be one of ${LOG_LEVELS.join(", ")}`,
      );
    }
  }
  return { protocolVersion: version, capabilities, logLevel };
}

// === 6. Schema validation ====================================================
// The JSON Schema keywords tool input schemas use, checked without compiling.
// Returns every violation as "<path> <rule> (<keyword>)"; never throws on a
// schema it does not understand (unknown keywords are ignored, as the spec says).

/** Checks `value` against a JSON Schema; returns the violations, empty when valid. */
export function validate(schema: unknown, value: unknown): string[] {
  const errors: string[] = [];
  checkSchema(schema, value, null, errors);
  return errors;
}

const patternCache = new Map<string, RegExp | null>();

function compilePattern(pattern: string): RegExp | null {
  let regex = patternCache.get(pattern);
  if (regex === undefined) {
    try {
      regex = new RegExp(pattern, "u");
    } catch {
      regex = null; // an invalid pattern constrains nothing
    }
    patternCache.set(pattern, regex);
  }
  return regex;
}

function jsonType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function hasType(value: unknown, type: unknown): boolean {
  switch (type) {
    case "object":
      return isObject(value);
    case "array":
      return Array.isArray(value);
    case "string":
      return typeof value === "string";
    case "number":
      return typeof value === "number" && Number.isFinite(value);
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "boolean":
      return typeof value === "boolean";
    case "null":
      return value === null;
    default:
      return true; // unknown type names constrain nothing
  }
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((item, i) => deepEqual(item, other[i]));
  }
  const aKeys = Object.keys(a);
  const bObject = b as JsonObject;
  return aKeys.length === Object.keys(bObject).length &&
    aKeys.every((key) => key in bObject && deepEqual((a as JsonObject)[key], bObject[key]));
}

function codePointLength(text: string): number {
  let length = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        length--;
        i++;
      }
    }
  }
  return length;
}

// Where a value sits in the arguments, as a chain built while walking and
// spelled out only for an error: valid arguments cost no strings.
type SchemaPath = { parent: SchemaPath; key: string | number } | null;

function formatPath(path: SchemaPath): string {
  if (path === null) return "arguments";
  const { key } = path;
  if (typeof key === "number") return `${formatPath(path.parent)}[${key}]`;
  return /^[A-Za-z_$][\w$]*$/.test(key)
    ? `${formatPath(path.parent)}.${key}`
    : `${formatPath(path.parent)}[${JSON.stringify(key)}]`;
}

function brief(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? text.slice(0, 57) + "..." : text;
}

function checkSchema(schema: unknown, value: unknown, path: SchemaPath, errors: string[]): void {
  if (schema === false) {
    errors.push(`${formatPath(path)} is not allowed (false schema)`);
    return;
  }
  if (!isObject(schema)) return; // true, or not a schema: anything goes
  const s = schema;
  if (s.type !== undefined) {
    // The common single type is checked without building an array.
    const ok = Array.isArray(s.type) ? s.type.some((type) => hasType(value, type)) : hasType(value, s.type);
    if (!ok) {
      const types = Array.isArray(s.type) ? s.type : [s.type];
      errors.push(`${formatPath(path)} must be ${types.join(" or ")}, got ${jsonType(value)} (type)`);
      return; // the other keywords would only repeat the same mistake
    }
  }
  if (Array.isArray(s.enum) && !s.enum.some((option) => deepEqual(option, value))) {
    errors.push(`${formatPath(path)} must be one of ${brief(s.enum)} (enum)`);
  }
  if ("const" in s && !deepEqual(s.const, value)) {
    errors.push(`${formatPath(path)} must equal ${brief(s.const)} (const)`);
  }

  if (typeof value === "number") {
    if (typeof s.minimum === "number" && value < s.minimum) {
      errors.push(`${formatPath(path)} must be >= ${s.minimum} (minimum)`);
    }
    if (typeof s.maximum === "number" && value > s.maximum) {
      errors.push(`${formatPath(path)} must be <= ${s.maximum} (maximum)`);
    }
    if (typeof s.exclusiveMinimum === "number" && value <= s.exclusiveMinimum) {
      errors.push(`${formatPath(path)} must be > ${s.exclusiveMinimum} (exclusiveMinimum)`);
    }
    if (typeof s.exclusiveMaximum === "number" && value >= s.exclusiveMaximum) {
      errors.push(`${formatPath(path)} must be < ${s.exclusiveMaximum} (exclusiveMaximum)`);
    }
    if (typeof s.multipleOf === "number" && s.multipleOf > 0 && !Number.isInteger(value / s.multipleOf)) {
      errors.push(`${formatPath(path)} must be a multiple of ${s.multipleOf} (multipleOf)`);
    }
  } else if (typeof value === "string") {
    if (typeof s.minLength === "number" || typeof s.maxLength === "number") {
      const length = codePointLength(value);
      if (typeof s.minLength === "number" && length < s.minLength) {
        errors.push(`${formatPath(path)} must be at least ${s.minLength} characters long (minLength)`);
      }
      if (typeof s.maxLength === "number" && length > s.maxLength) {
        errors.push(`${formatPath(path)} must be at most ${s.maxLength} characters long (maxLength)`);
      }
    }
    if (typeof s.pattern === "string") {
      const regex = compilePattern(s.pattern);
      if (regex && !regex.test(value)) errors.push(`${formatPath(path)} must match ${brief(s.pattern)} (pattern)`);
    }
  } else if (Array.isArray(value)) {
    if (typeof s.minItems === "number" && value.length < s.minItems) {
      errors.push(`${formatPath(path)} must have at least ${s.minItems} items (minItems)`);
    }
    if (typeof s.maxItems === "number" && value.length > s.maxItems) {
      errors.push(`${formatPath(path)} must have at most ${s.maxItems} items (maxItems)`);
    }
    // 2020-12 prefixItems, and the draft-07 tuple form of items
    const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
    for (let i = 0; i < value.length; i++) {
      const itemSchema = i < prefix.length ? prefix[i] : Array.isArray(s.items) ? s.additionalItems : s.items;
      if (itemSchema !== undefined) checkSchema(itemSchema, value[i], { parent: path, key: i }, errors);
    }
    if (s.uniqueItems === true) {
      for (let i = 1; i < value.length; i++) {
        if (value.slice(0, i).some((earlier) => deepEqual(earlier, value[i]))) {
          errors.push(`${formatPath(path)} must not repeat items (uniqueItems)`);
          break;
        }
      }
    }
  } else if (isObject(value)) {
    if (Array.isArray(s.required)) {
      for (const key of s.required) {
        if (typeof key === "string" && !Object.hasOwn(value, key)) {
          errors.push(`${formatPath({ parent: path, key })} is required (required)`);
        }
      }
    }
    const properties = isObject(s.properties) ? s.properties : undefined;
    const additional = s.additionalProperties;
    let count = 0;
    for (const key in value) {
      if (!Object.hasOwn(value, key)) continue;
      count++;
      if (properties && Object.hasOwn(properties, key)) {
        checkSchema(properties[key], value[key], { parent: path, key }, errors);
      } else if (additional === false) {
        errors.push(`${formatPath({ parent: path, key })} is not an allowed property (additionalProperties)`);
      } else if (isObject(additional)) {
        checkSchema(additional, value[key], { parent: path, key }, errors);
      }
    }
    if (typeof s.minProperties === "number" && count < s.minProperties) {
      errors.push(`${formatPath(path)} must have at least ${s.minProperties} properties (minProperties)`);
    }
    if (typeof s.maxProperties === "number" && count > s.maxProperties) {
      errors.push(`${formatPath(path)} must have at most ${s.maxProperties} properties (maxProperties)`);
    }
  }

  if (Array.isArray(s.allOf)) { for (const sub of s.allOf) checkSchema(sub, value, path, errors); }
  if (Array.isArray(s.anyOf) && !s.anyOf.some((sub) => validatesAgainst(sub, value))) {
    errors.push(`${formatPath(path)} must match at least one schema of anyOf (anyOf)`);
  }
  if (Array.isArray(s.oneOf)) {
    const matches = s.oneOf.filter((sub) => validatesAgainst(sub, value)).length;
    if (matches !== 1) {
      errors.push(`${formatPath(path)} must match exactly one schema of oneOf, matched ${matches} (oneOf)`);
    }
  }
  if (s.not !== undefined && validatesAgainst(s.not, value)) {
    errors.push(`${formatPath(path)} must not match the schema in not (not)`);
  }
}

function validatesAgainst(schema: unknown, value: unknown): boolean {
  const errors: string[] = [];
  checkSchema(schema, value, null, errors);
  return errors.length === 0;
}

// === 7. MCP server ===========================================================
// The server role over a JSON-RPC peer: lifecycle; tools (with validation),
// resources, prompts and completion; cancellation, progress, logging and
// timeouts for all plugin code. Pure protocol: it is handed a catalog and a send
// function, and touches no files, streams or process.

// --- 7a. What plugins write: tools, resources, prompts, the catalog ---

/** What a plugin function (`run`, `read`, `get`, `complete`) receives beside its input. */
export interface ToolContext {
  /** Aborts on notifications/cancelled, on timeout and on shutdown. */
  readonly signal: AbortSignal;
  /** The JSON-RPC id of the request being served. */
  readonly requestId: RequestId;
  /** On a protected HTTP server: what the caller's verified token says (sub, scopes, clientId, claims). */
  readonly auth?: AuthInfo;
  /** The caller's W3C trace context, as its request carried it in `_meta` (valid ones only), for a plugin's own spans. */
  readonly traceparent?: string;
  readonly tracestate?: string;
  readonly baggage?: string;
  /** Reports progress; a no-op when the caller sent no progressToken. */
  progress(progress: number, total?: number, message?: string): void;
  /** Sends a log notification when `level` is at or above the client's level. */
  log(level: LogLevel, data: unknown): void;
  /** Asks the client to sample its LLM (sampling/createMessage). */
  sample(params: JsonObject, options?: AskOptions): Promise<JsonObject>;
  /** Asks the client to ask its user (elicitation/create). */
  elicit(params: JsonObject, options?: AskOptions): Promise<JsonObject>;
  /** Asks the client for its roots (roots/list). */
  roots(options?: AskOptions): Promise<{ uri: string; name?: string }[]>;
  /**
   * Makes the call a task (SEP-2663) when the tool may be one and the client can take one: the request is
   * answered with the task's handle, `run` goes on, and `statusMessage` is the task's first. Resolves once the
   * task exists; at once, doing nothing, when the call cannot become a task.
   */
  task(statusMessage?: string): Promise<void>;
}

/**
 * How a plugin names a question to the client. In the 2026-07-28 era a question
 * ends the call with an `input_required` result keyed by it, and the retry runs
 * `run` again from the start with the answers: each question already answered
 * resolves at once. Without a key: the kind and the order of asking
 * (`elicit-1`, `sample-1`, `roots-1`, …).
 */
export interface AskOptions {
  key?: string;
}

/** A tool as a plugin writes it. */
export interface ToolDefinition {
  name?: string;
  title?: string;
  description?: string;
  inputSchema?: JsonObject;
  outputSchema?: JsonObject;
  annotations?: JsonObject;
  icons?: unknown[];
  _meta?: JsonObject;
  /**
   * Whether a call may become a task (SEP-2663): "optional" or "required" ("forbidden" or absent: never);
   * `ttlMs` overrides the server's task TTL for this tool. Listed only in the 2025-11-25 era's tools/list.
   */
  execution?: { taskSupport?: "forbidden" | "optional" | "required"; ttlMs?: number };
  // deno-lint-ignore no-explicit-any
  run(args: any, ctx: ToolContext): unknown;
}

/** How a task-capable tool's calls may become tasks. @internal */
interface TaskSupport {
  mode: "optional" | "required";
  ttlMs: number | undefined;
  /** Its tools/list entry in the 2025-11-25 era, which has `execution`. */
  legacyListing: JsonObject;
}

/** A tool ready to serve: checked, named, with its tools/list entry prepared. */
export interface Tool {
  /** The name clients call it by. */
  name: string;
  /** The tools/list entry, built once. */
  listing: JsonObject;
  /** Where it came from (a file path, or "(library)"), for error messages. */
  source: string;
  run: ToolDefinition["run"];
  /** How a call runs it, made on the first call. @internal */
  job?: Job<JsonObject>;
  /** Set when its calls may become tasks. @internal */
  tasks?: TaskSupport;
}

/** A resource as a plugin writes it (an entry of `export const resources`). */
export interface ResourceDefinition {
  uri: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
  size?: number;
  annotations?: JsonObject;
  icons?: unknown[];
  _meta?: JsonObject;
  /** Returns a string (text), a Uint8Array (blob), or `{ contents: [...] }`. */
  read(uri: string, ctx: ToolContext): unknown;
  /** Calls `onUpdate` when the resource changes; returns a function that stops watching. */
  watch?(uri: string, onUpdate: () => void): () => void;
}

/** A resource template as a plugin writes it (an entry of `resources` with `uriTemplate`). */
export interface ResourceTemplateDefinition {
  uriTemplate: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
  annotations?: JsonObject;
  icons?: unknown[];
  _meta?: JsonObject;
  read(uri: string, params: Record<string, string>, ctx: ToolContext): unknown;
  /** Candidate values for a template variable (completion/complete). */
  complete?(argumentName: string, value: string, ctx: ToolContext): unknown;
}

/** A prompt as a plugin writes it (an entry of `export const prompts`). */
export interface PromptDefinition {
  name: string;
  title?: string;
  description?: string;
  arguments?: { name: string; description?: string; required?: boolean }[];
  icons?: unknown[];
  _meta?: JsonObject;
  /** Returns a string (one user message), an array of messages, or `{ description?, messages }`. */
  get(args: Record<string, string>, ctx: ToolContext): unknown;
  /** Candidate values for an argument (completion/complete). */
  complete?(argumentName: string, value: string, ctx: ToolContext): unknown;
  /** `get` returns another server's result, passed on as it is (no description added). @internal */
  passThrough?: boolean;
}

/** Anything a catalog entry has in common: its list entry and where it came from. */
interface Entry {
  key: string; // name, uri or uriTemplate
  listing: JsonObject;
  source: string;
}

/** A resource ready to serve. @internal */
export interface Resource extends Entry {
  definition: ResourceDefinition;
}

/** A resource template ready to serve. */
export interface ResourceTemplate extends Entry {
  definition: ResourceTemplateDefinition;
  match: RegExp;
  variables: string[];
}

/** A prompt ready to serve. */
export interface Prompt extends Entry {
  definition: PromptDefinition;
}

/** A file of DIR that could not become a tool, resource or prompt. */
interface PluginError {
  /** Its path, as DIR was given. */
  file: string;
  /** Why, in one line, with the line and column where the runtime gives them. */
  message: string;
}

/** Everything a server serves. */
export interface Catalog {
  tools: Tool[];
  resources: Resource[];
  templates: ResourceTemplate[];
  prompts: Prompt[];
  /** Files that failed to load, so that a call to a tool of one of them can say why. */
  failed?: PluginError[];
  /** The answer to a call of a name no tool has, where the catalog knows why (a gateway's down upstream). */
  unknownTool?: (name: string) => JsonObject | undefined;
  /** Skills (SEP-2640): folders of instructions, served as skill:// resources. */
  skills?: Skill[];
}

const LISTED_TOOL_FIELDS = ["title", "description", "outputSchema", "annotations", "icons", "_meta"] as const;
const LISTED_RESOURCE_FIELDS = ["title", "description", "mimeType", "size", "annotations", "icons", "_meta"] as const;
const LISTED_PROMPT_FIELDS = ["title", "description", "arguments", "icons", "_meta"] as const;

function listingOf(definition: JsonObject, fields: readonly string[], first: JsonObject): JsonObject {
  const listing: JsonObject = first;
  for (const field of fields) {
    if (definition[field] !== undefined) listing[field] = definition[field];
  }
  return listing;
}

/** Checks a plugin's tool and prepares it for serving; throws TypeError on a bad shape. */
export function defineTool(definition: unknown, fallbackName?: string, source = "(library)"): Tool {
  if (!isObject(definition)) throw new TypeError("a tool must be an object with a run function");
  if (typeof definition.run !== "function") throw new TypeError("a tool needs a run(args, ctx) function");
  const name = definition.name ?? fallbackName;
  if (typeof name !== "string" || !TOOL_NAME_PATTERN.test(name)) {
    throw new TypeError(
      `tool name ${JSON.stringify(name)} is invalid: use 1-128 characters of A-Z a-z 0-9 _ - .`,
    );
  }
  const inputSchema = definition.inputSchema ?? { type: "object" };
  if (!isObject(inputSchema) || inputSchema.type !== "object") {
    throw new TypeError(`tool "${name}": inputSchema must be a JSON Schema object with "type": "object"`);
  }
  const listing = listingOf(definition, LISTED_TOOL_FIELDS, { name });
  listing.inputSchema = inputSchema;
  // Bound once, so `this` in a plugin's run is its own tool object.
  const tool: Tool = { name, listing, source, run: (definition.run as ToolDefinition["run"]).bind(definition) };
  const tasks = taskSupportOf(name, definition.execution, listing);
  if (tasks) tool.tasks = tasks;
  return tool;
}

// A tool's `execution`, checked: undefined when its calls never become tasks.
function taskSupportOf(name: string, execution: unknown, listing: JsonObject): TaskSupport | undefined {
  if (execution === undefined) return undefined;
  const mode = isObject(execution) ? execution.taskSupport : undefined;
  const ttlMs = isObject(execution) ? execution.ttlMs : undefined;
  if (!isObject(execution) || (mode !== undefined && !["forbidden", "optional", "required"].includes(mode as string))) {
    throw new TypeError(`tool "${name}": execution.taskSupport must be "optional", "required" or "forbidden"`);
  }
  if (ttlMs !== undefined && !(Number.isInteger(ttlMs) && (ttlMs as number) > 0)) {
    throw new TypeError(`tool "${name}": execution.ttlMs must be a positive integer (milliseconds)`);
  }
  if (mode !== "optional" && mode !== "required") return undefined;
  return { mode, ttlMs: ttlMs as number | undefined, legacyListing: { ...listing, execution: { taskSupport: mode } } };
}

/** Checks a resource or resource template of a plugin; throws TypeError on a bad shape. */
export function defineResource(definition: unknown, source = "(library)"): Resource | ResourceTemplate {
  if (!isObject(definition) || typeof definition.read !== "function") {
    throw new TypeError("a resource must be an object with a read function");
  }
  if (typeof definition.name !== "string" || definition.name === "") {
    throw new TypeError("a resource needs a name");
  }
  if (typeof definition.uriTemplate === "string") {
    const { match, variables } = compileUriTemplate(definition.uriTemplate);
    const listing = listingOf(definition, LISTED_RESOURCE_FIELDS, {
      uriTemplate: definition.uriTemplate,
      name: definition.name,
    });
    delete listing.size;
    const template = definition as unknown as ResourceTemplateDefinition;
    return { key: definition.uriTemplate, listing, source, definition: template, match, variables };
  }
  if (typeof definition.uri !== "string" || !/^[A-Za-z][\w+.-]*:/.test(definition.uri)) {
    throw new TypeError(`resource "${definition.name}" needs a uri with a scheme (or a uriTemplate)`);
  }
  const listing = listingOf(definition, LISTED_RESOURCE_FIELDS, { uri: definition.uri, name: definition.name });
  return { key: definition.uri, listing, source, definition: definition as unknown as ResourceDefinition };
}

/** Checks a prompt of a plugin; throws TypeError on a bad shape. */
export function definePrompt(definition: unknown, source = "(library)"): Prompt {
  if (!isObject(definition) || typeof definition.get !== "function") {
    throw new TypeError("a prompt must be an object with a get function");
  }
  if (typeof definition.name !== "string" || definition.name === "") throw new TypeError("a prompt needs a name");
  if (definition.arguments !== undefined && !Array.isArray(definition.arguments)) {
    throw new TypeError(`prompt "${definition.name}": arguments must be an array`);
  }
  const listing = listingOf(definition, LISTED_PROMPT_FIELDS, { name: definition.name });
  return { key: definition.name, listing, source, definition: definition as unknown as PromptDefinition };
}

/**
 * Compiles the RFC 6570 expressions resource templates use into a matcher:
 * `{var}` matches one path segment, `{+var}` and `{#var}` anything, `{/var}` a
 * slash and a segment, `{?a,b}` a query.
 */
function compileUriTemplate(template: string): { match: RegExp; variables: string[] } {
  const variables: string[] = [];
  let pattern = "^";
  let last = 0;
  for (const expression of template.matchAll(/\{([+#./;?&]?)([^{}]+)\}/g)) {
    pattern += escapeRegExp(template.slice(last, expression.index));
    const [, operator, list] = expression;
    const names = list.split(",").map((name) => name.replace(/[*]|:\d+$/g, ""));
    variables.push(...names);
    const group = (inner: string) => names.map(() => `(${inner})`).join(",");
    if (operator === "+" || operator === "#") pattern += (operator === "#" ? "#" : "") + group(".*?");
    else if (operator === "/") pattern += names.map(() => "/([^/?#]*)").join("");
    else if (operator === "?" || operator === "&") {
      pattern += `(?:\\${operator}` + names.map((name) => `${escapeRegExp(name)}=([^&#]*)`).join("&") + ")?";
    } else pattern += group("[^/?#,]*");
    last = expression.index + expression[0].length;
  }
  pattern += escapeRegExp(template.slice(last)) + "$";
  return { match: new RegExp(pattern), variables };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Two tools, prompts or resources with one name (or URI) in a catalog: names both files. */
function findCatalogDuplicate(catalog: Catalog): string | undefined {
  return findDuplicate(catalog.tools, "tools", (tool) => tool.name) ??
    findDuplicate(catalog.prompts, "prompts", (prompt) => prompt.key) ??
    findDuplicate([...catalog.resources, ...catalog.templates], "resources", (resource) => resource.key);
}

function findDuplicate<T extends { source: string }>(
  entries: T[],
  kind: string,
  keyOf: (entry: T) => string,
): string | undefined {
  const seen = new Map<string, T>();
  for (const entry of entries) {
    const key = keyOf(entry);
    const other = seen.get(key);
    if (other) return `two ${kind} are named "${key}": ${other.source} and ${entry.source}`;
    seen.set(key, entry);
  }
  return undefined;
}

function emptyCatalog(): Catalog {
  return { tools: [], resources: [], templates: [], prompts: [] };
}

// A resource with a uriTemplate is a template: each goes to its own list.
function addResource(catalog: Catalog, entry: Resource | ResourceTemplate): void {
  if ("match" in entry) catalog.templates.push(entry);
  else catalog.resources.push(entry);
}

// --- 7b. Options, results, the request context ---

/** Options of an {@linkcode McpServer}. */
export interface ServerOptions {
  /** Tools to serve (plain definitions are checked with defineTool). */
  tools?: (Tool | ToolDefinition)[];
  /** Resources and resource templates to serve. */
  resources?: (Resource | ResourceTemplate | ResourceDefinition | ResourceTemplateDefinition)[];
  /** Prompts to serve. */
  prompts?: (Prompt | PromptDefinition)[];
  /** serverInfo.name (default "mcp.ts"). */
  name?: string;
  /** serverInfo.version (default this file's VERSION). */
  version?: string;
  /** Sent in the initialize result. */
  instructions?: string;
  /** Per request that runs plugin code, in ms (default 60000); 0 disables it. */
  timeout?: number;
  /** Items per list page (default 100). */
  pageSize?: number;
  /** Declare listChanged and tell the client when the catalog changes (e.g. --watch). */
  listChanged?: boolean;
  /** Diagnostics for the operator (default: dropped). */
  log?: (line: string) => void;
  /** Files that failed to load: a call to a tool of one of them says why. */
  failed?: PluginError[];
  /** Skills to serve (SEP-2640), as {@linkcode loadSkills} reads them. */
  skills?: Skill[];
  /**
   * Signs the requestState of 2026-07-28 input-required results (HMAC-SHA256).
   * Instances sharing it continue each other's calls (default: random per process).
   */
  stateKey?: string;
  /** Cache hints say "private" (the server checks credentials: results may differ per caller). */
  privateCache?: boolean;
  /** Called with what plugin code threw and what it was running (a tool name, a URI), e.g. to show its stack. */
  onPluginError?: (error: unknown, label: string) => void;
  /** Tasks (SEP-2663): how long a task is kept, from its creation, in ms (default 3600000). */
  taskTtl?: number;
  /** The poll interval a task announces, in ms (default 500). */
  taskPollInterval?: number;
  /** How long a task-capable call may run before it becomes a task, in ms (default 100). */
  taskGrace?: number;
  /** Tasks kept at most (default 1000); beyond, "optional" tools answer at once and "required" ones -32603. */
  maxTasks?: number;
  /** Prefixes task ids (`INSTANCE.…`) so that a load balancer can route tasks/* by Mcp-Name. */
  instanceId?: string;
  /** What tool code logs inside a task (the spec sends no logs on tasks), e.g. for --trace. */
  onTaskLog?: (taskId: string, level: LogLevel, data: unknown) => void;
  /** Extensions declared besides the server's own (a gateway: its upstreams'). @internal */
  moreExtensions?: () => JsonObject | undefined;
  /** tasks/* for a task this server did not make (a gateway: to the upstream its id names); undefined: none. @internal */
  forwardTask?: (method: string, params: JsonObject, principal: string) => Promise<unknown> | undefined;
  /** Where request and session durations are recorded (7h; createHandler's `metrics`). @internal */
  measure?: Metrics;
  /**
   * OpenTelemetry traces (7i): `false` none, options of its own, or omitted: the OTEL_* variables, read once per
   * process (serve and createHandler; ignored by a bare McpServer).
   */
  telemetry?: false | TelemetryOptions;
  /** Where SERVER spans go (7i), when telemetry is on. @internal */
  tracer?: Telemetry;
  /** Telemetry's service.name when it is not the server's name (the gateway's: mcp.ts unless --name). @internal */
  serviceName?: string;
  /** One line per request served (--log-format json): the span's name and its fields. @internal */
  accessLog?: (msg: string, fields: Record<string, unknown>) => void;
  /** What the connection is, for spans (network.transport, network.protocol.name; default a pipe). @internal */
  networkAttributes?: Record<string, string>;
  /** A task this server did not make, to listen to (a gateway: an upstream's); undefined: none. @internal */
  remoteTask?: (taskId: string, principal: string) => ListenedTask | undefined;
  /**
   * skills/list, skills/get, resources/directory/read and a skill file's resources/read on a server with no
   * skills of its own (a gateway: to the upstream that has the skill); undefined: none. @internal
   */
  forwardSkills?: (method: string, params: JsonObject) => Promise<unknown> | undefined;
}

// A request in flight that runs plugin code (tools/call, resources/read, prompts/get, completion/complete).
interface Work {
  id: RequestId;
  label: string; // what it runs, for log notifications and timeouts: a tool name, a URI, a prompt name
  deadline: number; // ms since epoch; Infinity without a timeout
  controller: AbortController | undefined; // made on first use of ctx.signal
  done: boolean; // answered, cancelled or timed out: nothing more may be sent for it
  progressToken: RequestId | undefined;
  lastProgress: number;
  dropped: number; // its progress and log lines not sent: the client was not reading (McpServer.lagging)
  client: ClientView; // whom it is served for (legacy: the connection's view, which logging/setLevel changes)
  era: Era;
  auth: AuthInfo | undefined; // what the request's token says (ctx.auth)
  questions: Questions | undefined; // 2026-07-28 tools/call, prompts/get, resources/read: may end input_required
  taskCall: TaskCall | undefined; // a call that may become a task (7f)
  meta: unknown; // the request's _meta, for ctx.traceparent and its kin
  fail(message: string): unknown; // what a throw or a timeout answers: a result, or an RpcError
  resolve(result: unknown): void; // answers the request (or, with NO_RESPONSE, drops it)
}

// A call that may become a task: a task-capable tool, a client that declared the extension on the request.
interface TaskCall {
  support: TaskSupport;
  task: ServerTask | undefined; // the task it became
  asked: boolean; // its run called ctx.task()
  message: string | undefined; // the task's first statusMessage: ctx.task's, else the last progress message
  made: (() => void)[]; // ctx.task() promises waiting for the task
  admitting?: boolean; // the store is being asked for room (replicas: 7f)
  held?: { result: unknown }; // how the run ended while the store was asked: given once it has answered
}

// The questions of one 2026-07-28 call to the client (basic/patterns/mrtr.mdx).
// A request as a session received it: its id and params, and the era and view of the client it is served in.
interface Received {
  id: RequestId;
  params: JsonObject;
  era: Era;
  client: ClientView;
}

interface Questions {
  method: string; // the call, what it names, a digest of its arguments and who asks: bound into requestState
  name: string;
  args: unknown;
  principal: string;
  auth: AuthInfo | undefined; // the token it came with: bound at receipt (the session may serve others meanwhile)
  answers: JsonObject; // key → answer, from requestState and inputResponses
  asked: JsonObject | undefined; // key → { method, params } asked in this run and not answered
  used: JsonObject; // key → answer, for the questions this run asked and had answered: what requestState keeps
  counts: Record<string, number>; // questions asked per kind, for generated keys
}

/** Turns what a tool's run returned into a CallToolResult. */
export function toCallToolResult(value: unknown): JsonObject {
  if (typeof value === "string") return { content: [{ type: "text", text: value }] };
  if (value === undefined || value === null) return { content: [] };
  if (isObject(value) && Array.isArray(value.content)) return value;
  const text = JSON.stringify(value) ?? String(value);
  const result: JsonObject = { content: [{ type: "text", text }] };
  if (isObject(value) && Object.getPrototypeOf(value) === Object.prototype) result.structuredContent = value;
  return result;
}

/** Turns what a resource's read returned into a ReadResourceResult. */
export function toReadResourceResult(value: unknown, uri: string, mimeType?: string): JsonObject {
  if (isObject(value) && Array.isArray(value.contents)) return value;
  const content: JsonObject = { uri };
  if (value instanceof Uint8Array) {
    content.blob = bytesToBase64(value);
    content.mimeType = mimeType ?? "application/octet-stream";
  } else {
    content.text = typeof value === "string" ? value : JSON.stringify(value) ?? "";
    const type = mimeType ?? (typeof value === "string" ? undefined : "application/json");
    if (type) content.mimeType = type;
  }
  return { contents: [content] };
}

/** Turns what a prompt's get returned into a GetPromptResult. */
export function toGetPromptResult(value: unknown, description?: string): JsonObject {
  let result: JsonObject;
  if (typeof value === "string") result = { messages: [{ role: "user", content: { type: "text", text: value } }] };
  else if (Array.isArray(value)) result = { messages: value };
  else if (isObject(value) && Array.isArray(value.messages)) result = value;
  else throw new TypeError("a prompt's get must return a string, an array of messages, or { messages }");
  if (result.description === undefined && description !== undefined) result = { description, ...result };
  return result;
}

function base64ToBytes(data: string): Uint8Array {
  return Uint8Array.from(atob(data), (ch) => ch.charCodeAt(0));
}

function bytesToBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function errorResult(text: string): JsonObject {
  return { content: [{ type: "text", text }], isError: true };
}

// What a context needs from its session: one per session, shared by its contexts.
interface ContextHost {
  notify(work: Work, method: string, params: JsonObject): void;
  ask(work: Work, capability: string, method: string, params: JsonObject, key?: string): Promise<unknown>;
  task(work: Work, statusMessage: string | undefined): Promise<void>;
  taskLog(work: Work, level: LogLevel, data: unknown): void;
}

/**
 * The `ctx` of one request. Built for every call, so it allocates nothing it
 * does not need: each function is made (bound, so destructuring works) on first use.
 */
class RequestContext implements ToolContext {
  #work: Work;
  #host: ContextHost;
  #progress?: ToolContext["progress"];
  #log?: ToolContext["log"];

  constructor(work: Work, host: ContextHost) {
    this.#work = work;
    this.#host = host;
  }

  get requestId(): RequestId {
    return this.#work.id;
  }

  get traceparent(): string | undefined {
    return traceContextOf(this.#work.meta)?.traceparent;
  }

  get tracestate(): string | undefined {
    return traceContextOf(this.#work.meta)?.tracestate;
  }

  get baggage(): string | undefined {
    return traceContextOf(this.#work.meta)?.baggage;
  }

  get auth(): AuthInfo | undefined {
    return this.#work.auth;
  }

  /** Whom the request is served for: one object per legacy connection or 2026-07-28 request. @internal */
  get client(): object {
    return this.#work.client;
  }

  get signal(): AbortSignal {
    // Most plugins never look at the signal: make the controller on first use.
    this.#work.controller ??= new AbortController();
    return this.#work.controller.signal;
  }

  get progress(): ToolContext["progress"] {
    const work = this.#work;
    const host = this.#host;
    return this.#progress ??= (progress: number, total?: number, message?: string) => {
      const call = work.taskCall;
      if (call) {
        // Inside a task: the statusMessage; before it: the task's first.
        if (call.task) return call.task.progress(progress, total, message);
        call.message = message ?? (total === undefined ? String(progress) : `${progress}/${total}`);
      }
      // progress.mdx: only with a token, strictly increasing, and not after the response.
      if (work.progressToken === undefined || work.done || !(progress > work.lastProgress)) return;
      work.lastProgress = progress;
      const params: JsonObject = { progressToken: work.progressToken, progress };
      if (total !== undefined) params.total = total;
      if (message !== undefined) params.message = message;
      host.notify(work, "notifications/progress", params);
    };
  }

  get log(): ToolContext["log"] {
    const work = this.#work;
    const host = this.#host;
    return this.#log ??= (level: LogLevel, data: unknown) => {
      if (work.taskCall?.task) return host.taskLog(work, level, data); // SEP-2663: no logs on tasks
      const index = LOG_LEVELS.indexOf(level);
      if (work.done || (index < 0 ? 1 : index) < work.client.logLevel) return;
      host.notify(work, "notifications/message", { level: index < 0 ? "info" : level, logger: work.label, data });
    };
  }

  get sample(): ToolContext["sample"] {
    return (params, options) =>
      this.#host.ask(this.#work, "sampling", "sampling/createMessage", params, options?.key) as Promise<JsonObject>;
  }

  get elicit(): ToolContext["elicit"] {
    return (params, options) =>
      this.#host.ask(this.#work, "elicitation", "elicitation/create", params, options?.key) as Promise<JsonObject>;
  }

  get roots(): ToolContext["roots"] {
    return async (options) => {
      const result = await this.#host.ask(this.#work, "roots", "roots/list", {}, options?.key);
      return (isObject(result) && Array.isArray(result.roots) ? result.roots : []) as { uri: string; name?: string }[];
    };
  }

  get task(): ToolContext["task"] {
    return (statusMessage) => this.#host.task(this.#work, statusMessage);
  }
}

// --- 7c. The core every connection shares; requestState ---

// The reason a session closes by default: one shared Error, as an HTTP server closes a
// session per request and a stack trace per close was 28% of its time (Deno 2.9.6, 2026-11-23).
const SERVER_SHUT_DOWN = new Error("server shut down");

// How long an input-required requestState stays good (the contract: at most 10 minutes).
const REQUEST_STATE_TTL_MS = 10 * 60 * 1000;

/**
 * What every connection of one server shares: options, the catalog, the one
 * timer that enforces every deadline, the key that signs requestState. Sessions
 * ({@linkcode McpServer}) come and go on it: a stdio process has one, an HTTP
 * server one per legacy session and one per 2026-07-28 request.
 */
export class ServerCore {
  /** The options it was made with. */
  readonly options: ServerOptions;
  /** Everything served now. */
  catalog: Catalog = emptyCatalog();
  toolsByName: Map<string, Tool> = new Map();
  resourcesByUri: Map<string, Resource> = new Map();
  promptsByName: Map<string, Prompt> = new Map();
  /** The skills served (7g), indexed; undefined when there are none. */
  skills: SkillIndex | undefined;
  /** Per request that runs plugin code, in ms (0: none). */
  readonly timeout: number;
  readonly pageSize: number;
  /** The connections open on it. */
  readonly sessions: Set<McpServer> = new Set();
  /** How many sessions were ever made on it (a test sees the stateless fast path share one). */
  sessionsMade = 0;
  #sweepTimer: ReturnType<typeof setTimeout> | undefined;
  #sweepAt = Infinity;
  #facts: ServerFacts | undefined;
  #stateKey: Promise<CryptoKey> | undefined;
  #tasks: TaskStore | undefined;

  constructor(options: ServerOptions) {
    this.options = options;
    this.timeout = options.timeout ?? DEFAULT_TOOL_TIMEOUT_MS;
    this.pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
    const catalog = emptyCatalog();
    catalog.tools = (options.tools ?? []).map((item) => "listing" in item ? item as Tool : defineTool(item));
    for (const item of options.resources ?? []) {
      addResource(catalog, "listing" in item ? item as Resource | ResourceTemplate : defineResource(item));
    }
    catalog.prompts = (options.prompts ?? []).map((item) => "listing" in item ? item as Prompt : definePrompt(item));
    catalog.failed = options.failed;
    catalog.skills = options.skills;
    this.setCatalog(catalog);
  }

  /**
   * Replaces everything served; with listChanged, every session tells its
   * client which lists changed. Requests in flight finish on the code they started with.
   */
  setCatalog(catalog: Catalog): void {
    if (catalog.skills?.length || catalog.resources.some((resource) => resource.source === SKILLS_SOURCE)) {
      const own = catalog.resources.filter((resource) => resource.source !== SKILLS_SOURCE);
      catalog = { ...catalog, resources: [...own, ...skillResources(catalog.skills ?? [])] };
    }
    const duplicate = findCatalogDuplicate(catalog);
    if (duplicate) throw new TypeError(duplicate);
    const before = this.catalog;
    this.catalog = catalog;
    this.toolsByName = new Map(catalog.tools.map((tool) => [tool.name, tool]));
    this.resourcesByUri = new Map(catalog.resources.map((resource) => [resource.key, resource]));
    this.promptsByName = new Map(catalog.prompts.map((prompt) => [prompt.key, prompt]));
    this.skills = catalog.skills?.length ? indexSkills(catalog.skills) : undefined;
    if (!this.options.listChanged || this.sessions.size === 0) return;
    const differ = (a: { listing: JsonObject }[], b: { listing: JsonObject }[]) =>
      a.length !== b.length || a.some((entry, i) => JSON.stringify(entry.listing) !== JSON.stringify(b[i].listing));
    const changed = {
      tools: differ(before.tools, catalog.tools),
      resources: differ([...before.resources, ...before.templates], [...catalog.resources, ...catalog.templates]),
      prompts: differ(before.prompts, catalog.prompts),
    };
    for (const session of this.sessions) session.catalogChanged(changed);
  }

  /** The capabilities this server declares: only what it really serves. */
  capabilities(): JsonObject {
    const listChanged = this.options.listChanged === true;
    const { tools, resources, templates, prompts } = this.catalog;
    const capabilities: JsonObject = {};
    if (tools.length > 0 || listChanged) capabilities.tools = { listChanged };
    if (resources.length + templates.length > 0) {
      const subscribe = resources.some((resource) => typeof resource.definition.watch === "function");
      capabilities.resources = { subscribe, listChanged };
    }
    if (prompts.length > 0) capabilities.prompts = { listChanged };
    if (this.completes()) capabilities.completions = {};
    capabilities.logging = {};
    return capabilities;
  }

  completes(): boolean {
    const { templates, prompts } = this.catalog;
    return [...templates, ...prompts].some((entry) => typeof entry.definition.complete === "function");
  }

  /**
   * The extensions server/discover declares (SEP-2133): tasks when a tool's calls may become tasks, skills
   * (with resources/directory/read) when there are skills.
   */
  extensions(): JsonObject | undefined {
    const extensions: JsonObject = {};
    if (this.catalog.tools.some((tool) => tool.tasks)) extensions[EXTENSIONS.tasks] = {};
    if (this.skills) extensions[EXTENSIONS.skills] = { directoryRead: true };
    Object.assign(extensions, this.options.moreExtensions?.());
    return Object.keys(extensions).length > 0 ? extensions : undefined;
  }

  /** The tools/list entries for a client: with `execution` for a 2025-11-25 client (7f), which has tasks. */
  toolsFor(client: ClientView): { listing: JsonObject }[] {
    const tools = this.catalog.tools;
    if (client.protocolVersion !== LEGACY_TASKS_VERSION || !tools.some((tool) => tool.tasks)) return tools;
    return tools.map((tool) => tool.tasks ? { listing: tool.tasks.legacyListing } : tool);
  }

  /** The tasks this server made (7f), made on first use. */
  get tasks(): TaskStore {
    return this.#tasks ??= new TaskStore(this.options, (deadline) => this.scheduleSweep(deadline));
  }

  /** serverInfo and cache hints for 2026-07-28 results. */
  facts(): ServerFacts {
    return this.#facts ??= {
      serverInfo: { name: this.options.name ?? "mcp.ts", version: this.options.version ?? VERSION },
      // Lists that --watch may change are not to be cached; a listen stream says when they change.
      listTtlMs: this.options.listChanged ? 0 : 5 * 60_000,
      cacheScope: this.options.privateCache ? "private" : "public",
    };
  }

  /** What server/discover answers (2026-07-28), before the era's encoding. */
  discovery(): JsonObject {
    const capabilities = this.capabilities();
    const extensions = this.extensions();
    if (extensions) capabilities.extensions = extensions;
    const result: JsonObject = { supportedVersions: [...MODERN_PROTOCOL_VERSIONS], capabilities };
    if (this.options.instructions) result.instructions = this.options.instructions;
    return result;
  }

  /** The key that signs requestState: `stateKey` (shared by instances), else random for this process. */
  stateKey(): Promise<CryptoKey> {
    const secret = this.options.stateKey;
    return this.#stateKey ??= crypto.subtle.importKey(
      "raw",
      secret ? encoder.encode(secret) : crypto.getRandomValues(new Uint8Array(32)),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign", "verify"],
    );
  }

  // One timer for all deadlines of all sessions: a timer per call costs a third of throughput.
  scheduleSweep(deadline: number): void {
    if (deadline >= this.#sweepAt) return;
    clearTimeout(this.#sweepTimer);
    this.#sweepAt = deadline;
    this.#sweepTimer = setTimeout(() => this.#sweep(), Math.max(0, deadline - Date.now()));
  }

  #sweep(): void {
    this.#sweepAt = Infinity;
    this.#sweepTimer = undefined;
    const now = Date.now();
    let next = Infinity;
    for (const session of this.sessions) next = Math.min(next, session.sweep(now));
    if (this.#tasks) next = Math.min(next, this.#tasks.sweep(now));
    if (next !== Infinity) this.scheduleSweep(next);
  }

  /** Stops the timer and cancels running tasks (the sessions close themselves). */
  close(): void {
    clearTimeout(this.#sweepTimer);
    this.#sweepAt = Infinity;
    this.#tasks?.cancelAll("the server shut down");
  }
}

/** Signs what a 2026-07-28 call has been told so far: `body.mac`, both base64url. */
async function signRequestState(key: CryptoKey, payload: JsonObject): Promise<string> {
  const body = base64Url(encoder.encode(JSON.stringify(payload)));
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(body)));
  return `${body}.${base64Url(mac)}`;
}

/** What a requestState is bound to besides its answers: the call, its arguments, who asked. */
async function requestStateBinding(questions: Questions): Promise<JsonObject> {
  const digest = await crypto.subtle.digest("SHA-256", encoder.encode(canonicalJson(questions.args ?? {})));
  return { m: questions.method, n: questions.name, d: base64Url(new Uint8Array(digest)), p: questions.principal };
}

/** JSON with every object's keys in order: the same value gives the same text whatever its key order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (!isObject(value)) return JSON.stringify(value) ?? "null";
  return `{${
    Object.keys(value).sort().filter((key) => value[key] !== undefined)
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(",")
  }}`;
}

/**
 * The answers a requestState carries, once its signature, its binding (method, name, arguments,
 * principal) and its age check out; else -32602.
 */
async function openRequestState(key: CryptoKey, state: unknown, questions: Questions): Promise<JsonObject> {
  const refused = new RpcError(
    ErrorCode.InvalidParams,
    "Invalid params: requestState was not issued by this server for this request, or has expired",
  );
  if (typeof state !== "string") throw refused;
  const [body, mac, extra] = state.split(".");
  let payload: unknown;
  try {
    if (extra !== undefined || !body || !mac) throw refused;
    const valid = await crypto.subtle.verify("HMAC", key, fromBase64Url(mac), encoder.encode(body));
    if (!valid) throw refused;
    payload = JSON.parse(new TextDecoder().decode(fromBase64Url(body)));
  } catch {
    throw refused;
  }
  if (!isObject(payload) || !(Number(payload.x) > Date.now())) throw refused;
  const binding = await requestStateBinding(questions);
  for (const [field, value] of Object.entries(binding)) if (payload[field] !== value) throw refused;
  return isObject(payload.a) ? payload.a : {};
}

function base64Url(bytes: Uint8Array): string {
  return trimEnd(bytesToBase64(bytes).replace(/\+/g, "-").replace(/\//g, "_"), "=");
}

/**
 * `bytes` random bytes as base64url that never starts with `-` or `_`: a task id is a command-line argument
 * (`mcp.ts task URL get ID`), and one starting with `-` read as a flag (1 in 32 of them did).
 */
/**
 * A random base64url word of `bytes` bytes that never starts with - or _ (a task id is a command-line word: one
 * starting with - read as a flag). `fill` is the randomness (a test gives its own). @internal
 */
export function randomWord(
  bytes: number,
  fill: (array: Uint8Array) => Uint8Array = (array) => crypto.getRandomValues(array),
): string {
  const word = base64Url(fill(new Uint8Array(bytes)));
  return /^[-_]/.test(word) ? "t" + word.slice(1) : word;
}

function fromBase64Url(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(binary, (ch) => ch.charCodeAt(0));
}

// A 2026-07-28 subscriptions/listen in progress.
interface Listen {
  honored: JsonObject; // the filter as acknowledged
  stamp: JsonObject; // _meta for every notification: the subscription id
  context: SendContext;
  end(result: unknown): void; // stops its watches and answers (or drops, with NO_RESPONSE) the listen request
}

/** What plugin code a request runs, and how its outcome is answered. @internal */
interface Job<T> {
  label: string;
  run: (input: T, ctx: ToolContext) => unknown;
  map: (value: unknown) => unknown;
  fail: (message: string) => unknown;
  /** A thrown error with a JSON-RPC code answers as that error (task-capable tools: the contract's "failed"). */
  coded?: boolean;
}

// --- 7d. The session: one connection's requests ---

/**
 * One connection of an MCP server (a stdio process, a legacy HTTP session, or
 * one 2026-07-28 HTTP request). Feed it message texts with `receive`; it
 * answers through the `send` function it was made with, telling which request
 * each message belongs to. Made from options it has a core of its own; made
 * from a {@linkcode ServerCore} it shares that core's catalog and timer.
 */
export class McpServer {
  #core: ServerCore;
  #ownCore: boolean;
  #peer: JsonRpcPeer;
  // The connection's view of the client, from initialize (legacy); logging/setLevel changes it.
  #client: ClientView = {
    protocolVersion: LATEST_PROTOCOL_VERSION,
    capabilities: {},
    logLevel: LOG_LEVELS.indexOf(DEFAULT_LOG_LEVEL),
  };
  #pinned = false; // initialize was received: every request is legacy from now on (versioning.mdx)
  #observe: ReturnType<typeof observeRequests>; // spans, durations, access lines: undefined when all are off
  #initialized = false;
  #work = new Map<RequestId, Work>();
  // Made on first use: an HTTP server makes a session per stateless request.
  #subscriptions: Map<string, () => void> | undefined; // legacy resources/subscribe: uri → stop watching
  #listens: Map<RequestId, Listen> | undefined; // 2026-07-28 subscriptions/listen
  #idle: (() => void)[] = [];
  #whenWritten: (callback: () => void) => void;
  #host: ContextHost;
  #closed = false;
  /** Server→client requests are not possible here (HTTP --stateless): why, for the plugin's error. */
  noClientRequests: string | undefined;
  /** Called when what `sessionState` returns has changed (a legacy session kept in a shared store). */
  onStateChange: (() => void) | undefined;
  #clientInfo: JsonObject | undefined;
  #elsewhere: Set<string> | undefined; // resources this session subscribed to on another replica
  /** What the token of the request being received was verified to say (a protected HTTP server). */
  auth: AuthInfo | undefined;
  /**
   * Whether the client is behind in reading what it was sent (for request `id`: on HTTP, that request's stream): its
   * tools' progress and log lines are dropped meanwhile.
   */
  lagging: ((id: RequestId) => boolean) | undefined;

  constructor(
    options: ServerOptions | ServerCore,
    send: (text: string, context?: SendContext) => void,
    whenWritten?: (callback: () => void) => void,
  ) {
    this.#ownCore = !(options instanceof ServerCore);
    const core = this.#core = options instanceof ServerCore ? options : new ServerCore(options);
    this.#whenWritten = whenWritten ?? setImmediate;
    const served: ServedNames = (kind, name) => (kind === "tool" ? core.toolsByName : core.promptsByName).has(name);
    const observe = this.#observe = observeRequests(core.options, () => this.#client, served); // decided once
    this.#peer = new JsonRpcPeer({
      send,
      request: observe
        ? (method, params, id) => observe(method, params, id, () => this.#request(method, params, id))
        : (method, params, id) => this.#request(method, params, id),
      notification: (method, params) => this.#notification(method, params),
    });
    this.#host = {
      notify: (work, method, params) => {
        if (this.lagging?.(work.id)) work.dropped++; // best effort by nature; an answer never is
        else this.#peer.notify(method, params, { requestId: work.id });
      },
      ask: (work, capability, method, params, key) => this.#ask(work, capability, method, params, key),
      task: (work, statusMessage) =>
        askForTask(work, statusMessage, () => this.#work.get(work.id) === work && this.#becomeTask(work)),
      taskLog: (work, level, data) => this.#core.options.onTaskLog?.(work.taskCall!.task!.id, level, data),
    };
    this.#core.sessions.add(this);
    this.#core.sessionsMade++;
  }

  /** The legacy HTTP session this connection serves, for its spans. @internal */
  set sessionId(id: string) {
    this.#client.sessionId = id;
  }

  /** The shared part: catalog, options, timer. */
  get core(): ServerCore {
    return this.#core;
  }

  /** What a legacy session is, to be served on another replica: the client as initialize described it. @internal */
  sessionState(): SessionState {
    const state: SessionState = {
      protocolVersion: this.#client.protocolVersion,
      capabilities: this.#client.capabilities,
      logLevel: this.#client.logLevel,
      initialized: this.#initialized,
      subscriptions: [...new Set([...this.#subscriptions?.keys() ?? [], ...this.#elsewhere ?? []])],
    };
    if (this.#clientInfo) state.clientInfo = this.#clientInfo;
    return state;
  }

  /**
   * A legacy session made on another replica, served here: as if its initialize had come here. Its resource
   * subscriptions stay where they were made (each replica watches its own files); one dropped there is
   * dropped here too.
   */
  restoreSession(state: SessionState): void {
    this.#pinned = true;
    this.#client.protocolVersion = state.protocolVersion;
    this.#client.capabilities = state.capabilities;
    this.#client.logLevel = state.logLevel;
    this.#clientInfo = state.clientInfo;
    this.#initialized ||= state.initialized;
    for (const [uri, stop] of this.#subscriptions ?? []) {
      if (state.subscriptions.includes(uri)) continue;
      stop();
      this.#subscriptions!.delete(uri);
    }
    this.#elsewhere = new Set(state.subscriptions.filter((uri) => !this.#subscriptions?.has(uri)));
  }

  /** Whether a response with this id answers a question this session asked and waits for. @internal */
  awaitsAnswer(id: RequestId): boolean {
    return this.#peer.awaits(id);
  }

  /** Whether request `id` is running here. @internal */
  serving(id: RequestId): boolean {
    return this.#work.has(id);
  }

  /** Numbers this session's requests to the client from `first` on (see {@linkcode JsonRpcPeer.startIdsAt}). @internal */
  startIdsAt(first: number): void {
    this.#peer.startIdsAt(first);
  }

  /** Replaces the served tools, keeping resources and prompts. */
  setTools(tools: (Tool | ToolDefinition)[]): void {
    this.setCatalog({
      ...this.#core.catalog,
      tools: tools.map((item) => "listing" in item ? item as Tool : defineTool(item)),
    });
  }

  /** Replaces everything served (for every session of the core); see {@linkcode ServerCore.setCatalog}. */
  setCatalog(catalog: Catalog): void {
    this.#core.setCatalog(catalog);
  }

  /** The capabilities this server declares: only what it really serves. */
  capabilities(): JsonObject {
    return this.#core.capabilities();
  }

  /** Handles one incoming message: its text, or the message already parsed. */
  receive(message: string | JsonObject): void {
    if (typeof message === "string") this.#peer.receive(message);
    else this.#peer.receive(undefined, message);
  }

  /** Answers a message that was dropped before parsing (e.g. an over-long line). */
  reject(code: number, message: string): void {
    this.#peer.reject(code, message);
  }

  /** Ends request `id` as a client cancellation would: its plugin code is aborted and it gets no response. */
  cancel(id: RequestId, reason = "cancelled by the client"): void {
    const listen = this.#listens?.get(id);
    if (listen) return listen.end(NO_RESPONSE);
    const work = this.#work.get(id);
    if (!work) return; // unknown or finished: MAY be ignored (cancellation.mdx)
    // cancellation.mdx: the cancelled request gets no response.
    this.#finish(work, NO_RESPONSE);
    work.controller?.abort(new Error(reason));
  }

  /** The number of requests running plugin code. */
  get pending(): number {
    return this.#work.size;
  }

  /** Resolves when no request is running plugin code. */
  idle(): Promise<void> {
    if (this.#work.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /**
   * Aborts everything in flight (no response is sent for it), ends listen
   * streams with their closing result, stops watching, and stops the peer.
   */
  close(reason: Error = SERVER_SHUT_DOWN): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const work of this.#work.values()) {
      work.done = true;
      work.controller?.abort(reason);
      work.resolve(NO_RESPONSE);
    }
    this.#work.clear();
    this.#settleIdle();
    // subscriptions.mdx: the server ends a subscription with an empty result.
    for (const listen of [...this.#listens?.values() ?? []]) {
      listen.end({ resultType: "complete", _meta: listen.stamp });
    }
    for (const stop of this.#subscriptions?.values() ?? []) stop();
    this.#subscriptions?.clear();
    this.#peer.close(reason);
    this.#observe?.ended(); // a legacy session's duration
    this.#core.sessions.delete(this);
    if (this.#ownCore) this.#core.close();
  }

  /** Tells this session's client that lists changed (called by the core). @internal */
  catalogChanged(changed: { tools: boolean; resources: boolean; prompts: boolean }): void {
    const kinds = [
      ["tools", "toolsListChanged"],
      ["resources", "resourcesListChanged"],
      ["prompts", "promptsListChanged"],
    ] as const;
    for (const [kind, filter] of kinds) {
      if (!changed[kind]) continue;
      const method = `notifications/${kind}/list_changed`;
      if (this.#initialized) this.#peer.notify(method);
      for (const listen of this.#listens?.values() ?? []) {
        if (listen.honored[filter] === true) this.#peer.notify(method, { _meta: listen.stamp }, listen.context);
      }
    }
  }

  /** Times out what is due; returns the next deadline (called by the core's timer). @internal */
  sweep(now: number): number {
    let next = Infinity;
    for (const work of this.#work.values()) {
      if (work.done) continue;
      if (work.deadline <= now) {
        const reason = new DOMException(`"${work.label}" timed out after ${this.#core.timeout} ms`, "TimeoutError");
        this.#finish(work, work.fail(reason.message));
        work.controller?.abort(reason);
      } else if (work.deadline < next) {
        next = work.deadline;
      }
    }
    return next;
  }

  // --- dispatch -------------------------------------------------------------

  #request(method: string, params: JsonObject, id: RequestId): unknown {
    if (this.#pinned || !isModernRequest(params)) {
      return this.#dispatch(method, { id, params, era: LEGACY_ERA, client: this.#client });
    }
    // versioning.mdx (2026-07-28): a request with the envelope is served on its own terms.
    const client = modernClientView(params);
    const result = this.#dispatch(method, { id, params, era: MODERN_ERA, client });
    const facts = this.#core.facts();
    return result instanceof Promise
      ? result.then((value) => MODERN_ERA.encode(method, value, facts))
      : MODERN_ERA.encode(method, result, facts);
  }

  #dispatch(method: string, call: Received): unknown {
    const core = this.#core;
    const { params, era } = call;
    switch (method) {
      case "tools/call":
        return this.#callTool(call);
      case "tools/list":
        return this.#page(core.toolsFor(call.client), params, "tools");
    }
    // Only methods one era lacks are looked up: the calls above are the hot path.
    if (era.removed.has(method)) throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${method}`);
    switch (method) {
      case "initialize":
        return this.#initialize(params);
      case "server/discover":
        return this.#discover();
      case "ping":
        return {};
      case "logging/setLevel":
        return this.#setLogLevel(params);
      case "subscriptions/listen":
        return this.#listen(call);
      case "tasks/get":
      case "tasks/update":
      case "tasks/cancel":
      case "tasks/result":
      case "tasks/list":
        return answerTaskRequest(this.#core, method, call, taskPrincipal(this.auth, call.client.sessionId));
    }
    // Methods of the capabilities DIR provides; the others are not found (completion.mdx).
    const { resources, templates, prompts } = core.catalog;
    const hasResources = resources.length + templates.length > 0;
    switch (method) {
      case "resources/list":
        if (hasResources) return this.#page(resources, params, "resources");
        break;
      case "resources/templates/list":
        if (hasResources) return this.#page(templates, params, "resourceTemplates");
        break;
      case "resources/read":
        if (hasResources) return this.#readResource(call);
        break;
      case "resources/subscribe":
        if (hasResources) return this.#subscribe(params);
        break;
      case "resources/unsubscribe":
        if (hasResources) return this.#unsubscribe(params);
        break;
      case "prompts/list":
        if (prompts.length > 0) return this.#page(prompts, params, "prompts");
        break;
      case "prompts/get":
        if (prompts.length > 0) return this.#getPrompt(call);
        break;
      case "completion/complete":
        if (core.completes()) return this.#complete(call);
        break;
      case "skills/list":
      case "skills/get":
      case "resources/directory/read": {
        if (core.skills) return answerSkillRequest(core.skills, method, params, core.catalog.skills!, core.pageSize);
        const forwarded = core.options.forwardSkills?.(method, params);
        if (forwarded) return forwarded;
        break;
      }
    }
    throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${method}`);
  }

  #notification(method: string, params: JsonObject): void {
    switch (method) {
      case "notifications/initialized":
        this.#initialized = true;
        this.onStateChange?.();
        return;
      case "notifications/cancelled":
        if (isRequestId(params.requestId)) {
          this.cancel(params.requestId, typeof params.reason === "string" ? params.reason : undefined);
        }
        return;
    }
    // Other notifications (roots/list_changed, progress, ...) need nothing from us.
  }

  // --- lifecycle ------------------------------------------------------------

  #initialize(params: JsonObject): JsonObject {
    const requested = params.protocolVersion;
    if (typeof requested !== "string") {
      throw new RpcError(ErrorCode.InvalidParams, "Invalid params: initialize needs a protocolVersion string");
    }
    // lifecycle.mdx: echo a supported version, else answer our latest.
    const version = (SUPPORTED_PROTOCOL_VERSIONS as readonly string[]).includes(requested)
      ? requested
      : LATEST_PROTOCOL_VERSION;
    this.#pinned = true;
    this.#client.protocolVersion = version;
    this.#client.capabilities = isObject(params.capabilities) ? params.capabilities : {};
    if (isObject(params.clientInfo)) this.#clientInfo = params.clientInfo;
    const { options } = this.#core;
    const result: JsonObject = {
      protocolVersion: version,
      capabilities: withLegacyTasks(this.#core, version, this.#core.capabilities()),
      serverInfo: this.#core.facts().serverInfo,
    };
    if (options.instructions) result.instructions = options.instructions;
    return result;
  }

  // server/discover.mdx (2026-07-28).
  #discover(): JsonObject {
    return this.#core.discovery();
  }

  #setLogLevel(params: JsonObject): JsonObject {
    const level = LOG_LEVELS.indexOf(params.level as LogLevel);
    if (level < 0) {
      throw new RpcError(ErrorCode.InvalidParams, `Invalid params: level must be one of ${LOG_LEVELS.join(", ")}`);
    }
    this.#client.logLevel = level;
    this.onStateChange?.();
    return {};
  }

  // pagination.mdx: an opaque cursor; an invalid one is -32602.
  #page(items: { listing: JsonObject }[], params: JsonObject, key: string): JsonObject {
    const start = params.cursor === undefined ? 0 : decodeCursor(params.cursor, items.length);
    const end = start + this.#core.pageSize;
    const result: JsonObject = { [key]: items.slice(start, end).map((item) => item.listing) };
    if (end < items.length) result.nextCursor = encodeCursor(end);
    return result;
  }

  // --- tools ----------------------------------------------------------------

  #callTool(call: Received): unknown {
    const { params } = call;
    const { name } = params;
    if (typeof name !== "string") {
      throw new RpcError(ErrorCode.InvalidParams, "Invalid params: tools/call needs a name");
    }
    const tool = this.#core.toolsByName.get(name);
    if (!tool) {
      const answer = this.#core.catalog.unknownTool?.(name);
      if (answer) return answer;
      throw unknownName(this.#core, "tool", name);
    }
    const args = params.arguments ?? {};
    if (!isObject(args)) throw new RpcError(ErrorCode.InvalidParams, "Invalid params: arguments must be an object");
    // spec 2025-11-25 (SEP-1303): input validation errors are tool execution errors.
    const violations = validate(tool.listing.inputSchema, args);
    if (violations.length > 0) {
      return errorResult(`Invalid arguments for tool "${name}": ${violations.join("; ")}`);
    }
    // A tool's job is the same for every call: made once, the arguments passed beside it.
    tool.job ??= { label: name, run: tool.run, map: toCallToolResult, fail: errorResult, coded: !!tool.tasks };
    if (!tool.tasks) return this.#answering(call, "tools/call", name, { job: tool.job, input: args });
    return this.#answering(call, "tools/call", name, {
      job: tool.job,
      input: args,
      tasks: taskSupportFor(call, tool.tasks),
    });
  }

  // The call becomes a task (7f): its request is answered with the task, its run goes on.
  #becomeTask(work: Work): void {
    becomeTask(
      work,
      this.#core.tasks,
      (result) => this.#finish(work, result),
      (method, params) => this.#peer.notify(method, params),
    );
  }

  // --- resources ------------------------------------------------------------

  #readResource(call: Received): unknown {
    const { params } = call;
    const { uri } = params;
    if (typeof uri !== "string") {
      throw new RpcError(ErrorCode.InvalidParams, "Invalid params: resources/read needs a uri");
    }
    const readable = readableAt(this.#core, uri);
    if (!readable) {
      const upstream = uri.startsWith("skill://") && this.#core.options.forwardSkills?.("resources/read", params);
      return upstream || rethrow(call.era.resourceNotFound(uri)); // an upstream's skill, through a gateway
    }
    const { read, mimeType } = readable;
    return this.#answering(call, "resources/read", uri, {
      job: {
        label: uri,
        run: (_, ctx) => read(ctx),
        map: (value) => toReadResourceResult(value, uri, mimeType),
        fail: (message) => new RpcError(ErrorCode.InternalError, `Cannot read ${uri}: ${message}`),
      },
    });
  }

  #subscribe(params: JsonObject): JsonObject {
    const { uri } = params;
    const resource = typeof uri === "string" ? this.#core.resourcesByUri.get(uri) : undefined;
    if (!resource) throw LEGACY_ERA.resourceNotFound(uri);
    const { watch } = resource.definition;
    if (typeof watch !== "function") {
      throw new RpcError(ErrorCode.InvalidParams, `Invalid params: resource ${uri} cannot be watched`);
    }
    const subscriptions: Map<string, () => void> = this.#subscriptions ??= new Map();
    if (!subscriptions.has(resource.key)) {
      const stop = watch.call(resource.definition, resource.key, () => {
        if (subscriptions.has(resource.key)) {
          this.#peer.notify("notifications/resources/updated", { uri: resource.key });
        }
      });
      subscriptions.set(resource.key, typeof stop === "function" ? stop : () => {});
      this.onStateChange?.();
    }
    return {};
  }

  #unsubscribe(params: JsonObject): JsonObject {
    const uri = String(params.uri);
    this.#subscriptions?.get(uri)?.();
    const here = this.#subscriptions?.delete(uri) === true;
    if ((this.#elsewhere?.delete(uri) ?? false) || here) this.onStateChange?.();
    return {};
  }

  // subscriptions.mdx (2026-07-28): acknowledged first, every notification stamped,
  // only the kinds asked for; open until the client cancels it or the server closes.
  #listen(call: Received): Promise<unknown> {
    const { params, id } = call;
    const asked = params.notifications;
    if (!isObject(asked)) {
      throw new RpcError(ErrorCode.InvalidParams, "Invalid params: subscriptions/listen needs notifications");
    }
    const { honored, watched, tasks } = listenFilter(
      asked,
      this.#core,
      call,
      taskPrincipal(this.auth, call.client.sessionId),
    );
    const stamp = { [META.subscriptionId]: id };
    const context = { requestId: id };
    this.#peer.notify("notifications/subscriptions/acknowledged", { _meta: stamp, notifications: honored }, context);
    const listens: Map<RequestId, Listen> = this.#listens ??= new Map();
    // A listen only for tasks ends, with its result, once they are all terminal.
    const onlyTasks = tasks.length > 0 && Object.keys(honored).length === 1;
    const complete = { resultType: "complete", _meta: stamp };
    return new Promise((resolve) => {
      const stops = watched.map((resource) =>
        resource.definition.watch!.call(resource.definition, resource.key, () => {
          if (listens.has(id)) {
            this.#peer.notify("notifications/resources/updated", { _meta: stamp, uri: resource.key }, context);
          }
        })
      );
      for (const task of tasks) {
        stops.push(task.listen((changed) => {
          if (!listens.has(id)) return;
          this.#peer.notify("notifications/tasks", { ...changed.detail(), _meta: stamp }, context);
          if (onlyTasks && tasks.every((each) => each.terminal)) listens.get(id)!.end(complete);
        }));
      }
      if (onlyTasks && tasks.every((each) => each.terminal)) queueMicrotask(() => listens.get(id)?.end(complete));
      listens.set(id, {
        honored,
        stamp,
        context,
        end: (result) => {
          if (!listens.delete(id)) return;
          for (const stop of stops) if (typeof stop === "function") stop();
          resolve(result);
        },
      });
    });
  }

  // --- prompts and completion -------------------------------------------------

  #getPrompt(call: Received): unknown {
    const { params } = call;
    const { name } = params;
    const prompt = typeof name === "string" ? this.#core.promptsByName.get(name) : undefined;
    if (!prompt) throw unknownName(this.#core, "prompt", String(name));
    const args = promptArguments(prompt, params.arguments);
    const { definition } = prompt;
    return this.#answering(call, "prompts/get", String(name), {
      job: {
        label: String(name),
        run: (_, ctx) => definition.get(args, ctx),
        map: (value) => toGetPromptResult(value, definition.passThrough ? undefined : definition.description),
        fail: (message) => new RpcError(ErrorCode.InternalError, `Cannot get prompt "${name}": ${message}`),
      },
    });
  }

  #complete(call: Received): unknown {
    const { entry, argument, value } = completionTarget(this.#core, call.params);
    const { complete } = entry.definition;
    if (typeof complete !== "function") return toCompletion([]);
    const definition = entry.definition;
    return this.#track(call, undefined, {
      label: entry.key,
      run: (_, ctx) => complete.call(definition, argument, value, ctx),
      map: toCompletion,
      fail: (message) => new RpcError(ErrorCode.InternalError, `Cannot complete: ${message}`),
    });
  }

  // --- plugin code in flight ------------------------------------------------------

  /**
   * Runs a job that may ask the client questions: in the 2026-07-28 era with
   * the answers the retry brings (mrtr.mdx: `inputResponses`, and a verified
   * `requestState`); in the legacy era as any job.
   */
  #answering<T>(
    call: Received,
    method: string,
    name: string,
    { job, input, tasks }: { job: Job<T>; input?: T; tasks?: TaskSupport },
  ): unknown {
    const { params } = call;
    if (!call.era.asksInResult) return this.#track(call, undefined, job, input, tasks);
    if (params.inputResponses !== undefined && !isObject(params.inputResponses)) {
      throw new RpcError(ErrorCode.InvalidParams, "Invalid params: inputResponses must be an object");
    }
    const responses = params.inputResponses ?? {};
    const auth = this.auth;
    const asked: Questions = {
      method,
      name,
      args: method === "resources/read" ? undefined : params.arguments,
      principal: principalOf(auth),
      auth,
      answers: responses,
      asked: undefined,
      used: {},
      counts: {},
    };
    if (params.requestState === undefined) return this.#track(call, asked, job, input, tasks);
    return this.#core.stateKey()
      .then((key) => openRequestState(key, params.requestState, asked))
      .then((answers) => {
        asked.answers = { ...answers, ...responses };
        return this.#track(call, asked, job, input, tasks);
      });
  }

  /**
   * Runs plugin code for request `id` with a context, a deadline and
   * cancellation. A synchronous answer costs no promise and no bookkeeping.
   */
  #track<T>(call: Received, questions: Questions | undefined, job: Job<T>, input?: T, tasks?: TaskSupport): unknown {
    const { id, params, era, client } = call;
    if (this.#work.has(id)) {
      // A reused id would make cancellation ambiguous; the spec forbids it.
      throw new RpcError(ErrorCode.InvalidRequest, `Invalid request: id ${JSON.stringify(id)} is already in use`);
    }
    const { label, map, fail } = job;
    const token = isObject(params._meta) ? params._meta.progressToken : undefined;
    const work: Work = {
      id,
      label,
      deadline: Infinity, // set when the work turns out to be asynchronous
      controller: undefined,
      done: false,
      progressToken: isRequestId(token) ? token : undefined,
      lastProgress: -Infinity,
      dropped: 0,
      client,
      era,
      auth: questions ? questions.auth : this.auth,
      questions,
      meta: params._meta,
      // 2025-11-25: a call that asked to be a task is one at once.
      taskCall: tasks
        ? { support: tasks, task: undefined, asked: !era.taskExtension, message: undefined, made: [] }
        : undefined,
      fail,
      resolve: noop,
    };
    let value: Promise<unknown>;
    try {
      const returned = job.run(input as T, new RequestContext(work, this.#host));
      if (returned instanceof Promise) value = returned;
      else if (!work.taskCall?.asked || era.taskExtension) {
        // A synchronous answer: no promise, no bookkeeping (unless 2025-11-25 asked for a task: it gets one).
        work.done = true;
        return map(returned);
      } else value = Promise.resolve(returned);
    } catch (error) {
      const answer = this.#failed(work, error, job.coded);
      work.done = true;
      return rethrow(answer);
    }
    const settle = (value: unknown) => {
      try {
        return map(value);
      } catch (error) {
        return fail(errorMessage(error));
      }
    };
    return new Promise((resolve, reject) => {
      work.resolve = (result) => result instanceof RpcError ? reject(result) : resolve(result);
      const timeout = this.#core.timeout;
      if (timeout > 0) work.deadline = Date.now() + timeout;
      this.#work.set(id, work);
      this.#core.scheduleSweep(work.deadline);
      // A call that became a task ends its task instead of its request.
      const end = (result: unknown) => {
        const call = work.taskCall;
        if (call?.admitting) call.held = { result };
        else if (call?.task) call.task.end(result);
        else this.#finish(work, result);
      };
      value.then((settled) => end(settle(settled)), (error) => end(this.#failed(work, error, job.coded)));
      if (work.taskCall) whenTask(work.taskCall, value, () => this.#becomeTask(work), this.#core.options.taskGrace);
    });
  }

  // What plugin code that threw answers. A protocol error raised for it (a capability the client
  // lacks) answers the request as such; anything else is the job's failure (an isError result).
  #failed(work: Work, error: unknown, coded = false): unknown {
    if (error instanceof RpcError && error.code === ErrorCode.MissingRequiredClientCapability) return error;
    if (!work.done) this.#core.options.onPluginError?.(error, work.label); // not for a call already cancelled
    const code = isObject(error) ? error.code : undefined;
    if (coded && Number.isInteger(code) && (code as number) >= -32768 && (code as number) <= -32000) {
      return error instanceof RpcError
        ? error
        : new RpcError(code as number, errorMessage(error), (error as JsonObject).data);
    }
    return work.fail(errorMessage(error));
  }

  // Settles work once: with its result, its timeout, or NO_RESPONSE when cancelled.
  #finish(work: Work, result: unknown): void {
    if (work.done) return;
    work.done = true;
    if (work.dropped > 0) {
      this.#core.options.log?.(
        `dropped ${work.dropped} progress and log notification(s) of ${work.label}: the client was not reading`,
      );
    }
    const settle = () => {
      this.#work.delete(work.id);
      work.resolve(result);
      if (this.#work.size === 0) this.#settleIdle();
    };
    // SDK clients handle notifications a microtask late but responses at once, so a
    // response read in the same chunk as the last progress notification overtakes it:
    // answer a call that reported progress a moment after that notification is written.
    if (work.lastProgress !== -Infinity && result !== NO_RESPONSE) {
      this.#whenWritten(() => setTimeout(settle, PROGRESS_SETTLE_MS));
    } else {
      settle();
    }
  }

  #settleIdle(): void {
    const waiting = this.#idle;
    this.#idle = [];
    for (const resolve of waiting) resolve();
  }

  // A question from plugin code to the client. Legacy: a server→client request
  // that ends with the call. 2026-07-28: servers send no requests (mrtr.mdx), so
  // an unanswered question ends the call with input_required; the retry runs
  // the plugin again and the answer resolves at once.
  #ask(work: Work, capability: string, method: string, params: JsonObject, key?: string): Promise<unknown> {
    const refuse = (why: string) => Promise.reject(new Error(`Cannot send ${method}: ${why}`));
    if (!isObject(work.client.capabilities[capability])) {
      return Promise.reject(work.era.missingCapability(capability, method));
    }
    const kind = method === "elicitation/create" ? "elicit" : method === "sampling/createMessage" ? "sample" : "roots";
    const request = (sent: JsonObject) => this.#peer.request(method, sent, { signal: work.controller!.signal });
    const inTask = askInTask(work, { kind, method, params, key }, request);
    if (inTask) return inTask;
    if (work.done) return refuse("the request has ended");
    if (!work.era.asksInResult) {
      if (this.noClientRequests) return refuse(this.noClientRequests);
      const signal = (work.controller ??= new AbortController()).signal;
      const ask = (sent: JsonObject, onSent: (id: RequestId) => void) =>
        this.#peer.request(method, sent, { signal, context: { requestId: work.id }, onSent });
      // Traced: a CLIENT span, child of the call's SERVER span (its context is the call's _meta now).
      const tracer = this.#core.options.tracer;
      if (!tracer?.tracing) return ask(params, noop);
      const caller = traceContextOf(work.meta) ?? {};
      return traceClientRequest({ method, params, caller, connection: { tracer } }, ask);
    }
    const questions = work.questions;
    if (!questions) return refuse("only tools/call, prompts/get and resources/read can ask the client");
    const name = key ?? `${kind}-${questions.counts[kind] = (questions.counts[kind] ?? 0) + 1}`;
    const answer = questions.answers[name];
    if (Object.hasOwn(questions.answers, name) && isAnswerOf(method, answer)) {
      questions.used[name] = answer;
      return Promise.resolve(answer);
    }
    if (!questions.asked) {
      questions.asked = {};
      // Questions asked before the call awaits any of them go out together.
      queueMicrotask(() => void this.#inputRequired(work));
    }
    questions.asked[name] = { method, params };
    return new Promise(noop); // this run ends here; the retry runs it again with the answer
  }

  // Ends a 2026-07-28 call with the questions it asked and a signed requestState.
  async #inputRequired(work: Work): Promise<void> {
    const questions = work.questions!;
    let result: unknown;
    try {
      const key = await this.#core.stateKey();
      const requestState = await signRequestState(key, {
        ...await requestStateBinding(questions),
        a: questions.used,
        x: Date.now() + REQUEST_STATE_TTL_MS,
      });
      result = { resultType: "input_required", inputRequests: questions.asked, requestState };
    } catch (error) {
      result = work.fail(errorMessage(error));
    }
    this.#finish(work, result);
    work.controller?.abort(new Error("input required: the call ends here and runs again with the answers"));
  }
}

// --- 7e. What sessions share: answers' shapes, cursors, lookups, listen filters ---

/** What completion/complete names: its prompt or resource template, the argument, and the value typed so far. */
function completionTarget(
  core: ServerCore,
  params: JsonObject,
): { entry: Prompt | ResourceTemplate; argument: string; value: string } {
  const { ref, argument } = params;
  if (!isObject(ref) || !isObject(argument) || typeof argument.name !== "string") {
    throw new RpcError(ErrorCode.InvalidParams, "Invalid params: completion/complete needs ref and argument.name");
  }
  let entry: Prompt | ResourceTemplate | undefined;
  if (ref.type === "ref/prompt") entry = core.promptsByName.get(String(ref.name));
  else if (ref.type === "ref/resource") entry = core.catalog.templates.find((template) => template.key === ref.uri);
  if (!entry) {
    throw new RpcError(ErrorCode.InvalidParams, `Invalid params: unknown ${ref.type} ${brief(ref.name ?? ref.uri)}`);
  }
  return { entry, argument: argument.name, value: typeof argument.value === "string" ? argument.value : "" };
}

/** A completion result of what a completer gave (completion.mdx: at most 100 values per response). */
function toCompletion(values: unknown): JsonObject {
  const all = Array.isArray(values) ? values.map(String) : [];
  return { completion: { values: all.slice(0, 100), total: all.length, hasMore: all.length > 100 } };
}

/** What resources/read runs for `uri`: a resource's read, or the first matching template's; undefined: none. */
function readableAt(
  core: ServerCore,
  uri: string,
): { read: (ctx: ToolContext) => unknown; mimeType: string | undefined } | undefined {
  const resource = core.resourcesByUri.get(uri);
  if (resource) {
    const { definition } = resource;
    return { read: (ctx) => definition.read(uri, ctx), mimeType: definition.mimeType };
  }
  const file = core.skills?.byFile.get(uri);
  if (file) return { read: () => readSkillFile(file), mimeType: file.mimeType };
  for (const { match, variables, definition } of core.catalog.templates) {
    const found = match.exec(uri);
    if (!found) continue;
    const values: Record<string, string> = {};
    variables.forEach((name, i) => values[name] = decodeURIComponent(found[i + 1] ?? ""));
    return { read: (ctx) => definition.read(uri, values, ctx), mimeType: definition.mimeType };
  }
  return undefined;
}

// An unknown name whose file failed to load says why (data.loadError), so that the caller sees the plugin
// author's mistake, not just "unknown".
function unknownName(core: ServerCore, kind: string, name: string): RpcError {
  const failed = core.catalog.failed?.find((failure) => {
    const file = basenameOf(failure.file);
    return file.slice(0, file.length - extensionOf(file).length) === name;
  });
  if (!failed) return new RpcError(ErrorCode.InvalidParams, `Unknown ${kind}: ${name}`);
  const loadError = `${failed.file} failed to load: ${failed.message}`;
  return new RpcError(ErrorCode.InvalidParams, `Unknown ${kind}: ${name}; ${loadError}`, { loadError });
}

/** A prompts/get's arguments, checked: strings, the required ones all there; else -32602. */
function promptArguments(prompt: Prompt, args: unknown = {}): Record<string, string> {
  if (!isObject(args) || Object.values(args).some((value) => typeof value !== "string")) {
    throw new RpcError(ErrorCode.InvalidParams, "Invalid params: prompt arguments must be strings");
  }
  const missing = (prompt.definition.arguments ?? []).filter((arg) => arg.required && !(arg.name in args));
  if (missing.length > 0) {
    const names = missing.map((arg) => arg.name).join(", ");
    throw new RpcError(ErrorCode.InvalidParams, `Invalid params: prompt "${prompt.key}" needs ${names}`);
  }
  return args as Record<string, string>;
}

/**
 * What a subscriptions/listen asks for, as far as this server can honor it: list changes (with --watch),
 * resources that can be watched, and (SEP-2663, -32021 without the extension) the caller's own tasks.
 */
function listenFilter(
  asked: JsonObject,
  core: ServerCore,
  call: Received,
  principal: string,
): { honored: JsonObject; watched: Resource[]; tasks: ListenedTask[] } {
  const honored: JsonObject = {};
  if (core.options.listChanged) {
    for (const kind of ["toolsListChanged", "promptsListChanged", "resourcesListChanged"]) {
      if (asked[kind] === true) honored[kind] = true;
    }
  }
  const watched = (Array.isArray(asked.resourceSubscriptions) ? asked.resourceSubscriptions : [])
    .map((uri) => typeof uri === "string" ? core.resourcesByUri.get(uri) : undefined)
    .filter((resource): resource is Resource => typeof resource?.definition.watch === "function");
  if (watched.length > 0) honored.resourceSubscriptions = watched.map((resource) => resource.key);
  let tasks: ListenedTask[] = [];
  if (asked.taskIds !== undefined) {
    if (!declaresExtension(call.client.capabilities, EXTENSIONS.tasks)) throw tasksExtensionMissing();
    // So many ids at most, each the principal's own: a listen cannot make a gateway open listens upstream for
    // ids it never issued (Safety: quotas per principal).
    const ids = Array.isArray(asked.taskIds) ? [...new Set(asked.taskIds)].slice(0, LISTEN_TASKS_MAX) : [];
    const find = (taskId: unknown) =>
      core.tasks.find(taskId, principal) ??
        (typeof taskId === "string" ? core.options.remoteTask?.(taskId, principal) : undefined);
    tasks = ids.map(find).filter((task): task is ListenedTask => task !== undefined);
    honored.taskIds = tasks.map((task) => task.id);
  }
  return { honored, watched, tasks };
}

// Whether an inputResponses value has the shape of the answer to that kind of question;
// anything else is asked again (mrtr.mdx: missing inputs get a new input_required).
function isAnswerOf(method: string, answer: unknown): boolean {
  if (!isObject(answer)) return false;
  if (method === "elicitation/create") return ["accept", "decline", "cancel"].includes(answer.action as string);
  if (method === "roots/list") return Array.isArray(answer.roots);
  return isObject(answer.content) || Array.isArray(answer.content); // sampling/createMessage
}

function rethrow(result: unknown): unknown {
  if (result instanceof RpcError) throw result;
  return result;
}

function encodeCursor(offset: number): string {
  return btoa(`mcp.ts:${offset}`);
}

function decodeCursor(cursor: unknown, total: number): number {
  let offset = NaN;
  if (typeof cursor === "string") {
    try {
      const match = /^mcp\.ts:(\d+)$/.exec(atob(cursor));
      if (match) offset = Number(match[1]);
    } catch {
      // not base64: invalid below
    }
  }
  if (!(offset >= 0 && offset <= total)) {
    throw new RpcError(ErrorCode.InvalidParams, `Invalid params: unknown cursor ${JSON.stringify(cursor)}`);
  }
  return offset;
}

// --- 7f. Tasks: calls that outlive their request (SEP-2663) ---
// A task-capable tool's call becomes a task when its run calls ctx.task() or is still working after the
// grace period: the request is answered with the task's handle, the run goes on, and the client polls
// (tasks/get), answers (tasks/update) and cancels (tasks/cancel) by id. Tasks live in the core that made
// them, bound to the principal whose request made them; nothing survives the process.

/** The five states of a task; the last three are terminal. */
type TaskStatus = "working" | "input_required" | "completed" | "failed" | "cancelled";

const TERMINAL_TASK_STATUSES: ReadonlySet<string> = new Set(["completed", "failed", "cancelled"]);

/** The -32021 a request about tasks gets from a client that did not declare the extension. */
function tasksExtensionMissing(): RpcError {
  return new RpcError(
    ErrorCode.MissingRequiredClientCapability,
    `Missing required client capability: the ${EXTENSIONS.tasks} extension`,
    { requiredCapabilities: { extensions: { [EXTENSIONS.tasks]: {} } } },
  );
}

// A question a task's run asked and the client has not answered yet.
interface OpenQuestion {
  method: string;
  params: JsonObject;
  waiting: ((answer: unknown) => void)[];
}

/** What subscriptions/listen needs of a task: a ServerTask, or a gateway's upstream task. @internal */
interface ListenedTask {
  readonly id: string;
  readonly terminal: boolean;
  detail(): JsonObject;
  listen(listener: (task: ListenedTask) => void): () => void;
}

/** One task: its state as tasks/get shows it, its open questions, and the run it belongs to. @internal */
class ServerTask {
  readonly id: string;
  readonly principal: string;
  readonly createdAt: string;
  readonly expiresAt: number;
  readonly ttlMs: number;
  readonly pollIntervalMs: number;
  status: TaskStatus = "working";
  statusMessage: string | undefined;
  lastUpdatedAt: string;
  /** Its end was told to its principal (or there is none to tell: cancelled): room may be made of it. */
  read = false;
  /** With replicas: settles once its first record is in the store. */
  stored: Promise<unknown> | undefined;
  #result: JsonObject | undefined;
  #error: JsonObject | undefined;
  #open = new Map<string, OpenQuestion>();
  #answered = new Map<string, unknown>();
  #counts: Record<string, number>;
  #controller: AbortController;
  #listeners = new Set<(task: ServerTask) => void>();

  constructor({ id, principal, ttlMs, pollIntervalMs, controller, counts }: {
    id: string;
    principal: string;
    ttlMs: number;
    pollIntervalMs: number;
    controller: AbortController;
    counts: Record<string, number>;
  }) {
    const now = Date.now();
    this.id = id;
    this.principal = principal;
    this.createdAt = this.lastUpdatedAt = new Date(now).toISOString();
    this.expiresAt = now + ttlMs;
    this.ttlMs = ttlMs;
    this.pollIntervalMs = pollIntervalMs;
    this.#controller = controller;
    this.#counts = counts;
  }

  get terminal(): boolean {
    return TERMINAL_TASK_STATUSES.has(this.status);
  }

  /** The task as tasks/get and notifications/tasks show it (a DetailedTask). */
  detail(): JsonObject {
    const task: JsonObject = {
      taskId: this.id,
      status: this.status,
      createdAt: this.createdAt,
      lastUpdatedAt: this.lastUpdatedAt,
      ttlMs: this.ttlMs,
      pollIntervalMs: this.pollIntervalMs,
    };
    if (this.statusMessage !== undefined) task.statusMessage = this.statusMessage;
    if (this.status === "input_required") {
      const requests: JsonObject = {};
      for (const [key, { method, params }] of this.#open) requests[key] = { method, params };
      task.inputRequests = requests;
    }
    if (this.#result) task.result = this.#result;
    if (this.#error) task.error = this.#error;
    return task;
  }

  /** The task as 2025-11-25 shows it: `ttl` and `pollInterval`, no result or questions. */
  legacyDetail(): JsonObject {
    return legacyTaskOf(this.detail());
  }

  /** How it ended: its result (completed) or error (failed); neither while it runs or once cancelled. */
  outcome(): { result?: JsonObject; error?: JsonObject } {
    return { result: this.#result, error: this.#error };
  }

  /** 2025-11-25: a request of its run to the client; the task is input_required until it is answered. */
  asking(request: Promise<unknown>): Promise<unknown> {
    if (!this.terminal) {
      this.status = "input_required";
      this.#changed();
    }
    const resume = () => {
      if (this.status !== "input_required") return;
      this.status = "working";
      this.#changed();
    };
    return request.finally(resume);
  }

  /** What the request that made it is answered: the task with `resultType: "task"` (a CreateTaskResult). */
  created(): JsonObject {
    return { resultType: "task", ...this.detail() };
  }

  /** Calls `listener` on each change of status or statusMessage; returns what stops it. */
  listen(listener: (task: ServerTask) => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  /** ctx.progress inside the task: the message, else `progress/total`, becomes the statusMessage. */
  progress(progress: number, total?: number, message?: string): void {
    if (this.terminal) return;
    const text = message ?? (total === undefined ? String(progress) : `${progress}/${total}`);
    if (text === this.statusMessage) return;
    this.statusMessage = text;
    this.#changed();
  }

  /** A question of the run: open (the task input_required) until tasks/update answers it; an answered key resolves at once. */
  ask(kind: string, method: string, params: JsonObject, key: string | undefined): Promise<unknown> {
    const name = key ?? `${kind}-${this.#counts[kind] = (this.#counts[kind] ?? 0) + 1}`;
    if (this.#answered.has(name)) return Promise.resolve(this.#answered.get(name));
    if (this.terminal) return new Promise(noop); // cancelled: the run's end is dropped anyway
    return new Promise((resolve) => {
      const open = this.#open.get(name);
      if (open) return void open.waiting.push(resolve);
      this.#open.set(name, { method, params, waiting: [resolve] });
      this.status = "input_required";
      this.#changed();
    });
  }

  /** tasks/update: answers the open questions named; other keys are ignored (SEP-2663). */
  update(responses: JsonObject): void {
    let answered = false;
    for (const [key, answer] of Object.entries(responses)) {
      const open = this.#open.get(key);
      if (!open || !isAnswerOf(open.method, answer)) continue;
      this.#open.delete(key);
      this.#answered.set(key, answer);
      for (const resolve of open.waiting) resolve(answer);
      answered = true;
    }
    if (answered && this.#open.size === 0 && this.status === "input_required") {
      this.status = "working";
      this.#changed();
    }
  }

  /** The run ended: its result (completed), or the RpcError it ended with (failed). Dropped once terminal. */
  end(outcome: unknown): void {
    if (this.terminal) return;
    this.#open.clear();
    if (outcome instanceof RpcError) {
      this.status = "failed";
      this.#error = { code: outcome.code, message: outcome.message };
      if (outcome.data !== undefined) this.#error.data = outcome.data;
      this.statusMessage ??= outcome.message;
    } else {
      this.status = "completed";
      this.#result = isObject(outcome) ? outcome : {};
    }
    this.#changed();
  }

  /** tasks/cancel, expiry or shutdown: cancelled at once, the run aborted, what it ends with dropped. */
  cancel(reason: string): void {
    if (this.terminal) return;
    this.#open.clear();
    this.read = true;
    this.status = "cancelled";
    this.statusMessage = reason;
    this.#changed();
    this.#controller.abort(new Error(reason));
  }

  #changed(): void {
    this.lastUpdatedAt = new Date().toISOString();
    for (const listener of [...this.#listeners]) listener(this);
  }
}

/** A task as 2025-11-25 shows it, from the task as tasks/get shows it: `ttl` and `pollInterval`, no result or questions. */
function legacyTaskOf(detail: JsonObject): JsonObject {
  const { taskId, status, createdAt, lastUpdatedAt, ttlMs, pollIntervalMs, statusMessage } = detail;
  const task: JsonObject = { taskId, status, createdAt, lastUpdatedAt, ttl: ttlMs, pollInterval: pollIntervalMs };
  if (statusMessage !== undefined) task.statusMessage = statusMessage;
  return task;
}

/** The tasks of one core: made, found for their principal, expired, cancelled at shutdown. @internal */
class TaskStore {
  #tasks = new Map<string, ServerTask>();
  #options: ServerOptions;
  #schedule: (deadline: number) => void;
  #store: ReplicaStore | undefined;

  constructor(options: ServerOptions, schedule: (deadline: number) => void) {
    this.#options = options;
    this.#schedule = schedule;
  }

  get size(): number {
    return this.#tasks.size;
  }

  /** A task's ttlMs when its tool names none. */
  get defaultTtl(): number {
    return this.#options.taskTtl ?? DEFAULT_TASK_TTL_MS;
  }

  /** The store replicas share, when there is one (--state redis://…). */
  get store(): ReplicaStore | undefined {
    return this.#store;
  }

  /** Keeps every task's record in `store`, and answers the bus's updates and cancels of the tasks run here. */
  share(store: ReplicaStore): void {
    this.#store = store;
    store.subscribe((message) => {
      const task = message.t === "task" && typeof message.id === "string" ? this.#tasks.get(message.id) : undefined;
      if (!task) return;
      if (message.op === "cancel") task.cancel("cancelled by the client");
      else if (message.op === "update" && isObject(message.responses)) task.update(message.responses);
    });
  }

  /**
   * Room for one more task in the store's counts (every replica's): `id` is counted at once, then taken back
   * when the principal's share or the total is over; the principal's own oldest finished task makes room.
   */
  async admit(principal: string, id: string, expiresAt: number): Promise<boolean> {
    const store = this.#store!;
    const total = this.#options.maxTasks ?? DEFAULT_MAX_TASKS;
    const now = Date.now();
    const mine = `${TASK_IDS}:${principal}`;
    const counts = await Promise.all([
      store.call("ZREMRANGEBYSCORE", TASK_IDS, "-inf", now),
      store.call("ZADD", TASK_IDS, expiresAt, id),
      store.call("ZCARD", TASK_IDS),
      store.call("ZREMRANGEBYSCORE", mine, "-inf", now),
      store.call("ZADD", mine, expiresAt, id),
      store.call("ZCARD", mine),
    ]);
    const all = Number(counts[2]);
    const own = Number(counts[5]);
    if (all <= total && own <= perPrincipal(total, principal)) return true;
    const ids = (await store.call("ZRANGE", mine, 0, -1) as string[]).filter((other) => other !== id);
    const records = ids.length > 0 ? await store.call("MGET", ...ids.map((other) => TASK_KEY + other)) : [];
    const finished = ids.find((_, i) => {
      const record = parseTaskRecord((records as StoreReply[])[i]);
      return record === undefined || TERMINAL_TASK_STATUSES.has(String(record.d.status));
    });
    const dropped = all <= total || own > perPrincipal(total, principal) ? finished : undefined;
    if (dropped) {
      this.#tasks.delete(dropped);
      this.#forget(dropped, principal);
      return true;
    }
    this.#forget(id, principal);
    return false;
  }

  /** A task of any replica from the store, if it is the principal's and there; a silent replica's fails. */
  async findShared(id: unknown, principal: string): Promise<SharedTask | undefined> {
    const store = this.#store;
    if (!store || typeof id !== "string") return undefined;
    const owner = id.slice(0, Math.max(0, id.indexOf(".")));
    const [raw, alive] = await Promise.all([
      store.call("GET", TASK_KEY + id),
      store.call("EXISTS", HEARTBEAT_KEY + owner),
    ]);
    const record = parseTaskRecord(raw);
    if (!record || record.p !== principal || record.x <= Date.now()) return undefined;
    const task = new SharedTask(this, id, record);
    if (!task.terminal && alive === 0 && owner !== store.replica) task.ownerGone();
    return task;
  }

  /** The principal's tasks in the store, every replica's, oldest first (2025-11-25 tasks/list). */
  async allShared(principal: string): Promise<SharedTask[]> {
    const store = this.#store!;
    const ids = await store.call("ZRANGEBYSCORE", `${TASK_IDS}:${principal}`, Date.now(), "+inf") as string[];
    if (ids.length === 0) return [];
    const records = await store.call("MGET", ...ids.map((id) => TASK_KEY + id)) as StoreReply[];
    return ids.flatMap((id, i) => {
      const record = parseTaskRecord(records[i]);
      return record && record.p === principal ? [new SharedTask(this, id, record)] : [];
    });
  }

  #forget(id: string, principal: string): void {
    this.#store?.write("DEL", TASK_KEY + id);
    this.#store?.write("ZREM", TASK_IDS, id);
    this.#store?.write("ZREM", `${TASK_IDS}:${principal}`, id);
  }

  // The task's record, written now (settles once stored: the task is told to its client then, as any replica may
  // be asked of it next) and at each change (one write per change).
  #keep(task: ServerTask): Promise<unknown> {
    const store = this.#store!;
    const record = () => JSON.stringify({ p: task.principal, x: task.expiresAt, d: task.detail() } as TaskRecord);
    task.listen(() => {
      const left = task.expiresAt - Date.now();
      if (left > 0) store.write("SET", TASK_KEY + task.id, record(), "PX", left);
    });
    return store.call("SET", TASK_KEY + task.id, record(), "PX", Math.max(1, task.expiresAt - Date.now())).catch(noop);
  }

  /** A new task's id: this replica's name (or the instance's), a dot, 128 random bits. */
  newId(): string {
    const random = randomWord(16);
    const instance = this.#store?.replica ?? this.#options.instanceId;
    return instance ? `${instance}.${random}` : random;
  }

  /**
   * A new task, or undefined when there is no room (Safety: quotas per principal). A principal holds a tenth of
   * --max-tasks at most; room is made of its own oldest finished task, and, when the whole store is full, of a
   * finished task whose end its principal has read — never of another principal's unread result.
   */
  create({ principal, ttlMs, controller, counts, id = this.newId(), statusMessage }: {
    principal: string;
    ttlMs: number | undefined;
    controller: AbortController;
    counts: Record<string, number>;
    id?: string;
    statusMessage?: string;
  }): ServerTask | undefined {
    const total = this.#options.maxTasks ?? DEFAULT_MAX_TASKS;
    let own = 0;
    let ownFinished: ServerTask | undefined;
    let readFinished: ServerTask | undefined;
    for (const task of this.#tasks.values()) {
      if (task.principal === principal) {
        own++;
        if (task.terminal) ownFinished ??= task;
      } else if (task.terminal && task.read) readFinished ??= task;
    }
    if (own >= perPrincipal(total, principal) || this.#tasks.size >= total) {
      const room = ownFinished ?? (own < perPrincipal(total, principal) ? readFinished : undefined);
      if (!room) return undefined;
      this.#tasks.delete(room.id);
      this.#forget(room.id, room.principal);
    }
    const task = new ServerTask({
      id,
      principal,
      ttlMs: ttlMs ?? this.defaultTtl,
      pollIntervalMs: this.#options.taskPollInterval ?? DEFAULT_TASK_POLL_MS,
      controller,
      counts,
    });
    task.statusMessage = statusMessage;
    this.#tasks.set(task.id, task);
    this.#schedule(task.expiresAt);
    if (this.#store) task.stored = this.#keep(task);
    return task;
  }

  /** The task with that id, if it is the principal's and has not expired. */
  find(id: unknown, principal: string): ServerTask | undefined {
    const task = typeof id === "string" ? this.#tasks.get(id) : undefined;
    if (!task || task.principal !== principal) return undefined;
    if (task.expiresAt <= Date.now()) {
      this.#expire(task);
      return undefined;
    }
    return task;
  }

  /** The principal's tasks, oldest first (2025-11-25 tasks/list). */
  all(principal: string): ServerTask[] {
    const now = Date.now();
    return [...this.#tasks.values()].filter((task) => task.principal === principal && task.expiresAt > now);
  }

  /** Forgets what has expired (cancelling what still runs); returns the next expiry. */
  sweep(now: number): number {
    let next = Infinity;
    for (const task of this.#tasks.values()) {
      if (task.expiresAt <= now) this.#expire(task);
      else if (task.expiresAt < next) next = task.expiresAt;
    }
    return next;
  }

  /** Cancels every running task (the server is stopping: no one could poll them). */
  cancelAll(reason: string): void {
    for (const task of this.#tasks.values()) task.cancel(reason);
  }

  #expire(task: ServerTask): void {
    this.#tasks.delete(task.id);
    task.cancel("the task expired (its ttlMs ran out)");
    this.#forget(task.id, task.principal);
  }
}

// --- Tasks across replicas (--state redis://…, the store in 10f) ---
// Each task's record is in the store under mcp:t:ID, written at each change and expiring with the task; its ids
// are in mcp:tz and mcp:tz:PRINCIPAL (scored by expiry: the lists and the quotas of every replica). A task of
// another replica is read from its record; its update and cancel go to that replica on the bus. The replica's
// name starts the id, and its heartbeat key says it lives: a running task of a silent replica is failed.

/** What replicas of one server share (`--state redis://…`); the store itself is in 10f. @internal */
interface ReplicaStore {
  /** This replica's name (task ids start with it). */
  readonly replica: string;
  /** The store as messages name it (no credentials). */
  readonly name: string;
  /** A replica whose heartbeat is older than this is gone. */
  readonly heartbeatTtl: number;
  /** Whether the store answers now: when not, a request that needs it is refused at once. */
  readonly available: boolean;
  /**
   * Whether the store answers: at once, or (before its first connection has been tried: a replica just started)
   * once that is known. What every request that needs it asks first.
   */
  ready(): boolean | Promise<boolean>;
  /** A command's reply; an RpcError naming the store at once when it is unreachable. */
  call(...args: (string | number)[]): Promise<StoreReply>;
  /** A write not waited for, in order with the rest; kept (bounded) while the store is unreachable. */
  write(...args: (string | number)[]): void;
  /** A message to every replica, this one included. */
  publish(message: JsonObject): void;
  subscribe(listener: (message: JsonObject) => void): () => void;
  /**
   * A question to one replica over the bus, answered by what that replica gave `answer` for its `kind`: rejected
   * with the answering side's RpcError, or with "the server instance running it stopped" when none answers in time.
   */
  ask(replica: string, kind: string, message: JsonObject): Promise<unknown>;
  /** How this replica answers other replicas' questions of `kind`. */
  answer(kind: string, handler: (message: JsonObject) => unknown): void;
  /** The error of a request that needs the store while it is unreachable. */
  unavailable(): RpcError;
  close(): void;
}

/** A reply of the store: a string, an integer, nil, or an array of them. @internal */
type StoreReply = string | number | null | StoreReply[];

// A task's record in the store: its principal, when it expires, and the task as tasks/get shows it.
interface TaskRecord {
  p: string;
  x: number;
  d: JsonObject;
}

const TASK_KEY = "mcp:t:";
const GATEWAY_TASK_KEY = "mcp:gt:";
const TASK_IDS = "mcp:tz";
const HEARTBEAT_KEY = "mcp:hb:";
const REPLICA_GONE = "the server instance running it stopped";

function parseTaskRecord(raw: StoreReply): TaskRecord | undefined {
  const record = typeof raw === "string" ? parseJsonObject(raw) : undefined;
  return record && typeof record.p === "string" && typeof record.x === "number" && isObject(record.d)
    ? record as unknown as TaskRecord
    : undefined;
}

/** A task as its record in the store shows it: what a replica that does not run it answers with. @internal */
class SharedTask {
  readonly id: string;
  read = false;
  #tasks: TaskStore;
  #store: ReplicaStore;
  #record: TaskRecord;

  constructor(tasks: TaskStore, id: string, record: TaskRecord) {
    this.#tasks = tasks;
    this.#store = tasks.store!;
    this.id = id;
    this.#record = record;
  }

  get status(): TaskStatus {
    return this.#record.d.status as TaskStatus;
  }

  get terminal(): boolean {
    return TERMINAL_TASK_STATUSES.has(this.status);
  }

  detail(): JsonObject {
    return this.#record.d;
  }

  legacyDetail(): JsonObject {
    return legacyTaskOf(this.#record.d);
  }

  outcome(): { result?: JsonObject; error?: JsonObject } {
    const { result, error } = this.#record.d;
    return { result: isObject(result) ? result : undefined, error: isObject(error) ? error : undefined };
  }

  /** tasks/update: to the replica running it. */
  update(responses: JsonObject): void {
    this.#store.publish({ t: "task", id: this.id, op: "update", responses });
  }

  /** tasks/cancel: to the replica running it; cancelled in the record at once, for whoever reads it next. */
  cancel(reason: string): void {
    if (this.terminal) return;
    this.#store.publish({ t: "task", id: this.id, op: "cancel" });
    this.#rewrite({ status: "cancelled", statusMessage: reason });
  }

  /** Its replica is gone: failed, in the record too. */
  ownerGone(): void {
    const message = REPLICA_GONE;
    this.#rewrite({ status: "failed", statusMessage: message, error: { code: ErrorCode.InternalError, message } });
  }

  /** Calls `listener` when a poll of the record finds a change, until it is stopped (2025-11-25 tasks/result). */
  listen(listener: (task: SharedTask) => void): () => void {
    const interval = Number(this.#record.d.pollIntervalMs) || DEFAULT_TASK_POLL_MS;
    let last = JSON.stringify(this.#record.d);
    const timer = setInterval(async () => {
      let fresh: SharedTask | undefined;
      try {
        fresh = await this.#tasks.findShared(this.id, this.#record.p);
      } catch {
        return; // the store is away: asked again at the next poll
      }
      if (!fresh) {
        // Its record is gone (expired): the wait ends, with the task as cancelled by its expiry.
        clearInterval(timer);
        const message = "the task expired (its ttlMs ran out)";
        this.#record.d = { ...this.#record.d, status: "cancelled", statusMessage: message };
        return listener(this);
      }
      this.#record.d = fresh.detail();
      const now = JSON.stringify(this.#record.d);
      if (now !== last) (last = now, listener(this));
    }, interval);
    return () => clearInterval(timer);
  }

  #rewrite(change: JsonObject): void {
    this.#record.d = { ...this.#record.d, ...change, lastUpdatedAt: new Date().toISOString() };
    const left = this.#record.x - Date.now();
    if (left > 0) this.#store.write("SET", TASK_KEY + this.id, JSON.stringify(this.#record), "PX", left, "XX");
  }
}

// The revision whose experimental tasks (basic/utilities/tasks.mdx, SEP-1686) a legacy client may use.
const LEGACY_TASKS_VERSION = "2025-11-25";
const RELATED_TASK = "io.modelcontextprotocol/related-task";

/**
 * Whether a call may become a task, and how: SEP-2663 for a client that declared the extension on the request
 * ("required" without it: -32021 before the tool runs); 2025-11-25 for a client that declared the `tasks`
 * capability and asked with a `task` parameter. Any other call runs at once.
 */
function taskSupportFor(call: Received, support: TaskSupport): TaskSupport | undefined {
  const { era, client, params } = call;
  if (era.taskExtension) {
    if (declaresExtension(client.capabilities, EXTENSIONS.tasks)) return support;
    if (support.mode === "required") throw tasksExtensionMissing();
    return undefined;
  }
  const legacy = client.protocolVersion === LEGACY_TASKS_VERSION && isObject(client.capabilities.tasks);
  return legacy && isObject(params.task) ? support : undefined;
}

/** 2025-11-25: the initialize capabilities, with `tasks` when a tool's calls may be tasks. */
function withLegacyTasks(core: ServerCore, version: string, capabilities: JsonObject): JsonObject {
  if (version !== LEGACY_TASKS_VERSION || !core.catalog.tools.some((tool) => tool.tasks)) return capabilities;
  return { ...capabilities, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } };
}

/**
 * A question of a task's run: SEP-2663, one of its inputRequests (answered by tasks/update); 2025-11-25, a
 * request to the client tagged with the task (made first, when the run asks before it exists), the task
 * input_required until it is answered. Undefined: not a task's question.
 */
function askInTask(
  work: Work,
  question: { kind: string; method: string; params: JsonObject; key: string | undefined },
  request: (params: JsonObject) => Promise<unknown>,
): Promise<unknown> | undefined {
  const { kind, method, params, key } = question;
  const call = work.taskCall;
  const legacy = !work.era.taskExtension;
  if (!call || (!call.task && !(legacy && call.asked))) return undefined;
  if (!call.task) {
    return new Promise<void>((made) => call.made.push(made))
      .then(() => askInTask(work, question, request) ?? request(params));
  }
  if (!legacy) return call.task.ask(kind, method, params, key);
  work.controller ??= new AbortController();
  return call.task.asking(request(relatedTo(call.task, params)));
}

// A request of a 2025-11-25 task's run, tagged with its task.
function relatedTo(task: ServerTask, params: JsonObject): JsonObject {
  const meta = isObject(params._meta) ? params._meta : {};
  return { ...params, _meta: { ...meta, [RELATED_TASK]: { taskId: task.id } } };
}

/**
 * The 2025-11-25 tasks/get, tasks/result (waits for the end, then answers as the call would have), tasks/list
 * (the caller's) and tasks/cancel (a finished task is -32602), for a client that declared `tasks`.
 */
function answerLegacyTaskRequest(core: ServerCore, method: string, call: Received, principal: string): unknown {
  const { params, client } = call;
  if (client.protocolVersion !== LEGACY_TASKS_VERSION || !isObject(client.capabilities.tasks)) {
    throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${method}`);
  }
  if (method === "tasks/update") throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${method}`);
  const { tasks } = core;
  if (method === "tasks/list") {
    const list = (found: (ServerTask | SharedTask)[]) => ({ tasks: found.map((task) => task.legacyDetail()) });
    return tasks.store ? tasks.allShared(principal).then(list) : list(tasks.all(principal));
  }
  const task = tasks.find(params.taskId, principal);
  if (!task && tasks.store) {
    return tasks.findShared(params.taskId, principal).then((shared) => answerLegacyTask(method, params, shared));
  }
  return answerLegacyTask(method, params, task);
}

function answerLegacyTask(method: string, params: JsonObject, task: ServerTask | SharedTask | undefined): unknown {
  if (!task) {
    throw new RpcError(
      ErrorCode.InvalidParams,
      `Invalid params: unknown task ${JSON.stringify(params.taskId ?? null)}`,
    );
  }
  if (method === "tasks/get") return task.legacyDetail();
  if (method === "tasks/cancel") {
    if (task.terminal) {
      throw new RpcError(ErrorCode.InvalidParams, `Invalid params: task ${task.id} has ended (${task.status})`);
    }
    task.cancel("cancelled by the client");
    return task.legacyDetail();
  }
  const outcome = () => {
    task.read = true;
    const related = { [RELATED_TASK]: { taskId: task.id } };
    const { result, error } = task.outcome();
    if (error) throw new RpcError(Number(error.code), String(error.message), error.data);
    if (!result) throw new RpcError(ErrorCode.InternalError, `Internal error: task ${task.id} was ${task.status}`);
    return { ...result, _meta: { ...(isObject(result._meta) ? result._meta : {}), ...related } };
  };
  if (task.terminal) return outcome();
  return new Promise<void>((resolve) => {
    const stop = task.listen((changed: ServerTask | SharedTask) => changed.terminal && (stop(), resolve()));
  }).then(outcome);
}

/**
 * tasks/get, tasks/update, tasks/cancel (SEP-2663), in the contract's order of errors: the extension undeclared
 * (-32021), then tasks/result and tasks/list, which only the 2025-11-25 tasks had (-32601, whatever their taskId:
 * the conformance suite's dispatch scenario), then an id unknown, expired or another principal's (-32602).
 */
function answerTaskRequest(core: ServerCore, method: string, call: Received, principal: string): unknown {
  const { params, client } = call;
  const notFound = () => new RpcError(ErrorCode.MethodNotFound, `Method not found: ${method}`);
  if (!call.era.taskExtension) return answerLegacyTaskRequest(core, method, call, principal);
  if (!declaresExtension(client.capabilities, EXTENSIONS.tasks)) throw tasksExtensionMissing();
  if (method === "tasks/result" || method === "tasks/list") throw notFound();
  const task = core.tasks.find(params.taskId, principal);
  if (!task && core.tasks.store) {
    return core.tasks.findShared(params.taskId, principal).then((shared) =>
      answerTask(core, method, params, principal, shared)
    );
  }
  return answerTask(core, method, params, principal, task);
}

/** The -32602 of a task id unknown, expired or another principal's (all alike: no hint that it exists). */
function unknownTask(taskId: unknown): RpcError {
  return new RpcError(
    ErrorCode.InvalidParams,
    `Invalid params: unknown or expired task ${JSON.stringify(taskId ?? null)}`,
  );
}

function answerTask(
  core: ServerCore,
  method: string,
  params: JsonObject,
  principal: string,
  task: ServerTask | SharedTask | undefined,
): unknown {
  if (!task) {
    const forwarded = core.options.forwardTask?.(method, params, principal);
    if (forwarded) return forwarded;
    throw unknownTask(params.taskId);
  }
  switch (method) {
    case "tasks/get":
      if (task.terminal) task.read = true;
      return task.detail();
    case "tasks/update":
      if (!isObject(params.inputResponses)) {
        throw new RpcError(ErrorCode.InvalidParams, "Invalid params: tasks/update needs inputResponses");
      }
      task.update(params.inputResponses);
      return {};
    default: // tasks/cancel
      task.cancel("cancelled by the client");
      return {};
  }
}

/**
 * When a tracked call that may be a task becomes one: now, when its run asked (ctx.task(), or 2025-11-25's
 * `task` parameter); else when it is still working after the grace period (ended by a question, it is not).
 */
function whenTask(call: TaskCall, running: Promise<unknown>, become: () => void, graceMs = DEFAULT_TASK_GRACE_MS) {
  if (call.asked) return become();
  const grace = setTimeout(become, graceMs);
  const stop = () => clearTimeout(grace);
  running.then(stop, stop);
}

/** ctx.task(): the call becomes a task now, or (its run still starting) as soon as it is tracked. */
function askForTask(work: Work, statusMessage: string | undefined, becomeNow: () => unknown): Promise<void> {
  const call = work.taskCall;
  if (!call) return Promise.resolve(); // a plain call: a no-op
  if (call.task) {
    if (statusMessage !== undefined) call.task.progress(0, undefined, statusMessage);
    return Promise.resolve();
  }
  if (statusMessage !== undefined) call.message = statusMessage;
  call.asked = true;
  return new Promise((resolve) => {
    call.made.push(resolve);
    becomeNow();
  });
}

/**
 * A tracked call becomes a task: `finish` answers its request with the task and its run goes on. With the
 * store full (--max-tasks), an optional tool goes on as a plain call and a required one answers -32603.
 */
function becomeTask(
  work: Work,
  tasks: TaskStore,
  finish: (result: unknown) => void,
  notify: (method: string, params: JsonObject) => void,
): void {
  const call = work.taskCall!;
  if (work.done || call.task || call.admitting) return;
  const principal = taskPrincipal(work.auth, work.client.sessionId);
  const id = tasks.newId();
  if (tasks.store) {
    // Replicas count tasks together: room is asked of the store first (an unreachable store: no room).
    const ttlMs = call.support.ttlMs ?? tasks.defaultTtl;
    call.admitting = true;
    void tasks.admit(principal, id, Date.now() + ttlMs).catch(() => false).then((room) => {
      call.admitting = false;
      const held = call.held;
      call.held = undefined;
      if (work.done || call.task) return;
      if (room) makeTask(work, tasks, { principal, id, finish, notify });
      else refuseTask(work, finish, tasks.store!.available ? "too many tasks" : `${tasks.store!.name} is unreachable`);
      const task = (call as TaskCall).task; // made just now, or not
      if (!held || work.done && !task) return;
      if (task) task.end(held.result);
      else finish(held.result);
    });
    return;
  }
  makeTask(work, tasks, { principal, id, finish, notify });
}

// No room for the task: an optional tool's call goes on as a plain call, a required one answers -32603.
function refuseTask(work: Work, finish: (result: unknown) => void, why: string): void {
  const call = work.taskCall!;
  work.taskCall = undefined;
  if (call.support.mode === "required") {
    finish(new RpcError(ErrorCode.InternalError, `Internal error: ${why}`));
    (work.controller ??= new AbortController()).abort(new Error(why));
  }
  for (const made of call.made.splice(0)) made();
}

function makeTask(work: Work, tasks: TaskStore, { principal, id, finish, notify }: {
  principal: string;
  id: string;
  finish: (result: unknown) => void;
  notify: (method: string, params: JsonObject) => void;
}): void {
  const call = work.taskCall!;
  if (work.done || call.task) return;
  const controller = work.controller ??= new AbortController();
  const counts = work.questions?.counts ?? {};
  const task = tasks.create({
    principal,
    ttlMs: call.support.ttlMs,
    controller,
    counts,
    id,
    statusMessage: call.message,
  });
  if (!task) return refuseTask(work, finish, "too many tasks");
  call.task = task;
  const answer = () => {
    if (work.era.taskExtension) finish(task.created());
    else {
      // 2025-11-25: the task as `task`, and notifications/tasks/status on its connection as it changes.
      finish({ task: task.legacyDetail() });
      task.listen((changed) => notify("notifications/tasks/status", changed.legacyDetail()));
    }
    for (const made of call.made.splice(0)) made();
  };
  if (task.stored) void task.stored.then(answer);
  else answer();
}

// --- 7g. Skills: folders of instructions as skill:// resources (SEP-2640) ---
// A skill is a directory with a SKILL.md (YAML frontmatter, then Markdown) and any files beside it. Its files
// are read once, at load (9. Plugins), and served from memory: their digests and sizes are of the very bytes
// served. skills/list and skills/get list skills with their frontmatter and a manifest of their files;
// resources/read reads a file, resources/directory/read a directory.

/** A file of a skill, as loaded: its bytes and what the manifest says of them. @internal */
export interface SkillFile {
  uri: string;
  bytes: Uint8Array;
  /** "sha256:" and the lowercase hex SHA-256 of the bytes. */
  digest: string;
  mimeType: string;
}

/** A skill as loaded: its SKILL.md's URI, its name, its frontmatter as JSON, every file under it. @internal */
export interface Skill {
  uri: string;
  name: string;
  frontmatter: JsonObject;
  /** Its files, SKILL.md and nested skills' included, by URI. */
  items: SkillFile[];
}

const SKILL_FILE = "SKILL.md";
// The `source` of the resources a catalog's skills add (their SKILL.md files), so that they are made once.
const SKILLS_SOURCE = "(skills)";
// The naming rules of a skill's name (the directory's name too): 1-64 of a-z 0-9 -, no leading, trailing or double -.
const SKILL_NAME_PATTERN = /^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/;

/** The mime type of a skill file, from its extension (text only as text/*). */
function skillMimeType(name: string): string {
  if (name === SKILL_FILE) return "text/markdown";
  const types: Record<string, string> = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".csv": "text/csv",
    ".html": "text/html",
    ".css": "text/css",
    ".xml": "text/xml",
    ".yaml": "text/yaml",
    ".yml": "text/yaml",
    ".py": "text/x-python",
    ".sh": "text/x-shellscript",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".ts": "text/x-typescript",
    ".json": "application/json",
    ".pdf": "application/pdf",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".svg": "image/svg+xml",
    ".webp": "image/webp",
  };
  return types[extensionOf(name).toLowerCase()] ?? "application/octet-stream";
}

/**
 * The frontmatter of a SKILL.md (a `---` block at its top, a BOM before it allowed), as JSON; a SyntaxError
 * naming the line when there is none or it is outside the YAML subset mcp.ts reads (see parseYamlSubset).
 * @internal
 */
export function skillFrontmatter(text: string): JsonObject {
  const match = /^\uFEFF?---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/.exec(text);
  if (!match) throw new SyntaxError("no frontmatter: the file must start with a --- line, and a --- line end it");
  const value = parseYamlSubset(match[1], 2);
  if (!isObject(value)) throw new SyntaxError("the frontmatter is not a mapping of keys to values");
  return value;
}

/**
 * The YAML subset a skill's frontmatter may use, read with no dependency: block mappings and sequences,
 * plain scalars (on one line or folded over several deeper ones), single- and double-quoted scalars on one
 * line, block scalars (| literal, > folded, with - or + chomping), true/false/null/~, the YAML 1.2 core schema's
 * integers and floats, comments. The JSON it gives is what a YAML 1.2 parser gives for the same text.
 * Anything else (anchors, aliases, tags, flow collections, quoted scalars over several lines, duplicate keys)
 * is a SyntaxError naming its line (`firstLine`: the number of the text's first line in its file).
 * @internal
 */
export function parseYamlSubset(text: string, firstLine = 1): unknown {
  type Line = { number: number; indent: number; text: string };
  const lines: Line[] = [];
  const raws = text.split("\n").map((raw) => raw.endsWith("\r") ? raw.slice(0, -1) : raw);
  text.split("\n").forEach((raw, i) => {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    const body = line.trimStart();
    if (body === "" || body.startsWith("#")) return;
    const indent = line.length - body.length;
    if (line.slice(0, indent).includes("\t")) throw yamlError(i + firstLine, "a tab in the indentation");
    lines.push({ number: i + firstLine, indent, text: body.trimEnd() });
  });
  let at = 0;
  const isItem = (line: Line) => line.text === "-" || line.text.startsWith("- ");
  const block = (indent: number): unknown => isItem(lines[at]) ? sequence(indent) : mapping(indent);
  // A value on its own lines below a key or an item: deeper, or (a sequence) at the key's own indentation.
  const below = (indent: number, sequenceHere: boolean): unknown => {
    const next = lines[at];
    if (next && (next.indent > indent || (sequenceHere && next.indent === indent && isItem(next)))) {
      return block(next.indent);
    }
    return null;
  };
  // A scalar after `key:` or `- ` (at `indent`), with what continues it: a block scalar's lines (| literal,
  // > folded, with - or + chomping), or a plain scalar's lines deeper than `indent` (folded into spaces).
  const scalar = (rest: string, line: Line, indent: number): unknown => {
    const header = /^([|>])([+-]?)\s*(?:#.*)?$/.exec(rest);
    if (header) return blockScalar(header[1] === ">", header[2], line, indent);
    const value = yamlScalar(rest, line.number);
    if (/^["']/.test(rest) || /\s#/.test(rest) || !(lines[at]?.indent > indent)) return value;
    let folded = rest; // deeper lines go on with it: a string, whatever its first line looked like
    let previous = line.number;
    while (at < lines.length && lines[at].indent > indent && !lines[at].text.startsWith("#")) {
      const next = lines[at++];
      if (yamlKeyEnd(next.text) >= 0 || isItem(next)) throw yamlError(next.number, "unexpected indentation");
      folded += next.number - previous > 1 ? "\n".repeat(next.number - previous - 1) : " ";
      folded += next.text;
      previous = next.number;
      if (/\s#/.test(next.text)) {
        folded = folded.slice(0, folded.length - next.text.length + next.text.search(/\s#/)).trimEnd();
        break; // a comment ends it
      }
    }
    return folded;
  };
  const blockScalar = (fold: boolean, chomp: string, line: Line, indent: number): string => {
    // Its lines: blank, or deeper than its key, at the depth of the first that is not blank.
    const start = line.number - firstLine + 1;
    let end = start;
    let depth = -1;
    for (; end < raws.length; end++) {
      const body = raws[end].trimStart();
      if (body === "") continue;
      const column = raws[end].length - body.length;
      if (column <= indent || (depth >= 0 && column < depth)) break;
      if (depth < 0) depth = column;
    }
    while (at < lines.length && lines[at].number - firstLine < end) at++;
    const kept = raws.slice(start, end).map((raw) => raw.trim() === "" ? "" : raw.slice(depth));
    let blanks = 0; // blank lines after its last line: - drops them and the last newline, + keeps them
    while (kept.length > 0 && kept.at(-1) === "") kept.pop(), blanks++;
    if (end === raws.length && raws.at(-1) === "" && blanks > 0) blanks--; // the text's own last newline
    let value = "";
    kept.forEach((text, i) => {
      const previous = kept[i - 1];
      if (!fold || i === 0) value += (i === 0 ? "" : "\n") + text;
      else if (text === "") value += "\n"; // a blank line is a line break
      else if (previous === "") value += text; // after blank lines, which gave the breaks
      else if (/^\s/.test(text) || /^\s/.test(previous)) value += "\n" + text; // more indented: kept as is
      else value += " " + text; // folded
    });
    if (fold && kept[0] === "") value = "\n" + value;
    if (kept.length === 0 || chomp === "-") return value;
    return value + "\n" + (chomp === "+" ? "\n".repeat(blanks) : "");
  };
  const mapping = (indent: number): JsonObject => {
    // No prototype: a key named __proto__ is a key like any other (Safety: parsed maps have no prototype).
    const result: JsonObject = Object.create(null);
    while (at < lines.length && lines[at].indent === indent && !isItem(lines[at])) {
      const line = lines[at++];
      const { key, rest } = yamlKey(line.text, line.number);
      if (Object.hasOwn(result, key)) throw yamlError(line.number, `the key "${key}" appears twice`);
      result[key] = rest === "" ? below(indent, true) : scalar(rest, line, indent);
    }
    if (at < lines.length && lines[at].indent > indent) throw yamlError(lines[at].number, "unexpected indentation");
    return result;
  };
  const sequence = (indent: number): unknown[] => {
    const result: unknown[] = [];
    while (at < lines.length && lines[at].indent === indent && isItem(lines[at])) {
      const line = lines[at];
      const content = line.text.slice(1).trimStart();
      if (content === "" || content.startsWith("#")) {
        at++;
        result.push(below(indent, false));
      } else if (content === "-" || content.startsWith("- ") || yamlKeyEnd(content) >= 0) {
        // `- key: value` or `- - item`: a block that starts on the item's line, at the column of its content.
        lines[at] = { number: line.number, indent: indent + line.text.length - content.length, text: content };
        result.push(block(lines[at].indent));
      } else {
        at++;
        result.push(scalar(content, line, indent));
      }
    }
    if (at < lines.length && lines[at].indent > indent) throw yamlError(lines[at].number, "unexpected indentation");
    return result;
  };
  if (lines.length === 0) return null;
  const value = block(lines[0].indent);
  if (at < lines.length) throw yamlError(lines[at].number, "unexpected indentation");
  return value;
}

function yamlError(line: number, why: string): SyntaxError {
  return new SyntaxError(`line ${line}: ${why} (not in the YAML subset mcp.ts reads)`);
}

// Where a plain `key: value` line's key ends (the colon), or -1: a colon followed by a space or the end.
function yamlKeyEnd(text: string): number {
  if (text.startsWith('"') || text.startsWith("'")) {
    const quoted = yamlQuoted(text, 0);
    return quoted && /^\s*:(\s|$)/.test(text.slice(quoted.end)) ? text.indexOf(":", quoted.end) : -1;
  }
  const match = /:(\s|$)/.exec(text);
  const comment = text.search(/\s#/);
  return match && (comment < 0 || match.index < comment) ? match.index : -1;
}

function yamlKey(text: string, line: number): { key: string; rest: string } {
  const end = yamlKeyEnd(text);
  if (end < 0) throw yamlError(line, "expected key: value (a scalar on a line of its own, or over several lines?)");
  const raw = text.slice(0, end).trim();
  const resolved = raw.startsWith('"') || raw.startsWith("'") ? yamlScalar(raw, line) : yamlPlain(raw, line);
  // Keys are strings in JSON: a YAML 1.2 parser turns 1, true and null into "1", "true" and "".
  const rest = text.slice(end + 1).trim();
  return { key: resolved === null ? "" : String(resolved), rest: rest.startsWith("#") ? "" : rest };
}

// A scalar after `key:` or `- `: quoted, or plain (a comment after it dropped).
function yamlScalar(text: string, line: number): unknown {
  if (text.startsWith('"') || text.startsWith("'")) {
    const quoted = yamlQuoted(text, 0);
    if (!quoted) throw yamlError(line, "a quoted scalar that does not end on its line");
    const after = text.slice(quoted.end).trim();
    if (after !== "" && !after.startsWith("#")) throw yamlError(line, `text after a quoted scalar: ${after}`);
    if (quoted.value instanceof SyntaxError) throw yamlError(line, quoted.value.message);
    return quoted.value;
  }
  const comment = text.search(/\s#/);
  return yamlPlain((comment < 0 ? text : text.slice(0, comment)).trim(), line);
}

// A quoted scalar at `start`: its value (or a SyntaxError for a bad escape) and where it ends.
function yamlQuoted(text: string, start: number): { value: string | SyntaxError; end: number } | undefined {
  const quote = text[start];
  let value = "";
  for (let i = start + 1; i < text.length; i++) {
    const char = text[i];
    if (quote === "'") {
      if (char !== "'") value += char;
      else if (text[i + 1] === "'") value += text[++i];
      else return { value, end: i + 1 };
      continue;
    }
    if (char === '"') return { value, end: i + 1 };
    if (char !== "\\") {
      value += char;
      continue;
    }
    const escape = text[++i];
    const simple: Record<string, string> = {
      "0": "\0",
      a: "\x07",
      b: "\b",
      t: "\t",
      "\t": "\t",
      n: "\n",
      v: "\v",
      f: "\f",
      r: "\r",
      e: "\x1b",
      " ": " ",
      '"': '"',
      "/": "/",
      "\\": "\\",
      N: "\x85",
      _: "\xa0",
      L: "\u2028",
      P: "\u2029",
    };
    if (escape !== undefined && Object.hasOwn(simple, escape)) {
      value += simple[escape];
      continue;
    }
    const digits = escape === "x" ? 2 : escape === "u" ? 4 : escape === "U" ? 8 : 0;
    const hex = text.slice(i + 1, i + 1 + digits);
    if (digits === 0 || !new RegExp(`^[0-9a-fA-F]{${digits}}$`).test(hex)) {
      return { value: new SyntaxError(`the escape \\${escape ?? ""} in a double-quoted scalar`), end: text.length };
    }
    value += String.fromCodePoint(parseInt(hex, 16));
    i += digits;
  }
  return undefined;
}

// A plain scalar as the YAML 1.2 core schema reads it: null, a boolean, a number, else a string.
function yamlPlain(text: string, line: number): unknown {
  if (/^[[\]{},&*!|>%@`]/.test(text) || /^[-?:](\s|$)/.test(text) || text.startsWith("#")) {
    const what: Record<string, string> = {
      "[": "a flow sequence",
      "{": "a flow mapping",
      "&": "an anchor",
      "*": "an alias",
      "!": "a tag",
      "|": "a block scalar",
      ">": "a block scalar",
    };
    throw yamlError(line, `${what[text[0]] ?? `a scalar starting with ${text[0]}`}: ${text}`);
  }
  if (/:\s/.test(text)) throw yamlError(line, `a mapping inside a value: ${text}`);
  if (/^(?:~|[Nn]ull|NULL)?$/.test(text)) return null;
  if (/^(?:[Tt]rue|TRUE)$/.test(text)) return true;
  if (/^(?:[Ff]alse|FALSE)$/.test(text)) return false;
  if (/^0o[0-7]+$/.test(text)) return parseInt(text.slice(2), 8);
  if (/^0x[0-9a-fA-F]+$/.test(text)) return parseInt(text.slice(2), 16);
  if (/^[-+]?[0-9]+$/.test(text)) return Number(text);
  if (/^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$/.test(text)) {
    throw yamlError(line, `${text} has no JSON value`);
  }
  if (
    /^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$/.test(text) ||
    /^[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)$/.test(text)
  ) {
    return Number(text);
  }
  return text;
}

/** A skill's entry in skills/list and skills/get: its SKILL.md's URI, frontmatter and manifest. */
function skillEntry(skill: Skill): JsonObject {
  return {
    uri: skill.uri,
    frontmatter: skill.frontmatter,
    resources: skill.items.map((item) => ({ uri: item.uri, digest: item.digest, size: item.bytes.length })),
  };
}

/** What a catalog's skills serve: their files by URI, their directories' children, SKILL.md as resources. */
interface SkillIndex {
  byUri: Map<string, Skill>;
  byFile: Map<string, SkillFile>;
  directories: Map<string, JsonObject[]>;
}

function indexSkills(skills: Skill[]): SkillIndex {
  const byFile = new Map<string, SkillFile>();
  const directories = new Map<string, Map<string, JsonObject>>();
  const child = (parent: string, entry: JsonObject) => {
    let children = directories.get(parent);
    if (!children) directories.set(parent, children = new Map());
    children.set(String(entry.uri), entry);
  };
  for (const skill of skills) {
    for (const file of skill.items) {
      byFile.set(file.uri, file);
      // Every directory from the scheme down: its files and subdirectories.
      const path = file.uri.slice("skill://".length).split("/");
      for (let depth = 1; depth < path.length; depth++) {
        const parent = "skill://" + path.slice(0, depth).join("/");
        const name = decodeURIComponent(path[depth]);
        const uri = `${parent}/${path[depth]}`;
        if (depth === path.length - 1) child(parent, { uri, name, mimeType: file.mimeType, size: file.bytes.length });
        else child(parent, { uri, name, mimeType: "inode/directory" });
      }
    }
  }
  const listed = new Map<string, JsonObject[]>();
  for (const [uri, children] of directories) {
    listed.set(uri, [...children.values()].sort((a, b) => String(a.uri) < String(b.uri) ? -1 : 1));
  }
  return { byUri: new Map(skills.map((skill) => [skill.uri, skill])), byFile, directories: listed };
}

/** Each skill's SKILL.md as a resource of resources/list and resources/read (its name and description). */
function skillResources(skills: Skill[]): Resource[] {
  return skills.map((skill) => {
    const file = skill.items.find((candidate) => candidate.uri === skill.uri)!;
    const text = new TextDecoder().decode(file.bytes);
    const listing: JsonObject = {
      uri: skill.uri,
      name: skill.name,
      mimeType: "text/markdown",
      size: file.bytes.length,
    };
    if (typeof skill.frontmatter.description === "string") listing.description = skill.frontmatter.description;
    return {
      key: skill.uri,
      listing,
      source: SKILLS_SOURCE,
      definition: { uri: skill.uri, name: skill.name, mimeType: "text/markdown", read: () => text },
    };
  });
}

/**
 * skills/list (sorted by URI, paged), skills/get and resources/directory/read (a directory's children,
 * paged): -32602 for a URI that is not a skill, or not a directory.
 */
function answerSkillRequest(
  index: SkillIndex,
  method: string,
  params: JsonObject,
  skills: Skill[],
  pageSize: number,
): JsonObject {
  const page = (items: JsonObject[], key: string) => {
    const start = params.cursor === undefined ? 0 : decodeCursor(params.cursor, items.length);
    const result: JsonObject = { [key]: items.slice(start, start + pageSize) };
    if (start + pageSize < items.length) result.nextCursor = encodeCursor(start + pageSize);
    return result;
  };
  if (method === "skills/list") {
    return page([...skills].sort((a, b) => a.uri < b.uri ? -1 : 1).map(skillEntry), "skills");
  }
  const uri = params.uri;
  if (method === "skills/get") {
    const skill = typeof uri === "string" ? index.byUri.get(uri) : undefined;
    if (!skill) throw new RpcError(ErrorCode.InvalidParams, `Invalid params: no skill ${JSON.stringify(uri ?? null)}`);
    return { skill: skillEntry(skill) };
  }
  const children = typeof uri === "string" ? index.directories.get(trimEnd(uri, "/")) : undefined;
  if (!children) {
    throw new RpcError(ErrorCode.InvalidParams, `Invalid params: ${JSON.stringify(uri ?? null)} is not a directory`);
  }
  return page(children, "resources");
}

/** What resources/read answers for a skill file: text for UTF-8 text/*, else a blob. */
function readSkillFile(file: SkillFile): string | Uint8Array {
  if (!file.mimeType.startsWith("text/")) return file.bytes;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(file.bytes);
  } catch {
    return file.bytes;
  }
}

// --- 7h. Metrics: durations as histograms, in the Prometheus text format and OTLP ---
// The MCP semantic conventions' duration histograms and the span exporter's counters, cumulative since the start,
// kept only when asked for (`--metrics`, or an OTLP metrics endpoint): a server measures each request it serves and
// each legacy session's life, a client each request it sends and its session.

// An attribute as OTLP JSON writes it: ints as strings, doubles, booleans, strings.
function otlpValue(value: string | number | boolean): JsonObject {
  if (typeof value === "boolean") return { boolValue: value };
  if (typeof value === "number") return Number.isInteger(value) ? { intValue: String(value) } : { doubleValue: value };
  return { stringValue: value };
}

function otlpAttributes(attributes: Record<string, string | number | boolean>): JsonObject[] {
  return Object.entries(attributes).map(([key, value]) => ({ key, value: otlpValue(value) }));
}

// Milliseconds since the epoch, fractional, as OTLP's nanoseconds in a string (digits joined: no BigInt per span).
function unixNano(ms: number): string {
  const whole = Math.floor(ms);
  return String(whole) + String(Math.min(999_999, Math.round((ms - whole) * 1e6))).padStart(6, "0");
}

// The same attributes as OTLP JSON text, written directly (a span is encoded once, at its end, with no objects);
// the few keys there are are encoded once.
const ATTRIBUTE_KEYS_JSON = new Map<string, string>();
function otlpAttributesJson(attributes: Record<string, string | number | boolean>): string {
  let json = "";
  for (const key in attributes) {
    let head = ATTRIBUTE_KEYS_JSON.get(key);
    if (head === undefined && ATTRIBUTE_KEYS_JSON.size < 256) {
      ATTRIBUTE_KEYS_JSON.set(key, head = `{"key":${JSON.stringify(key)},"value":`);
    }
    const value = attributes[key];
    const typed = typeof value === "string"
      ? `{"stringValue":${JSON.stringify(value)}}`
      : typeof value === "boolean"
      ? `{"boolValue":${value}}`
      : Number.isInteger(value)
      ? `{"intValue":"${value}"}`
      : `{"doubleValue":${value}}`;
    json += `${json ? "," : ""}${head ?? `{"key":${JSON.stringify(key)},"value":`}${typed}}`;
  }
  return `[${json}]`;
}

/**
 * Runs `run` and tells `done` how it ended — at once, or when its promise settles — giving back what it gave (a
 * request observed stays synchronous when its handler is).
 */
function whenSettled(run: () => unknown, done: (result: unknown, error?: unknown) => void): unknown {
  let result: unknown;
  try {
    result = run();
  } catch (error) {
    done(undefined, error);
    throw error;
  }
  if (!(result instanceof Promise)) {
    done(result);
    return result;
  }
  return result.then((value) => (done(value), value), (error) => {
    done(undefined, error);
    throw error;
  });
}

// The semantic conventions' buckets for MCP durations, in seconds.
const DURATION_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];

// A metric's labels are a client's choice only among what is served (Safety: quotas per principal): a method
// of MCP's, a tool or prompt the server has, else _OTHER; and an instrument has so many series at most, past
// which a point goes to its overflow series (OpenTelemetry's cardinality limit).
const MCP_REQUEST_METHODS = new Set([
  "initialize",
  "ping",
  "server/discover",
  "tools/list",
  "tools/call",
  "resources/list",
  "resources/templates/list",
  "resources/read",
  "resources/subscribe",
  "resources/unsubscribe",
  "resources/directory/read",
  "prompts/list",
  "prompts/get",
  "completion/complete",
  "logging/setLevel",
  "subscriptions/listen",
  "tasks/get",
  "tasks/update",
  "tasks/cancel",
  "tasks/result",
  "tasks/list",
  "skills/list",
  "skills/get",
  "sampling/createMessage",
  "elicitation/create",
  "roots/list",
]);
const METRIC_SERIES_MAX = 2_000;
const OVERFLOW: Record<string, string> = { "otel.metric.overflow": "true" };

/** What a metric may say of a request's method: MCP's own, else _OTHER. */
function methodLabel(method: string): string {
  return MCP_REQUEST_METHODS.has(method) ? method : "_OTHER";
}

/** Which tool and prompt names a server has (a metric names others _OTHER). */
type ServedNames = (kind: "tool" | "prompt", name: string) => boolean;

interface Histogram {
  name: string;
  attributes: Record<string, string>;
  counts: number[]; // per bucket, the last one +Inf
  sum: number;
  count: number;
  min: number;
  max: number;
}

interface Counter {
  name: string;
  unit: string;
  attributes: Record<string, string>;
  value: number;
}

/** Recorded durations, by instrument and attributes, and their Prometheus text. @internal */
export class Metrics {
  #histograms = new Map<string, Histogram>();
  #counters = new Map<string, Counter>();
  #series = new Map<string, number>(); // series per instrument, up to METRIC_SERIES_MAX
  #networks = new WeakMap<object, string>();

  // A short key for a server's network attributes (one object per server).
  #networkKey(network: Record<string, string>): string {
    let key = this.#networks.get(network);
    if (key === undefined) this.#networks.set(network, key = JSON.stringify(network));
    return key;
  }
  /** What `target_info` says of the process (service.name, telemetry.sdk.*). */
  readonly resource: Record<string, string>;
  /** When recording began (ms since the epoch): every point's start (cumulative). */
  readonly started: number = performance.timeOrigin + performance.now();

  constructor(resource: Record<string, string> = {}) {
    this.resource = resource;
  }

  /** How many points were recorded so far (an exporter sends nothing new when it has not moved). */
  changes = 0;

  /** Adds one duration, in seconds, to the histogram `name` of these attributes. */
  record(name: string, seconds: number, attributes: Record<string, string | number>): void {
    // Each caller builds its attributes in one order: the key need not sort them (a sort per call cost 2 µs).
    let key = name;
    for (const label in attributes) key += "\u0000" + label + "=" + attributes[label];
    this.#add(key, name, seconds, () => attributes);
  }

  // The histogram of `key` gets one duration; `attributes` is asked for only by a new series.
  #add(key: string, name: string, seconds: number, attributes: () => Record<string, string | number>): void {
    let histogram = this.#histograms.get(key);
    if (!histogram && !this.#newSeries(name)) {
      key = `${name}\u0000overflow`;
      attributes = () => OVERFLOW;
      histogram = this.#histograms.get(key);
    }
    if (!histogram) {
      const counts = new Array(DURATION_BUCKETS.length + 1).fill(0);
      const labels = Object.fromEntries(Object.entries(attributes()).map(([k, v]) => [k, String(v)]));
      histogram = { name, attributes: labels, counts, sum: 0, count: 0, min: seconds, max: seconds };
      this.#histograms.set(key, histogram);
    }
    this.changes++;
    let bucket = DURATION_BUCKETS.findIndex((bound) => seconds <= bound);
    if (bucket < 0) bucket = DURATION_BUCKETS.length;
    histogram.counts[bucket]++;
    histogram.sum += seconds;
    histogram.count++;
    if (seconds < histogram.min) histogram.min = seconds;
    if (seconds > histogram.max) histogram.max = seconds;
  }

  // Whether instrument `name` may have one more series (it is then counted): METRIC_SERIES_MAX each.
  #newSeries(name: string): boolean {
    const count = this.#series.get(name) ?? 0;
    if (count >= METRIC_SERIES_MAX) return false;
    this.#series.set(name, count + 1);
    return true;
  }

  /** Adds `value` to the counter `name` (unit e.g. `{span}`) of these attributes. */
  add(name: string, unit: string, value: number, attributes: Record<string, string> = {}): void {
    let key = name;
    for (const label in attributes) key += "\u0000" + label + "=" + attributes[label];
    if (!this.#counters.has(key) && !this.#newSeries(name)) {
      key = `${name}\u0000overflow`;
      attributes = OVERFLOW;
    }
    this.changes++;
    const counter = this.#counters.get(key);
    if (counter) counter.value += value;
    else this.#counters.set(key, { name, unit, attributes, value });
  }

  /** Everything recorded as an OTLP/JSON `resourceMetrics` body (cumulative, aggregationTemporality 2). */
  otlp(resource: JsonObject[], scope: JsonObject): JsonObject {
    const start = unixNano(this.started);
    const now = unixNano(performance.timeOrigin + performance.now());
    const metrics: JsonObject[] = [];
    const byName = <T extends { name: string }>(items: Iterable<T>) => {
      const groups = new Map<string, T[]>();
      for (const item of items) groups.set(item.name, [...groups.get(item.name) ?? [], item]);
      return groups;
    };
    for (const [name, histograms] of byName(this.#histograms.values())) {
      const dataPoints = histograms.map((h) => ({
        attributes: otlpAttributes(h.attributes),
        startTimeUnixNano: start,
        timeUnixNano: now,
        count: String(h.count),
        sum: h.sum,
        bucketCounts: h.counts.map(String),
        explicitBounds: DURATION_BUCKETS,
        min: h.min,
        max: h.max,
      }));
      metrics.push({ name, unit: "s", histogram: { dataPoints, aggregationTemporality: 2 } });
    }
    for (const [name, counters] of byName(this.#counters.values())) {
      const dataPoints = counters.map((c) => ({
        attributes: otlpAttributes(c.attributes),
        startTimeUnixNano: start,
        timeUnixNano: now,
        asInt: String(c.value),
      }));
      metrics.push({ name, unit: counters[0].unit, sum: { dataPoints, aggregationTemporality: 2, isMonotonic: true } });
    }
    return { resourceMetrics: [{ resource: { attributes: resource }, scopeMetrics: [{ scope, metrics }] }] };
  }

  /**
   * Runs a request to serve and records `mcp.server.operation.duration` when it is answered: its method, tool or
   * prompt, protocol version, and error.type (the JSON-RPC code, or tool_error for an isError result).
   */
  operation(
    method: string,
    params: JsonObject,
    client: ClientView,
    run: () => unknown,
    { network = {}, served }: { network?: Record<string, string>; served?: ServedNames } = {},
  ): unknown {
    const started = performance.now();
    const named = (kind: "tool" | "prompt", name: unknown) =>
      typeof name !== "string" ? undefined : !served || served(kind, name) ? name : "_OTHER";
    const tool = method === "tools/call" ? named("tool", params.name) : undefined;
    const prompt = method === "prompts/get" ? named("prompt", params.name) : undefined;
    method = methodLabel(method);
    const meta = isObject(params._meta) ? params._meta : undefined;
    const given = meta?.[META.protocolVersion] ?? client.protocolVersion;
    const version = typeof given === "string" ? given : undefined;
    const done = (result: unknown, error?: unknown) => {
      const code = error instanceof RpcError ? String(error.code) : undefined;
      const errorType = code ??
        (error !== undefined ? "_OTHER" : isObject(result) && result.isError === true ? "tool_error" : undefined);
      // The series by what varies (a key of a few parts, not of every label: this runs per request).
      const key = `op\u0000${this.#networkKey(network)}\u0000${method}\u0000${tool}\u0000${prompt}\u0000${version}` +
        `\u0000${errorType}`;
      this.#add(key, "mcp.server.operation.duration", (performance.now() - started) / 1000, () => {
        const attributes: Record<string, string> = { ...network, "mcp.method.name": method };
        if (tool !== undefined) {
          Object.assign(attributes, { "gen_ai.tool.name": tool, "gen_ai.operation.name": "execute_tool" });
        }
        if (prompt !== undefined) attributes["gen_ai.prompt.name"] = prompt;
        if (version !== undefined) attributes["mcp.protocol.version"] = version;
        if (errorType !== undefined) attributes["error.type"] = errorType;
        if (code !== undefined) attributes["rpc.response.status_code"] = code;
        return attributes;
      });
    };
    return whenSettled(run, done);
  }

  /**
   * Everything recorded, in the Prometheus text format (0.0.4) as OpenTelemetry names it there: `.` → `_`, the
   * unit as a suffix (`_seconds`), `_bucket{le=…}` (cumulative, up to +Inf), `_sum`, `_count`, and the resource
   * as `target_info`.
   */
  prometheus(): string {
    const name = (text: string) => text.replace(/[^A-Za-z0-9_:]/g, "_");
    const escape = (text: string) => text.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
    const labels = (attributes: Record<string, string>, extra?: [string, string]) => {
      const pairs = Object.entries(attributes).map(([key, value]) => `${name(key)}="${escape(value)}"`);
      if (extra) pairs.push(`${extra[0]}="${extra[1]}"`);
      return pairs.length > 0 ? `{${pairs.join(",")}}` : "";
    };
    const lines = [
      "# HELP target_info Target metadata",
      "# TYPE target_info gauge",
      `target_info${labels(this.resource)} 1`,
    ];
    const byName = new Map<string, Histogram[]>();
    for (const histogram of this.#histograms.values()) {
      byName.set(histogram.name, [...byName.get(histogram.name) ?? [], histogram]);
    }
    for (const [metric, histograms] of [...byName].sort(([a], [b]) => a < b ? -1 : 1)) {
      const base = name(metric) + "_seconds";
      lines.push(`# HELP ${base} ${metric}`, `# TYPE ${base} histogram`);
      for (const { attributes, counts, sum, count } of histograms) {
        let cumulative = 0;
        counts.forEach((n, i) => {
          cumulative += n;
          const bound = i < DURATION_BUCKETS.length ? String(DURATION_BUCKETS[i]) : "+Inf";
          lines.push(`${base}_bucket${labels(attributes, ["le", bound])} ${cumulative}`);
        });
        lines.push(`${base}_sum${labels(attributes)} ${sum}`, `${base}_count${labels(attributes)} ${count}`);
      }
    }
    const counters = new Map<string, Counter[]>();
    for (const counter of this.#counters.values()) {
      counters.set(counter.name, [...counters.get(counter.name) ?? [], counter]);
    }
    for (const [metric, series] of [...counters].sort(([a], [b]) => a < b ? -1 : 1)) {
      const base = name(metric) + "_total"; // a unit in braces ({span}) is no suffix
      lines.push(`# HELP ${base} ${metric}`, `# TYPE ${base} counter`);
      for (const { attributes, value } of series) lines.push(`${base}${labels(attributes)} ${value}`);
    }
    return lines.join("\n") + "\n";
  }
}

// --- 7i. Telemetry: spans, W3C trace context, OTLP/HTTP JSON export ---
// OpenTelemetry traces with no dependency: a SERVER span per request received, a CLIENT span per request sent,
// named and attributed by the MCP semantic conventions, sent in batches as OTLP/HTTP JSON. The request path only
// appends to a bounded queue; exports run on timers that keep no process alive, one at a time, and a failed one is
// dropped and counted. Off (no endpoint), none of this exists: no span, no timer, nothing added to a message.

/** Telemetry settings, as the OTEL_* variables give them (telemetryFromEnv) or the library's `telemetry` option. */
export interface TelemetryOptions {
  /** A collector's base URL (OTLP/HTTP JSON): spans go to `/v1/traces` under it. */
  endpoint?: string;
  /** Where spans go, a full URL (http://localhost:4318/v1/traces); wins over `endpoint`. */
  tracesEndpoint?: string;
  /** Where metrics go, a full URL (http://localhost:4318/v1/metrics); wins over `endpoint`. */
  metricsEndpoint?: string;
  /** Sent on every export (a collector's API key): never printed or exported. */
  headers?: Record<string, string>;
  /** Per signal, instead of `headers` (OTEL_EXPORTER_OTLP_TRACES_HEADERS, _METRICS_HEADERS). */
  tracesHeaders?: Record<string, string>;
  metricsHeaders?: Record<string, string>;
  /** Metrics are exported this often, in ms (default 60000), and once more at exit. */
  exportIntervalMs?: number;
  /** One export's limit, in ms (default 10000). */
  timeoutMs?: number;
  serviceName?: string;
  /** Added to the resource. */
  resourceAttributes?: Record<string, string>;
  /** always_on, always_off, traceidratio, parentbased_* (default parentbased_always_on). */
  sampler?: string;
  /** traceidratio's ratio, 0…1. */
  samplerArg?: number;
  /** A batch leaves this long after its first span (default 5000 ms) or when full. */
  scheduleDelayMs?: number;
  maxQueueSize?: number;
  maxExportBatchSize?: number;
  /** gen_ai.tool.call.arguments and .result on tools/call spans (cut at 8 KiB). */
  captureContent?: boolean;
}

/** A span's identity and whether it is recorded: what `traceparent` says. @internal */
export interface SpanContext {
  traceId: string;
  spanId: string;
  sampled: boolean;
  traceState?: string;
  /** Passed on with the context, never an attribute. */
  baggage?: string;
}

/** A span being timed; ended once with its status. @internal */
export interface Span {
  context: SpanContext;
  name: string;
  kind: 2 | 3; // SERVER, CLIENT
  parentSpanId?: string;
  start: number; // ms since epoch, fractional
  end?: number;
  attributes: Record<string, string | number | boolean>;
  status?: { code: 2; message?: string }; // ERROR; none is UNSET
  links?: SpanContext[];
}

// An ended span as OTLP JSON text: ids are hex (checked when made), times and ints strings, enums integers.
function otlpSpanJson(span: Span): string {
  const { context, status } = span;
  const statusJson = !status
    ? "{}"
    : status.message
    ? `{"code":2,"message":${JSON.stringify(status.message)}}`
    : `{"code":2}`;
  let links = "";
  if (span.links?.length) {
    links = `,"links":[${span.links.map((link) => `{"traceId":"${link.traceId}","spanId":"${link.spanId}"}`)}]`;
  }
  return `{"traceId":"${context.traceId}","spanId":"${context.spanId}",` +
    (span.parentSpanId ? `"parentSpanId":"${span.parentSpanId}",` : "") +
    (context.traceState ? `"traceState":${JSON.stringify(context.traceState)},` : "") +
    `"name":${JSON.stringify(span.name)},"kind":${span.kind},"startTimeUnixNano":"${unixNano(span.start)}",` +
    `"endTimeUnixNano":"${unixNano(span.end!)}","attributes":${otlpAttributesJson(span.attributes)},` +
    `"status":${statusJson}${links}}`;
}

// Random ids are slices of a pool of random hex made 4 KiB at a time: one getRandomValues per span cost a third of
// a traced call, and building each id a digit pair at a time made a rope of small strings per id.
const HEX_BYTES = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));
let randomPool = "";
let randomAt = 0;

/** `bytes` random bytes as lowercase hex, never all zeros (an invalid trace or span id). */
function randomHex(bytes: number): string {
  if (randomAt + bytes * 2 > randomPool.length) {
    const fresh = crypto.getRandomValues(new Uint8Array(4096));
    randomPool = Array.from(fresh, (byte) => HEX_BYTES[byte]).join("");
    randomAt = 0;
  }
  const hex = randomPool.slice(randomAt, randomAt += bytes * 2);
  return /^0+$/.test(hex) ? randomHex(bytes) : hex;
}

// Where the HTTP front leaves a request's `traceparent` header and its peer's address on its params, out of JSON's
// and plugins' sight.
const TRACEPARENT_HEADER = Symbol("traceparent header");
const CLIENT_PEER = Symbol("client peer");

/** The context a `traceparent` names (see traceContextOf for what is valid). @internal */
export function parseTraceparent(traceparent: string | undefined, tracestate?: string): SpanContext | undefined {
  const valid = traceContextOf({ traceparent, tracestate });
  if (!valid) return undefined;
  const [, traceId, spanId, flags] = valid.traceparent.split("-");
  return { traceId, spanId, sampled: (parseInt(flags, 16) & 1) === 1, traceState: valid.tracestate };
}

/** The trace_id, span_id and trace_flags fields of a log line in a request with this context. */
function traceFields(traceparent: unknown): Record<string, string> {
  const parsed = typeof traceparent === "string" ? parseTraceparent(traceparent) : undefined;
  if (!parsed) return {};
  return { trace_id: parsed.traceId, span_id: parsed.spanId, trace_flags: parsed.sampled ? "01" : "00" };
}

/** A context as a `traceparent` value (version 00). @internal */
export function formatTraceparent(context: SpanContext): string {
  return `00-${context.traceId}-${context.spanId}-${context.sampled ? "01" : "00"}`;
}

/**
 * One signal's exports to one OTLP/HTTP endpoint: one request in flight at most, each limited by the timeout, a
 * failure said once per run of failures (and one line when it works again).
 */
class OtlpExporter {
  inFlight: Promise<boolean> | undefined;
  #failing = false;
  readonly url: string;
  #headers: Record<string, string>;
  #timeoutMs: number;
  #warn: (line: string) => void;
  #giveUp: () => AbortSignal;
  #what: string;

  constructor(
    url: string,
    settings: { headers?: Record<string, string>; timeoutMs?: number },
    warn: (line: string) => void,
    giveUp: () => AbortSignal,
    what: string,
  ) {
    this.url = url;
    this.#headers = { ...settings.headers, "content-type": "application/json" };
    this.#timeoutMs = settings.timeoutMs ?? 10_000;
    this.#warn = warn;
    this.#giveUp = giveUp;
    this.#what = what;
  }

  /** Sends one body; resolves whether the collector took it (a 2xx answer in time). Call when none is in flight. */
  send(body: string): Promise<boolean> {
    const signal = AbortSignal.any([AbortSignal.timeout(this.#timeoutMs), this.#giveUp()]);
    const exported = fetchSameOrigin(this.url, { method: "POST", headers: this.#headers, body, signal }).then(
      async (response) => {
        await response.body?.cancel();
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        if (this.#failing) this.#warn(`telemetry: export to ${safeUrl(this.url)} works again`);
        this.#failing = false;
        return true;
      },
    ).catch((error) => {
      if (!this.#failing) {
        // fetch's own message says little ("fetch failed"); its cause names the refusal.
        // A runtime's message may quote the URL, credentials and query included: never printed.
        const why = error?.name === "TimeoutError" || error?.name === "AbortError"
          ? "no answer in time"
          : redact(errorMessage(error?.cause ?? error));
        this.#warn(
          `telemetry: export to ${safeUrl(this.url)} failed (${why}); ${this.#what} are dropped until it answers`,
        );
      }
      this.#failing = true;
      return false;
    }).finally(() => this.inFlight = undefined);
    return this.inFlight = exported;
  }
}

/**
 * One process's telemetry: spans made and sampled, queued, exported in batches; metrics exported on an interval.
 * Made only when an endpoint is set.
 * @internal
 */
export class Telemetry {
  readonly options: TelemetryOptions;
  /** Whether spans are made (a traces endpoint is set). */
  readonly tracing: boolean;
  /** Where durations and the exporter's counters are kept: with a metrics endpoint, or given by --metrics. */
  metrics: Metrics | undefined;
  #resource: JsonObject[];
  #scope: JsonObject = { name: "mcp.ts", version: VERSION };
  #queue: Span[] = []; // ended spans, waiting for their batch
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerNow = false; // the timer is for a full batch (delay 0)
  #spans: OtlpExporter | undefined;
  #metricsOut: OtlpExporter | undefined;
  #giveUp = new AbortController(); // an export still waiting when a flush's time is up is abandoned
  #flushing: Promise<void> | undefined;
  #flushDeadline = 0;
  #exportedChanges = -1; // the metrics' `changes` when they were last sent

  constructor(options: TelemetryOptions, resource: Record<string, string>, warn: (line: string) => void) {
    this.options = options;
    const attributes: Record<string, string> = {
      "service.name": options.serviceName ?? "mcp.ts",
      "service.instance.id": crypto.randomUUID(),
      "telemetry.sdk.name": "mcp.ts",
      "telemetry.sdk.language": "js",
      "telemetry.sdk.version": VERSION,
      ...resource,
      ...options.resourceAttributes,
    };
    this.#resource = otlpAttributes(attributes);
    const { tracesEndpoint, metricsEndpoint } = options;
    this.tracing = tracesEndpoint !== undefined;
    if (tracesEndpoint !== undefined) {
      const settings = { headers: options.tracesHeaders ?? options.headers, timeoutMs: options.timeoutMs };
      this.#spans = new OtlpExporter(tracesEndpoint, settings, warn, () => this.#giveUp.signal, "spans");
    }
    if (metricsEndpoint !== undefined) {
      this.metrics = new Metrics(attributes);
      const settings = { headers: options.metricsHeaders ?? options.headers, timeoutMs: options.timeoutMs };
      this.#metricsOut = new OtlpExporter(metricsEndpoint, settings, warn, () => this.#giveUp.signal, "metrics");
      const timer = setInterval(() => void this.#exportMetrics(), options.exportIntervalMs ?? 60_000);
      (timer as { unref?: () => void }).unref?.();
    }
  }

  /** A span starting now: a child of `parent` (the parent-based sampler follows its flag), else a new trace's root. */
  start(
    name: string,
    kind: 2 | 3,
    parent: SpanContext | undefined,
    attributes: Record<string, string | number | boolean>,
  ): Span {
    const traceId = parent?.traceId ?? randomHex(16);
    const context: SpanContext = { traceId, spanId: randomHex(8), sampled: this.#sample(traceId, parent) };
    if (parent?.traceState) context.traceState = parent.traceState;
    return {
      context,
      name,
      kind,
      parentSpanId: parent?.spanId,
      start: performance.timeOrigin + performance.now(),
      attributes,
    };
  }

  #sample(traceId: string, parent: SpanContext | undefined): boolean {
    const sampler = this.options.sampler ?? "parentbased_always_on";
    if (parent && sampler.startsWith("parentbased_")) return parent.sampled;
    const root = sampler.replace(/^parentbased_/, "");
    if (root === "always_off") return false;
    if (root !== "traceidratio") return true;
    const ratio = Math.min(1, Math.max(0, this.options.samplerArg ?? 1));
    return parseInt(traceId.slice(-14), 16) < ratio * 2 ** 56;
  }

  /** Ends a span: `error` is its error.type and an ERROR status, with `message` (none for tool_error: a tool's text). */
  end(span: Span, error?: { type: string; message?: string; code?: number }): void {
    if (!span.context.sampled) return;
    if (this.#queue.length >= (this.options.maxQueueSize ?? 2048)) {
      this.metrics?.add("otel.sdk.processor.span.processed", "{span}", 1, { "error.type": "queue_full" });
      return; // dropped before any work: a hanging collector must not make each call dearer
    }
    if (error) {
      span.attributes["error.type"] = error.type;
      if (error.code !== undefined) span.attributes["rpc.response.status_code"] = String(error.code);
      span.status = error.type === "tool_error" ? { code: 2 } : { code: 2, message: error.message };
    }
    span.end = performance.timeOrigin + performance.now();
    this.metrics?.add("otel.sdk.processor.span.processed", "{span}", 1);
    this.#queue.push(span); // encoded when its batch leaves: what waits is the span, not a string of its pieces
    if (this.#queue.length >= (this.options.maxExportBatchSize ?? 512)) this.#exportSoon(0);
    else this.#exportSoon(this.options.scheduleDelayMs ?? 5000);
  }

  // One timer at most, and none while an export is out (its end schedules the next): a timer per span was most
  // of what tracing cost a call when the queue was full.
  #exportSoon(delay: number): void {
    if (this.#spans?.inFlight) return;
    if (this.#timer !== undefined && (delay > 0 || this.#timerNow)) return;
    clearTimeout(this.#timer);
    this.#timerNow = delay === 0;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#exportSpans();
    }, delay);
    (this.#timer as { unref?: () => void }).unref?.();
  }

  // One batch out, one at a time; a failed one is dropped and counted (the next batch is the retry).
  #exportSpans(): Promise<unknown> {
    const exporter = this.#spans;
    if (!exporter || exporter.inFlight || this.#queue.length === 0) return exporter?.inFlight ?? Promise.resolve();
    const batch = this.#queue.splice(0, this.options.maxExportBatchSize ?? 512);
    const body = `{"resourceSpans":[{"resource":{"attributes":${JSON.stringify(this.#resource)}},` +
      `"scopeSpans":[{"scope":${JSON.stringify(this.#scope)},"spans":[${batch.map(otlpSpanJson).join(",")}]}]}]}`;
    return exporter.send(body).then((ok) => {
      const attributes: Record<string, string> = ok ? {} : { "error.type": "export_failed" };
      this.metrics?.add("otel.sdk.exporter.span.exported", "{span}", batch.length, attributes);
      const full = this.#queue.length >= (this.options.maxExportBatchSize ?? 512);
      if (this.#queue.length > 0) this.#exportSoon(full ? 0 : this.options.scheduleDelayMs ?? 5000);
    });
  }

  // Every metric, cumulative (a lost export loses nothing); skipped while the last one is still out.
  #exportMetrics(): Promise<unknown> {
    const exporter = this.#metricsOut;
    if (!exporter || !this.metrics) return Promise.resolve();
    if (exporter.inFlight) return exporter.inFlight;
    this.#exportedChanges = this.metrics.changes;
    return exporter.send(JSON.stringify(this.metrics.otlp(this.#resource, this.#scope)));
  }

  /** A client's session ended (its close): its duration is recorded. */
  closed(opened: number, url: string | undefined): void {
    const network = url === undefined ? { "network.transport": "pipe" } : networkOf(url);
    this.metrics?.record("mcp.client.session.duration", (performance.now() - opened) / 1000, network);
  }

  /**
   * What is pending goes out, spans then metrics once more, waiting `ms` at most in all (at exit, or a client's
   * close); a flush asked for while one runs goes next, within the first one's time.
   */
  flush(ms = 2_000): Promise<void> {
    const deadline = this.#flushing ? this.#flushDeadline : Date.now() + ms;
    this.#flushDeadline = deadline;
    const next = (this.#flushing ?? Promise.resolve()).then(() => this.#flush(Math.max(0, deadline - Date.now())));
    const flushing: Promise<void> = next.finally(() => {
      if (this.#flushing === flushing) this.#flushing = undefined;
    });
    return this.#flushing = flushing;
  }

  async #flush(ms: number): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const deadline = Date.now() + ms;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const giveUp = new Promise<void>((resolve) => timer = setTimeout(resolve, ms));
    try {
      while ((this.#queue.length > 0 || this.#spans?.inFlight) && Date.now() < deadline) {
        await Promise.race([this.#spans?.inFlight ?? this.#exportSpans(), giveUp]);
      }
      // Once per change: a client's close flushes, then the command's exit (nothing new since: nothing sent twice).
      if (this.#metricsOut && this.metrics?.changes !== this.#exportedChanges && Date.now() < deadline) {
        await Promise.race([
          this.#metricsOut.inFlight?.then(() => this.#exportMetrics()) ?? this.#exportMetrics(),
          giveUp,
        ]);
      }
    } finally {
      clearTimeout(timer);
      if (this.#spans?.inFlight || this.#metricsOut?.inFlight) {
        this.#giveUp.abort(); // a hanging collector holds no exit
        this.#giveUp = new AbortController();
      }
    }
  }
}

/**
 * The telemetry settings the OTEL_* variables give (read once, at start), or undefined when they set no endpoint;
 * `warn` gets one line for a value that does not parse (its default is used) and for a protocol mcp.ts does not
 * speak.
 * @internal
 */
export function telemetryFromEnv(
  env: Record<string, string | undefined>,
  warn: (line: string) => void,
  serviceName?: string,
): TelemetryOptions | undefined {
  if (env.OTEL_SDK_DISABLED?.toLowerCase() === "true") return undefined;
  const number = (name: string, fallback: number) => {
    const text = env[name];
    if (text === undefined || text === "") return fallback;
    if (/^\d+$/.test(text)) return Number(text);
    warn(`telemetry: ${name}=${text} is not an integer; using ${fallback}`);
    return fallback;
  };
  const pairs = (text: string | undefined) => {
    const found: Record<string, string> = {};
    for (const part of (text ?? "").split(",")) {
      const at = part.indexOf("=");
      if (at <= 0) continue;
      try {
        found[decodeURIComponent(part.slice(0, at).trim())] = decodeURIComponent(part.slice(at + 1).trim());
      } catch {
        warn("telemetry: a pair of an OTEL_* list is not percent-encoded right; it is left out");
      }
    }
    return found;
  };
  // One signal's endpoint (its own variable as it is, else the base URL and its path), if it is exported.
  const signal = (name: "TRACES" | "METRICS", path: string) => {
    const exporter = env[`OTEL_${name}_EXPORTER`];
    if (exporter === "none") return undefined;
    let endpoint = env[`OTEL_EXPORTER_OTLP_${name}_ENDPOINT`];
    const base = env.OTEL_EXPORTER_OTLP_ENDPOINT;
    if (!endpoint && base) endpoint = trimEnd(base, "/") + path;
    if (!endpoint && exporter === "otlp") endpoint = "http://localhost:4318" + path;
    if (!endpoint) return undefined;
    const variable = env[`OTEL_EXPORTER_OTLP_${name}_PROTOCOL`] !== undefined
      ? `OTEL_EXPORTER_OTLP_${name}_PROTOCOL`
      : "OTEL_EXPORTER_OTLP_PROTOCOL";
    const protocol = env[variable];
    if (protocol === "grpc") {
      warn(`telemetry: ${variable}=grpc is not spoken here (http/json is): ${name.toLowerCase()} are off`);
      return undefined;
    }
    if (protocol === "http/protobuf") warn(`telemetry: ${variable}=http/protobuf: sending http/json`);
    const headers = env[`OTEL_EXPORTER_OTLP_${name}_HEADERS`];
    return { endpoint, headers: headers === undefined ? undefined : pairs(headers) };
  };
  const traces = signal("TRACES", "/v1/traces");
  const metrics = signal("METRICS", "/v1/metrics");
  if (!traces && !metrics) return undefined;
  const samplers = [
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
  ];
  let sampler = env.OTEL_TRACES_SAMPLER;
  if (sampler !== undefined && !samplers.includes(sampler)) {
    warn(`telemetry: OTEL_TRACES_SAMPLER=${sampler} is not a sampler mcp.ts knows; using parentbased_always_on`);
    sampler = undefined;
  }
  const ratio = env.OTEL_TRACES_SAMPLER_ARG === undefined ? undefined : Number(env.OTEL_TRACES_SAMPLER_ARG);
  if (ratio !== undefined && !(ratio >= 0 && ratio <= 1)) {
    warn(`telemetry: OTEL_TRACES_SAMPLER_ARG=${env.OTEL_TRACES_SAMPLER_ARG} is not a ratio from 0 to 1; using 1`);
  }
  const timeout = (["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"] as const)
    .find((name) => env[name] !== undefined) ?? "OTEL_EXPORTER_OTLP_TIMEOUT";
  return {
    tracesEndpoint: traces?.endpoint,
    metricsEndpoint: metrics?.endpoint,
    headers: pairs(env.OTEL_EXPORTER_OTLP_HEADERS),
    tracesHeaders: traces?.headers && { ...pairs(env.OTEL_EXPORTER_OTLP_HEADERS), ...traces.headers },
    metricsHeaders: metrics?.headers && { ...pairs(env.OTEL_EXPORTER_OTLP_HEADERS), ...metrics.headers },
    timeoutMs: number(timeout, 10_000),
    serviceName: env.OTEL_SERVICE_NAME || serviceName,
    resourceAttributes: pairs(env.OTEL_RESOURCE_ATTRIBUTES),
    sampler,
    samplerArg: ratio !== undefined && ratio >= 0 && ratio <= 1 ? ratio : undefined,
    scheduleDelayMs: number("OTEL_BSP_SCHEDULE_DELAY", 5000),
    maxQueueSize: number("OTEL_BSP_MAX_QUEUE_SIZE", 2048),
    maxExportBatchSize: number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
    exportIntervalMs: number("OTEL_METRIC_EXPORT_INTERVAL", 60_000),
    captureContent: env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT?.toLowerCase() === "true",
  };
}

// --- 7j. Observing requests: SERVER and CLIENT spans, durations, access lines ---
// What a server, a client, a gateway and a proxy do per request when telemetry, --metrics or JSON logs are on;
// decided once per connection, so with all of them off nothing here runs.

/**
 * How a server observes each request it serves, when asked to: a SERVER span (its parent the request's
 * `_meta.traceparent`; the plugin's ctx then sees the span's own context) and the operation's duration. Undefined
 * when neither is on.
 */
function observeRequests(
  options: ServerOptions,
  client: () => ClientView,
  served?: ServedNames,
):
  | ((method: string, params: JsonObject, id: RequestId, run: () => unknown) => unknown) & { ended(): void }
  | undefined {
  const { networkAttributes = { "network.transport": "pipe" } } = options;
  const tracer = options.tracer?.tracing ? options.tracer : undefined;
  const measure = options.measure ?? options.tracer?.metrics;
  const accessLog = options.accessLog;
  if (!measure && !tracer && !accessLog) return undefined;
  let opened: number | undefined; // a legacy session's initialize: mcp.server.session.duration at its end
  const ended = () => {
    if (opened === undefined || !measure) return;
    const seconds = (performance.now() - opened) / 1000;
    measure.record("mcp.server.session.duration", seconds, {
      ...networkAttributes,
      "mcp.protocol.version": client().protocolVersion,
    });
    opened = undefined;
  };
  return Object.assign((method: string, params: JsonObject, id: RequestId, run: () => unknown) => {
    if (method === "initialize") opened ??= performance.now();
    const meta = isObject(params._meta) ? params._meta : undefined;
    const version = meta?.[META.protocolVersion] ?? client().protocolVersion;
    let span: Span | undefined;
    if (tracer) {
      const { name, attributes }: { name: string; attributes: Record<string, string | number> } = requestSpanOf(
        method,
        params,
      );
      Object.assign(attributes, networkAttributes, { "jsonrpc.request.id": String(id) });
      if (typeof version === "string") attributes["mcp.protocol.version"] = version;
      const session = client().sessionId;
      if (session !== undefined) attributes["mcp.session.id"] = session;
      const peer = (params as Record<symbol, { address: string; port: number } | undefined>)[CLIENT_PEER];
      if (peer) Object.assign(attributes, { "client.address": peer.address, "client.port": peer.port });
      if (tracer.options.captureContent && method === "tools/call") {
        attributes["gen_ai.tool.call.arguments"] = JSON.stringify(params.arguments ?? {}).slice(0, 8192);
      }
      // _meta's context is the parent; else the HTTP header's; both, and different: the header's is a link.
      const inMeta = parseTraceparent(meta?.traceparent as string, meta?.tracestate as string);
      const header = parseTraceparent((params as Record<symbol, string>)[TRACEPARENT_HEADER]);
      span = tracer.start(name, 2, inMeta ?? header, attributes);
      if (inMeta && header && (header.traceId !== inMeta.traceId || header.spanId !== inMeta.spanId)) {
        span.links = [header];
      }
      // Plugins (ctx.traceparent) and what the server sends on (a gateway's upstream call) go on in this span
      // (the parsed request is ours to change).
      if (meta) meta.traceparent = formatTraceparent(span.context);
      else params._meta = { traceparent: formatTraceparent(span.context) };
    }
    const started = accessLog && performance.now();
    const traceparent = params._meta && (params._meta as JsonObject).traceparent; // the span's, or the caller's
    const end = (result: unknown, error?: unknown) => {
      if (accessLog) {
        const { name, attributes } = requestSpanOf(method, params);
        accessLog(name, {
          "mcp.method.name": method,
          "gen_ai.tool.name": attributes["gen_ai.tool.name"],
          "jsonrpc.request.id": String(id),
          duration_ms: Math.round((performance.now() - started!) * 1000) / 1000,
          "error.type": spanError(result, error)?.type,
          ...traceFields(traceparent),
        });
      }
      if (!span) return;
      if (tracer!.options.captureContent && isObject(result) && method === "tools/call") {
        span.attributes["gen_ai.tool.call.result"] = JSON.stringify(result).slice(0, 8192);
      }
      tracer!.end(span, spanError(result, error));
    };
    const measured = measure
      ? () => measure.operation(method, params, client(), run, { network: networkAttributes, served })
      : run;
    return whenSettled(measured, end);
  }, { ended });
}

/**
 * How a transparent proxy observes the requests it forwards, when asked to: each request a SERVER span (its parent
 * the client's `_meta.traceparent`) and under it a CLIENT span whose context replaces `_meta.traceparent` upstream,
 * both ended by the answer; the server and client operation durations; an access line. Undefined when nothing is on.
 * @internal
 */
export function observeForwarded(options: {
  tracer?: Telemetry;
  measure?: Metrics;
  accessLog?: (msg: string, fields: Record<string, unknown>) => void;
  /** The client's side (network.*), and the upstream's (network.*, server.address, server.port). */
  downstream: Record<string, string>;
  upstream: Record<string, string | number>;
  /** The negotiated legacy version, once an initialize was answered. */
  version?: () => string | undefined;
  /** The tools and prompts the upstream listed: a metric names others _OTHER. */
  served?: ServedNames;
}): {
  /**
   * A request on its way upstream (with the HTTP traceparent header it came with, if any): the message to send
   * instead (its traceparent replaced), or undefined.
   */
  request(key: string, message: JsonObject, header?: string): JsonObject | undefined;
  /** Its answer (a response), or why there is none. */
  answered(key: string, response?: JsonObject, failure?: unknown): void;
} | undefined {
  const tracer = options.tracer?.tracing ? options.tracer : undefined;
  const measure = options.measure ?? options.tracer?.metrics;
  const { accessLog, downstream, upstream } = options;
  if (!tracer && !measure && !accessLog) return undefined;
  interface Forwarded {
    id: string;
    name: string;
    attributes: Record<string, string>;
    started: number;
    traceparent?: unknown;
    server?: Span;
    client?: Span;
  }
  const open = new Map<string, Forwarded>();
  return {
    request(key, message, header) {
      const params = isObject(message.params) ? message.params : {};
      const meta = isObject(params._meta) ? params._meta : undefined;
      const { name, attributes } = requestSpanOf(String(message.method), params);
      const version = meta?.[META.protocolVersion] ?? options.version?.();
      if (typeof version === "string") attributes["mcp.protocol.version"] = version;
      const id = String(message.id);
      const entry: Forwarded = { id, name, attributes, started: performance.now(), traceparent: meta?.traceparent };
      open.set(key, entry);
      if (!tracer) return undefined;
      const parent = parseTraceparent(meta?.traceparent as string, meta?.tracestate as string) ??
        parseTraceparent(header);
      const served = { ...attributes, ...downstream, "jsonrpc.request.id": id };
      entry.server = tracer.start(name, 2, parent, served);
      entry.client = tracer.start(name, 3, entry.server.context, { ...attributes, ...upstream });
      entry.traceparent = formatTraceparent(entry.server.context);
      const trace = { traceparent: formatTraceparent(entry.client.context) };
      return { ...message, params: { ...params, _meta: { ...meta, ...trace } } };
    },
    answered(key, response, failure) {
      const entry = open.get(key);
      if (!entry) return;
      open.delete(key);
      const rpc = isObject(response?.error) ? response.error : undefined;
      const error = failure !== undefined
        ? spanError(undefined, failure)
        : rpc && typeof rpc.code === "number"
        ? { type: String(rpc.code), message: String(rpc.message ?? ""), code: rpc.code }
        : spanError(response?.result);
      if (entry.client) tracer!.end(entry.client, error);
      if (entry.server) tracer!.end(entry.server, error);
      const seconds = (performance.now() - entry.started) / 1000;
      if (measure) {
        const { "mcp.resource.uri": _, ...labels } = entry.attributes; // a metric never names a resource
        labels["mcp.method.name"] = methodLabel(labels["mcp.method.name"]);
        for (const [kind, key] of [["tool", "gen_ai.tool.name"], ["prompt", "gen_ai.prompt.name"]] as const) {
          if (labels[key] !== undefined && !options.served?.(kind, labels[key])) labels[key] = "_OTHER";
        }
        const outcome: Record<string, string> = {};
        if (error) outcome["error.type"] = error.type;
        if (error?.code !== undefined) outcome["rpc.response.status_code"] = String(error.code);
        measure.record("mcp.server.operation.duration", seconds, { ...downstream, ...labels, ...outcome });
        measure.record("mcp.client.operation.duration", seconds, { ...labels, ...upstream, ...outcome });
      }
      accessLog?.(entry.name, {
        "mcp.method.name": entry.attributes["mcp.method.name"],
        "gen_ai.tool.name": entry.attributes["gen_ai.tool.name"],
        "jsonrpc.request.id": entry.id,
        duration_ms: Math.round(seconds * 1e6) / 1000,
        "error.type": error?.type,
        ...traceFields(entry.traceparent),
      });
    },
  };
}

/** What ended a request, for its span: the JSON-RPC code, tool_error, timeout, cancelled, an HTTP status, _OTHER. */
function spanError(result: unknown, error?: unknown): { type: string; message?: string; code?: number } | undefined {
  if (error === undefined) return isObject(result) && result.isError === true ? { type: "tool_error" } : undefined;
  const code = (error as { code?: unknown }).code;
  if (error instanceof TimeoutError) return { type: "timeout", message: errorMessage(error) };
  if (error instanceof InterruptedError) return { type: "cancelled", message: errorMessage(error) };
  if (typeof code === "number" && Number.isInteger(code)) {
    return { type: String(code), message: errorMessage(error), code };
  }
  const status = (error as { status?: unknown }).status;
  if (typeof status === "number") return { type: String(status), message: errorMessage(error) };
  return { type: "_OTHER", message: errorMessage(error) };
}

/** `params` with a trace context in its `_meta`, replacing one there (tracestate and baggage when given). */
function withTraceContext(
  params: JsonObject,
  context: { traceparent: string; tracestate?: string; baggage?: string },
): JsonObject {
  const trace: JsonObject = { traceparent: context.traceparent };
  if (context.tracestate !== undefined) trace.tracestate = context.tracestate;
  if (context.baggage !== undefined) trace.baggage = context.baggage;
  return { ...params, _meta: { ...(isObject(params._meta) ? params._meta : {}), ...trace } };
}

/**
 * A request a client sends, in a CLIENT span: its parent the caller's context (else the connection's `traceRoot`,
 * e.g. a CI job's TRACEPARENT), its `_meta.traceparent` the span's own (tracestate and baggage passed on); over
 * HTTP (`url`) the span names the server's host and port, never its path.
 */
function traceClientRequest<T>(
  { method, params, caller, connection, url, version }: {
    method: string;
    params: JsonObject;
    caller: { traceparent?: string; tracestate?: string; baggage?: string };
    connection: {
      tracer?: Telemetry;
      traceRoot?: SpanContext;
      traceCommand?: { first?: SpanContext };
      traceAttributes?: Record<string, string>;
    };
    /** The server's URL (HTTP), and the negotiated version (none yet for initialize). */
    url?: string;
    version?: string;
  },
  run: (params: JsonObject, onSent: (id: RequestId) => void) => Promise<T>,
): Promise<T> {
  const { tracer, traceRoot: root } = connection;
  const meta = isObject(params._meta) ? params._meta : {};
  const parent = parseTraceparent(caller.traceparent, caller.tracestate) ??
    parseTraceparent(meta.traceparent as string, meta.tracestate as string) ?? root ?? connection.traceCommand?.first;
  const { name, attributes } = requestSpanOf(method, params);
  const at: Record<string, string | number> = { ...attributes, ...connection.traceAttributes };
  Object.assign(at, url === undefined ? { "network.transport": "pipe" } : networkOf(url));
  if (version) at["mcp.protocol.version"] = version; // the negotiated one (none yet for initialize)
  const started = performance.now();
  const measure = (error: { type: string; code?: number } | undefined) => {
    if (!tracer!.metrics) return;
    const { "mcp.resource.uri": _, "jsonrpc.request.id": _id, ...labels } = at; // never a resource or a request
    if (error) labels["error.type"] = error.type;
    if (error?.code !== undefined) labels["rpc.response.status_code"] = String(error.code);
    tracer!.metrics.record("mcp.client.operation.duration", (performance.now() - started) / 1000, labels);
  };
  let span: Span | undefined;
  let sent = params;
  if (tracer!.tracing) {
    span = tracer!.start(name, 3, parent, at);
    // A command is one trace: its first span (the probe, or initialize) is the parent of every later one.
    if (connection.traceCommand && !connection.traceCommand.first) connection.traceCommand.first = span.context;
    const baggage = caller.baggage ?? meta.baggage ?? (parent === root ? root?.baggage : undefined);
    sent = withTraceContext(params, {
      traceparent: formatTraceparent(span.context),
      tracestate: span.context.traceState,
      baggage: typeof baggage === "string" ? baggage : undefined,
    });
  } else if (caller.traceparent !== undefined) {
    sent = withTraceContext(params, { ...caller, traceparent: caller.traceparent }); // as is: no span of ours
  }
  // The id is the peer's, known once the request is sent (a retry's: the last one's).
  const onSent = (id: RequestId) => void (span && (span.attributes["jsonrpc.request.id"] = String(id)));
  return run(sent, onSent).then((result) => {
    const error = spanError(result);
    if (span) tracer!.end(span, error);
    measure(error);
    return result;
  }, (failure) => {
    const error = spanError(undefined, failure);
    if (span) tracer!.end(span, error);
    measure(error);
    throw failure;
  });
}

/** What a CLIENT span says of an HTTP server it calls: its host and port, never its path. */
function networkOf(url: string): Record<string, string | number> {
  const { protocol, hostname, port } = new URL(url);
  return {
    "network.transport": "tcp",
    "network.protocol.name": "http",
    "server.address": hostname,
    "server.port": Number(port || (protocol === "https:" ? 443 : 80)),
  };
}

/** A span's name and attributes for a request, per the MCP semantic conventions. @internal */
export function requestSpanOf(
  method: string,
  params: JsonObject,
): { name: string; attributes: Record<string, string> } {
  const attributes: Record<string, string> = { "mcp.method.name": method };
  let target: string | undefined;
  if (method === "tools/call" && typeof params.name === "string") {
    target = attributes["gen_ai.tool.name"] = params.name;
    attributes["gen_ai.operation.name"] = "execute_tool";
  } else if (method === "prompts/get" && typeof params.name === "string") {
    target = attributes["gen_ai.prompt.name"] = params.name;
  } else if (/^resources\/(read|subscribe|unsubscribe)$/.test(method) && typeof params.uri === "string") {
    attributes["mcp.resource.uri"] = params.uri;
  }
  return { name: target === undefined ? method : `${method} ${target}`, attributes };
}

// === 8. Runtime ==============================================================
// Everything above is the protocol alone: it touches no process, no Deno or Bun API and no node:
// built-in, so it runs wherever a fetch handler or a pair of streams does.
// The few things Deno, Bun and Node do differently, each behind one function:
// process facts, files and paths, stdio, spawning. Each native path has a
// measured reason (start-up time or memory, named beside it); Node, and
// anything not named here, uses the node: built-ins.

// --- 8a. The runtimes' own APIs, the process, files and paths ---

// Deno's own API, as far as mcp.ts uses it.
interface DenoApi {
  args: string[];
  env: { toObject(): Record<string, string>; get(name: string): string | undefined };
  permissions: { querySync(descriptor: { name: "env"; variable: string }): { state: string } };
  build: { os: string };
  exitCode: number;
  exit(code?: number): never;
  addSignalListener(signal: string, handler: () => void): void;
  removeSignalListener(signal: string, handler: () => void): void;
  cwd(): string;
  readDir(path: string): AsyncIterable<{ name: string; isFile: boolean; isSymlink: boolean }>;
  stat(path: string): Promise<{ mode: number | null; isDirectory: boolean }>;
  readTextFile(path: string): Promise<string>;
  mkdir(path: string, options: { recursive: boolean; mode: number }): Promise<void>;
  lstat(path: string): Promise<{ isDirectory: boolean; uid: number | null; mode: number | null }>;
  uid(): number | null;
  connect(options: { transport: "unix"; path: string }): Promise<DenoConn>;
  listen(options: { transport: "unix"; path: string }): AsyncIterable<DenoConn> & { close(): void };
  consoleSize(): { columns: number; rows: number };
  serve(
    options: { hostname: string; port: number; onListen(): void },
    handler: (request: Request) => Promise<Response>,
  ): DenoHttpServer;
  version: { deno: string };
  stdin: { read(buffer: Uint8Array): Promise<number | null>; close(): void; isTerminal(): boolean };
  stdout: DenoStdioFile;
  stderr: DenoStdioFile;
  Command: new (command: string, options: object) => { spawn(): DenoChild };
}

interface BunSocket {
  write(bytes: Uint8Array): number;
  end(): void;
  terminate(): void;
  /** Stops reading from the socket (the peer sees backpressure); data already read is still delivered. */
  pause(): void;
  resume(): void;
}

interface BunSocketHandlers {
  open(socket: BunSocket): void;
  data(socket: BunSocket, chunk: Uint8Array): void;
  drain(socket: BunSocket): void;
  end(socket: BunSocket): void;
  close(socket: BunSocket): void;
  error(socket: BunSocket, error: Error): void;
}

interface DenoConn {
  read(buffer: Uint8Array): Promise<number | null>;
  write(bytes: Uint8Array): Promise<number>;
  closeWrite(): Promise<void>;
  close(): void;
}

interface DenoStdioFile {
  write(bytes: Uint8Array): Promise<number>;
  writeSync(bytes: Uint8Array): number;
  isTerminal(): boolean;
}

// Bun's own API, as far as mcp.ts uses it.
interface BunApi {
  version: string;
  connect(options: { unix: string; socket: BunSocketHandlers }): Promise<BunSocket>;
  listen(options: { unix: string; socket: BunSocketHandlers }): { stop(closeActive?: boolean): void };
  stdin: { stream(): ReadableStream<Uint8Array> };
  stdout: { writer(): { write(chunk: string | Uint8Array): unknown; flush(): unknown } };
  stderr: { writer(): { write(chunk: string | Uint8Array): unknown; flush(): unknown } };
  spawn(argv: string[], options: object): BunSubprocess;
  serve(options: {
    hostname: string;
    port: number;
    fetch(request: Request): Promise<Response>;
    idleTimeout: number;
    reusePort: boolean;
    development: boolean;
    error(error: Error): Response;
  }): BunHttpServer;
}

/** Deno, when running on Deno. */
const deno = (globalThis as { Deno?: DenoApi }).Deno;
/** Bun, when running on Bun. */
const bun = (globalThis as { Bun?: BunApi }).Bun;

// Node's process object, reached only where a Node API is needed: on Deno it is
// built on first use and costs ~29 ms of start-up (as much again as Deno itself).
// Bun and Node have it as a global; so does Deno 2.
function proc(): NodeJS.Process {
  return (globalThis as unknown as { process: NodeJS.Process }).process;
}

/**
 * A timer that guards a wait (a request's --timeout and --max-time, a daemon's hello): `fire` after `ms` unless the
 * returned function cancels it first. On Deno the global setTimeout's first use costs ~6 ms (Deno 2.9.6, measured:
 * 6.0-7.3 ms against 0.3 ms, a tenth of a `call @NAME`); AbortSignal.timeout rides Deno's own timers, and keeps the
 * process alive while it is listened to, as a timer does (a cancelled one, no longer).
 */
function guardTimer(ms: number, fire: () => void): () => void {
  if (deno) {
    const signal = AbortSignal.timeout(ms);
    signal.addEventListener("abort", fire, { once: true });
    return () => signal.removeEventListener("abort", fire);
  }
  const timer = setTimeout(fire, ms);
  return () => clearTimeout(timer);
}

/** What every command needs from the process, from Deno's own API on Deno and from `process` elsewhere. */
const sys = {
  args: (): string[] => deno ? deno.args : proc().argv.slice(2),
  pid: (): number => proc().pid,
  env: (): Record<string, string | undefined> => deno ? deno.env.toObject() : proc().env,
  // One variable, read only when allowed: on Deno without --allow-env it is unset (no prompt, no error: `--version`
  // and `help` need no permission).
  getEnv: (name: string): string | undefined =>
    deno
      ? (deno.permissions.querySync({ name: "env", variable: name }).state === "granted"
        ? deno.env.get(name)
        : undefined)
      : proc().env[name],
  platform: (): string => deno ? (deno.build.os === "windows" ? "win32" : deno.build.os) : proc().platform,
  cwd: (): string => deno ? deno.cwd() : proc().cwd(),
  setExitCode(code: number): void {
    if (deno) deno.exitCode = code;
    else proc().exitCode = code;
  },
  exit(code?: number): void {
    if (deno) deno.exit(code);
    else proc().exit(code);
  },
  /**
   * False when fd is surely not a terminal (a pipe, a file), from one fstat: a script's pipes never pay for the
   * exact answer, which costs ~8 ms on Bun 1.4.4 (node:tty, or building process.stderr) against ~2 ms here.
   */
  mayBeTerminal(fd: 0 | 1 | 2): boolean {
    try {
      const { fstatSync } = proc().getBuiltinModule("node:fs") as typeof import("node:fs");
      return fstatSync(fd).isCharacterDevice(); // a terminal, or /dev/null: asked exactly then
    } catch {
      return true;
    }
  },
  /** Whether stdin is a terminal (a person typing). Costs ~10-20 ms on Bun (node:tty): ask off the start-up path. */
  async stdinIsTerminal(): Promise<boolean> {
    if (deno) return deno.stdin.isTerminal();
    if (!sys.mayBeTerminal(0)) return false;
    const { isatty } = await import("node:tty");
    return isatty(0);
  },
  /** Listens for a signal; returns a function that stops listening. */
  onSignal(signal: "SIGINT" | "SIGTERM", handler: () => void): () => void {
    if (deno) {
      deno.addSignalListener(signal, handler);
      return () => deno.removeSignalListener(signal, handler);
    }
    proc().on(signal, handler);
    return () => void proc().off(signal, handler);
  },
};

/**
 * While serving, plugins run in this process, so two of their mistakes must not
 * end it: process.exit or Deno.exit throws a PluginExitError instead (the call
 * fails, serving goes on), and an error thrown outside any request (a timer, a
 * forgotten promise) is reported instead of being fatal. Returns a function that
 * undoes both. On Deno only Deno.exit is replaced: node:process's exit goes
 * through it, and touching `process` costs ~29 ms of start-up there.
 */
function guardProcess(report: (error: unknown) => void): () => void {
  const exitInstead = (code?: number): never => {
    throw new PluginExitError(code);
  };
  if (deno) {
    const exit = deno.exit;
    const onError = (event: Event) => {
      event.preventDefault();
      report((event as ErrorEvent).error);
    };
    const onRejection = (event: Event) => {
      event.preventDefault();
      report((event as PromiseRejectionEvent).reason);
    };
    deno.exit = exitInstead;
    globalThis.addEventListener("error", onError);
    globalThis.addEventListener("unhandledrejection", onRejection);
    return () => {
      deno.exit = exit;
      globalThis.removeEventListener("error", onError);
      globalThis.removeEventListener("unhandledrejection", onRejection);
    };
  }
  const node = proc();
  const exit = node.exit;
  node.exit = exitInstead;
  node.on("uncaughtException", report);
  node.on("unhandledRejection", report);
  return () => {
    node.exit = exit;
    node.off("uncaughtException", report);
    node.off("unhandledRejection", report);
  };
}

// process.stdout replaced; returns what puts it back. Bun's takes an assignment (defining a property over it builds its
// streams, ~9 ms; its console does not write through it). Node's is a getter alone (an assignment throws), so it is
// defined over, and its getter put back after: Node's console writes through process.stdout.
function setProcessStdout(value: object): () => void {
  const process = proc();
  if (bun) {
    (process as unknown as { stdout: unknown }).stdout = value;
    return noop;
  }
  const saved = Object.getOwnPropertyDescriptor(process, "stdout");
  Object.defineProperty(process, "stdout", { value, configurable: true, writable: true });
  return () => saved && Object.defineProperty(process, "stdout", saved);
}

/**
 * Keeps plugins' output off the protocol stream while serving on stdout: their
 * console.log/info/debug/warn and process.stdout.write go to `io.stderr`.
 * Returns the sink the protocol writes to (the real stdout) and a function that
 * undoes it. `serve()` calls it when it owns the process's stdout; the CLI calls
 * it before loading plugins, whose top level may print too.
 */
function guardProcessStdout(io: { stdout: OutputSink; stderr: OutputSink }): {
  protocol: OutputSink;
  restore(): void;
} {
  const saved = { log: console.log, info: console.info, debug: console.debug, warn: console.warn };
  const toStderr = (...data: unknown[]) => console.error(...data);
  console.log =
    console.info =
    console.debug =
    console.warn =
      toStderr;
  // process.stdout.write from a plugin (Node's console uses it too) goes to stderr.
  const redirectWrite = (chunk: string | Uint8Array, ...rest: unknown[]) => {
    io.stderr.write(chunk);
    const callback = rest.find((item) => typeof item === "function") as (() => void) | undefined;
    callback?.();
    return true;
  };
  const stdout = io.stdout;
  if (stdout.native && "entry" in io.stderr) {
    // --log-format json: what a plugin writes to stdout becomes log lines too (through our stderr's sink).
    let undo = noop;
    if (deno) {
      const out = deno.stdout;
      out.write = (bytes) => Promise.resolve((redirectWrite(bytes), bytes.length));
      out.writeSync = (bytes) => (redirectWrite(bytes), bytes.length);
    } else undo = setProcessStdout({ write: redirectWrite, isTTY: false });
    return { protocol: stdout, restore: () => void (Object.assign(console, saved), undo()) };
  }
  if (stdout.native) {
    // The protocol has its own sink (bound to the real stdout), so the process's
    // stdout is the plugins' alone: make it stderr.
    let undo = noop;
    if (deno) {
      // Deno's node:process stdout writes through these methods: swapping them
      // guards plugins without building node:process (~29 ms of start-up).
      const { stdout: out, stderr: err } = deno;
      out.write = (bytes) => err.write(bytes);
      out.writeSync = (bytes) => err.writeSync(bytes);
    } else {
      // Bun (and Node on Linux): process.stdout becomes a stand-in that builds process.stderr when a plugin first
      // uses it. Reading
      // process.stdout, or defining a property over it, builds the streams (~9 ms each on Bun 1.4.4); assigning
      // it does not.
      const node = proc() as unknown as { stderr: object };
      let stderr: object | undefined;
      undo = setProcessStdout(
        new Proxy({}, {
          get(_, key) {
            stderr ??= node.stderr;
            const value = Reflect.get(stderr, key);
            return typeof value === "function" ? value.bind(stderr) : value;
          },
        }),
      );
    }
    return { protocol: stdout, restore: () => void (Object.assign(console, saved), undo()) };
  }
  // Node: keep the real write for the protocol.
  const node = stdout as Writable;
  const realWrite = node.write;
  const protocol = {
    write: realWrite.bind(node),
    once: (event: string, listener: () => void) => node.once(event, listener),
    on: (event: string, listener: () => void) => node.on(event, listener),
  } as unknown as OutputSink;
  node.write = redirectWrite as typeof node.write;
  return {
    protocol,
    restore() {
      Object.assign(console, saved);
      node.write = realWrite;
    },
  };
}

// The file-system calls mcp.ts makes (plugins, configs, PATH). On Deno they use
// Deno's own API: node:fs, node:path and node:url cost ~40 ms of its start-up,
// Deno.readDir ~1 ms.
interface Files {
  /** Names of the files (and links) in a directory. */
  list(dir: string): Promise<string[]>;
  mode(path: string): Promise<number>;
  /** What is at a path (following links): undefined when nothing is. */
  kind(path: string): Promise<"file" | "directory" | undefined>;
  readText(path: string): Promise<string>;
}

/**
 * Writes a file the user keeps (a host's config): the old one, when `backup`, kept as FILE.bak; the new one written
 * beside it and renamed over it (a crash leaves one whole file), with the old one's mode (~/.claude.json is the
 * user's alone). Returns the backup's path.
 */
async function replaceFile(file: string, text: string, backup: boolean): Promise<string | undefined> {
  const { chmod, copyFile, mkdir, rename, stat, writeFile } = await import("node:fs/promises");
  await mkdir(dirnameOf(file), { recursive: true });
  let mode = 0o644;
  if (backup) {
    mode = (await stat(file)).mode & 0o777;
    await copyFile(file, `${file}.bak`);
  }
  const temporary = `${file}.${proc().pid}.tmp`;
  await writeFile(temporary, text, { mode });
  await chmod(temporary, mode);
  await rename(temporary, file);
  return backup ? `${file}.bak` : undefined;
}

function kindOf(isDirectory: Promise<boolean>): Promise<"file" | "directory" | undefined> {
  return isDirectory.then((directory) => directory ? "directory" : "file", (error) => {
    if ((error as { code?: string }).code === "ENOENT") return undefined;
    throw error; // e.g. Deno without --allow-read: a hint, not "no such directory"
  });
}

async function files(): Promise<Files> {
  if (deno) {
    return {
      async list(dir) {
        const names: string[] = [];
        for await (const entry of deno.readDir(dir)) if (entry.isFile || entry.isSymlink) names.push(entry.name);
        return names;
      },
      mode: async (path) => (await deno.stat(path)).mode ?? 0,
      kind: (path) => kindOf(deno.stat(path).then((info) => info.isDirectory)),
      readText: (path) => deno.readTextFile(path),
    };
  }
  const { readdir, readFile, stat } = await import("node:fs/promises");
  return {
    list: async (dir) =>
      (await readdir(dir, { withFileTypes: true }))
        .filter((entry) => entry.isFile() || entry.isSymbolicLink())
        .map((entry) => entry.name),
    mode: async (path) => (await stat(path)).mode,
    kind: (path) => kindOf(stat(path).then((info) => info.isDirectory())),
    readText: (path) => readFile(path, "utf8"),
  };
}

// Small path helpers, so that neither node:path nor node:url is needed (start-up
// time on Deno). Paths stay as given: the OS resolves any "..".
function joinPath(dir: string, name: string): string {
  const rest = name.replace(/^\.[\\/]/, "");
  if (rest === "." || rest === "") return dir;
  if (/^[\\/]+$/.test(dir)) return `/${rest}`;
  const base = trimEnd(dir, "\\/").replace(/^\.[\\/]/, "");
  return base === "." || base === "" ? rest : `${base}/${rest}`;
}

function isAbsolutePath(path: string): boolean {
  return path.startsWith("/") || /^[A-Za-z]:[\\/]/.test(path) || path.startsWith("\\\\");
}

/** `path` against `base` (default the working directory), made absolute. */
function resolvePath(path: string, base?: string): string {
  if (isAbsolutePath(path)) return path;
  const from = base === undefined ? sys.cwd() : resolvePath(base);
  return joinPath(from, path);
}

function dirnameOf(path: string): string {
  const slash = Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\"));
  return slash > 0 ? path.slice(0, slash) : slash === 0 ? "/" : ".";
}

function fileUrl(path: string): string {
  const slashed = path.replace(/\\/g, "/");
  return "file://" + encodeURI(slashed.startsWith("/") ? slashed : `/${slashed}`).replace(/[?#]/g, encodeURIComponent);
}

// --- 8b. Streams: our stdout and stderr, bytes in ---

/** Something bytes can be written to: a Node-style writable stream is one. */
export interface ByteSink {
  write(chunk: string | Uint8Array, callback?: (error?: Error | null) => void): boolean;
}

/** An output to write to: a Node-style stream, or a runtime's own stdout/stderr. */
export interface OutputSink extends ByteSink {
  once?(event: "drain", listener: () => void): unknown;
  on?(event: "error", listener: (error: Error) => void): unknown;
  readonly isTTY?: boolean;
  /** The terminal's width, when it is one. */
  readonly columns?: number;
  /** Set on the runtime's own stdout/stderr, which need no Node stream. */
  readonly native?: boolean;
  /** Resolves once everything written so far has been handed to the OS. */
  drained?(): Promise<void>;
  /** Writes our own terminal control (a status line's carriage return and erase) past the visible-text rule. */
  control?(text: string): void;
}

// A native sink reports backpressure past this many queued bytes.
const SINK_HIGH_WATER = 1024 * 1024;
// Our stderr (logs, -v, --trace) drops writes past this many queued bytes and counts them: a
// server flooding notifications must not grow us without bound (Deno queued 3.9 GB in 25 s).
const STDERR_DROP_BYTES = 4 * 1024 * 1024;
// own-line-ok: the sink under every writer counts what it dropped; no peer text in it.
const droppedNote = (count: number) => `mcp: ${count} line(s) of output dropped: stderr could not keep up\n`;

/**
 * The process's stdout (1) or stderr (2) through the runtime's own API, or
 * undefined on Node (but for stdout on Linux: writeSync). On Bun, touching process.stdout or process.stderr costs
 * ~25 ms of start-up (their Node streams are built lazily); Bun.stdout.writer()
 * costs ~1 ms. On Deno, Deno.stdout skips the node:stream layer as well.
 */
function nativeSink(fd: 1 | 2): OutputSink | undefined {
  const name = fd === 1 ? "stdout" : "stderr";
  let writeNow: (chunk: string | Uint8Array) => unknown;
  let isTerminal: () => boolean;
  let columns: () => number | undefined;
  if (bun) {
    const writer = bun[name].writer();
    writeNow = (chunk) => {
      writer.write(chunk);
      return writer.flush();
    };
    isTerminal = () => sys.mayBeTerminal(fd) && proc()[name].isTTY === true; // asked only when it matters
    columns = () => proc()[name].columns;
  } else if (deno) {
    const file = deno[name];
    // Bound now: serve points Deno.stdout's methods at stderr to guard the protocol from plugins.
    const write = file.write.bind(file);
    writeNow = async (chunk) => {
      let bytes = typeof chunk === "string" ? encoder.encode(chunk) : chunk;
      while (bytes.length > 0) bytes = bytes.subarray(await write(bytes));
    };
    isTerminal = () => file.isTerminal();
    columns = () => {
      try {
        return deno.consoleSize().columns;
      } catch {
        return undefined; // not a terminal
      }
    };
  } else if (fd === 1 && sys.platform() === "linux" && proc().getBuiltinModule) {
    // Node on Linux writes stdout synchronously whatever it is (a file, a pipe, a terminal), as writeSync does;
    // process.stdout costs ~2.5 ms of each start for a pipe (node:net, node:stream). A descriptor someone left
    // non-blocking (EAGAIN) is written again a millisecond later.
    const { writeSync } = proc().getBuiltinModule("node:fs") as typeof import("node:fs");
    writeNow = async (chunk) => {
      let bytes = typeof chunk === "string" ? encoder.encode(chunk) : chunk;
      while (bytes.length > 0) {
        try {
          bytes = bytes.subarray(writeSync(1, bytes));
        } catch (error) {
          if ((error as { code?: string }).code !== "EAGAIN") throw error;
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      }
    };
    isTerminal = () => sys.mayBeTerminal(1) && proc().stdout.isTTY === true; // asked only when it matters
    columns = () => proc().stdout.columns;
  } else {
    return undefined;
  }
  let chain: Promise<unknown> = Promise.resolve();
  let queued = 0;
  let failed = false;
  let dropped = 0; // stderr writes not made since the queue was last empty
  const dropAbove = fd === 2 ? STDERR_DROP_BYTES : Infinity;
  const drainers: (() => void)[] = [];
  const errorListeners: ((error: Error) => void)[] = [];
  return {
    native: true,
    get isTTY() {
      return isTerminal();
    },
    get columns() {
      return columns();
    },
    write(chunk, callback) {
      if (failed) {
        // Dropped, but whoever waits for it must not wait forever.
        if (callback) queueMicrotask(callback);
        return true;
      }
      const size = chunk.length;
      if (queued + size > dropAbove) {
        dropped++;
        if (callback) queueMicrotask(callback);
        return false;
      }
      queued += size;
      // Writes stay in order: each starts when the one before has been handed over.
      chain = chain.then(() => writeNow(chunk)).then(() => {
        queued -= size;
        if (queued === 0 && dropped > 0) {
          const note = droppedNote(dropped);
          dropped = 0;
          queued += note.length;
          chain = chain.then(() => writeNow(note)).then(() => queued -= note.length, noop);
        }
        callback?.();
        if (queued < SINK_HIGH_WATER) { for (const drain of drainers.splice(0)) drain(); }
      }, (error) => {
        if (!failed) {
          failed = true; // a closed pipe (EPIPE): tell the listeners once, drop the rest
          for (const listener of errorListeners) listener(error);
        }
        callback?.();
      });
      return queued < SINK_HIGH_WATER;
    },
    once(event, listener) {
      if (event === "drain") drainers.push(listener);
    },
    on(event, listener) {
      if (event === "error") errorListeners.push(listener);
    },
    drained: () => chain.then(noop, noop),
  };
}

let stderrSink: OutputSink | undefined;
/** The process's stderr, made once: bounded (writes past a backlog are dropped and counted). */
function ownStderr(): OutputSink {
  return stderrSink ??= nativeSink(2) ?? droppingSink(proc().stderr);
}

function runtimeVersions(): { deno?: string; bun?: string; node?: string } {
  if (deno) return { deno: deno.version.deno };
  if (bun) return { bun: bun.version };
  return { node: proc().versions.node };
}

/**
 * The runtime's own TypeScript stripper, which blanks the types and leaves the rest of the text as it was: Node's
 * and Deno's node:module stripTypeScriptTypes (Node >= 22.13). Bun has none that leaves the text (Bun.Transpiler
 * rewrites it, import.meta.main among the rest). Node warns that it is experimental: not on our stderr.
 * @internal
 */
export async function typeStripper(): Promise<((code: string) => string) | undefined> {
  if (bun) return undefined;
  const { stripTypeScriptTypes } = await import("node:module") as { stripTypeScriptTypes?: (code: string) => string };
  if (!stripTypeScriptTypes) return undefined;
  return (code) => {
    const process = proc();
    const warn = process.emitWarning;
    process.emitWarning = noop;
    try {
      return stripTypeScriptTypes(code);
    } finally {
      process.emitWarning = warn;
    }
  };
}

// The resource attributes of this process's runtime, for telemetry.
function runtimeResource(): Record<string, string> {
  const versions = runtimeVersions();
  const runtime = versions.deno ? "deno" : versions.bun ? "bun" : "node";
  return { "process.runtime.name": runtime, "process.runtime.version": String(versions[runtime] ?? "") };
}

// What /metrics' target_info says of this process when no OTLP export made the resource (the same keys but the id).
function metricsResource(serviceName = "mcp.ts"): Record<string, string> {
  return {
    "service.name": serviceName,
    "telemetry.sdk.name": "mcp.ts",
    "telemetry.sdk.language": "js",
    "telemetry.sdk.version": VERSION,
    ...runtimeResource(),
  };
}

let processTelemetry: Telemetry | undefined | null = null; // null: the OTEL_* variables not read yet

/**
 * The telemetry a server or client made in code gets: none for `false`; its own for options; omitted, the
 * process's from the OTEL_* variables (read once; none when they set no endpoint or cannot be read, as on Deno
 * without --allow-env). Its warnings go to our stderr.
 */
function telemetryFor(option: false | TelemetryOptions | undefined, serviceName?: string): Telemetry | undefined {
  if (option === false) return undefined;
  const warn = (line: string) => logLine(ownStderr(), line);
  if (option) return telemetryWith(option, warn, serviceName);
  if (processTelemetry === null) {
    let fromEnv: TelemetryOptions | undefined;
    try {
      fromEnv = telemetryFromEnv(sys.env(), warn, serviceName);
    } catch { /* not allowed to read it: off */ }
    processTelemetry = telemetryWith(fromEnv, warn);
  }
  return processTelemetry;
}

/**
 * The one builder of telemetry, for the library's options and for what the OTEL_* variables gave alike: each
 * signal's endpoint is its own, else the base `endpoint` and the signal's path (as OTEL_EXPORTER_OTLP_ENDPOINT is
 * read); none at all is no telemetry.
 */
function telemetryWith(
  option: TelemetryOptions | undefined,
  warn: (line: string) => void,
  serviceName?: string,
): Telemetry | undefined {
  if (!option) return undefined;
  const base = option.endpoint === undefined ? undefined : trimEnd(option.endpoint, "/");
  const tracesEndpoint = option.tracesEndpoint ?? (base === undefined ? undefined : `${base}/v1/traces`);
  const metricsEndpoint = option.metricsEndpoint ?? (base === undefined ? undefined : `${base}/v1/metrics`);
  if (tracesEndpoint === undefined && metricsEndpoint === undefined) return undefined;
  const named = { ...option, tracesEndpoint, metricsEndpoint, serviceName: option.serviceName ?? serviceName };
  return new Telemetry(named, runtimeResource(), warn);
}

/**
 * The process's own stdin, stdout and stderr, each reached only when asked for (an untouched one costs
 * nothing): stdin and stdout through the runtime's own API where it has one, stderr bounded (ownStderr).
 * The one place the process's stdio is taken.
 */
function processStdio(): { stdin(): ByteSource; readonly stdout: OutputSink; readonly stderr: OutputSink } {
  let stdout: OutputSink | undefined;
  return {
    stdin: () => nativeStdinSource() ?? streamSource(proc().stdin, { owned: true }),
    get stdout() {
      return stdout ??= nativeSink(1) ?? proc().stdout;
    },
    get stderr() {
      return ownStderr();
    },
  };
}

/**
 * Node's stderr, dropping (and counting) writes while more than STDERR_DROP_BYTES wait to go out: a pipe that
 * is not read queued without bound (a flood of -v logs: 703 MB on Node 22.23).
 */
function droppingSink(stream: NodeJS.WriteStream): OutputSink {
  let dropped = 0;
  return {
    get isTTY() {
      return stream.isTTY;
    },
    get columns() {
      return stream.columns;
    },
    write(chunk, callback) {
      if (stream.writableLength <= STDERR_DROP_BYTES) return stream.write(chunk, callback);
      if (dropped++ === 0) {
        stream.once("drain", () => {
          stream.write(droppedNote(dropped));
          dropped = 0;
        });
      }
      if (callback) queueMicrotask(callback);
      return false;
    },
    once: (event, listener) => stream.once(event, listener),
    on: (event, listener) => stream.on(event, listener),
  };
}

/** Where a server's bytes come from. */
interface ByteSource {
  start(onData: (chunk: Uint8Array) => void, onEnd: () => void): void;
  pause(): void;
  resume(): void;
  /** Stops reading for good (a pending read must not keep the process alive). */
  stop(): void;
}

// `owned`: the stream is the process's stdin, ours to destroy when done so it cannot hold the process open.
function streamSource(stream: Readable, { owned = false }: { owned?: boolean } = {}): ByteSource {
  let onData: ((chunk: Uint8Array | string) => void) | undefined;
  let onEnd: (() => void) | undefined;
  return {
    start(data, end) {
      onData = (chunk) => data(typeof chunk === "string" ? encoder.encode(chunk) : chunk);
      onEnd = end;
      stream.on("data", onData);
      stream.on("end", end);
      stream.on("error", end);
    },
    pause: () => void stream.pause(),
    resume: () => void stream.resume(),
    stop() {
      if (onData) stream.off("data", onData);
      if (onEnd) stream.off("end", onEnd);
      stream.pause();
      if (owned) stream.destroy();
    },
  };
}

// A source that pulls chunks with `read` (null at the end) and can `cancel` a pending read.
function pullSource(open: () => { read(): Promise<Uint8Array | null>; cancel(): void }): ByteSource {
  let pull: ReturnType<typeof open> | undefined;
  let stopped = false;
  let paused: Promise<void> | undefined;
  let unpause: (() => void) | undefined;
  return {
    start(onData, onEnd) {
      pull = open();
      (async () => {
        try {
          while (!stopped) {
            if (paused) await paused;
            const chunk = await pull!.read();
            if (chunk === null || stopped) break;
            onData(chunk); // FrameReader copies what it keeps
          }
        } catch {
          // a read error ends the input, as EOF does
        }
        if (!stopped) onEnd();
      })();
    },
    pause() {
      paused ??= new Promise((resolve) => unpause = resolve);
    },
    resume() {
      unpause?.();
      paused = unpause = undefined;
    },
    stop() {
      stopped = true;
      this.resume();
      try {
        pull?.cancel(); // ends a pending read, which would keep the process alive
      } catch {
        // already closed
      }
    },
  };
}

/**
 * The process's stdin through the runtime's own API, or undefined on Node.
 * Deno's node:process stdin makes a Buffer and stream bookkeeping per chunk whose
 * garbage lags behind (144 MB peak RSS while skipping 64 MiB lines); Deno.stdin
 * read into one reused buffer makes none. On Bun, building process.stdin costs
 * ~25 ms of start-up; Bun.stdin.stream() ~1 ms.
 */
function nativeStdinSource(): ByteSource | undefined {
  if (deno) {
    return pullSource(() => {
      const buffer = new Uint8Array(64 * 1024);
      return {
        read: async () => {
          const count = await deno.stdin.read(buffer);
          return count === null ? null : buffer.subarray(0, count);
        },
        cancel: () => deno.stdin.close(),
      };
    });
  }
  if (bun) {
    return pullSource(() => {
      const reader = bun.stdin.stream().getReader();
      return {
        read: async () => {
          const { done, value } = await reader.read();
          return done ? null : value;
        },
        cancel: () => void reader.cancel().catch(noop),
      };
    });
  }
  return undefined;
}

// --- 8c. Child processes ---

function killGroup(
  child: { pid?: number; kill(signal: "SIGTERM" | "SIGKILL"): unknown },
  signal: "SIGTERM" | "SIGKILL",
): void {
  try {
    // The whole group: a wrapper (npx, a shell) must not leave its server behind.
    if (sys.platform() === "win32" || !child.pid) throw new Error("no process group");
    proc().kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      // already gone
    }
  }
}

/** A spawned server process, whatever spawned it. */
interface ChildHandle {
  write(text: string): void;
  /** Closes its stdin. */
  end(): void;
  /** Signals it (and, where it has one of its own, its process group). */
  kill(signal: "SIGTERM" | "SIGKILL"): void;
}

/** What a spawned process reports. */
interface ChildEvents {
  stdout(chunk: Uint8Array): void;
  stderr(chunk: Uint8Array): void;
  /** After its stdout and stderr have ended; `code` is null when a signal ended it. */
  exit(code: number | null, signal: string | null): void;
}

/** One rung of a stop ladder: wait up to `ms` for the child to exit, then send `signal` (none: give up). */
type StopStep = readonly [ms: number, signal: "SIGTERM" | "SIGKILL" | undefined];

/**
 * A wait the program makes on purpose (the probe's silence, a stop ladder's step), told what it is for: tests
 * pass their own to see each wait and end it at once, so none of them measures a duration. @internal
 */
export type Wait = (ms: number, why: string) => Promise<unknown>;

/**
 * Stops a child the way every caller here does: each step waits for it to exit,
 * at most `ms`, then signals it (its group, where it has one). `wholeGroup`: the
 * steps go on after the child itself has exited, for what it left in its group.
 */
async function stopLadder(
  child: { kill(signal: "SIGTERM" | "SIGKILL"): void },
  exited: Promise<unknown>,
  steps: readonly StopStep[],
  options: { wholeGroup?: boolean; wait?: Wait } = {},
): Promise<void> {
  let gone = false;
  void exited.then(() => gone = true);
  for (const [ms, signal] of steps) {
    if (ms > 0) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const waited = options.wait
        ? options.wait(ms, signal ?? "giving up")
        : new Promise<void>((resolve) => timer = setTimeout(resolve, ms));
      (timer as { unref?: () => void } | undefined)?.unref?.();
      await (options.wholeGroup ? waited : Promise.race([exited, waited]));
      clearTimeout(timer);
    }
    if ((gone && !options.wholeGroup) || signal === undefined) return;
    child.kill(signal);
  }
}

// Bun.spawn's subprocess, as far as mcp.ts uses it.
interface BunSubprocess {
  pid: number;
  stdin: { write(text: string): unknown; flush(): unknown; end(): unknown };
  stdout: AsyncIterable<Uint8Array>;
  stderr: AsyncIterable<Uint8Array>;
  exited: Promise<number>;
  exitCode: number | null;
  signalCode: string | null;
  kill(signal?: string): void;
}

// A Deno.Command child, as far as mcp.ts uses it.
interface DenoChild {
  pid: number;
  stdin: WritableStream<Uint8Array>;
  stdout: AsyncIterable<Uint8Array>;
  stderr: AsyncIterable<Uint8Array>;
  status: Promise<{ code: number; signal: string | null }>;
  kill(signal?: string): void;
}

async function pump(stream: AsyncIterable<Uint8Array>, onChunk: (chunk: Uint8Array) => void): Promise<void> {
  try {
    for await (const chunk of stream) onChunk(chunk);
  } catch {
    // a stream that breaks has ended
  }
}

/** Where `command` is on PATH: a file with an execute bit, or on Windows one with a PATHEXT extension. */
async function findOnPath(
  command: string,
  env: Record<string, string | undefined>,
  platform = sys.platform(),
): Promise<string | undefined> {
  const fs = await files();
  const windows = platform === "win32";
  const dirs = (env.PATH ?? env.Path ?? "").split(windows ? ";" : ":").filter(Boolean);
  const pathExt = (env.PATHEXT ?? ".COM;.EXE;.BAT;.CMD").split(";").filter(Boolean);
  // `npx` on Windows is npx.cmd (the extensionless npx beside it is a shell script).
  const extensions = !windows
    ? [""]
    : pathExt.some((ext) => command.toLowerCase().endsWith(ext.toLowerCase()))
    ? [""]
    : pathExt.map((ext) => ext.toLowerCase());
  for (const dir of dirs) {
    for (const extension of extensions) {
      const path = joinPath(dir, command + extension);
      try {
        // An execute bit (Windows has none: there the extension says it).
        if (windows ? (await fs.kind(path)) === "file" : ((await fs.mode(path)) & 0o111) !== 0) return path;
      } catch {
        // not here
      }
    }
  }
  return undefined;
}

/**
 * What to spawn on Windows for a command line: Bun's and Deno's spawn do not
 * look `npx` up as npx.cmd, and a .cmd or .bat file runs only under cmd.exe.
 * Words are quoted for cmd.exe; the caller passes them verbatim.
 * @internal
 */
export async function windowsCommand(
  command: string,
  args: string[],
  env: Record<string, string | undefined>,
): Promise<{ command: string; args: string[]; verbatim: boolean }> {
  const path = /[\\/]/.test(command) ? command : await findOnPath(command, env, "win32") ?? command;
  if (!/\.(cmd|bat)$/i.test(path)) return { command: path, args, verbatim: false };
  const quote = (word: string) => /^[\w\-.:\\/=@+,]+$/.test(word) ? word : `"${word.replace(/"/g, '""')}"`;
  return {
    command: env.ComSpec ?? env.COMSPEC ?? "cmd.exe",
    args: ["/d", "/s", "/c", `"${[path, ...args].map(quote).join(" ")}"`],
    verbatim: true,
  };
}

/**
 * Spawns a command with piped stdio, without a shell; throws (code ENOENT) when
 * it does not exist. On Bun and Deno their own spawn is used: node:child_process
 * costs ~30 ms (Bun) and ~38 ms (Deno) to load and use, against ~1-2 ms, and that
 * is most of a one-shot `call`. On every runtime the child gets a session and
 * process group of its own (`detached`), so a signal reaches what a wrapper (npx)
 * started, and a terminal's Ctrl-C reaches only us: we stop the server in order.
 */
async function spawnChild(
  command: string,
  args: string[],
  options: { cwd?: string; env: Record<string, string> },
  events: ChildEvents,
): Promise<ChildHandle> {
  let verbatim = false;
  if (sys.platform() === "win32") ({ command, args, verbatim } = await windowsCommand(command, args, options.env));
  if (bun) {
    const child = bun.spawn([command, ...args], {
      ...options,
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      detached: sys.platform() !== "win32",
      windowsVerbatimArguments: verbatim,
    });
    Promise.all([pump(child.stdout, events.stdout), pump(child.stderr, events.stderr), child.exited])
      .then(() => events.exit(child.signalCode ? null : child.exitCode, child.signalCode));
    return {
      write(text) {
        try {
          child.stdin.write(text);
          child.stdin.flush();
        } catch {
          // it is gone: its exit says so
        }
      },
      end: () => void Promise.resolve().then(() => child.stdin.end()).catch(noop),
      kill: (signal) => killGroup(child, signal),
    };
  }
  if (deno) {
    const child = new deno.Command(command, {
      ...options,
      clearEnv: true, // `env` is the whole environment, as on Bun and Node: a variable left out is unset
      args,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
      detached: sys.platform() !== "win32",
      windowsRawArguments: verbatim,
    })
      .spawn();
    const writer = child.stdin.getWriter();
    Promise.all([pump(child.stdout, events.stdout), pump(child.stderr, events.stderr), child.status])
      .then(([, , status]) => events.exit(status.signal ? null : status.code, status.signal));
    return {
      write: (text) => void writer.write(encoder.encode(text)).catch(noop),
      end: () => void writer.close().catch(noop),
      kill: (signal) => killGroup(child, signal),
    };
  }
  const { spawn } = await import("node:child_process");
  const child = spawn(command, args, {
    ...options,
    stdio: ["pipe", "pipe", "pipe"],
    // Its own process group, so shutdown reaches what it spawned (npx → node).
    detached: sys.platform() !== "win32",
    windowsVerbatimArguments: verbatim,
  });
  await new Promise<void>((resolve, reject) => {
    child.once("spawn", resolve);
    child.once("error", reject);
  });
  child.stdout!.on("data", events.stdout);
  child.stderr!.on("data", events.stderr);
  child.stdin!.on("error", noop); // EPIPE when it dies: its exit says so
  child.on("error", noop); // a later error (a failed kill) must not crash us; its exit says the rest
  child.on("close", (code, signal) => events.exit(code, signal));
  return {
    write: (text) => void child.stdin!.write(text),
    end: () => void child.stdin!.end(),
    kill: (signal) => killGroup(child, signal),
  };
}

// --- 8d. Listening for HTTP; a TCP connection out; the watchdog ---

/** A TCP connection as node:net gives it, on every runtime (the state store's: 10f). @internal */
type TcpSocket = import("node:net").Socket;

/**
 * A TCP connection to host:port, with TLS when asked (the runtime's CA list, SNI for a name only: RFC 6066, and
 * Node warns on an address). node:net and node:tls, on Deno and Bun too: one code path for a long-lived connection.
 */
async function connectTcp(host: string, port: number, tls: boolean): Promise<TcpSocket> {
  if (!tls) return (await import("node:net")).connect({ host, port });
  return (await import("node:tls")).connect({ host, port, servername: /^[\d.]+$|:/.test(host) ? undefined : host });
}

/**
 * What tells a fetch handler that its client went away before an answer: the
 * request's signal, except on Deno, where reading it prints a "legacy
 * behavior" warning on stderr (Deno 2.9.6, 2026-11-23) and it also aborts after
 * every successful response. There a closed SSE stream still cancels its request.
 */
function disconnectSignal(request: Request): AbortSignal | undefined {
  return deno ? undefined : request.signal;
}

/** A listening HTTP server, as {@linkcode listenHttp} returns it. */
export interface HttpListener {
  hostname: string;
  port: number;
  /** Stops accepting connections; resolves once the open ones are closed (`force`: at once). */
  close(options?: { force?: boolean }): Promise<void>;
}

// Deno.serve and Bun.serve, as far as mcp.ts uses them.
interface DenoHttpServer {
  addr: { port: number };
  shutdown(): Promise<void>;
}
interface BunHttpServer {
  port: number;
  stop(closeActiveConnections?: boolean): unknown;
}

// --- The watchdog: a plugin stuck in a synchronous loop ends the process ---
// Module tools run on our event loop: one stuck in `for (;;)` stops every client, /health and every
// timer, so nothing on that loop can notice. A worker thread can: the loop beats into shared memory
// every second; when the beat stops for the limit, the worker writes one line naming the tools in
// flight straight to fd 2 and SIGKILLs the process (a signal handler would need the stuck loop), so a
// supervisor restarts it. Terminating the stuck tool alone would need every module tool in a worker
// of its own: a structured clone of arguments and results per call, and no shared module state.
// Measured: Deno 2.9.6, Bun 1.4.4, Node 22.23, 2026-11-25 (testdata/stuck/spin.ts).

const WATCHDOG_SLOTS = 4096; // tools counted by slot; more than this share the last
const WATCHDOG_BEAT_MS = 1_000;
// The watchdog's limit is the tool timeout plus this: a call past its timeout was due an answer by then.
const WATCHDOG_MARGIN_MS = 2_000;
// The worker's loop, the same on every runtime: `write` one line to fd 2, then `kill` the process.
const WATCHDOG_LOOP = `
const watch = (counts, names, limitMs, write, kill) => {
  let last = -1, since = Date.now();
  setInterval(() => {
    const beat = Atomics.load(counts, 0);
    if (beat !== last) { last = beat; since = Date.now(); return; }
    if (Date.now() - since < limitMs) return;
    const stuck = [];
    for (let i = 2; i < counts.length; i++) if (Atomics.load(counts, i) > 0) stuck.push(JSON.stringify(names[i] ?? "?"));
    const newest = names[Atomics.load(counts, 1)];
    const which = stuck.length === 1 ? "tool " + stuck[0] : stuck.length > 1 ? "one of the tools " + stuck.join(", ") +
      (newest ? " (the last started: " + JSON.stringify(newest) + ")" : "") : "plugin code";
    // own-line-ok: the watchdog's thread writes to fd 2 itself, the main thread being stuck; names are ours.
    write("mcp: " + which + " has blocked the server for " + Math.round((Date.now() - since) / 1000) +
      " s (a synchronous loop?): ending the process so that it can be restarted\\n");
    kill();
  }, 250);
};
`;
// Bun and Node: a node:worker_threads worker, unref'd.
const WATCHDOG_NODE_SOURCE = WATCHDOG_LOOP + `
const { workerData, parentPort } = require("node:worker_threads");
const { writeSync } = require("node:fs");
const names = workerData.names;
parentPort.on("message", (message) => { names[message.slot] = message.name; });
watch(new Int32Array(workerData.shared), names, workerData.limitMs, (line) => writeSync(2, line),
  () => process.kill(process.pid, "SIGKILL"));
`;
// Deno: a web worker. Making a node:worker_threads one cost the first tool call 38 ms there (loading the
// module and its worker), a web worker 10 ms (Deno 2.9.6, 2026-11-25); it runs on when the loop is stuck.
const WATCHDOG_DENO_SOURCE = WATCHDOG_LOOP + `
let names = [];
self.onmessage = ({ data }) => {
  if (!data.shared) return void (names[data.slot] = data.name);
  names = data.names;
  watch(new Int32Array(data.shared), names, data.limitMs, (line) => Deno.stderr.writeSync(new TextEncoder().encode(line)),
    () => Deno.kill(Deno.pid, "SIGKILL"));
};
`;

/** Counts the calls in flight per tool for the watchdog; `wrap` a tool's run to be counted. @internal */
interface Watchdog {
  wrap(name: string, run: (args: unknown, ctx: ToolContext) => unknown): (args: unknown, ctx: ToolContext) => unknown;
  /** Starts watching (off the start-up path: node:worker_threads costs ~22 ms on Deno); the first call does too. */
  start(): void;
  stop(): void;
}

/**
 * The watchdog of a server whose event loop must not stop for `limitMs` (a
 * tool's timeout plus a margin); it counts at once and watches from `start()`.
 * @internal
 */
export function watchdog(limitMs: number): Watchdog {
  const shared = new SharedArrayBuffer(4 * (WATCHDOG_SLOTS + 2));
  const counts = new Int32Array(shared); // [0] the beat, [1] the slot started last, [2…] calls in flight per slot
  const names: string[] = [];
  const slots = new Map<string, number>();
  let worker: { postMessage(message: unknown): void; terminate(): unknown } | undefined;
  let beat: ReturnType<typeof setInterval> | undefined;
  let stopped = false;
  const start = () => {
    if (stopped || worker) return;
    try {
      // Synchronous: the first call may be the stuck one, and a stuck loop never resumes an await.
      if (deno) {
        const web = new Worker(`data:text/javascript,${encodeURIComponent(WATCHDOG_DENO_SOURCE)}`, { type: "module" });
        web.onerror = (event) => event.preventDefault();
        web.postMessage({ shared, limitMs, names });
        worker = web; // a web worker keeps the process alive: stop() ends it
      } else {
        const { Worker } = proc().getBuiltinModule("node:worker_threads") as typeof import("node:worker_threads");
        const node = new Worker(WATCHDOG_NODE_SOURCE, { eval: true, workerData: { shared, limitMs, names } });
        node.unref();
        node.on("error", noop);
        worker = node;
      }
    } catch {
      stopped = true; // no workers here: nothing watches
      return;
    }
    beat = setInterval(() => counts[0]++, WATCHDOG_BEAT_MS);
    (beat as { unref?: () => void }).unref?.();
  };
  return {
    start,
    wrap(name, run) {
      let slot = slots.get(name);
      if (slot === undefined) {
        slot = Math.min(slots.size + 2, WATCHDOG_SLOTS + 1);
        slots.set(name, slot);
        names[slot] = slot === WATCHDOG_SLOTS + 1 ? "one of several" : name;
        worker?.postMessage({ slot, name: names[slot] });
      }
      const at = slot;
      // Plain writes, not Atomics: this thread is the only writer, and the worker's loads need only see them
      // eventually (an aligned Int32 does not tear). Atomics cost 30-70 ns a call here.
      const release = () => void counts[at]--; // one per tool: nothing made per call
      return (args, ctx) => {
        if (!worker) start();
        counts[at]++;
        counts[1] = at;
        let result: unknown;
        try {
          result = run(args, ctx);
        } catch (error) {
          release();
          throw error;
        }
        if (result instanceof Promise) result.then(release, release); // the caller still gets `result` itself
        else release();
        return result;
      };
    },
    stop() {
      stopped = true;
      clearInterval(beat);
      void worker?.terminate();
    },
  };
}

// The Node adapter reads a body up to this size whole; a bigger one goes to the handler as a stream.
const NODE_WHOLE_BODY_BYTES = 1024 * 1024;

/**
 * Puts a fetch handler on a TCP port with the runtime's own server:
 * Deno.serve, Bun.serve (its 10 s idle timeout off, for long SSE streams), or
 * node:http through a small Request/Response adapter.
 */
/**
 * A request's peer, from what the runtime's server passed beside it: Deno's ServeHandlerInfo (remoteAddr), Bun's
 * server (requestIP), or the Node socket listenHttp passes.
 */
function peerAddress(info: unknown, request: Request): { address: string; port: number } | undefined {
  if (typeof info !== "object" || info === null) return undefined;
  const peer = info as {
    remoteAddr?: { hostname?: string; port?: number };
    requestIP?: (request: Request) => { address: string; port: number } | null;
    remoteAddress?: string;
    remotePort?: number;
  };
  if (peer.remoteAddr?.hostname !== undefined) {
    return { address: peer.remoteAddr.hostname, port: peer.remoteAddr.port! };
  }
  if (typeof peer.requestIP === "function") {
    const ip = peer.requestIP(request);
    return ip ? { address: ip.address, port: ip.port } : undefined;
  }
  if (typeof peer.remoteAddress === "string") return { address: peer.remoteAddress, port: peer.remotePort! };
  return undefined;
}

export async function listenHttp(
  handler: (request: Request, info?: unknown) => Promise<Response>,
  options: { hostname: string; port: number },
): Promise<HttpListener> {
  const { hostname, port } = options;
  if (deno) {
    const server = deno.serve({ hostname, port, onListen: noop }, handler);
    let closing: Promise<void> | undefined;
    return { hostname, port: server.addr.port, close: () => closing ??= server.shutdown() };
  }
  if (bun) {
    // development: false and our own error answer: Bun's error page shows paths and source to the caller.
    // reusePort: false, said out loud: Bun 1.4.4 on Linux otherwise lets a second server bind a busy port, and
    // the kernel splits the connections between them.
    const server = bun.serve({
      hostname,
      port,
      fetch: handler,
      idleTimeout: 0,
      reusePort: false,
      development: false,
      error: () => new Response("Internal Server Error\n", { status: 500 }),
    });
    return {
      hostname,
      port: server.port,
      close: async (options) => void await server.stop(options?.force === true),
    };
  }
  const { createServer } = await import("node:http");
  const { Readable } = await import("node:stream");
  const server = createServer(async (req, res) => {
    const aborted = new AbortController();
    // The client went away: only if the answer was not all written.
    res.on("close", () => res.writableFinished || aborted.abort());
    const headers = new Headers();
    for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
    let body: BodyInit | undefined;
    if (req.method !== "GET" && req.method !== "HEAD") {
      const length = Number(req.headers["content-length"] ?? NaN);
      // A small body of known length is read whole: cheaper than a web stream per request. A big one
      // streams, so the handler's cap applies before it is all in memory.
      if (!(length <= NODE_WHOLE_BODY_BYTES)) body = Readable.toWeb(req) as ReadableStream<Uint8Array>;
      else {
        const chunks: Uint8Array[] = [];
        let size = 0;
        try {
          for await (const chunk of req) {
            chunks.push(chunk);
            size += chunk.length;
          }
        } catch {
          size = -1; // the connection ended inside the body
        }
        if (size < length) {
          return void res.writeHead(400, { "content-type": "text/plain" }).end("Bad Request: the body ended short\n");
        }
        body = concatBytes(chunks, size) as Uint8Array<ArrayBuffer>;
      }
    }
    let response: Response;
    try {
      const url = `http://${req.headers.host ?? `${hostname}:${port}`}${req.url ?? "/"}`;
      response = await handler(
        new Request(url, { method: req.method, headers, body, duplex: "half", signal: aborted.signal } as RequestInit),
        req.socket, // its peer's address, read only when telemetry asks (peerAddress)
      );
    } catch (error) {
      response = new Response(`Internal Server Error: ${errorMessage(error)}\n`, { status: 500 });
    }
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (!response.body) return void res.end();
    if (response.headers.get("content-type") !== "text/event-stream") {
      return void res.end(new Uint8Array(await response.arrayBuffer()));
    }
    res.flushHeaders(); // an SSE client should see the headers before the first event
    const reader = response.body.getReader();
    res.on("close", () => void reader.cancel().catch(noop));
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (!res.write(value)) await new Promise((resolve) => res.once("drain", resolve));
      }
    } catch {
      // the client went away
    }
    res.end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, hostname, () => resolve());
  });
  const address = server.address();
  return {
    hostname,
    port: typeof address === "object" && address ? address.port : port,
    close: (options) =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        if (options?.force) server.closeAllConnections();
      }),
  };
}

// --- 8e. The per-user daemon's ground: its state directory, a Unix socket, a process of its own ---

/**
 * Where the daemon keeps its socket, token and log (CONTRACT: Sessions): $MCP_TS_STATE_DIR, else
 * $XDG_RUNTIME_DIR/mcp.ts, else ~/.cache/mcp.ts/run.
 */
function stateDirectory(env: Record<string, string | undefined> = sys.env()): string {
  if (env.MCP_TS_STATE_DIR) return resolvePath(env.MCP_TS_STATE_DIR);
  if (env.XDG_RUNTIME_DIR) return `${env.XDG_RUNTIME_DIR}/mcp.ts`;
  return `${env.HOME ?? env.USERPROFILE ?? "."}/.cache/mcp.ts/run`;
}

/**
 * Makes the state directory (0700) or checks the one there: a directory, not a link, the user's own, open to no
 * one else. Anything else is a usage error saying why: a socket in a directory another user can write to could be
 * swapped for theirs.
 */
async function privateDirectory(dir: string): Promise<void> {
  // Deno's own calls: node:fs/promises costs ~25 ms of a Deno start, most of a `call @NAME`.
  let info: { directory: boolean; uid: number | null; mode: number };
  let uid: number | null | undefined;
  if (deno) {
    await deno.mkdir(dir, { recursive: true, mode: 0o700 });
    const stat = await deno.lstat(dir);
    info = { directory: stat.isDirectory, uid: stat.uid, mode: stat.mode ?? 0 };
    uid = deno.uid();
  } else {
    // Sync calls of node:fs where it is loaded already (Bun: node:fs/promises ~2 ms of a `call @NAME`).
    const { lstatSync, mkdirSync } = (proc().getBuiltinModule?.("node:fs") ??
      await import("node:fs")) as typeof import("node:fs");
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const stat = lstatSync(dir);
    info = { directory: stat.isDirectory(), uid: stat.uid, mode: stat.mode };
    uid = proc().getuid?.();
  }
  const why = !info.directory
    ? "it is not a directory (a link is not followed)"
    : uid !== undefined && uid !== null && info.uid !== uid
    ? `it belongs to uid ${info.uid}, not to you (uid ${uid})`
    : (info.mode & 0o077) !== 0 && sys.platform() !== "win32"
    ? `its mode is ${(info.mode & 0o777).toString(8)}: others may use it (chmod 700 it)`
    : undefined;
  if (why) throw new UsageError(`Cannot use the state directory ${dir}: ${why}`);
}

/**
 * One end of a local socket: bytes in and out (paused until resumed), and its end. `write` is false once more than
 * SINK_HIGH_WATER bytes wait to be taken by the peer; `onDrain` hears once when they have gone below it again.
 */
interface LocalSocket {
  write(chunk: string | Uint8Array, callback?: () => void): boolean;
  onDrain(listener: () => void): void;
  end(): void;
  destroy(): void;
  /** Listens to what comes; returns what stops listening. */
  onData(listener: (chunk: Uint8Array) => void): () => void;
  onClose(listener: () => void): void;
  pause(): void;
  resume(): void;
}

function localSocket(socket: import("node:net").Socket): LocalSocket {
  socket.on("error", noop); // a peer gone mid-write: its close says so
  socket.pause();
  return {
    // A copy, as for Deno's and Bun's: node:net keeps the bytes it could not write yet, and a caller may fill its
    // buffer again meanwhile (attach's stdin on Deno does).
    write: (chunk, callback) => {
      socket.write(typeof chunk === "string" ? chunk : ownBytes(chunk), callback);
      return socket.writableLength < SINK_HIGH_WATER; // past node:net's own mark, which then says 'drain'
    },
    onDrain: (listener) => void socket.once("drain", listener),
    end: () => void socket.end(),
    destroy: () => void socket.destroy(),
    onData: (listener) => {
      socket.on("data", listener);
      return () => void socket.off("data", listener);
    },
    onClose: (listener) => void socket.on("close", listener),
    pause: () => void socket.pause(),
    resume: () => void socket.resume(),
  };
}

/**
 * What a runtime's own socket shares as a LocalSocket: what comes is held while paused and delivered on resume; its
 * close said once to every listener. A subclass pushes what it reads (`received`), says when it ended (`closed`),
 * and writes.
 */
abstract class PushedSocket implements LocalSocket {
  #listeners = new Set<(chunk: Uint8Array) => void>();
  #closers: (() => void)[] = [];
  #held: Uint8Array[] = []; // read while paused: delivered first on resume
  #drainers: (() => void)[] = [];
  /** Bytes written and not yet taken by the peer. */
  protected waiting = 0;
  protected paused = true;
  protected isClosed = false;

  onDrain(listener: () => void): void {
    this.#drainers.push(listener);
  }

  /** `bytes` were taken (or will never be): the drain listeners hear once the rest is below the mark. */
  protected taken(bytes: number): void {
    this.waiting = Math.max(0, this.waiting - bytes); // a write under way when it closed ends after the close
    if (this.waiting < SINK_HIGH_WATER) { for (const drain of this.#drainers.splice(0)) drain(); }
  }

  /** Our own copy of what a caller writes (see ownBytes), counted until the peer takes it; nothing after the close. */
  write(chunk: string | Uint8Array, callback?: () => void): boolean {
    if (this.isClosed) {
      callback?.();
      return true;
    }
    const bytes = ownBytes(chunk);
    this.waiting += bytes.length;
    this.send(bytes, callback);
    return this.waiting < SINK_HIGH_WATER;
  }

  /** Sends the bytes in order, calling `taken` as the peer takes them and `callback` once they are all out. */
  protected abstract send(bytes: Uint8Array, callback?: () => void): void;
  abstract end(): void;
  abstract destroy(): void;

  /** A chunk read, the caller's to keep (a subclass passes its own copy). */
  received(chunk: Uint8Array): void {
    if (this.paused) this.#held.push(chunk);
    else for (const listener of [...this.#listeners]) listener(chunk);
  }

  closed(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.taken(this.waiting); // nothing more goes: no one waits for a drain
    for (const closer of this.#closers.splice(0)) closer();
  }

  onData(listener: (chunk: Uint8Array) => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  onClose(listener: () => void): void {
    if (this.isClosed) listener();
    else this.#closers.push(listener);
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    for (const chunk of this.#held.splice(0)) for (const listener of [...this.#listeners]) listener(chunk);
  }
}

// A copy of what a caller writes: the write happens later, and a caller may fill its buffer again meanwhile
// (attach's stdin on Deno does).
function ownBytes(chunk: string | Uint8Array): Uint8Array {
  return typeof chunk === "string" ? encoder.encode(chunk) : chunk.slice();
}

// A Deno connection as a LocalSocket: read (into one buffer, each chunk copied out) while resumed, written in order.
class DenoLocalSocket extends PushedSocket {
  #conn: DenoConn;
  #buffer = new Uint8Array(64 * 1024);
  #pumping = false;
  #ended = false;
  #writes: Promise<unknown> = Promise.resolve();

  constructor(conn: DenoConn) {
    super();
    this.#conn = conn;
  }

  // conn.read, not conn.readable: Deno builds its web streams on first use (~4 ms of a `call @NAME`).
  async #pump(): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (!this.paused && !this.isClosed) {
        const count = await this.#conn.read(this.#buffer);
        if (count === null) {
          this.#ended = true;
          break;
        }
        this.received(this.#buffer.slice(0, count));
      }
      if (this.#ended && !this.paused) this.closed();
    } catch {
      this.closed();
    } finally {
      this.#pumping = false;
    }
  }

  override resume(): void {
    super.resume();
    if (this.#ended) this.closed();
    else void this.#pump();
  }

  // What is written while a write is under way goes out with the next one, in one write (a batch's many lines).
  #pending: Uint8Array[] = [];
  #callbacks: (() => void)[] = [];

  protected send(bytes: Uint8Array, callback?: () => void): void {
    this.#pending.push(bytes);
    if (callback) this.#callbacks.push(callback);
    if (this.#pending.length > 1) return; // a write of them is queued already
    this.#writes = this.#writes.then(async () => {
      const chunks = this.#pending.splice(0);
      const callbacks = this.#callbacks.splice(0);
      const size = chunks.reduce((sum, bytes) => sum + bytes.length, 0);
      try {
        for (let rest = concatBytes(chunks, size); rest.length > 0;) rest = rest.subarray(await this.#conn.write(rest));
      } catch {
        // closed: the close is what the reader hears of it
      }
      this.taken(size);
      for (const done of callbacks) done();
    });
  }

  end(): void {
    this.#writes = this.#writes.then(() => this.#conn.closeWrite()).catch(noop);
  }

  destroy(): void {
    try {
      this.#conn.close();
    } catch {
      // closed already
    }
    this.closed();
  }
}

// A Bun socket as a LocalSocket: Bun pushes what comes; a partial write keeps the rest for its drain.
// Bun's handlers are one set for every socket (of a connect, or of a listener): they find theirs in bunSockets.
class BunLocalSocket extends PushedSocket {
  #socket: BunSocket;
  #queue: { bytes: Uint8Array; callback?: () => void }[] = [];
  #ending = false;

  constructor(socket: BunSocket) {
    super();
    this.#socket = socket;
  }

  flush(): void {
    let taken = 0;
    while (this.#queue.length > 0) {
      const next = this.#queue[0];
      const written = this.#socket.write(next.bytes);
      if (written < next.bytes.length) {
        taken += Math.max(written, 0);
        next.bytes = next.bytes.subarray(Math.max(written, 0)); // our own copy (ownBytes): kept as it is
        break;
      }
      taken += next.bytes.length;
      this.#queue.shift();
      next.callback?.();
    }
    if (taken > 0) this.taken(taken);
    if (this.#queue.length === 0 && this.#ending) this.#socket.end();
  }

  override closed(): void {
    // What was still to write never will be: whoever waits for it (a server's last answers) must not wait forever.
    for (const { callback } of this.#queue.splice(0)) callback?.();
    super.closed();
  }

  protected send(bytes: Uint8Array, callback?: () => void): void {
    this.#queue.push({ bytes, callback });
    if (this.#queue.length === 1) this.flush();
  }

  end(): void {
    this.#ending = true;
    if (this.#queue.length === 0) this.#socket.end();
  }

  destroy(): void {
    this.#socket.terminate();
    this.closed();
  }

  // Bun reads on until told: holding what comes would only move an unread peer's backlog into us.
  override pause(): void {
    super.pause();
    if (!this.isClosed) this.#socket.pause();
  }

  override resume(): void {
    if (!this.isClosed) this.#socket.resume();
    super.resume();
  }
}

const bunSockets = new WeakMap<BunSocket, BunLocalSocket>();

function bunHandlers(onOpen: (socket: BunLocalSocket) => void = noop): BunSocketHandlers {
  const local = (socket: BunSocket) => {
    let found = bunSockets.get(socket);
    if (!found) {
      found = new BunLocalSocket(socket);
      bunSockets.set(socket, found);
    }
    return found;
  };
  return {
    open: (socket) => onOpen(local(socket)),
    data: (socket, chunk) => local(socket).received(new Uint8Array(chunk)),
    drain: (socket) => local(socket).flush(),
    // The peer's end (a half-close, Bun's `end`, not `close`): no more comes, as node:net's close says.
    end: (socket) => local(socket).closed(),
    close: (socket) => local(socket).closed(),
    error: (socket) => local(socket).closed(),
  };
}

/** Connects to a Unix socket; rejects with an error whose code is ENOENT or ECONNREFUSED when no one listens. */
async function connectLocal(path: string): Promise<LocalSocket> {
  if (bun) {
    // Bun's own: node:net costs ~5 ms of a Bun start, its connect ~3 ms.
    const socket = await bun.connect({ unix: path, socket: bunHandlers() });
    return bunSockets.get(socket) ?? new BunLocalSocket(socket);
  }
  if (deno) {
    // Deno's own: node:net and its streams cost a Deno start more than the whole round trip.
    try {
      return new DenoLocalSocket(await deno.connect({ transport: "unix", path }));
    } catch (error) {
      const name = (error as { name?: string }).name;
      const code = name === "NotFound" ? "ENOENT" : name === "ConnectionRefused" ? "ECONNREFUSED" : undefined;
      throw Object.assign(new Error(errorMessage(error)), { code });
    }
  }
  const { createConnection } = await import("node:net");
  return await new Promise((resolve, reject) => {
    const socket = createConnection(path);
    socket.once("connect", () => {
      socket.off("error", reject);
      resolve(localSocket(socket));
    });
    socket.once("error", reject);
  });
}

/**
 * Listens on a Unix socket only its owner may open (0600, in a 0700 directory). A stale socket file (no daemon
 * behind it) is removed first; anything else at the path (a link, a file) is an error, never followed.
 */
async function listenLocal(
  path: string,
  onConnection: (socket: LocalSocket) => void,
): Promise<{ close(): Promise<void> }> {
  const [{ createServer }, { chmod, lstat, unlink }] = await Promise.all([
    import("node:net"),
    import("node:fs/promises"),
  ]);
  const existing = await lstat(path).catch(() => undefined);
  if (existing && !existing.isSocket()) throw new UsageError(`Cannot listen on ${path}: something else is there`);
  if (existing) await unlink(path);
  if (deno) {
    // Deno's own listener: node:net's writes cost a Deno daemon ~0.1 ms each (a 1,000-call batch, 0.12 s).
    const listener = deno.listen({ transport: "unix", path });
    await chmod(path, 0o600);
    void (async () => {
      try {
        for await (const conn of listener) onConnection(new DenoLocalSocket(conn));
      } catch {
        // closed
      }
    })();
    return {
      close: async () => {
        await unlink(path).catch(noop); // first: a daemon started meanwhile binds a path of its own, kept
        listener.close();
      },
    };
  }
  if (bun) {
    // Bun's own listener, as its connect: node:net's sockets cost its daemon time on every message.
    const listener = bun.listen({ unix: path, socket: bunHandlers(onConnection) });
    await chmod(path, 0o600);
    return {
      close: async () => {
        await unlink(path).catch(noop);
        listener.stop(true);
      },
    };
  }
  const server = createServer((socket) => onConnection(localSocket(socket)));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => {
      server.off("error", reject);
      resolve();
    });
  });
  await chmod(path, 0o600);
  return {
    close: async () => {
      await unlink(path).catch(noop);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A small file of ours ("" when there is none): Deno's call, else node:fs's sync one (no node:fs/promises to load). */
async function readPrivateFile(path: string): Promise<string> {
  try {
    if (deno) return await deno.readTextFile(path);
    const fs = (proc().getBuiltinModule?.("node:fs") ?? await import("node:fs")) as typeof import("node:fs");
    return fs.readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/** Creates a file only if none is there (O_EXCL), mode 0600; false when one is. */
async function createExclusive(path: string, text: string): Promise<boolean> {
  const { writeFile } = await import("node:fs/promises");
  try {
    await writeFile(path, text, { flag: "wx", mode: 0o600 });
    return true;
  } catch (error) {
    if ((error as { code?: string }).code === "EEXIST") return false;
    throw error;
  }
}

/**
 * Holds the lock file `path` (created O_EXCL with our pid) until the returned function lets it go; a holder that
 * died, or holds it past a few seconds, is overruled.
 */
async function holdLock(path: string): Promise<() => Promise<void>> {
  const { readFile, unlink } = await import("node:fs/promises");
  for (let attempt = 0; !(await createExclusive(path, String(proc().pid))); attempt++) {
    const holder = Number(await readFile(path, "utf8").catch(() => ""));
    if (!holder || !processAlive(holder) || attempt > 100) await unlink(path).catch(noop);
    else await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return () => unlink(path).catch(noop);
}

/** Writes a file only its owner may read (0600), or removes one (`text` undefined; gone already is fine). */
async function privateFile(path: string, text: string | undefined): Promise<void> {
  const { unlink, writeFile } = await import("node:fs/promises");
  if (text === undefined) await unlink(path).catch(noop);
  else await writeFile(path, text, { mode: 0o600 });
}

/** Whether a process of that pid is alive (signal 0). */
function processAlive(pid: number): boolean {
  try {
    proc().kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}

/** This program run again with `args`: the runtime, its flags (Deno's -A), this file. */
async function selfArgv(args: string[]): Promise<string[]> {
  const { fileURLToPath } = await import("node:url");
  const file = fileURLToPath(import.meta.url);
  return deno ? [proc().execPath, "run", "-A", file, ...args] : [proc().execPath, file, ...args];
}

/**
 * Starts a process that outlives us: its own session and process group (a terminal's Ctrl-C or hang-up is not
 * its), stdio closed, not waited for.
 */
async function spawnDetached(argv: string[], cwd: string): Promise<void> {
  const { spawn } = await import("node:child_process");
  const child = spawn(argv[0], argv.slice(1), { cwd, detached: true, stdio: "ignore", env: proc().env });
  child.on("error", noop);
  child.unref();
}

/** An OutputSink appending to a file, each write whole (the daemon's log). */
async function appendingSink(path: string): Promise<OutputSink> {
  const { appendFileSync } = await import("node:fs");
  return {
    write(chunk, callback) {
      try {
        appendFileSync(path, chunk, { mode: 0o600 });
      } catch {
        // The log is best effort: a full disk must not stop the daemon.
      }
      callback?.();
      return true;
    },
  };
}

// === 9. Plugins ==============================================================
// Turns a directory into a catalog: which files count, importing modules,
// running executables, watching for changes. The only file-system, import()
// and process I/O of the server.

const MODULE_EXTENSIONS = new Set([".ts", ".js", ".mjs", ".mts"]);
// After SIGTERM, an executable tool gets this long before SIGKILL.
const EXEC_KILL_GRACE_MS = 1_000;

// Executable tools whose process group may still be alive: running, or inside their SIGTERM-to-SIGKILL grace. A
// server that is ending SIGKILLs what is left, so that no tool outlives it (a client that gave up SIGTERMs the
// server a moment after closing its stdin: inside that grace).
const liveExecutables = new Set<ChildHandle>();

/** SIGKILLs the process group of every executable tool still alive: the server is ending. */
function killExecutables(): void {
  for (const child of liveExecutables) child.kill("SIGKILL");
  liveExecutables.clear();
}

// Changes in DIR closer together than this are one reload.
const WATCH_DEBOUNCE_MS = 100;
const EXEC_STDERR_TAIL_BYTES = 64 * 1024;

/** Whether a file name in DIR may be a plugin (contract: "Files starting with . or _ ..."). @internal */
export function isPluginFile(name: string): boolean {
  if (name.startsWith(".") || name.startsWith("_")) return false;
  if (name.endsWith(".json") || name.endsWith(".md") || name.endsWith(".d.ts")) return false;
  return !/_test\.[^.]+$/.test(name);
}

/** How {@linkcode loadCatalog} loads. */
export interface LoadOptions {
  /**
   * Import every module afresh (for reloads): a number that differs from the
   * last load's. DIR is copied to `.NAME.mcp-reload-PID-N` beside it and the
   * modules are imported from there, so helpers they import are fresh too.
   */
  fresh?: number;
  /** What each file served before (a reload): a file that fails now keeps serving that. */
  previous?: Map<string, Catalog>;
  /** Load only this file of DIR (`serve FILE`). */
  only?: string;
  /** The most an executable tool may print to stdout (default 4 MiB). */
  maxOutputBytes?: number;
}

/** What {@linkcode loadCatalog} found: the catalog, the files that failed, and what each file gave. */
export interface Loaded {
  catalog: Catalog;
  errors: PluginError[];
  /** Each file's part of the catalog, by its path as given (for the next reload's `previous`). */
  parts: Map<string, Catalog>;
  /** The fresh copy the modules were imported from, when `fresh` was given: remove it when done with it. */
  copy?: string;
}

/** Loads everything DIR provides. Files that fail are returned as errors; the rest load. */
export async function loadCatalog(dir: string, options: LoadOptions = {}): Promise<Loaded> {
  const fs = await files();
  const root = resolvePath(dir);
  const names = options.only !== undefined ? [options.only] : (await fs.list(root)).filter(isPluginFile).sort();
  const copy = options.fresh === undefined ? undefined : await freshCopy(root, options.fresh);
  const errors: PluginError[] = [];
  const parts = new Map<string, Catalog>();
  await Promise.all(names.map(async (name) => {
    const file = joinPath(root, name);
    const source = joinPath(dir, name);
    const extension = extensionOf(name);
    const baseName = name.slice(0, name.length - extension.length);
    try {
      let part: Catalog | undefined;
      if (MODULE_EXTENSIONS.has(extension)) {
        part = moduleCatalog(await import(fileUrl(copy ? joinPath(copy, name) : file)), baseName, source);
      } else if (sys.platform() === "win32") {
        // Windows has no execute bit to say which files are programs: say what is skipped.
        if (/\.(sh|py|rb|pl|php|exe|cmd|bat|ps1)$|^[^.]+$/i.test(name)) {
          throw new TypeError("executable plugins are not supported on Windows yet; write it as a .ts or .js module");
        }
      } else if (((await fs.mode(file)) & 0o111) !== 0) {
        // Any other file with an execute bit is a tool, in any language.
        part = await executableCatalog(fs, { root, dir, name, baseName }, options);
      }
      if (part) parts.set(source, part);
    } catch (error) {
      const previous = options.previous?.get(source);
      if (previous) parts.set(source, previous);
      const message = loadFailure(error, file, copy ? [[copy, root]] : []);
      errors.push({ file: source, message: previous ? `${message}; still serving its last good version` : message });
    }
  }));
  const catalog = emptyCatalog();
  // In file order, whatever order the imports finished in.
  for (const name of names) {
    const part = parts.get(joinPath(dir, name));
    if (!part) continue;
    catalog.tools.push(...part.tools);
    catalog.resources.push(...part.resources);
    catalog.templates.push(...part.templates);
    catalog.prompts.push(...part.prompts);
  }
  catalog.failed = errors;
  return { catalog, errors, parts, copy };
}

/** Loads the tools of DIR (see {@linkcode loadCatalog} for resources and prompts too). */
export async function loadTools(dir: string): Promise<{ tools: Tool[]; errors: PluginError[] }> {
  const { catalog, errors } = await loadCatalog(dir);
  return { tools: catalog.tools, errors };
}

async function executableCatalog(
  fs: Files,
  at: { root: string; dir: string; name: string; baseName: string },
  options: LoadOptions,
): Promise<Catalog> {
  const { root, dir, name, baseName } = at;
  let meta: unknown = {};
  const sidecar = joinPath(dir, baseName + ".json");
  try {
    meta = JSON.parse(await fs.readText(joinPath(root, baseName + ".json")));
  } catch (error) {
    if ((error as { code?: string }).code !== "ENOENT") throw new TypeError(`${sidecar}: ${errorMessage(error)}`);
  }
  if (!isObject(meta)) throw new TypeError(`${sidecar}: not a JSON object`);
  const file = joinPath(root, name);
  const maxBytes = options.maxOutputBytes ?? DEFAULT_MAX_LINE_BYTES;
  const run = (args: JsonObject, ctx: ToolContext) =>
    runExecutable({ file, cwd: root, maxBytes, tool: baseName }, args, ctx);
  return { ...emptyCatalog(), tools: [defineTool({ ...meta, run }, baseName, joinPath(dir, name))] };
}

/**
 * Why a plugin file failed to load, in one line, ending with the line and column
 * when the runtime gives them: Deno and Node name them in the message or stack,
 * Bun in a BuildMessage's `position`. `renamed` maps a fresh copy back to DIR.
 */
function loadFailure(error: unknown, file: string, renamed: [string, string][]): string {
  const unrename = (text: string) =>
    renamed.reduce((result, [from, to]) => result.split(fileUrl(from)).join(fileUrl(to)).split(from).join(to), text);
  const name = (error as { name?: unknown })?.name;
  let message = unrename(errorMessage(error).split("\n")[0]);
  // Deno wraps a parse error in a TypeError whose message starts "SyntaxError:".
  if ((name === "SyntaxError" || name === "BuildMessage") && !message.startsWith("SyntaxError")) {
    message = `SyntaxError: ${message}`;
  }
  const baseName = basenameOf(file);
  const code = (error as { code?: unknown })?.code;
  if (code === "ERR_UNKNOWN_FILE_EXTENSION" && /\.m?ts$/.test(file)) {
    // Node before 22.6 (the npm package's JavaScript runs there) has no type stripper to load a .ts plugin with.
    // layering-ok: only Node gives this code, and its version is what the message is about.
    return `Node ${proc().versions.node} cannot load TypeScript (Node >= 22.18 can); write ${baseName} as .js or ` +
      `.mjs, or serve with a newer Node, Deno or Bun`;
  }
  if (code === "ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING") {
    return `Node does not strip types of files under node_modules; serve a copy of the folder from elsewhere, ` +
      `or write ${baseName} as .js or .mjs`;
  }
  const position = (error as { position?: { file?: string; line?: number; column?: number } })?.position;
  let where = "";
  if (position && typeof position.line === "number" && unrename(String(position.file)) === file) {
    where = `${position.line}${typeof position.column === "number" ? `:${position.column}` : ""}`;
  } else {
    const text = unrename(`${errorMessage(error)}\n${(error as { stack?: unknown })?.stack ?? ""}`);
    const found = [fileUrl(file), file].map((path) => new RegExp(`${escapeRegExp(path)}:(\\d+)(?::(\\d+))?`).exec(text))
      .find(Boolean);
    if (found) where = found[2] ? `${found[1]}:${found[2]}` : found[1];
  }
  return where && !message.includes(`${baseName}:${where}`) ? `${message} at ${baseName}:${where}` : message;
}

/**
 * Copies DIR to a fresh directory beside it, so that its modules and everything
 * they import from DIR get new URLs: a module cache (which Bun keys by path,
 * ignoring a ?query) cannot hand back an edited helper's old code. Beside DIR,
 * so relative imports out of it (`../lib.ts`) still resolve; node_modules is
 * linked, not copied. Dot entries are skipped.
 */
async function freshCopy(root: string, generation: number): Promise<string> {
  // layering-ok: node:fs is alike on the three runtimes; a reload's fresh copy is the plugins' own file work
  const { copyFile, mkdir, readdir, rm, symlink } = await import("node:fs/promises");
  const base = trimEnd(root, "\\/");
  const name = basenameOf(base);
  // layering-ok: the pid makes two servers' copies of one folder distinct
  const copy = joinPath(dirnameOf(base), `.${name}.mcp-reload-${proc().pid}-${generation}`);
  const copyTree = async (from: string, to: string) => {
    await mkdir(to, { recursive: true });
    for (const entry of await readdir(from, { withFileTypes: true })) {
      if (entry.name.startsWith(".")) continue;
      const source = joinPath(from, entry.name);
      const target = joinPath(to, entry.name);
      if (entry.name === "node_modules") await symlink(source, target);
      else if (entry.isDirectory()) await copyTree(source, target);
      else await copyFile(source, target);
    }
  };
  try {
    await copyTree(base, copy);
  } catch (error) {
    await rm(copy, { recursive: true, force: true });
    throw new Error(`Cannot reload "${root}": cannot make a fresh copy at ${copy}: ${errorMessage(error)}`);
  }
  return copy;
}

/** Removes a fresh copy made by a reload. */
async function removeCopy(copy: string): Promise<void> {
  // layering-ok: node:fs is alike on the three runtimes
  const { rm } = await import("node:fs/promises");
  await rm(copy, { recursive: true, force: true }).catch(noop);
}

function moduleCatalog(module: JsonObject, baseName: string, source: string): Catalog {
  const catalog = emptyCatalog();
  const exported = module.default;
  if (exported === undefined && module.resources === undefined && module.prompts === undefined) {
    throw new TypeError("no default export (export default { description, inputSchema, run }), resources or prompts");
  }
  if (exported !== undefined) {
    // In an array each tool names itself; a lone one may still borrow the file's name.
    catalog.tools = Array.isArray(exported)
      ? exported.map((item) => defineTool(item, exported.length === 1 ? baseName : undefined, source))
      : [defineTool(exported, baseName, source)];
  }
  if (module.resources !== undefined) {
    if (!Array.isArray(module.resources)) throw new TypeError("export const resources must be an array");
    for (const item of module.resources) addResource(catalog, defineResource(item, source));
  }
  if (module.prompts !== undefined) {
    if (!Array.isArray(module.prompts)) throw new TypeError("export const prompts must be an array");
    catalog.prompts = module.prompts.map((item) => definePrompt(item, source));
  }
  return catalog;
}

/**
 * Runs an executable tool: arguments as one JSON line on its stdin (never
 * through a shell or on its command line), stdout → the result, stderr lines →
 * log notifications, `@progress N[/TOTAL] [message]` on stderr → progress.
 */
// --log-format json: where an executable tool's stderr lines also go, as lines of its call (serve sets it).
let executableLines: ((tool: string, level: LogLevel, text: string, traceparent?: string) => void) | undefined;

async function runExecutable(
  { file, cwd, maxBytes, tool }: { file: string; cwd: string; maxBytes: number; tool: string },
  args: JsonObject,
  ctx: ToolContext,
): Promise<JsonObject> {
  ctx.signal.throwIfAborted();
  const stdout: Uint8Array[] = [];
  let stdoutBytes = 0;
  let overflow = false;
  let stderrTail = "";
  let ended!: (status: { code: number | null; signal: string | null }) => void;
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => ended = resolve);
  const stderr = new LineSplitter(EXEC_STDERR_TAIL_BYTES, (line) => {
    const progress = /^@progress\s+(\d+(?:\.\d+)?)(?:\/(\d+(?:\.\d+)?))?\s*(.*)$/.exec(line);
    if (progress) {
      ctx.progress(Number(progress[1]), progress[2] ? Number(progress[2]) : undefined, progress[3] || undefined);
      return;
    }
    const levelled = /^@(debug|info|notice|warning|error|critical|alert|emergency)\s+(.*)$/.exec(line);
    ctx.log(levelled ? levelled[1] as LogLevel : "info", levelled ? levelled[2] : line);
    executableLines?.(
      tool,
      levelled ? levelled[1] as LogLevel : "info",
      levelled ? levelled[2] : line,
      ctx.traceparent,
    );
    stderrTail = keepTail(stderrTail, (levelled ? levelled[2] : line) + "\n", EXEC_STDERR_TAIL_BYTES);
  });
  let child: ChildHandle | undefined;
  let stopping: Promise<void> | undefined;
  let stopAsked = false; // before the spawn returned
  // SIGTERM to its process group, SIGKILL a grace later to the whole group even when the tool itself has
  // exited by then: a child that ignores SIGTERM must not outlive it.
  const stop = () => {
    if (!child) return void (stopAsked = true);
    const stopped = child;
    stopping ??= stopLadder(stopped, exited, [[0, "SIGTERM"], [EXEC_KILL_GRACE_MS, "SIGKILL"]], { wholeGroup: true })
      .finally(() => liveExecutables.delete(stopped));
  };
  try {
    // Its own process group (spawnChild's), so a cancelled script's children go with it.
    // The call's trace context, and never an inherited one (a tool must not join another trace).
    const env = { ...sys.env() } as Record<string, string>;
    for (
      const [name, value] of [["TRACEPARENT", ctx.traceparent], ["TRACESTATE", ctx.tracestate], [
        "BAGGAGE",
        ctx.baggage,
      ]]
    ) {
      if (value === undefined) delete env[name as string];
      else env[name as string] = value;
    }
    child = await spawnChild(file, [], { cwd, env }, {
      stdout(chunk) {
        if (overflow) return;
        stdoutBytes += chunk.length;
        if (stdoutBytes > maxBytes) {
          overflow = true; // drop what came, stop the tool: a bounded server beats a complete answer
          stdout.length = 0;
          stop();
        } else {
          stdout.push(chunk);
        }
      },
      stderr: (chunk) => stderr.push(chunk),
      exit: (code, signal) => ended({ code, signal }),
    });
  } catch (error) {
    throw new Error(`Cannot run ${file}: ${errorMessage(error)}`);
  }
  liveExecutables.add(child);
  if (stopAsked) stop();
  ctx.signal.addEventListener("abort", stop, { once: true });
  child.write(JSON.stringify(args) + "\n");
  child.end();
  const { code, signal } = await exited;
  ctx.signal.removeEventListener("abort", stop);
  if (!stopping) liveExecutables.delete(child); // ended by itself; a stopped one leaves when its ladder ends
  stderr.finish();
  if (ctx.signal.aborted) throw ctx.signal.reason;
  if (overflow) return errorResult(`the tool printed more than ${maxBytes} bytes; its output was dropped`);
  const text = new TextDecoder().decode(concatBytes(stdout, stdoutBytes));
  if (code !== 0) {
    return errorResult(
      stderrTail.trim() || text.trim() || `exited ${code === null ? `on ${signal}` : `with code ${code}`}`,
    );
  }
  // A stdout that is one CallToolResult object is taken as it is.
  if (text.trimStart().startsWith("{")) {
    try {
      const parsed = JSON.parse(text);
      if (isObject(parsed) && Array.isArray(parsed.content)) return parsed;
    } catch {
      // plain text that happens to start with a brace
    }
  }
  return { content: [{ type: "text", text: text.endsWith("\n") ? text.slice(0, -1) : text }] };
}

/**
 * Calls `onChange` once for each burst of changes in DIR (files added, edited
 * or removed). Returns a function that stops watching.
 */
// Skills (SEP-2640): at most this many files, and bytes in all, per skill.
const SKILL_MAX_FILES = 512;
const SKILL_MAX_BYTES = 16 * 1024 * 1024;

/**
 * The skills under `root` (7g): every directory with a SKILL.md, its path under `root` its skill-path. Its
 * files (nested skills' too) are read now, their digests taken. A skill is skipped, with one entry in
 * `skipped` naming its path and why, when its frontmatter is missing or outside the YAML subset, its name or
 * description is not a string, its name is not its directory's or breaks the naming rules, it holds a
 * symlink or a special file, or it is over 512 files or 16 MiB. Dot files and directories are not served.
 * @internal
 */
export async function loadSkills(root: string): Promise<{ skills: Skill[]; skipped: { path: string; why: string }[] }> {
  // layering-ok: node:fs is alike on the three runtimes; skills are read here, sized first
  const { lstat, open, readdir } = await import("node:fs/promises");
  type Found = { path: string[]; abs: string; kind: "file" | "other"; size: number };
  const found: Found[] = [];
  const walk = async (dir: string, path: string[]) => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      if (entry.name.startsWith(".")) continue;
      const abs = joinPath(dir, entry.name);
      const at = [...path, entry.name];
      if (entry.isDirectory()) await walk(abs, at);
      else {
        const info = await lstat(abs);
        found.push({ path: at, abs, kind: entry.isFile() && info.isFile() ? "file" : "other", size: info.size });
      }
    }
  };
  // A file's bytes, no more than stat said it holds (Safety: sizes checked before bytes are read): one that grew
  // since is refused, not read whole.
  const readSized = async (entry: Found) => {
    const handle = await open(entry.abs, "r");
    try {
      const bytes = new Uint8Array(entry.size + 1);
      let length = 0;
      for (
        let got;
        length < bytes.length && (got = (await handle.read(bytes, length, bytes.length - length)).bytesRead);
      ) {
        length += got;
      }
      if (length !== entry.size) throw new Error(`${entry.path.join("/")} changed while it was read`);
      return bytes.subarray(0, length);
    } finally {
      await handle.close();
    }
  };
  await walk(resolvePath(root), []);
  const skills: Skill[] = [];
  const skipped: { path: string; why: string }[] = [];
  const homes = found.filter((entry) =>
    entry.kind === "file" && entry.path.at(-1) === SKILL_FILE && entry.path.length > 1
  );
  for (const home of homes.sort((a, b) => a.path.join("/") < b.path.join("/") ? -1 : 1)) {
    const dir = home.path.slice(0, -1);
    const label = dir.join("/");
    const inside = found.filter((entry) =>
      dir.every((part, i) => entry.path[i] === part) && entry.path.length > dir.length
    );
    try {
      const strange = inside.find((entry) => entry.kind !== "file");
      if (strange) throw new Error(`${strange.path.slice(dir.length).join("/")} is a symlink or a special file`);
      if (inside.length > SKILL_MAX_FILES) throw new Error(`${inside.length} files (at most ${SKILL_MAX_FILES})`);
      const total = inside.reduce((sum, entry) => sum + entry.size, 0);
      if (total > SKILL_MAX_BYTES) throw new Error(`${total} bytes (at most ${SKILL_MAX_BYTES})`);
      const bytes: Uint8Array[] = [];
      for (const entry of inside) bytes.push(await readSized(entry));
      const text = new TextDecoder().decode(bytes[inside.indexOf(home)]);
      let frontmatter: JsonObject;
      try {
        frontmatter = skillFrontmatter(text);
      } catch (error) {
        throw new Error(`${SKILL_FILE}: ${errorMessage(error)}`);
      }
      const { name, description } = frontmatter;
      if (typeof name !== "string" || typeof description !== "string") {
        throw new Error(`${SKILL_FILE}: its frontmatter needs a name and a description, both strings`);
      }
      if (name !== dir.at(-1)) throw new Error(`its name "${name}" is not its directory's, "${dir.at(-1)}"`);
      if (!SKILL_NAME_PATTERN.test(name)) {
        throw new Error(
          `its name "${name}" breaks the naming rules (1-64 of a-z 0-9 -, no leading, trailing or double -)`,
        );
      }
      const uriOf = (path: string[]) => "skill://" + path.map(encodeURIComponent).join("/");
      const files = await Promise.all(inside.map(async (entry, i) => ({
        uri: uriOf(entry.path),
        bytes: new Uint8Array(bytes[i]),
        digest: "sha256:" + [...new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array(bytes[i])))]
          .map((byte) => byte.toString(16).padStart(2, "0")).join(""),
        mimeType: skillMimeType(entry.path.at(-1)!),
      })));
      files.sort((a, b) => a.uri < b.uri ? -1 : 1);
      skills.push({ uri: uriOf(home.path), name, frontmatter, items: files });
    } catch (error) {
      skipped.push({ path: label, why: errorMessage(error) });
    }
  }
  return { skills, skipped };
}

async function watchDirectory(
  dir: string,
  onChange: () => void,
  options: { recursive?: boolean } = {},
): Promise<() => void> {
  // layering-ok: node:fs's watch is alike on the three runtimes (recursive too)
  const { watch } = await import("node:fs");
  let timer: ReturnType<typeof setTimeout> | undefined;
  const watcher = watch(dir, { recursive: options.recursive === true }, (_event, name) => {
    // Dot files are ours (Bun's reload copies) or editors' swap files.
    if (typeof name === "string" && name.startsWith(".")) return;
    clearTimeout(timer);
    timer = setTimeout(onChange, WATCH_DEBOUNCE_MS);
  });
  return () => {
    clearTimeout(timer);
    watcher.close();
  };
}

// === 10. Server transports ===================================================
// A server on a byte-stream pair: framing in both directions, backpressure,
// tracing, and the end of the conversation (EOF, a closed output, shutdown).

/** Options of {@linkcode serve}. */
export interface ServeOptions extends ServerOptions {
  /** Where requests come from (default the process's stdin, read natively on Deno and Bun). */
  input?: Readable;
  /** Where responses go (default the process's stdout). */
  output?: OutputSink;
  /** Longest message accepted, in bytes (default 4 MiB). */
  maxLineBytes?: number;
  /** Each message as it comes ("< " + text) and goes ("> " + text): the same callback as createHandler's and connect's. */
  onTrace?: (line: string) => void;
  /** The core this connection shares with others (a daemon's session): its catalog, tasks and options. @internal */
  core?: ServerCore;
  /** Where requests come from, as bytes (a daemon's socket, through the runtime's own API). @internal */
  source?: ByteSource;
}

/** A running server, as returned by {@linkcode serve}. */
export interface ServeHandle {
  /** The protocol server, e.g. to replace its tools. */
  server: McpServer;
  /** Resolves when the conversation is over and everything is written. */
  done: Promise<void>;
  /** Stops reading, waits up to `graceMs` for calls in flight, then aborts them and finishes. */
  shutdown(graceMs?: number): Promise<void>;
  /** Whether any input has arrived yet. */
  readonly heard: boolean;
}

/** Serves tools over a byte-stream pair (stdin/stdout by default) until the input ends. */
export function serve(options: ServeOptions = {}): ServeHandle {
  const stdio = processStdio();
  const input = options.source ?? (options.input ? streamSource(options.input) : stdio.stdin());
  // On the process's stdout, tools given in code are kept off the protocol stream too.
  const guard = options.output ? undefined : guardProcessStdout({ stdout: stdio.stdout, stderr: stdio.stderr });
  const output: OutputSink = options.output ?? guard!.protocol;
  const log = options.log ?? (() => {});
  const maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  let outputClosed = false;

  const writer = new FrameWriter((text, written) => {
    if (outputClosed) return true;
    return written ? output.write(text, written) : output.write(text);
  });
  const trace = options.onTrace;
  const send = trace
    ? (text: string) => {
      trace(`> ${text}`);
      writer.send(text);
    }
    : (text: string) => writer.send(text);
  // Telemetry of its own unless given one (the CLI's): what is pending goes out when it is done, 2 s at most.
  const ownTracer = options.tracer ? undefined : telemetryFor(options.telemetry, options.name);
  const server = new McpServer(
    options.core ?? (ownTracer ? { ...options, tracer: ownTracer } : options),
    send,
    (callback) => writer.whenWritten(callback),
  );
  const reader = new FrameReader({
    message: trace
      ? (text) => {
        trace(`< ${text}`);
        server.receive(text);
      }
      : (text) => server.receive(text),
    oversize: (limit) =>
      server.reject(
        ErrorCode.InvalidRequest,
        `Invalid request: message exceeds the ${limit}-byte line limit (--max-line-bytes)`,
      ),
    framing: (framing) => {
      writer.framing = framing;
      if (framing !== "ndjson") log(`peer uses ${framing} framing; answering in kind`);
    },
  }, maxLineBytes);

  // Backpressure: stop reading while the output cannot keep up, and send no progress or log lines meanwhile (a
  // client that does not read must not grow us: a flooding tool would queue without end). Answers always go.
  let lagging = false;
  writer.onBackpressure = () => {
    if (!output.once || lagging) return;
    lagging = true;
    input.pause();
    output.once("drain", () => {
      lagging = false;
      input.resume();
    });
  };
  server.lagging = () => lagging;

  let finished = false;
  let resolveDone!: () => void;
  const done = new Promise<void>((resolve) => resolveDone = resolve).then(() => guard?.restore())
    .then(() => ownTracer?.flush());

  const finish = () => {
    if (finished) return;
    finished = true;
    input.stop();
    server.close();
    writer.flush();
    if (outputClosed) {
      resolveDone();
      return;
    }
    // Resolve only once the last bytes are handed to the OS.
    output.write("", () => resolveDone());
  };
  let heard = false;
  input.start((chunk) => {
    heard = true;
    reader.push(chunk);
  }, () => {
    reader.end();
    // EOF: answer what is in flight, then finish.
    server.idle().then(() => setImmediate(finish));
  });
  output.on?.("error", () => {
    // A closed stdout (EPIPE): nobody is listening; end quietly.
    outputClosed = true;
    finish();
  });

  const shutdown = async (graceMs = SHUTDOWN_GRACE_MS) => {
    input.stop();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      server.idle(),
      new Promise<void>((resolve) => timer = setTimeout(resolve, graceMs)),
    ]);
    clearTimeout(timer);
    finish();
    await done;
  };

  return {
    server,
    done,
    shutdown,
    get heard() {
      return heard;
    },
  };
}

// --- 10b. Streamable HTTP: the wire and its answers ---
// A web-standard fetch handler, `(Request) => Promise<Response>`, serving one
// core over Streamable HTTP in both eras on one endpoint, decided per request
// (basic/versioning.mdx, 2026-07-28): a body whose params carry the `_meta`
// envelope is a stateless 2026-07-28 request; anything else is the legacy
// transport with sessions (basic/transports.mdx, 2025-11-25). The wire:
//
//   POST /mcp  {"jsonrpc":"2.0","id":1,"method":"tools/call",...}
//   → 200 application/json {"jsonrpc":"2.0","id":1,"result":{...}}     when the answer comes first
//   → 200 text/event-stream  event: message\ndata: {...}\n\n …          when a notification comes first
//   → 202 (no body) for a notification or a response
//
// Owns no socket: `serve --http` puts it on the runtime's listener (listenHttp).

/** Options of {@linkcode createHandler}: `serve`'s, plus the HTTP flags'. */
export interface HandlerOptions extends ServerOptions {
  /** The MCP endpoint (default "/mcp"). */
  path?: string;
  /** Each message as it comes ("< " + text) and goes ("> " + text), for --trace. */
  onTrace?: (line: string) => void;
  /** Browser origins allowed besides the server's own host (CORS answers for them). */
  allowOrigins?: string[];
  /** Host names a request's Host header may name (default localhost, 127.0.0.1, [::1]); "*" allows any. */
  allowedHosts?: string[];
  /** Every request must carry `Authorization: Bearer <token>`. */
  token?: string;
  /** An OAuth protected resource: tokens of this issuer (JWTs), checked with its keys. */
  auth?: ResourceServerOptions;
  /** No legacy sessions: each legacy POST is served on its own; GET and DELETE get 405. */
  stateless?: boolean;
  /** An idle legacy session ends after this many ms (default 30 minutes). */
  sessionTtl?: number;
  /**
   * At most this many legacy sessions (default 1000), and with `auth` at most 100 per token subject:
   * a new one closes the least recently used idle one (its client gets 404 and starts again).
   */
  maxSessions?: number;
  /** Longest request body accepted (default 4 MiB): 413 beyond it. */
  maxBodyBytes?: number;
  /**
   * Measure each request served and each legacy session's life (the MCP semantic conventions' duration
   * histograms) and serve them at GET /metrics, behind the same checks as the endpoint (default false).
   */
  metrics?: boolean;
  /** A bearer token good for GET /metrics alone (a scraper that must not call tools). */
  metricsToken?: string;
  /**
   * Where replicas keep what they share: "memory:" (the default: nothing is shared) or
   * "redis://[user:pass@]host:port[/db]" ("rediss://" for TLS): legacy sessions, tasks, quotas, and the
   * notifications for a stream another replica holds (contract: State across replicas).
   */
  state?: string;
  /** With `state`: a replica silent this long (ms, default 10000) is gone, and its running tasks failed. */
  heartbeatTtl?: number;
  /** With `state`: where the lines "the state store … is lost" and "… is back" go (default stderr, "mcp: " first). */
  onStateStore?: (line: string) => void;
}

/** A fetch handler serving MCP; also `.fetch` (the same function), its core, and `close()`. */
export interface McpHandler {
  /** `info`: what the runtime's server passes beside the request (its peer's address, for telemetry). */
  (request: Request, info?: unknown): Promise<Response>;
  fetch(request: Request, info?: unknown): Promise<Response>;
  /**
   * What it measured (with `metrics`: each request's and each legacy session's duration), in the Prometheus text
   * format: for an application that serves its own /metrics behind its own auth.
   */
  metrics(): string;
  /** The catalog and options every request shares (e.g. `handler.core.setCatalog(...)`). */
  readonly core: ServerCore;
  /** Requests running plugin code, in all sessions. */
  readonly pending: number;
  /** Ends every session and open stream (listen streams get their closing result). */
  close(): void;
}

const DEFAULT_SESSION_TTL_MS = 30 * 60 * 1000;
const LOOPBACK_HOSTS = ["localhost", "127.0.0.1", "[::1]"];
// An SSE stream of a legacy session keeps this many events for Last-Event-ID.
const SSE_HISTORY = 1000;
// A legacy session keeps this many answered POST streams for resumption.
const KEPT_STREAMS = 64;
const SSE_RETRY_MS = 1000;
const SSE_KEEP_ALIVE_MS = 15_000;
// Without a disconnect signal (Deno), a call still unanswered after this long answers as a stream.
const STREAM_FOR_DISCONNECT_MS = 250;
const SSE_HEADERS = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache, no-transform",
  "x-accel-buffering": "no",
};
const JSON_CONTENT: Record<string, string> = Object.freeze({ "content-type": "application/json" });
// The MCP request headers a browser client sends, for CORS.
const CORS_ALLOW_HEADERS =
  "content-type, accept, authorization, mcp-session-id, mcp-protocol-version, mcp-method, mcp-name, last-event-id, " +
  "traceparent, tracestate, baggage";

/** A JSON-RPC error as an HTTP response. */
function rpcErrorResponse(status: number, id: unknown, code: number, message: string, data?: unknown): Response {
  const error = data === undefined ? { code, message } : { code, message, data };
  return Response.json({ jsonrpc: "2.0", id: isRequestId(id) ? id : null, error }, { status });
}

// The HTTP status of a 2026-07-28 error answer (streamable-http.mdx, 2026-07-28): -32601 is 404,
// the envelope errors 400; everything else stays in-band on 200.
function modernErrorStatus(code: unknown): number {
  if (code === ErrorCode.MethodNotFound) return 404;
  if (
    code === ErrorCode.HeaderMismatch || code === ErrorCode.MissingRequiredClientCapability ||
    code === ErrorCode.UnsupportedProtocolVersion
  ) return 400;
  return 200;
}

// `=?base64?...?=` header values (streamable-http.mdx, 2026-07-28): decoded, or undefined when malformed.
function decodeHeaderValue(value: string): string | undefined {
  const trimmed = value.trim(); // RFC 9110 OWS
  const sentinel = /^=\?base64\?(.*)\?=$/i.exec(trimmed);
  if (!sentinel) return trimmed;
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(sentinel[1]) || sentinel[1].length % 4 !== 0) return undefined;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(base64ToBytes(sentinel[1]));
  } catch {
    return undefined;
  }
}

/** Compares two strings in time that does not depend on where they differ. */
function constantTimeEqual(a: string, b: string): boolean {
  const x = encoder.encode(a);
  const y = encoder.encode(b);
  let difference = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); i++) difference |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return difference === 0;
}

/**
 * The answer to one request: undecided until its first message. The request's
 * own response first makes a JSON body; anything else first (progress, a log
 * message, a question to the client) makes an SSE stream that the response ends.
 */
class Exchange {
  readonly response: Promise<Response>;
  #resolve!: (response: Response) => void;
  #headers: Record<string, string>;
  #statusOf: (errorCode: number | undefined) => number;
  #stream: SseStream | undefined;
  #decided = false;
  onCancel: () => void = noop;

  #prelude: string;

  /**
   * `statusOf`: the HTTP status of a JSON answer from its error code (none for a result); `prelude`: what an SSE
   * answer starts with (a legacy session's priming event).
   */
  constructor(
    headers: Record<string, string>,
    statusOf: (errorCode: number | undefined) => number,
    prelude = "",
  ) {
    this.#headers = headers;
    this.#statusOf = statusOf;
    this.#prelude = prelude;
    this.response = new Promise((resolve) => this.#resolve = resolve);
  }

  /** Whether the response has been sent (or the client went away). */
  get finished(): boolean {
    return this.#stream ? this.#stream.ended : this.#decided;
  }

  /** Whether its stream holds more than the client has read (see SseStream). */
  get lagging(): boolean {
    return this.#stream?.lagging ?? false;
  }

  /**
   * Sends one message; `final` when it is the request's own response (`errorCode` when that is an error);
   * `eventId` numbers it on a stream.
   */
  write(text: string, final: boolean, eventId?: string, errorCode?: number): void {
    if (!this.#decided && final) {
      this.#decided = true;
      const headers = { ...this.#headers, "content-type": "application/json" };
      this.#resolve(new Response(text, { status: this.#statusOf(errorCode), headers }));
      return;
    }
    this.openStream();
    this.#stream?.send(text, eventId);
    if (final) this.#stream?.end();
  }

  /** Answers with an SSE stream now, before any message (so that a closed connection is noticed). */
  openStream(): void {
    if (this.#decided) return;
    this.#decided = true;
    this.#stream = new SseStream(() => this.onCancel(), this.#prelude);
    this.#resolve(new Response(this.#stream.body, { headers: { ...this.#headers, ...SSE_HEADERS } }));
  }

  /** Ends it with nothing more to send (its request was cancelled): an SSE stream that ends at once. */
  abandon(): void {
    this.openStream();
    this.#stream?.end();
  }

  /** Ends it unanswered: 503 with `why` if nothing was sent yet, else the stream ends. */
  close(why: string): void {
    if (!this.#decided) {
      this.#decided = true;
      this.#resolve(rpcErrorResponse(503, null, ErrorCode.InternalError, why));
    }
    this.#stream?.end();
  }
}

/** One SSE response body. A comment every 15 s keeps a quiet one open through proxies. */
class SseStream {
  readonly body: ReadableStream<Uint8Array>;
  ended = false;
  #controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  #onCancel: () => void;
  #keepAlive: ReturnType<typeof setInterval>;

  constructor(onCancel: () => void, prelude = "") {
    this.#onCancel = onCancel;
    this.body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.#controller = controller;
        if (prelude) controller.enqueue(encoder.encode(prelude));
      },
      cancel: () => {
        // streamable-http.mdx: a closed response stream cancels the request.
        this.#stop();
        this.#onCancel();
      },
    }, new ByteLengthQueuingStrategy({ highWaterMark: SINK_HIGH_WATER }));
    this.#keepAlive = setInterval(() => {
      try {
        this.#controller?.enqueue(encoder.encode(":\n\n"));
      } catch {
        this.#stop();
      }
    }, SSE_KEEP_ALIVE_MS);
    (this.#keepAlive as { unref?: () => void }).unref?.();
  }

  #stop(): void {
    this.ended = true;
    clearInterval(this.#keepAlive);
  }

  /** More than SINK_HIGH_WATER bytes wait for a client that is not reading them. */
  get lagging(): boolean {
    return !this.ended && (this.#controller?.desiredSize ?? 1) <= 0;
  }

  send(text: string, eventId?: string): void {
    if (this.ended) return;
    const id = eventId === undefined ? "" : `id: ${eventId}\n`;
    try {
      this.#controller!.enqueue(encoder.encode(`${id}event: message\ndata: ${text}\n\n`));
    } catch {
      this.#stop(); // closed under us
    }
  }

  end(): void {
    if (this.ended) return;
    this.#stop();
    try {
      this.#controller!.close();
    } catch {
      // already closed
    }
  }
}

// A stream of a legacy session: its events are numbered and kept, so a client
// whose connection dropped can resume it with Last-Event-ID (transports.mdx, 2025-11-25).
interface SessionStream {
  id: number;
  events: { id: string; text: string }[];
  live: SseStream | undefined;
  exchange: Exchange | undefined; // a POST's, until it has been answered
}

// A legacy Streamable HTTP session: one McpServer, its streams, and when it was last used.
interface LegacySession {
  id: string;
  server: McpServer;
  protocolVersion: string;
  lastSeen: number;
  streams: Map<number, SessionStream>; // by stream id
  byRequest: Map<RequestId, SessionStream>; // a POST's stream, until its response
  standalone: SessionStream; // the GET stream's: server-initiated messages
  nextStream: number;
  principal: string; // whose token began it (a protected server): nobody else may use it
  subject: string | undefined; // that token's sub: the per-subject cap counts these
  touched?: number; // replicas: when its key's life was last renewed in the store
}

const DEFAULT_MAX_SESSIONS = 1000;
const MAX_SESSIONS_PER_SUBJECT = 100;
const SESSION_KEY = "mcp:s:";
const SESSION_IDS = "mcp:sz";

// A legacy session as the store keeps it: whose it is, and what its client made of it.
function sessionRecord(principal: string, state: SessionState): string {
  return JSON.stringify({ principal, state });
}

function parseSessionRecord(raw: StoreReply): { principal: string; state: SessionState } | undefined {
  const record = typeof raw === "string" ? parseJsonObject(raw) : undefined;
  const ok = record && typeof record.principal === "string" && isObject(record.state) &&
    typeof record.state.protocolVersion === "string" && isObject(record.state.capabilities) &&
    typeof record.state.logLevel === "number" && Array.isArray(record.state.subscriptions);
  return ok ? record as { principal: string; state: SessionState } : undefined;
}

function sessionNotFound(): Response {
  return new Response(
    JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } }),
    { status: 404, headers: { "content-type": "application/json" } },
  );
}

// A legacy request while the store replicas share is unreachable: 503 at once, naming the store.
function storeUnavailable(store: ReplicaStore, id: unknown): Response {
  return rpcErrorResponse(503, id, ErrorCode.InternalError, store.unavailable().message);
}

// --- 10c. The HTTP front: what every listener checks, written once ---
// serve --http, createHandler, gateway --http, proxy --http and replay --http all stand behind
// httpFront: Host and Origin (DNS rebinding), CORS and preflight, /health, the token or OAuth check
// and Protected Resource Metadata, the body's limits. A listener adds only its route for the MCP
// endpoint; the CORS headers of an allowed origin are put on whatever the route answers, once.

// A body over the cap is read on (and dropped) up to this many bytes before the 413: a client still
// sending then reads the answer instead of EPIPE (Bun closed at once: 2 of 20 got the 413).
const DRAIN_BEFORE_413_BYTES = 64 * 1024 * 1024;

/**
 * A request's body as text, at most `maxBytes`: a 413 past that (the body
 * drained first, up to a bound), a 400 for a body that ends before its
 * Content-Length (the runtimes answered 500 or closed).
 */
async function readRequestBody(request: Request, maxBytes: number): Promise<string | Response> {
  const declared = Number(request.headers.get("content-length") ?? NaN);
  const tooLarge = async () => {
    await drainBody(request.body!, DRAIN_BEFORE_413_BYTES);
    return rpcErrorResponse(
      413,
      null,
      ErrorCode.InvalidRequest,
      `Invalid request: message exceeds the ${maxBytes}-byte limit (--max-line-bytes)`,
    );
  };
  if (declared > maxBytes) return await tooLarge();
  try {
    // With a length already checked, the runtime's own text() is the fast path: no stream to drive, and
    // `request.body` not even touched (on Deno that getter alone builds a ReadableStream: 5% of a call).
    if (Number.isFinite(declared)) return await request.text();
    if (!request.body) return "";
    const reader = request.body.getReader();
    const parts: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > maxBytes) {
        reader.releaseLock();
        return await tooLarge();
      }
      parts.push(value);
    }
    return new TextDecoder().decode(concatBytes(parts, size));
  } catch {
    return bodyCutShort();
  }
}

/**
 * A request's body parsed as JSON, within the limits of {@linkcode readRequestBody};
 * a 400 Parse error when it is not JSON. A refusal is a Response (no JSON value is one).
 * `onText` is given the body as it came first (for --trace, or a proxy passing it on).
 */
function readRequestJson(request: Request, maxBytes: number, onText?: (text: string) => void): Promise<unknown> {
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (declared <= maxBytes && !onText) {
    // The runtime's json() with the length checked: on Deno 2.9.6 it costs 1.7 µs a request less than
    // JSON.parse(await text()) (wrk, 2026-11-25); Bun 1.4.4 0.3 µs. Not async: a promise less.
    return request.json().catch((error) => error instanceof SyntaxError ? notJson() : bodyCutShort());
  }
  return readRequestBody(request, maxBytes).then((text) => {
    if (text instanceof Response) return text;
    onText?.(text);
    try {
      return JSON.parse(text);
    } catch {
      return notJson();
    }
  });
}

const notJson = () => rpcErrorResponse(400, null, ErrorCode.ParseError, "Parse error: not valid JSON");
const bodyCutShort = () =>
  rpcErrorResponse(400, null, ErrorCode.InvalidRequest, "Invalid request: the body ended before its Content-Length");

// Reads a body to its end (or `bound` bytes, or an error), keeping nothing.
async function drainBody(body: ReadableStream<Uint8Array>, bound: number): Promise<void> {
  try {
    const reader = body.getReader();
    for (let size = 0; size <= bound;) {
      const { done, value } = await reader.read();
      if (done) return;
      size += value.length;
    }
    await reader.cancel();
  } catch {
    // the client went away, or the body ended short: the answer goes out all the same
  }
}

/**
 * The DNS-rebinding checks of every listener (transports.mdx "Security Warning"):
 * the Host must be one of our names; a browser's Origin must be one of our own
 * origins (same scheme, one of our names, the port the request came to) or one
 * allowed by --allow-origin. A refusal, or the CORS headers the answer carries.
 * `url` is the request's URL and `pathStart` where its path begins.
 */
function checkHostAndOrigin(
  request: Request,
  url: string,
  pathStart: number,
  hosts: Set<string>,
  origins: Set<string>,
): Response | Record<string, string> {
  const rawHost =
    (request.headers.get("host") ?? url.slice(url.indexOf("//") + 2, pathStart < 0 ? undefined : pathStart))
      .toLowerCase();
  const host = rawHost.replace(/:\d+$/, "");
  if (!hosts.has("*") && !hosts.has(host)) {
    return rpcErrorResponse(403, null, ErrorCode.InvalidRequest, `Forbidden: Host "${host}" is not this server`);
  }
  const origin = request.headers.get("origin");
  if (origin === null) return NO_HEADERS;
  if (origins.has(origin)) {
    return { "access-control-allow-origin": origin, "access-control-expose-headers": "mcp-session-id", vary: "origin" };
  }
  const scheme = url.slice(0, url.indexOf(":") + 1).toLowerCase();
  const defaultPort = scheme === "https:" ? "443" : "80";
  const port = /:(\d+)$/.exec(rawHost)?.[1] ?? defaultPort;
  let own = false;
  try {
    const from = new URL(origin);
    own = from.protocol === scheme && (from.port || defaultPort) === port &&
      (hosts.has(from.hostname) || (hosts.has("*") && from.hostname === host));
  } catch {
    // not a URL: refused below
  }
  if (!own) {
    return rpcErrorResponse(403, null, ErrorCode.InvalidRequest, `Forbidden: Origin "${origin}" is not allowed`);
  }
  return NO_HEADERS;
}

const NO_HEADERS: Record<string, string> = Object.freeze({}) as Record<string, string>;

/** What the front hands a route: the request, who sent it, and its body within the limits. */
interface Arrival {
  request: Request;
  /** `request.method`, read once (on Deno each read is a call into the runtime). */
  method: string;
  /** What the request's verified token says (a protected server). */
  auth: AuthInfo | undefined;
  /**
   * The body parsed, within the limits: a 413 or 400 Response when it is over the limit or ends short, a 400 when
   * it is not JSON. `onText` sees the text first.
   */
  json(onText?: (text: string) => void): Promise<unknown>;
}

/** The rules of one listener's front. */
interface FrontPolicy {
  /** Keep what the runtime says of each request's peer (REQUEST_PEERS): telemetry's client.address. */
  keepPeers?: boolean;
  /** The MCP endpoint; anything else but /health and the metadata is 404. */
  path: string;
  /** Host names a request's Host may name; "*" allows any. */
  allowedHosts: string[];
  /** Browser origins allowed besides the server's own (they get CORS answers). */
  allowOrigins?: string[];
  /** Every request must carry `Authorization: Bearer <token>`. */
  token?: string;
  /** An OAuth protected resource: its tokens are checked here, its metadata served here. */
  auth?: ResourceServerOptions;
  /** Longest body (default 4 MiB). */
  maxBodyBytes?: number;
  /** The methods the endpoint takes, for preflight (e.g. "GET, POST, DELETE"). */
  methods: string;
  /** Serves a request to the endpoint that passed every check. */
  route(arrival: Arrival): Promise<Response> | Response;
  /** GET /metrics: its text, and a token good for it alone (beside the endpoint's own credentials). */
  metrics?: { render(): string; token?: string };
}

/** A fetch handler that checks a request as `policy` says, then hands it to `policy.route`. @internal */
export function httpFront(policy: FrontPolicy): (request: Request, info?: unknown) => Promise<Response> {
  const { path } = policy;
  const hosts = new Set(policy.allowedHosts);
  const origins = new Set(policy.allowOrigins ?? []);
  const maxBodyBytes = policy.maxBodyBytes ?? DEFAULT_MAX_LINE_BYTES;
  const verifier = policy.auth ? new TokenVerifier(policy.auth) : undefined;
  const dpop = policy.auth ? new DpopVerifier(policy.auth) : undefined;
  const wellKnown = "/.well-known/oauth-protected-resource";
  // The protected resource: a configured audience (the one the request came in by, when several are),
  // never the Host header's own word.
  const resourceOf = (verifier: TokenVerifier, url: string, pathStart: number) => {
    const asked = url.slice(0, pathStart) + path;
    return verifier.audiences.find((audience) => audience === asked) ?? verifier.audiences[0] ?? asked;
  };
  const preflight = {
    "access-control-allow-methods": `${policy.methods}, OPTIONS`,
    "access-control-allow-headers": CORS_ALLOW_HEADERS,
    "access-control-max-age": "86400",
  };
  // What every request that passed the checks gets: its route's answer, with an allowed origin's CORS headers
  // put on once (none for a same-origin request). Not async: an await per request is measurable here.
  const routed = (request: Request, method: string, auth: AuthInfo | undefined, cors: Record<string, string>) => {
    const answer = policy.route({
      request,
      method,
      auth,
      json: (onText) => readRequestJson(request, maxBodyBytes, onText),
    });
    if (cors === NO_HEADERS) return answer;
    return Promise.resolve(answer).then((response) => {
      for (const name in cors) response.headers.set(name, cors[name]);
      return response;
    });
  };
  // A protected resource: the token is checked (asynchronously: the issuer's keys) before the route.
  const verified = async (
    { request, method, url, pathStart, route }: {
      request: Request;
      method: string;
      url: string;
      pathStart: number;
      route?: string; // a route of its own (/metrics) at the resource's origin, not the MCP endpoint
    },
    cors: Record<string, string>,
    then?: () => Response,
  ): Promise<Response> => {
    const given = /^(Bearer|DPoP)\s+(\S+)\s*$/i.exec(request.headers.get("authorization") ?? "");
    const token = given?.[2];
    let checked = token === undefined ? undefined : await verifier!.verify(token);
    // (Asked only where needed: most requests carry an unbound token and no proof.)
    const resource = () => resourceOf(verifier!, url, pathStart);
    if (checked !== undefined && "claims" in checked) {
      // The proof names this resource: a configured audience, never the Host header's own word (a proof made for
      // another server that shares the token's audience is refused); for /metrics, that route at its origin.
      const htu = () => safeUrl(route === undefined ? resource() : new URL(route, resource()).href);
      checked = await dpop!.check(request, given![1], token!, checked.claims, htu) ?? checked;
    }
    if (checked === undefined || !("claims" in checked)) {
      const refusal = checked as TokenRefusal | undefined;
      // The metadata of that resource, as the document names it: a Host header does not choose where a
      // client is sent.
      const { origin, pathname: at } = new URL(resource());
      const metadata = `${origin}${wellKnown}${at === "/" ? "" : at}`;
      const headers: Record<string, string> = {
        ...cors,
        "www-authenticate": bearerChallenge(metadata, policy.auth!, refusal),
        "access-control-expose-headers": "www-authenticate, dpop-nonce",
      };
      const nonce = refusal?.dpop ? dpop!.nonce() : undefined;
      if (nonce !== undefined) headers["dpop-nonce"] = nonce;
      return new Response(refusal?.status === 403 ? "Forbidden\n" : "Unauthorized\n", {
        status: refusal?.status ?? 401,
        headers,
      });
    }
    return tokenRefusal(request, cors) ?? (then ? then() : await routed(request, method, checked, cors));
  };
  // GET /metrics: its own token, else the endpoint's credentials (none on a loopback server without them); no CORS.
  const metricsAnswer = (request: Request, method: string, url: string, pathStart: number) => {
    const metrics = policy.metrics!;
    const answer = () =>
      new Response(metrics.render(), { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } });
    const given = /^Bearer\s+(.+)$/i.exec(request.headers.get("authorization") ?? "")?.[1];
    if (metrics.token !== undefined && given !== undefined && constantTimeEqual(given, metrics.token)) return answer();
    if (verifier) return verified({ request, method, url, pathStart, route: "/metrics" }, NO_HEADERS, answer);
    if (policy.token === undefined && metrics.token !== undefined) {
      // The user asked for a token: /metrics is never open then, loopback or not.
      return new Response("Unauthorized\n", { status: 401, headers: { "www-authenticate": 'Bearer realm="metrics"' } });
    }
    return tokenRefusal(request, NO_HEADERS) ?? answer();
  };
  // --token: the static bearer token, compared in constant time.
  const tokenRefusal = (request: Request, cors: Record<string, string>): Response | undefined => {
    if (policy.token === undefined) return undefined;
    const given = /^Bearer\s+(.+)$/i.exec(request.headers.get("authorization") ?? "")?.[1] ?? "";
    if (constantTimeEqual(given, policy.token)) return undefined;
    return new Response("Unauthorized\n", {
      status: 401,
      headers: { ...cors, "www-authenticate": 'Bearer realm="mcp"' },
    });
  };
  const front = (request: Request): Promise<Response> | Response => {
    // The path and host by string slicing: a URL object per request is measurable at this rate.
    const { url, method } = request;
    const pathStart = url.indexOf("/", url.indexOf("//") + 2);
    const pathEnd = url.indexOf("?", pathStart);
    const pathname = pathStart < 0 ? "/" : url.slice(pathStart, pathEnd < 0 ? undefined : pathEnd);
    const cors = checkHostAndOrigin(request, url, pathStart, hosts, origins);
    if (cors instanceof Response) return cors;
    if (method === "OPTIONS") return new Response(null, { status: 204, headers: { ...cors, ...preflight } });
    if (pathname === "/health" && method === "GET") return Response.json({ status: "ok" }, { headers: cors });
    if (pathname === "/metrics" && method === "GET" && policy.metrics) {
      return metricsAnswer(request, method, url, pathStart);
    }
    if (verifier && (pathname === wellKnown || pathname === wellKnown + path) && method === "GET") {
      // RFC 9728 at both forms; anyone may read it (a browser client too).
      return Response.json(protectedResourceMetadata(resourceOf(verifier, url, pathStart), policy.auth!), {
        headers: { ...cors, "access-control-allow-origin": "*", "cache-control": "max-age=300" },
      });
    }
    if (pathname !== path) return new Response("Not Found\n", { status: 404, headers: cors });
    if (verifier) return verified({ request, method, url, pathStart }, cors);
    return tokenRefusal(request, cors) ?? routed(request, method, undefined, cors);
  };
  const keepPeers = policy.keepPeers === true;
  return (request, info) => {
    if (keepPeers && info !== undefined) REQUEST_PEERS.set(request, info);
    const answer = front(request);
    return answer instanceof Promise ? answer : Promise.resolve(answer);
  };
}

// What the runtime's server said of each request's peer, kept only while tracing (client.address on its span).
const REQUEST_PEERS = new WeakMap<Request, unknown>();

// --- 10d. createHandler: the MCP endpoint behind the front, its legacy sessions and stateless requests ---

// One POST to the MCP endpoint, read and parsed once: what each era's handler takes.
interface Incoming {
  request: Request;
  auth: AuthInfo | undefined;
  message: JsonObject;
}

/**
 * The legacy sessions of one handler (Streamable HTTP, 2025-11-25): each
 * initialize opens one, at most `maxSessions` (and 100 per token subject); a
 * request's messages go on its POST's stream, the rest on the GET stream; SSE
 * events are kept for Last-Event-ID; an idle session ends after `ttl`.
 */
class LegacySessions {
  #core: ServerCore;
  #ttl: number;
  #maxSessions: number;
  #trace: ((line: string) => void) | undefined;
  #sessions = new Map<string, LegacySession>();
  #sweep: ReturnType<typeof setInterval> | undefined;
  #store: ReplicaStore | undefined; // replicas: the sessions are in the store, those used here cached (see below)

  constructor(core: ServerCore, options: HandlerOptions, store: ReplicaStore | undefined) {
    this.#core = core;
    this.#ttl = options.sessionTtl ?? DEFAULT_SESSION_TTL_MS;
    this.#maxSessions = options.maxSessions ?? DEFAULT_MAX_SESSIONS;
    this.#trace = options.onTrace;
    this.#store = store;
    store?.subscribe((message) => this.#heard(message));
  }

  /** DELETE: ends the session the request names (on every replica). */
  delete(arrival: Arrival): Response | Promise<Response> {
    return this.#withSession(arrival, (found) => {
      this.#end(found);
      if (this.#store) this.#forget(found.id, found.subject);
      return new Response(null, { status: 200 });
    });
  }

  // The session a request names, then what to answer with it (the store may have to be read first).
  #withSession(
    arrival: { request: Request; auth: AuthInfo | undefined },
    then: (session: LegacySession) => Response | Promise<Response>,
  ): Response | Promise<Response> {
    if (this.#store && !this.#store.available) {
      return this.#whenReady(() => this.#withSession(arrival, then), null);
    }
    const found = this.#findSession(arrival);
    if (found instanceof Response) return found;
    if (found instanceof Promise) return found.then((session) => session instanceof Response ? session : then(session));
    return then(found);
  }

  /** Ends every session and its streams. */
  close(): void {
    clearInterval(this.#sweep);
    for (const session of [...this.#sessions.values()]) this.#end(session);
  }

  #end(session: LegacySession): void {
    this.#sessions.delete(session.id);
    session.server.close();
    for (const stream of session.streams.values()) {
      stream.live?.end();
      stream.exchange?.close("the session has ended");
    }
  }

  #expire(): void {
    const now = Date.now();
    for (const session of this.#sessions.values()) {
      if (now - session.lastSeen <= this.#ttl) continue;
      // With replicas, a GET stream held here for a session used elsewhere lasts as long as the session's record.
      if (this.#store && session.standalone.live) {
        void this.#store.call("EXISTS", SESSION_KEY + session.id).then(
          (found) => found === 0 && this.#end(session),
          noop,
        );
      } else {
        this.#end(session);
      }
    }
    if (this.#sessions.size === 0) {
      clearInterval(this.#sweep);
      this.#sweep = undefined;
    }
  }

  /** A legacy POST: initialize opens a session; anything else goes to the session it names. */
  post(incoming: Incoming): Promise<Response> | Response {
    const { request, message, auth } = incoming;
    const { id, method } = message;
    const isRequest = typeof method === "string" && isRequestId(id);
    if (this.#store && !this.#store.available) return this.#whenReady(() => this.post(incoming), id);
    if (method === "initialize") {
      if (request.headers.get("mcp-session-id")) {
        return rpcErrorResponse(
          400,
          id,
          ErrorCode.InvalidRequest,
          "Invalid request: this session is already initialized",
        );
      }
      if (!isRequestId(id)) {
        return rpcErrorResponse(400, id, ErrorCode.InvalidRequest, "Invalid request: initialize needs an id");
      }
      if (this.#store) return this.#initializeShared(incoming, id);
      if (!this.#makeRoom(auth?.sub)) {
        return rpcErrorResponse(
          503,
          id,
          ErrorCode.InternalError,
          "Server busy: every legacy session is in use (--max-sessions); try again later",
        );
      }
      return this.#initialize(incoming, id);
    }
    return this.#withSession(incoming, (found) => this.#received(found, incoming, isRequest));
  }

  #initialize(incoming: Incoming, id: RequestId, opened?: (session: LegacySession) => void): Promise<Response> {
    const session = this.#openSession(incoming.auth);
    const params = isObject(incoming.message.params) ? incoming.message.params : {};
    session.protocolVersion = (SUPPORTED_PROTOCOL_VERSIONS as readonly unknown[]).includes(params.protocolVersion)
      ? String(params.protocolVersion)
      : LATEST_PROTOCOL_VERSION;
    opened?.(session);
    return this.#answer(session, incoming, id, { "mcp-session-id": session.id });
  }

  // A request of a session found: served here; a notification or answer is taken here, or, when it is about
  // a request or question of another replica's, sent to that replica on the bus.
  #received(found: LegacySession, incoming: Incoming, isRequest: boolean): Response | Promise<Response> {
    const { request, message, auth } = incoming;
    const { id } = message;
    const version = request.headers.get("mcp-protocol-version")?.trim();
    if (version && !(SUPPORTED_PROTOCOL_VERSIONS as readonly string[]).includes(version)) {
      return rpcErrorResponse(
        400,
        id,
        ErrorCode.InvalidRequest,
        `Invalid request: unsupported MCP-Protocol-Version "${version}" (supported: ${
          SUPPORTED_PROTOCOL_VERSIONS.join(", ")
        })`,
      );
    }
    if (!isRequest) {
      found.server.auth = auth;
      if (this.#store && !this.#isHere(found, message)) {
        this.#store.publish({ t: "in", s: found.id, m: message });
      } else {
        this.#take(found, message);
      }
      return new Response(null, { status: 202 });
    }
    return this.#answer(found, incoming, id as RequestId, NO_HEADERS);
  }

  // A notification, or the answer to a question the session asked.
  #take(found: LegacySession, message: JsonObject): void {
    found.server.receive(message);
    const cancelled = message.method === "notifications/cancelled" && isObject(message.params)
      ? message.params.requestId
      : undefined;
    const stream = isRequestId(cancelled) ? found.byRequest.get(cancelled) : undefined;
    if (stream) {
      // cancellation.mdx: no response for it; its POST ends without one.
      found.byRequest.delete(cancelled as RequestId);
      found.streams.delete(stream.id);
      stream.exchange?.abandon();
    }
  }

  // Whether a message is about this replica's own: an answer to a question asked here, the cancel of a request
  // served here; any other notification is the session's, taken wherever it comes.
  #isHere(found: LegacySession, message: JsonObject): boolean {
    if (message.method === undefined) return !isRequestId(message.id) || found.server.awaitsAnswer(message.id);
    if (message.method !== "notifications/cancelled" || !isObject(message.params)) return true;
    const { requestId } = message.params;
    return !isRequestId(requestId) || found.server.serving(requestId) || found.byRequest.has(requestId);
  }

  // The store is not answering now: refused at once, or, before its first connection, once that is tried.
  async #whenReady(again: () => Response | Promise<Response>, id: unknown): Promise<Response> {
    const store = this.#store!;
    return (await store.ready()) ? await again() : storeUnavailable(store, id);
  }

  // --- Replicas (--state redis://…): sessions in the store, each replica caching those it serves ---
  // mcp:s:ID holds a session's state (what initialize, setLevel and subscribe made), expiring after --session-ttl
  // without use; mcp:sz and mcp:sz:SUBJECT list the sessions by last use (the caps, across replicas). A replica
  // serves a session from its cache, reading the store only for one it has not served yet; a change of state is
  // one write and one message on the bus, so the other replicas' caches follow. Also on the bus: a session's end,
  // a notification for the GET stream another replica holds, an answer to a question another replica asked.

  async #initializeShared(incoming: Incoming, id: RequestId): Promise<Response> {
    const store = this.#store!;
    const subject = incoming.auth?.sub;
    try {
      await this.#makeSharedRoom(subject);
    } catch {
      return storeUnavailable(store, id);
    }
    let session!: LegacySession;
    const response = this.#initialize(incoming, id, (opened) => session = opened);
    try {
      // Stored before the client hears of it: its next request may reach another replica.
      await store.call(
        "SET",
        SESSION_KEY + session.id,
        sessionRecord(session.principal, session.server.sessionState()),
        "PX",
        this.#ttl,
      );
    } catch {
      this.#end(session);
      return storeUnavailable(store, id);
    }
    this.#touch(session, true);
    return response;
  }

  // The caps across replicas: at the cap, the least recently used session ends (everywhere).
  async #makeSharedRoom(subject: string | undefined): Promise<void> {
    const store = this.#store!;
    const since = Date.now() - this.#ttl;
    const lists: [string, number][] = [[SESSION_IDS, this.#maxSessions]];
    if (subject !== undefined) lists.push([`${SESSION_IDS}:${subject}`, MAX_SESSIONS_PER_SUBJECT]);
    for (const [list, cap] of lists) {
      const [, count] = await Promise.all([
        store.call("ZREMRANGEBYSCORE", list, "-inf", since),
        store.call("ZCARD", list),
      ]);
      if (Number(count) < cap) continue;
      const [oldest] = await store.call("ZRANGE", list, 0, 0) as string[];
      if (oldest === undefined) continue;
      const session = this.#sessions.get(oldest);
      if (session) this.#end(session);
      this.#forget(oldest, undefined);
      store.write("ZREM", list, oldest);
    }
  }

  // A session used: its key's life renewed, its place in the lists, at most once per tenth of its TTL.
  #touch(session: LegacySession, now = false): void {
    const store = this.#store;
    if (!store || (!now && session.lastSeen - (session.touched ?? 0) < this.#ttl / 10)) return;
    session.touched = session.lastSeen;
    store.write("PEXPIRE", SESSION_KEY + session.id, this.#ttl);
    store.write("ZADD", SESSION_IDS, session.lastSeen, session.id);
    if (session.subject !== undefined) {
      store.write("ZADD", `${SESSION_IDS}:${session.subject}`, session.lastSeen, session.id);
    }
  }

  // A session ended here (DELETE, or made room of): out of the store, and out of every replica's cache.
  #forget(id: string, subject: string | undefined): void {
    const store = this.#store!;
    store.write("DEL", SESSION_KEY + id);
    store.write("ZREM", SESSION_IDS, id);
    if (subject !== undefined) store.write("ZREM", `${SESSION_IDS}:${subject}`, id);
    store.publish({ t: "end", s: id });
  }

  // A session this replica has not served yet, from the store (undefined: not there, or another principal's).
  async #load(id: string, auth: AuthInfo | undefined): Promise<LegacySession | Response> {
    const store = this.#store!;
    let raw: StoreReply;
    try {
      raw = await store.call("GET", SESSION_KEY + id);
    } catch {
      return storeUnavailable(store, null);
    }
    const record = parseSessionRecord(raw);
    if (!record || record.principal !== principalOf(auth)) return sessionNotFound();
    let session = this.#sessions.get(id); // loaded by another request meanwhile
    if (!session) {
      session = this.#openSession(auth, id);
      session.server.restoreSession(record.state);
      session.protocolVersion = record.state.protocolVersion;
    }
    session.lastSeen = Date.now();
    this.#touch(session);
    return session;
  }

  // What another replica said on the bus about a session cached here.
  #heard(message: JsonObject): void {
    const session = typeof message.s === "string" ? this.#sessions.get(message.s) : undefined;
    if (!session || message.from === this.#store!.replica) return;
    switch (message.t) {
      case "end":
        return this.#end(session);
      case "state":
        if (isObject(message.r)) session.server.restoreSession(message.r as unknown as SessionState);
        return;
      case "out": // for the GET stream, if it is open here
        if (typeof message.text === "string" && session.standalone.live) {
          this.#emit(session.standalone, message.text, false);
        }
        return;
      case "in":
        if (isObject(message.m) && this.#isHere(session, message.m)) this.#take(session, message.m);
        return;
    }
  }

  // At the cap (all sessions, or the subject's), the least recently used idle session is closed: no request
  // in flight, no GET stream open. False when every one is busy.
  #makeRoom(subject: string | undefined): boolean {
    if (subject !== undefined) {
      const mine = [...this.#sessions.values()].filter((session) => session.subject === subject);
      if (mine.length >= MAX_SESSIONS_PER_SUBJECT) return this.#closeLeastRecent(mine);
    }
    return this.#sessions.size < this.#maxSessions || this.#closeLeastRecent(this.#sessions.values());
  }

  #closeLeastRecent(candidates: Iterable<LegacySession>): boolean {
    let oldest: LegacySession | undefined;
    for (const session of candidates) {
      const idle = session.byRequest.size === 0 && !session.standalone.live;
      if (idle && (!oldest || session.lastSeen < oldest.lastSeen)) oldest = session;
    }
    if (oldest) this.#end(oldest);
    return oldest !== undefined;
  }

  #openSession(auth: AuthInfo | undefined, id: string = crypto.randomUUID()): LegacySession {
    const standalone: SessionStream = { id: 0, events: [], live: undefined, exchange: undefined };
    const byRequest = new Map<RequestId, SessionStream>();
    const server = new McpServer(this.#core, (text, context) => {
      // A message goes where its request came from while that is open, else on the GET stream.
      const own = context?.requestId === undefined ? undefined : byRequest.get(context.requestId);
      const final = own !== undefined && context!.final === true;
      this.#emit(own ?? standalone, text, final, own === undefined ? session.id : undefined);
      if (final) byRequest.delete(context!.requestId!);
    });
    const session: LegacySession = {
      id,
      server,
      protocolVersion: LATEST_PROTOCOL_VERSION,
      lastSeen: Date.now(),
      streams: new Map([[0, standalone]]),
      byRequest,
      standalone,
      nextStream: 1,
      principal: principalOf(auth),
      subject: auth?.sub,
    };
    server.sessionId = session.id;
    server.lagging = (requestId) => {
      const stream = byRequest.get(requestId) ?? standalone;
      return (stream.exchange && !stream.exchange.finished ? stream.exchange.lagging : stream.live?.lagging) ?? false;
    };
    const store = this.#store;
    if (store) {
      // Each replica's copy numbers its questions from its own random start (one of 2^21, 2^31 apart): an
      // answer finds the copy that asked.
      server.startIdsAt(Math.floor(Math.random() * 2 ** 21) * 2 ** 31);
      server.onStateChange = () => {
        const state = session.server.sessionState();
        store.write("SET", SESSION_KEY + session.id, sessionRecord(session.principal, state), "PX", this.#ttl);
        store.publish({ t: "state", s: session.id, r: state as unknown as JsonObject });
      };
    }
    this.#sessions.set(session.id, session);
    this.#sweep ??= setInterval(() => this.#expire(), Math.min(this.#ttl, 60_000));
    (this.#sweep as { unref?: () => void }).unref?.();
    return session;
  }

  // Numbers and keeps the event, then sends it on the stream's open connection, if any. With replicas, what is
  // for a session's GET stream (`unasked`: its id) goes on the bus when the stream is not open here.
  #emit(stream: SessionStream, text: string, final: boolean, unasked?: string): void {
    this.#trace?.(`> ${text}`);
    if (unasked !== undefined && this.#store && !stream.live) this.#store.publish({ t: "out", s: unasked, text });
    const last = stream.events.at(-1);
    const eventId = `${stream.id}-${last ? Number(last.id.split("-")[1]) + 1 : 1}`;
    stream.events.push({ id: eventId, text });
    if (stream.events.length > SSE_HISTORY) stream.events.splice(0, stream.events.length - SSE_HISTORY);
    if (stream.exchange && !stream.exchange.finished) {
      // The POST's own answer: JSON when the response comes first, else an SSE stream.
      stream.exchange.write(text, final, eventId);
      return;
    }
    stream.live?.send(text, eventId);
    if (final) stream.live?.end();
  }

  // Priming event (transports.mdx, 2025-11-25): an id and empty data, and how long to wait before reconnecting.
  #priming(session: LegacySession, eventId: string): string {
    return session.protocolVersion >= "2025-11-25" ? `id: ${eventId}\nretry: ${SSE_RETRY_MS}\ndata: \n\n` : "";
  }

  // A legacy request on its session: its answer is its POST's (JSON, or an SSE stream kept for Last-Event-ID).
  #answer(
    session: LegacySession,
    incoming: Incoming,
    id: RequestId,
    headers: Record<string, string>,
  ): Promise<Response> {
    const stream: SessionStream = { id: session.nextStream++, events: [], live: undefined, exchange: undefined };
    const exchange = new Exchange(headers, () => 200, this.#priming(session, `${stream.id}-0`));
    stream.exchange = exchange;
    session.streams.set(stream.id, stream);
    session.byRequest.set(id, stream);
    // Answered streams are kept for Last-Event-ID, the newest ones only: memory stays bounded.
    if (session.streams.size > KEPT_STREAMS) {
      const waiting = new Set(session.byRequest.values());
      for (const old of session.streams.values()) {
        if (session.streams.size <= KEPT_STREAMS) break;
        if (old !== session.standalone && !waiting.has(old)) session.streams.delete(old.id);
      }
    }
    // transports.mdx: a dropped POST stream is not a cancellation; its events wait for a GET with Last-Event-ID.
    exchange.onCancel = () => {
      stream.exchange = undefined;
    };
    session.server.auth = incoming.auth;
    session.server.receive(incoming.message);
    return exchange.response;
  }

  // The session a request names, if it is there, alive and its sender's.
  #findSession(
    { request, auth }: { request: Request; auth: AuthInfo | undefined },
  ): LegacySession | Response | Promise<LegacySession | Response> {
    const id = request.headers.get("mcp-session-id");
    if (!id) {
      return rpcErrorResponse(
        400,
        null,
        ErrorCode.InvalidRequest,
        "Invalid request: the Mcp-Session-Id header is required",
      );
    }
    let session = this.#sessions.get(id);
    // A session is its starter's: another token's holder finds none (no hint that it exists).
    if (session && session.principal !== principalOf(auth)) session = undefined;
    if (session && Date.now() - session.lastSeen > this.#ttl) {
      this.#end(session); // with replicas, only this replica's copy: the store says whether it lives
      session = undefined;
    }
    if (!session) return this.#store ? this.#load(id, auth) : sessionNotFound();
    session.lastSeen = Date.now();
    this.#touch(session);
    return session;
  }

  // The GET stream of a legacy session: what the server sends unasked, or a stream resumed by Last-Event-ID.
  get(arrival: Arrival): Response | Promise<Response> {
    const { request } = arrival;
    if (!/text\/event-stream/i.test(request.headers.get("accept") ?? "")) {
      return new Response("Not Acceptable: GET takes Accept: text/event-stream\n", { status: 406 });
    }
    return this.#withSession(arrival, (found) => this.#stream(found, request));
  }

  #stream(found: LegacySession, request: Request): Response {
    const lastEventId = request.headers.get("last-event-id");
    let stream = found.standalone;
    let after = 0;
    if (lastEventId) {
      const [streamId, seq] = lastEventId.split("-").map(Number);
      const resumed = found.streams.get(streamId);
      if (!resumed) return new Response("Not Found: no such stream\n", { status: 404 });
      stream = resumed;
      after = seq;
    } else if (stream.live && !stream.live.ended) {
      return new Response("Conflict: this session already has a GET stream\n", { status: 409 });
    }
    stream.live?.end();
    const live = new SseStream(() => {
      if (stream.live === live) stream.live = undefined;
    }, this.#priming(found, `${stream.id}-${after}`));
    stream.live = live;
    // transports.mdx: replay what this stream sent after that id, and only this stream's.
    for (const event of stream.events) if (Number(event.id.split("-")[1]) > after) live.send(event.text, event.id);
    // A resumed POST stream that has had its response ends after the replay.
    if (stream !== found.standalone && ![...found.byRequest.values()].includes(stream)) live.end();
    return new Response(live.body, { headers: SSE_HEADERS });
  }
}

// Mcp-Param-* headers mirror the tool's x-mcp-header arguments (streamable-http.mdx, 2026-07-28).
function checkParamHeaders(request: Request, tool: Tool | undefined, args: unknown): string | undefined {
  const schema = tool?.listing.inputSchema;
  const properties = isObject(schema) && isObject(schema.properties) ? schema.properties : {};
  const values = isObject(args) ? args : {};
  for (const [property, definition] of Object.entries(properties)) {
    if (!isObject(definition) || typeof definition["x-mcp-header"] !== "string") continue;
    const header = `Mcp-Param-${definition["x-mcp-header"]}`;
    const raw = request.headers.get(header);
    const value = values[property];
    if (value === undefined || value === null) {
      if (raw !== null) return `${header} is sent but ${property} is not in the body`;
      continue;
    }
    if (raw === null) return `the ${header} header is required for ${property}`;
    const decoded = decodeHeaderValue(raw);
    if (decoded === undefined) return `${header} header value '${raw}' is not valid Base64`;
    const same = typeof value === "number" ? Number(decoded) === value : decoded === String(value);
    if (!same) return `${header} header value '${raw}' does not match body value '${value}'`;
  }
  return undefined;
}

// What the shared session holds about the request it is receiving: an answer given then becomes the response.
interface Receiving {
  id: RequestId;
  text?: string;
  errorCode?: number;
  exchange?: Exchange;
}

/**
 * The 2026-07-28 requests of one handler: stateless, each checked against its
 * mirror headers and envelope. One session serves them all, so none is built per
 * request (its state is per request: the era's client view and the token come
 * with each). A request whose id is still open on it (two clients may both send
 * id 1) gets a session of its own. An answer given while the request is being
 * received becomes the response itself: no exchange, no promise.
 */
class StatelessRequests {
  #core: ServerCore;
  #trace: ((line: string) => void) | undefined;
  #shared: McpServer | undefined;
  #waiting = new Map<RequestId, Exchange>(); // the exchange of each request still open on the shared session
  #now: Receiving | undefined;
  #alone = new Set<Exchange>(); // exchanges of requests served on sessions of their own

  constructor(core: ServerCore, trace: ((line: string) => void) | undefined) {
    this.#core = core;
    this.#trace = trace;
  }

  /** A 2026-07-28 request: its mirror headers and envelope checked, then served. */
  post(
    incoming: Incoming,
    method: string,
    params: JsonObject,
    headerVersion: string | undefined,
  ): Promise<Response> | Response {
    const { request, message } = incoming;
    const { id } = message;
    const mismatch = (why: string) => rpcErrorResponse(400, id, ErrorCode.HeaderMismatch, `Header mismatch: ${why}`);
    const bodyVersion = (params._meta as JsonObject)[META.protocolVersion];
    // Header against body before the version itself (conformance server-stateless).
    if (headerVersion === undefined) return mismatch("the MCP-Protocol-Version header is required");
    if (headerVersion !== bodyVersion) {
      return mismatch(
        `MCP-Protocol-Version header value '${headerVersion}' does not match body value '${bodyVersion}'`,
      );
    }
    try {
      modernClientView(params);
    } catch (error) {
      const rpc = error as RpcError;
      return rpcErrorResponse(400, id, rpc.code, rpc.message, rpc.data);
    }
    if (!isRequestId(id)) {
      // Notifications: none is defined over HTTP in 2026-07-28, nor their headers.
      return new Response(null, { status: 202 });
    }
    const headerMethod = request.headers.get("mcp-method")?.trim();
    if (headerMethod !== method) {
      return mismatch(
        headerMethod === undefined
          ? "the Mcp-Method header is required"
          : `Mcp-Method header value '${headerMethod}' does not match body value '${method}'`,
      );
    }
    const named = mcpNameOf(method, params);
    if (named !== UNNAMED) {
      const raw = request.headers.get("mcp-name");
      const headerName = raw === null ? undefined : decodeHeaderValue(raw);
      if (headerName !== named) {
        return mismatch(
          raw === null
            ? "the Mcp-Name header is required"
            : `Mcp-Name header value '${raw}' does not match body value '${named}'`,
        );
      }
      if (method === "tools/call") {
        const problem = checkParamHeaders(request, this.#core.toolsByName.get(String(named)), params.arguments);
        if (problem) return mismatch(problem);
      }
    }
    // The status of an error answer follows its code, which the peer names with the answer.
    if (this.#waiting.has(id)) return this.serveAlone(incoming, new Exchange(NO_HEADERS, modernErrorStatus), id);
    return this.#serveShared(incoming, id);
  }

  // The one session every 2026-07-28 request shares: what it sends goes to the request it is about.
  #openShared(): McpServer {
    const shared = new McpServer(this.#core, (out, context) => {
      this.#trace?.(`> ${out}`);
      const to = context?.requestId;
      if (to === undefined) return; // nothing is sent unasked here: notifications go to a listen's id
      const final = context!.final === true;
      if (this.#now?.id === to && final && !this.#waiting.has(to)) {
        this.#now.text = out;
        this.#now.errorCode = context!.errorCode;
        return;
      }
      let exchange = this.#waiting.get(to);
      if (!exchange && this.#now?.id === to) {
        exchange = this.#now.exchange = new Exchange(NO_HEADERS, modernErrorStatus); // progress first: a stream
        this.#waiting.set(to, exchange);
      }
      exchange?.write(out, final, undefined, context!.errorCode);
      if (final) this.#waiting.delete(to);
    });
    shared.lagging = (requestId) => this.#waiting.get(requestId)?.lagging ?? false;
    return shared;
  }

  #serveShared(incoming: Incoming, id: RequestId): Promise<Response> | Response {
    const shared = this.#shared ??= this.#openShared();
    const received: Receiving = { id };
    this.#now = received;
    shared.auth = incoming.auth;
    try {
      shared.receive(incoming.message);
    } finally {
      this.#now = undefined;
    }
    if (received.text !== undefined) {
      return new Response(received.text, {
        status: modernErrorStatus(received.errorCode),
        headers: JSON_CONTENT,
      });
    }
    let exchange = received.exchange;
    if (!exchange) this.#waiting.set(id, exchange = new Exchange(NO_HEADERS, modernErrorStatus));
    return follow(incoming.request, exchange, () => {
      shared.cancel(id, "the client closed the response stream");
      if (this.#waiting.get(id) === exchange) this.#waiting.delete(id);
    });
  }

  /** One request on a session of its own, which ends with it; a closed connection cancels it. */
  serveAlone(incoming: Incoming, exchange: Exchange, id: RequestId, why?: string): Promise<Response> {
    const { request, message } = incoming;
    const session = new McpServer(this.#core, (out, context) => {
      this.#trace?.(`> ${out}`);
      const final = context?.final === true && context.requestId === id; // the peer says so: no text sniffing
      exchange.write(out, final, undefined, context?.errorCode);
      if (!final) return;
      session.close();
      this.#alone.delete(exchange);
    });
    if (why) session.noClientRequests = why;
    session.lagging = () => exchange.lagging;
    this.#alone.add(exchange);
    session.auth = incoming.auth;
    session.receive(message);
    return follow(request, exchange, () => {
      session.cancel(id, "the client closed the response stream");
      session.close();
      this.#alone.delete(exchange);
    });
  }

  /** Ends what is still open (the sessions themselves are closed with the core's). */
  close(): void {
    for (const exchange of [...this.#alone, ...this.#waiting.values()]) exchange.close("the server is shutting down");
    this.#alone.clear();
    this.#waiting.clear();
  }
}

// The response of a request still running: a closed connection cancels it.
function follow(request: Request, exchange: Exchange, cancel: () => void): Promise<Response> {
  // Answered at once (the common synchronous tool): nothing left to cancel, no listener to make.
  if (exchange.finished) return exchange.response;
  exchange.onCancel = cancel;
  const disconnected = disconnectSignal(request);
  if (disconnected?.aborted) exchange.onCancel();
  else disconnected?.addEventListener("abort", () => exchange.onCancel(), { once: true });
  // Where the runtime gives no disconnect signal, a call still running after a moment answers
  // with a stream: its cancel is how a closed connection is noticed (and cancels the call).
  if (!disconnected && !exchange.finished) {
    const timer = setTimeout(() => exchange.openStream(), STREAM_FOR_DISCONNECT_MS);
    void exchange.response.then(() => clearTimeout(timer));
  }
  return exchange.response;
}

/**
 * Serves the same tools, resources and prompts as `serve`, over Streamable HTTP
 * at `options.path` (default /mcp), as a web-standard fetch handler: give it to
 * `Deno.serve`, `Bun.serve({ fetch })`, an edge platform's `export default { fetch }`,
 * or Node through `listenHttp`.
 */
export function createHandler(options: HandlerOptions = {}): McpHandler {
  const tracer = options.tracer ?? telemetryFor(options.telemetry, options.serviceName ?? options.name);
  // --metrics keeps durations (the telemetry's own when it exports metrics: its span counters then show here too).
  let measure = tracer?.metrics;
  if (options.metrics && !measure) {
    measure = new Metrics(metricsResource(options.serviceName ?? options.name));
    if (tracer) tracer.metrics = measure;
  }
  const metrics = options.metrics ? measure : undefined;
  const tracing = tracer?.tracing === true;
  const stateUrl = parseStateUrl(options.state);
  const store = stateUrl && new RedisStore(stateUrl, {
    replica: options.instanceId ?? randomWord(6),
    heartbeatTtl: options.heartbeatTtl,
    report: options.onStateStore,
  });
  const core = new ServerCore({
    ...options,
    instanceId: store?.replica ?? options.instanceId,
    tracer,
    measure,
    networkAttributes: { "network.transport": "tcp", "network.protocol.name": "http" },
    privateCache: options.privateCache ?? (options.token !== undefined || options.auth !== undefined),
  });
  if (store) core.tasks.share(store);
  const trace = options.onTrace;
  const sessions = new LegacySessions(core, options, store);
  const stateless = new StatelessRequests(core, trace);

  const handler = httpFront({
    path: options.path ?? "/mcp",
    allowedHosts: options.allowedHosts ?? LOOPBACK_HOSTS,
    allowOrigins: options.allowOrigins,
    token: options.token,
    auth: options.auth,
    maxBodyBytes: options.maxBodyBytes,
    methods: "GET, POST, DELETE",
    keepPeers: tracing,
    metrics: metrics && { render: () => metrics.prometheus(), token: options.metricsToken },
    route: (arrival) => {
      switch (arrival.method) {
        case "POST":
          return post(arrival);
        case "GET":
        case "DELETE":
          if (options.stateless) return new Response(null, { status: 405, headers: { allow: "POST" } });
          return arrival.method === "GET" ? sessions.get(arrival) : sessions.delete(arrival);
      }
      return new Response(null, { status: 405, headers: { allow: "GET, POST, DELETE" } });
    },
  });

  // A POST: the era is decided here, once, from the parsed body, and handed down.
  async function post(arrival: Arrival): Promise<Response> {
    const { request } = arrival;
    if (!/^application\/json\b/i.test(request.headers.get("content-type") ?? "")) {
      return rpcErrorResponse(
        415,
        null,
        ErrorCode.InvalidRequest,
        "Invalid request: Content-Type must be application/json",
      );
    }
    // --trace shows the body as it came; otherwise it is only parsed.
    const message = await arrival.json(trace && ((text) => trace(`< ${text}`)));
    if (message instanceof Response) return message;
    if (!isObject(message)) {
      const what = Array.isArray(message) ? "a JSON array (batches are not part of MCP)" : "not an object";
      return rpcErrorResponse(400, null, ErrorCode.InvalidRequest, `Invalid request: message is ${what}`);
    }
    const { method, id } = message;
    const params = isObject(message.params) ? message.params : {};
    // The HTTP traceparent header: the span's parent when _meta has none (read only when tracing).
    if (tracing && isObject(message.params)) {
      const header = request.headers.get("traceparent");
      const hidden = message.params as Record<symbol, unknown>;
      if (header !== null) hidden[TRACEPARENT_HEADER] = header;
      hidden[CLIENT_PEER] = peerAddress(REQUEST_PEERS.get(request), request);
    }
    const headerVersion = request.headers.get("mcp-protocol-version")?.trim();
    const incoming: Incoming = { request, auth: arrival.auth, message };
    if (typeof method === "string" && isModernRequest(params)) {
      return stateless.post(incoming, method, params, headerVersion);
    }
    if (typeof method === "string" && headerVersion && headerVersion >= MODERN_PROTOCOL_VERSIONS[0]) {
      return rpcErrorResponse(
        400,
        id,
        ErrorCode.InvalidParams,
        `Invalid params: a ${headerVersion} request needs _meta["${META.protocolVersion}"] and _meta["${META.clientCapabilities}"]`,
      );
    }
    if (!options.stateless) return sessions.post(incoming);
    // --stateless: a legacy request is served on a session of its own, which cannot ask the client anything.
    if (typeof method !== "string" || !isRequestId(id)) return new Response(null, { status: 202 });
    return stateless.serveAlone(
      incoming,
      new Exchange(NO_HEADERS, () => 200),
      id,
      "this server runs without sessions (--stateless)",
    );
  }

  const served = (request: Request, info?: unknown) => handler(request, info);
  // defineProperty, not Object.assign: assign would read `pending` once and store the number.
  Object.defineProperty(served, "pending", {
    get() {
      let pending = 0;
      for (const session of core.sessions) pending += session.pending;
      return pending;
    },
  });
  return Object.assign(served as typeof served & { readonly pending: number }, {
    fetch: served,
    core,
    metrics: () => metrics?.prometheus() ?? "",
    close() {
      // Sessions first: a listen stream gets its closing result before its stream ends.
      for (const session of [...core.sessions]) session.close();
      sessions.close();
      stateless.close();
      core.close();
      store?.close();
      if (!options.tracer) void tracer?.flush(); // its own: what is pending goes out
    },
  });
}

// --- 10e. Bearer tokens: the server as an OAuth protected resource ---
//
//   GET /.well-known/oauth-protected-resource[/mcp] → {resource, authorization_servers: [issuer], scopes_supported}
//   POST /mcp without a valid token → 401 WWW-Authenticate: Bearer resource_metadata="…", scope="…"
//   a token without a required scope → 403 WWW-Authenticate: Bearer error="insufficient_scope", scope="…"
//
// Tokens are JWTs checked with the issuer's JWKS (RFC 9068): signature (RS256, ES256, EdDSA through
// WebCrypto), iss, aud, exp and nbf. The verified claims reach plugins as ctx.auth; the token never
// goes further.

const CLOCK_SKEW_S = 60;
// An unknown kid fetches the keys again (a rotation), at most once a second, and once a minute for the same kid.
const JWKS_REFETCH_MS = 1_000;
const JWKS_MISS_MS = 60_000;

/** Who a verified access token speaks for: a plugin's `ctx.auth`. */
export interface AuthInfo {
  /** The token's subject (a user, or a client of its own). */
  sub?: string;
  /** The scopes the token grants. */
  scopes: string[];
  /** The OAuth client it was issued to (`client_id`, else `azp`). */
  clientId?: string;
  /** Every claim of the token. */
  claims: JsonObject;
}

/** A protected server's options (`serve --http --auth-issuer …`). */
export interface ResourceServerOptions {
  /** The authorization server whose tokens are accepted. */
  issuer: string;
  /**
   * What a token's `aud` must name: the URL (or URLs) clients reach this server at. Never taken from a
   * request (its Host header is the client's to choose); without it every token is refused.
   * `serve --http` sets it from the address it listens on (loopback), or `--auth-audience`.
   */
  audience?: string | string[];
  /** Scopes every request needs: advertised, and required. */
  scopes?: string[];
  /** Fetches the issuer's metadata and keys (default: the same-origin fetch every request of mcp.ts goes through). */
  fetch?: typeof fetch;
  /** An unknown kid fetches the keys again at most this often, in ms (default 1000; a test of a rotation: 0). */
  jwksRefetchMs?: number;
  /**
   * DPoP (RFC 9449): a token bound to a key (`cnf.jkt`) is always taken only with a valid proof of it; "required"
   * also refuses tokens that are not bound (and says so in the metadata). Default "allowed".
   */
  dpop?: "allowed" | "required";
  /** DPoP proofs must carry a nonce this server issued (`DPoP-Nonce`, a new one every 5 minutes). */
  dpopNonce?: boolean;
}

/** A refusal of a token: the HTTP status and the challenge's error; `dpop`: a DPoP challenge (and nonce). */
interface TokenRefusal {
  status: 401 | 403;
  error?: string;
  description: string;
  dpop?: boolean;
}

// The proofs a DPoP server takes: iat within this of now, and each jti once within twice that.
const DPOP_WINDOW_S = 300;
// jtis remembered at most (the oldest go first when a flood fills it); nonces live this long.
const DPOP_SEEN_MAX = 10_000;
const DPOP_NONCE_MS = 300_000;
/**
 * The JWS algorithms mcp.ts signs and verifies with (RFC 7518), as WebCrypto names them: how a key of each is
 * imported, and how it signs. A Map: a token's own `alg` (a caller's text) is looked up in it.
 */
const JWS_ALGORITHMS = new Map<string, { key: EcKeyImportParams | RsaHashedImportParams | Algorithm; sign: Algorithm }>(
  [
    ["ES256", { key: { name: "ECDSA", namedCurve: "P-256" }, sign: { name: "ECDSA", hash: "SHA-256" } as Algorithm }],
    ["RS256", { key: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, sign: { name: "RSASSA-PKCS1-v1_5" } }],
    ["EdDSA", { key: { name: "Ed25519" }, sign: { name: "Ed25519" } }],
  ],
);
const DPOP_ALGS = [...JWS_ALGORITHMS.keys()];

/**
 * The DPoP proofs of one resource server (RFC 9449 §4.3, §7): each checked against its request and its token's
 * `cnf.jkt`, its jti remembered (bounded) so a replay is refused; with nonces, a fresh one every 5 minutes (the
 * one before still taken). Compares are constant-time.
 * @internal
 */
export class DpopVerifier {
  #mode: "allowed" | "required";
  #nonces: string[] | undefined; // the current nonce first, then the one before
  #rotatedAt = 0;
  #seen = new Map<string, number>(); // jti → when it may be forgotten (s)
  #seenMax: number;
  #now: () => number;

  constructor(options: ResourceServerOptions, how: { now?: () => number; seenMax?: number } = {}) {
    this.#mode = options.dpop ?? "allowed";
    this.#now = how.now ?? Date.now;
    this.#seenMax = how.seenMax ?? DPOP_SEEN_MAX;
    if (options.dpopNonce) this.#nonces = [];
  }

  /** How many jtis it remembers now. */
  get remembered(): number {
    return this.#seen.size;
  }

  /** The nonce proofs must carry now (a new one every 5 minutes), or none. */
  nonce(): string | undefined {
    if (!this.#nonces) return undefined;
    const now = this.#now();
    if (this.#nonces.length === 0 || now - this.#rotatedAt >= DPOP_NONCE_MS) {
      this.#nonces = [randomToken(16), ...this.#nonces].slice(0, 2);
      this.#rotatedAt = now;
    }
    return this.#nonces[0];
  }

  /** Whether a request with a verified token may go on: undefined, or why not. */
  async check(
    request: Request,
    scheme: string,
    token: string,
    claims: JsonObject,
    url: () => string,
  ): Promise<TokenRefusal | undefined> {
    const refuse = (description: string, error = "invalid_dpop_proof"): TokenRefusal => ({
      status: 401,
      error,
      description,
      dpop: true,
    });
    const jkt = isObject(claims.cnf) && typeof claims.cnf.jkt === "string" ? claims.cnf.jkt : undefined;
    const dpopScheme = /^dpop$/i.test(scheme);
    if (jkt === undefined) {
      if (this.#mode === "required") return refuse("this server takes DPoP-bound tokens only", "invalid_token");
      return dpopScheme ? refuse("the token is not DPoP-bound: send it as Bearer", "invalid_token") : undefined;
    }
    if (!dpopScheme) return refuse("the token is DPoP-bound: send it as Authorization: DPoP", "invalid_token");
    const header = request.headers.get("dpop");
    if (header === null || header.includes(",")) return refuse("one DPoP proof is needed");
    const parts = header.split(".");
    let head: unknown, proof: unknown;
    try {
      head = JSON.parse(new TextDecoder().decode(fromBase64Url(parts[0])));
      proof = JSON.parse(new TextDecoder().decode(fromBase64Url(parts[1])));
    } catch {
      return refuse("the DPoP proof is not a JWT");
    }
    if (parts.length !== 3 || !isObject(head) || !isObject(proof)) return refuse("the DPoP proof is not a JWT");
    if (head.typ !== "dpop+jwt") return refuse("the DPoP proof's typ is not dpop+jwt");
    const alg = String(head.alg);
    if (!DPOP_ALGS.includes(alg)) return refuse(`the DPoP proof's alg is not one of ${DPOP_ALGS.join(", ")}`);
    const jwk = isObject(head.jwk) ? head.jwk : undefined;
    const members = jwk && publicJwk(jwk);
    if (!jwk || !members || ["d", "p", "q", "dp", "dq", "qi", "k"].some((name) => name in jwk)) {
      return refuse("the DPoP proof's jwk is not a public key");
    }
    const now = this.#now() / 1000;
    if (typeof proof.jti !== "string" || proof.jti.length === 0 || proof.jti.length > 256) {
      return refuse("the DPoP proof has no jti");
    }
    if (proof.htm !== request.method) return refuse("the DPoP proof is for another method (htm)");
    if (typeof proof.htu !== "string" || safeUrl(proof.htu) !== url()) {
      return refuse("the DPoP proof is for another URL (htu)");
    }
    if (typeof proof.iat !== "number" || Math.abs(proof.iat - now) > DPOP_WINDOW_S) {
      return refuse("the DPoP proof is not fresh (iat)");
    }
    if (typeof proof.ath !== "string" || !constantTimeEqual(proof.ath, await sha256Base64Url(token))) {
      return refuse("the DPoP proof is for another token (ath)");
    }
    if (!constantTimeEqual(await jwkThumbprint(members), jkt)) {
      return refuse("the DPoP proof is signed by another key than the token is bound to");
    }
    // Last of the proof's own checks: importing a key and verifying costs the most (a stale, replayed or
    // foreign-key proof is refused before it).
    if (!(await verifyWithJwk(alg, members, parts))) return refuse("the DPoP proof's signature does not verify");
    if (this.#nonces) {
      this.nonce(); // rotated when due
      const given = typeof proof.nonce === "string" ? proof.nonce : "";
      if (!this.#nonces.some((nonce) => constantTimeEqual(given, nonce))) {
        return refuse("a DPoP nonce from this server is needed", "use_dpop_nonce");
      }
    }
    if (this.#seen.has(proof.jti)) return refuse("the DPoP proof was used before (jti)");
    this.#remember(proof.jti, proof.iat + 2 * DPOP_WINDOW_S, now);
    return undefined;
  }

  // Bounded: what has expired goes first; a flood of fresh proofs pushes out the oldest.
  #remember(jti: string, until: number, now: number): void {
    makeRoom(this.#seen, this.#seenMax, (expiry) => expiry <= now);
    this.#seen.set(jti, until);
  }
}

// A JWS's signature checked with a public JWK of the given alg.
async function verifyWithJwk(alg: string, jwk: JsonObject, parts: string[]): Promise<boolean> {
  const algorithm = JWS_ALGORITHMS.get(alg);
  if (!algorithm) return false;
  try {
    const key = await crypto.subtle.importKey("jwk", jwk as JsonWebKey, algorithm.key, false, ["verify"]);
    return await crypto.subtle.verify(
      algorithm.sign,
      key,
      fromBase64Url(parts[2]),
      encoder.encode(`${parts[0]}.${parts[1]}`),
    );
  } catch {
    return false;
  }
}

// typ values of an access token (RFC 9068 §2.1; "JWT" from issuers that predate it).
const ACCESS_TOKEN_TYPES = ["at+jwt", "application/at+jwt", "jwt"];

/** Checks bearer tokens for one issuer; keeps its keys, fetching them again for a kid it has not seen. */
class TokenVerifier {
  #options: ResourceServerOptions;
  #keys = new Map<string, { key: CryptoKey; alg: string }>(); // by kid ("" for keys without one)
  #jwksUri: string | undefined;
  #fetchedAt = 0;
  #missed = new Map<string, number>(); // kids not found after a fetch, and when
  #loading: Promise<void> | undefined;

  constructor(options: ResourceServerOptions) {
    this.#options = options;
  }

  /** The audiences a token may name. */
  get audiences(): string[] {
    const audience = this.#options.audience;
    return Array.isArray(audience) ? audience : audience === undefined ? [] : [audience];
  }

  /** Verifies `token`; its claims, or why not. */
  async verify(token: string): Promise<AuthInfo | TokenRefusal> {
    const invalid = (description: string): TokenRefusal => ({ status: 401, error: "invalid_token", description });
    const parts = token.split(".");
    if (parts.length !== 3) return invalid("the token is not a JWT");
    let header: JsonObject;
    let claims: JsonObject;
    try {
      header = JSON.parse(new TextDecoder().decode(fromBase64Url(parts[0])));
      claims = JSON.parse(new TextDecoder().decode(fromBase64Url(parts[1])));
    } catch {
      return invalid("the token is not a JWT");
    }
    if (!isObject(header) || !isObject(claims)) return invalid("the token is not a JWT");
    // RFC 9068 §4: an access token says so in typ; a plain JWT is taken (issuers that predate it), nothing else.
    if (header.typ !== undefined && !ACCESS_TOKEN_TYPES.includes(String(header.typ).toLowerCase())) {
      return invalid(`the token's typ ${JSON.stringify(header.typ)} is not an access token's`);
    }
    const alg = String(header.alg);
    if (!JWS_ALGORITHMS.has(alg)) return invalid(`the token's alg ${alg} is not accepted`);
    const kid = typeof header.kid === "string" ? header.kid : "";
    let key = this.#keys.get(kid);
    const clock = Date.now();
    if (
      !key && clock - this.#fetchedAt >= (this.#options.jwksRefetchMs ?? JWKS_REFETCH_MS) &&
      !(clock - (this.#missed.get(kid) ?? -Infinity) < JWKS_MISS_MS)
    ) {
      await this.#loadKeys().catch(noop);
      key = this.#keys.get(kid);
      if (!key) {
        if (this.#missed.size > 1000) this.#missed.clear(); // bounded, whatever kids a caller makes up
        this.#missed.set(kid, clock);
      }
    }
    if (!key || key.alg !== alg) return invalid("the token is not signed by a key of its issuer");
    let valid = false;
    try {
      valid = await crypto.subtle.verify(
        JWS_ALGORITHMS.get(alg)!.sign,
        key.key,
        fromBase64Url(parts[2]),
        encoder.encode(`${parts[0]}.${parts[1]}`),
      );
    } catch {
      valid = false;
    }
    if (!valid) return invalid("the token's signature does not verify");
    const now = Date.now() / 1000;
    if (claims.iss !== this.#options.issuer) return invalid("the token is from another issuer");
    const audiences = this.audiences;
    const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
    // RFC 8707, authorization/index.mdx: a token for another resource MUST be refused; compared exactly.
    if (!aud.some((item) => typeof item === "string" && audiences.includes(item))) {
      return invalid("the token is not for this server (aud)");
    }
    if (typeof claims.exp !== "number") return invalid("the token has no expiry (exp)");
    // RFC 7519 §2: NumericDate. A time in any other form is refused, not ignored.
    for (const time of ["nbf", "iat"]) {
      if (claims[time] !== undefined && typeof claims[time] !== "number") {
        return invalid(`the token's ${time} is not a number`);
      }
    }
    if (claims.exp + CLOCK_SKEW_S < now) return invalid("the token has expired");
    if (typeof claims.nbf === "number" && claims.nbf - CLOCK_SKEW_S > now) return invalid("the token is not valid yet");
    const scopes = typeof claims.scope === "string"
      ? claims.scope.split(" ").filter(Boolean)
      : Array.isArray(claims.scp)
      ? claims.scp.map(String)
      : [];
    const missing = (this.#options.scopes ?? []).filter((scope) => !scopes.includes(scope));
    if (missing.length > 0) {
      return { status: 403, error: "insufficient_scope", description: `the token lacks ${missing.join(", ")}` };
    }
    const info: AuthInfo = { scopes, claims };
    if (typeof claims.sub === "string") info.sub = claims.sub;
    const client = claims.client_id ?? claims.azp;
    if (typeof client === "string") info.clientId = client;
    return info;
  }

  #loadKeys(): Promise<void> {
    this.#loading ??= (async () => {
      const get = this.#options.fetch ?? fetchSameOrigin;
      const json = async (url: string) => {
        const response = await get(url, {
          headers: { accept: "application/json" },
          signal: AbortSignal.timeout(10_000),
        });
        if (!response.ok) {
          await response.body?.cancel().catch(noop);
          return undefined;
        }
        const parsed = await response.json().catch(() => undefined);
        return isObject(parsed) ? parsed : undefined;
      };
      if (!this.#jwksUri) {
        for (const url of authServerMetadataUrls(this.#options.issuer)) {
          const metadata = await json(url).catch(() => undefined);
          if (metadata?.issuer === this.#options.issuer && typeof metadata.jwks_uri === "string") {
            this.#jwksUri = metadata.jwks_uri;
            break;
          }
        }
      }
      if (!this.#jwksUri) return;
      const jwks = await json(this.#jwksUri);
      this.#fetchedAt = Date.now();
      const keys = new Map<string, { key: CryptoKey; alg: string }>();
      for (const jwk of Array.isArray(jwks?.keys) ? jwks.keys : []) {
        if (!isObject(jwk) || (jwk.use !== undefined && jwk.use !== "sig")) continue;
        const alg = jwk.kty === "RSA"
          ? "RS256"
          : jwk.kty === "EC" && jwk.crv === "P-256"
          ? "ES256"
          : jwk.kty === "OKP" &&
              jwk.crv === "Ed25519"
          ? "EdDSA"
          : undefined;
        if (!alg || (typeof jwk.alg === "string" && jwk.alg !== alg)) continue;
        try {
          const { kid: _kid, use: _use, key_ops: _ops, alg: _alg, ...material } = jwk;
          const algorithm = JWS_ALGORITHMS.get(alg)!.key;
          const key = await crypto.subtle.importKey("jwk", material as JsonWebKey, algorithm, false, ["verify"]);
          keys.set(typeof jwk.kid === "string" ? jwk.kid : "", { key, alg });
        } catch {
          // a key this runtime cannot use
        }
      }
      this.#keys = keys;
    })().finally(() => this.#loading = undefined);
    return this.#loading;
  }
}

/** The Protected Resource Metadata (RFC 9728) of a server at `resource`. */
function protectedResourceMetadata(resource: string, auth: ResourceServerOptions): JsonObject {
  const metadata: JsonObject = {
    resource,
    authorization_servers: [auth.issuer],
    bearer_methods_supported: ["header"],
    dpop_signing_alg_values_supported: DPOP_ALGS,
  };
  if (auth.scopes?.length) metadata.scopes_supported = auth.scopes;
  if (auth.dpop === "required") metadata.dpop_bound_access_tokens_required = true;
  return metadata;
}

// The challenge of a 401 or 403 (RFC 6750 §3, authorization/index.mdx): where the metadata is, what scope; a DPoP
// challenge (RFC 9449 §7.1, with the algs taken) for a refused proof, or where only DPoP-bound tokens are taken.
function bearerChallenge(
  metadataUrl: string,
  auth: ResourceServerOptions,
  refusal?: TokenRefusal,
): string {
  const parts = [`resource_metadata="${quotedString(metadataUrl)}"`];
  if (refusal?.error) {
    parts.unshift(`error="${refusal.error}"`, `error_description="${quotedString(refusal.description)}"`);
  }
  if (auth.scopes?.length) parts.push(`scope="${auth.scopes.join(" ")}"`);
  if (refusal?.dpop || auth.dpop === "required") return `DPoP ${parts.join(", ")}, algs="${DPOP_ALGS.join(" ")}"`;
  return `Bearer ${parts.join(", ")}`;
}

// An RFC 9110 quoted-string's inside: `"` and `\` escaped, controls (a line break would end the header, or make
// the runtime refuse it with a 500) as "?". The description quotes a token's own typ and alg, unverified.
function quotedString(text: string): string {
  // deno-lint-ignore no-control-regex
  return text.replace(/[\x00-\x1f\x7f]/g, "?").replace(/["\\]/g, "\\$&");
}

// --- 10f. State across replicas: a Redis client (RESP2) and the store replicas share ---
// --state redis://… keeps legacy sessions, task records and quotas in Redis (or Valkey), and carries what one
// replica must tell another (a session ended, a notification for a stream held elsewhere, an answer to a question
// asked elsewhere, a task's update or cancel) over one pub/sub channel. Two connections: commands (pipelined: what
// is written in one turn goes out in one write) and subscriptions. Lost, the store is said once on stderr; a
// request that needs it is refused at once; writes wait in a bounded queue and go out when it is back.

const STORE_CHANNEL = "mcp:bus";
// Writes kept while the store is unreachable; beyond, the oldest are dropped (and counted in the "back" line).
const STORE_QUEUE_MAX = 10_000;
// Longest reply accepted (checked from its length header, before its bytes are read) and longest reply line.
const STORE_MAX_REPLY_BYTES = 64 * 1024 * 1024;
const STORE_MAX_LINE_BYTES = 64 * 1024;
const STORE_RECONNECT_MAX_MS = 2_000;
/** Default --heartbeat-ttl: a replica silent this long is taken for gone, with its tasks. */
const DEFAULT_HEARTBEAT_TTL_MS = 10_000;

// A store URL as messages show it: scheme, host, port and database; never its credentials.
function storeName(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname === "/" ? "" : url.pathname}`;
}

/** `--state` / MCP_TS_STATE checked: undefined for memory (the default), else the Redis URL. @internal */
export function parseStateUrl(text: string | undefined): URL | undefined {
  if (text === undefined || text === "" || text === "memory:") return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--state takes memory: or redis://[user:pass@]host:port[/db], got "${redact(text)}"`);
  }
  const db = url.pathname.replace(/^\//, "");
  if ((url.protocol !== "redis:" && url.protocol !== "rediss:") || !url.hostname || !/^(\d{1,2})?$/.test(db)) {
    throw new UsageError(`--state takes memory: or redis://[user:pass@]host:port[/db], got "${storeName(url)}"`);
  }
  return url;
}

/** One command as RESP2 puts it: an array of bulk strings (lengths in bytes). @internal */
export function respCommand(args: readonly (string | number)[]): string {
  let out = `*${args.length}\r\n`;
  for (const arg of args) {
    const text = String(arg);
    out += `$${utf8Length(text)}\r\n${text}\r\n`;
  }
  return out;
}

/** An error reply of the store (`-ERR …`, `-WRONGPASS …`). @internal */
export class StoreReplyError extends Error {}

const RESP_INCOMPLETE = Symbol("incomplete");

/**
 * RESP2 replies from a byte stream: `push` takes what came and returns the replies now whole. Linear in what
 * came: the buffer grows by doubling, a bulk's length is checked before its bytes are awaited, and a reply still
 * incomplete is parsed again only once more bytes than it needs have come. @internal
 */
export class RespReader {
  #buffer = new Uint8Array(4096);
  #start = 0;
  #end = 0;
  #need = 0; // bytes the incomplete reply needs at least before it is worth parsing again
  #decoder = new TextDecoder();

  /** How many bytes its buffer takes now (a long-lived connection's cost). @internal */
  get capacity(): number {
    return this.#buffer.length;
  }

  push(chunk: Uint8Array): (StoreReply | StoreReplyError)[] {
    this.#append(chunk);
    const replies: (StoreReply | StoreReplyError)[] = [];
    while (this.#end - this.#start >= this.#need && this.#start < this.#end) {
      const at = { pos: this.#start };
      const reply = this.#parse(at);
      if (reply === RESP_INCOMPLETE) break;
      this.#start = at.pos;
      this.#need = 0;
      replies.push(reply);
    }
    return replies;
  }

  // The buffer holds what is not parsed yet: it grows only when that does not fit (moved to the front first), so a
  // long-lived connection keeps the size of its largest reply, not of all it ever read.
  #append(chunk: Uint8Array): void {
    if (this.#end + chunk.length > this.#buffer.length) {
      const kept = this.#end - this.#start;
      if (kept + chunk.length <= this.#buffer.length) this.#buffer.copyWithin(0, this.#start, this.#end);
      else {
        const grown = new Uint8Array(Math.max(this.#buffer.length * 2, kept + chunk.length));
        grown.set(this.#buffer.subarray(this.#start, this.#end));
        this.#buffer = grown;
      }
      this.#start = 0;
      this.#end = kept;
    }
    this.#buffer.set(chunk, this.#end);
    this.#end += chunk.length;
  }

  #line(at: { pos: number }): string | typeof RESP_INCOMPLETE {
    const buffer = this.#buffer;
    const limit = Math.min(this.#end, at.pos + STORE_MAX_LINE_BYTES);
    for (let i = at.pos; i < limit - 1; i++) {
      if (buffer[i] === 13 && buffer[i + 1] === 10) {
        const text = this.#decoder.decode(buffer.subarray(at.pos, i));
        at.pos = i + 2;
        return text;
      }
    }
    if (limit - at.pos >= STORE_MAX_LINE_BYTES) throw new Error("the store sent a reply line over 64 KiB");
    this.#need = this.#end - this.#start + 1;
    return RESP_INCOMPLETE;
  }

  #parse(at: { pos: number }): StoreReply | StoreReplyError | typeof RESP_INCOMPLETE {
    const line = this.#line(at);
    if (line === RESP_INCOMPLETE) return line;
    const kind = line[0];
    const rest = line.slice(1);
    switch (kind) {
      case "+":
        return rest;
      case "-":
        return new StoreReplyError(rest);
      case ":":
        return Number(rest);
      case "$": {
        const length = Number(rest);
        if (length === -1) return null;
        if (!Number.isInteger(length) || length < 0 || length > STORE_MAX_REPLY_BYTES) {
          throw new Error(`the store sent a bulk reply of length "${brief(rest)}"`);
        }
        if (this.#end - at.pos < length + 2) {
          this.#need = at.pos - this.#start + length + 2;
          return RESP_INCOMPLETE;
        }
        const text = this.#decoder.decode(this.#buffer.subarray(at.pos, at.pos + length));
        at.pos += length + 2;
        return text;
      }
      case "*": {
        const count = Number(rest);
        if (count === -1) return null;
        if (!Number.isInteger(count) || count < 0 || count > STORE_MAX_REPLY_BYTES / 4) {
          throw new Error(`the store sent an array reply of length "${brief(rest)}"`);
        }
        const items: StoreReply[] = [];
        for (let i = 0; i < count; i++) {
          const item = this.#parse(at);
          if (item === RESP_INCOMPLETE) return item;
          items.push(item instanceof StoreReplyError ? item.message : item);
        }
        return items;
      }
    }
    throw new Error(`the store sent something that is not RESP: "${brief(line)}"`);
  }
}

interface StoreWaiter {
  resolve: (reply: StoreReply) => void;
  reject: (error: Error) => void;
  sentAt: number;
}

/**
 * One connection to the store: commands written in one turn go out in one write, their replies matched in order;
 * AUTH and SELECT first on every (re)connect; reconnects with backoff. `pushes` turns it into a subscriber, whose
 * every reply is a push. @internal
 */
class RespConnection {
  ready = false;
  onReady: (() => void) | undefined;
  onLost: ((why: string) => void) | undefined;
  #url: URL;
  #pushes: ((reply: StoreReply) => void) | undefined;
  #socket: TcpSocket | undefined;
  #reader = new RespReader();
  #waiting: StoreWaiter[] = [];
  #out: string[] = [];
  #queued: string[] = []; // writes while not ready
  #dropped = 0;
  #attempt = 0;
  #closed = false;
  #watch: ReturnType<typeof setInterval> | undefined;
  #setup: string[];
  #replyTimeout: number;

  /** `replyTimeout`: how long a command may wait for its reply before the connection is judged lost (a hung store). */
  constructor(url: URL, replyTimeout: number, pushes?: (reply: StoreReply) => void, setup: string[] = []) {
    this.#url = url;
    this.#replyTimeout = replyTimeout;
    this.#pushes = pushes;
    const user = decodeURIComponent(url.username);
    const password = decodeURIComponent(url.password);
    const db = url.pathname.replace(/^\//, "");
    this.#setup = [
      ...(password ? [respCommand(user ? ["AUTH", user, password] : ["AUTH", password])] : []),
      ...(db && db !== "0" ? [respCommand(["SELECT", db])] : []),
      ...setup,
    ];
    void this.#connect();
  }

  /** A command's reply; refused at once (a StoreUnavailable) while the connection is not ready. */
  call(args: readonly (string | number)[]): Promise<StoreReply> {
    if (!this.ready) return Promise.reject(new Error("not connected"));
    return new Promise((resolve, reject) => {
      this.#waiting.push({ resolve, reject, sentAt: Date.now() });
      this.#send(respCommand(args));
    });
  }

  /** A write whose reply is not waited for: kept (bounded) while the connection is down. */
  write(args: readonly (string | number)[]): void {
    const text = respCommand(args);
    if (!this.ready) {
      if (this.#queued.push(text) > STORE_QUEUE_MAX) (this.#queued.shift(), this.#dropped++);
      return;
    }
    this.#waiting.push({ resolve: noop, reject: noop, sentAt: Date.now() });
    this.#send(text);
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#watch);
    this.#socket?.destroy();
  }

  #send(text: string): void {
    if (this.#out.push(text) > 1) return;
    queueMicrotask(() => {
      const batch = this.#out.join("");
      this.#out.length = 0;
      this.#socket?.write(batch);
    });
  }

  async #connect(): Promise<void> {
    if (this.#closed) return;
    const tls = this.#url.protocol === "rediss:";
    const port = Number(this.#url.port || 6379);
    const host = this.#url.hostname.replace(/^\[(.*)\]$/, "$1");
    const socket = await connectTcp(host, port, tls);
    this.#socket = socket;
    this.#reader = new RespReader();
    let failed = false;
    const lost = (why: string) => {
      if (failed) return;
      failed = true;
      socket.destroy();
      this.#lost(why);
    };
    socket.setNoDelay?.(true);
    socket.on(tls ? "secureConnect" : "connect", () => this.#opened(socket, lost));
    socket.on("data", (chunk: Uint8Array) => {
      let replies;
      try {
        replies = this.#reader.push(chunk);
      } catch (error) {
        return lost(errorMessage(error));
      }
      for (const reply of replies) this.#reply(reply, lost);
    });
    socket.on("error", (error: Error) => lost(redact(error.message)));
    socket.on("close", () => lost("the connection closed"));
  }

  // Connected: AUTH and SELECT (their replies checked), the subscriber's SUBSCRIBE, then what waited.
  #opened(socket: TcpSocket, lost: (why: string) => void): void {
    const setup = this.#setup.length;
    let answered = 0;
    const check = () => {
      if (++answered < setup || this.ready) return;
      this.ready = true;
      this.#attempt = 0;
      const queued = this.#queued.splice(0);
      for (const text of queued) {
        this.#waiting.push({ resolve: noop, reject: noop, sentAt: Date.now() });
        this.#send(text);
      }
      this.onReady?.();
    };
    for (let i = 0; i < setup; i++) {
      this.#waiting.push({
        resolve: check,
        reject: (error) =>
          lost(`the store refused ${i === 0 && this.#url.password ? "AUTH" : "setup"}: ${error.message}`),
        sentAt: Date.now(),
      });
    }
    if (setup === 0) check();
    socket.write(this.#setup.join(""));
    const limit = this.#replyTimeout;
    this.#watch ??= setInterval(() => {
      const oldest = this.#waiting[0];
      if (oldest && Date.now() - oldest.sentAt > limit) this.#socket?.destroy(new Error(`no reply in ${limit} ms`));
    }, Math.max(10, limit / 3));
    (this.#watch as { unref?: () => void }).unref?.();
  }

  #reply(reply: StoreReply | StoreReplyError, lost: (why: string) => void): void {
    const waiter = this.#waiting.shift();
    if (!waiter) {
      if (this.#pushes && !(reply instanceof StoreReplyError)) return this.#pushes(reply);
      return lost("the store sent a reply to nothing asked");
    }
    if (reply instanceof StoreReplyError) waiter.reject(reply);
    else waiter.resolve(reply);
    // A subscriber's later replies are pushes: its setup was all it waited for.
  }

  #lost(why: string): void {
    this.ready = false;
    for (const waiter of this.#waiting.splice(0)) waiter.reject(new Error(why));
    this.#out.length = 0;
    if (this.#closed) return;
    this.onLost?.(why);
    const delay = Math.min(STORE_RECONNECT_MAX_MS, 50 * 2 ** this.#attempt++);
    const timer = setTimeout(() => void this.#connect(), delay);
    (timer as { unref?: () => void }).unref?.();
  }

  /** Writes dropped while the store was unreachable (the queue was full), since last asked. */
  takeDropped(): number {
    const dropped = this.#dropped;
    this.#dropped = 0;
    return dropped;
  }
}

/**
 * The store replicas share (`--state redis://…`): commands, writes, the bus, this replica's heartbeat, and one
 * stderr line when the store is lost and one when it is back. @internal
 */
export class RedisStore implements ReplicaStore {
  readonly replica: string;
  readonly name: string;
  readonly heartbeatTtl: number;
  #commands: RespConnection;
  #bus: RespConnection;
  #listeners = new Set<(message: JsonObject) => void>();
  #heartbeat: ReturnType<typeof setInterval>;
  #report: (line: string) => void;
  #lost: string | undefined = "connecting";
  #settle!: () => void;
  #firstAttempt: Promise<void> | undefined = new Promise((resolve) => this.#settle = resolve); // until it settles

  constructor(url: URL, options: { replica: string; heartbeatTtl?: number; report?: (line: string) => void }) {
    this.replica = options.replica;
    this.name = storeName(url);
    this.heartbeatTtl = options.heartbeatTtl ?? DEFAULT_HEARTBEAT_TTL_MS;
    // own-line-ok: a library's default (the CLI passes its log); our own words and the store's redacted reason.
    this.#report = options.report ?? ((line) => console.error(`mcp: ${line}`));
    // A heartbeat every third of its TTL; a store that leaves a command unanswered that long (a second at least: a
    // busy machine is not a lost store) is taken for lost.
    const beat = Math.max(100, Math.floor(this.heartbeatTtl / 3));
    const replyTimeout = Math.max(1_000, beat);
    this.#commands = new RespConnection(url, replyTimeout);
    this.#bus = new RespConnection(url, replyTimeout, (push) => this.#pushed(push), [
      respCommand(["SUBSCRIBE", STORE_CHANNEL]),
    ]);
    const said = () => {
      if (!this.available || this.#lost === undefined) return;
      const first = this.#lost === "connecting";
      this.#lost = undefined;
      this.#settled();
      const dropped = this.#commands.takeDropped();
      this.#beat();
      if (!first) {
        this.#report(
          `the state store ${this.name} is back${
            dropped ? ` (${dropped} writes made while it was away were dropped)` : ""
          }`,
        );
      }
    };
    const lost = (why: string) => {
      if (this.#lost !== undefined && this.#lost !== "connecting") return;
      const first = this.#lost === "connecting";
      this.#lost = why;
      this.#settled();
      this.#report(
        `the state store ${this.name} is ${first ? "unreachable" : "lost"} (${redact(why)}): ` +
          "requests that need it are refused until it is back",
      );
    };
    this.#commands.onReady = this.#bus.onReady = said;
    this.#commands.onLost = this.#bus.onLost = lost;
    this.#heartbeat = setInterval(() => this.#beat(), beat);
    (this.#heartbeat as { unref?: () => void }).unref?.();
  }

  get available(): boolean {
    return this.#commands.ready && this.#bus.ready;
  }

  #settled(): void {
    this.#firstAttempt = undefined;
    this.#settle();
  }

  ready(): boolean | Promise<boolean> {
    if (this.available || !this.#firstAttempt) return this.available;
    return this.#firstAttempt.then(() => this.available);
  }

  call(...args: (string | number)[]): Promise<StoreReply> {
    if (!this.#commands.ready) {
      const ready = this.ready();
      if (ready === false) return Promise.reject(this.unavailable());
      return Promise.resolve(ready).then((ok) => ok ? this.call(...args) : Promise.reject(this.unavailable()));
    }
    return this.#commands.call(args).catch((error) => {
      throw error instanceof StoreReplyError ? error : this.unavailable();
    });
  }

  write(...args: (string | number)[]): void {
    this.#commands.write(args);
  }

  publish(message: JsonObject): void {
    this.#commands.write(["PUBLISH", STORE_CHANNEL, JSON.stringify({ ...message, from: this.replica })]);
  }

  subscribe(listener: (message: JsonObject) => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  ask(replica: string, kind: string, message: JsonObject): Promise<unknown> {
    const asked = randomWord(9);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        stop();
        reject(new RpcError(ErrorCode.InternalError, `Internal error: ${REPLICA_GONE} (${replica} did not answer)`));
      }, this.heartbeatTtl);
      const stop = this.subscribe((reply) => {
        if (reply.t !== "re" || reply.asked !== asked || reply.to !== this.replica) return;
        stop();
        clearTimeout(timer);
        const error = isObject(reply.error) ? reply.error : undefined;
        if (error) reject(new RpcError(Number(error.code), String(error.message), error.data));
        else resolve(reply.result);
      });
      this.publish({ ...message, t: "ask", kind, to: replica, asked });
    });
  }

  answer(kind: string, handler: (message: JsonObject) => unknown): void {
    this.subscribe(async (message) => {
      if (message.t !== "ask" || message.kind !== kind || message.to !== this.replica) return;
      const reply: JsonObject = { t: "re", to: message.from as string, asked: message.asked as string };
      try {
        reply.result = await handler(message) as JsonObject;
      } catch (error) {
        const rpc = error instanceof RpcError ? error : new RpcError(ErrorCode.InternalError, errorMessage(error));
        reply.error = { code: rpc.code, message: rpc.message, ...(rpc.data === undefined ? {} : { data: rpc.data }) };
      }
      this.publish(reply);
    });
  }

  /** The error a request that needs the store gets while it is unreachable. */
  unavailable(): RpcError {
    return new RpcError(ErrorCode.InternalError, `Internal error: the state store ${this.name} is unreachable`);
  }

  close(): void {
    clearInterval(this.#heartbeat);
    if (this.#commands.ready) this.#commands.write(["DEL", HEARTBEAT_KEY + this.replica]);
    setTimeout(() => (this.#commands.close(), this.#bus.close()), 50);
  }

  #beat(): void {
    if (this.#commands.ready) this.write("SET", HEARTBEAT_KEY + this.replica, "1", "PX", this.heartbeatTtl);
  }

  #pushed(push: StoreReply): void {
    if (!Array.isArray(push) || push[0] !== "message" || typeof push[2] !== "string") return;
    const message = parseJsonObject(push[2]);
    if (!message) return;
    for (const listener of [...this.#listeners]) listener(message);
  }
}

// === 11. Server configs ======================================================
// What a `<server>` argument names: an http(s) URL, a command line, or a server
// in an MCP config file as hosts write them (Claude, Cursor, VS Code, Windsurf,
// Gemini CLI), with ${VAR} expanded from our environment. Reads files; starts
// nothing (the gateway reads configs without a client).

/** How to start a stdio MCP server. */
export interface StdioServerSpec {
  type?: "stdio";
  command: string;
  args: string[];
  /** Added to the inherited environment. */
  env?: Record<string, string>;
  cwd?: string;
  /** The config name it came from, if any. */
  name?: string;
  /** `@NAME`: the per-user daemon's session NAME, reached through its socket (command is "@NAME"). */
  session?: string;
}

/** Where an HTTP MCP server is. */
export interface HttpServerSpec {
  /** "http": Streamable HTTP (falling back to HTTP+SSE); "sse": the 2024-11-05 HTTP+SSE transport. */
  type: "http" | "sse";
  url: string;
  /** Sent on every request. */
  headers?: Record<string, string>;
  /** A config entry's `oauth`: a pre-registered client and what to ask for. */
  oauth?: OAuthOptions;
  /** The config name it came from, if any. */
  name?: string;
}

/** A server to connect to: a process on stdio, or an HTTP endpoint. */
export type ServerSpec = StdioServerSpec | HttpServerSpec;

/** Whether a spec names an HTTP server. */
function isHttpSpec(spec: ServerSpec): spec is HttpServerSpec {
  return spec.type === "http" || spec.type === "sse";
}

/** Splits a command line into words with POSIX shell quoting ('…', "…", backslash); no expansion. */
export function splitCommand(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (ch === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new UsageError(`Cannot split the server command: unterminated ' in ${JSON.stringify(line)}`);
      word += line.slice(i + 1, end);
      inWord = true;
      i = end;
    } else if (ch === '"') {
      inWord = true;
      for (i++;; i++) {
        if (i >= line.length) {
          throw new UsageError(`Cannot split the server command: unterminated " in ${JSON.stringify(line)}`);
        }
        const c = line[i];
        if (c === '"') break;
        // Inside double quotes a backslash escapes only these (POSIX 2.2.3).
        if (c === "\\" && i + 1 < line.length && '"\\$`\n'.includes(line[i + 1])) {
          i++;
          if (line[i] !== "\n") word += line[i];
        } else {
          word += c;
        }
      }
    } else if (ch === "\\") {
      if (i + 1 < line.length && line[i + 1] !== "\n") {
        word += line[i + 1];
        inWord = true;
      }
      i++;
    } else if (ch === " " || ch === "\t" || ch === "\n") {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      word += ch;
      inWord = true;
    }
  }
  if (inWord) words.push(word);
  return words;
}

/** Where Claude Desktop keeps its config on this OS. @internal */
export function claudeDesktopConfigPath(
  env: Record<string, string | undefined> = sys.env(),
  platform: string = sys.platform(),
  home: string = env.HOME ?? env.USERPROFILE ?? ".",
): string {
  return appSettingsFile({ env, platform, home }, "Claude", "claude_desktop_config.json");
}

// A file in a per-user settings folder: ~/Library/Application Support on macOS, %APPDATA% on Windows, XDG elsewhere.
// Plain string joins: node:path costs start-up time on every client command.
function appSettingsFile(
  where: { env: Record<string, string | undefined>; platform: string; home: string },
  ...parts: string[]
): string {
  const { env, platform, home } = where;
  if (platform === "darwin") return [`${home}/Library/Application Support`, ...parts].join("/");
  if (platform === "win32") return [env.APPDATA ?? `${home}\\AppData\\Roaming`, ...parts].join("\\");
  return [env.XDG_CONFIG_HOME || `${home}/.config`, ...parts].join("/");
}

/** The servers one config file defines (or one scope of it, for ~/.claude.json). */
interface ConfigFile {
  /** The file, and the scope within it where it has several. */
  file: string;
  servers: JsonObject;
  /** Gemini CLI reads a plain `url` as its SSE transport. */
  gemini: boolean;
}

async function readJsonConfig(file: string, required: boolean): Promise<unknown> {
  let text: string;
  try {
    text = await (await files()).readText(file);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (!required && (code === "ENOENT" || code === "ENOTDIR")) return undefined;
    throw new UsageError(`Cannot read config "${file}": ${errorMessage(error)}`);
  }
  try {
    return parseJsonText(text).value; // comments and trailing commas too, as VS Code and Zed allow
  } catch (error) {
    throw new UsageError(`Cannot read config "${file}": ${errorMessage(error)}`);
  }
}

// `{"mcpServers": …}` (Claude, Cursor, Cline, Windsurf, Gemini) or `{"servers": …}` (VS Code).
function standardServers(parsed: JsonObject): unknown {
  return isObject(parsed.mcpServers) ? parsed.mcpServers : parsed.servers;
}

// A JSON config's servers, where `pick` finds them (a host's own key, its own entry forms).
async function readConfig(
  file: string,
  required: boolean,
  pick: (parsed: JsonObject) => unknown = standardServers,
): Promise<ConfigFile | undefined> {
  const parsed = await readJsonConfig(file, required);
  if (parsed === undefined) return undefined;
  const servers = isObject(parsed) ? pick(parsed) : undefined;
  return {
    file,
    servers: isObject(servers) ? servers : {},
    gemini: /[\\/]\.gemini[\\/]settings\.json$/.test(file),
  };
}

// Claude Code's ~/.claude.json: the current project's servers (`claude mcp add`'s local scope), then the user's.
async function readClaudeCodeConfig(file: string, cwd: string): Promise<ConfigFile[]> {
  const parsed = await readJsonConfig(file, false).catch(() => undefined);
  if (!isObject(parsed)) return [];
  const found: ConfigFile[] = [];
  const project = isObject(parsed.projects) ? parsed.projects[cwd] : undefined;
  if (isObject(project) && isObject(project.mcpServers)) {
    found.push({ file: `${file} (project ${cwd})`, servers: project.mcpServers, gemini: false });
  }
  if (isObject(parsed.mcpServers)) found.push({ file, servers: parsed.mcpServers, gemini: false });
  return found;
}

/**
 * The config files a server name is looked up in, first match wins: `--config`
 * alone when given; else the nearest `.mcp.json` from the working directory up,
 * with `.cursor/mcp.json` and `.vscode/mcp.json` beside it, then Claude Code's
 * `~/.claude.json`, then Claude Desktop's config, then Codex's (a trusted project's, then the user's), Windsurf's,
 * Gemini CLI's, Zed's and Copilot CLI's.
 */
async function findConfigs(
  options: { config?: string; cwd?: string; env: Record<string, string | undefined> },
): Promise<ConfigFile[]> {
  if (options.config) return [(await readConfig(resolvePath(options.config, options.cwd), true))!];
  const cwd = resolvePath(options.cwd ?? ".");
  const home = options.env.HOME ?? options.env.USERPROFILE;
  const candidates: Promise<ConfigFile | undefined>[] = [];
  for (let dir = cwd;;) {
    for (const name of [".mcp.json", ".cursor/mcp.json", ".vscode/mcp.json"]) {
      candidates.push(readConfig(joinPath(dir, name), false).catch(() => undefined));
    }
    const parent = dirnameOf(dir);
    if (parent === dir || dir === home) break;
    dir = parent;
  }
  const [found, claudeCode, desktop, others] = await Promise.all([
    Promise.all(candidates),
    home ? readClaudeCodeConfig(joinPath(home, ".claude.json"), cwd) : [],
    readConfig(claudeDesktopConfigPath(options.env), false).catch(() => undefined),
    home ? otherHostConfigs(cwd, options.env, home) : [],
  ]);
  const read = new Set<string>();
  return [...found, ...claudeCode, desktop, ...others].filter((config): config is ConfigFile =>
    config !== undefined && !read.has(config.file) && read.add(config.file) !== undefined
  );
}

/**
 * Expands `${VAR}`, `${VAR:-default}` and `${env:VAR}` (VS Code's form) from
 * `env`. An unset variable without a default is a usage error naming it: a
 * literal `${TOKEN}` must never reach a server.
 * @internal
 */
export function expandVariables(text: string, env: Record<string, string | undefined>, where: string): string {
  return text.replace(
    /\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g,
    (_match, name: string, fallback: string | undefined) => {
      const value = env[name];
      if (value !== undefined && (value !== "" || fallback === undefined)) return value;
      if (fallback !== undefined) return fallback;
      throw new UsageError(
        `Cannot use ${where}: it uses \${${name}}, which is not set; set ${name}, or write \${${name}:-default}`,
      );
    },
  );
}

function stringRecord(value: unknown, expand: (text: string) => string): Record<string, string> | undefined {
  if (!isObject(value)) return undefined;
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, expand(String(item))]));
}

/** The grants that get tokens without a person: what a config's oauth.grant and --grant name. */
const HEADLESS_GRANTS: readonly string[] = ["client_credentials", "jwt-bearer", "token-exchange"];

// A config entry's oauth.grant: the headless grants a command line may name.
function configGrant(grant: string | undefined, where: string): OAuthOptions["grant"] {
  if (grant === undefined || HEADLESS_GRANTS.includes(grant)) {
    return grant as OAuthOptions["grant"];
  }
  throw new UsageError(
    `Cannot use ${where}: oauth.grant "${grant}" is not client_credentials, jwt-bearer or token-exchange`,
  );
}

/** Turns one config entry into a spec, with ${VAR} expanded everywhere a string is read. */
function specFromConfig(
  name: string,
  entry: unknown,
  from: { file: string; env?: Record<string, string | undefined>; gemini?: boolean },
): ServerSpec {
  const { file, env = sys.env(), gemini = false } = from;
  const where = `server "${name}" of "${file}"`;
  if (!isObject(entry)) throw new UsageError(`Cannot use ${where}: it is not an object`);
  const expand = (text: string) => expandVariables(text, env, where);
  const url = entry.httpUrl ?? entry.url ?? entry.serverUrl;
  const type = typeof entry.type === "string" ? entry.type.toLowerCase() : undefined;
  if (typeof url === "string" && typeof entry.command !== "string") {
    if (type !== undefined && !["http", "streamable-http", "streamablehttp", "sse"].includes(type)) {
      throw new UsageError(`Cannot use ${where}: its type "${entry.type}" is not one mcp.ts speaks (http, sse, stdio)`);
    }
    // Gemini CLI: httpUrl is Streamable HTTP, a plain url its SSE transport.
    const sse = type === "sse" ||
      (gemini && type === undefined && entry.httpUrl === undefined && entry.url !== undefined);
    const spec: HttpServerSpec = { type: sse ? "sse" : "http", url: checkUrl(expand(url), where), name };
    const headers = stringRecord(entry.headers, expand);
    if (headers) spec.headers = headers;
    if (isObject(entry.oauth)) {
      const oauth = stringRecord(entry.oauth, expand)!;
      spec.oauth = {
        clientId: oauth.clientId ?? oauth.client_id,
        clientSecret: oauth.clientSecret ?? oauth.client_secret,
        clientMetadataUrl: oauth.clientMetadataUrl,
        scope: oauth.scope ?? oauth.scopes,
        callbackPort: oauth.callbackPort ? Number(oauth.callbackPort) : undefined,
        grant: configGrant(oauth.grant, where),
        assertion: oauth.assertion,
        idToken: oauth.idToken,
        idpTokenEndpoint: oauth.idpTokenEndpoint,
        idpClientId: oauth.idpClientId,
        idpClientSecret: oauth.idpClientSecret,
        dpop: oauth.dpop === "required" || oauth.dpop === "off" ? oauth.dpop : undefined,
      };
      for (const key of Object.keys(spec.oauth) as (keyof OAuthOptions)[]) {
        if (spec.oauth[key] === undefined) delete spec.oauth[key];
      }
    }
    return spec;
  }
  if (typeof entry.command !== "string") {
    throw new UsageError(`Cannot use ${where}: it has neither a "command" nor a "url"`);
  }
  const args = Array.isArray(entry.args) ? entry.args.map((arg) => expand(String(arg))) : [];
  const spec: StdioServerSpec = { command: expand(entry.command), args, name };
  const serverEnv = stringRecord(entry.env, expand);
  if (serverEnv) spec.env = serverEnv;
  const path = file.replace(/ \(.*\)$/, "");
  if (typeof entry.cwd === "string") spec.cwd = resolvePath(expand(entry.cwd), dirnameOf(path));
  else {
    // A project's servers start in the project's root, as Claude Code starts them, wherever below it we are.
    const project = /^(.*)[\\/](?:\.mcp\.json|\.cursor[\\/]mcp\.json|\.vscode[\\/]mcp\.json)$/.exec(path);
    if (project) spec.cwd = project[1] || "/";
  }
  return spec;
}

function checkUrl(text: string, where: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`Cannot use ${where}: "${text}" is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new UsageError(`Cannot use ${where}: "${text}" is not an http:// or https:// URL`);
  }
  return url.href;
}

/**
 * Turns a `<server>` argument into a spec: an http(s) URL, a config name (see
 * findConfigs for where it is looked up), or a command line.
 */
export async function resolveServer(
  target: string,
  options: { config?: string; cwd?: string; env?: Record<string, string | undefined> } = {},
): Promise<ServerSpec> {
  const env = options.env ?? sys.env();
  if (/^https?:\/\//i.test(target)) return { type: "http", url: checkUrl(target, "the server URL") };
  if (/^@[A-Za-z0-9_.-]+$/.test(target)) return { command: target, args: [], session: target.slice(1), name: target };
  const words = splitCommand(target);
  if (words.length === 0) throw new UsageError("the server command is empty");
  // A bare word may name a configured server; a command line never does.
  const bareWord = words.length === 1 && !/[\\/]/.test(words[0]);
  if (!bareWord && !options.config) return { command: words[0], args: words.slice(1) };
  const configs = await findConfigs({ config: options.config, cwd: options.cwd, env });
  for (const { file, servers, gemini } of configs) {
    if (Object.hasOwn(servers, target)) return specFromConfig(target, servers[target], { file, env, gemini });
  }
  if (bareWord && (await findOnPath(words[0], env)) === undefined) {
    const names = [...new Set(configs.flatMap((config) => Object.keys(config.servers)))];
    const where = configs.length
      ? `nor a server in ${configs.map((config) => config.file).join(", ")}`
      : `and no MCP config names it (none found: .mcp.json here or above, ~/.claude.json, ${
        claudeDesktopConfigPath(env)
      }; see --config)`;
    const known = names.length ? `; servers it knows: ${names.join(", ")}` : "";
    throw new UsageError(`"${target}" is not a command on PATH ${where}${known}`);
  }
  return { command: words[0], args: words.slice(1) };
}

/** One name of `mcp.ts servers`: where it is defined and how it is reached. */
interface ConfiguredServer {
  name: string;
  file: string;
  /** "stdio", "http" or "sse"; "invalid" with `problem` when the entry cannot be used. */
  transport: string;
  /** The command line or URL. */
  target: string;
  /** Defined again in an earlier file, which wins. */
  shadowed?: boolean;
  problem?: string;
}

/** Every server name the config files define, in lookup order. */
async function listConfiguredServers(
  options: { config?: string; cwd?: string; env?: Record<string, string | undefined> } = {},
): Promise<ConfiguredServer[]> {
  const env = options.env ?? sys.env();
  const seen = new Set<string>();
  const list: ConfiguredServer[] = [];
  for (const { file, servers, gemini } of await findConfigs({ config: options.config, cwd: options.cwd, env })) {
    for (const [name, entry] of Object.entries(servers)) {
      const item: ConfiguredServer = { name, file, transport: "invalid", target: "" };
      try {
        const spec = specFromConfig(name, entry, { file, env, gemini });
        item.transport = isHttpSpec(spec) ? spec.type : "stdio";
        // As written, ${VAR} and all: an expanded value may be a secret.
        const raw = entry as JsonObject;
        item.target = isHttpSpec(spec)
          ? String(raw.httpUrl ?? raw.url ?? raw.serverUrl)
          : [String(raw.command), ...(Array.isArray(raw.args) ? raw.args.map(String) : [])].map(quoteWord).join(" ");
      } catch (error) {
        item.problem = errorMessage(error);
      }
      if (seen.has(name)) item.shadowed = true;
      seen.add(name);
      list.push(item);
    }
  }
  return list;
}

// A word as a POSIX shell would need it quoted.
function quoteWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

// --- 11b. Host config files as text: JSON with comments kept as written, a TOML subset ---
// Hosts keep settings of their own beside their servers, some in JSON with comments (VS Code, Zed) and one in
// TOML (Codex). Reading parses each in linear time with the line of any error; writing edits the text at the
// spans the parse found, so every other key, comment and the file's indentation stay as the user left them.

/** A config file that does not parse: its line, for the message that names it. */
class ConfigSyntaxError extends Error {
  readonly line: number;
  constructor(message: string, line: number) {
    super(`${message} at line ${line}`);
    this.name = "ConfigSyntaxError";
    this.line = line;
  }
}

function lineAt(text: string, offset: number): number {
  let line = 1;
  for (let i = text.indexOf("\n"); i >= 0 && i < offset; i = text.indexOf("\n", i + 1)) line++;
  return line;
}

/** A JSON value with where it is in the text; an object's members with where each key starts. */
interface JsonSpan {
  value: unknown;
  start: number;
  end: number;
  members?: Map<string, { keyStart: number; span: JsonSpan }>;
}

const JSON_DEPTH_MAX = 256;

/**
 * Parses JSON as hosts write it: comments (`//`, `/* *\/`) and trailing commas allowed (VS Code and Zed settings),
 * objects without prototypes, nesting bounded; each value with its span. Errors name their line.
 * @internal
 */
export function parseJsonText(text: string): JsonSpan {
  let at = 0;
  const fail = (message: string, where = at): never => {
    throw new ConfigSyntaxError(message, lineAt(text, where));
  };
  const skip = () => {
    for (;;) {
      const ch = text.charCodeAt(at);
      if (ch === 0x20 || ch === 0x0a || ch === 0x0d || ch === 0x09 || ch === 0xfeff) at++;
      else if (ch === 0x2f && text[at + 1] === "/") {
        const end = text.indexOf("\n", at);
        at = end < 0 ? text.length : end + 1;
      } else if (ch === 0x2f && text[at + 1] === "*") {
        const end = text.indexOf("*/", at + 2);
        if (end < 0) fail("an unterminated /* comment");
        at = end + 2;
      } else return;
    }
  };
  const string = (): string => {
    const start = at;
    for (at++; at < text.length; at++) {
      const ch = text[at];
      if (ch === "\\") at++;
      else if (ch === '"') break;
      else if (ch === "\n") fail("a line break inside a string");
    }
    if (at >= text.length) fail("an unterminated string", start);
    at++;
    try {
      return JSON.parse(text.slice(start, at)) as string;
    } catch {
      return fail("a bad escape in a string", start);
    }
  };
  const value = (depth: number): JsonSpan => {
    if (depth > JSON_DEPTH_MAX) fail(`more than ${JSON_DEPTH_MAX} levels of nesting`);
    skip();
    const start = at;
    const ch = text[at];
    if (ch === "{") {
      at++;
      const object: JsonObject = Object.create(null);
      const members = new Map<string, { keyStart: number; span: JsonSpan }>();
      for (skip(); text[at] !== "}"; skip()) {
        if (text[at] !== '"') fail(at >= text.length ? "an unterminated object" : "a key (in double quotes)");
        const keyStart = at;
        const key = string();
        skip();
        if (text[at] !== ":") fail(`":" after the key ${JSON.stringify(key)}`);
        at++;
        const span = value(depth + 1);
        object[key] = span.value;
        members.set(key, { keyStart, span });
        skip();
        if (text[at] === ",") at++;
        else if (text[at] !== "}") fail(`"," or "}" after the value of ${JSON.stringify(key)}`);
      }
      at++;
      return { value: object, start, end: at, members };
    }
    if (ch === "[") {
      at++;
      const items: unknown[] = [];
      for (skip(); text[at] !== "]"; skip()) {
        if (at >= text.length) fail("an unterminated array", start);
        items.push(value(depth + 1).value);
        skip();
        if (text[at] === ",") at++;
        else if (text[at] !== "]") fail('"," or "]" after an array item');
      }
      at++;
      return { value: items, start, end: at };
    }
    if (ch === '"') return { value: string(), start, end: at };
    const word = /^(?:true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(text.slice(at, at + 64));
    if (!word) return fail(at >= text.length ? "a value (the text ended)" : "a value");
    at += word[0].length;
    return { value: JSON.parse(word[0]), start, end: at };
  };
  const root = value(0);
  skip();
  if (at < text.length) fail("text after the value");
  return root;
}

/** How a file indents one level and ends a line, as its own text shows (two spaces and \n when it does not). */
function textStyle(text: string): { unit: string; newline: string } {
  const newline = text.includes("\r\n") ? "\r\n" : "\n";
  const indented = /\n([ \t]+)\S/.exec(text);
  const unit = indented ? (indented[1][0] === "\t" ? "\t" : " ".repeat(Math.min(indented[1].length, 8))) : "  ";
  return { unit, newline };
}

/**
 * `text` with `root[key][name]` set to `entry` (or removed, when `entry` is undefined), by an edit of the text
 * alone: the rest of the file, comments and indentation included, is left as it was. An empty text is `{}`.
 * @internal
 */
export function editJsonMember(text: string, key: string, name: string, entry: unknown): string {
  const source = text.trim() === "" ? "{}\n" : text;
  const root = parseJsonText(source);
  if (!root.members) throw new ConfigSyntaxError("the file is not a JSON object", lineAt(source, root.start));
  const { unit, newline } = textStyle(source);
  const render = (value: unknown, depth: number) =>
    JSON.stringify(value, null, unit).split("\n").join(newline + unit.repeat(depth));
  const member = (memberName: string, value: unknown, depth: number) =>
    `${JSON.stringify(memberName)}: ${render(value, depth)}`;
  // Adds a member at the end of an object, after its last member (a trailing comma stays valid JSONC).
  const append = (object: JsonSpan, text: string, depth: number) => {
    const last = [...object.members!.values()].at(-1);
    if (last) {
      return source.slice(0, last.span.end) + `,${newline}${unit.repeat(depth)}${text}` + source.slice(last.span.end);
    }
    return source.slice(0, object.start) + `{${newline}${unit.repeat(depth)}${text}${newline}` +
      `${unit.repeat(depth - 1)}}` + source.slice(object.end);
  };
  const container = root.members.get(key)?.span;
  if (container !== undefined && !container.members) {
    throw new ConfigSyntaxError(`its "${key}" is not an object`, lineAt(source, container.start));
  }
  if (entry === undefined) {
    const found = container?.members?.get(name);
    if (!container || !found) return source;
    // From the end of the member before (its comma with it), or to the start of the member after.
    const members = [...container.members!.values()];
    const index = members.indexOf(found);
    if (index > 0) return source.slice(0, members[index - 1].span.end) + source.slice(found.span.end);
    if (members.length > 1) return source.slice(0, found.keyStart) + source.slice(members[1].keyStart);
    return source.slice(0, container.start) + "{}" + source.slice(container.end);
  }
  if (!container) return append(root, member(key, { [name]: entry }, 1), 1);
  const found = container.members!.get(name);
  if (found) return source.slice(0, found.span.start) + render(entry, 2) + source.slice(found.span.end);
  return append(container, member(name, entry, 2), 2);
}

/** A TOML table header, where its line starts, and its key path. */
interface TomlHeader {
  path: string[];
  start: number;
}

const TOML_BARE_KEY = /^[A-Za-z0-9_-]+$/;

/**
 * Parses the TOML a tool's config file holds (Codex's config.toml): tables and arrays of tables, dotted and quoted
 * keys, basic, literal and multi-line strings, numbers, booleans, dates (kept as text), arrays and inline tables;
 * in one pass, with the line of any error. Returns the values (objects without prototypes) and every header.
 * @internal
 */
export function parseTomlText(
  text: string,
): { value: JsonObject; headers: TomlHeader[]; inline: Map<object, number> } {
  const root: JsonObject = Object.create(null);
  const headers: TomlHeader[] = [];
  const inline = new Map<object, number>(); // each inline table, and where it starts
  let at = 0;
  const fail = (message: string, where = at): never => {
    throw new ConfigSyntaxError(message, lineAt(text, where));
  };
  const spaces = () => {
    while (text[at] === " " || text[at] === "\t") at++;
  };
  // Whitespace, line breaks and comments (inside arrays).
  const blank = () => {
    for (;;) {
      spaces();
      if (text[at] === "#") { while (at < text.length && text[at] !== "\n") at++; }
      else if (text[at] === "\n" || text[at] === "\r") at++;
      else return;
    }
  };
  const endOfLine = () => {
    spaces();
    if (text[at] === "#") { while (at < text.length && text[at] !== "\n") at++; }
    if (text[at] === "\r") at++;
    if (at < text.length && text[at] !== "\n") fail("text after the value");
    at++;
  };
  const escapes: Record<string, string> = { b: "\b", t: "\t", n: "\n", f: "\f", r: "\r", '"': '"', "\\": "\\" };
  const basic = (multi: boolean): string => {
    let out = "";
    const quote = multi ? '"""' : '"';
    at += quote.length;
    if (multi && text[at] === "\n") at++;
    else if (multi && text.startsWith("\r\n", at)) at += 2;
    for (;;) {
      if (at >= text.length) fail("an unterminated string");
      if (text.startsWith(quote, at)) {
        // A multi-line string may end in one or two quotes of its own: """a"""" is `a"`.
        let run = quote.length;
        while (multi && run < 5 && text[at + run] === '"') run++;
        at += run;
        return out + '"'.repeat(run - quote.length);
      }
      const ch = text[at];
      if (ch === "\n" && !multi) fail("a line break inside a string");
      if (ch !== "\\") {
        out += ch;
        at++;
        continue;
      }
      const next = text[at + 1];
      if (next === "u" || next === "U") {
        const digits = text.slice(at + 2, at + (next === "u" ? 6 : 10));
        if (!/^[0-9A-Fa-f]+$/.test(digits) || digits.length !== (next === "u" ? 4 : 8)) fail("a bad \\u escape");
        const code = parseInt(digits, 16);
        if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) fail("a \\u escape that is no character");
        out += String.fromCodePoint(code);
        at += 2 + digits.length;
      } else if (next in escapes) {
        out += escapes[next];
        at += 2;
      } else if (multi && /[ \t\r\n]/.test(next ?? "")) {
        // A line-ending backslash: the break and the whitespace after it are dropped.
        at++;
        while (/[ \t\r\n]/.test(text[at] ?? "")) at++;
      } else fail("a bad escape in a string");
    }
  };
  const literal = (multi: boolean): string => {
    const quote = multi ? "'''" : "'";
    at += quote.length;
    if (multi && text[at] === "\n") at++;
    else if (multi && text.startsWith("\r\n", at)) at += 2;
    let end = text.indexOf(quote, at);
    if (end < 0) fail("an unterminated string");
    let run = quote.length;
    while (multi && run < 5 && text[end + run] === "'") run++;
    end += run - quote.length;
    const out = text.slice(at, end);
    if (!multi && out.includes("\n")) fail("a line break inside a string");
    at = end + quote.length;
    return out;
  };
  const key = (): string[] => {
    const path: string[] = [];
    for (;;) {
      spaces();
      if (text[at] === '"') path.push(basic(false));
      else if (text[at] === "'") path.push(literal(false));
      else {
        const bare = /^[A-Za-z0-9_-]+/.exec(text.slice(at, at + 256));
        if (!bare) fail("a key");
        path.push(bare![0]);
        at += bare![0].length;
      }
      spaces();
      if (text[at] !== ".") return path;
      at++;
    }
  };
  const value = (depth: number): unknown => {
    if (depth > JSON_DEPTH_MAX) fail(`more than ${JSON_DEPTH_MAX} levels of nesting`);
    const ch = text[at];
    if (text.startsWith('"""', at)) return basic(true);
    if (ch === '"') return basic(false);
    if (text.startsWith("'''", at)) return literal(true);
    if (ch === "'") return literal(false);
    if (ch === "[") {
      at++;
      const items: unknown[] = [];
      for (blank(); text[at] !== "]"; blank()) {
        if (at >= text.length) fail("an unterminated array");
        items.push(value(depth + 1));
        blank();
        if (text[at] === ",") at++;
        else if (text[at] !== "]") fail('"," or "]" after an array item');
      }
      at++;
      return items;
    }
    if (ch === "{") {
      const table: JsonObject = Object.create(null);
      inline.set(table, at++);
      spaces();
      if (text[at] === "}") {
        at++;
        return table;
      }
      for (;;) {
        const path = key();
        if (text[at] !== "=") fail('"=" after a key');
        at++;
        spaces();
        assign(table, path, value(depth + 1));
        spaces();
        if (text[at] === "}") {
          at++;
          return table;
        }
        if (text[at] !== ",") fail('"," or "}" in an inline table');
        at++;
      }
    }
    const word = /^[^\s,\]\}#]+(?: \d\d:\d\d[^\s,\]\}#]*)?/.exec(text.slice(at, at + 128));
    if (!word) return fail("a value");
    at += word[0].length;
    const token = word[0];
    if (token === "true" || token === "false") return token === "true";
    if (/^[+-]?(?:inf|nan)$/.test(token)) return Number(token.replace(/^([+-]?)inf$/, "$1Infinity"));
    if (/^\d{4}-\d\d-\d\d|^\d\d:\d\d/.test(token)) return token; // a date or time, as written
    const number = token.replace(/_/g, "");
    if (/^(?:0x[0-9A-Fa-f]+|0o[0-7]+|0b[01]+)$/.test(number)) return Number(number); // no sign (TOML 1.0)
    if (/^[+-]?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/.test(number)) return Number(number);
    return fail(`a value (not ${JSON.stringify(token.slice(0, 40))})`);
  };
  const assign = (table: JsonObject, path: string[], item: unknown) => {
    let target = table;
    for (const part of path.slice(0, -1)) {
      const next = Object.hasOwn(target, part) ? target[part] : (target[part] = Object.create(null));
      if (!isObject(next) || Array.isArray(next)) fail(`the key ${JSON.stringify(part)} is not a table`);
      target = next as JsonObject;
    }
    const last = path[path.length - 1];
    if (Object.hasOwn(target, last)) fail(`the key ${JSON.stringify(path.join("."))} is defined twice`);
    target[last] = item;
  };
  let table = root;
  for (blank(); at < text.length; blank()) {
    const start = at;
    if (text[at] === "[") {
      const array = text[at + 1] === "[";
      at += array ? 2 : 1;
      const path = key();
      if (!text.startsWith(array ? "]]" : "]", at)) fail(`"${array ? "]]" : "]"}" after a table name`);
      at += array ? 2 : 1;
      headers.push({ path, start });
      table = tomlTable(root, path, array, fail);
      endOfLine();
      continue;
    }
    const path = key();
    if (text[at] !== "=") fail('"=" after a key');
    at++;
    spaces();
    assign(table, path, value(0));
    endOfLine();
  }
  return { value: root, headers, inline };
}

// The table a [header] (or an [[array]] header's new item) opens, made on the way where it is missing.
function tomlTable(root: JsonObject, path: string[], array: boolean, fail: (message: string) => never): JsonObject {
  let target = root;
  for (const [index, part] of path.entries()) {
    let next = Object.hasOwn(target, part) ? target[part] : undefined;
    if (array && index === path.length - 1) {
      if (next === undefined) next = target[part] = [];
      if (!Array.isArray(next)) fail(`${JSON.stringify(path.join("."))} is not an array of tables`);
      const item: JsonObject = Object.create(null);
      (next as unknown[]).push(item);
      next = item;
    } else {
      if (next === undefined) next = target[part] = Object.create(null);
      if (Array.isArray(next)) next = next[next.length - 1];
      if (!isObject(next)) fail(`the key ${JSON.stringify(part)} is not a table`);
    }
    target = next as JsonObject;
  }
  return target;
}

// A TOML key as TOML writes it: bare when it can be, else a basic string.
function tomlKey(key: string): string {
  return TOML_BARE_KEY.test(key) ? key : tomlString(key);
}

// A basic string: JSON's escapes, which TOML's share, and the two JSON leaves alone that TOML does not: DEL, and a
// lone surrogate (no character at all: U+FFFD, as a decoder reads it).
function tomlString(text: string): string {
  const wellFormed = text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");
  return JSON.stringify(wellFormed).replace(/\x7f/g, "\\u007F");
}

// A value as TOML: strings in JSON's escapes (TOML's basic strings share them), arrays, inline tables.
function tomlValue(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(tomlValue).join(", ")}]`;
  if (isObject(value)) {
    const pairs = Object.entries(value).map(([key, item]) => `${tomlKey(key)} = ${tomlValue(item)}`);
    return pairs.length ? `{ ${pairs.join(", ")} }` : "{}";
  }
  if (typeof value === "string") return tomlString(value);
  if (typeof value === "number") {
    // TOML's integers are 64-bit: a larger whole number is written as a float; nan and inf are spelled so.
    if (Number.isNaN(value)) return "nan";
    if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
    return Number.isInteger(value) && !Number.isSafeInteger(value) ? value.toExponential() : String(value);
  }
  return String(value);
}

/**
 * `text` with the table `[TABLE.NAME]` (and its sub-tables) replaced by one holding `entry`, or removed when
 * `entry` is undefined; every other line is left as it was. A NAME defined another way (a dotted key, an inline
 * table) cannot be edited as a table: that is an error naming its line.
 * @internal
 */
export function editTomlTable(text: string, table: string, name: string, entry: JsonObject | undefined): string {
  const { value, headers, inline } = parseTomlText(text);
  const newline = text.includes("\r\n") ? "\r\n" : "\n";
  const mine = (header: TomlHeader) => header.path[0] === table && header.path[1] === name;
  const servers = value[table];
  const defined = isObject(servers) && Object.hasOwn(servers, name);
  // An inline table is closed: a [TABLE.NAME] header cannot add to it, nor replace a server written inside one.
  const closed = isObject(servers)
    ? inline.get(servers) ?? (defined ? inline.get(servers[name] as object) : undefined)
    : undefined;
  if (closed !== undefined) {
    throw new ConfigSyntaxError(`"${table}" is written as an inline table; edit it by hand`, lineAt(text, closed));
  }
  // Its blocks: from each of its headers (the table and its sub-tables) to the next header, wherever they are.
  const blocks = headers.flatMap((header, index) =>
    mine(header) ? [[header.start, headers[index + 1]?.start ?? text.length] as const] : []
  );
  if (defined && blocks.length === 0) {
    throw new ConfigSyntaxError(`"${table}.${name}" is not written as a [${table}.${name}] table`, 1);
  }
  let out = text;
  for (const [start, end] of [...blocks].reverse()) out = out.slice(0, start) + out.slice(end);
  if (entry === undefined) return out;
  const lines = [`[${table}.${tomlKey(name)}]`];
  for (const [key, item] of Object.entries(entry)) {
    if (item !== undefined) lines.push(`${tomlKey(key)} = ${tomlValue(item)}`);
  }
  const block = lines.join(newline) + newline;
  if (blocks.length > 0) {
    const at = blocks[0][0];
    const next = out.slice(at);
    return out.slice(0, at) + block + (next === "" ? "" : newline + next);
  }
  if (out === "") return block;
  return out + (out.endsWith("\n") ? "" : newline) + newline + block;
}

// --- 11c. Hosts: where each keeps its servers; install and uninstall ---

/** The npm package `install --self` and the README name. */
const PACKAGE_NAME = "@mcp-ts/mcp";

/** How one host keeps its servers: its files, the key they sit under, how a URL and a stdio entry are written. */
interface Host {
  /** The project file, relative to the working directory, where the host has one. */
  project?: string;
  user(env: Record<string, string | undefined>, platform: string, home: string): string;
  /** The key the servers sit under (a table name for TOML). */
  key: string;
  toml?: boolean;
  /** The key of a remote server's URL. */
  urlKey: "url" | "serverUrl" | "httpUrl";
  /** Entries carry "type" (Claude Code, VS Code). */
  typed?: boolean;
  /** No remote servers in its config: a URL is reached through `proxy` on stdio. */
  stdioOnly?: boolean;
}

/** The hosts `install` writes and `<server>` names are read from (CONTRACT: Packages and hosts). @internal */
export const HOSTS: Record<string, Host> = {
  "claude-desktop": {
    user: (env, platform, home) => claudeDesktopConfigPath(env, platform, home),
    key: "mcpServers",
    urlKey: "url",
    stdioOnly: true,
  },
  "claude-code": {
    project: ".mcp.json",
    user: (_env, _platform, home) => `${home}/.claude.json`,
    key: "mcpServers",
    urlKey: "url",
    typed: true,
  },
  cursor: {
    project: ".cursor/mcp.json",
    user: (_e, _p, home) => `${home}/.cursor/mcp.json`,
    key: "mcpServers",
    urlKey: "url",
  },
  vscode: {
    project: ".vscode/mcp.json",
    user: (env, platform, home) => appSettingsFile({ env, platform, home }, "Code", "User", "mcp.json"),
    key: "servers",
    urlKey: "url",
    typed: true,
  },
  windsurf: {
    user: (_env, _platform, home) => `${home}/.codeium/windsurf/mcp_config.json`,
    key: "mcpServers",
    urlKey: "serverUrl",
  },
  codex: {
    project: ".codex/config.toml",
    user: (env, _platform, home) => `${env.CODEX_HOME || `${home}/.codex`}/config.toml`,
    key: "mcp_servers",
    toml: true,
    urlKey: "url",
  },
  gemini: {
    project: ".gemini/settings.json",
    user: (_env, _platform, home) => `${home}/.gemini/settings.json`,
    key: "mcpServers",
    urlKey: "httpUrl",
  },
  zed: {
    project: ".zed/settings.json",
    user: (env, platform, home) =>
      platform === "win32"
        ? appSettingsFile({ env, platform, home }, "Zed", "settings.json")
        : `${env.XDG_CONFIG_HOME || `${home}/.config`}/zed/settings.json`,
    key: "context_servers",
    urlKey: "url",
  },
};

/** What `install` writes: a command line, or a URL with headers. */
type InstallTarget =
  | { command: string; args: string[]; env?: Record<string, string> }
  | { url: string; headers?: Record<string, string>; launcher?: string[] }; // launcher: what runs `proxy` (stdio hosts)

/** One host's entry for a server, in that host's own words. @internal */
export function hostEntry(host: Host, target: InstallTarget): JsonObject {
  if ("url" in target) {
    if (host.stdioOnly) {
      // Claude Desktop's file runs commands only: our proxy bridges its stdio to the URL.
      const headers = Object.entries(target.headers ?? {}).flatMap(([name, value]) => ["-H", `${name}: ${value}`]);
      const [command, ...args] = target.launcher ?? ["npx", "-y", PACKAGE_NAME];
      return hostEntry(host, { command, args: [...args, "proxy", target.url, ...headers] });
    }
    const entry: JsonObject = host.typed ? { type: "http" } : {};
    entry[host.toml ? "url" : host.urlKey] = target.url;
    if (target.headers && Object.keys(target.headers).length) {
      entry[host.toml ? "http_headers" : "headers"] = target.headers;
    }
    return entry;
  }
  const entry: JsonObject = host.typed ? { type: "stdio" } : {};
  entry.command = target.command;
  entry.args = target.args;
  if (target.env && Object.keys(target.env).length) entry.env = target.env;
  return entry;
}

/** The file `install` and `uninstall` edit for a host: the project's when asked or when it exists here. */
async function hostFile(
  name: string,
  scope: string | undefined,
  options: { cwd?: string; env?: Record<string, string | undefined>; platform?: string } = {},
): Promise<{ host: Host; file: string; scope: "project" | "user" }> {
  if (!Object.hasOwn(HOSTS, name)) {
    throw new UsageError(`"${name}" is not a host mcp.ts knows; hosts: ${Object.keys(HOSTS).join(", ")}`);
  }
  const host = HOSTS[name];
  const env = options.env ?? sys.env();
  const platform = options.platform ?? sys.platform();
  const home = env.HOME ?? env.USERPROFILE ?? ".";
  if (scope !== undefined && scope !== "project" && scope !== "user") {
    throw new UsageError(`--scope takes project or user, not "${scope}"`);
  }
  if (scope === "project" && !host.project) throw new UsageError(`${name} has no project config: leave out --scope`);
  const project = host.project ? resolvePath(host.project, options.cwd) : undefined;
  const here = project !== undefined && scope === undefined && (await (await files()).kind(project)) === "file";
  if (project !== undefined && (scope === "project" || here)) return { host, file: project, scope: "project" };
  return { host, file: host.user(env, platform, home), scope: "user" };
}

/** Reads a host's file for an edit: its text ("" when there is none), or a usage error naming the line. */
async function readHostFile(file: string): Promise<string | undefined> {
  try {
    return await (await files()).readText(file);
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return undefined;
    throw new UsageError(`Cannot read "${file}": ${errorMessage(error)}`);
  }
}

/**
 * `install`: writes `entry` as server NAME into the host's file; `uninstall` (entry undefined) removes it.
 * Returns the file and its backup. Refuses an existing NAME without `force`; leaves a file that does not parse
 * untouched (a usage error naming its line).
 * @internal
 */
export async function installServer(
  hostName: string,
  name: string,
  target: InstallTarget | undefined,
  options: { scope?: string; force?: boolean; cwd?: string; env?: Record<string, string | undefined> } = {},
): Promise<{ file: string; backup?: string; scope: "project" | "user" }> {
  const { host, file, scope } = await hostFile(hostName, options.scope, options);
  const previous = await readHostFile(file);
  if (target === undefined && previous === undefined) {
    throw new UsageError(`no server "${name}" in "${file}": it does not exist`);
  }
  const text = previous ?? "";
  let servers: JsonObject | undefined;
  try {
    servers = host.toml
      ? (parseTomlText(text).value[host.key] as JsonObject)
      : (parseJsonText(text.trim() ? text : "{}").value as JsonObject)[host.key] as JsonObject;
  } catch (error) {
    throw new UsageError(`Cannot edit "${file}" (left as it was): ${errorMessage(error)}`);
  }
  const exists = isObject(servers) && Object.hasOwn(servers, name);
  if (target === undefined && !exists) throw new UsageError(`no server "${name}" in "${file}"`);
  if (target !== undefined && exists && !options.force) {
    throw new UsageError(`"${file}" already has a server "${name}": give --force to replace it`);
  }
  const entry = target === undefined ? undefined : hostEntry(host, target);
  let edited: string;
  try {
    edited = host.toml ? editTomlTable(text, host.key, name, entry) : editJsonMember(text, host.key, name, entry);
  } catch (error) {
    throw new UsageError(`Cannot edit "${file}" (left as it was): ${errorMessage(error)}`);
  }
  const backup = await replaceFile(file, edited, previous !== undefined);
  return { file, backup, scope };
}

// Codex's [mcp_servers.NAME] tables as the entries the JSON hosts write: its header options become headers
// (`${VAR}` expanded when used, never stored), and `enabled = false` leaves a server out.
function codexServers(table: unknown): JsonObject {
  const servers: JsonObject = Object.create(null);
  if (!isObject(table)) return servers;
  for (const [name, entry] of Object.entries(table)) {
    if (!isObject(entry) || entry.enabled === false) continue;
    const headers: JsonObject = { ...(isObject(entry.http_headers) ? entry.http_headers : {}) };
    if (isObject(entry.env_http_headers)) {
      for (const [header, variable] of Object.entries(entry.env_http_headers)) headers[header] = `\${${variable}}`;
    }
    if (typeof entry.bearer_token_env_var === "string") {
      headers.Authorization = `Bearer \${${entry.bearer_token_env_var}}`;
    }
    servers[name] = Object.keys(headers).length ? { ...entry, headers } : entry;
  }
  return servers;
}

// Zed's context_servers: `{command, args, env}`, or the older `{command: {path, args, env}}`.
function zedServers(table: unknown): JsonObject {
  const servers: JsonObject = Object.create(null);
  if (!isObject(table)) return servers;
  for (const [name, entry] of Object.entries(table)) {
    if (!isObject(entry) || entry.enabled === false) continue;
    servers[name] = isObject(entry.command)
      ? { ...entry, command: entry.command.path, args: entry.command.args, env: entry.command.env }
      : entry;
  }
  return servers;
}

/** The hosts' own user files read after Claude Desktop's (CONTRACT: `<server>`), each as a ConfigFile. */
async function otherHostConfigs(
  cwd: string,
  env: Record<string, string | undefined>,
  home: string,
): Promise<ConfigFile[]> {
  const platform = sys.platform();
  const codexFile = HOSTS.codex.user(env, platform, home);
  const readToml = async (file: string) => {
    const text = await readHostFile(file).catch(() => undefined);
    if (text === undefined) return undefined;
    try {
      return parseTomlText(text).value;
    } catch (error) {
      throw new UsageError(`Cannot read config "${file}": ${errorMessage(error)}`);
    }
  };
  const codex = await readToml(codexFile).catch(() => undefined);
  // A project's .codex/config.toml counts once the user has trusted the project (Codex asks them).
  const trusted: ConfigFile[] = [];
  const projects = isObject(codex?.projects) ? codex.projects : {};
  for (let dir = cwd;;) {
    const project = projects[dir];
    if (isObject(project) && project.trust_level === "trusted") {
      const file = joinPath(dir, ".codex/config.toml");
      const value = await readToml(file).catch(() => undefined);
      if (value) trusted.push({ file, servers: codexServers(value.mcp_servers), gemini: false });
      break;
    }
    const parent = dirnameOf(dir);
    if (parent === dir || dir === home) break;
    dir = parent;
  }
  const json = (file: string, pick: (parsed: JsonObject) => unknown = standardServers) =>
    readConfig(file, false, pick).catch(() => undefined);
  const found = await Promise.all([
    json(HOSTS.windsurf.user(env, platform, home)),
    json(HOSTS.gemini.user(env, platform, home)),
    json(HOSTS.zed.user(env, platform, home), (parsed) => zedServers(parsed.context_servers)),
    json(`${env.COPILOT_HOME || `${home}/.copilot`}/mcp-config.json`),
    json(HOSTS.vscode.user(env, platform, home)),
    json(HOSTS.cursor.user(env, platform, home)), // read already when the walk up passed HOME
    // What `install gemini|zed --scope project` writes here.
    json(joinPath(cwd, ".gemini/settings.json")),
    json(joinPath(cwd, ".zed/settings.json"), (parsed) => zedServers(parsed.context_servers)),
  ]);
  const codexConfig: ConfigFile[] = codex
    ? [{ file: codexFile, servers: codexServers(codex.mcp_servers), gemini: false }]
    : [];
  return [...trusted, ...codexConfig, ...found.filter((config): config is ConfigFile => config !== undefined)];
}

// --- 11d. Bundles: a tool folder as an MCP Bundle (pack) ---
// An MCP Bundle is a zip a host installs with one click: manifest.json, the program, the tools. The program is
// mcp.ts as JavaScript (javaScriptOf), the zip is written here (zipArchive): no packer, no dependency.

/**
 * mcp.ts as the JavaScript the npm package and a bundle run: the types blanked by the runtime's own stripper
 * (`strip`: lines and columns stay mcp.ts's), the shebang naming node, and every other character outside ASCII
 * written as an escape: V8 keeps an ASCII source one byte a character, which Node reads and compiles faster
 * (~2 ms of each start). A blanked type that held such a character is blanked with plain spaces.
 * @internal
 */
export function javaScriptOf(source: string, strip: (code: string) => string): string {
  return strip(source)
    .replace(/^#!.*/, "#!/usr/bin/env node")
    .replace(/[\u00a0\u2000-\u200a\ufeff]/g, " ") // what the stripper blanks a 2-, 3- and 4-byte character with
    .replace(/[^\t\n\r\x20-\x7e]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** The MCP Bundle manifest version pack writes (the newest the official mcpb CLI validates). */
const MCPB_MANIFEST_VERSION = "0.3";

/** One file of a zip: its path inside, its bytes, its Unix mode (0o755 keeps it executable). */
interface ZipEntry {
  name: string;
  data: Uint8Array;
  mode: number;
}

let crcTable: Uint32Array | undefined;

function crc32(data: Uint8Array): number {
  if (!crcTable) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let crc = 0xffffffff;
  for (let i = 0; i < data.length; i++) crc = crcTable[(crc ^ data[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

// Raw deflate through the runtime's CompressionStream; undefined where it has no "deflate-raw" (the file is stored).
async function deflateRaw(data: Uint8Array): Promise<Uint8Array | undefined> {
  try {
    const stream = new Blob([data as BlobPart]).stream().pipeThrough(new CompressionStream("deflate-raw"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  } catch {
    return undefined;
  }
}

/**
 * A zip archive of `entries` (PKWARE APPNOTE: local headers, central directory, end record; no ZIP64, so at
 * most 65,535 files and 4 GiB), each deflated when that makes it smaller, else stored; Unix modes in the
 * external attributes; one fixed time, so the same folder makes the same bytes.
 * @internal
 */
export async function zipArchive(entries: ZipEntry[]): Promise<Uint8Array> {
  const DOS_TIME = 0; // 00:00:00
  const DOS_DATE = ((2026 - 1980) << 9) | (1 << 5) | 1; // 2026-01-01
  const locals: Uint8Array[] = [];
  const centrals: Uint8Array[] = [];
  let offset = 0;
  for (const entry of entries) {
    const name = encoder.encode(entry.name);
    const crc = crc32(entry.data);
    const deflated = await deflateRaw(entry.data);
    const compressed = deflated && deflated.length < entry.data.length ? deflated : entry.data;
    const method = compressed === entry.data ? 0 : 8;
    // What a local header and the central directory's record both say, from "version needed" to the name's length.
    const shared = (view: DataView, at: number) => {
      view.setUint16(at, 20, true); // version needed: 2.0
      view.setUint16(at + 2, 0x0800, true); // names in UTF-8
      view.setUint16(at + 4, method, true);
      view.setUint16(at + 6, DOS_TIME, true);
      view.setUint16(at + 8, DOS_DATE, true);
      view.setUint32(at + 10, crc, true);
      view.setUint32(at + 14, compressed.length, true);
      view.setUint32(at + 18, entry.data.length, true);
      view.setUint16(at + 22, name.length, true);
    };
    const local = new Uint8Array(30 + name.length);
    const view = new DataView(local.buffer);
    view.setUint32(0, 0x04034b50, true);
    shared(view, 4);
    local.set(name, 30);
    const central = new Uint8Array(46 + name.length);
    const record = new DataView(central.buffer);
    record.setUint32(0, 0x02014b50, true);
    record.setUint16(4, (3 << 8) | 20, true); // made by Unix, 2.0: the external attributes hold a mode
    shared(record, 6);
    record.setUint32(38, ((0o100000 | (entry.mode & 0o7777)) << 16) >>> 0, true); // a regular file, its mode
    record.setUint32(42, offset, true);
    central.set(name, 46);
    locals.push(local, compressed);
    centrals.push(central);
    offset += local.length + compressed.length;
  }
  const directorySize = centrals.reduce((sum, part) => sum + part.length, 0);
  const end = new Uint8Array(22);
  const tail = new DataView(end.buffer);
  tail.setUint32(0, 0x06054b50, true);
  tail.setUint16(8, entries.length, true);
  tail.setUint16(10, entries.length, true);
  tail.setUint32(12, directorySize, true);
  tail.setUint32(16, offset, true);
  const parts = [...locals, ...centrals, end];
  return concatBytes(parts, offset + directorySize + end.length);
}

// === 12. Client transports ===================================================
// How a client session reaches its server: message texts out, message texts
// in, and failures said as ServerErrors. stdio spawns the server in a process
// group of its own and stops it with a ladder; HTTP posts each message
// (Streamable HTTP, either era) or speaks the 2024-11-05 HTTP+SSE transport.
// Knows no MCP methods beyond initialize (whose answer carries the session id).

const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
const DEFAULT_MAX_TIME_MS = 600_000;
// A server's answers may be far larger than what we accept as a server (a 10 MiB image).
const DEFAULT_CLIENT_MAX_LINE_BYTES = 64 * 1024 * 1024;
const STDERR_TAIL_BYTES = 64 * 1024;
// lifecycle.mdx "Shutdown": close stdin, wait, SIGTERM, wait, SIGKILL.
const SHUTDOWN_STEP_MS = 2_000;
const UNRESPONSIVE_STEP_MS = 250;
// transports.mdx (2025-11-25): reconnect after the server's `retry`, else after this.
const SSE_DEFAULT_RETRY_MS = 1_000;
const SSE_MAX_RESUMES = 5;
const SESSION_DELETE_TIMEOUT_MS = 1_000;
const SSE_ENDPOINT_TIMEOUT_MS = 10_000;
const NOTIFY_WAIT_MS = 500;

/** What a client transport reports to its session. */
interface TransportEvents {
  /** One message text from the server (`parsed`: the same, when the transport already parsed it). */
  message(text: string, parsed?: unknown, about?: RequestId): void; // about: the request whose stream carried it
  /** A request we sent will get no answer (its HTTP exchange failed, its answer was too long); no id: every one. */
  failed(id: RequestId | undefined, error: Error): void;
  /** The connection is gone: every request fails with this. */
  closed(error: ServerError): void;
  /** Output of the server that is not a message: a stdout line that is not JSON-RPC. */
  invalid(text: string): void;
  /** The server's stderr, as it arrives. */
  stderr(text: string): void;
  /** HTTP request lines and statuses, for --trace (no header values). */
  trace(line: string): void;
}

/** A way to a server: {@linkcode StdioTransport} or {@linkcode HttpTransport}. */
interface ClientTransport {
  readonly kind: "stdio" | "http" | "sse";
  /** Spawns or connects; a failure is a ServerError, `retryable` when trying again may help. */
  start(events: TransportEvents): Promise<void>;
  /** Sends one message; `context.headers` go with it over HTTP. */
  send(text: string, context?: SendContext): void;
  /** Stops waiting for the answer to request `id` (over HTTP its response stream is closed). */
  abandon(id: RequestId): void;
  /** A request timed out: shutdown need not wait long for the server to notice. */
  markUnresponsive(): void;
  /** Stops the server or ends the HTTP session; resolves when nothing of it is left. */
  close(): Promise<void>;
  /** The end of the server's stderr (stdio), for error reports. */
  readonly stderr: string;
  /** The era the far end speaks, where the transport knows it before any message (a daemon's session). */
  readonly era?: "legacy" | "modern";
  /** A modern far end's server/discover answer, where the transport was given it (a daemon's hello). */
  readonly discovered?: JsonObject;
}

// --- 12a. stdio ---

/** Options of {@linkcode StdioTransport}. */
interface StdioTransportOptions {
  /** Added to the server's environment (which otherwise is ours). */
  env?: Record<string, string>;
  /** The server's working directory (default the spec's). */
  cwd?: string;
  /** Longest line accepted from the server. */
  maxLineBytes?: number;
  /** Each wait of the stop ladder (default SHUTDOWN_STEP_MS). */
  stopStepMs?: number;
  /** How the stop ladder waits (tests). */
  wait?: Wait;
}

/** A server spawned with piped stdio, in its own process group; stopped in order by close(). */
class StdioTransport implements ClientTransport {
  readonly kind = "stdio";
  #spec: StdioServerSpec;
  #options: StdioTransportOptions;
  #child: ChildHandle | undefined;
  #writer: FrameWriter;
  #stderrTail = "";
  #exited: Promise<void>;
  #markExited!: () => void;
  #hasExited = false;
  #unresponsive = false;
  #closing: Promise<void> | undefined;

  constructor(spec: StdioServerSpec, options: StdioTransportOptions = {}) {
    this.#spec = spec;
    this.#options = options;
    this.#exited = new Promise((resolve) => this.#markExited = resolve);
    this.#writer = new FrameWriter((text) => {
      this.#child?.write(text);
      return true;
    });
  }

  get stderr(): string {
    return this.#stderrTail;
  }

  async start(events: TransportEvents): Promise<void> {
    const spec = this.#spec;
    const reader = new FrameReader({
      message: (text) => events.message(text),
      // The answer it was is failed at once (all of them when its id cannot be read): waiting would time out.
      oversize: (limit, head) =>
        events.failed(
          idNearStart(head),
          new ServerError(`the server sent a message over ${limit} bytes (raise --max-line-bytes)`),
        ),
    }, this.#options.maxLineBytes ?? DEFAULT_CLIENT_MAX_LINE_BYTES);
    const stderrDecoder = new TextDecoder();
    // Outside the try: Deno's missing --allow-env is a usage problem, not a failed start.
    const env = { ...sys.env(), ...spec.env, ...this.#options.env } as Record<string, string>;
    try {
      this.#child = await spawnChild(spec.command, spec.args, { cwd: this.#options.cwd ?? spec.cwd, env }, {
        stdout: (chunk) => reader.push(chunk),
        stderr: (chunk) => {
          const text = stderrDecoder.decode(chunk, { stream: true });
          this.#stderrTail = keepTail(this.#stderrTail, text, STDERR_TAIL_BYTES);
          events.stderr(text);
        },
        exit: (code, signal) => {
          reader.end();
          this.#setExited();
          events.closed(new ServerError(`the server exited ${code !== null ? `with code ${code}` : `on ${signal}`}`));
        },
      });
    } catch (error) {
      let why = (error as { code?: string }).code === "ENOENT" ? "command not found" : errorMessage(error);
      // `localhost:3001/mcp`: an address without its scheme, taken for a command.
      if (why === "command not found" && /^[\w.-]+:\d+(\/|$)/.test(spec.command) && spec.args.length === 0) {
        why += `; for a server at that address, give its URL: http://${spec.command}`;
      }
      this.#setExited();
      throw new ServerError(`Cannot start "${spec.command}": ${why}`, { retryable: true });
    }
  }

  send(text: string): void {
    this.#writer.send(text);
  }

  abandon(): void {}

  markUnresponsive(): void {
    this.#unresponsive = true;
  }

  #setExited(): void {
    this.#hasExited = true;
    this.#markExited();
  }

  /** Close its stdin, wait, SIGTERM its group, wait, SIGKILL. */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<void> {
    this.#writer.flush();
    const child = this.#child;
    if (!child || this.#hasExited) return;
    child.end();
    // A server that let a request time out has had its chance: a moment to read
    // the cancellation and its closed stdin, not the whole first step.
    const step = this.#options.stopStepMs ?? SHUTDOWN_STEP_MS;
    const first = this.#unresponsive ? Math.min(UNRESPONSIVE_STEP_MS, step) : step;
    await stopLadder(child, this.#exited, [[first, "SIGTERM"], [step, "SIGKILL"], [step, undefined]], {
      wait: this.#options.wait,
    });
  }
}

// --- 12b. Streamable HTTP and HTTP+SSE ---

/** An HTTP answer that is not one the protocol allows here (a 5xx, an unexpected 4xx). Exit code 3. */
export class HttpStatusError extends ServerError {
  /** The HTTP status. */
  status: number;
  constructor(message: string, status: number) {
    super(message, { retryable: status === 502 || status === 503 || status === 504 });
    this.name = "HttpStatusError";
    this.status = status;
  }
}

// A legacy session the server forgets again right after making it (exit 3, at once: never a wait for --timeout).
function sessionUnknown(): ServerError {
  return new ServerError(
    "the session is unknown to the server it reached: it answered 404 for a session just made " +
      "(a load balancer without session affinity in front of servers that keep sessions apart, or a restarted server)",
  );
}

/**
 * A response stream that ended before its answer, with no way to resume it. In
 * 2026-07-28 the request is then sent again with a new id (changelog, item 9).
 */
class StreamBrokenError extends ServerError {
  constructor(message: string) {
    super(message);
    this.name = "StreamBrokenError";
  }
}

/** Options of {@linkcode HttpTransport}. */
interface HttpTransportOptions {
  /** Sent on every request (after the spec's, overriding them). */
  headers?: Record<string, string>;
  /** Longest message (JSON body or SSE event) accepted. */
  maxBytes?: number;
  /** Tokens for a server that answers 401 (not used when `headers` carry an Authorization). */
  auth?: AuthProvider;
}

/**
 * Streamable HTTP (transports.mdx 2025-11-25, streamable-http.mdx 2026-07-28):
 *
 *   POST /mcp  Accept: application/json, text/event-stream   one message per request
 *   ← 200 application/json {…}  |  200 text/event-stream  event: message / data: {…}  |  202 (a notification)
 *
 * A legacy session's id comes with the initialize answer and goes on every later
 * request; a 404 for it starts a new session (`renewSession`) and sends the
 * request again. A stream that breaks after an event id is resumed with GET and
 * Last-Event-ID, after the server's `retry`. A server that refuses the POST of
 * initialize (400, 404, 405) may speak the 2024-11-05 HTTP+SSE transport: GET
 * the URL, POST to the `endpoint` it names, read every answer from the GET stream.
 */
class HttpTransport implements ClientTransport {
  kind: "http" | "sse";
  readonly stderr = "";
  /** The legacy session's id, from the initialize answer. */
  sessionId: string | undefined;
  /** The negotiated version, sent as MCP-Protocol-Version after initialize (legacy). */
  protocolVersion: string | undefined;
  /** Set by the session: runs initialize again when the server has forgotten our session. */
  renewSession: (() => Promise<void>) | undefined;
  #url: URL;
  #headers: Record<string, string>;
  #maxBytes: number;
  #auth: AuthProvider | undefined;
  #events!: TransportEvents;
  #inflight = new Map<RequestId, AbortController>();
  #stream: AbortController | undefined; // the GET stream (HTTP+SSE, or a legacy session's)
  #postUrl: URL | undefined; // HTTP+SSE: where messages go
  #renewing: Promise<void> | undefined;
  #unknownSession: ServerError | undefined; // the new session was forgotten too: nothing more is sent
  #unproven = false; // a session made after a 404 that has not answered a request yet (it may not be kept)
  #notifying: Promise<void> | undefined; // a notification on its way (initialized): requests wait for it
  #sending = new Set<AbortController>(); // notifications and responses on their way
  #closed = false;

  constructor(spec: HttpServerSpec, options: HttpTransportOptions = {}) {
    this.kind = spec.type;
    this.#url = new URL(spec.url);
    this.#headers = { ...spec.headers, ...options.headers };
    this.#maxBytes = options.maxBytes ?? DEFAULT_CLIENT_MAX_LINE_BYTES;
    const ownAuthorization = Object.keys(this.#headers).some((name) => name.toLowerCase() === "authorization");
    this.#auth = ownAuthorization ? undefined : options.auth;
  }

  async start(events: TransportEvents): Promise<void> {
    this.#events = events;
    if (this.kind === "sse") await this.#openSse();
  }

  send(text: string, context?: SendContext): void {
    if (this.#closed) return;
    let message: JsonObject;
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    void this.#deliver(text, message, context?.headers);
  }

  abandon(id: RequestId): void {
    this.#inflight.get(id)?.abort();
  }

  markUnresponsive(): void {}

  /**
   * Opens the GET stream of a legacy session, for what the server sends unasked
   * (a 405 means none). Resolves once the server has answered the GET, so that
   * what it sends there from then on is not lost.
   */
  listen(): Promise<void> {
    if (this.kind !== "http" || this.#stream || this.#closed) return Promise.resolve();
    const controller = this.#stream = new AbortController();
    let opened!: () => void;
    const answered = new Promise<void>((resolve) => opened = resolve);
    void (async () => {
      let lastId: string | undefined;
      let retry = SSE_DEFAULT_RETRY_MS;
      for (let failures = 0; failures < 3 && !controller.signal.aborted;) {
        const headers: Record<string, string> = { accept: "text/event-stream" };
        if (lastId !== undefined) headers["last-event-id"] = lastId;
        const response = await this.#fetch("GET", this.#url, { headers, signal: controller.signal });
        opened();
        if (!response.ok || !isEventStream(response)) {
          await response.body?.cancel().catch(noop);
          return; // 405: the server offers no GET stream
        }
        await this.#readEvents(response, (event) => {
          if (event.id !== undefined) lastId = event.id;
          if (event.retry !== undefined) retry = event.retry;
          if (event.data && event.event === "message") this.#events.message(event.data);
        });
        if (lastId === undefined) failures++;
        await abortableSleep(retry, controller.signal);
      }
    })().catch(noop).finally(opened);
    return answered;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // What we told the server (initialized, cancelled) gets a moment to arrive, not forever: a
    // server that has forgotten us may never answer it.
    if (this.#notifying) await within(this.#notifying, NOTIFY_WAIT_MS);
    for (const controller of this.#sending) controller.abort();
    this.#stream?.abort();
    for (const controller of this.#inflight.values()) controller.abort();
    // transports.mdx: a client that no longer needs its session SHOULD end it with DELETE.
    if (this.kind === "http" && this.sessionId !== undefined) {
      const response = await this.#fetch("DELETE", this.#url, {
        headers: {},
        signal: AbortSignal.timeout(SESSION_DELETE_TIMEOUT_MS),
      }).catch(() => undefined);
      await response?.body?.cancel().catch(noop);
    }
  }

  // The server forgot a session it had just made: every request waiting and every later one fails at once.
  #sessionUnknown(): void {
    const error = this.#unknownSession ??= sessionUnknown();
    for (const id of this.#inflight.keys()) this.#events.failed(id, error);
  }

  // One message out. A request's failure fails that request; a notification's is only traced.
  async #deliver(text: string, message: JsonObject, extra: Record<string, string> = {}): Promise<void> {
    const method = typeof message.method === "string" ? message.method : undefined;
    const id = method !== undefined && isRequestId(message.id) ? message.id : undefined;
    const controller = new AbortController();
    if (id !== undefined) this.#inflight.set(id, controller);
    else this.#sending.add(controller);
    let delivered!: () => void;
    if (id === undefined && method !== undefined) {
      const before = this.#notifying;
      this.#notifying = new Promise<void>((resolve) => delivered = resolve);
      await before;
    } else if (this.#notifying) {
      await this.#notifying; // lifecycle.mdx: notifications/initialized comes before what follows
    }
    try {
      if (this.kind === "sse") {
        await this.#postToSse(text, controller.signal);
        return;
      }
      if (this.#renewing && method !== "initialize") await this.#renewing; // its new session id, not none
      if (this.#unknownSession) throw this.#unknownSession;
      let response = await this.#post(text, extra, controller.signal);
      if (response.status === 404 && this.sessionId !== undefined && method !== "initialize" && this.renewSession) {
        // transports.mdx: a 404 for our session id: a new session, and the request again — once. A session
        // forgotten before it answered anything was never kept where our requests land: renewing it again
        // would loop (each initialize reaching one replica, the next request another), so that ends the client.
        await response.body?.cancel().catch(noop);
        if (this.#unproven) return this.#sessionUnknown();
        if (id === undefined) throw httpStatusError(response, "", method ?? "a response"); // the next request renews
        this.sessionId = undefined;
        this.#renewing ??= this.renewSession().finally(() => this.#renewing = undefined);
        this.#unproven = true;
        await this.#renewing;
        if (this.#unknownSession) throw this.#unknownSession;
        response = await this.#post(text, extra, controller.signal);
        if (response.status === 404) {
          await response.body?.cancel().catch(noop);
          return this.#sessionUnknown();
        }
      }
      if (method === "initialize" && [400, 404, 405].includes(response.status)) {
        const body = await readBody(response, this.#maxBytes);
        const error = jsonRpcErrorOf(body);
        // versioning.mdx: a recognized 2026-07-28 error means a modern server; anything else may be an old one.
        const modern = error !== undefined && error.code <= ErrorCode.HeaderMismatch && error.code >= -32099;
        if (!modern && (await this.#tryOldSse(controller.signal))) {
          await this.#postToSse(text, controller.signal);
          return;
        }
        throw error ?? httpStatusError(response, body, method);
      }
      await this.#answer(response, id, method, controller.signal);
    } catch (error) {
      if (controller.signal.aborted || this.#closed) return;
      if (id !== undefined) this.#events.failed(id, error instanceof Error ? error : new Error(String(error)));
      else this.#events.trace(`  (${method ?? "a response"} was not delivered: ${errorMessage(error)})`);
    } finally {
      if (id !== undefined) this.#inflight.delete(id);
      this.#sending.delete(controller);
      delivered?.();
    }
  }

  #post(text: string, extra: Record<string, string>, signal: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...extra,
    };
    return this.#fetch("POST", this.#url, { headers, body: text, signal });
  }

  // What came back for one POST.
  async #answer(response: Response, id: RequestId | undefined, method: string | undefined, signal: AbortSignal) {
    if (method === "initialize" && response.ok) {
      const session = response.headers.get("mcp-session-id");
      if (session !== null) this.sessionId = session;
    }
    checkAuthorization(response, this.#url);
    if (id === undefined) {
      // A notification or a response: 202, nothing to read.
      const body = await readBody(response, this.#maxBytes).catch(() => "");
      if (!response.ok) throw httpStatusError(response, body, method ?? "a response");
      return;
    }
    if (response.ok && isEventStream(response)) {
      if (method !== "initialize") this.#unproven = false;
      return await this.#readAnswerStream(response, id, method!, signal);
    }
    const body = await readBody(response, this.#maxBytes);
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      if (!response.ok) throw httpStatusError(response, body, method!);
      const type = response.headers.get("content-type")?.split(";")[0] || "no content type";
      throw new ServerError(`the server answered ${method} with a body that is not JSON (${type}): ${brief(body)}`);
    }
    if (isObject(parsed) && parsed.id === id && ("result" in parsed || "error" in parsed)) {
      if (response.ok && method !== "initialize") this.#unproven = false;
      this.#events.message(body, parsed);
      return;
    }
    const error = jsonRpcErrorOf(parsed); // about our request, even when its id is null (a 400 before parsing)
    if (error) throw error;
    if (!response.ok) throw httpStatusError(response, body, method!);
    this.#events.message(body, parsed); // something else (a request of the server's): the session judges it
    throw new ServerError(`the server answered ${method} with a message that is not its response: ${brief(body)}`);
  }

  // An SSE answer: messages until ours. Broken after an event id: resumed by GET with Last-Event-ID.
  async #readAnswerStream(response: Response, id: RequestId, method: string, signal: AbortSignal): Promise<void> {
    let answered = false;
    let lastId: string | undefined;
    let retry = SSE_DEFAULT_RETRY_MS;
    const onEvent = (event: SseEvent) => {
      if (event.id !== undefined) lastId = event.id;
      if (event.retry !== undefined) retry = event.retry;
      if (!event.data || event.event !== "message") return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(event.data);
      } catch {
        this.#events.invalid(event.data);
        return;
      }
      if (isObject(parsed) && parsed.id === id && parsed.method === undefined) answered = true;
      this.#events.message(event.data, parsed, id);
    };
    await this.#readEvents(response, onEvent);
    for (let resumes = 0; !answered && lastId !== undefined && resumes < SSE_MAX_RESUMES; resumes++) {
      // transports.mdx (2025-11-25): the client MUST respect `retry`; resumption is always by GET.
      await abortableSleep(retry, signal);
      const resumed = await this.#fetch("GET", this.#url, {
        headers: { accept: "text/event-stream", "last-event-id": lastId },
        signal,
      });
      if (!resumed.ok || !isEventStream(resumed)) {
        await resumed.body?.cancel().catch(noop);
        break;
      }
      await this.#readEvents(resumed, onEvent);
    }
    if (!answered && !signal.aborted) {
      throw new StreamBrokenError(`the server ended the response stream of ${method} before answering`);
    }
  }

  // A stream's events until it ends; one event over the cap ends it at once with an error (waiting would
  // only grow memory and time out).
  async #readEvents(response: Response, onEvent: (event: SseEvent) => void): Promise<void> {
    let tooLong: ServerError | undefined;
    const reader = new SseReader(onEvent, this.#maxBytes, (limit) => {
      tooLong = new ServerError(`the server sent an event over ${limit} bytes (raise --max-line-bytes)`);
    });
    try {
      for await (const chunk of response.body ?? []) {
        reader.push(chunk);
        if (tooLong) break; // ends the body's reading and closes the stream
      }
    } catch {
      // a stream that breaks has ended; what follows decides whether it is resumed
    }
    if (tooLong) throw tooLong;
    reader.end();
  }

  // HTTP+SSE (2024-11-05): GET the URL; its first event names the endpoint to POST to.
  async #openSse(): Promise<void> {
    const controller = this.#stream = new AbortController();
    const response = await this.#fetch("GET", this.#url, {
      headers: { accept: "text/event-stream" },
      signal: controller.signal,
    });
    checkAuthorization(response, this.#url);
    if (!response.ok || !isEventStream(response)) {
      const body = await readBody(response, 4096).catch(() => "");
      throw httpStatusError(response, body, "the SSE stream (GET)");
    }
    let found!: (url: URL | Error) => void;
    const endpoint = new Promise<URL | Error>((resolve) => found = resolve);
    const timer = setTimeout(
      () => found(new ServerError(`the server sent no endpoint event within ${SSE_ENDPOINT_TIMEOUT_MS} ms`)),
      SSE_ENDPOINT_TIMEOUT_MS,
    );
    void this.#readEvents(response, (event) => {
      if (event.event === "endpoint") {
        let url: URL | Error;
        try {
          url = new URL(event.data.trim(), this.#url);
          // The SDK's rule too: messages never go to another origin than the one we chose.
          if (url.origin !== this.#url.origin) {
            url = new ServerError(`the server named an endpoint on another origin (${url.origin})`);
          }
        } catch {
          url = new ServerError(`the server named an endpoint that is not a URL: ${brief(event.data)}`);
        }
        found(url);
      } else if (event.data && event.event === "message") {
        this.#events.message(event.data);
      }
    }).then(() => {
      found(new ServerError("the server closed its SSE stream before naming an endpoint"));
      if (!this.#closed) this.#events.closed(new ServerError("the server closed its SSE stream"));
    }, (error: ServerError) => {
      found(error); // an event over the cap: every answer comes on this stream, so the session is over
      if (!this.#closed) this.#events.closed(error);
    });
    const url = await endpoint;
    clearTimeout(timer);
    if (url instanceof Error) {
      controller.abort();
      throw url;
    }
    this.#postUrl = url;
  }

  // The fallback of a client that supports old servers (transports.mdx, "Backwards compatibility").
  async #tryOldSse(signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return false;
    try {
      await this.#openSse();
    } catch {
      return false;
    }
    this.kind = "sse";
    this.#events.trace("  (the server speaks the 2024-11-05 HTTP+SSE transport)");
    return true;
  }

  async #postToSse(text: string, signal: AbortSignal): Promise<void> {
    const response = await this.#fetch("POST", this.#postUrl!, {
      headers: { "content-type": "application/json" },
      body: text,
      signal,
    });
    checkAuthorization(response, this.#url);
    const body = await readBody(response, 4096).catch(() => "");
    if (!response.ok) throw httpStatusError(response, body, "a message");
  }

  // Every request goes through here: our headers, the session's, the user's; --trace without values.
  async #fetch(
    method: string,
    url: URL,
    init: { headers: Record<string, string>; body?: string; signal: AbortSignal },
  ): Promise<Response> {
    const headers: Record<string, string> = { ...init.headers };
    if (this.sessionId !== undefined && this.kind === "http") headers["mcp-session-id"] = this.sessionId;
    if (this.protocolVersion !== undefined && headers["mcp-protocol-version"] === undefined) {
      headers["mcp-protocol-version"] = this.protocolVersion;
    }
    for (const [name, value] of Object.entries(this.#headers)) headers[name.toLowerCase()] = value;
    for (let attempt = 0;; attempt++) {
      // The token goes only to this server's origin (the HTTP+SSE endpoint is checked to be on it).
      if (this.#auth) {
        delete headers.authorization;
        delete headers.dpop;
        if (url.origin === this.#url.origin) Object.assign(headers, await this.#auth.headers(method, url));
      }
      this.#events.trace(`> ${method} ${url.pathname}${url.search ? "?…" : ""}`);
      let response: Response;
      try {
        response = await fetchSameOrigin(url, { method, headers, body: init.body, signal: init.signal });
      } catch (error) {
        if (init.signal.aborted) throw init.signal.reason ?? error;
        throw fetchFailure(error, url);
      }
      const type = response.headers.get("content-type")?.split(";")[0];
      this.#events.trace(`< ${response.status}${type ? ` ${type}` : ""}`);
      const challenge = response.headers.get("www-authenticate") ?? "";
      const nonce = response.headers.get("dpop-nonce");
      if (nonce !== null && url.origin === this.#url.origin) this.#auth?.nonce?.(nonce);
      const refused = response.status === 401 || (response.status === 403 && /insufficient_scope/i.test(challenge));
      // authorization/index.mdx: a 401 starts the flow; a 403 insufficient_scope asks for more scopes.
      if (refused && this.#auth && attempt < MAX_AUTH_FLOWS + 1) {
        await response.body?.cancel().catch(noop);
        if (await this.#auth.challenge(response.status, challenge)) continue;
        throw new AuthorizationError(
          `the server at ${this.#url.origin}${this.#url.pathname} still refuses after authorizing ` +
            `(HTTP ${response.status}${/insufficient_scope/i.test(challenge) ? " insufficient_scope" : ""})`,
          response.status,
        );
      }
      return response;
    }
  }
}

function isEventStream(response: Response): boolean {
  return /^\s*text\/event-stream/i.test(response.headers.get("content-type") ?? "");
}

// A body as text, at most `limit` bytes (the rest is not read).
async function readBody(response: Response, limit: number): Promise<string> {
  if (!response.body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body) {
    size += chunk.length;
    if (size > limit) {
      await response.body.cancel().catch(noop);
      throw new ServerError(`the server's answer is over ${limit} bytes (raise --max-line-bytes)`);
    }
    chunks.push(chunk);
  }
  return new TextDecoder().decode(concatBytes(chunks, size));
}

// A JSON-RPC error response (text or parsed) as an RpcError, else undefined.
function jsonRpcErrorOf(body: unknown): RpcError | undefined {
  let parsed = body;
  if (typeof body === "string") {
    try {
      parsed = JSON.parse(body);
    } catch {
      return undefined;
    }
  }
  if (!isObject(parsed) || !isObject(parsed.error) || typeof parsed.error.code !== "number") return undefined;
  return new RpcError(parsed.error.code, String(parsed.error.message ?? "error"), parsed.error.data);
}

function httpStatusError(response: Response, body: string, what: string): HttpStatusError {
  // A web page for a 404 or 405: not an MCP endpoint at all, most likely the wrong path.
  const html = /^\s*<(!doctype|html)/i.test(body) || /text\/html/i.test(response.headers.get("content-type") ?? "");
  if (html && (response.status === 404 || response.status === 405)) {
    const at = new URL(response.url || "http://x/");
    return new HttpStatusError(
      `the server answered ${what} with HTTP ${response.status} and a web page: ${at.pathname} is probably not its ` +
        `MCP endpoint (servers use /mcp, older ones /sse; check the URL)`,
      response.status,
    );
  }
  const text = body.trim() ? `: ${brief(body.trim().split("\n")[0])}` : "";
  return new HttpStatusError(
    `the server answered ${what} with HTTP ${response.status}${
      response.statusText ? ` ${response.statusText}` : ""
    }${text}`,
    response.status,
  );
}

// A 401, or a 403 that asks for more scopes, where no AuthProvider answers it (a token given with -H, or none).
function checkAuthorization(response: Response, url: URL): void {
  const challenge = response.headers.get("www-authenticate") ?? "";
  if (response.status === 401 || (response.status === 403 && /insufficient_scope/i.test(challenge))) {
    void response.body?.cancel().catch(noop);
    const params = parseBearerChallenge(challenge);
    const said = params.error_description;
    const why = response.status === 401
      ? "refused the token given with -H or in the config (HTTP 401"
      : "wants more scopes than the token given with -H or in the config has (HTTP 403 insufficient_scope";
    // Drop it to log in only where the server says how to log in (OAuth); else its value is what is wrong.
    const next = params.resource_metadata ? "it is used as it is: drop it to let mcp.ts log in" : "check its value";
    throw new AuthorizationError(
      `the server at ${url.origin}${url.pathname} ${why}${said ? `: ${said}` : ""}); ${next}`,
      response.status,
    );
  }
}

// What a failed fetch means to a person, from the runtime's words for it.
function fetchFailure(error: unknown, url: URL): UnreachableError {
  if (error instanceof UnreachableError) return error; // already said (a redirect not followed)
  const cause = (error as { cause?: unknown }).cause;
  const code = (cause as { code?: unknown })?.code ?? (error as { code?: unknown }).code ?? "";
  const text = `${errorMessage(error)} ${cause ? errorMessage(cause) : ""} ${code}`;
  const where = `Cannot reach ${url.origin}`;
  if (/ECONNREFUSED|refused/i.test(text)) {
    return new UnreachableError(`${where}: connection refused (is the server running?)`, { retryable: true });
  }
  if (/ENOTFOUND|EAI_AGAIN|EAI_NONAME|dns|failed to lookup|getaddrinfo|Name or service not known/i.test(text)) {
    return new UnreachableError(`${where}: the host name does not resolve (DNS)`);
  }
  if (/certificate|TLS|SSL|CERT_|self.signed|UNABLE_TO_VERIFY|handshake|corrupt message/i.test(text)) {
    const why = errorMessage(cause ?? error).split("\n")[0].replace(/^.*(?:routines|client error \(Connect\)):/, "");
    return new UnreachableError(`${where}: the TLS handshake failed (${why.trim()})`);
  }
  if (/ECONNRESET|socket hang up|reset|closed/i.test(text)) {
    return new UnreachableError(`${where}: the connection was closed before an answer`, { retryable: true });
  }
  return new UnreachableError(`${where}: ${errorMessage(cause ?? error)}`);
}

// Waits for `promise`, or `ms` at most; leaves no timer behind (one would keep the process alive).
async function within(promise: Promise<unknown>, ms: number): Promise<void> {
  let cancel: (() => void) | undefined;
  await Promise.race([promise, new Promise<void>((resolve) => cancel = guardTimer(ms, resolve))]);
  cancel?.();
}

// Resolves with undefined after `ms`; the timer keeps no process alive.
function sleepFor(ms: number): Promise<undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    (timer as { unref?: () => void }).unref?.();
  });
}

function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

// --- 12c. The per-user daemon's socket: a session's commands, and its control ---

const DAEMON_HELLO_MAX_BYTES = 64 * 1024;
const DAEMON_START_WAIT_MS = 10_000;

/**
 * Where the daemon's files are in the state directory. Windows has no daemon yet (its named pipe is not built): every
 * session command says so in one line, rather than fail on a socket path Windows would read as a pipe's name.
 * @internal
 */
export function daemonPaths(
  env: Record<string, string | undefined> = sys.env(),
  platform: string = sys.platform(),
): { dir: string; socket: string; token: string; log: string } {
  if (platform === "win32") {
    throw new UsageError(
      "Cannot use sessions on Windows yet: the per-user daemon listens on a Unix socket, and its named pipe is not " +
        "built; give the server itself instead of @NAME",
    );
  }
  const dir = stateDirectory(env);
  return { dir, socket: `${dir}/daemon.sock`, token: `${dir}/daemon.token`, log: `${dir}/daemon.log` };
}

/** The daemon's socket closed before its answer. */
class DaemonGoneError extends ServerError {
  constructor() {
    super("the daemon's socket closed");
    this.name = "DaemonGoneError";
  }
}

/** No daemon is listening (and none was to be started). */
class NoDaemonError extends UsageError {
  constructor(socket: string) {
    super(
      `no mcp.ts daemon is running (no one listens on ${socket}); open a session with: mcp.ts connect NAME <server>`,
    );
    this.name = "NoDaemonError";
  }
}

/** The daemon has no session of that name (its hello's refusal). */
class NoSessionError extends UsageError {
  constructor(message: string) {
    super(message);
    this.name = "NoSessionError";
  }
}

/** Reads one line of a socket (at most `max` bytes): the line, and whatever came after it. */
function readFirstLine(
  socket: LocalSocket,
  max: number,
  timeoutMs: number,
): Promise<{ line: string; rest: Uint8Array }> {
  return new Promise((resolve, reject) => {
    let buffered: Uint8Array = new Uint8Array(0);
    let settled = false;
    const done = (error?: Error, result?: { line: string; rest: Uint8Array }) => {
      if (settled) return;
      settled = true;
      cancel();
      socket.pause();
      off();
      if (error) reject(error);
      else resolve(result!);
    };
    const off = socket.onData((chunk) => {
      buffered = concatBytes([buffered, chunk], buffered.length + chunk.length);
      const end = buffered.indexOf(NEWLINE);
      if (end >= 0) {
        done(undefined, { line: new TextDecoder().decode(buffered.subarray(0, end)), rest: buffered.slice(end + 1) });
      } else if (buffered.length > max) done(new ServerError(`a line over ${max} bytes on the daemon's socket`));
    });
    socket.onClose(() => done(new DaemonGoneError()));
    const cancel = guardTimer(timeoutMs, () => done(new TimeoutError("the daemon did not answer")));
    socket.resume();
  });
}

/**
 * A connection to the daemon, past its hello (the token in the 0600 file proves the same user): `session` for a
 * session's MCP stream, none for control requests. Starts the daemon first when `start` and none listens.
 */
async function daemonConnection(
  hello: { session?: string; attach?: boolean },
  options: { start?: boolean; env?: Record<string, string | undefined>; json?: boolean } = {},
): Promise<{ socket: LocalSocket; rest: Uint8Array; reply: JsonObject }> {
  const env = options.env ?? sys.env();
  const paths = daemonPaths(env);
  await privateDirectory(paths.dir);
  const deadline = Date.now() + DAEMON_START_WAIT_MS;
  for (let started = false, wait = 10;; wait = Math.min(wait * 2, 100)) {
    let socket: LocalSocket;
    try {
      socket = await connectLocal(paths.socket);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code !== "ENOENT" && code !== "ECONNREFUSED") {
        throw new ServerError(`Cannot reach the daemon at ${paths.socket}: ${errorMessage(error)}`);
      }
      if (!options.start) throw new NoDaemonError(paths.socket);
      if (Date.now() > deadline) {
        throw new ServerError(
          `the daemon did not start within ${DAEMON_START_WAIT_MS / 1000} s; see: mcp.ts daemon log`,
        );
      }
      if (!started) {
        started = true;
        // Its log is JSON lines when the command that starts it logs JSON (--log-format json).
        await spawnDetached(
          await selfArgv(["daemon", "run", ...(options.json ? ["--log-format", "json"] : [])]),
          paths.dir,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
      continue;
    }
    const token = await readPrivateFile(paths.token);
    socket.write(JSON.stringify({ ...hello, token: token.trim() }) + "\n");
    let first: { line: string; rest: Uint8Array };
    try {
      first = await readFirstLine(socket, DAEMON_HELLO_MAX_BYTES, DAEMON_START_WAIT_MS);
    } catch (error) {
      socket.destroy();
      // Closed before its answer: a daemon on its way out (its last session ended). Gone, as if it were not there.
      if (!(error instanceof DaemonGoneError)) throw error;
      if (!options.start) throw new NoDaemonError(paths.socket);
      started = false;
      await new Promise((resolve) => setTimeout(resolve, wait));
      continue;
    }
    const reply = parseJsonObject(first.line);
    if (reply?.ok !== true) {
      socket.destroy();
      const message = typeof reply?.error === "string" ? reply.error : "the daemon refused the connection";
      throw reply?.code === 2 ? new NoSessionError(message) : new ServerError(message);
    }
    return { socket, rest: first.rest, reply };
  }
}

/** One control request to the daemon (open, list, close, status, stop) and its result. */
async function daemonRequest(
  method: string,
  params: JsonObject,
  options: { start?: boolean; env?: Record<string, string | undefined>; json?: boolean } = {},
): Promise<JsonObject> {
  const { socket } = await daemonConnection({}, options);
  try {
    socket.write(JSON.stringify({ id: 1, method, params }) + "\n");
    // The daemon ending meanwhile (its last session closed by another command): as if it were not there.
    const { line } = await readFirstLine(socket, DEFAULT_MAX_LINE_BYTES, 24 * 3600_000).catch((error) => {
      throw error instanceof DaemonGoneError ? new NoDaemonError(daemonPaths(options.env).socket) : error;
    });
    const reply = parseJsonObject(line);
    if (isObject(reply?.error)) {
      const message = String(reply.error.message);
      if (reply.error.code === 2) throw new UsageError(message);
      if (reply.error.code === 4) throw new AuthorizationError(message, 401);
      const error = new ServerError(message);
      if (typeof reply.error.stderr === "string") error.stderr = reply.error.stderr;
      throw error;
    }
    return isObject(reply?.result) ? reply.result : {};
  } finally {
    socket.end();
  }
}

/**
 * `@NAME`: the daemon's session NAME as a transport. Local and in order like stdio, and cancelled the same way
 * (notifications/cancelled); the server behind it is the daemon's to start and stop.
 */
class SessionTransport implements ClientTransport {
  readonly kind = "stdio";
  readonly stderr = "";
  /** The era the session's server speaks (from the daemon's hello). */
  era: "legacy" | "modern" | undefined;
  /** Its server/discover answer (a modern session's hello carries it). */
  discovered: JsonObject | undefined;
  #name: string;
  #maxLineBytes: number;
  #socket: LocalSocket | undefined;
  #closed: Promise<void> | undefined;

  constructor(name: string, maxLineBytes = DEFAULT_CLIENT_MAX_LINE_BYTES) {
    this.#name = name;
    this.#maxLineBytes = maxLineBytes;
  }

  async start(events: TransportEvents): Promise<void> {
    const { socket, rest, reply } = await daemonConnection({ session: this.#name }).catch((error) => {
      if (!(error instanceof NoDaemonError)) throw error;
      throw new UsageError(`no session "@${this.#name}" (no daemon is running); see: mcp.ts sessions`);
    });
    this.#socket = socket;
    this.era = reply.era === "legacy" || reply.era === "modern" ? reply.era : undefined;
    if (isObject(reply.discovered)) this.discovered = reply.discovered; // a modern session's, checked as any answer
    const reader = new FrameReader({
      message: (text) => events.message(text),
      oversize: (limit, head) =>
        events.failed(idNearStart(head), new ServerError(`the session sent a message over ${limit} bytes`)),
    }, this.#maxLineBytes);
    this.#closed = new Promise((resolve) =>
      socket.onClose(() => {
        reader.end();
        events.closed(new ServerError(`the session "${this.#name}" ended (disconnected, or the daemon stopped)`));
        resolve();
      })
    );
    if (rest.length) reader.push(rest);
    socket.onData((chunk) => reader.push(chunk));
    socket.resume();
  }

  // Each message at once, NDJSON: the socket gathers what is written while a write is under way (a batch's lines go
  // out in few writes), and a short command does not pay for setImmediate's first use (~7 ms on Deno: node:timers).
  send(text: string): void {
    this.#socket?.write(text + "\n");
  }

  abandon(): void {}

  markUnresponsive(): void {}

  async close(): Promise<void> {
    this.#socket?.end();
    await within(this.#closed ?? Promise.resolve(), SHUTDOWN_STEP_MS);
    this.#socket?.destroy();
  }
}

// === 13. OAuth ===============================================================
// The MCP authorization flow for an HTTP server that answers 401 (basic/
// authorization, RFC 9728, 8414, 7591, 7636, 8707, 9207): discovery, client
// registration, the authorization code flow through a browser and a loopback
// callback, client credentials, and a token store shared by concurrent
// processes. Yields an AuthProvider for the HTTP transport, nothing else.
//
//   401 WWW-Authenticate: Bearer resource_metadata="…/.well-known/oauth-protected-resource/mcp", scope="a"
//   → PRM {resource, authorization_servers: [AS]} → AS metadata {issuer, authorization_endpoint, token_endpoint, …}
//   → client id (pre-registered, CIMD, or DCR) → /authorize?…&code_challenge=…&resource=… → 127.0.0.1 callback
//   → POST /token {code, code_verifier, resource} → Authorization: Bearer … on every request

// A fixed default, so that two flows cannot cross on one port and a registered redirect URI stays valid.
const DEFAULT_CALLBACK_PORT = 33418;
const AUTH_WAIT_MS = 5 * 60_000;
const REFRESH_MARGIN_S = 60;
const LOCK_WAIT_MS = 15_000;
const LOCK_STALE_MS = 30_000;
const MAX_AUTH_FLOWS = 3;
const JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag";

/**
 * A credential given as VALUE or @FILE (read now, so a rotated file is picked up at every token request): what
 * --assertion and --id-token take. Never put in an error message.
 */
async function readSecretValue(value: string | undefined, flag: string): Promise<string> {
  if (value === undefined || value === "") throw new UsageError(`${flag} needs a value (VALUE or @FILE)`);
  if (!value.startsWith("@")) return value.trim();
  try {
    return (await (await files()).readText(value.slice(1))).trim();
  } catch (error) {
    throw new UsageError(`Cannot read ${flag} ${value}: ${errorMessage(error)}`);
  }
}
const AUTH_FETCH_TIMEOUT_MS = 30_000;

// RFC 7523 §2.1: the jwt-bearer grant's assertion is one JWT (three base64url parts; an unsigned one's last is empty).
async function readAssertion(value: string | undefined): Promise<string> {
  const assertion = await readSecretValue(value, "--assertion");
  if (!/^[\w-]+\.[\w-]+\.[\w-]*$/.test(assertion)) {
    const named = value?.startsWith("@") ? ` ${value}` : "";
    throw new UsageError(`Cannot use --assertion${named}: it is not a JWT (three base64url parts joined by dots)`);
  }
  return assertion;
}

/** What the HTTP client transport asks of whoever holds the credentials. */
interface AuthProvider {
  /**
   * The headers that authorize one request to the server, when there is a token: Authorization, and with a
   * DPoP-bound token a DPoP proof for this method and URL.
   */
  headers(method: string, url: URL): Promise<Record<string, string>>;
  /**
   * The server answered 401 (or 403 insufficient_scope) with this challenge:
   * get a token that may do better, or a DPoP nonce to send. False when there is none to be had.
   */
  challenge(status: number, wwwAuthenticate: string): Promise<boolean>;
  /** The server's DPoP-Nonce header, from any of its answers (RFC 9449 §9). */
  nonce?(value: string): void;
  /** A person is being asked (a browser flow is waiting): request timeouts wait for it. */
  readonly waitingForPerson?: boolean;
}

/** Options of {@linkcode OAuthProvider}. */
export interface OAuthOptions {
  /** A pre-registered client (`--client-id`, or the config entry's `oauth.clientId`). */
  clientId?: string;
  clientSecret?: string;
  /** A PEM private key (PKCS #8) for private_key_jwt. */
  clientKey?: string;
  /** A Client ID Metadata Document URL, used when the authorization server supports CIMD. */
  clientMetadataUrl?: string;
  /** Scopes to ask for instead of the server's (space-separated). */
  scope?: string;
  /** The loopback port of the redirect URI (default 33418). */
  callbackPort?: number;
  /**
   * Without a browser: "client_credentials" (tokens for the client itself, CI), "jwt-bearer" (a JWT the platform
   * issued: `assertion`), "token-exchange" (an identity provider's ID token exchanged for an ID-JAG, then jwt-bearer).
   */
  grant?: "authorization_code" | "client_credentials" | "jwt-bearer" | "token-exchange";
  /** jwt-bearer: the JWT, or "@FILE" (read again at every token request: a rotated file is picked up). */
  assertion?: string;
  /** token-exchange: the ID token, or "@FILE"; the identity provider's token endpoint and client. */
  idToken?: string;
  idpTokenEndpoint?: string;
  idpClientId?: string;
  idpClientSecret?: string;
  /** DPoP (RFC 9449): "auto" (the default: when the authorization server offers ES256), "required", or "off". */
  dpop?: "auto" | "required" | "off";
  /** Whether a browser flow may run now (login, --login, a terminal); asked only when one is needed. */
  interactive?: () => boolean | Promise<boolean>;
  /** Open the authorization URL (default: $BROWSER or the platform's opener); false only prints it. */
  openBrowser?: boolean;
  /** Ignore a stored token and authorize afresh (`login`). */
  fresh?: boolean;
  /** The token store (default $MCP_TS_CREDENTIALS, else ~/.config/mcp.ts/credentials.json). */
  credentials?: string;
  /** How the user named the server, for "run: mcp.ts login …". */
  serverName?: string;
  /** A line for the user (the authorization URL). */
  onNote?: (line: string) => void;
  /** How long a browser flow waits for its redirect, in ms (default 5 minutes). */
  loginTimeout?: number;
  env?: Record<string, string | undefined>;
}

// --- 13a. The token store ---

/** A token as the store keeps it. */
interface StoredToken {
  access_token: string;
  token_type?: string;
  refresh_token?: string;
  /** Seconds since the epoch. */
  expires_at?: number;
  /** When it was obtained, seconds since the epoch: a short-lived token is refreshed at half its life. */
  obtained_at?: number;
  scope?: string;
  issuer: string;
  /** The canonical URL of the server it was issued for (what finds it). */
  resource: string;
  /** The `resource` parameter it was asked with (the server's PRM may name a broader one). */
  audience: string;
  client_id: string;
  /** A DPoP-bound token's key: the ES256 private JWK its proofs are signed with (RFC 9449). */
  dpop_jwk?: JsonObject;
}

/** A client registration as the store keeps it, per issuer. */
interface StoredClient {
  client_id: string;
  client_secret?: string;
  token_endpoint_auth_method?: string;
  redirect_uri?: string;
}

interface CredentialStore {
  tokens: Record<string, StoredToken>;
  clients: Record<string, StoredClient>;
}

/** Where tokens are kept: $MCP_TS_CREDENTIALS, else $XDG_CONFIG_HOME or ~/.config, mcp.ts/credentials.json. */
function credentialsPath(env: Record<string, string | undefined> = sys.env()): string {
  if (env.MCP_TS_CREDENTIALS) return env.MCP_TS_CREDENTIALS;
  const home = env.HOME ?? env.USERPROFILE ?? ".";
  return `${env.XDG_CONFIG_HOME || `${home}/.config`}/mcp.ts/credentials.json`;
}

async function readStore(file: string, warn: (line: string) => void = noop): Promise<CredentialStore> {
  // layering-ok: node:fs is alike on the three runtimes; the token store is this section's own file
  const { readFile } = await import("node:fs/promises");
  await tightenStore(file, warn);
  try {
    const parsed = JSON.parse(await readFile(file, "utf8"));
    return {
      tokens: isObject(parsed.tokens) ? parsed.tokens as Record<string, StoredToken> : {},
      clients: isObject(parsed.clients) ? parsed.clients as Record<string, StoredClient> : {},
    };
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return { tokens: {}, clients: {} };
    throw new UsageError(`Cannot read the token store ${file}: ${errorMessage(error)}`);
  }
}

// Tokens are secrets: the store's directory is kept 0700 and the file 0600. A looser mode found (a
// copied config, a umask) is tightened, once, with a line saying so.
const tightened = new Set<string>();
async function tightenStore(file: string, warn: (line: string) => void): Promise<void> {
  if (tightened.has(file) || sys.platform() === "win32") return;
  tightened.add(file);
  // layering-ok: node:fs is alike on the three runtimes
  const { stat, chmod } = await import("node:fs/promises");
  for (const [path, mode] of [[dirnameOf(file), 0o700], [file, 0o600]] as const) {
    const found = await stat(path).then((info) => info.mode & 0o777, () => undefined);
    if (found === undefined || (found & 0o077) === 0) continue;
    await chmod(path, mode).then(
      () => warn(`warning: ${path} was readable by others (${found.toString(8)}): made ${mode.toString(8)}`),
      (error) => warn(`warning: ${path} is readable by others and cannot be tightened: ${errorMessage(error)}`),
    );
  }
}

// 0600 in a 0700 directory, written whole (a new file renamed over the old) so a reader never sees half.
async function writeStore(file: string, store: CredentialStore): Promise<void> {
  // layering-ok: node:fs is alike on the three runtimes
  const { mkdir, writeFile, rename, chmod } = await import("node:fs/promises");
  const dir = dirnameOf(file);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // layering-ok: the pid keeps two commands' temporary files apart
  const temporary = `${file}.${proc().pid}.tmp`;
  await writeFile(temporary, JSON.stringify({ version: 1, ...store }, null, 2) + "\n", { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, file);
}

/**
 * Runs `work` holding the store's lock (a file made with O_EXCL), so that two
 * processes never refresh with one refresh token: a rotating one would revoke
 * the whole family. A lock older than 30 s is taken as left by a dead process.
 */
async function withStoreLock<T>(file: string, work: () => Promise<T>): Promise<T> {
  // layering-ok: node:fs is alike on the three runtimes; the store's lock file
  const { open, stat, unlink, mkdir } = await import("node:fs/promises");
  await mkdir(dirnameOf(file), { recursive: true, mode: 0o700 });
  const lock = `${file}.lock`;
  const started = Date.now();
  for (;;) {
    try {
      const handle = await open(lock, "wx", 0o600);
      // layering-ok: the lock names its holder, so a stale one can be told
      await handle.writeFile(String(proc().pid));
      await handle.close();
      break;
    } catch (error) {
      if ((error as { code?: string }).code !== "EEXIST") throw error;
      const age = await stat(lock).then((info) => Date.now() - info.mtimeMs, () => 0);
      if (age > LOCK_STALE_MS) await unlink(lock).catch(noop);
      else if (Date.now() - started > LOCK_WAIT_MS) {
        throw new AuthorizationError(`Cannot lock the token store: ${lock} is held by another mcp.ts`, 0);
      } else await new Promise((resolve) => setTimeout(resolve, 25 + Math.random() * 50));
    }
  }
  try {
    return await work();
  } finally {
    await unlink(lock).catch(noop);
  }
}

// --- 13b. Discovery and signing ---

/**
 * The parameters of a `WWW-Authenticate: Bearer …` challenge (RFC 6750 §3), or of a `DPoP …` one (RFC 9449 §7.1)
 * when there is no Bearer one, names lower-cased.
 */
// A loop over the header, not a pattern per parameter: the header is the server's text (Safety: linear-time parsing).
function parseBearerChallenge(header: string): Record<string, string> {
  const params: Record<string, string> = Object.create(null);
  const scheme = /(?:^|,)\s*Bearer\b/i.exec(header) ?? /(?:^|,)\s*DPoP\b/i.exec(header);
  if (!scheme) return params;
  const space = (c: string | undefined) => c === " " || c === "\t" || c === "\r" || c === "\n";
  const nameChar = (c: string) =>
    (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || (c >= "0" && c <= "9") || c === "_" ||
    c === "-";
  let at = scheme.index + scheme[0].length;
  while (at < header.length) {
    while (space(header[at]) || header[at] === ",") at++;
    const start = at;
    while (at < header.length && nameChar(header[at])) at++;
    const name = header.slice(start, at);
    while (space(header[at])) at++;
    if (name === "" || header[at] !== "=" || /[0-9-]/.test(name[0])) {
      at = Math.max(at, start + 1);
      continue;
    }
    at++;
    while (space(header[at])) at++;
    let value = "";
    if (header[at] === '"') {
      for (at++; at < header.length && header[at] !== '"'; at++) value += header[header[at] === "\\" ? ++at : at] ?? "";
      at++;
    } else {
      const begin = at;
      while (at < header.length && !space(header[at]) && header[at] !== ",") at++;
      value = header.slice(begin, at);
      if (value === "") continue;
    }
    params[name.toLowerCase()] = value;
  }
  return params;
}

/** The canonical URI of an MCP server (RFC 8707, authorization.mdx): no fragment, lower-case scheme and host. */
function canonicalResource(url: string): string {
  const parsed = new URL(url);
  parsed.hash = "";
  const text = parsed.href;
  return parsed.pathname === "/" && !parsed.search ? text.replace(/\/$/, "") : text;
}

function randomToken(bytes = 32): string {
  return base64Url(crypto.getRandomValues(new Uint8Array(bytes)));
}

async function sha256Base64Url(text: string): Promise<string> {
  return base64Url(new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text))));
}

// A PKCS #8 PEM private key, with the JWS algorithm it signs with (ES256, RS256 or EdDSA).
async function importSigningKey(pem: string): Promise<{ key: CryptoKey; alg: string }> {
  const body = pem.replace(/-----(BEGIN|END)[^-]*-----/g, "").replace(/\s+/g, "");
  const der = fromBase64Url(trimEnd(body.replace(/\+/g, "-").replace(/\//g, "_"), "="));
  for (const [alg, algorithm] of JWS_ALGORITHMS) {
    try {
      return { key: await crypto.subtle.importKey("pkcs8", der, algorithm.key, false, ["sign"]), alg };
    } catch {
      // not this kind of key
    }
  }
  throw new UsageError("Cannot use --client-key: not a PKCS #8 PEM private key for ES256, RS256 or EdDSA");
}

async function signJwt(
  key: { key: CryptoKey; alg: string },
  claims: JsonObject,
  header: JsonObject = { typ: "JWT" },
): Promise<string> {
  const head = base64Url(encoder.encode(JSON.stringify({ alg: key.alg, ...header })));
  const body = base64Url(encoder.encode(JSON.stringify(claims)));
  const algorithm = JWS_ALGORITHMS.get(key.alg)!.sign;
  const signature = await crypto.subtle.sign(algorithm, key.key, encoder.encode(`${head}.${body}`));
  return `${head}.${body}.${base64Url(new Uint8Array(signature))}`;
}

// --- DPoP (RFC 9449): a key per token, a proof per request ---

/** A fresh DPoP key: an ES256 (P-256) private key as a JWK, kept with its token in the 0600 store. */
async function newDpopKey(): Promise<JsonObject> {
  const params = JWS_ALGORITHMS.get("ES256")!.key as EcKeyGenParams;
  const pair = await crypto.subtle.generateKey(params, true, ["sign", "verify"]);
  return await crypto.subtle.exportKey("jwk", pair.privateKey) as JsonObject;
}

/** The public members of a JWK (RFC 7638 §3.2's required ones): what a proof may carry and a thumbprint hashes. */
function publicJwk(jwk: JsonObject): JsonObject | undefined {
  if (jwk.kty === "EC") return { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y };
  if (jwk.kty === "RSA") return { e: jwk.e, kty: jwk.kty, n: jwk.n };
  if (jwk.kty === "OKP") return { crv: jwk.crv, kty: jwk.kty, x: jwk.x };
  return undefined;
}

/** A JWK's SHA-256 thumbprint (RFC 7638): what `cnf.jkt` binds a token to. */
async function jwkThumbprint(jwk: JsonObject): Promise<string> {
  const members = publicJwk(jwk);
  if (!members || Object.values(members).some((value) => typeof value !== "string")) {
    throw new Error("not a public key of a kind DPoP signs with");
  }
  return await sha256Base64Url(canonicalJson(members)); // RFC 7638: the required members, sorted
}

const DPOP_KEYS = new WeakMap<JsonObject, Promise<CryptoKey>>(); // imported once per stored key

/**
 * A DPoP proof for one request: `htm`, `htu`, `iat`, a fresh `jti`, and `ath` (the token's hash) on a request that
 * carries the token, `nonce` when the server gave one.
 */
async function dpopProof(
  jwk: JsonObject,
  request: { method: string; url: string | URL; token?: string; nonce?: string },
): Promise<string> {
  let key = DPOP_KEYS.get(jwk);
  if (!key) {
    key = crypto.subtle.importKey("jwk", jwk as JsonWebKey, JWS_ALGORITHMS.get("ES256")!.key, false, ["sign"]);
    DPOP_KEYS.set(jwk, key);
  }
  const claims: JsonObject = {
    jti: randomToken(16),
    htm: request.method,
    htu: safeUrl(String(request.url)), // no query, no fragment (RFC 9449 §4.2)
    iat: Math.floor(Date.now() / 1000),
  };
  if (request.token !== undefined) claims.ath = await sha256Base64Url(request.token);
  if (request.nonce !== undefined) claims.nonce = request.nonce;
  return await signJwt({ key: await key, alg: "ES256" }, claims, { typ: "dpop+jwt", jwk: publicJwk(jwk)! });
}

// A GET for JSON metadata; undefined when it is not there (4xx), an error when it is broken.
async function fetchJson(url: string): Promise<JsonObject | undefined> {
  let response: Response;
  try {
    response = await fetchSameOrigin(url, {
      headers: { accept: "application/json", "mcp-protocol-version": LATEST_PROTOCOL_VERSION },
      signal: AbortSignal.timeout(AUTH_FETCH_TIMEOUT_MS),
    });
  } catch (error) {
    throw fetchFailure(error, new URL(url));
  }
  if (!response.ok) {
    await response.body?.cancel().catch(noop);
    return undefined;
  }
  try {
    const parsed = await response.json();
    return isObject(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** Metadata URLs of an issuer in the order authorization-server-discovery.mdx gives. */
function authServerMetadataUrls(issuer: string): string[] {
  const url = new URL(issuer);
  const path = url.pathname.replace(/\/$/, "");
  if (!path) {
    return [`${url.origin}/.well-known/oauth-authorization-server`, `${url.origin}/.well-known/openid-configuration`];
  }
  return [
    `${url.origin}/.well-known/oauth-authorization-server${path}`,
    `${url.origin}/.well-known/openid-configuration${path}`,
    `${url.origin}${path}/.well-known/openid-configuration`,
  ];
}

/** Finds an authorization server's metadata; refuses one whose `issuer` is not the one asked for. */
async function discoverAuthServer(issuer: string): Promise<JsonObject | undefined> {
  const same = (a: string, b: string) => a.replace(/\/$/, "") === b.replace(/\/$/, "");
  for (const url of authServerMetadataUrls(issuer)) {
    const metadata = await fetchJson(url);
    if (!metadata) continue;
    // authorization-server-discovery.mdx (2026-07-28): an issuer that differs MUST NOT be used.
    if (typeof metadata.issuer !== "string" || !same(metadata.issuer, issuer)) {
      throw new AuthorizationError(
        `Cannot use the authorization server metadata at ${url}: its issuer ${JSON.stringify(metadata.issuer)} ` +
          `is not ${issuer}`,
        0,
      );
    }
    return metadata;
  }
  return undefined;
}

// Whether a PRM `resource` may speak for the server at `server` (RFC 9728 §3.3): the same origin, a path prefix.
function resourceCovers(resource: string, server: string): boolean {
  try {
    const a = new URL(resource);
    const b = new URL(server);
    const path = a.pathname.replace(/\/$/, "");
    return a.origin === b.origin && (b.pathname === path || b.pathname.startsWith(`${path}/`) || path === "");
  } catch {
    return false;
  }
}

// --- 13c. The provider: refresh, registration, the browser flow, client credentials ---

/** Where a flow stands: what discovery found, for the token requests that follow. */
interface AuthServer {
  issuer: string;
  metadata: JsonObject;
  /** The `resource` parameter: the PRM's resource, else the server's canonical URI. */
  resource: string;
  /** PRM scopes_supported, for when the challenge names none. */
  scopes: string[] | undefined;
}

/**
 * What a grant needs and what goes with it, checked once on what a provider is given: a config's oauth keys and the
 * command line's flags together (either may name the grant). A usage error names the flags.
 */
function checkGrant(options: OAuthOptions): void {
  const { grant } = options;
  const flags: [keyof OAuthOptions, string, string][] = [
    ["assertion", "--assertion", "jwt-bearer"],
    ["idToken", "--id-token", "token-exchange"],
    ["idpTokenEndpoint", "--idp-token-endpoint", "token-exchange"],
    ["idpClientId", "--idp-client-id", "token-exchange"],
    ["idpClientSecret", "--idp-client-secret", "token-exchange"],
  ];
  for (const [key, flag, wanted] of flags) {
    if (options[key] !== undefined && grant !== wanted) throw new UsageError(`${flag} goes with --grant ${wanted}`);
  }
  const needs = (wanted: [keyof OAuthOptions, string][]) => {
    const missing = wanted.filter(([key]) => options[key] === undefined).map(([, flag]) => flag);
    if (missing.length) throw new UsageError(`--grant ${grant} needs ${missing.join(", ")}`);
  };
  if (grant === "jwt-bearer") needs([["assertion", "--assertion"]]);
  if (grant === "token-exchange") {
    needs([
      ["idToken", "--id-token"],
      ["idpTokenEndpoint", "--idp-token-endpoint"],
      ["idpClientId", "--idp-client-id"],
      ["clientId", "--client-id"],
    ]);
  }
  if (
    (grant === "client_credentials" || grant === "token-exchange") &&
    (options.clientId === undefined || (!options.clientSecret && !options.clientKey))
  ) {
    throw new UsageError(
      `--grant ${grant} needs --client-id, and --client-secret (or MCP_TS_CLIENT_SECRET)` +
        (grant === "client_credentials" ? " or --client-key" : ""),
    );
  }
}

/**
 * The OAuth client of one HTTP server: a token from the store, refreshed when
 * it is about to expire or refused; a new authorization when that fails.
 */
class OAuthProvider implements AuthProvider {
  #server: string; // canonical URI
  #options: OAuthOptions;
  #file: string;
  #token: StoredToken | undefined;
  #loaded = false;
  #flows = 0;
  #scopes = new Set<string>(); // every scope asked for so far (step-up asks for the union)
  #busy: Promise<boolean> | undefined; // one challenge at a time: parallel requests share it
  /** A browser flow is waiting for its redirect (request timeouts wait for it). */
  waitingForPerson = false;
  #refused = false; // the last token we sent was refused: refresh it once, then authorize
  #asNonce: string | undefined; // DPoP nonces: the authorization server's and the MCP server's latest
  #rsNonce: string | undefined;

  constructor(serverUrl: string, options: OAuthOptions = {}) {
    checkGrant(options);
    this.#server = canonicalResource(serverUrl);
    this.#options = options;
    this.#file = options.credentials ?? credentialsPath(options.env);
  }

  #warn = (line: string): void => (this.#options.onNote ?? noop)(line);

  /** Whether a token was stored by this provider (a flow or a refresh ran). */
  authorized = false;

  async headers(method: string, url: URL): Promise<Record<string, string>> {
    const authorization = await this.#header();
    const token = this.#token;
    if (!authorization || !token) return {};
    if (!token.dpop_jwk) return { authorization };
    const dpop = await dpopProof(token.dpop_jwk, { method, url, token: token.access_token, nonce: this.#rsNonce });
    return { authorization, dpop };
  }

  nonce(value: string): void {
    this.#rsNonce = value;
  }

  // A headless grant gets its tokens again by itself; no person waits on it, no refresh token is needed.
  get #headless(): boolean {
    return this.#options.grant !== undefined && HEADLESS_GRANTS.includes(this.#options.grant);
  }

  async #header(): Promise<string | undefined> {
    if (!this.#loaded) {
      // A bad --assertion is refused before a kept token is used: a token that happens to last must not hide it.
      if (this.#options.grant === "jwt-bearer") await readAssertion(this.#options.assertion);
      this.#loaded = true;
      if (!this.#options.fresh) this.#token = findToken(await readStore(this.#file, this.#warn), this.#server);
    }
    let token = this.#token;
    if (!token) return undefined;
    const now = Date.now() / 1000;
    const margin = token.expires_at !== undefined && token.obtained_at !== undefined
      ? Math.min(REFRESH_MARGIN_S, (token.expires_at - token.obtained_at) / 2)
      : REFRESH_MARGIN_S;
    if (token.expires_at !== undefined && token.expires_at - margin < now) {
      // Once: a server that hands out short-lived tokens would otherwise be asked again and again.
      if (token.refresh_token && (await this.#refresh().catch(() => false))) token = this.#token!;
      else if (this.#headless) {
        // The grant again within the margin, as a refresh would be (a rotated assertion file read anew), under the
        // same one-at-a-time as a challenge; while the token lasts, a failed one leaves it in use.
        this.#busy ??= this.#authorize({}, false).then(() => true).finally(() => this.#busy = undefined);
        await (token.expires_at <= now ? this.#busy : this.#busy.catch(noop));
        token = this.#token!;
      }
      if (token.expires_at !== undefined && token.expires_at <= now) return undefined; // the 401 starts a flow
    }
    return `${
      token.token_type && !/^bearer$/i.test(token.token_type) ? token.token_type : "Bearer"
    } ${token.access_token}`;
  }

  challenge(status: number, wwwAuthenticate: string): Promise<boolean> {
    this.#busy ??= this.#answer(status, wwwAuthenticate).finally(() => this.#busy = undefined);
    return this.#busy;
  }

  async #answer(status: number, wwwAuthenticate: string): Promise<boolean> {
    const challenge = parseBearerChallenge(wwwAuthenticate);
    // RFC 9449 §9: the MCP server wants a nonce in our proofs: the request again with the one it gave (the
    // transport asks again a bounded number of times; what a request sent is its own, not the provider's to keep).
    if (status === 401 && challenge.error === "use_dpop_nonce" && this.#token?.dpop_jwk) {
      return this.#rsNonce !== undefined;
    }
    if (status === 401 && this.#token?.refresh_token && !this.#refused) {
      this.#refused = true;
      if (await this.#refresh().catch(() => false)) return true;
    }
    if (this.#flows >= MAX_AUTH_FLOWS) return false;
    this.#flows++;
    this.#refused = false;
    await this.#authorize(challenge, status === 403);
    return true;
  }

  // Refreshes under the store's lock: another process may have refreshed first, and then its token is ours.
  async #refresh(): Promise<boolean> {
    const before = this.#token;
    if (!before?.refresh_token) return false;
    return await withStoreLock(this.#file, async () => {
      const store = await readStore(this.#file, this.#warn);
      const current = findToken(store, this.#server);
      if (current && current.access_token !== before.access_token) {
        this.#token = current; // refreshed by someone else meanwhile
        return true;
      }
      const metadata = await discoverAuthServer(before.issuer);
      if (!metadata || typeof metadata.token_endpoint !== "string") return false;
      const client = store.clients[before.issuer] ??
        (this.#options.clientId ? { client_id: this.#options.clientId } : { client_id: before.client_id });
      const server: AuthServer = {
        issuer: before.issuer,
        metadata,
        resource: before.audience ?? before.resource,
        scopes: undefined,
      };
      const form: Record<string, string> = { grant_type: "refresh_token", refresh_token: before.refresh_token! };
      if (before.scope) form.scope = before.scope;
      let answer: JsonObject;
      try {
        answer = await this.#tokenRequest(server, client, form, before.dpop_jwk); // a bound refresh: the same key
      } catch {
        delete store.tokens[tokenKey(before.issuer, this.#server)];
        await writeStore(this.#file, store);
        this.#token = undefined;
        return false;
      }
      this.#token = toStoredToken(answer, {
        server,
        resource: this.#server,
        clientId: client.client_id,
        oldRefresh: before.refresh_token,
        asked: before.scope,
        dpopJwk: before.dpop_jwk,
      });
      store.tokens[tokenKey(server.issuer, this.#server)] = this.#token;
      await writeStore(this.#file, store);
      this.authorized = true;
      return true;
    });
  }

  // Discovery, registration and a grant: the whole flow, for a 401 or a 403 insufficient_scope.
  async #authorize(challenge: Record<string, string>, stepUp: boolean): Promise<void> {
    const options = this.#options;
    const clientCredentials = options.grant === "client_credentials";
    if (!this.#headless && !(await options.interactive?.())) {
      const name = options.serverName ?? this.#server;
      if (!this.#token && !(await this.#offersOAuth(challenge))) throw this.#plainTokenWanted();
      throw new AuthorizationError(
        `the server at ${this.#server} needs authorization${this.#token ? " again" : ""}; ` +
          `run: mcp.ts login ${/\s/.test(name) ? `"${name}"` : name}` +
          (stepUp
            ? ` --scope "${[...this.#scopes, ...(challenge.scope ?? "").split(" ")].filter(Boolean).join(" ")}"`
            : ""),
        stepUp ? 403 : 401,
      );
    }
    const server = await this.#discover(challenge);
    // Scopes: --scope, else the challenge's (with what was granted and asked before, on a step-up), else the
    // resource's.
    let scope = options.scope;
    if (scope === undefined) {
      if (stepUp) { for (const item of (this.#token?.scope ?? "").split(" ").filter(Boolean)) this.#scopes.add(item); }
      const challenged = (challenge.scope ?? "").split(" ").filter(Boolean);
      const wanted = challenged.length ? challenged : this.#scopes.size ? [] : server.scopes ?? [];
      for (const item of wanted) this.#scopes.add(item);
      // A refresh token where the server hands them out for it; never asked of one that does not offer it.
      const offered = server.metadata.scopes_supported;
      if (!clientCredentials && Array.isArray(offered) && offered.includes("offline_access")) {
        this.#scopes.add("offline_access");
      }
      if (this.#scopes.size > 0) scope = [...this.#scopes].join(" ");
    }
    const store = await readStore(this.#file, this.#warn);
    const client = await this.#client(server, store, this.#headless);
    const jwk = await this.#dpopKeyFor(server);
    let answer: JsonObject;
    if (this.#headless) {
      const form: Record<string, string> = options.grant === "client_credentials"
        ? { grant_type: "client_credentials" }
        : { grant_type: JWT_BEARER_GRANT, assertion: await this.#assertion(server) };
      if (scope) form.scope = scope;
      answer = await this.#tokenRequest(server, client, form, jwk);
    } else {
      answer = await this.#browserFlow(server, client, scope, jwk);
    }
    // A DPoP-bound token keeps its key; a server that bound none answered a Bearer token (unless DPoP is required).
    const bound = jwk !== undefined && /^dpop$/i.test(String(answer.token_type));
    if (jwk && !bound && options.dpop === "required") {
      throw new AuthorizationError(
        `${server.issuer} answered a ${answer.token_type} token, not a DPoP-bound one (--dpop)`,
        0,
      );
    }
    this.#token = toStoredToken(answer, {
      server,
      resource: this.#server,
      clientId: client.client_id,
      asked: scope,
      dpopJwk: bound ? jwk : undefined,
    });
    await withStoreLock(this.#file, async () => {
      const latest = await readStore(this.#file, this.#warn);
      latest.tokens[tokenKey(server.issuer, this.#server)] = this.#token!;
      if (!options.clientId && !client.client_id.startsWith("https://")) latest.clients[server.issuer] = client;
      await writeStore(this.#file, latest);
    });
    this.authorized = true;
  }

  // DPoP (RFC 9449, SEP-1932): a new ES256 key for a new token, when the authorization server takes ES256 proofs
  // (dpop_signing_alg_values_supported) and DPoP is not off; --dpop requires it.
  async #dpopKeyFor(server: AuthServer): Promise<JsonObject | undefined> {
    const mode = this.#options.dpop ?? "auto";
    if (mode === "off") return undefined;
    const algs = server.metadata.dpop_signing_alg_values_supported;
    if (!Array.isArray(algs) || !algs.includes("ES256")) {
      if (mode !== "required") return undefined;
      throw new AuthorizationError(
        `Cannot authorize with DPoP (--dpop): ${server.issuer} does not list ES256 in dpop_signing_alg_values_supported`,
        0,
      );
    }
    return await newDpopKey();
  }

  // The jwt-bearer grant's assertion: --assertion (a file read now), or (token-exchange) an ID-JAG from the identity
  // provider, for this authorization server and this resource.
  async #assertion(server: AuthServer): Promise<string> {
    const options = this.#options;
    if (options.grant === "jwt-bearer") return await readAssertion(options.assertion);
    const endpoint = options.idpTokenEndpoint!; // checkGrant: token-exchange has it, and the IdP's client id
    // SEP-990 §4, RFC 8693: audience the authorization server's issuer, resource the MCP server; the identity
    // provider's token endpoint asked as any token endpoint is (the ID token goes to its origin only).
    const form: Record<string, string> = {
      grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
      requested_token_type: ID_JAG_TOKEN_TYPE,
      audience: server.issuer,
      subject_token: await readSecretValue(options.idToken, "--id-token"),
      subject_token_type: "urn:ietf:params:oauth:token-type:id_token",
    };
    if (options.scope) form.scope = options.scope;
    const idp = { issuer: endpoint, metadata: { token_endpoint: endpoint }, resource: server.resource, scopes: [] };
    const client = {
      client_id: options.idpClientId!,
      client_secret: options.idpClientSecret,
      token_endpoint_auth_method: options.idpClientSecret === undefined ? "none" : "client_secret_post",
    };
    const answer = await this.#tokenRequest(
      idp,
      client,
      form,
      undefined,
      "the identity provider refused the token exchange",
    );
    if (answer.issued_token_type !== undefined && answer.issued_token_type !== ID_JAG_TOKEN_TYPE) {
      throw new AuthorizationError(
        `the identity provider answered a ${JSON.stringify(answer.issued_token_type)}, not an ID-JAG`,
        0,
      );
    }
    return String(answer.access_token); // a string: #tokenRequest checked it
  }

  // Protected Resource Metadata (RFC 9728), then its authorization server's metadata.
  // Whether the server says how to get a token: a resource_metadata in its challenge, protected resource metadata,
  // or authorization server metadata at its origin. A server of one static --token offers none of them.
  async #offersOAuth(challenge: Record<string, string>): Promise<boolean> {
    if (challenge.resource_metadata) return true;
    const url = new URL(this.#server);
    const path = url.pathname === "/" ? "" : url.pathname;
    for (
      const candidate of [
        `${url.origin}/.well-known/oauth-protected-resource${path}`,
        `${url.origin}/.well-known/oauth-protected-resource`,
        `${url.origin}/.well-known/oauth-authorization-server`,
      ]
    ) {
      if (await fetchJson(candidate).catch(() => undefined)) return true;
    }
    return false;
  }

  #plainTokenWanted(): AuthorizationError {
    return new AuthorizationError(
      `the server at ${this.#server} wants a token and offers no OAuth metadata to log in with: give its token as ` +
        `-H 'Authorization: Bearer TOKEN' (or in the headers of its config entry)`,
      401,
    );
  }

  async #discover(challenge: Record<string, string>): Promise<AuthServer> {
    const url = new URL(this.#server);
    const path = url.pathname === "/" ? "" : url.pathname;
    const candidates = challenge.resource_metadata ? [challenge.resource_metadata] : [
      `${url.origin}/.well-known/oauth-protected-resource${path}`,
      `${url.origin}/.well-known/oauth-protected-resource`,
    ];
    let prm: JsonObject | undefined;
    for (const candidate of candidates) {
      prm = await fetchJson(new URL(candidate, url).href);
      if (prm) break;
    }
    if (prm) {
      const resource = typeof prm.resource === "string" ? prm.resource : undefined;
      if (resource === undefined || !resourceCovers(resource, this.#server)) {
        throw new AuthorizationError(
          `Cannot authorize: the server's protected resource metadata names ${JSON.stringify(resource)}, ` +
            `not ${this.#server}`,
          0,
        );
      }
      const servers = Array.isArray(prm.authorization_servers) ? prm.authorization_servers : [];
      const issuer = servers.find((item) => typeof item === "string") as string | undefined;
      if (!issuer) throw new AuthorizationError("Cannot authorize: the server names no authorization server", 0);
      const metadata = await discoverAuthServer(issuer);
      if (!metadata) {
        throw new AuthorizationError(`Cannot authorize: no metadata found for the authorization server ${issuer}`, 0);
      }
      const scopes = Array.isArray(prm.scopes_supported) ? prm.scopes_supported.map(String) : undefined;
      return { issuer, metadata, resource: canonicalResource(resource), scopes };
    }
    // 2025-03-26: no PRM; the authorization server is the server's origin, with default endpoints (unless the server
    // says nothing of OAuth at all: a server of one static token).
    const found = await fetchJson(`${url.origin}/.well-known/oauth-authorization-server`);
    if (!found && !challenge.resource_metadata && !(await this.#offersOAuth(challenge))) {
      throw this.#plainTokenWanted();
    }
    const metadata = found ?? {
      issuer: url.origin,
      authorization_endpoint: `${url.origin}/authorize`,
      token_endpoint: `${url.origin}/token`,
      registration_endpoint: `${url.origin}/register`,
      code_challenge_methods_supported: ["S256"],
    };
    return { issuer: String(metadata.issuer ?? url.origin), metadata, resource: this.#server, scopes: undefined };
  }

  // client-registration.mdx, in its order: pre-registered, CIMD, a registration kept for this issuer, DCR.
  async #client(server: AuthServer, store: CredentialStore, headless: boolean): Promise<StoredClient> {
    const options = this.#options;
    const methods = Array.isArray(server.metadata.token_endpoint_auth_methods_supported)
      ? server.metadata.token_endpoint_auth_methods_supported.map(String)
      : undefined;
    if (options.clientId) {
      return {
        client_id: options.clientId,
        client_secret: options.clientSecret,
        // SEP-990 §5: the ID-JAG goes with the client's secret in the Authorization header.
        token_endpoint_auth_method: options.clientKey
          ? "private_key_jwt"
          : options.grant === "token-exchange"
          ? "client_secret_basic"
          : pickAuthMethod(methods, options.clientSecret !== undefined),
      };
    }
    // SEP-1933: a workload may have no client registration at all; the assertion is its credential.
    if (options.grant === "jwt-bearer") return { client_id: "", token_endpoint_auth_method: "none" };
    if (headless) {
      throw new UsageError(`--grant ${options.grant} needs --client-id, with --client-secret or --client-key`);
    }
    if (options.clientMetadataUrl && server.metadata.client_id_metadata_document_supported === true) {
      return {
        client_id: options.clientMetadataUrl,
        token_endpoint_auth_method: options.clientKey ? "private_key_jwt" : "none",
      };
    }
    const kept = store.clients[server.issuer];
    if (kept) return kept;
    const endpoint = server.metadata.registration_endpoint;
    if (typeof endpoint !== "string") {
      throw new AuthorizationError(
        `Cannot authorize: ${server.issuer} offers no client registration; give a registered client with ` +
          `--client-id (and --client-secret)${
            options.clientMetadataUrl ? "" : ", or a Client ID Metadata Document with --client-metadata-url"
          }`,
        0,
      );
    }
    const port = await this.#callbackPortFor(undefined);
    const grantTypes = ["authorization_code"];
    const offered = server.metadata.grant_types_supported;
    if (!Array.isArray(offered) || offered.includes("refresh_token")) grantTypes.push("refresh_token");
    const method = pickAuthMethod(methods, false, true);
    const body: JsonObject = {
      client_name: "mcp.ts",
      redirect_uris: [`http://127.0.0.1:${port}/callback`],
      grant_types: grantTypes,
      response_types: ["code"],
      token_endpoint_auth_method: method,
      // client-registration.mdx (2026-07-28): a CLI on this machine is a native application.
      application_type: "native",
    };
    let response: Response;
    try {
      response = await fetchSameOrigin(endpoint, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(AUTH_FETCH_TIMEOUT_MS),
      });
    } catch (error) {
      throw fetchFailure(error, new URL(endpoint));
    }
    const answer = await response.json().catch(() => undefined);
    if (!response.ok || !isObject(answer) || typeof answer.client_id !== "string") {
      throw new AuthorizationError(
        `Cannot register with ${server.issuer}: ${describeOAuthError(answer, response.status)}`,
        0,
      );
    }
    return {
      client_id: answer.client_id,
      client_secret: typeof answer.client_secret === "string" ? answer.client_secret : undefined,
      token_endpoint_auth_method: typeof answer.token_endpoint_auth_method === "string"
        ? answer.token_endpoint_auth_method
        : method,
      redirect_uri: `http://127.0.0.1:${port}/callback`,
    };
  }

  // The port of the redirect URI: a registration's own, else --callback-port or the default (another
  // free one only while no registration names a port yet).
  async #callbackPortFor(client: StoredClient | undefined): Promise<number> {
    const registered = client?.redirect_uri ? Number(new URL(client.redirect_uri).port) : undefined;
    const wanted = registered ?? this.#options.callbackPort ?? DEFAULT_CALLBACK_PORT;
    if (registered !== undefined || this.#options.callbackPort !== undefined) return wanted;
    // layering-ok: node:net is alike on the three runtimes; the login's loopback callback
    const { createServer } = await import("node:net");
    return await new Promise<number>((resolve) => {
      const probe = createServer();
      probe.once("error", () => {
        const any = createServer().listen(0, "127.0.0.1", () => {
          const port = (any.address() as { port: number }).port;
          any.close(() => resolve(port));
        });
      });
      probe.listen(wanted, "127.0.0.1", () => probe.close(() => resolve(wanted)));
    });
  }

  // Authorization code with PKCE S256, state and resource; the code comes back to a loopback listener.
  async #browserFlow(
    server: AuthServer,
    client: StoredClient,
    scope: string | undefined,
    jwk: JsonObject | undefined,
  ): Promise<JsonObject> {
    const metadata = server.metadata;
    const methods = metadata.code_challenge_methods_supported;
    // security-considerations.mdx: no advertised PKCE support, no flow.
    if (!Array.isArray(methods) || !methods.includes("S256")) {
      throw new AuthorizationError(
        `Cannot authorize with ${server.issuer}: it does not advertise PKCE S256 (code_challenge_methods_supported)`,
        0,
      );
    }
    if (typeof metadata.authorization_endpoint !== "string" || typeof metadata.token_endpoint !== "string") {
      throw new AuthorizationError(`Cannot authorize with ${server.issuer}: its metadata lacks endpoints`, 0);
    }
    const port = await this.#callbackPortFor(client);
    const redirectUri = client.redirect_uri ?? `http://127.0.0.1:${port}/callback`;
    const verifier = randomToken(48);
    const state = randomToken(24);
    const url = new URL(metadata.authorization_endpoint);
    const query: Record<string, string> = {
      response_type: "code",
      client_id: client.client_id,
      redirect_uri: redirectUri,
      code_challenge: await sha256Base64Url(verifier),
      code_challenge_method: "S256",
      state,
      resource: server.resource,
    };
    if (scope) query.scope = scope;
    for (const [key, value] of Object.entries(query)) url.searchParams.set(key, value);
    const waitMs = this.#options.loginTimeout ?? AUTH_WAIT_MS;

    let settle!: (result: URLSearchParams | Error) => void;
    const arrived = new Promise<URLSearchParams | Error>((resolve) => settle = resolve);
    let listener: HttpListener;
    try {
      listener = await listenHttp((request) => {
        const at = new URL(request.url);
        if (at.pathname !== "/callback") return Promise.resolve(new Response("Not Found\n", { status: 404 }));
        // Anyone on this machine can reach the port: an answer without our state is not the answer (and
        // must not end the wait for the real one).
        if (at.searchParams.get("state") !== state) {
          return Promise.resolve(new Response("Bad Request: not the state of this login\n", { status: 400 }));
        }
        settle(at.searchParams);
        const ok = at.searchParams.has("code");
        return Promise.resolve(
          new Response(callbackPage(ok), { headers: { "content-type": "text/html; charset=utf-8" } }),
        );
      }, { hostname: "127.0.0.1", port: Number(new URL(redirectUri).port) });
    } catch (error) {
      throw new AuthorizationError(
        `Cannot listen for the authorization on ${redirectUri}: ${errorMessage(error)} (another mcp.ts login ` +
          `waiting? finish it, or give --callback-port)`,
        0,
      );
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      this.#options.onNote?.(`to authorize mcp.ts with ${server.issuer}, open: ${url.href}`);
      if (this.#options.openBrowser !== false) openBrowser(url.href, this.#options.env ?? sys.env());
      const within = waitMs % 60_000 === 0
        ? `${waitMs / 60_000} minute${waitMs === 60_000 ? "" : "s"}`
        : `${waitMs} ms`;
      this.#options.onNote?.(
        `waiting for the authorization at ${redirectUri} (up to ${within}; Ctrl-C to stop)`,
      );
      timer = setTimeout(
        () => settle(new AuthorizationError(`no authorization arrived within ${within} (--login-timeout)`, 401)),
        waitMs,
      );
      this.waitingForPerson = true;
      const params = await arrived.finally(() => this.waitingForPerson = false);
      if (params instanceof Error) throw params;
      // RFC 9207, as authorization/index.mdx (2026-07-28) tabulates it: exact string comparison.
      const iss = params.get("iss");
      const expectIss = metadata.authorization_response_iss_parameter_supported === true;
      if ((expectIss && iss === null) || (iss !== null && iss !== metadata.issuer)) {
        throw new AuthorizationError(
          `Cannot authorize: the answer ${iss === null ? "has no iss" : `came from ${JSON.stringify(iss)}`}, ` +
            `not from ${JSON.stringify(metadata.issuer)} (RFC 9207)`,
          0,
        );
      }
      if (params.get("state") !== state) {
        throw new AuthorizationError("Cannot authorize: the answer's state is not ours", 0);
      }
      const code = params.get("code");
      if (code === null) {
        // An error response: its text is the authorization server's, not to act on (authorization/index.mdx).
        throw new AuthorizationError(`the authorization was refused (${params.get("error") ?? "no code"})`, 0);
      }
      return await this.#tokenRequest(server, client, {
        grant_type: "authorization_code",
        code,
        redirect_uri: redirectUri,
        code_verifier: verifier,
      }, jwk);
    } finally {
      clearTimeout(timer);
      await listener.close({ force: true });
    }
  }

  // A token endpoint request with the client authentication the client registered for, and a DPoP proof with `jwk`
  // (again once with the server's nonce when it answers use_dpop_nonce).
  async #tokenRequest(
    server: AuthServer,
    client: StoredClient,
    form: Record<string, string>,
    jwk?: JsonObject,
    refused = "the authorization server refused the token request",
  ): Promise<JsonObject> {
    const endpoint = server.metadata.token_endpoint;
    if (typeof endpoint !== "string") {
      throw new AuthorizationError(`Cannot get a token from ${server.issuer}: its metadata has no token_endpoint`, 0);
    }
    // RFC 8707, authorization/index.mdx: `resource` on every token request.
    const body = new URLSearchParams({ ...form, resource: server.resource });
    const headers: Record<string, string> = {
      "content-type": "application/x-www-form-urlencoded",
      accept: "application/json",
    };
    const method = client.token_endpoint_auth_method ?? (client.client_secret ? "client_secret_basic" : "none");
    if (method === "client_secret_basic" && client.client_secret !== undefined) {
      const pair = `${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret)}`;
      headers.authorization = `Basic ${bytesToBase64(encoder.encode(pair))}`;
    } else if (method !== "private_key_jwt" || !this.#options.clientKey) {
      if (client.client_id !== "") body.set("client_id", client.client_id);
      if (method === "client_secret_post" && client.client_secret !== undefined) {
        body.set("client_secret", client.client_secret);
      }
    }
    // A client assertion for each request sent (RFC 7523 §3: its jti is used once; a nonce retry is a new request).
    const clientKey = method === "private_key_jwt" ? this.#options.clientKey : undefined;
    const key = clientKey === undefined ? undefined : await importSigningKey(clientKey);
    let response: Response | undefined;
    let answer: unknown;
    for (let attempt = 0; attempt < 2; attempt++) {
      if (key) {
        const now = Math.floor(Date.now() / 1000);
        body.set("client_id", client.client_id);
        body.set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
        body.set(
          "client_assertion",
          await signJwt(key, {
            iss: client.client_id,
            sub: client.client_id,
            aud: server.issuer,
            jti: randomToken(16),
            iat: now,
            exp: now + 300,
          }),
        );
      }
      if (jwk) headers.dpop = await dpopProof(jwk, { method: "POST", url: endpoint, nonce: this.#asNonce });
      try {
        // The body carries a code, a refresh token or a secret: it goes to the token endpoint's origin only.
        response = await fetchSameOrigin(endpoint, {
          method: "POST",
          headers,
          body,
          signal: AbortSignal.timeout(AUTH_FETCH_TIMEOUT_MS),
        });
      } catch (error) {
        throw fetchFailure(error, new URL(endpoint));
      }
      answer = await response.json().catch(() => undefined);
      const nonce = response.headers.get("dpop-nonce");
      const sent = this.#asNonce;
      if (nonce !== null) this.#asNonce = nonce;
      // RFC 9449 §8: the authorization server wants a nonce: the request again with it, once.
      const wantsNonce = jwk && response.status === 400 && isObject(answer) && answer.error === "use_dpop_nonce";
      if (!wantsNonce || nonce === null || nonce === sent) break;
    }
    if (!response!.ok || !isObject(answer) || typeof answer.access_token !== "string") {
      throw new AuthorizationError(`${refused}: ${describeOAuthError(answer, response!.status)}`, 0);
    }
    return answer;
  }
}

function tokenKey(issuer: string, resource: string): string {
  return `${issuer} ${resource}`;
}

function findToken(store: CredentialStore, server: string): StoredToken | undefined {
  return Object.values(store.tokens).find((token) => isObject(token) && token.resource === server);
}

function toStoredToken(
  answer: JsonObject,
  from: {
    server: AuthServer;
    resource: string;
    clientId: string;
    oldRefresh?: string;
    asked?: string;
    dpopJwk?: JsonObject;
  },
): StoredToken {
  const { server, resource, clientId, oldRefresh, asked, dpopJwk } = from;
  const token: StoredToken = {
    access_token: String(answer.access_token),
    token_type: typeof answer.token_type === "string" ? answer.token_type : "Bearer",
    issuer: server.issuer,
    resource,
    audience: server.resource,
    client_id: clientId,
  };
  const refresh = typeof answer.refresh_token === "string" ? answer.refresh_token : oldRefresh;
  if (refresh) token.refresh_token = refresh;
  token.obtained_at = Math.floor(Date.now() / 1000);
  if (typeof answer.expires_in === "number") token.expires_at = token.obtained_at + answer.expires_in;
  // RFC 6749 §5.1: no scope in the answer means the scope asked for. Kept, so that a later step-up asks
  // for the union of what was granted and what is challenged.
  const scope = typeof answer.scope === "string" ? answer.scope : asked;
  if (scope) token.scope = scope;
  if (dpopJwk) token.dpop_jwk = dpopJwk;
  return token;
}

// The token endpoint auth method to use: what the server offers, preferring one that fits what we hold.
function pickAuthMethod(offered: string[] | undefined, hasSecret: boolean, registering = false): string {
  const order = hasSecret
    ? ["client_secret_basic", "client_secret_post", "none"]
    : registering
    ? ["none", "client_secret_basic", "client_secret_post"]
    : ["none"];
  if (!offered) return hasSecret ? "client_secret_basic" : "none";
  return order.find((method) => offered.includes(method)) ?? offered[0] ?? "none";
}

function describeOAuthError(answer: unknown, status: number): string {
  if (isObject(answer) && typeof answer.error === "string") {
    return `${answer.error}${
      typeof answer.error_description === "string" ? ` (${brief(answer.error_description)})` : ""
    }`;
  }
  return `HTTP ${status}`;
}

function callbackPage(ok: boolean): string {
  const text = ok
    ? "mcp.ts is authorized. You can close this tab and go back to the terminal."
    : "The authorization did not succeed: see the terminal for why. You can close this tab.";
  return `<!doctype html><meta charset="utf-8"><title>mcp.ts</title><p style="font:16px system-ui;margin:3em">${text}</p>\n`;
}

// $BROWSER (a command line, the URL appended), else the platform's opener when a desktop is there.
function openBrowser(url: string, env: Record<string, string | undefined>): void {
  const platform = sys.platform();
  let words: string[] | undefined;
  if (env.BROWSER) words = [...splitCommand(env.BROWSER), url];
  else if (platform === "darwin") words = ["open", url];
  else if (platform === "win32") words = ["rundll32", "url.dll,FileProtocolHandler", url];
  else if (env.DISPLAY || env.WAYLAND_DISPLAY) words = ["xdg-open", url];
  if (!words) return;
  void spawnChild(words[0], words.slice(1), { env: env as Record<string, string> }, {
    stdout: noop,
    stderr: noop,
    exit: noop,
  }).then((child) => child.end(), noop);
}

/** Forgets tokens: those of `server` (a canonical URI), or all; `clients`: the registrations too. */
async function forgetCredentials(
  options: { server?: string; clients?: boolean; credentials?: string; env?: Record<string, string | undefined> },
): Promise<{ tokens: number; clients: number }> {
  const file = options.credentials ?? credentialsPath(options.env);
  return await withStoreLock(file, async () => {
    const store = await readStore(file);
    let tokens = 0;
    let clients = 0;
    const issuers = new Set<string>();
    for (const [key, token] of Object.entries(store.tokens)) {
      if (options.server !== undefined && token.resource !== options.server) continue;
      issuers.add(token.issuer);
      delete store.tokens[key];
      tokens++;
    }
    if (options.clients) {
      for (const issuer of Object.keys(store.clients)) {
        if (options.server !== undefined && !issuers.has(issuer)) continue;
        delete store.clients[issuer];
        clients++;
      }
    }
    await writeStore(file, store);
    return { tokens, clients };
  });
}

// === 14. MCP client ==========================================================
// A session with one server over a transport: which era it speaks (probed with
// server/discover, else the initialize handshake), requests with timeouts,
// progress and cancellation, paging, the 2026-07-28 envelope and mirror
// headers, input the server asks for (legacy requests, or input_required
// results), and retries. Prints nothing: it reports through callbacks.

const RETRY_BASE_MS = 200;
const MAX_LIST_PAGES = 10_000;
// basic/versioning.mdx: a dual-era client probes first; a server silent to the probe gets this long.
const PROBE_SILENCE_MS = 1_000;
const MAX_INPUT_ROUNDS = 16;
const LISTEN_WAIT_MS = 2_000;
// basic/patterns/mrtr.mdx: the methods that may answer input_required.
const INPUT_METHODS = new Set(["tools/call", "prompts/get", "resources/read"]);

// --- 14a. Options ---

/** What a request made by a client may take. */
export interface RequestOptions {
  /** Aborts the request (it is cancelled on the server). */
  signal?: AbortSignal;
  /** Called with each notifications/progress params of this request. */
  onProgress?: (progress: JsonObject) => void;
  /** Idle timeout in ms, restarted by each progress notification (default: the client's). */
  timeout?: number;
  /** Hard cap in ms (default: the client's). */
  maxTime?: number;
  /** Whom the request is made for: handed back to onRequest and onLog with what the server sends about it. */
  cause?: unknown;
  /** The caller's W3C trace context, put in the request's `_meta` as it is (an application's own OpenTelemetry). */
  traceparent?: string;
  tracestate?: string;
  baggage?: string;
}

// How the session itself sends: the handshake and the probe are not cancelled, carry no progress token.
interface InternalRequestOptions extends RequestOptions {
  handshake?: boolean;
  /** The probe: the 2026-07-28 envelope before the era is known. */
  probe?: string;
  /** Extensions declared on this request besides the client's capabilities (2026-07-28). */
  extensions?: JsonObject;
  /** Sent after the client's own signal aborted (tasks/cancel on Ctrl-C): that signal does not stop it. */
  afterInterrupt?: boolean;
  /** Already in its CLIENT span (7i). */
  traced?: boolean;
  /** Told each id the request is sent with (its CLIENT span's jsonrpc.request.id). */
  onSent?: (id: RequestId) => void;
}

/** Where and how the server is reached: its process or its URL, credentials, message size. */
export interface ConnectTransportOptions {
  /** Added to a stdio server's environment (which otherwise is ours). */
  env?: Record<string, string>;
  /** A stdio server's working directory. */
  cwd?: string;
  /** An MCP config file to look server names up in. */
  config?: string;
  /** Sent on every request to an HTTP server (over the config entry's headers). */
  headers?: Record<string, string>;
  /**
   * Who gives an HTTP server's requests their token. Default: an {@linkcode OAuthProvider} with `oauth`'s
   * options (stored tokens, refreshed; a new authorization only where `oauth.interactive` allows); false: none.
   */
  auth?: AuthProvider | false;
  /** Options of the default OAuthProvider (over a config entry's `oauth`). */
  oauth?: OAuthOptions;
  /** Longest message accepted from the server (default 64 MiB). */
  maxLineBytes?: number;
  /**
   * Closing a stdio server: how long each step waits for it to exit — its stdin closed, then SIGTERM to its
   * process group, then SIGKILL (default 2000).
   */
  stopStepMs?: number;
  /** Each wait the session makes on purpose: the probe's silence, the stop ladder's steps (tests). @internal */
  wait?: Wait;
}

/** The session: its era, timeouts, retries, cancellation, and what the client declares and answers. */
export interface ConnectSessionOptions {
  /**
   * "auto" (default): probe with server/discover, else the initialize handshake;
   * "legacy": initialize at once; a version pins it ("2026-07-28": modern only).
   */
  protocol?: string;
  /** Idle timeout per request in ms (default 60000), restarted by progress. */
  timeout?: number;
  /** Hard cap per request in ms (default 600000). */
  maxTime?: number;
  /** Start-up failures to retry, with exponential backoff from 200 ms (default 0). */
  retries?: number;
  /** Aborts the start-up and every request. */
  signal?: AbortSignal;
  /** What the client declares it can answer: `roots`, `sampling`, `elicitation` (default none). */
  capabilities?: JsonObject;
  /**
   * Answers what the server asks the client (roots/list, sampling/createMessage,
   * elicitation/create): as a legacy request, or as an input_required result's
   * input request. Throw an RpcError to refuse. Without it: "method not found".
   * `cause` is the `cause` option of the request the question is about, when that
   * is known (it came on that request's HTTP stream, or in its input_required result).
   */
  onRequest?: (method: string, params: JsonObject, cause?: unknown) => unknown;
  /** Ask the server for log messages from this level up (logging/setLevel, or the request envelope). */
  logLevel?: LogLevel;
  /** Keep a legacy HTTP session's GET stream open (for what the server sends unasked). */
  listen?: boolean;
}

/** What the caller sees of the session as it runs: notifications, logs, frames, warnings, the end. */
export interface ConnectObserveOptions {
  /** OpenTelemetry traces (7i): `false` none, options of its own, or omitted: the OTEL_* variables. */
  telemetry?: false | TelemetryOptions;
  /** Where CLIENT spans go (7i), when telemetry is on. @internal */
  tracer?: Telemetry;
  /** The parent of a request's span when its caller gives none (a command's TRACEPARENT). @internal */
  traceRoot?: SpanContext;
  /** A command's spans without a traceRoot: the first one made is the parent of the others (one trace). @internal */
  traceCommand?: { first?: SpanContext };
  /** The tracer is the client's own (connect() made it): its close flushes it. @internal */
  ownTracer?: boolean;
  /** Added to each CLIENT span (a gateway's mcp_ts.upstream). @internal */
  traceAttributes?: Record<string, string>;
  /** Each notification other than progress and log messages (e.g. notifications/tools/list_changed). */
  onNotification?: (method: string, params: JsonObject) => void;
  /** The server's stderr, as it arrives. */
  onStderr?: (text: string) => void;
  /** Each notifications/message params; `cause` as for onRequest. */
  onLog?: (params: JsonObject, cause?: unknown) => void;
  /** Each line of the server's stdout that is not JSON-RPC. */
  onInvalidLine?: (text: string) => void;
  /** Each frame: "> " + sent, "< " + received; over HTTP also "> POST /mcp", "< 200 application/json". */
  onTrace?: (line: string) => void;
  /** Each message as it is sent or received, for recordings. */
  onMessage?: (direction: "send" | "recv", text: string) => void;
  /** Something the user should know that does not stop the command (a tool dropped from a list). */
  onWarning?: (message: string) => void;
  /** The connection was lost after start-up (the server exited, its stream closed); not called for close(). */
  onClose?: (error: ServerError) => void;
}

/** Options of {@linkcode connect}: the transport's, the session's and the observers', given side by side. */
export interface ConnectOptions extends ConnectTransportOptions, ConnectSessionOptions, ConnectObserveOptions {}

// --- 14b. The session (McpClient) ---

// A probe still unanswered when initialize went out (McpClient.start).
type LateProbe = { answer: Promise<boolean>; modern?: { version: string; result: JsonObject } };

/** A connected MCP server, in either era. Made by {@linkcode connect}. */
export class McpClient {
  /** Where the server is. */
  readonly spec: ServerSpec;
  #era: Era = LEGACY_ERA;
  /** "legacy" (the initialize handshake) or "modern" (2026-07-28, stateless). */
  get era(): "legacy" | "modern" {
    return this.#era.name;
  }
  /** What the server said of itself: the initialize result, or its discover result in that shape. */
  initializeResult: JsonObject = {};
  /** The server/discover result, in the modern era. */
  discoverResult: JsonObject | undefined;
  /** Lines on the server's stdout that were not JSON-RPC. */
  invalidLines = 0;
  /** The first of them. */
  firstInvalidLine = "";
  /** 2026-07-28: the shortest `ttlMs` of the lists fetched (how long they stay fresh), if any said one. */
  listTtlMs: number | undefined;
  #options: ConnectOptions;
  #opened = performance.now(); // mcp.client.session.duration
  #transport!: ClientTransport;
  #peer!: JsonRpcPeer;
  #failure: ServerError | undefined;
  #started = false;
  #progress = new Map<RequestId, (params: JsonObject) => void>();
  #nextToken = 0;
  #closing: Promise<void> | undefined;
  #auth: AuthProvider | undefined;
  #tools: Map<string, JsonObject> | undefined; // 2026-07-28 over HTTP: schemas for Mcp-Param-* headers
  #listed: JsonObject[] | undefined; // the last tools/list, for idempotentHint
  #dropped: Map<string, string> | undefined; // tools left out of the list, and why
  /** Tasks (SEP-2663) by id: `get`, `result` (waits for the end, answering what it asks), `cancel`. */
  readonly tasks: ClientTasks = new ClientTasks(
    (method, params, options) => this.request(method, params, options),
    (method, params, cause) => this.#answerServer(method, params, cause),
    () => this.#options,
    () => !this.#era.taskExtension,
  );

  constructor(spec: ServerSpec, options: ConnectOptions = {}) {
    this.spec = spec;
    this.#options = options;
    if (isHttpSpec(spec) && options.auth !== false) {
      this.#auth = options.auth ||
        new OAuthProvider(spec.url, { serverName: spec.name ?? spec.url, ...spec.oauth, ...options.oauth });
    }
    this.#attach();
  }

  /** The provider of an HTTP server's tokens, if any. */
  get auth(): AuthProvider | undefined {
    return this.#auth;
  }

  /** The last 64 KiB of a stdio server's stderr. */
  get stderr(): string {
    return this.#transport.stderr;
  }

  /** The protocol version in use. */
  get protocolVersion(): string {
    return String(this.initializeResult.protocolVersion ?? "");
  }

  /** The transport in use: "stdio", "http" (Streamable HTTP) or "sse" (2024-11-05 HTTP+SSE). */
  get transport(): string {
    return this.#transport.kind;
  }

  // A fresh transport and peer (again when a stdio server died of the probe).
  #attach(): void {
    const spec = this.spec;
    const options = this.#options;
    this.#failure = undefined;
    this.#transport = isHttpSpec(spec)
      ? new HttpTransport(spec, { headers: options.headers, maxBytes: options.maxLineBytes, auth: this.#auth })
      : spec.session !== undefined
      ? new SessionTransport(spec.session, options.maxLineBytes)
      : new StdioTransport(spec, {
        env: options.env,
        cwd: options.cwd,
        maxLineBytes: options.maxLineBytes,
        stopStepMs: options.stopStepMs,
        wait: options.wait,
      });
    const transport = this.#transport;
    const peer = this.#peer = new JsonRpcPeer({
      send: (text, context) => {
        options.onTrace?.(`> ${text}`);
        options.onMessage?.("send", text);
        transport.send(text, context);
      },
      request: (method, params) => this.#answerServer(method, params),
      notification: (method, params) => {
        if (method === "notifications/progress") this.#progress.get(params.progressToken as RequestId)?.(params);
        else if (method === "notifications/message") options.onLog?.(params, this.#causeNow);
        else options.onNotification?.(method, params);
      },
      invalid: (text) => {
        if (this.invalidLines++ === 0) this.firstInvalidLine = text;
        options.onInvalidLine?.(text);
      },
      cancel: (id, reason) => {
        if (!this.#era.cancelsByClosing(transport.kind)) {
          peer.notify("notifications/cancelled", { requestId: id, reason });
        }
        transport.abandon(id);
      },
    });
    this.#receive = (text, parsed, about) => {
      options.onTrace?.(`< ${text}`);
      options.onMessage?.("recv", text);
      // The peer hands a request or notification to us synchronously: what it is about is known for that long.
      this.#causeNow = about === undefined ? undefined : this.#causes.get(about);
      peer.receive(text, parsed);
      this.#causeNow = undefined;
    };
  }

  #receive: (text: string, parsed?: unknown, about?: RequestId) => void = noop;
  #causes = new Map<RequestId, unknown>(); // request id → its `cause` option, while it is out
  #causeNow: unknown; // the cause of the message being received, if known

  async #open(): Promise<void> {
    const peer = this.#peer;
    const options = this.#options;
    await this.#transport.start({
      message: (text, parsed, about) => this.#receive(text, parsed, about),
      failed: (id, error) => id === undefined ? peer.failPending(error) : peer.fail(id, error),
      closed: (error) => {
        if (!this.#started) {
          error.message += ` before answering ${this.#era.opening}`;
          error.retryable = true;
        }
        const lost = this.#started && !this.#failure && !this.#closing;
        this.#fail(error);
        if (lost) options.onClose?.(error);
      },
      invalid: (text) => {
        if (this.invalidLines++ === 0) this.firstInvalidLine = text;
        options.onInvalidLine?.(text);
      },
      stderr: (text) => options.onStderr?.(text),
      trace: (line) => options.onTrace?.(line),
    });
  }

  /** Connects, then finds the era: server/discover first (unless told otherwise), else initialize. */
  async start(): Promise<void> {
    await this.#open();
    // A daemon's session says its server's era: no probe, and the answers in the shape the server gives them.
    const protocol = this.#options.protocol ?? (this.#transport.era === "legacy" ? "legacy" : "auto");
    const modern = (MODERN_PROTOCOL_VERSIONS as readonly string[]).includes(protocol);
    const discovered = this.#transport.discovered;
    const supported = Array.isArray(discovered?.supportedVersions) ? discovered.supportedVersions : [];
    if (protocol === "auto" && discovered && supported.includes(MODERN_PROTOCOL_VERSIONS[0])) {
      this.#becomeModern(MODERN_PROTOCOL_VERSIONS[0], discovered);
      this.#started = true;
      return;
    }
    if ((protocol === "auto" || modern) && await this.#discover(protocol === "auto" ? undefined : protocol)) {
      this.#started = true;
      return;
    }
    const late = this.#lateProbe;
    let refused = false;
    try {
      await this.#initialize(protocol === "auto" || protocol === "legacy" ? LATEST_PROTOCOL_VERSION : protocol);
    } catch (error) {
      // A probe the server was slow to answer wins whenever it comes (a 2026-07-28-only server that starts slowly
      // answers it late, and refuses initialize).
      if (!late || !(await late.answer)) throw error;
      refused = true;
    }
    // On stdio a server answers in order: a modern answer to the probe came before initialize's, and wins too.
    if (late?.modern && (refused || this.#transport.kind === "stdio")) {
      this.#becomeModern(late.modern.version, late.modern.result);
    }
    this.#started = true;
  }

  // The probe, when it was still unanswered after PROBE_SILENCE_MS and initialize went out: its modern answer, if
  // any (`answer` resolves to whether there is one; `modern` is set as soon as it comes).
  #lateProbe: LateProbe | undefined;

  // versioning.mdx: probe with server/discover; any answer that is not a modern one (an error of any
  // code, a 4xx, silence, a stdio server dying of it) means the handshake era. `pinned`: no fallback.
  async #discover(pinned: string | undefined): Promise<boolean> {
    let version = pinned ?? MODERN_PROTOCOL_VERSIONS[0];
    for (let attempt = 0; attempt < 2; attempt++) {
      let result: JsonObject;
      try {
        const probe = this.request("server/discover", {}, { probe: version });
        const silence = pinned ? undefined : Math.min(PROBE_SILENCE_MS, this.#options.timeout ?? PROBE_SILENCE_MS);
        const waited = silence === undefined ? undefined : (this.#options.wait ?? sleepFor)(silence, "probe silence");
        const answered = waited === undefined ? await probe : await Promise.race([probe, waited.then(() => undefined)]);
        if (answered === undefined) {
          // Silent so far: initialize goes out, and the probe stays out beside it.
          const late: LateProbe = { answer: Promise.resolve(false) };
          const asked = version;
          late.answer = probe.then((answer) => {
            const supported = Array.isArray(answer.supportedVersions) ? answer.supportedVersions : [];
            if (supported.includes(asked)) late.modern = { version: asked, result: answer };
            return late.modern !== undefined;
          }, () => false);
          this.#lateProbe = late;
          return false;
        }
        result = answered;
      } catch (error) {
        if (error instanceof AuthorizationError || error instanceof InterruptedError) throw error;
        if (this.#options.signal?.aborted) throw error;
        const mutual = error instanceof ServerError && error.code === ErrorCode.UnsupportedProtocolVersion
          ? mutualVersion(error.data)
          : undefined;
        if (mutual !== undefined && attempt === 0) {
          version = mutual; // -32022 names one we speak: once more with it
          continue;
        }
        if (pinned) throw error;
        if (this.#transport.kind === "stdio" && this.#failure) {
          // It died of the probe. Started again only with --retries (connect counts it): a start may
          // have effects, and a failing one must not be masked by a second.
          throw new ProbeDeathError(
            `${this.#failure.message.replace(/ before answering \S+$/, "")} before answering server/discover, ` +
              `the 2026-07-28 probe (an older server may not know it: try --protocol legacy)`,
          );
        }
        // Refused, DNS, TLS, a 5xx: no era would help. Any other answer, or none, is not a modern one.
        if (error instanceof UnreachableError || (error instanceof HttpStatusError && error.status >= 500)) throw error;
        return false;
      }
      const supported = Array.isArray(result.supportedVersions) ? result.supportedVersions : [];
      if (supported.includes(version)) {
        this.#becomeModern(version, result);
        return true;
      }
      if (pinned) {
        throw new ServerError(
          `the server does not speak ${pinned} (its server/discover offers ${supported.join(", ") || "nothing"})`,
        );
      }
      const offered = mutualVersion({ supported });
      if (offered === undefined || attempt > 0) return false;
      version = offered;
    }
    return false;
  }

  #becomeModern(version: string, result: JsonObject): void {
    this.#era = MODERN_ERA;
    this.discoverResult = result;
    const meta = isObject(result._meta) ? result._meta : {};
    const info: JsonObject = {
      protocolVersion: version,
      capabilities: isObject(result.capabilities) ? result.capabilities : {},
      serverInfo: meta[META.serverInfo] ?? result.serverInfo ?? {},
    };
    if (typeof result.instructions === "string") info.instructions = result.instructions;
    if (Array.isArray(result.supportedVersions)) info.supportedVersions = result.supportedVersions;
    this.initializeResult = info;
  }

  async #initialize(version: string): Promise<void> {
    const options = this.#options;
    let result: JsonObject;
    try {
      result = await this.request("initialize", {
        protocolVersion: version,
        // 2025-11-25: `tasks` says it follows tasks (a server may then honour its `task` parameter); no request of
        // its own can be one.
        capabilities: { ...options.capabilities, tasks: {} },
        clientInfo: { name: "mcp.ts", version: VERSION },
      }, { handshake: true });
    } catch (error) {
      if (error instanceof TimeoutError) error.retryable = true;
      if (error instanceof ServerError && error.code === ErrorCode.UnsupportedProtocolVersion) {
        const supported = isObject(error.data) && Array.isArray(error.data.supported) ? error.data.supported : [];
        error.message = `the server does not speak ${version}: it speaks ${supported.join(", ") || "other versions"}` +
          ((this.#options.protocol ?? "auto") === "auto" ? "" : "; leave out --protocol (auto finds its era)");
      }
      throw error;
    }
    const agreed = result.protocolVersion;
    if (!(SUPPORTED_PROTOCOL_VERSIONS as readonly unknown[]).includes(agreed)) {
      // lifecycle.mdx: a client that does not support the server's version SHOULD disconnect.
      throw new ServerError(
        `the server answered protocol version ${JSON.stringify(agreed)}, which mcp.ts does not speak ` +
          `(it speaks ${[...MODERN_PROTOCOL_VERSIONS, ...SUPPORTED_PROTOCOL_VERSIONS].join(", ")})`,
      );
    }
    this.#era = LEGACY_ERA;
    this.initializeResult = result;
    const transport = this.#transport;
    if (transport instanceof HttpTransport) {
      transport.protocolVersion = String(agreed); // transports.mdx: on every request after initialize
      transport.renewSession ??= () => this.#initialize(version);
    }
    this.#peer.notify("notifications/initialized");
    const capabilities = isObject(result.capabilities) ? result.capabilities : {};
    if (options.logLevel && isObject(capabilities.logging)) {
      await this.request("logging/setLevel", { level: options.logLevel }).catch(noop);
    }
    const declared = Object.keys(options.capabilities ?? {}).length > 0;
    if (transport instanceof HttpTransport && (options.listen ?? declared)) {
      // A server may ask on that stream only: be listening before the first request.
      await within(transport.listen(), LISTEN_WAIT_MS);
    }
  }

  // A server's request of the client: a legacy request, or an input request of an input_required result.
  #answerServer(method: string, params: JsonObject, cause: unknown = this.#causeNow): unknown {
    if (method === "ping") return {};
    if (!this.#options.onRequest) throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${method}`);
    return this.#options.onRequest(method, params, cause);
  }

  // Remembers the first failure; every pending and later request fails with it.
  #fail(error: ServerError): ServerError {
    if (!this.#failure) {
      this.#failure = error;
      this.#peer.close(error);
    }
    return this.#failure;
  }

  /** Sends a request with the client's timeouts and era; server errors become ServerError. */
  async request(method: string, params: JsonObject = {}, options: InternalRequestOptions = {}): Promise<JsonObject> {
    if (this.#options.tracer && !options.traced) {
      const traced = { ...options, traced: true, traceparent: undefined }; // its span's context is in `sent`
      const url = isHttpSpec(this.spec) ? this.spec.url : undefined;
      const send = (sent: JsonObject, onSent: (id: RequestId) => void) =>
        this.request(method, sent, { ...traced, onSent });
      const request = {
        method,
        params,
        caller: options,
        connection: this.#options,
        url,
        version: this.protocolVersion,
      };
      return await traceClientRequest(request, send);
    }
    if (this.#failure) throw this.#failure;
    const timeout = options.timeout ?? this.#options.timeout ?? DEFAULT_REQUEST_TIMEOUT_MS;
    const maxTime = options.maxTime ?? this.#options.maxTime ?? DEFAULT_MAX_TIME_MS;
    const controller = new AbortController();
    const abortWith = (reason: unknown) => controller.abort(reason);
    let idleTimer: (() => void) | undefined; // each cancels its timer
    // A person logging in in a browser is not the server being slow: the clocks wait for them.
    const person = () => this.#auth?.waitingForPerson === true;
    // One idle timer: a sign of life (progress, an answered question) only notes its time, and the timer, when it
    // fires, waits out what is left (a timer per progress notification cost a flood of them; Deno's cannot be freed).
    let heard = Date.now();
    const heardNow = () => void (heard = Date.now());
    const armIdle = (ms: number) => {
      idleTimer = guardTimer(ms, () => {
        const left = heard + timeout - Date.now();
        if (left > 0) return armIdle(left);
        if (!person()) {
          return abortWith(
            new TimeoutError(`${method} timed out: no answer or progress for ${timeout} ms (--timeout)`),
          );
        }
        heardNow();
        armIdle(timeout);
      });
    };
    armIdle(timeout);
    let hardTimer: (() => void) | undefined;
    const armHard = (ms: number) => {
      hardTimer = guardTimer(
        ms,
        () =>
          person()
            ? armHard(timeout)
            : abortWith(new TimeoutError(`${method} timed out after ${maxTime} ms (--max-time)`)),
      );
    };
    armHard(maxTime);
    const outer = [options.signal, options.afterInterrupt ? undefined : this.#options.signal]
      .filter((signal): signal is AbortSignal => !!signal);
    const forward = (event: Event) => abortWith((event.target as AbortSignal).reason);
    for (const signal of outer) {
      if (signal.aborted) abortWith(signal.reason);
      else signal.addEventListener("abort", forward, { once: true });
    }
    if (options.traceparent !== undefined) {
      params = withTraceContext(params, { ...options, traceparent: options.traceparent });
    }
    let token: RequestId | undefined;
    if (!options.handshake && !options.probe && method !== "ping") {
      // A progress token lets a long call keep its idle timeout alive.
      token = `mcp.ts-${++this.#nextToken}`;
      params = { ...params, _meta: { ...(isObject(params._meta) ? params._meta : {}), progressToken: token } };
      this.#progress.set(token, (progress) => {
        heardNow();
        options.onProgress?.(progress);
      });
    }
    const retried = new Set<string>(); // each recovery at most once per request
    try {
      for (let round = 0;; round++) {
        const version = options.probe ?? (this.#era.envelope ? this.protocolVersion : undefined);
        const [sent, context] = this.#envelope(method, params, version, options.extensions);
        let result: unknown;
        let id: RequestId | undefined;
        try {
          // lifecycle.mdx: the client MUST NOT cancel initialize; the probe is not cancelled either.
          const answer = this.#peer.request(method, sent, {
            signal: controller.signal,
            cancelOnAbort: !options.handshake && !options.probe,
            context,
            onSent: options.onSent,
          });
          if (options.cause !== undefined) this.#causes.set(id = this.#peer.lastId, options.cause);
          result = await answer.finally(() => id !== undefined && this.#causes.delete(id));
        } catch (error) {
          const code = error instanceof RpcError ? error.code : undefined;
          if (version !== undefined && !options.probe) {
            if (code === ErrorCode.HeaderMismatch && method === "tools/call" && !retried.has("headers")) {
              // streamable-http.mdx: our idea of the tool's headers may be stale; list again, retry once.
              retried.add("headers");
              this.#tools = undefined;
              await this.listTools({ signal: controller.signal }).catch(noop);
              continue;
            }
            if (error instanceof StreamBrokenError && !retried.has("stream")) {
              retried.add("stream"); // a broken stream loses the request: again, with a new id
              continue;
            }
          }
          throw error;
        }
        if (!isObject(result)) throw new ServerError(`the server sent an invalid ${method} result: not an object`);
        if (version === undefined) return result;
        // basic/index.mdx (2026-07-28): no resultType is "complete"; one we do not know is invalid.
        const type = result.resultType ?? "complete";
        if (type === "complete") return result;
        // SEP-2663: a task, for a tools/call that declared the extension.
        if (type === "task" && method === "tools/call" && isObject(options.extensions?.[EXTENSIONS.tasks])) {
          return result;
        }
        if (type !== "input_required" || !INPUT_METHODS.has(method)) {
          throw new ServerError(`the server sent an invalid ${method} result: resultType ${JSON.stringify(type)}`);
        }
        if (round >= MAX_INPUT_ROUNDS) {
          throw new ServerError(`the server still asked for input after ${MAX_INPUT_ROUNDS} rounds of ${method}`);
        }
        params = await fulfilInputRequests(
          method,
          params,
          result,
          (asked, askedParams) => this.#answerServer(asked, askedParams, options.cause),
        );
        heardNow();
      }
    } catch (error) {
      // It has been asked to stop this request: shutdown need not give it long.
      if (error instanceof TimeoutError || error instanceof InterruptedError) this.#transport.markUnresponsive();
      if (error instanceof RpcError) {
        const message = `the server answered ${method} with error ${error.code}: ${error.message}`;
        throw new ServerError(message, { code: error.code, data: error.data });
      }
      throw error;
    } finally {
      idleTimer?.();
      hardTimer?.();
      for (const signal of outer) signal.removeEventListener("abort", forward);
      if (token !== undefined) this.#progress.delete(token);
    }
  }

  // A request as the era sends it: 2026-07-28 puts the envelope in _meta and, over HTTP, mirrors
  // the method, name and x-mcp-header arguments in headers (basic/index.mdx, streamable-http.mdx).
  #envelope(
    method: string,
    params: JsonObject,
    version: string | undefined,
    extensions: JsonObject | undefined,
  ): [JsonObject, SendContext | undefined] {
    const http = this.#transport.kind === "http";
    const tool = method === "tools/call" ? this.#tools?.get(String(params.name)) : undefined;
    const context = http ? { headers: mirrorHeaders(method, params, version, tool) } : undefined;
    if (version === undefined) return [params, context];
    const options = this.#options;
    let capabilities = options.capabilities ?? {};
    if (extensions) {
      const own = isObject(capabilities.extensions) ? capabilities.extensions : {};
      capabilities = { ...capabilities, extensions: { ...own, ...extensions } };
    }
    const meta: JsonObject = {
      ...(isObject(params._meta) ? params._meta : {}),
      [META.protocolVersion]: version,
      [META.clientCapabilities]: capabilities,
      [META.clientInfo]: { name: "mcp.ts", version: VERSION },
    };
    if (options.logLevel) meta[META.logLevel] = options.logLevel;
    return [{ ...params, _meta: meta }, context];
  }

  /** Every tool of the server, following nextCursor to the end. */
  async listTools(options: RequestOptions = {}): Promise<JsonObject[]> {
    let tools = await this.#listAll("tools/list", "tools", options);
    if (this.#era.envelope && this.#transport.kind === "http") {
      // tools.mdx (2026-07-28): an HTTP client MUST drop a tool whose x-mcp-header annotations are invalid.
      this.#dropped = new Map();
      tools = tools.filter((tool) => {
        const problem = invalidHeaderAnnotation(tool.inputSchema);
        if (problem) {
          this.#dropped!.set(String(tool.name), problem);
          this.#options.onWarning?.(`left out tool "${tool.name}": ${problem}`);
        }
        return !problem;
      });
      this.#tools = new Map(tools.map((tool) => [String(tool.name), tool]));
    }
    this.#listed = tools;
    return tools;
  }

  async #listAll(method: string, key: string, options: RequestOptions): Promise<JsonObject[]> {
    const items: JsonObject[] = [];
    const seen = new Set<unknown>();
    let cursor: unknown;
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const result = await this.request(method, cursor === undefined ? {} : { cursor }, options);
      // caching.mdx (2026-07-28): how long the list stays fresh; the shortest of what was listed counts.
      if (page === 0 && typeof result.ttlMs === "number") {
        this.listTtlMs = Math.min(this.listTtlMs ?? Infinity, Math.max(0, result.ttlMs));
      }
      const pageItems = result[key];
      if (!Array.isArray(pageItems)) {
        throw new ServerError(`the server sent an invalid ${method} result: no ${key} array`);
      }
      items.push(...pageItems);
      cursor = result.nextCursor;
      if (cursor === undefined || cursor === null) return items;
      // pagination.mdx: cursors are opaque, but one that repeats would loop forever.
      if (seen.has(cursor)) {
        throw new ServerError(`the server repeated the ${method} cursor ${brief(cursor)} after ${items.length} ${key}`);
      }
      seen.add(cursor);
    }
    throw new ServerError(`the server sent more than ${MAX_LIST_PAGES} pages of ${key}`);
  }

  /**
   * Calls a tool and returns its CallToolResult (isError included); an unknown
   * tool throws NotFoundError. `retries`: when the server dies under the call,
   * start it again and repeat the call that many times, but only for a tool
   * annotated idempotentHint (a second call does no harm).
   */
  async callTool(
    name: string,
    args: JsonObject = {},
    options: CallToolOptions = {},
  ): Promise<JsonObject> {
    const retries = options.retries ?? 0;
    if (retries > 0 && !this.#listed) await this.listTools(options); // which tools say idempotentHint
    for (let attempt = 0;; attempt++) {
      try {
        return await this.#callOnce(name, args, options);
      } catch (error) {
        // A call already sent is repeated only when the server died under it and
        // the tool says a second call does no harm (annotations.idempotentHint).
        const tool = this.#listed?.find((candidate) => candidate.name === name);
        const idempotent = isObject(tool?.annotations) && tool.annotations.idempotentHint === true;
        const died = error instanceof ServerError && error.code === undefined && !(error instanceof TimeoutError) &&
          !(error instanceof HttpStatusError && error.status < 500);
        if (!died || !idempotent || attempt >= retries) throw error;
        options.onRetry?.(error, attempt + 1);
        await this.#transport.close();
        this.#attach();
        this.#started = false;
        await this.start();
      }
    }
  }

  async #callOnce(name: string, args: JsonObject, options: CallToolOptions): Promise<JsonObject> {
    if (this.#era.envelope && this.#transport.kind === "http" && !this.#tools) {
      await this.listTools(options).catch(noop); // the Mcp-Param-* headers need the tool's schema
    }
    const dropped = this.#dropped?.get(name);
    if (dropped !== undefined) {
      throw new NotFoundError("tool", name, [...this.#tools!.keys()], `mcp.ts leaves it out: ${dropped}`);
    }
    let result: JsonObject;
    try {
      const params: JsonObject = { name, arguments: args };
      if (options.meta) params._meta = options.meta;
      // 2025-11-25: a task only when asked for, as the server and the tool say it may be.
      if (!this.#era.taskExtension && await this.#asTask(name, options)) params.task = {};
      // SEP-2663: the call may become a task; it is followed to its end here (or, detached, handed back).
      const extensions = options.tasks === false ? undefined : TASKS_DECLARED;
      result = await this.request("tools/call", params, { ...options, extensions });
      const task = result.resultType === "task" ? result : params.task ? createdTask(result) : undefined;
      if (task) return options.detach ? result : await this.tasks.follow(task, options);
    } catch (error) {
      if (error instanceof ServerError && error.code === ErrorCode.InvalidParams) {
        await this.#throwIfUnknown(error, { kind: "tool", name, list: () => this.listTools(options), field: "name" });
      }
      throw error;
    }
    if (!Array.isArray(result.content)) {
      throw new ServerError("the server sent an invalid tools/call result: no content array");
    }
    // The SDK's McpServer answers an unknown tool with an isError result ("Tool x not found"), not -32602.
    if (result.isError === true && /\b(not found|unknown tool)\b/i.test(JSON.stringify(result.content))) {
      const tools = await this.listTools(options).catch(() => undefined);
      if (tools && !tools.some((tool) => tool.name === name)) {
        throw new NotFoundError("tool", name, tools.map((tool) => String(tool.name)));
      }
    }
    return result;
  }

  // 2025-11-25 experimental tasks: a server that takes task-augmented tools/call, and a tool whose
  // execution.taskSupport is "required" (or "optional", to detach). The listing is fetched only then.
  async #asTask(name: string, options: CallToolOptions): Promise<boolean> {
    if (!takesLegacyTasks(this.initializeResult)) return false;
    if (!this.#listed) await this.listTools(options).catch(noop);
    return legacyTaskWanted(this.#listed?.find((candidate) => candidate.name === name), options.detach === true);
  }

  // -32602 means an unknown name or bad params; the list tells which, and names
  // the closest. With `certain`, the server already said "not found".
  // Returns the listing of `name` when the server has it.
  async #throwIfUnknown(
    error: ServerError,
    sought: { kind: string; name: string; list: () => Promise<JsonObject[]>; field: "name" | "uri"; certain?: boolean },
  ): Promise<JsonObject | undefined> {
    const { kind, name, list, field, certain = false } = sought;
    const items = await list().catch(() => undefined);
    const found = items?.find((item) => item[field] === name);
    if (certain || (items && !found)) {
      // Our server says why a name whose plugin file failed to load is missing.
      const why = isObject(error.data) && typeof error.data.loadError === "string" ? error.data.loadError : undefined;
      throw new NotFoundError(kind, name, (items ?? []).map((item) => String(item[field])), why);
    }
    return found;
  }

  /** Every resource of the server, following nextCursor to the end. */
  async listResources(options: RequestOptions = {}): Promise<JsonObject[]> {
    return await this.#listAll("resources/list", "resources", options);
  }

  /** Every resource template of the server, following nextCursor to the end. */
  async listResourceTemplates(options: RequestOptions = {}): Promise<JsonObject[]> {
    return await this.#listAll("resources/templates/list", "resourceTemplates", options);
  }

  /** Reads a resource; an unknown URI throws NotFoundError. */
  async readResource(uri: string, options: RequestOptions = {}): Promise<JsonObject> {
    let result: JsonObject;
    try {
      result = await this.request("resources/read", { uri }, options);
    } catch (error) {
      // resources.mdx: -32002 up to 2025-11-25, -32602 from 2026-07-28.
      if (error instanceof ServerError && (error.code === -32002 || error.code === ErrorCode.InvalidParams)) {
        await this.#throwIfUnknown(error, {
          kind: "resource",
          name: uri,
          list: () => this.listResources(options),
          field: "uri",
          certain: true,
        });
      }
      throw error;
    }
    if (!Array.isArray(result.contents)) {
      throw new ServerError("the server sent an invalid resources/read result: no contents array");
    }
    return result;
  }

  /** Every skill entry of the server (SEP-2640 skills/list), following nextCursor to the end. */
  async listSkills(options: RequestOptions = {}): Promise<JsonObject[]> {
    return await this.#listAll("skills/list", "skills", options);
  }

  /** One skill's entry by its SKILL.md URI (skills/get). */
  async getSkill(uri: string, options: RequestOptions = {}): Promise<JsonObject> {
    const result = await this.request("skills/get", { uri }, options);
    if (!isObject(result.skill)) throw new ServerError("the server sent an invalid skills/get result: no skill");
    return result.skill;
  }

  /**
   * A skill file's bytes, read with resources/read and checked against the skill's entry: its size, then its
   * digest, then (SKILL.md) its frontmatter; a mismatch throws SkillVerificationError naming which. A
   * "dynamic" skill has nothing to check against: `verified` is false.
   */
  async readSkillFile(
    entry: JsonObject,
    uri: string,
    options: RequestOptions = {},
  ): Promise<{ bytes: Uint8Array; mimeType: string | undefined; verified: boolean }> {
    return await readCheckedSkillFile(this, entry, uri, options);
  }

  /** Every prompt of the server, following nextCursor to the end. */
  async listPrompts(options: RequestOptions = {}): Promise<JsonObject[]> {
    return await this.#listAll("prompts/list", "prompts", options);
  }

  /** Gets a prompt's messages; an unknown name throws NotFoundError. */
  async getPrompt(name: string, args: Record<string, string> = {}, options: RequestOptions = {}): Promise<JsonObject> {
    let result: JsonObject;
    try {
      result = await this.request("prompts/get", { name, arguments: args }, options);
    } catch (error) {
      if (error instanceof ServerError && error.code === ErrorCode.InvalidParams) {
        const prompt = await this.#throwIfUnknown(error, {
          kind: "prompt",
          name,
          list: () => this.listPrompts(options),
          field: "name",
        });
        if (prompt) throwIfMissingArguments(prompt, args);
      }
      throw error;
    }
    if (!Array.isArray(result.messages)) {
      throw new ServerError("the server sent an invalid prompts/get result: no messages array");
    }
    return result;
  }

  /** Pings the server; resolves with the round-trip time in ms. In 2026-07-28 (no ping) it times server/discover. */
  async ping(options: RequestOptions = {}): Promise<number> {
    const started = performance.now();
    if (this.#era.removed.has("ping")) await this.request("server/discover", {}, options);
    else await this.request("ping", undefined, options);
    return Math.round((performance.now() - started) * 1000) / 1000; // µs: the timer's noise below that
  }

  /**
   * Stops the server (stdio) or ends the session (HTTP); nothing of it is left after. `quick`: a
   * moment for the server to notice its stdin closing, then signals (when we are being stopped ourselves).
   */
  close(options: { quick?: boolean } = {}): Promise<void> {
    if (options.quick) this.#transport.markUnresponsive();
    this.#closing ??= (async () => {
      this.#fail(new ServerError("the connection is closed"));
      // Recorded at once: a command's exit flush, started beside this close, sends it.
      this.#options.tracer?.closed(this.#opened, isHttpSpec(this.spec) ? this.spec.url : undefined);
      await this.#transport.close();
      // Its own telemetry (connect() made it) goes out now; a command's or a gateway's flushes once, at its exit.
      if (this.#options.ownTracer) await this.#options.tracer?.flush();
    })();
    return this.#closing;
  }
}

// --- 14c. connect(): a session started, with retries ---

/** A usage error naming the required arguments of a prompt (its prompts/list entry) that `args` lacks. */
function throwIfMissingArguments(prompt: JsonObject, args: Record<string, unknown>): void {
  const declared = Array.isArray(prompt.arguments) ? prompt.arguments.filter(isObject) : [];
  const missing = declared.filter((arg) => arg.required === true && !(String(arg.name) in args)).map((arg) => arg.name);
  if (missing.length === 0) return;
  const example = missing.map((name) => `${name}=…`).join(" ");
  throw new UsageError(
    `prompt "${prompt.name}" needs ${missing.join(", ")} (required); give ${
      missing.length > 1 ? "them" : "it"
    }: ${example}`,
  );
}

// A stdio server that exited on the server/discover probe: a restart (with --retries) skips the probe.
class ProbeDeathError extends ServerError {
  constructor(message: string) {
    super(message, { retryable: true });
    this.name = "ProbeDeathError";
  }
}

/**
 * Connects to a server (a URL, a command line, a config name, or a spec) and
 * finds its era. Start-up failures are retried `retries` times with backoff.
 */
export async function connect(server: string | ServerSpec, options: ConnectOptions = {}): Promise<McpClient> {
  // Our working directory finds the configs (--cwd is the server's), and our PATH
  // with the -e additions finds a bare command, as spawning will.
  const spec = typeof server === "string"
    ? await resolveServer(server, { config: options.config, env: { ...sys.env(), ...options.env } })
    : server;
  const retries = options.retries ?? 0;
  if (!options.tracer) {
    const tracer = telemetryFor(options.telemetry);
    if (tracer) options = { ...options, tracer, ownTracer: true };
  }
  let legacy = false; // the probe killed it: the next start goes straight to the handshake
  for (let attempt = 0;; attempt++) {
    const client = new McpClient(spec, legacy ? { ...options, protocol: "legacy" } : options);
    try {
      await client.start();
      return client;
    } catch (error) {
      if (error instanceof ProbeDeathError) legacy = true;
      if (error instanceof TimeoutError && client.invalidLines > 0) {
        // A server that logs to stdout: its lines are not answers, and the protocol owns stdout.
        error.message += `; it printed ${client.invalidLines} line(s) on stdout that are not JSON-RPC, the first: ` +
          `${brief(client.firstInvalidLine)} (a server must log to stderr)`;
      }
      await client.close();
      if (error instanceof ServerError) error.stderr = client.stderr;
      if (!(error instanceof ServerError && error.retryable) || attempt >= retries) throw error;
      options.onWarning?.(`${errorMessage(error)}; retrying (${attempt + 1} of ${retries})`);
      await abortableSleep(RETRY_BASE_MS * 2 ** attempt, options.signal);
    }
  }
}

// --- 14d. The 2026-07-28 rules a client keeps ---

// mrtr.mdx: answer every input request, then the same request again with a new id, the answers,
// and the requestState exactly as given (none when none was given).
async function fulfilInputRequests(
  method: string,
  params: JsonObject,
  result: JsonObject,
  answer: (method: string, params: JsonObject) => unknown,
): Promise<JsonObject> {
  const requests = isObject(result.inputRequests) ? result.inputRequests : {};
  const responses: JsonObject = {};
  for (const [key, request] of Object.entries(requests)) {
    if (!isObject(request) || typeof request.method !== "string") {
      throw new ServerError(`the server sent an invalid ${method} result: input request "${key}" has no method`);
    }
    try {
      responses[key] = await answer(request.method, isObject(request.params) ? request.params : {});
    } catch (error) {
      throw new ServerError(
        `the server needs input mcp.ts cannot give: ${describeInputRequest(request)} (${errorMessage(error)})`,
      );
    }
  }
  const next: JsonObject = { ...params };
  delete next.inputResponses;
  delete next.requestState;
  if (Object.keys(responses).length > 0) next.inputResponses = responses;
  if (typeof result.requestState === "string") next.requestState = result.requestState;
  return next;
}

// A version of -32022's `supported` list (or discover's) that we speak: the newest modern one.
function mutualVersion(data: unknown): string | undefined {
  const supported = isObject(data) && Array.isArray(data.supported) ? data.supported : [];
  return MODERN_PROTOCOL_VERSIONS.find((version) => supported.includes(version));
}

// "elicitation/create (form: "Your name?")": what an input request asked, for the error that says we cannot answer.
function describeInputRequest(request: JsonObject): string {
  const params = isObject(request.params) ? request.params : {};
  const message = typeof params.message === "string" ? `: ${JSON.stringify(brief(params.message))}` : "";
  return `${request.method}${message}`;
}

/**
 * A header value as streamable-http.mdx (2026-07-28) sends it: as it is when it
 * is plain visible ASCII (inner spaces allowed), else `=?base64?…?=` of its UTF-8.
 * @internal
 */
export function encodeHeaderValue(value: string): string {
  const plain = value === "" ||
    (/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(value) && !/^=\?base64\?.*\?=$/i.test(value));
  return plain ? value : `=?base64?${bytesToBase64(encoder.encode(value))}?=`;
}

// The x-mcp-header annotated properties of a schema: [header name, path of property keys].
function headerProperties(schema: unknown): [string, string[]][] {
  const found: [string, string[]][] = [];
  const walk = (node: unknown, path: string[]) => {
    if (!isObject(node)) return;
    if (typeof node["x-mcp-header"] === "string") found.push([node["x-mcp-header"], path]);
    if (isObject(node.properties)) {
      for (const [key, child] of Object.entries(node.properties)) walk(child, [...path, key]);
    }
  };
  walk(schema, []);
  return found;
}

/**
 * The headers an HTTP request mirrors from its body (streamable-http.mdx, 2026-07-28): Mcp-Method, Mcp-Name
 * (mcpNameOf: tools/call, prompts/get, resources/read, tasks/*), and with a modern `version` MCP-Protocol-Version and the
 * Mcp-Param-* of `tool`'s x-mcp-header arguments. Sent in both eras: a legacy server ignores them.
 */
function mirrorHeaders(
  method: string,
  params: JsonObject,
  version: string | undefined,
  tool: JsonObject | undefined,
): Record<string, string> {
  const headers: Record<string, string> = { "mcp-method": method };
  const meta = params._meta;
  if (isObject(meta) && typeof meta.traceparent === "string") headers.traceparent = meta.traceparent;
  const name = mcpNameOf(method, params);
  if (typeof name === "string") headers["mcp-name"] = encodeHeaderValue(name);
  if (version !== undefined) {
    headers["mcp-protocol-version"] = version;
    if (method === "tools/call") Object.assign(headers, paramHeaders(tool, params.arguments));
  }
  return headers;
}

// Mcp-Param-* for a tools/call's arguments: null and absent values send no header.
function paramHeaders(tool: JsonObject | undefined, args: unknown): Record<string, string> {
  const headers: Record<string, string> = {};
  if (!tool) return headers;
  for (const [name, path] of headerProperties(tool.inputSchema)) {
    let value: unknown = args;
    for (const key of path) value = isObject(value) ? value[key] : undefined;
    if (value === undefined || value === null) continue;
    const text = typeof value === "string"
      ? value
      : typeof value === "number" || typeof value === "boolean"
      ? String(value)
      : JSON.stringify(value);
    headers[`mcp-param-${name.toLowerCase()}`] = encodeHeaderValue(text);
  }
  return headers;
}

/**
 * Why a tool's x-mcp-header annotations are invalid (tools.mdx, 2026-07-28), or
 * undefined when they are valid or absent: each a non-empty RFC 9110 token,
 * unique case-insensitively, on a string, integer or boolean property reached
 * only through `properties`.
 * @internal
 */
export function invalidHeaderAnnotation(schema: unknown): string | undefined {
  const names = new Set<string>();
  const problems: string[] = [];
  const walk = (node: unknown, path: string, viaProperties: boolean) => {
    if (Array.isArray(node)) {
      node.forEach((item) => walk(item, path, false));
      return;
    }
    if (!isObject(node)) return;
    const header = node["x-mcp-header"];
    if (header !== undefined) {
      const where = path || "the schema";
      const type = node.type;
      if (typeof header !== "string" || !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(header)) {
        problems.push(`x-mcp-header ${JSON.stringify(header)} of ${where} is not a valid header name`);
      } else if (names.has(header.toLowerCase())) {
        problems.push(`x-mcp-header "${header}" is used twice`);
      } else if (!viaProperties) {
        problems.push(`x-mcp-header "${header}" is on ${where}, which is not reached through properties alone`);
      } else if (type !== "string" && type !== "integer" && type !== "boolean") {
        problems.push(`x-mcp-header "${header}" is on ${where} of type ${JSON.stringify(type ?? "any")}`);
      }
      if (typeof header === "string") names.add(header.toLowerCase());
    }
    for (const [key, child] of Object.entries(node)) {
      if (key === "x-mcp-header") continue;
      if (key === "properties" && isObject(child)) {
        for (const [name, property] of Object.entries(child)) {
          walk(property, path ? `${path}.${name}` : name, viaProperties);
        }
      } else if (typeof child === "object" && child !== null) {
        walk(child, path ? `${path}/${key}` : key, false);
      }
    }
  };
  walk(schema, "", true);
  return problems[0];
}

// --- 14e. Arguments as typed, names as meant ---

/** Splits `key=value` at the first "=". */
function splitPair(pair: string): [string, string] {
  const equals = pair.indexOf("=");
  if (equals <= 0) throw new UsageError(`Cannot read argument ${JSON.stringify(pair)}: expected key=value`);
  return [pair.slice(0, equals), pair.slice(equals + 1)];
}

/** Parses `key=value` words into arguments, typed by the tool's inputSchema. @internal */
export function argsFromPairs(pairs: string[], inputSchema?: unknown): JsonObject {
  const properties = isObject(inputSchema) && isObject(inputSchema.properties) ? inputSchema.properties : {};
  const args: JsonObject = {};
  // Each key an own property, whatever its name (Safety: parsed maps have no prototype): `args[key] =` would
  // set the prototype for __proto__ and drop the key.
  const set = (key: string, value: unknown) =>
    Object.defineProperty(args, key, { value, enumerable: true, writable: true, configurable: true });
  const typesOf = (schema: unknown) => {
    const declared = isObject(schema) ? schema.type : undefined;
    const types = Array.isArray(declared) ? declared : declared === undefined ? [] : [declared];
    return types.filter((type) => type !== "null") as string[];
  };
  const split = pairs.map(splitPair);
  const counts = new Map<string, number>();
  for (const [key] of split) counts.set(key, (counts.get(key) ?? 0) + 1);
  for (const [key, text] of split) {
    const property = Object.hasOwn(properties, key) ? properties[key] : undefined;
    const types = typesOf(property);
    if (counts.get(key) === 1) {
      set(key, typedValue(key, text, types));
      continue;
    }
    // A key given more than once makes an array when the schema says so (tags=a tags=b); else it is a mistake.
    const items = isObject(property) ? property.items : undefined;
    if (!types.includes("array")) {
      throw new UsageError(`Cannot read ${key}=${text}: ${key} is given ${counts.get(key)} times but is not an array`);
    }
    set(key, [
      ...(Object.hasOwn(args, key) && Array.isArray(args[key]) ? args[key] : []),
      typedValue(key, text, typesOf(items)),
    ]);
  }
  return args;
}

function typedValue(key: string, text: string, types: string[]): unknown {
  if (types.includes("string")) return text; // zip=007 stays "007"
  const type = types[0];
  // The value as typed, or its start (a value read from a file may be the whole file).
  const shown = text.length <= 60 && !/[\n\r]/.test(text) ? text : brief(text);
  const bad = (what: string) => new UsageError(`Cannot read ${key}=${shown}: ${key} must be ${what}`);
  switch (type) {
    case "number":
    case "integer": {
      const value = Number(text);
      if (text.trim() === "" || !Number.isFinite(value) || (type === "integer" && !Number.isInteger(value))) {
        throw bad(`a${type === "integer" ? "n integer" : " number"}`);
      }
      return value;
    }
    case "boolean":
      if (text === "true" || text === "false") return text === "true";
      throw bad("true or false");
    case "array":
    case "object": {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        throw bad(`${type === "array" ? "a JSON array" : "a JSON object"}`);
      }
      if (!hasType(value, type)) throw bad(`${type === "array" ? "a JSON array" : "a JSON object"}`);
      return value;
    }
    default:
      try {
        return JSON.parse(text);
      } catch {
        return text;
      }
  }
}

// --- 14f. Tasks: following a call that became one (SEP-2663) ---

// What a tools/call declares in the 2026-07-28 era: the tasks extension (a client that follows tasks).
const TASKS_DECLARED: JsonObject = { [EXTENSIONS.tasks]: {} };
// tasks/cancel on Ctrl-C or --max-time waits at most this long (best effort: the command is ending).
const TASK_CANCEL_WAIT_MS = 1_000;
// The poll interval when the task names none, and the bounds of one it names.
const TASK_POLL_DEFAULT_MS = 1_000;
const TASK_POLL_MIN_MS = 100;
const TASK_POLL_MAX_MS = 10_000;

/** Options of {@linkcode McpClient.callTool}. */
export interface CallToolOptions extends RequestOptions {
  /** When the server dies under the call, start it again and repeat the call, for an idempotentHint tool. */
  retries?: number;
  onRetry?: (error: ServerError, attempt: number) => void;
  /** Added to the request's `_meta`. */
  meta?: JsonObject;
  /** A call that becomes a task: hand back its CreateTaskResult at once instead of following it. */
  detach?: boolean;
  /** Declare the tasks extension (2026-07-28; default true): false, and the server answers as a plain call. */
  tasks?: boolean;
  /** Each state of a task the call became, as tasks/get showed it (the first: its CreateTaskResult). */
  onTask?: (task: JsonObject) => void;
}

/** How a task the client follows ended other than with a result: failed, cancelled, or stopped by us. */
export class TaskEndedError extends ServerError {
  /** The task's id. */
  readonly taskId: string;
  constructor(taskId: string, message: string, options: { code?: number; data?: unknown } = {}) {
    super(message, options);
    this.name = "TaskEndedError";
    this.taskId = taskId;
  }
}

// 2025-11-25: the states whose end (and questions, input_required) tasks/result gives.
const LEGACY_TASK_ENDS = new Set(["input_required", "completed", "failed", "cancelled"]);

// A question of a task that this client cannot answer: the task is cancelled, the command ends naming it.
class UnanswerableTaskError extends TaskEndedError {}

/** 2025-11-25: whether the server takes task-augmented tools/call (capabilities.tasks.requests.tools.call). */
function takesLegacyTasks(initialized: JsonObject): boolean {
  const capabilities = isObject(initialized.capabilities) ? initialized.capabilities : {};
  const requests = isObject(capabilities.tasks) ? capabilities.tasks.requests : undefined;
  return isObject(requests) && isObject(requests.tools) && isObject(requests.tools.call);
}

/** 2025-11-25: a tool called as a task: one whose taskSupport is "required", or "optional" when detaching. */
function legacyTaskWanted(tool: JsonObject | undefined, detach: boolean): boolean {
  const support = isObject(tool?.execution) ? tool.execution.taskSupport : undefined;
  return support === "required" || (support === "optional" && detach);
}

/** The task a tools/call result hands back instead of its result: 2026-07-28's CreateTaskResult, or 2025-11-25's `task`. */
function createdTask(result: JsonObject): JsonObject | undefined {
  if (result.resultType === "task") return result;
  return isObject(result.task) && typeof result.task.taskId === "string" ? result.task : undefined;
}

/**
 * A client's tasks (SEP-2663): `follow` polls a task to its end, paced by its pollIntervalMs (clamped to
 * 100 ms…10 s, 1 s when absent), answering its inputRequests through tasks/update (each key once), and returns
 * its result; a failed or cancelled task throws TaskEndedError. Ctrl-C (the client's signal), --max-time, or a
 * question it cannot answer cancel the task first (tasks/cancel, at most 1 s), and the error names it.
 * @internal
 */
export class ClientTasks {
  #request: (method: string, params: JsonObject, options: InternalRequestOptions) => Promise<JsonObject>;
  #answer: (method: string, params: JsonObject, cause: unknown) => unknown;
  #options: () => ConnectOptions;
  #legacy: () => boolean;

  constructor(
    request: (method: string, params: JsonObject, options: InternalRequestOptions) => Promise<JsonObject>,
    answer: (method: string, params: JsonObject, cause: unknown) => unknown,
    options: () => ConnectOptions,
    legacy: () => boolean,
  ) {
    this.#request = request;
    this.#answer = answer;
    this.#options = options;
    this.#legacy = legacy;
  }

  /** tasks/get: the task as the server shows it now. */
  get(taskId: string, options: RequestOptions = {}): Promise<JsonObject> {
    return this.#request("tasks/get", { taskId }, { ...options, extensions: TASKS_DECLARED });
  }

  /** tasks/cancel: the server's acknowledgement (the task may still end otherwise). */
  cancel(taskId: string, options: RequestOptions = {}): Promise<JsonObject> {
    return this.#request("tasks/cancel", { taskId }, { ...options, extensions: TASKS_DECLARED });
  }

  /** Waits for the task's end, answering what it asks, and returns its result (as {@linkcode follow}). */
  async result(taskId: string, options: CallToolOptions = {}): Promise<JsonObject> {
    return await this.follow(await this.get(taskId, options), options);
  }

  /** Follows a task from `task` (a CreateTaskResult or a tasks/get result) to its end. */
  async follow(task: JsonObject, options: CallToolOptions = {}): Promise<JsonObject> {
    const taskId = task.taskId;
    if (typeof taskId !== "string" || taskId === "") {
      throw new ServerError("the server sent an invalid task: no taskId");
    }
    const connection = this.#options();
    const maxTime = options.maxTime ?? connection.maxTime ?? DEFAULT_MAX_TIME_MS;
    const deadline = Date.now() + maxTime;
    const signals = [options.signal, connection.signal].filter((signal): signal is AbortSignal => !!signal);
    const answered = new Set<string>();
    const overdue = () => new TimeoutError(`task ${taskId} timed out after ${maxTime} ms (--max-time)`);
    const legacy = this.#legacy();
    try {
      for (;;) {
        options.onTask?.(task);
        // 2025-11-25: the end (and, input_required, the questions on its way) comes from tasks/result.
        if (legacy && LEGACY_TASK_ENDS.has(String(task.status))) {
          return await this.#legacyResult(taskId, task, deadline, options);
        }
        switch (task.status) {
          case "completed":
            if (!isObject(task.result)) throw new ServerError(`the server sent an invalid task ${taskId}: no result`);
            return task.result;
          case "failed": {
            const error = isObject(task.error) ? task.error : {};
            const code = typeof error.code === "number" ? error.code : undefined;
            const why = typeof error.message === "string" ? error.message : String(task.statusMessage ?? "no reason");
            throw new TaskEndedError(taskId, `task ${taskId} failed: ${why}${code === undefined ? "" : ` (${code})`}`, {
              code,
              data: error.data,
            });
          }
          case "cancelled":
            throw new TaskEndedError(
              taskId,
              `task ${taskId} was cancelled${typeof task.statusMessage === "string" ? `: ${task.statusMessage}` : ""}`,
            );
          case "input_required":
            await this.#answerInputs(taskId, task, answered, options);
            break;
          case "working":
            break;
          default:
            throw new ServerError(`the server sent an invalid task ${taskId}: status ${JSON.stringify(task.status)}`);
        }
        const left = deadline - Date.now();
        if (left <= 0) throw overdue();
        const asked = task.pollIntervalMs ?? task.pollInterval; // 2025-11-25 says pollInterval
        const interval = typeof asked === "number" && asked > 0
          ? Math.min(Math.max(asked, TASK_POLL_MIN_MS), TASK_POLL_MAX_MS)
          : TASK_POLL_DEFAULT_MS;
        await sleepUnlessAborted(Math.min(interval, left), signals);
        if (Date.now() >= deadline) throw overdue();
        task = await this.get(taskId, { signal: options.signal, timeout: options.timeout });
      }
    } catch (error) {
      // Ctrl-C, --max-time and a question we cannot answer end the task too; a poll's own failure does not.
      const stopped = error instanceof InterruptedError || error instanceof UnanswerableTaskError ||
        (error instanceof TimeoutError && error.message === overdue().message);
      if (!stopped) throw error;
      const cancelled = await this.#request("tasks/cancel", { taskId }, {
        extensions: TASKS_DECLARED,
        timeout: TASK_CANCEL_WAIT_MS,
        maxTime: TASK_CANCEL_WAIT_MS,
        afterInterrupt: true,
      }).then(() => true, () => false);
      const note = cancelled ? `task ${taskId} cancelled` : `task ${taskId} may still run (tasks/cancel failed)`;
      if (error instanceof InterruptedError) throw new InterruptedError(`interrupted; ${note}`);
      if (error instanceof TimeoutError) throw new TimeoutError(`${error.message}; ${cancelled ? "cancelled" : note}`);
      throw error;
    }
  }

  // 2025-11-25: tasks/result waits for the end and returns what the call would have (a result, or its
  // error); a task input_required sends its questions on the way (answered as any server request).
  async #legacyResult(taskId: string, task: JsonObject, deadline: number, options: CallToolOptions) {
    if (task.status === "cancelled") {
      const why = typeof task.statusMessage === "string" ? `: ${task.statusMessage}` : "";
      throw new TaskEndedError(taskId, `task ${taskId} was cancelled${why}`);
    }
    const left = Math.max(1, deadline - Date.now());
    try {
      return await this.#request("tasks/result", { taskId }, {
        signal: options.signal,
        cause: options.cause,
        maxTime: left,
        timeout: Math.max(left, options.timeout ?? 0),
      });
    } catch (error) {
      if (error instanceof ServerError && error.code !== undefined && !(error instanceof TaskEndedError)) {
        const why = error.message.replace(/^the server answered tasks\/result with error -?\d+: /, "");
        throw new TaskEndedError(taskId, `task ${taskId} failed: ${why} (${error.code})`, {
          code: error.code,
          data: error.data,
        });
      }
      if (error instanceof TimeoutError && Date.now() >= deadline) {
        throw new TimeoutError(
          `task ${taskId} timed out after ${
            options.maxTime ?? this.#options().maxTime ?? DEFAULT_MAX_TIME_MS
          } ms (--max-time)`,
        );
      }
      throw error;
    }
  }

  // Answers each inputRequest not answered before (SEP-2663: keys are unique over the task's life), then
  // sends them in one tasks/update. One that cannot be answered ends the task (cancelled by follow).
  async #answerInputs(taskId: string, task: JsonObject, answered: Set<string>, options: CallToolOptions) {
    const requests = isObject(task.inputRequests) ? task.inputRequests : {};
    const responses: JsonObject = {};
    for (const [key, request] of Object.entries(requests)) {
      if (answered.has(key)) continue;
      if (!isObject(request) || typeof request.method !== "string") {
        throw new ServerError(`the server sent an invalid task ${taskId}: input request "${key}" has no method`);
      }
      try {
        responses[key] = await this.#answer(
          request.method,
          isObject(request.params) ? request.params : {},
          options.cause,
        );
      } catch (error) {
        throw new UnanswerableTaskError(
          taskId,
          `task ${taskId} needs input mcp.ts cannot give: ${describeInputRequest(request)} (${errorMessage(error)})`,
        );
      }
      answered.add(key);
    }
    if (Object.keys(responses).length === 0) return;
    await this.#request("tasks/update", { taskId, inputResponses: responses }, {
      signal: options.signal,
      extensions: TASKS_DECLARED,
    });
  }
}

/** Waits `ms`, or rejects with the reason of the first of `signals` to abort. */
function sleepUnlessAborted(ms: number, signals: AbortSignal[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const aborted = signals.find((signal) => signal.aborted);
    if (aborted) return reject(aborted.reason);
    const onAbort = (event: Event) => {
      done();
      reject((event.target as AbortSignal).reason);
    };
    const done = () => {
      clearTimeout(timer);
      for (const signal of signals) signal.removeEventListener("abort", onAbort);
    };
    const timer = setTimeout(() => {
      done();
      resolve();
    }, ms);
    for (const signal of signals) signal.addEventListener("abort", onAbort, { once: true });
  });
}

// --- 14g. Skills: what a client checks before it trusts a skill file (SEP-2640) ---

/** A skill file that is not what its skill's entry says: its `check` ("size", "digest" or "frontmatter") failed. */
export class SkillVerificationError extends ServerError {
  readonly check: "size" | "digest" | "frontmatter";
  constructor(check: "size" | "digest" | "frontmatter", message: string) {
    super(message);
    this.name = "SkillVerificationError";
    this.check = check;
  }
}

// McpClient.readSkillFile: the file read, then checked when the skill lists it (not when it is "dynamic").
async function readCheckedSkillFile(
  client: McpClient,
  entry: JsonObject,
  uri: string,
  options: RequestOptions,
): Promise<{ bytes: Uint8Array; mimeType: string | undefined; verified: boolean }> {
  const listed = Array.isArray(entry.resources)
    ? entry.resources.find((item) => isObject(item) && item.uri === uri) as JsonObject | undefined
    : undefined;
  if (Array.isArray(entry.resources) && !listed) throw new UsageError(`${uri} is not a file of ${entry.uri}`);
  const result = await client.readResource(uri, options);
  const content = (result.contents as unknown[]).find((item) => isObject(item) && item.uri === uri) ??
    (result.contents as unknown[])[0];
  if (!isObject(content) || (typeof content.text !== "string" && typeof content.blob !== "string")) {
    throw new ServerError(`the server sent an invalid resources/read result for ${uri}: no text or blob`);
  }
  const bytes = typeof content.text === "string" ? encoder.encode(content.text) : base64ToBytes(String(content.blob));
  const mimeType = typeof content.mimeType === "string" ? content.mimeType : undefined;
  if (!listed) return { bytes, mimeType, verified: false };
  await verifySkillBytes(entry, listed, bytes);
  return { bytes, mimeType, verified: true };
}

/**
 * Checks a skill file's bytes against its manifest item, in order: size, digest (sha256 of the raw bytes), then,
 * for the skill's SKILL.md, its frontmatter against the entry's (deep, key by key; a missing key is null).
 */
async function verifySkillBytes(entry: JsonObject, listed: JsonObject, bytes: Uint8Array): Promise<void> {
  const uri = String(listed.uri);
  if (listed.size !== bytes.length) {
    throw new SkillVerificationError(
      "size",
      `${uri} failed the size check: ${bytes.length} bytes, the skill lists ${listed.size}`,
    );
  }
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array(bytes)));
  const digest = "sha256:" + [...hash].map((byte) => byte.toString(16).padStart(2, "0")).join("");
  if (listed.digest !== digest) {
    throw new SkillVerificationError(
      "digest",
      `${uri} failed the digest check: it is ${digest}, the skill lists ${listed.digest}`,
    );
  }
  if (uri !== entry.uri) return;
  let frontmatter: JsonObject;
  try {
    frontmatter = skillFrontmatter(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (error) {
    throw new SkillVerificationError("frontmatter", `${uri} failed the frontmatter check: ${errorMessage(error)}`);
  }
  const listedFrontmatter = isObject(entry.frontmatter) ? entry.frontmatter : {};
  const own = (object: JsonObject, key: string) => Object.hasOwn(object, key) ? object[key] ?? null : null;
  for (const key of new Set([...Object.keys(frontmatter), ...Object.keys(listedFrontmatter)])) {
    if (canonicalJson(own(frontmatter, key)) !== canonicalJson(own(listedFrontmatter, key))) {
      throw new SkillVerificationError(
        "frontmatter",
        `${uri} failed the frontmatter check: its "${key}" is ${brief(own(frontmatter, key))}, the skill lists ${
          brief(own(listedFrontmatter, key))
        }`,
      );
    }
  }
}

// === 15. Gateway, proxy and replay ===========================================
// Servers made of other servers' messages. `proxy` forwards every message
// between a downstream client (stdio, or HTTP) and an upstream server (any
// transport) unchanged, and can log or record them; `replay` answers from a
// recorded session. Both speak raw messages: no era, no catalog of their own.
//
// A cassette (CONTRACT "Proxy, recording and replay"), one JSON object per line:
//   {"mcpCassette": 1, "server": "<how it was reached>", "recorded": "2026-11-23T14:00:00.000Z"}
//   {"t": 12.5, "dir": "send", "message": {...client to server...}}
//   {"t": 13.1, "dir": "recv", "message": {...server to client...}}

// --- 15a. Gateway: one catalog made of many servers ---
// Each upstream is a client session; its tools, prompts and resources become
// catalog entries whose functions forward to it. The server core serves them
// like any plugin's, so both eras, HTTP and stdio come for free.

const GATEWAY_START_CONCURRENCY = 4;
// Serving waits this long for slow upstreams at most; their tools come later, with a list_changed.
const GATEWAY_START_WAIT_MS = 3_000;
const GATEWAY_BACKOFF_MS = 1_000;
const GATEWAY_BACKOFF_MAX_MS = 60_000;
const MAX_TOOL_NAME = 64;

/** One server behind a gateway. */
export interface GatewayUpstream {
  name: string;
  spec: ServerSpec;
  /** Why it cannot be started at all (not a command, not a configured name): down for good, the others serve. */
  unusable?: string;
}

/** Options of {@linkcode Gateway}. */
export interface GatewayOptions extends ConnectOptions {
  /**
   * "always" (default): every name is `<upstream>__<name>`; "collisions": only names two upstreams share; "none"
   * (one upstream, a daemon's session): names, titles and descriptions as the upstream gives them.
   */
  prefix?: "always" | "collisions" | "none";
  /** Globs over the exposed names (`!` excludes); none: everything. */
  tools?: string[];
  /** resources/read answers kept this long, in ms (default 0: not kept). */
  cacheTtl?: number;
  /** At most this many kept (default 256). */
  cacheSize?: number;
  /** A line for the gateway's stderr. */
  log?: (line: string) => void;
  /** Served to several clients (over HTTP): the upstreams are not offered roots, which are one client's. */
  shared?: boolean;
  /** Roots the gateway answers itself (a daemon's session, from `connect --root`): offered to the upstreams. */
  roots?: { uri: string; name?: string }[];
  /** How many times an upstream is started again after it failed or went (default: each time, backing off). */
  restarts?: number;
  /**
   * "results" (default): a call its upstream could not answer is an isError result naming the upstream; "errors"
   * (a daemon's session, which stands for its one server): a JSON-RPC error, the upstream's own code where it gave
   * one, as the server itself would have answered.
   */
  failures?: "results" | "errors";
}

interface UpstreamState {
  name: string;
  spec: ServerSpec;
  client: McpClient | undefined;
  down: string | undefined; // why it is down, while it is
  retryAt: number;
  attempt: number;
  timer: ReturnType<typeof setTimeout> | undefined;
  refreshTimer: ReturnType<typeof setTimeout> | undefined; // a 2026-07-28 upstream's lists, when their ttlMs ends
  tools: JsonObject[];
  prompts: JsonObject[];
  resources: JsonObject[];
  templates: JsonObject[];
  calls: ToolContext[]; // contexts of calls in flight: where the upstream's questions and logs go
  watchers: Map<string, Set<() => void>>; // resources/updated by URI
  error: unknown; // what its last failure threw (its exit code: an AuthorizationError is 4)
  restarted: number;
  unusable: string | undefined; // why it can never start: said once, never tried
}

/**
 * An upstream's task a gateway's client listens to: its state from the upstream's notifications/tasks (a
 * subscriptions/listen of its own upstream, open while someone listens) and a first tasks/get, its id renamed.
 */
class UpstreamTask implements ListenedTask {
  readonly id: string;
  #upstreamId: string;
  #client: McpClient;
  #registry: Map<string, UpstreamTask>;
  #detail: JsonObject;
  #listeners = new Set<(task: ListenedTask) => void>();
  #stop: AbortController | undefined;

  constructor(id: string, upstreamId: string, client: McpClient, registry: Map<string, UpstreamTask>) {
    this.id = id;
    this.#upstreamId = upstreamId;
    this.#client = client;
    this.#registry = registry;
    this.#detail = { taskId: id, status: "working" };
  }

  get terminal(): boolean {
    return TERMINAL_TASK_STATUSES.has(String(this.#detail.status));
  }

  detail(): JsonObject {
    return this.#detail;
  }

  /** A state the upstream said: told to the listeners when its status or statusMessage changed. */
  update(upstream: JsonObject): void {
    const next: JsonObject = { ...upstream, taskId: this.id };
    delete next._meta;
    delete next.resultType;
    const same = next.status === this.#detail.status && next.statusMessage === this.#detail.statusMessage;
    this.#detail = next;
    if (!same) { for (const listener of [...this.#listeners]) listener(this); }
    if (this.terminal) this.#stop?.abort();
  }

  listen(listener: (task: ListenedTask) => void): () => void {
    this.#listeners.add(listener);
    if (!this.#stop) {
      const stop = this.#stop = new AbortController();
      this.#registry.set(this.id, this);
      const forever = 2 ** 31 - 1; // a listen is answered when it ends, not before
      const notifications = { taskIds: [this.#upstreamId] };
      this.#client.request("subscriptions/listen", { notifications }, {
        signal: stop.signal,
        extensions: TASKS_DECLARED,
        timeout: forever,
        maxTime: forever,
      }).catch(noop).finally(() => this.#registry.get(this.id) === this && this.#registry.delete(this.id));
      this.#client.tasks.get(this.#upstreamId).then((task) => this.update(task), noop);
    }
    return () => {
      this.#listeners.delete(listener);
      if (this.#listeners.size === 0) this.#stop?.abort();
    };
  }
}

// A forwarded request's trace context: the caller's, unchanged (an uninstrumented hop keeps a trace whole).
function traceOf(ctx: ToolContext | undefined): RequestOptions {
  return ctx ? { traceparent: ctx.traceparent, tracestate: ctx.tracestate, baggage: ctx.baggage } : {};
}

// Whom a call is served for: one object per legacy connection or 2026-07-28 request.
function clientOf(ctx: ToolContext): unknown {
  return ctx instanceof RequestContext ? ctx.client : ctx;
}

/** A short, stable hash of a text (FNV-1a, 32 bits), as 8 hex digits. */
function shortHash(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return hash.toString(16).padStart(8, "0");
}

/**
 * A name hosts accept: only [A-Za-z0-9_-], at most 64 characters; a longer one
 * is cut and ends in a hash of the whole, stable across runs.
 * @internal
 */
export function gatewayName(upstream: string, name: string, prefixed: boolean): string {
  const full = prefixed ? `${upstream}__${name}` : name;
  const clean = full.replace(/[^A-Za-z0-9_-]/g, "_");
  if (clean.length <= MAX_TOOL_NAME && clean === full) return clean;
  if (clean.length <= MAX_TOOL_NAME) return clean;
  return `${clean.slice(0, MAX_TOOL_NAME - 9)}_${shortHash(full)}`;
}

// `*` and `?` globs over a name; `!` in front excludes.
function globMatches(pattern: string, name: string): boolean {
  const source = pattern.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
  return new RegExp(`^${source}$`).test(name);
}

function exposed(patterns: string[] | undefined, name: string): boolean {
  if (!patterns?.length) return true;
  const include = patterns.filter((pattern) => !pattern.startsWith("!"));
  const exclude = patterns.filter((pattern) => pattern.startsWith("!")).map((pattern) => pattern.slice(1));
  return (include.length === 0 || include.some((pattern) => globMatches(pattern, name))) &&
    !exclude.some((pattern) => globMatches(pattern, name));
}

/**
 * One MCP server in front of many: starts every upstream (four at a time),
 * restarts one that fails or dies with backoff while the others serve, and
 * builds the catalog of what they offer. `onCatalog` hears every change.
 * @internal
 */
export class Gateway {
  #options: GatewayOptions;
  #upstreams: UpstreamState[];
  #cache = new Map<string, { until: number; value: JsonObject }>();
  #warned = new Set<string>(); // URIs two upstreams serve, said once
  #listened = new Map<string, UpstreamTask>(); // upstream tasks a client listens to, by <upstream>__<id>
  #issued = new IssuedIds(DEFAULT_MAX_TASKS); // the <upstream>__<id> given out, each bound to its caller's principal
  #store: ReplicaStore | undefined; // replicas: where those ids are recorded (share)
  #closed = false;
  #stop = new AbortController(); // ends connections still being made when we close
  #connecting = new Set<Promise<unknown>>();
  /** Called with the new catalog whenever an upstream comes, goes or changes its lists. */
  onCatalog: (catalog: Catalog) => void = noop;

  constructor(upstreams: GatewayUpstream[], options: GatewayOptions = {}) {
    this.#options = options;
    this.#upstreams = upstreams.map(({ name, spec, unusable }) => ({
      name,
      spec,
      unusable,
      client: undefined,
      down: "starting",
      retryAt: 0,
      attempt: 0,
      timer: undefined,
      refreshTimer: undefined,
      tools: [],
      prompts: [],
      resources: [],
      templates: [],
      calls: [],
      watchers: new Map(),
      error: undefined,
      restarted: 0,
    }));
  }

  /** Each upstream: its client while it is up, else why it is down and what its failure threw. */
  upstreams(): { name: string; client: McpClient | undefined; down: string | undefined; error: unknown }[] {
    return this.#upstreams.map(({ name, client, down, error }) => ({ name, client, down, error }));
  }

  /** Starts every upstream; resolves when each is up or has failed once, or after `waitMs`. */
  async start(waitMs = GATEWAY_START_WAIT_MS): Promise<void> {
    const queue = [...this.#upstreams];
    const worker = async () => {
      for (let upstream = queue.shift(); upstream; upstream = queue.shift()) await this.#connect(upstream);
    };
    const all = Promise.all(Array.from({ length: GATEWAY_START_CONCURRENCY }, worker));
    await within(all, waitMs);
  }

  /** Stops every upstream (no process is left). */
  async close(): Promise<void> {
    this.#closed = true;
    this.#stop.abort(new InterruptedError());
    await Promise.allSettled(this.#connecting); // a server being started is stopped by its connect()
    await Promise.all(this.#upstreams.map(async (upstream) => {
      clearTimeout(upstream.timer);
      clearTimeout(upstream.refreshTimer);
      // We are being stopped, perhaps with a SIGKILL to follow: the upstreams get the short ladder.
      await upstream.client?.close({ quick: true });
    }));
  }

  async #connect(upstream: UpstreamState): Promise<void> {
    if (this.#closed) return;
    const log = this.#options.log ?? noop;
    if (upstream.unusable !== undefined) {
      upstream.down = upstream.unusable;
      upstream.error = new UsageError(upstream.unusable);
      upstream.retryAt = Infinity;
      log(`upstream "${upstream.name}" cannot start: ${upstream.unusable}; the others serve without it`);
      return;
    }
    let client: McpClient;
    // The handshake era where the upstream has it: its list changes then come as notifications (a
    // 2026-07-28 session hears them only on subscriptions/listen, which this client does not keep open).
    let protocol = this.#options.protocol ?? "legacy";
    const options = (): ConnectOptions => ({
      ...this.#options,
      protocol,
      retries: 0,
      signal: this.#stop.signal,
      // The questions pass on to the client whose call caused them, never to another.
      capabilities: this.#options.shared && !this.#options.roots
        ? { sampling: {}, elicitation: {} }
        : { roots: {}, sampling: {}, elicitation: {} },
      logLevel: "debug", // every log message comes; each call's client gets those at its own level
      onRequest: (method, params, cause) => this.#ask(upstream, method, params, cause),
      onNotification: (method, params) => this.#notified(upstream, method, params),
      onLog: (params, cause) => this.#callerOf(upstream, cause)?.log(params.level as LogLevel, params.data),
      onStderr: undefined,
      onClose: (error) => this.#lost(upstream, errorMessage(error)),
      traceAttributes: { "mcp_ts.upstream": upstream.name },
    });
    try {
      const connecting = connect(upstream.spec, options()).catch((error) => {
        if (!(error instanceof ServerError && error.code === ErrorCode.UnsupportedProtocolVersion)) throw error;
        protocol = "auto"; // a 2026-07-28-only server
        return connect(upstream.spec, options());
      });
      this.#connecting.add(connecting);
      client = await connecting.finally(() => this.#connecting.delete(connecting));
    } catch (error) {
      if (this.#closed) return;
      upstream.error = error;
      this.#lost(upstream, errorMessage(error));
      return;
    }
    if (this.#closed) {
      await client.close();
      return;
    }
    upstream.client = client;
    upstream.down = undefined;
    upstream.attempt = 0;
    await this.#refresh(upstream);
    log(`upstream "${upstream.name}" is up: ${upstream.tools.length} tools, ${upstream.prompts.length} prompts`);
  }

  // Down: say so, and try again later, each time waiting twice as long (at most a minute).
  #lost(upstream: UpstreamState, why: string): void {
    if (this.#closed || upstream.timer) return;
    const wasUp = upstream.client !== undefined;
    upstream.client = undefined;
    upstream.down = why;
    const restarts = this.#options.restarts;
    if (restarts !== undefined && upstream.restarted++ >= restarts) {
      upstream.retryAt = Infinity; // never: its restarts are used up
      (this.#options.log ?? noop)(`upstream "${upstream.name}" ${wasUp ? "is gone" : "did not start"}: ${why}`);
      if (wasUp) this.#changed();
      return;
    }
    const delay = Math.min(GATEWAY_BACKOFF_MS * 2 ** upstream.attempt++, GATEWAY_BACKOFF_MAX_MS);
    upstream.retryAt = Date.now() + delay;
    (this.#options.log ?? noop)(
      `upstream "${upstream.name}" ${wasUp ? "is gone" : "did not start"}: ${why}; trying again in ${delay / 1000} s`,
    );
    upstream.timer = setTimeout(() => {
      upstream.timer = undefined;
      void this.#connect(upstream);
    }, delay);
    (upstream.timer as { unref?: () => void }).unref?.();
    if (wasUp) this.#changed();
  }

  // The lists of one upstream, again (at start, and on its list_changed).
  async #refresh(upstream: UpstreamState): Promise<void> {
    const client = upstream.client;
    if (!client) return;
    const offers = isObject(client.initializeResult.capabilities) ? client.initializeResult.capabilities : {};
    const list = (capability: string, get: () => Promise<JsonObject[]>) =>
      isObject(offers[capability]) ? get().catch(() => []) : Promise.resolve([]);
    [upstream.tools, upstream.prompts, upstream.resources, upstream.templates] = await Promise.all([
      list("tools", () => client.listTools()),
      list("prompts", () => client.listPrompts()),
      list("resources", () => client.listResources()),
      list("resources", () => client.listResourceTemplates()),
    ]);
    for (const key of this.#cache.keys()) if (key.startsWith(`${upstream.name} `)) this.#cache.delete(key);
    this.#changed();
    // A 2026-07-28 upstream tells no list changes here: its lists are fetched again when their ttlMs runs out
    // (caching.mdx: with jitter, and never more often than every few seconds).
    clearTimeout(upstream.refreshTimer);
    const ttl = client.era === "modern" ? client.listTtlMs : undefined;
    client.listTtlMs = undefined;
    if (ttl !== undefined && ttl > 0) {
      const wait = Math.max(ttl, 5_000) * (1 + Math.random() / 10);
      upstream.refreshTimer = setTimeout(() => void this.#refresh(upstream), wait);
      (upstream.refreshTimer as { unref?: () => void }).unref?.();
    }
  }

  #notified(upstream: UpstreamState, method: string, params: JsonObject): void {
    if (method === "notifications/tasks") this.#listened.get(`${upstream.name}__${params.taskId}`)?.update(params);
    else if (method.endsWith("/list_changed")) void this.#refresh(upstream);
    else if (method === "notifications/resources/updated" && typeof params.uri === "string") {
      this.#cache.delete(`${upstream.name} ${params.uri}`);
      for (const onUpdate of upstream.watchers.get(params.uri) ?? []) onUpdate();
    }
  }

  // The call a message of the upstream is about: the one it names (`cause`: it came on that call's HTTP
  // stream or in its input_required result), else the newest call when every call in flight is one
  // client's; else none: a question for one client must never reach another.
  #callerOf(upstream: UpstreamState, cause: unknown): ToolContext | undefined {
    if (cause !== undefined) return upstream.calls.find((ctx) => ctx === cause);
    const newest = upstream.calls.at(-1);
    if (!newest) return undefined;
    const client = clientOf(newest);
    return upstream.calls.every((ctx) => clientOf(ctx) === client) ? newest : undefined;
  }

  // An upstream's question (sampling, elicitation, roots) goes to the client of the call it is about.
  async #ask(upstream: UpstreamState, method: string, params: JsonObject, cause: unknown): Promise<unknown> {
    if (method === "roots/list" && this.#options.roots) return { roots: this.#options.roots };
    if (method === "roots/list" && this.#options.shared) {
      // Not offered (roots are one client's, and several are served): asked all the same, refused.
      throw new RpcError(ErrorCode.MethodNotFound, "Method not found: roots/list (no roots are shared here)");
    }
    const ctx = this.#callerOf(upstream, cause);
    if (!ctx) {
      throw new RpcError(
        ErrorCode.InvalidRequest,
        upstream.calls.length === 0
          ? `Cannot pass on ${method}: no call is in flight to ask about`
          : `Cannot pass on ${method}: calls of several clients are in flight and the gateway cannot tell ` +
            `which one this is about`,
      );
    }
    if (method === "sampling/createMessage") return await ctx.sample(params);
    if (method === "elicitation/create") return await ctx.elicit(params);
    if (method === "roots/list") return { roots: await ctx.roots() };
    throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${method}`);
  }

  #changed(): void {
    if (!this.#closed) this.onCatalog(this.catalog());
  }

  /** What the upstreams offer now, under the names the gateway gives them. */
  catalog(): Catalog {
    const prefixAll = (this.#options.prefix ?? "always") === "always";
    const transparent = this.#options.prefix === "none";
    const counts = new Map<string, number>();
    for (const upstream of this.#upstreams) {
      for (const item of [...upstream.tools, ...upstream.prompts]) {
        counts.set(String(item.name), (counts.get(String(item.name)) ?? 0) + 1);
      }
    }
    const taken = new Set<string>();
    const nameFor = (upstream: UpstreamState, name: string) => {
      let given = transparent ? name : gatewayName(upstream.name, name, prefixAll || (counts.get(name) ?? 0) > 1);
      // Two names that clean to one: the later gets a hash of its own; a collision never stops the gateway.
      if (taken.has(given)) given = `${given.slice(0, MAX_TOOL_NAME - 9)}_${shortHash(`${upstream.name}/${name}`)}`;
      taken.add(given);
      return given;
    };
    const tools: Tool[] = [];
    const prompts: Prompt[] = [];
    const resources: Resource[] = [];
    const templates: ResourceTemplate[] = [];
    const uris = new Set<string>();
    for (const upstream of this.#upstreams) {
      for (const tool of upstream.tools) {
        const name = nameFor(upstream, String(tool.name));
        if (!exposed(this.#options.tools, name)) continue;
        const own = typeof tool.description === "string" ? tool.description : "";
        const description = transparent ? own : `${own} (from ${upstream.name})`;
        const forwarded = defineTool(
          {
            ...tool,
            name,
            title: typeof tool.title === "string"
              ? (transparent ? tool.title : `${tool.title} (${upstream.name})`)
              : undefined,
            description: description.trim(),
            inputSchema: isObject(tool.inputSchema) ? tool.inputSchema : { type: "object" },
            execution: undefined, // the upstream's tasks are its own (a 2025-11-25 one's are followed upstream)
            run: (args: JsonObject, ctx: ToolContext) => this.#call(upstream, String(tool.name), args, ctx),
          },
          name,
          `upstream ${upstream.name}`,
        );
        // An upstream's CreateTaskResult goes on as it came (renamed), not as a tool's text.
        const map = (value: unknown) =>
          isObject(value) && value.resultType === "task" ? value : toCallToolResult(value);
        forwarded.job = { label: name, run: forwarded.run, map, fail: errorResult };
        tools.push(forwarded);
      }
      for (const prompt of upstream.prompts) {
        const name = nameFor(upstream, String(prompt.name));
        prompts.push(definePrompt({
          ...prompt,
          name,
          get: (args: Record<string, string>, ctx: ToolContext) =>
            this.#upstreamOf(upstream).getPrompt(String(prompt.name), args, traceOf(ctx)),
          passThrough: true, // the contract: a forwarded result is the upstream's, no field added
          complete: (argument: string, value: string) =>
            this.#complete(upstream, { type: "ref/prompt", name: prompt.name }, argument, value),
        }, `upstream ${upstream.name}`));
      }
      // A URI or template two upstreams serve (the same server twice): the first wins, said once (not at
      // every rebuild); no collision stops the gateway.
      const claim = (what: string, key: string) => {
        const id = `${what} ${key}`;
        if (!uris.has(id)) {
          uris.add(id);
          return true;
        }
        if (this.#warned.has(id)) return false;
        this.#warned.add(id);
        (this.#options.log ?? noop)(
          `${what} ${key} is served by an earlier upstream too; "${upstream.name}" is not asked for it`,
        );
        return false;
      };
      for (const resource of upstream.resources) {
        if (!claim("resource", String(resource.uri))) continue;
        resources.push(defineResource({
          ...resource,
          read: (at: string, ctx: ToolContext) => this.#read(upstream, at, ctx),
          watch: (at: string, onUpdate: () => void) => this.#watch(upstream, at, onUpdate),
        }, `upstream ${upstream.name}`) as Resource);
      }
      for (const template of upstream.templates) {
        if (!claim("resource template", String(template.uriTemplate))) continue;
        templates.push(defineResource({
          ...template,
          read: (at: string, _params: Record<string, string>, ctx: ToolContext) => this.#read(upstream, at, ctx),
          complete: (argument: string, value: string) =>
            this.#complete(upstream, { type: "ref/resource", uri: template.uriTemplate }, argument, value),
        }, `upstream ${upstream.name}`) as ResourceTemplate);
      }
    }
    // A tool of an upstream that never came up is not listed, yet its prefix says whose it is: a call is its isError.
    const unknownTool = (name: string) => {
      const down = this.#upstreams.find((upstream) =>
        !upstream.client && upstream.tools.length === 0 && name.startsWith(`${upstream.name}__`)
      );
      if (!down || transparent) return undefined;
      try {
        this.#upstreamOf(down);
      } catch (error) {
        return this.#failure(down, error, false);
      }
    };
    return { tools, prompts, resources, templates, unknownTool };
  }

  /**
   * What the gateway's server forwards besides its catalog: the extensions its upstreams declare, tasks/* by
   * the upstream a task's id names, skills to the upstream that has them (stateless: nothing is kept).
   * @internal
   */
  serverHooks(): Pick<ServerOptions, "moreExtensions" | "forwardTask" | "forwardSkills" | "remoteTask"> {
    const offered = (upstream: UpstreamState) => {
      const capabilities = upstream.client?.initializeResult.capabilities;
      return isObject(capabilities) && isObject(capabilities.extensions) ? capabilities.extensions : {};
    };
    const skillful = () => this.#upstreams.filter((upstream) => isObject(offered(upstream)[EXTENSIONS.skills]));
    return {
      moreExtensions: () => {
        const extensions: JsonObject = {};
        for (const upstream of this.#upstreams) {
          if (isObject(offered(upstream)[EXTENSIONS.tasks])) extensions[EXTENSIONS.tasks] = {};
          const skills = offered(upstream)[EXTENSIONS.skills];
          if (!isObject(skills)) continue;
          const settings = isObject(extensions[EXTENSIONS.skills]) ? extensions[EXTENSIONS.skills] as JsonObject : {};
          extensions[EXTENSIONS.skills] = skills.directoryRead === true
            ? { ...settings, directoryRead: true }
            : settings;
        }
        return extensions;
      },
      forwardTask: (method, params, principal) => {
        if (!this.#issued.owns(params.taskId, principal)) {
          // Another replica's (--state): asked of the one that gave it out; else unknown to this caller: -32602.
          return this.#store ? this.#askOwner(method, params, principal) : undefined;
        }
        return this.#forwardTask(method, params);
      },
      forwardSkills: (method, params) => skillful().length === 0 ? undefined : this.#skills(skillful(), method, params),
      // A client's subscriptions/listen for an upstream's task: listened for upstream, per id, while it listens.
      remoteTask: (taskId, principal) => {
        if (!this.#issued.owns(taskId, principal)) return undefined; // acknowledged as unknown, nothing asked upstream
        const [name, ...rest] = taskId.split("__");
        const client = this.#upstreams.find((candidate) => candidate.name === name)?.client;
        if (!client || client.era !== "modern" || rest.length === 0) return undefined;
        return new UpstreamTask(taskId, rest.join("__"), client, this.#listened);
      },
    };
  }

  /**
   * With replicas (--state redis://…): each task id this gateway gives out is recorded in the store with its
   * principal and this replica's name, and another replica's tasks/* for it is asked of this one over the bus.
   * @internal
   */
  share(store: ReplicaStore): void {
    this.#store = store;
    store.answer("gateway-task", (message) => {
      const params = isObject(message.params) ? message.params : {};
      if (!this.#issued.owns(params.taskId, String(message.principal))) throw unknownTask(params.taskId);
      return this.#forwardTask(String(message.method), params) ?? rethrow(unknownTask(params.taskId));
    });
  }

  async #askOwner(method: string, params: JsonObject, principal: string): Promise<unknown> {
    const store = this.#store!;
    const record = parseJsonObject(String(await store.call("GET", GATEWAY_TASK_KEY + String(params.taskId))));
    if (!record || record.p !== principal || typeof record.o !== "string") throw unknownTask(params.taskId);
    const own: JsonObject = { ...params };
    delete own._meta;
    return await store.ask(record.o, "gateway-task", { method, params: own, principal });
  }

  // tasks/* to the upstream a task's id names (<upstream>__<id>); undefined: no such upstream.
  #forwardTask(method: string, params: JsonObject): Promise<unknown> | undefined {
    const [name, ...rest] = String(params.taskId ?? "").split("__");
    const upstream = this.#upstreams.find((candidate) => candidate.name === name);
    if (!upstream?.client || rest.length === 0) return undefined;
    const own: JsonObject = { ...params, taskId: rest.join("__") };
    delete own._meta;
    const client = upstream.client;
    return client.request(method, own, { extensions: TASKS_DECLARED }).then(async (result) => {
      // A 2025-11-25 upstream's finished task holds no result: its tasks/result has it (the CallToolResult).
      if (client.era === "legacy" && method === "tasks/get" && result.status === "completed") {
        result = { ...result, result: await client.request("tasks/result", { taskId: own.taskId }) };
      }
      return typeof result.taskId === "string" ? { ...result, taskId: `${name}__${result.taskId}` } : result;
    });
  }

  // skills/list: every upstream's entries in config order (a URI two serve: the first's, said once); the rest
  // goes to the upstream whose skill holds the URI.
  async #skills(upstreams: UpstreamState[], method: string, params: JsonObject): Promise<unknown> {
    const listings = await Promise.all(upstreams.map((upstream) => upstream.client!.listSkills().catch(() => [])));
    if (method === "skills/list") {
      const seen = new Set<string>();
      const skills: JsonObject[] = [];
      listings.forEach((entries, i) => {
        for (const entry of entries) {
          const uri = String(entry.uri);
          if (!seen.has(uri)) {
            seen.add(uri);
            skills.push(entry);
          } else if (!this.#warned.has(`skill ${uri}`)) {
            this.#warned.add(`skill ${uri}`);
            (this.#options.log ?? noop)(
              `skill ${uri} is served by an earlier upstream too; "${upstreams[i].name}" is not asked for it`,
            );
          }
        }
      });
      return { skills };
    }
    const uri = String(params.uri ?? "");
    const owner = upstreams.find((_, i) =>
      listings[i].some((entry) => {
        const root = String(entry.uri).replace(/\/SKILL\.md$/, "");
        return uri === entry.uri || uri === root || uri.startsWith(root + "/") || root.startsWith(uri + "/");
      })
    );
    if (!owner) {
      throw new RpcError(ErrorCode.InvalidParams, `Invalid params: no upstream serves ${JSON.stringify(uri)}`);
    }
    const own: JsonObject = { uri };
    if (params.cursor !== undefined) own.cursor = params.cursor;
    return await owner.client!.request(method, own);
  }

  #upstreamOf(upstream: UpstreamState): McpClient {
    if (upstream.client) return upstream.client;
    const wait = Math.max(0, Math.ceil((upstream.retryAt - Date.now()) / 1000));
    throw new RpcError(
      ErrorCode.InternalError,
      `upstream "${upstream.name}" is down (${upstream.down}); ` +
        (upstream.retryAt === Infinity ? "it is not started again" : `it is tried again in ${wait} s`),
    );
  }

  // A tool call, forwarded with its progress, cancellation, logs and questions; a down upstream is an isError.
  async #call(upstream: UpstreamState, name: string, args: JsonObject, ctx: ToolContext): Promise<JsonObject> {
    let client: McpClient;
    try {
      client = this.#upstreamOf(upstream);
    } catch (error) {
      return this.#failure(upstream, error, false);
    }
    upstream.calls.push(ctx);
    // The tasks extension goes upstream only when the client declared it on this call; a task then comes back
    // as the upstream made it, its id <upstream>__<id> (tasks/* find their way back by it: forwardTask).
    const view = ctx instanceof RequestContext ? ctx.client as ClientView : undefined;
    const tasks = view !== undefined && declaresExtension(view.capabilities, EXTENSIONS.tasks);
    try {
      const result = await client.callTool(name, args, {
        cause: ctx,
        signal: ctx.signal,
        // An uninstrumented hop keeps a trace whole: the caller's context goes on unchanged.
        traceparent: ctx.traceparent,
        tracestate: ctx.tracestate,
        baggage: ctx.baggage,
        onProgress: (progress) =>
          ctx.progress(
            Number(progress.progress),
            progress.total as number | undefined,
            progress.message as string | undefined,
          ),
        tasks,
        detach: tasks,
      });
      // A 2025-11-25 upstream's task (its CreateTaskResult wraps a Task) goes on as a SEP-2663 one.
      const created = createdTask(result);
      if (!created) return result;
      const task = result.resultType === "task" ? result : {
        resultType: "task",
        ...created,
        ttlMs: created.ttl ?? undefined,
        pollIntervalMs: created.pollInterval ?? undefined,
      };
      const taskId = `${upstream.name}__${created.taskId}`;
      const ttlMs = typeof task.ttlMs === "number" && task.ttlMs > 0 ? task.ttlMs : DEFAULT_TASK_TTL_MS;
      const principal = taskPrincipal(ctx.auth, view?.sessionId);
      this.#issued.issue(taskId, principal, ttlMs);
      // Recorded before the client hears of it: its next tasks/get may reach another replica.
      const store = this.#store;
      if (store) {
        const record = JSON.stringify({ o: store.replica, p: principal });
        await store.call("SET", GATEWAY_TASK_KEY + taskId, record, "PX", ttlMs).catch(noop);
      }
      return { ...task, taskId };
    } catch (error) {
      if (ctx.signal.aborted) throw error;
      if (error instanceof UnreachableError) this.#lost(upstream, errorMessage(error));
      return this.#failure(upstream, error, true);
    } finally {
      upstream.calls.splice(upstream.calls.indexOf(ctx), 1);
    }
  }

  // A call the upstream could not answer: an isError result, or (failures: "errors") the error it was.
  #failure(upstream: UpstreamState, error: unknown, named: boolean): JsonObject {
    if (this.#options.failures === "errors") {
      const code = error instanceof ServerError && typeof error.code === "number"
        ? error.code
        : ErrorCode.InternalError;
      throw new RpcError(code, errorMessage(error), error instanceof ServerError ? error.data : undefined);
    }
    return errorResult(named ? `upstream "${upstream.name}": ${errorMessage(error)}` : errorMessage(error));
  }

  // completion/complete, asked of the upstream that has the prompt or template (when it offers completions).
  async #complete(upstream: UpstreamState, ref: JsonObject, argument: string, value: string): Promise<unknown[]> {
    const client = this.#upstreamOf(upstream);
    const offers = isObject(client.initializeResult.capabilities) ? client.initializeResult.capabilities : {};
    if (!isObject(offers.completions)) return [];
    const result = await client.request("completion/complete", { ref, argument: { name: argument, value } });
    const completion = isObject(result.completion) ? result.completion : {};
    return Array.isArray(completion.values) ? completion.values : [];
  }

  // resources/read, kept per upstream and URI for --cache-ttl, the least recently used dropped first.
  async #read(upstream: UpstreamState, uri: string, ctx?: ToolContext): Promise<JsonObject> {
    const ttl = this.#options.cacheTtl ?? 0;
    const key = `${upstream.name} ${uri}`;
    const kept = this.#cache.get(key);
    if (kept && kept.until > Date.now()) {
      this.#cache.delete(key);
      this.#cache.set(key, kept); // most recently used last
      return kept.value;
    }
    const value = await this.#upstreamOf(upstream).readResource(uri, traceOf(ctx));
    if (ttl > 0) {
      this.#cache.set(key, { until: Date.now() + ttl, value });
      const size = this.#options.cacheSize ?? 256;
      while (this.#cache.size > size) this.#cache.delete(this.#cache.keys().next().value!);
    }
    return value;
  }

  #watch(upstream: UpstreamState, uri: string, onUpdate: () => void): () => void {
    let watchers = upstream.watchers.get(uri);
    if (!watchers) {
      upstream.watchers.set(uri, watchers = new Set());
      void upstream.client?.request("resources/subscribe", { uri }).catch(noop);
    }
    watchers.add(onUpdate);
    return () => {
      watchers!.delete(onUpdate);
      if (watchers!.size > 0) return;
      upstream.watchers.delete(uri);
      void upstream.client?.request("resources/unsubscribe", { uri }).catch(noop);
    };
  }
}

// --- 15b. Proxy ---

/** Where a proxy or replay meets its client: stdio, or Streamable HTTP. */
interface Downstream {
  /** Starts reading; `message` gets each message text, `end` the end of the input. */
  start(message: (text: string, traceparent?: string) => void, end: () => void): void;
  /** Sends one message to the client; `about`: the upstream request whose stream carried it, when known. */
  send(text: string, about?: RequestId): void;
  /** Stops; resolves when what was sent is out. */
  close(): Promise<void>;
  /** Set by the owner: the client gave up on request `id` (closed its HTTP response stream). */
  cancelled?: (id: RequestId) => void;
}

// stdin/stdout (or given streams), newline-delimited, as `serve` reads and writes them.
function stdioDownstream(input?: Readable, output?: OutputSink): Downstream {
  const stdio = processStdio();
  const source = input ? streamSource(input) : stdio.stdin();
  const sink = output ?? stdio.stdout;
  const writer = new FrameWriter((text) => sink.write(text));
  return {
    start(message, end) {
      const reader = new FrameReader({ message, oversize: noop }, DEFAULT_CLIENT_MAX_LINE_BYTES);
      source.start((chunk) => reader.push(chunk), () => {
        reader.end();
        end();
      });
    },
    send: (text) => writer.send(text),
    close: async () => {
      source.stop();
      writer.flush();
      await new Promise<void>((resolve) => sink.write("", () => resolve()));
    },
  };
}

/**
 * Streamable HTTP for raw messages: each POSTed request is answered with the
 * messages `route` gives it (one JSON body, or an SSE stream when others come
 * before the response); notifications and responses get 202. No sessions, no
 * GET stream. Host and Origin are checked as `serve --http` checks them.
 * Clients are never mixed (Safety: the proxy never mixes clients): each request is kept with its caller's
 * principal; what the upstream sends about a request (on its stream, or naming its progress token) goes to that
 * request's stream; a question of the upstream that concerns no request it can tell, while several are open, is
 * refused with a JSON-RPC error; an answer to a question, or a notifications/cancelled, is taken only from the
 * principal of the request it concerns.
 */
function httpDownstream(
  options: Omit<FrontPolicy, "methods" | "route">,
): {
  downstream: Downstream;
  handler: (request: Request) => Promise<Response>;
} {
  let onMessage: (text: string, traceparent?: string) => void = noop;
  // Several clients may each send id 1: upstream, every request gets an id of ours, given back in its answer.
  type Open = { exchange: Exchange; id: RequestId; principal: string; progressToken?: string };
  const open = new Map<string, Open>(); // by our id (as JSON): where its messages go
  const questions = new Map<string, string>(); // the upstream's open questions (id as JSON) → the principal asked
  let nextId = 0;
  // The same front as serve --http; the proxy's route passes each message on.
  const handler = httpFront({
    ...options,
    methods: "POST, DELETE",
    route: (arrival) => route(arrival),
  });
  const route = async ({ request, method, json, auth }: Arrival): Promise<Response> => {
    if (method === "DELETE") return new Response(null, { status: 200 });
    if (method !== "POST") return new Response(null, { status: 405, headers: { allow: "POST, DELETE" } });
    let text = "";
    const message = await json((raw) => text = raw); // the text too: a notification is passed on as it came
    if (message instanceof Response) return message;
    if (!isObject(message)) return rpcErrorResponse(400, null, ErrorCode.InvalidRequest, "Invalid request");
    const principal = principalOf(auth);
    if (typeof message.method !== "string" || !isRequestId(message.id)) {
      const params = isObject(message.params) ? message.params : undefined;
      if (message.method === "notifications/cancelled") {
        // The client names its own id: the newest request this principal sent with that id is ours to name
        // upstream; a cancellation naming none of its requests is dropped.
        // Two such requests (clients the proxy cannot tell apart, each with that id): which one is not guessed.
        const requestId = params?.requestId;
        const named = [...open.entries()].filter(([, entry]) =>
          entry.id === requestId && entry.principal === principal
        );
        const ours = named.length === 1 ? named[0][0] : undefined;
        if (ours) onMessage(JSON.stringify({ ...message, params: { ...params, requestId: JSON.parse(ours) } }));
      } else if (message.method === undefined && isRequestId(message.id)) {
        // An answer to a question of the upstream: taken once, and only from the principal it was asked of.
        const key = JSON.stringify(message.id);
        if (questions.get(key) === principal) {
          questions.delete(key);
          onMessage(text);
        }
      } else onMessage(text);
      return new Response(null, { status: 202 });
    }
    const ours = `proxy-${++nextId}`;
    const key = JSON.stringify(ours);
    const exchange = new Exchange(NO_HEADERS, () => 200);
    exchange.onCancel = () => {
      if (open.delete(key)) downstream.cancelled?.(ours);
    };
    const meta = isObject(message.params) && isObject(message.params._meta) ? message.params._meta : {};
    const progressToken = isRequestId(meta.progressToken) ? JSON.stringify(meta.progressToken) : undefined;
    open.set(key, { exchange, id: message.id, principal, progressToken });
    // The HTTP traceparent header goes along: a traced proxy's SERVER span takes it when _meta has none.
    onMessage(JSON.stringify({ ...message, id: ours }), request.headers.get("traceparent") ?? undefined);
    return exchange.response;
  };
  const downstream: Downstream = {
    start(message) {
      onMessage = message;
    },
    send(text, about) {
      let parsed: JsonObject | undefined;
      try {
        parsed = JSON.parse(text);
      } catch {
        return;
      }
      if (!isObject(parsed)) return;
      if (parsed.method === undefined) {
        const entry = isRequestId(parsed.id) ? open.get(JSON.stringify(parsed.id)) : undefined;
        if (!entry) return;
        open.delete(JSON.stringify(parsed.id));
        entry.exchange.write(JSON.stringify({ ...parsed, id: entry.id }), true);
        return;
      }
      // A notification or a request of the server's: the stream of the request it is about.
      const params = isObject(parsed.params) ? parsed.params : {};
      const token = isRequestId(params.progressToken) ? JSON.stringify(params.progressToken) : undefined;
      const entries = [...open.values()];
      const target = (about !== undefined ? open.get(JSON.stringify(about)) : undefined) ??
        (token !== undefined ? entries.findLast((entry) => entry.progressToken === token) : undefined) ??
        (entries.length === 1 ? entries[0] : undefined);
      if (target) {
        if (isRequestId(parsed.id)) {
          questions.set(JSON.stringify(parsed.id), target.principal);
          if (questions.size > 1_000) questions.delete(questions.keys().next().value!); // never answered: forgotten
        }
        return target.exchange.write(text, false);
      }
      if (isRequestId(parsed.id)) {
        // Which client it is for cannot be told: refused rather than guessed.
        const message = `mcp.ts proxy: ${parsed.method} concerns no request the proxy can tell (several clients ` +
          `are served): refused`;
        onMessage(
          JSON.stringify({ jsonrpc: "2.0", id: parsed.id, error: { code: ErrorCode.InvalidRequest, message } }),
        );
      } else if (String(parsed.method).endsWith("/list_changed")) {
        for (const entry of entries) entry.exchange.write(text, false); // what every client may know
      }
    },
    close: () => {
      for (const { exchange } of open.values()) exchange.close("the proxy is shutting down");
      open.clear();
      return Promise.resolve();
    },
  };
  return { downstream, handler };
}

/** Options of {@linkcode proxy}. */
export interface ProxyOptions extends ConnectOptions {
  /** Where the client is: stdio (default, or these streams), or an HTTP endpoint's handler. */
  input?: Readable;
  output?: OutputSink;
  /** Each frame: "<" from the client, ">" to it. */
  onFrame?: (direction: "<" | ">", text: string) => void;
  /** A line for the proxy's stderr. */
  log?: (line: string) => void;
  /** Where durations are kept (--metrics). @internal */
  measure?: Metrics;
  /** One line per request forwarded (--log-format json). @internal */
  accessLog?: (msg: string, fields: Record<string, unknown>) => void;
}

/** A running proxy: `done` resolves with the exit code when the client or the upstream goes away. */
export interface ProxyHandle {
  done: Promise<number>;
  /** Ends it (SIGINT/SIGTERM): the upstream is stopped or its session ended. */
  stop(): void;
}

/**
 * Forwards every message between a client and the `upstream` server, both ways,
 * unchanged: any method, either era, the server's requests too. Over HTTP it
 * adds the headers Streamable HTTP wants (the session, the mirror headers).
 */
export function proxy(upstream: ServerSpec, options: ProxyOptions = {}, downstream?: Downstream): ProxyHandle {
  const client = downstream ?? stdioDownstream(options.input, options.output);
  const log = options.log ?? noop;
  let auth: AuthProvider | undefined;
  if (isHttpSpec(upstream) && options.auth !== false) {
    auth = options.auth ||
      new OAuthProvider(upstream.url, {
        serverName: upstream.name ?? upstream.url,
        ...upstream.oauth,
        ...options.oauth,
      });
  }
  const transport: ClientTransport = isHttpSpec(upstream)
    ? new HttpTransport(upstream, { headers: options.headers, maxBytes: options.maxLineBytes, auth })
    : new StdioTransport(upstream, {
      env: options.env,
      cwd: options.cwd,
      maxLineBytes: options.maxLineBytes,
      stopStepMs: options.stopStepMs,
      wait: options.wait,
    });
  const http = transport instanceof HttpTransport ? transport : undefined;
  // Telemetry, metrics and access lines, when asked for (7i): spans per request, the traceparent replaced upstream.
  const ownTracer = options.tracer ? undefined : telemetryFor(options.telemetry);
  const observe = observeForwarded({
    tracer: options.tracer ?? ownTracer,
    measure: options.measure,
    accessLog: options.accessLog,
    downstream: downstream
      ? { "network.transport": "tcp", "network.protocol.name": "http" }
      : { "network.transport": "pipe" },
    upstream: isHttpSpec(upstream) ? networkOf(upstream.url) : { "network.transport": "pipe" },
    version: () => typeof initialized?.protocolVersion === "string" ? initialized.protocolVersion : undefined,
    served: (kind, name) => kind === "tool" && tools.has(name),
  });
  // A client that closed its stream gave up on the request: the upstream hears it the way its transport says.
  client.cancelled = (id) => {
    if (http) transport.abandon(id);
    else {transport.send(
        JSON.stringify({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id } }),
      );}
  };
  const tools = new Map<string, JsonObject>(); // from tools/list answers, for Mcp-Param-* headers
  const pending = new Map<string, string>(); // request id (as JSON) → method, for what the answers tell
  // One upstream session for every client of an HTTP proxy: a later client's initialize is answered with the first's.
  let initialized: JsonObject | undefined;
  let answeredAgain = 0; // initializes answered from the first: their notifications/initialized stay here
  let finish!: (code: number) => void;
  const done = new Promise<number>((resolve) => finish = resolve);
  let ended = false;
  const end = async (code: number) => {
    if (ended) return;
    ended = true;
    await transport.close();
    await client.close();
    await ownTracer?.flush();
    finish(code);
  };
  const toClient = (text: string, about?: RequestId) => {
    options.onFrame?.(">", text);
    options.onMessage?.("recv", text);
    client.send(text, about);
  };
  const answers = (text: string, parsed?: unknown, about?: RequestId) => {
    let message = parsed;
    if (message === undefined) {
      try {
        message = JSON.parse(text);
      } catch {
        message = undefined;
      }
    }
    if (isObject(message) && message.method === undefined && isRequestId(message.id)) {
      const method = pending.get(JSON.stringify(message.id));
      pending.delete(JSON.stringify(message.id));
      observe?.answered(JSON.stringify(message.id), message);
      const result = isObject(message.result) ? message.result : undefined;
      // What a proxy learns from answers: the negotiated version (legacy HTTP), the tools' x-mcp-header arguments.
      if (method === "initialize" && result) {
        initialized = result;
        if (http && typeof result.protocolVersion === "string") http.protocolVersion = result.protocolVersion;
      }
      if (method === "tools/list" && Array.isArray(result?.tools)) {
        for (const tool of result.tools) if (isObject(tool)) tools.set(String(tool.name), tool);
      }
    }
    toClient(text, about);
  };
  transport.start({
    message: answers,
    failed: (id, error) => {
      pending.delete(JSON.stringify(id));
      observe?.answered(JSON.stringify(id), undefined, error);
      // The upstream's own JSON-RPC error (an HTTP 4xx's body) goes on as it said it; our failures say they are ours.
      const answer = error instanceof RpcError
        ? { code: error.code, message: error.message, ...(error.data === undefined ? {} : { data: error.data }) }
        : { code: ErrorCode.InternalError, message: `mcp.ts proxy: ${errorMessage(error)}` };
      toClient(JSON.stringify({ jsonrpc: "2.0", id, error: answer }));
    },
    closed: (error) => {
      log(`the upstream server is gone: ${errorMessage(error)}`);
      void end(1);
    },
    invalid: (text) => log(`not JSON-RPC on the upstream's stdout: ${brief(text)}`),
    stderr: (text) => void (options.onStderr ? options.onStderr(text) : ownStderr().write(text)),
    trace: options.onTrace ?? noop,
  }).then(() => {
    client.start((text, traceparent) => {
      options.onFrame?.("<", text);
      options.onMessage?.("send", text);
      let message: unknown;
      try {
        message = JSON.parse(text);
      } catch {
        message = undefined;
      }
      let context: SendContext | undefined;
      if (isObject(message) && downstream && initialized) {
        if (message.method === "initialize" && isRequestId(message.id)) {
          toClient(JSON.stringify({ jsonrpc: "2.0", id: message.id, result: initialized }));
          answeredAgain++;
          return;
        }
        // The upstream heard the first client's; a later client's would be a second one.
        if (message.method === "notifications/initialized" && answeredAgain > 0) {
          answeredAgain--;
          return;
        }
      }
      if (isObject(message) && typeof message.method === "string") {
        const traced = observe && isRequestId(message.id)
          ? observe.request(JSON.stringify(message.id), message, traceparent)
          : undefined;
        if (traced) text = JSON.stringify(traced);
        const params = isObject((traced ?? message).params) ? (traced ?? message).params as JsonObject : {};
        if (isRequestId(message.id)) pending.set(JSON.stringify(message.id), message.method);
        const meta = isObject(params._meta) ? params._meta : {};
        const version = typeof meta[META.protocolVersion] === "string"
          ? meta[META.protocolVersion] as string
          : undefined;
        if (http) context = { headers: mirrorHeaders(message.method, params, version, tools.get(String(params.name))) };
      }
      transport.send(text, context);
    }, () => void end(0));
  }, (error) => {
    log(errorMessage(error));
    void end(1);
  });
  return { done, stop: () => void end(0) };
}

// --- 15c. Replay ---

/** One line of a cassette after its header. */
interface CassetteEntry {
  t: number;
  dir: "send" | "recv";
  message: JsonObject;
}

/** Reads a cassette: its header and entries. */
function readCassette(text: string, file = "the cassette"): { header: JsonObject; entries: CassetteEntry[] } {
  const lines = text.split("\n").filter((line) => line.trim() !== "");
  const parse = (line: string, index: number) => {
    try {
      return JSON.parse(line);
    } catch {
      throw new UsageError(`Cannot read ${file}: line ${index + 1} is not JSON`);
    }
  };
  const header = lines.length ? parse(lines[0], 0) : undefined;
  if (!isObject(header) || header.mcpCassette !== 1) {
    throw new UsageError(`Cannot read ${file}: it does not start with {"mcpCassette": 1, ...}`);
  }
  const entries = lines.slice(1).map(parse).filter((entry): entry is CassetteEntry =>
    isObject(entry) && (entry.dir === "send" || entry.dir === "recv") && isObject(entry.message)
  );
  return { header, entries };
}

// A recorded request, what answered it, what came before the answer, and what right after it.
interface Recorded {
  method: string;
  key: string;
  message: JsonObject;
  before: JsonObject[];
  response: JsonObject | undefined;
  after: JsonObject[];
  used: boolean;
}

// What a request is matched on: its method and params without _meta (initialize and server/discover: the method).
function matchKey(message: JsonObject): string {
  const method = String(message.method);
  if (method === "initialize" || method === "server/discover") return method;
  const params = isObject(message.params) ? { ...message.params } : {};
  delete params._meta;
  return `${method} ${canonicalJson(params)}`;
}

// Matched by method wherever they come, also with --strict.
const HANDSHAKE_METHODS = new Set(["initialize", "server/discover"]);

/**
 * Answers requests from a cassette: the first unused recorded request with the
 * same method and params (ignoring `_meta` and ids), preceded by what the
 * server sent before answering it, with ids and progress tokens made the live
 * request's. Once every match is used, the last one answers again; `strict`
 * wants the recorded order and each once. An unmatched request gets -32603
 * naming the closest recorded one.
 * @internal
 */
export class CassettePlayer {
  #recorded: Recorded[] = [];
  #strict: boolean;
  #next = 0;

  constructor(entries: CassetteEntry[], options: { strict?: boolean } = {}) {
    this.#strict = options.strict === true;
    const byId = new Map<string, Recorded>();
    let current: Recorded | undefined;
    let lastAnswered: Recorded | undefined; // the server's last message answered this: what follows came after it
    for (const { dir, message } of entries) {
      if (dir === "send") {
        if (typeof message.method === "string" && isRequestId(message.id)) {
          current = {
            method: message.method,
            key: matchKey(message),
            message,
            before: [],
            response: undefined,
            after: [],
            used: false,
          };
          this.#recorded.push(current);
          byId.set(JSON.stringify(message.id), current);
          lastAnswered = undefined;
        }
        continue;
      }
      const answered = message.method === undefined && isRequestId(message.id)
        ? byId.get(JSON.stringify(message.id))
        : undefined;
      if (answered) {
        answered.response = message;
        lastAnswered = answered;
      } else if (lastAnswered) lastAnswered.after.push(message);
      else (current ?? this.#recorded.at(-1))?.before.push(message);
    }
    this.#recorded = this.#recorded.filter((recorded) => recorded.response !== undefined);
  }

  /** The messages that answer `message` (none for a notification or a client's response). */
  answer(message: JsonObject): JsonObject[] {
    if (typeof message.method !== "string" || !isRequestId(message.id)) return [];
    const key = matchKey(message);
    let found: Recorded | undefined;
    // The handshake matches by method wherever it comes (a dual-era client probes first, a legacy one does
    // not): strict order skips it and keeps the order of the rest.
    if (this.#strict) {
      while (this.#next < this.#recorded.length && HANDSHAKE_METHODS.has(this.#recorded[this.#next].method)) {
        this.#next++;
      }
    }
    if (this.#strict && !HANDSHAKE_METHODS.has(message.method)) {
      const next = this.#recorded[this.#next];
      if (next && next.key === key) {
        found = next;
        this.#next++;
      }
    } else {
      found = this.#recorded.find((recorded) => !recorded.used && recorded.key === key) ??
        this.#recorded.findLast((recorded) => recorded.key === key);
    }
    if (!found) return [this.#unmatched(message, key)];
    found.used = true;
    const liveToken = isObject(message.params) && isObject(message.params._meta)
      ? message.params._meta.progressToken
      : undefined;
    const recordedParams = isObject(found.message.params) ? found.message.params : {};
    const recordedToken = isObject(recordedParams._meta) ? recordedParams._meta.progressToken : undefined;
    const before = found.before.map((item) => {
      const params = isObject(item.params) ? item.params : undefined;
      if (params && recordedToken !== undefined && params.progressToken === recordedToken) {
        return { ...item, params: { ...params, progressToken: liveToken ?? recordedToken } };
      }
      return item;
    });
    return [...before, { ...found.response!, id: message.id }, ...found.after];
  }

  #unmatched(message: JsonObject, key: string): JsonObject {
    const keys = this.#recorded.map((recorded) => recorded.key);
    const closest = closestNames(key, keys, 1)[0] ??
      keys.find((candidate) => candidate.startsWith(`${message.method} `)) ?? keys[0];
    const cut = (text: string) => text.length > 160 ? `${text.slice(0, 159)}…` : text;
    const why = this.#strict && this.#recorded[this.#next]
      ? `; --strict expects ${cut(this.#recorded[this.#next].key)} next`
      : closest
      ? `; the closest recorded request is ${cut(closest)}`
      : "; the cassette has none";
    return {
      jsonrpc: "2.0",
      id: message.id,
      error: { code: ErrorCode.InternalError, message: `replay: no recorded request matches ${cut(key)}${why}` },
    };
  }
}

/** Serves a cassette as a mock server over stdio or an HTTP downstream; resolves when the client goes away. */
export function replay(
  player: CassettePlayer,
  downstream: Downstream,
  onFrame?: ProxyOptions["onFrame"],
): Promise<void> {
  return new Promise((resolve) => {
    downstream.start((text) => {
      onFrame?.("<", text);
      let message: unknown;
      try {
        message = JSON.parse(text);
      } catch {
        message = undefined;
      }
      if (!isObject(message)) return;
      for (const out of player.answer(message)) {
        const line = JSON.stringify(out);
        onFrame?.(">", line);
        downstream.send(line);
      }
    }, () => void downstream.close().then(resolve));
  });
}

// --- 15d. Sessions: the per-user daemon ---
// One daemon per user keeps sessions open between commands: each is a gateway of one upstream, served to every
// connection on its socket (a command's `@NAME`, a host window's `attach NAME`) as the gateway serves its
// clients: each connection its own ids, cancellations, subscriptions and questions.

const DAEMON_IDLE_MS = 1_800_000;
// A daemon with no session left ends after this (a `connect --force` between two sessions finds it still there).
const DAEMON_LINGER_MS = 1_000;
const DAEMON_START_LINGER_MS = 30_000;

/** What `connect` asks the daemon to open. */
interface SessionRequest {
  name: string;
  target: string;
  cwd: string;
  /** The caller's environment with its -e additions: the server's, as if the caller had started it. */
  env: Record<string, string>;
  config?: string;
  headers?: Record<string, string>;
  protocol?: string;
  roots?: { uri: string; name?: string }[];
  retries?: number;
  idle?: number;
  timeout?: number;
  maxTime?: number;
  oauth?: OAuthOptions;
  force?: boolean;
}

interface DaemonSession {
  request: SessionRequest;
  gateway: Gateway;
  core: ServerCore;
  started: number;
  lastUsed: number;
  calls: number;
  lastError: string | undefined;
  sockets: Set<LocalSocket>;
  attached: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** The daemon: its sessions, and what each connection to its socket asks. */
class SessionDaemon {
  #sessions = new Map<string, DaemonSession>();
  #opening = new Map<string, Promise<DaemonSession>>();
  readonly token: string;
  #log: (line: string, fields?: Record<string, unknown>) => void;
  #linger: ReturnType<typeof setTimeout> | undefined;
  readonly socketPath: string;
  /** Resolves when the daemon should end (stop, or no session left). */
  readonly ended: Promise<void>;
  #end!: () => void;

  constructor(token: string, socketPath: string, log: (line: string, fields?: Record<string, unknown>) => void) {
    this.token = token;
    this.socketPath = socketPath;
    this.#log = log;
    this.ended = new Promise((resolve) => this.#end = resolve);
    this.#lingerFor(DAEMON_START_LINGER_MS);
  }

  /** A new connection: its hello says who it is and what it wants. */
  async connection(socket: LocalSocket): Promise<void> {
    let hello: JsonObject | undefined;
    let rest: Uint8Array;
    try {
      const first = await readFirstLine(socket, DAEMON_HELLO_MAX_BYTES, 10_000);
      hello = parseJsonObject(first.line);
      rest = first.rest;
    } catch {
      return socket.destroy();
    }
    const refuse = (error: string, code: number) => {
      socket.write(JSON.stringify({ ok: false, error, code }) + "\n");
      socket.end();
    };
    // The token file is the user's alone (0600 in a 0700 directory): knowing it is being that user.
    if (!hello || typeof hello.token !== "string" || !sameSecret(hello.token, this.token)) {
      this.#log("refused a connection without the daemon's token");
      return refuse("refused: not this daemon's token", 4);
    }
    if (hello.session === undefined) return this.#control(socket, rest);
    const session = this.#sessions.get(String(hello.session));
    if (!session) return refuse(`no session "@${hello.session}"; see: mcp.ts sessions`, 2);
    // The era its server speaks: a command speaks it too, and sees what it would see without the daemon.
    const era = session.gateway.upstreams()[0]?.client?.era;
    // A modern session's server/discover answer comes with the hello: a command starts without that round trip.
    // (Not when it would crowd the hello's line: long instructions; the command asks for it then.)
    const discovered = era === "modern"
      ? MODERN_ERA.encode("server/discover", session.core.discovery(), session.core.facts())
      : undefined;
    const reply = JSON.stringify({ ok: true, era, discovered });
    socket.write((reply.length < DAEMON_HELLO_MAX_BYTES / 4 ? reply : JSON.stringify({ ok: true, era })) + "\n");
    this.#serve(session, socket, rest, hello.attach === true);
  }

  // A session's MCP stream on this socket: a connection of the session's server, as one of a gateway's clients.
  #serve(session: DaemonSession, socket: LocalSocket, rest: Uint8Array, attach: boolean): void {
    session.sockets.add(socket);
    this.#touch(session);
    const handle = serve({
      core: session.core,
      source: {
        start(onData, onEnd) {
          if (rest.length) onData(rest);
          socket.onData(onData);
          socket.onClose(onEnd);
          socket.resume();
        },
        pause: () => socket.pause(),
        resume: () => socket.resume(),
        stop: () => socket.destroy(),
      },
      output: {
        write: (chunk, callback) => socket.write(chunk, callback),
        once: (_event, listener) => socket.onDrain(listener),
      },
      log: (line) => this.#log(`@${session.request.name}: ${line}`),
    });
    // Each attached window is a principal of its own (its tasks are its own); a user's commands share one, so a
    // task a `call @NAME --detach` made is readable by the next command's `task @NAME get ID`.
    if (attach) handle.server.sessionId = `attach ${++session.attached}`;
    void handle.done.then(() => {
      session.sockets.delete(socket);
      this.#touch(session);
      socket.end();
    });
    socket.onClose(() => handle.shutdown());
  }

  // Control requests, one JSON line each: open, list, close, status, stop.
  #control(socket: LocalSocket, rest: Uint8Array): void {
    socket.write(JSON.stringify({ ok: true }) + "\n");
    const reader = new FrameReader({
      message: async (text) => {
        const request = parseJsonObject(text);
        const params = isObject(request?.params) ? request.params : {};
        let reply: JsonObject;
        try {
          reply = { id: request?.id ?? null, result: await this.#answer(String(request?.method), params) };
        } catch (error) {
          // A server that could not start: the end of its stderr says why, as a command alone would show it.
          const stderr = error instanceof ServerError && error.stderr ? error.stderr : undefined;
          reply = { id: request?.id ?? null, error: { code: exitCodeOf(error), message: errorMessage(error), stderr } };
        }
        socket.write(JSON.stringify(reply) + "\n");
      },
      oversize: () => socket.destroy(),
    }, DEFAULT_MAX_LINE_BYTES);
    if (rest.length) reader.push(rest);
    socket.onData((chunk) => reader.push(chunk));
    socket.resume();
  }

  async #answer(method: string, params: JsonObject): Promise<JsonObject> {
    switch (method) {
      case "open":
        return await this.#open(params as unknown as SessionRequest);
      case "list":
        return { sessions: [...this.#sessions.values()].map((session) => this.#describe(session)) };
      case "close": {
        const names = params.all === true ? [...this.#sessions.keys()] : [String(params.name)];
        for (const name of names) {
          if (!this.#sessions.has(name)) throw new UsageError(`no session "${name}"; see: mcp.ts sessions`);
        }
        await Promise.all(names.map((name) => this.#close(name, "disconnected")));
        return { closed: names };
      }
      case "status":
        return { pid: sys.pid(), socket: this.socketPath, sessions: this.#sessions.size };
      case "stop":
        setTimeout(() => void this.stop(), 0);
        return { stopping: true, pid: sys.pid() };
      default:
        throw new UsageError(`the daemon has no request "${method}"`);
    }
  }

  async #open(request: SessionRequest): Promise<JsonObject> {
    const name = request.name;
    if (this.#sessions.has(name) && !request.force) {
      throw new UsageError(`session "${name}" is open already; give --force to open it again`);
    }
    if (this.#opening.has(name)) throw new UsageError(`session "${name}" is being opened`);
    clearTimeout(this.#linger); // a daemon opening a session is not one with none left
    const opening = this.#start(request);
    this.#opening.set(name, opening);
    try {
      const session = await opening;
      if (this.#sessions.has(name)) await this.#close(name, "opened again (--force)");
      this.#sessions.set(name, session);
      clearTimeout(this.#linger);
      this.#touch(session);
      this.#log(`session "${name}" opened: ${redact(request.target)}`); // a URL's query or credentials stay out
      return this.#describe(session);
    } finally {
      this.#opening.delete(name);
      if (this.#sessions.size === 0 && this.#opening.size === 0) this.#lingerFor(DAEMON_LINGER_MS);
    }
  }

  async #start(request: SessionRequest): Promise<DaemonSession> {
    const spec = await resolveServer(request.target, { config: request.config, cwd: request.cwd, env: request.env });
    const gateway = new Gateway([{ name: request.name, spec }], {
      env: request.env,
      cwd: request.cwd,
      config: request.config,
      headers: request.headers,
      // The era a command alone would find (not the gateway's handshake default): @NAME answers as the server does.
      protocol: request.protocol ?? "auto",
      oauth: { ...request.oauth, interactive: () => false, serverName: request.target },
      timeout: request.timeout,
      maxTime: request.maxTime,
      prefix: "none",
      roots: request.roots,
      restarts: request.retries ?? 0,
      failures: "errors",
      log: (line) => this.#log(line),
    });
    await gateway.start(DAEMON_START_WAIT_MS);
    const [upstream] = gateway.upstreams();
    if (!upstream.client) {
      await gateway.close();
      throw upstream.error ?? new ServerError(`Cannot connect "${request.name}": ${upstream.down}`);
    }
    const info = isObject(upstream.client.initializeResult.serverInfo)
      ? upstream.client.initializeResult.serverInfo
      : {};
    const first = gateway.catalog();
    const session: DaemonSession = {
      request,
      gateway,
      core: undefined as unknown as ServerCore,
      started: Date.now(),
      lastUsed: Date.now(),
      calls: 0,
      lastError: undefined,
      sockets: new Set(),
      attached: 0,
      timer: undefined,
    };
    const counted = (catalog: Catalog): Catalog => ({
      ...catalog,
      tools: catalog.tools.map((tool) => this.#counted(session, tool)),
    });
    session.core = new ServerCore({
      tools: counted(first).tools,
      resources: [...first.resources, ...first.templates],
      prompts: first.prompts,
      name: typeof info.name === "string" ? info.name : request.name,
      version: typeof info.version === "string" ? info.version : undefined,
      instructions: typeof upstream.client.initializeResult.instructions === "string"
        ? upstream.client.initializeResult.instructions
        : undefined,
      timeout: 0, // a call takes as long as its command lets it (its own --timeout, --max-time)
      listChanged: true,
      log: (line) => this.#log(`@${request.name}: ${line}`),
      ...gateway.serverHooks(),
    });
    gateway.onCatalog = (catalog) => session.core.setCatalog(counted(catalog));
    return session;
  }

  // A tool of the session's catalog that counts its calls and keeps the last error, for `sessions`. Its job is
  // `coded`: the JSON-RPC error the server answered (failures: "errors") is answered as such, as it would be without
  // the daemon.
  #counted(session: DaemonSession, tool: Tool): Tool {
    const run = tool.run;
    const counted: Tool = {
      name: tool.name,
      listing: tool.listing,
      source: tool.source,
      tasks: tool.tasks,
      run: async (args, ctx) => {
        session.calls++;
        this.#touch(session);
        try {
          const result = await run(args, ctx);
          if (isObject(result) && result.isError === true) {
            session.lastError = `${tool.name}: ${brief(JSON.stringify(result.content))}`;
          }
          return result;
        } catch (error) {
          session.lastError = `${tool.name}: ${errorMessage(error)}`;
          throw error;
        } finally {
          this.#touch(session);
        }
      },
    };
    counted.job = { ...tool.job!, run: counted.run, coded: true }; // the gateway's map: a task goes on as a task
    return counted;
  }

  #describe(session: DaemonSession): JsonObject {
    const [upstream] = session.gateway.upstreams();
    const client = upstream?.client;
    return {
      name: session.request.name,
      server: redact(session.request.target), // what `sessions` prints and a CI log keeps: no URL query, no userinfo
      era: client?.era ?? null,
      protocolVersion: client?.protocolVersion ?? null,
      uptimeMs: Date.now() - session.started,
      calls: session.calls,
      connections: session.sockets.size,
      lastError: upstream?.down && upstream.down !== "starting" ? upstream.down : session.lastError ?? null,
    };
  }

  // Used now: its idle timer starts again, and ends it after --idle without a use and without a connection.
  // One timer a session, armed once: a use only notes its time (a timer made and cleared for each of thousands of
  // calls cost a batch more than its calls), and the timer, when it fires, waits out what is left.
  #touch(session: DaemonSession): void {
    session.lastUsed = Date.now();
    if (session.timer !== undefined) return;
    const idle = session.request.idle ?? DAEMON_IDLE_MS;
    const check = () => {
      const left = session.lastUsed + idle - Date.now();
      if (session.sockets.size > 0 || left > 0) {
        session.timer = setTimeout(check, Math.max(left, 1_000));
        (session.timer as { unref?: () => void }).unref?.();
      } else void this.#close(session.request.name, `idle for ${idle} ms`);
    };
    session.timer = setTimeout(check, idle);
    (session.timer as { unref?: () => void }).unref?.();
  }

  async #close(name: string, why: string): Promise<void> {
    const session = this.#sessions.get(name);
    if (!session) return;
    this.#sessions.delete(name);
    clearTimeout(session.timer);
    // Each connection is closed first: a call in flight through it ends with the session (exit 3 for a command),
    // not with a tool error its server never made. Then the server is stopped.
    for (const socket of session.sockets) socket.destroy();
    await session.gateway.close();
    this.#log(`session "${name}" closed: ${why}`);
    if (this.#sessions.size === 0 && this.#opening.size === 0) this.#lingerFor(DAEMON_LINGER_MS);
  }

  #lingerFor(ms: number): void {
    clearTimeout(this.#linger);
    this.#linger = setTimeout(() => {
      if (this.#sessions.size === 0 && this.#opening.size === 0) void this.stop();
    }, ms);
  }

  /** Closes every session (no server is left), then says the daemon may end. */
  async stop(): Promise<void> {
    await Promise.all([...this.#sessions.keys()].map((name) => this.#close(name, "the daemon stopped")));
    clearTimeout(this.#linger);
    this.#end();
  }
}

// Two secrets compared in a time that does not tell how much of them matched.
function sameSecret(a: string, b: string): boolean {
  if (a.length !== b.length || b.length === 0) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * `daemon run`: becomes the daemon, unless one is running already (two commands racing to start one end with
 * one: the lock file is made by one of them, and the second finds the first listening).
 */
async function runDaemon(env: Record<string, string | undefined>, json: boolean): Promise<number> {
  const paths = daemonPaths(env);
  await privateDirectory(paths.dir);
  const sink = await appendingSink(paths.log);
  const log = (line: string, fields?: Record<string, unknown>) =>
    logLine(json ? jsonLogSink(sink) : sink, line, { pid: sys.pid(), ...fields });
  const release = await holdLock(`${paths.dir}/daemon.lock`);
  let listener: { close(): Promise<void> } | undefined;
  let daemon: SessionDaemon | undefined;
  try {
    const live = await connectLocal(paths.socket).then((socket) => (socket.destroy(), true), () => false);
    if (live) return 0; // another one won
    const token = randomWord(32);
    await privateFile(paths.token, token + "\n");
    daemon = new SessionDaemon(token, paths.socket, log);
    const own = daemon;
    listener = await listenLocal(paths.socket, (socket) => void own.connection(socket));
  } finally {
    await release();
  }
  log(`daemon listening on ${paths.socket}`);
  const unwire = onStopSignals(() => void daemon.stop());
  await daemon.ended;
  unwire();
  await listener.close();
  // The token file goes with us, unless a daemon started since has written its own.
  if ((await readPrivateFile(paths.token)).trim() === daemon.token) await privateFile(paths.token, undefined);
  log("daemon stopped");
  return 0;
}

// === 16. Output ==============================================================
// What the client commands print, as pure functions of what the server sent.
// On a terminal every text a server chose passes through `visible` (via
// `terminalSafe`): its escape sequences are shown, never acted on.

// C0 but newline and tab, DEL, C1: what a terminal acts on (ESC starts CSI/OSC, BEL ends OSC, a bare CR rewinds).
// deno-lint-ignore no-control-regex
const CONTROL_CHARACTERS = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

/**
 * Text made safe for a terminal: C0 controls (but newline and tab) and DEL as
 * caret notation (`^[`, `^G`, `^M`, `^?`), C1 controls as `\x9b`; the rest exact.
 * @internal
 */
export function visible(text: string): string {
  return text.replace(CONTROL_CHARACTERS, (ch) => {
    const code = ch.charCodeAt(0);
    if (code < 0x20) return "^" + String.fromCharCode(code + 0x40);
    if (code === 0x7f) return "^?";
    return "\\x" + code.toString(16);
  });
}

// DEL and C1 inside JSON text (JSON.stringify leaves them raw; C0 it escapes already).
const RAW_IN_JSON = /[\x7f-\x9f]/g;

/**
 * JSON text with DEL and C1 characters written as \u escapes: the same JSON value, exact, but nothing a
 * terminal acts on (they can only stand inside strings).
 */
function jsonVisible(text: string): string {
  return text.replace(RAW_IN_JSON, (ch) => "\\u00" + ch.charCodeAt(0).toString(16));
}

/**
 * A sink that writes as `sink` does, except on a terminal: there every write is
 * shown through {@linkcode visible} (bytes are decoded as UTF-8 first), or, for
 * JSON output (`json`), escaped to the same JSON value.
 * @internal
 */
function terminalSafe(sink: OutputSink, json = false): OutputSink {
  const show = json ? jsonVisible : visible;
  const decoder = new TextDecoder();
  let terminal: boolean | undefined; // asked at the first write: on Bun the answer costs start-up time
  return {
    get isTTY() {
      return sink.isTTY;
    },
    get columns() {
      return sink.columns;
    },
    native: sink.native,
    write: (chunk, callback) => {
      if (!(terminal ??= sink.isTTY === true)) return sink.write(chunk, callback);
      return sink.write(show(typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true })), callback);
    },
    once: (event, listener) => sink.once?.(event, listener),
    on: (event, listener) => sink.on?.(event, listener),
    drained: async () => await sink.drained?.(),
    control: (text) => void (sink.control ? sink.control(text) : sink.write(text)),
    ...("entry" in sink ? { entry: (sink as JsonLogSink).entry } : {}), // --log-format json: entries pass as they are
  };
}

/** How output is shaped for where it goes. */
interface RenderOptions {
  /** Output is a terminal: binary items become one-line summaries. */
  terminal?: boolean;
  /** Lines are cut to this many columns (a terminal's width). */
  width?: number;
}

/** What `call` prints for a CallToolResult: stdout text, and stderr text for isError. @internal */
export function renderCallResult(result: JsonObject, options: RenderOptions = {}): { stdout: string; stderr: string } {
  const content = Array.isArray(result.content) ? result.content : [];
  let out = "";
  let hasText = false;
  const binaries: string[] = [];
  for (const item of content) {
    if (isObject(item) && item.type === "text" && typeof item.text === "string") {
      out += item.text + "\n";
      hasText = true;
      continue;
    }
    const data = binaryData(item);
    if (data !== undefined) binaries.push(data);
    const line = options.terminal && data !== undefined
      ? summarizeBinary(item as JsonObject, data)
      : JSON.stringify(item);
    out += line + "\n";
  }
  // Structured content that only repeats a binary item (a tool returning its image twice) is not printed again.
  if (!hasText && result.structuredContent !== undefined) {
    const structured = JSON.stringify(result.structuredContent);
    if (!binaries.some((data) => data.length > 0 && structured.includes(data))) out = structured + "\n" + out;
  }
  return result.isError === true ? { stdout: "", stderr: out } : { stdout: out, stderr: "" };
}

// The base64 data of an image, audio or blob resource item.
function binaryData(item: unknown): string | undefined {
  if (!isObject(item)) return undefined;
  if ((item.type === "image" || item.type === "audio") && typeof item.data === "string") return item.data;
  if (item.type === "resource" && isObject(item.resource) && typeof item.resource.blob === "string") {
    return item.resource.blob;
  }
  return undefined;
}

/** The bytes of a result's binary item (image, audio or blob resource), or undefined for other items. */
function binaryBytes(item: unknown): Uint8Array | undefined {
  const data = binaryData(item);
  return data === undefined ? undefined : base64ToBytes(data);
}

// "[image image/png, 26.7 KB]": a binary item for a terminal.
function summarizeBinary(item: JsonObject, data: string): string {
  const resource = isObject(item.resource) ? item.resource : undefined;
  const mimeType = resource?.mimeType ?? item.mimeType;
  const size = formatBytes(Math.floor(trimEnd(data, "=").length * 3 / 4));
  return `[${[item.type, resource?.uri, mimeType].filter((part) => typeof part === "string").join(" ")}, ${size}]`;
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

// One line, cut to `width` columns when given.
function fitLine(line: string, width?: number): string {
  return width !== undefined && width > 1 && line.length > width ? line.slice(0, width - 1) + "…" : line;
}

/** A JSON Schema's type for people: `string`, `integer[]`, `"a"|"b"`, `number|null`. */
function describeSchemaType(schema: unknown): string {
  if (!isObject(schema)) return "any";
  if (Array.isArray(schema.enum)) return schema.enum.map((value) => JSON.stringify(value)).join("|");
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  const variants = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(variants)) return variants.map(describeSchemaType).join("|");
  const types = Array.isArray(schema.type) ? schema.type : schema.type === undefined ? [] : [schema.type];
  if (types.length === 0) return "any";
  return types.map((type) => {
    if (type !== "array") return String(type);
    const items = describeSchemaType(schema.items);
    return items.includes("|") ? `(${items})[]` : `${items}[]`;
  }).join("|");
}

// "city*: string, days: integer" from an inputSchema.
function describeArguments(inputSchema: unknown): string {
  const properties = isObject(inputSchema) && isObject(inputSchema.properties) ? inputSchema.properties : {};
  const required = isObject(inputSchema) && Array.isArray(inputSchema.required) ? inputSchema.required : [];
  return Object.entries(properties)
    .map(([name, schema]) => `${name}${required.includes(name) ? "*" : ""}: ${describeSchemaType(schema)}`)
    .join(", ");
}

function firstLine(text: unknown): string {
  return typeof text === "string" ? text.trim().split("\n")[0] : "";
}

// Columns two spaces apart, each but the last padded to line up; on a terminal at most 40 wide, a longer
// cell cut, so the table stays a table.
function renderRows(rows: string[][], options: RenderOptions): string {
  const cap = options.width === undefined ? Infinity : 40;
  const widths = rows[0]?.map((_, i) => Math.min(cap, Math.max(...rows.map((row) => row[i].length)))) ?? [];
  const last = widths.length - 1;
  const cut = (cell: string, width: number) => cell.length > width ? cell.slice(0, width - 1) + "…" : cell;
  return rows.map((row) => {
    // A column empty in every row takes no room.
    const cells = row.map((cell, i) => i < last ? cut(cell, widths[i]).padEnd(widths[i]) : cell)
      .filter((_, i) => widths[i] > 0);
    const line = cells.join("  ").trimEnd();
    return fitLine(line, options.width) + "\n";
  }).join("");
}

/** One line per tool: its name, its arguments (`city*: string`; * = required) and the first line of its description. @internal */
export function renderToolList(tools: JsonObject[], options: RenderOptions = {}): string {
  return renderRows(
    tools.map((tool) => [String(tool.name), describeArguments(tool.inputSchema), firstLine(tool.description)]),
    options,
  );
}

/** One tool in full: title, description, each argument with its type and description, output schema, annotations. @internal */
export function renderToolDetail(tool: JsonObject): string {
  const lines = [typeof tool.title === "string" ? `${tool.name} — ${tool.title}` : String(tool.name)];
  if (typeof tool.description === "string" && tool.description.trim()) lines.push(tool.description.trim());
  const fields = schemaFields(tool.inputSchema, "  ");
  lines.push("", fields.length ? "arguments (* = required):" : "arguments: none", ...fields);
  if (tool.outputSchema !== undefined) {
    const output = schemaFields(tool.outputSchema, "  ");
    lines.push(
      output.length ? "output (* = always there):" : `output: ${describeSchemaType(tool.outputSchema)}`,
      ...output,
    );
  }
  if (isObject(tool.annotations)) {
    const hints = Object.entries(tool.annotations)
      .map(([key, value]) => value === true ? key : `${key}=${JSON.stringify(value)}`);
    if (hints.length) lines.push(`annotations: ${hints.join(", ")}`);
  }
  return lines.join("\n") + "\n";
}

// The fields of an object schema, one line each (name*, type, description, default), the fields of a nested
// object or of an array's objects indented below their parent, at most 4 levels deep.
function schemaFields(schema: unknown, indent: string, depth = 0): string[] {
  const properties = isObject(schema) && isObject(schema.properties) ? Object.entries(schema.properties) : [];
  const required = isObject(schema) && Array.isArray(schema.required) ? schema.required : [];
  const width = Math.max(0, ...properties.map(([name]) => name.length + 1));
  const lines: string[] = [];
  for (const [name, property] of properties) {
    const about = isObject(property) ? property : {};
    const notes = [describeSchemaType(property), firstLine(about.description)];
    if (about.default !== undefined) notes.push(`default ${JSON.stringify(about.default)}`);
    const label = `${name}${required.includes(name) ? "*" : ""}`.padEnd(width);
    lines.push(`${indent}${label}  ${notes.filter(Boolean).join("  ")}`);
    const inner = isObject(about.items) ? about.items : about;
    if (depth < 3 && isObject(inner.properties)) lines.push(...schemaFields(inner, indent + "  ", depth + 1));
  }
  return lines;
}

/** One line per resource or template: its URI (or template), then its name and description. */
function renderResourceList(
  resources: JsonObject[],
  templates: JsonObject[],
  options: RenderOptions = {},
): string {
  const rows = [
    ...resources.map((item) => [String(item.uri), item]),
    ...templates.map((item) => [String(item.uriTemplate), item]),
  ] as [string, JsonObject][];
  const width = Math.min(60, Math.max(0, ...rows.map(([key]) => key.length)));
  return rows.map(([key, item]) => {
    const description = typeof item.description === "string" ? item.description.trim().split("\n")[0] : "";
    const label = [item.title ?? item.name, description].filter(Boolean).join(" — ");
    return fitLine(label ? `${key.padEnd(width)}  ${label}` : key, options.width) + "\n";
  }).join("");
}

/** One line per prompt: its name, its arguments (* = required) and the first line of its description. */
// `skills`: a skill a line, its name and the first line of its description; its URI too when names collide.
function renderSkillList(skills: JsonObject[], options: RenderOptions = {}): string {
  const nameOf = (entry: JsonObject) =>
    isObject(entry.frontmatter) && typeof entry.frontmatter.name === "string"
      ? entry.frontmatter.name
      : String(entry.uri);
  const names = skills.map(nameOf);
  return renderRows(
    skills.map((entry, i) => {
      const shared = names.indexOf(names[i]) !== names.lastIndexOf(names[i]);
      const description = isObject(entry.frontmatter) ? entry.frontmatter.description : undefined;
      return [shared ? `${names[i]} (${entry.uri})` : names[i], firstLine(description)];
    }),
    options,
  );
}

function renderPromptList(prompts: JsonObject[], options: RenderOptions = {}): string {
  return renderRows(
    prompts.map((prompt) => [
      String(prompt.name),
      Array.isArray(prompt.arguments)
        ? prompt.arguments.filter(isObject).map((arg) => `${arg.name}${arg.required ? "*" : ""}`).join(", ")
        : "",
      firstLine(prompt.description),
    ]),
    options,
  );
}

/** A resource's contents: text as it is, binary as raw bytes. */
function renderResourceContents(result: JsonObject): Uint8Array[] {
  const parts: Uint8Array[] = [];
  for (const item of Array.isArray(result.contents) ? result.contents : []) {
    if (!isObject(item)) continue;
    if (typeof item.text === "string") {
      parts.push(encoder.encode(item.text.endsWith("\n") || item.text === "" ? item.text : item.text + "\n"));
    } else if (typeof item.blob === "string") {
      parts.push(base64ToBytes(item.blob));
    }
  }
  return parts;
}

/** A prompt's messages: "[role] text" lines, other content as JSON after the role. */
function renderPromptMessages(result: JsonObject): string {
  const messages = Array.isArray(result.messages) ? result.messages : [];
  return messages.map((message: JsonObject) => {
    const content = isObject(message.content) ? message.content : {};
    const body = content.type === "text" && typeof content.text === "string" ? content.text : JSON.stringify(content);
    return `[${message.role}] ${body}\n`;
  }).join("");
}

/** The initialize result, for people. @internal */
export function renderInfo(result: JsonObject, how: { era?: string; transport?: string } = {}): string {
  const info = isObject(result.serverInfo) ? result.serverInfo : {};
  const capabilities = isObject(result.capabilities) ? result.capabilities : {};
  const era = how.era === "modern" ? "stateless (server/discover)" : how.era ? "legacy (initialize handshake)" : "";
  const over = how.transport === "sse"
    ? "HTTP+SSE (2024-11-05)"
    : how.transport === "http"
    ? "Streamable HTTP"
    : how.transport;
  const lines = [
    `protocol:      ${result.protocolVersion}${era ? `, ${era}` : ""}${over ? `, over ${over}` : ""}`,
    `server:        ${info.name ?? "?"} ${info.version ?? ""}`.trimEnd(),
  ];
  if (typeof info.title === "string") lines.push(`title:         ${info.title}`);
  const described = Object.entries(capabilities).map(([name, value]) => {
    const flags = isObject(value) ? Object.entries(value).filter(([, on]) => on === true).map(([flag]) => flag) : [];
    return flags.length ? `${name} (${flags.join(", ")})` : name;
  });
  lines.push(`capabilities:  ${described.join(", ") || "(none)"}`);
  if (typeof result.instructions === "string" && result.instructions) {
    lines.push(`instructions:  ${result.instructions.replace(/\n/g, "\n               ")}`);
  }
  return lines.join("\n") + "\n";
}

// --- 16b. Logs as JSON lines (--log-format json) ---

/** The access line of a request served: info, or warn when it ended in an error (a JSON-RPC one, a tool's). */
function accessLine(sink: JsonLogSink): (msg: string, fields: Record<string, unknown>) => void {
  return (msg, fields) => sink.entry(fields["error.type"] === undefined ? "info" : "warn", msg, fields);
}

/** A tool's error text (an isError result) on stderr: as it is, or one warn entry with --log-format json. */
function toolErrorText(sink: OutputSink, text: string): void {
  const entry = (sink as Partial<JsonLogSink>).entry;
  if (entry) entry("warn", text.endsWith("\n") ? text.slice(0, -1) : text, { source: "tool" });
  else sink.write(text);
}

/**
 * Writes one line of ours: `mcp: MSG` in text, one JSON entry with --log-format json, whatever MSG holds (a peer's
 * newline inside it cannot make a second entry). A warning or a telemetry failure is level warn unless told.
 * Every `mcp: …` line of the program goes through here (a test scans the file).
 */
function logLine(sink: OutputSink, msg: string, fields?: Record<string, unknown>, level?: LogLevelName): void {
  const entry = (sink as Partial<JsonLogSink>).entry;
  if (entry) return entry(level ?? (/^(warning: |telemetry: )/.test(msg) ? "warn" : "info"), msg, fields);
  sink.write(`mcp: ${msg}\n`);
}

type LogLevelName = "debug" | "info" | "warn" | "error";

/** A sink whose lines are JSON log entries, and which takes entries with fields directly. */
interface JsonLogSink extends OutputSink {
  entry(level: LogLevelName, msg: string, fields?: Record<string, unknown>): void;
}

/**
 * `--log-format json`: every line written to `stderr` becomes one JSON object — `time` (RFC 3339, UTC, ms), `level`,
 * `msg` (the line without `mcp: `) and fields — and `entry()` writes one with fields of its own. A line's level is
 * read from its text: a warning, a telemetry failure, a --trace frame (debug), else info.
 */
function jsonLogSink(stderr: OutputSink, now: () => Date = () => new Date()): JsonLogSink {
  let partial = "";
  const decoder = new TextDecoder();
  const entry = (level: LogLevelName, msg: string, fields: Record<string, unknown> = {}) => {
    const defined = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
    stderr.write(JSON.stringify({ time: now().toISOString(), level, msg, ...defined }) + "\n");
  };
  // A line written as text: our own lines come through logLine() as entries, so a line here is another's text
  // (a tool's error, a server's stderr, a --trace frame) and is never read as ours: it names no field.
  const line = (text: string) => {
    if (text !== "") entry(/^[<>] /.test(text) ? "debug" : "info", text);
  };
  return {
    native: stderr.native,
    get isTTY() {
      return false; // JSON lines are for a pipeline: no terminal rendering
    },
    write(chunk, callback) {
      const lines = (partial + (typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true })))
        .split("\n");
      partial = lines.pop()!;
      for (const text of lines) line(text);
      callback?.();
      return true;
    },
    once: (event, listener) => stderr.once?.(event, listener),
    on: (event, listener) => stderr.on?.(event, listener),
    drained: async () => {
      if (partial) line(partial);
      partial = "";
      await stderr.drained?.();
    },
    entry,
  };
}

// === 17. CLI =================================================================
// argv in, exit code out. Parses flags, loads plugins, wires the process's
// streams and signals, and keeps plugins' output off the protocol stream.

// --- 17a. The process's I/O, flags ---

/** The process pieces the CLI uses; tests may pass their own. */
export interface CliIo {
  /** Default: the process's stdin (on Deno, `serve` reads it natively). */
  stdin?: Readable;
  stdout: OutputSink;
  stderr: OutputSink;
  /** Tests shorten the stop ladder of the stdio servers a command starts (ConnectOptions.stopStepMs). @internal */
  stopStepMs?: number;
  /** Tests see and end the waits a command makes (ConnectOptions.wait). @internal */
  wait?: Wait;
}

// The process's own stdout and stderr, each made on first use: an untouched one costs nothing.
function processIo(): CliIo & { drained(): Promise<void> } {
  const stdio = processStdio();
  let stdout: OutputSink | undefined;
  let stderr: OutputSink | undefined;
  return {
    get stdout() {
      return stdout ??= stdio.stdout;
    },
    get stderr() {
      return stderr ??= stdio.stderr;
    },
    async drained() {
      await Promise.all([stdout?.drained?.(), stderr?.drained?.()]);
    },
  };
}

// The OTEL_* environment, read once: the command's telemetry, or undefined (off: nothing of it exists).
function commandTelemetry(
  env: Record<string, string | undefined>,
  log: (line: string) => void,
  serviceName?: string,
): Telemetry | undefined {
  return telemetryWith(telemetryFromEnv(env, log, serviceName), log);
}

function positiveInteger(
  flag: string,
  text: string | undefined,
  fallback: number,
  { allowZero = false }: { allowZero?: boolean } = {},
): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < (allowZero ? 0 : 1)) {
    throw new UsageError(`${flag} needs a ${allowZero ? "non-negative" : "positive"} integer, got "${text}"`);
  }
  return value;
}

/** A command's flags: `--name value`, `--name=value`, booleans, `-x` short forms, repeatable ones. */
type FlagSpecs = Record<
  string,
  { readonly type: "string" | "boolean"; readonly short?: string; readonly multiple?: boolean }
>;

/** What parseFlags reads for `specs`, typed from them: a string, a list of strings, or true, per flag given. */
type FlagValues<S extends FlagSpecs> = {
  [K in keyof S]?: S[K] extends { multiple: true } ? string[] : S[K]["type"] extends "string" ? string : boolean;
};

/** What a command's runner is given: its flags, its positionals, and its arguments as typed (for hints). */
interface Parsed<S extends FlagSpecs> {
  values: FlagValues<S>;
  positionals: string[];
  args: string[];
}

/**
 * Parses flags and positionals, strictly: an unknown flag is a usage error. Our
 * own rather than node:util's parseArgs, which costs ~9 ms of start-up on Bun.
 * A lone `-` is a positional (stdin), and `--` ends the flags.
 */
function parseFlags<const S extends FlagSpecs>(
  args: string[],
  specs: S,
  command: string,
): { values: FlagValues<S>; positionals: string[] } {
  const values: Record<string, string | boolean | string[] | undefined> = {};
  const positionals: string[] = [];
  const fail = (message: string) => new UsageError(`${message} (see: mcp.ts help ${command})`);
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--") {
      positionals.push(...args.slice(i + 1));
      break;
    }
    if (!arg.startsWith("-") || arg === "-") {
      positionals.push(arg);
      continue;
    }
    const long = arg.startsWith("--");
    const equals = long ? arg.indexOf("=") : -1;
    const key = long ? arg.slice(2, equals < 0 ? undefined : equals) : arg.slice(1);
    const name = long ? key : Object.keys(specs).find((candidate) => specs[candidate].short === key);
    const spec = name === undefined ? undefined : specs[name];
    if (!spec || !name) throw fail(`Unknown option '${arg.split("=")[0]}'`);
    let value: string | boolean = true;
    if (spec.type === "string") {
      if (equals >= 0) value = arg.slice(equals + 1);
      else if (i + 1 < args.length) value = args[++i];
      else throw fail(`Option '${arg}' needs a value`);
    } else if (equals >= 0) {
      throw fail(`Option '--${key}' takes no value`);
    }
    if (spec.multiple) values[name] = [...(values[name] as string[] | undefined ?? []), String(value)];
    else values[name] = value;
  }
  return { values: values as FlagValues<S>, positionals };
}

// SIGINT and SIGTERM both stop a server command: one handler for the two; returns what unwires them.
function onStopSignals(handler: () => void): () => void {
  const stopSigint = sys.onSignal("SIGINT", handler);
  const stopSigterm = sys.onSignal("SIGTERM", handler);
  return () => {
    stopSigint();
    stopSigterm();
  };
}

/**
 * The end of a server command: SIGINT or SIGTERM from now on, or the timer that ends a server whose plugins left
 * timers behind, kill what executable tools left and exit. The output is out by now: exiting cannot cut it off.
 */
function exitSoon(): void {
  const end = () => {
    killExecutables();
    sys.exit();
  };
  onStopSignals(end);
  setTimeout(end, EXEC_KILL_GRACE_MS + 500).unref?.();
}

// --- 17b. serve, and the flags of every HTTP listener ---

// The flags of every HTTP listener (serve, gateway, proxy, replay); serve and gateway add the OAuth and session ones.
const LISTEN_FLAGS = {
  http: { type: "string" },
  path: { type: "string" },
  token: { type: "string" },
  "allow-origin": { type: "string", multiple: true },
  "allow-unauthenticated": { type: "boolean" },
} as const;

const HTTP_FLAGS = {
  ...LISTEN_FLAGS,
  "auth-issuer": { type: "string" },
  "auth-scopes": { type: "string" },
  "auth-audience": { type: "string" },
  "auth-dpop": { type: "string" },
  "auth-dpop-nonce": { type: "boolean" },
  stateless: { type: "boolean" },
  "session-ttl": { type: "string" },
  "max-sessions": { type: "string" },
  metrics: { type: "boolean" },
  "metrics-token": { type: "string" },
  state: { type: "string" },
  "heartbeat-ttl": { type: "string" },
} as const;

// How to run this file again: for hints that show a command to copy.
function selfCommand(): string {
  const path = decodeURIComponent(new URL(import.meta.url).pathname);
  const cwd = sys.cwd();
  const script = path.startsWith(cwd + "/") ? path.slice(cwd.length + 1) : path;
  const runtime = deno ? "deno run -A" : bun ? "bun" : "node";
  // Started through npx (the runtime lives in npm's _npx cache): say it the same way, it may be on no PATH.
  const npx = /[\\/]_npx[\\/]/.test(proc().execPath ?? "") ? `npx -y ${deno ? "deno" : bun ? "bun" : "node"}` : "";
  return `${npx ? npx + runtime.replace(/^\S+/, "") : runtime} ${script}`;
}

const HELP_SERVE = `Usage: mcp.ts serve [DIR | FILE] [options]

Serves the plugins in DIR (default ./tools), or the one plugin FILE, as an MCP server on stdin/stdout
(newline-delimited JSON-RPC; Content-Length framing is recognised too): modules (*.ts, *.js,
*.mjs) exporting tools, resources and prompts, and executable files in any language.

Options:
  --name NAME              serverInfo.name (default "mcp.ts")
  --server-version V       serverInfo.version (default ${VERSION})
  --instructions TEXT      instructions sent in the initialize result
  --timeout MS             per request running plugin code (default ${DEFAULT_TOOL_TIMEOUT_MS}; 0 = none); a module
                           tool that blocks the server past it (+2 s) ends the process with a line naming it
  --max-line-bytes N       longest message accepted (default ${DEFAULT_MAX_LINE_BYTES})
  --page-size N            items per list page (default ${DEFAULT_PAGE_SIZE})
  --watch                  reload DIR when its files change; tell the client the lists changed
  -v, --verbose            the stack of plugin code that throws, on stderr
  --trace                  every frame in (<) and out (>) on stderr (and what --verbose shows)
  -h, --help               this text

Skills (folders with a SKILL.md; the io.modelcontextprotocol/skills extension): DIR/skills is served
when there is one, with each file as a skill:// resource.
  --skills DIR2            serve the skills under DIR2 instead (e.g. ~/.claude/skills)

Tasks (tools with execution.taskSupport "optional" or "required"; the io.modelcontextprotocol/tasks extension):
  --task-grace MS          a call still running after MS becomes a task (default ${DEFAULT_TASK_GRACE_MS})
  --task-ttl MS            a task is kept MS from its creation (default ${DEFAULT_TASK_TTL_MS}); then cancelled, forgotten
  --task-poll-interval MS  the poll interval tasks announce (default ${DEFAULT_TASK_POLL_MS})
  --max-tasks N            tasks kept at most (default ${DEFAULT_MAX_TASKS}); beyond, optional tools answer at once
  --instance-id NAME       task ids start "NAME." so a load balancer routes tasks/* by Mcp-Name (with --http,
                           default a random one per process)

Over HTTP (Streamable HTTP; both protocol eras on one endpoint):
  --http [HOST:]PORT       listen on HOST (default 127.0.0.1) and PORT (0 picks one); says
                           "mcp: serving http://HOST:PORT/mcp" on stderr when ready
  --path PATH              the MCP endpoint (default /mcp); GET /health answers {"status":"ok"}
  --token TOKEN            require Authorization: Bearer TOKEN (or set MCP_TS_TOKEN)
  --allow-origin ORIGIN    a browser origin allowed besides our own (repeatable), with CORS
  --auth-issuer URL        an OAuth protected resource: accept JWT access tokens of this issuer
                           (checked with its JWKS); serves /.well-known/oauth-protected-resource
  --auth-audience URL      what the tokens' aud must name (default: this server's URL)
  --auth-scopes "A B"      scopes every request needs (advertised too): 403 insufficient_scope
  --auth-dpop MODE         allowed (default: a DPoP-bound token needs its proof, others go as Bearer) or
                           required (DPoP-bound tokens only; the metadata says so)
  --auth-dpop-nonce        DPoP proofs must carry a nonce this server gives (DPoP-Nonce, new every 5 minutes)
  --allow-unauthenticated  allow binding beyond loopback without --token or --auth-issuer
  --stateless              no legacy sessions (GET and DELETE are 405)
  --session-ttl MS         an idle legacy session ends after MS (default ${DEFAULT_SESSION_TTL_MS})
  --max-sessions N         at most N legacy sessions (default ${DEFAULT_MAX_SESSIONS}; with --auth-issuer at most
                           ${MAX_SESSIONS_PER_SUBJECT} per token subject): the least recently used idle one is closed
  --metrics                GET /metrics: each request's and legacy session's duration (histograms, the Prometheus
                           text format), behind the same checks as the endpoint
  --metrics-token TOKEN    a bearer token good for /metrics alone (or MCP_TS_METRICS_TOKEN)
  --state URL              where replicas share legacy sessions, tasks and quotas: memory: (default) or
                           redis://[user:pass@]host:port[/db] (rediss:// for TLS; or set MCP_TS_STATE)
  --heartbeat-ttl MS       with --state: a replica silent MS is gone, its running tasks failed (default ${DEFAULT_HEARTBEAT_TTL_MS})
  MCP_TS_STATE_KEY         signs input-required requestState: instances sharing it continue
                           each other's calls (default: a random key per process)
`;

const SERVE_FLAGS = {
  name: { type: "string" },
  "server-version": { type: "string" },
  instructions: { type: "string" },
  timeout: { type: "string" },
  "max-line-bytes": { type: "string" },
  "page-size": { type: "string" },
  trace: { type: "boolean" },
  verbose: { type: "boolean", short: "v" },
  watch: { type: "boolean" },
  "task-grace": { type: "string" },
  "task-ttl": { type: "string" },
  "task-poll-interval": { type: "string" },
  "max-tasks": { type: "string" },
  "instance-id": { type: "string" },
  skills: { type: "string" },
  ...HTTP_FLAGS,
} as const;

// --task-* and --instance-id, checked. Over HTTP task ids name their instance, random per process by default.
function taskOptions(values: FlagValues<typeof SERVE_FLAGS>, overHttp: boolean): ServerOptions {
  const instanceId = instanceIdOf(values["instance-id"], overHttp);
  return {
    taskGrace: positiveInteger("--task-grace", values["task-grace"], DEFAULT_TASK_GRACE_MS, { allowZero: true }),
    taskTtl: positiveInteger("--task-ttl", values["task-ttl"], DEFAULT_TASK_TTL_MS),
    taskPollInterval: positiveInteger("--task-poll-interval", values["task-poll-interval"], DEFAULT_TASK_POLL_MS),
    maxTasks: positiveInteger("--max-tasks", values["max-tasks"], DEFAULT_MAX_TASKS),
    instanceId,
  };
}

// --instance-id NAME, checked; over HTTP a random one per process when not given.
function instanceIdOf(given: string | undefined, overHttp: boolean): string | undefined {
  const instanceId = given ?? (overHttp ? randomWord(6) : undefined);
  if (instanceId !== undefined && !/^[A-Za-z0-9_-]{1,64}$/.test(instanceId)) {
    throw new UsageError(`--instance-id takes 1-64 of A-Z a-z 0-9 _ -, got "${instanceId}"`);
  }
  return instanceId;
}

/**
 * `--log-format json`: a module plugin's console output as log lines of its call (`source: "plugin"`, the tool, the
 * console method's level, the call's trace ids), each line told apart by the call it runs in (AsyncLocalStorage);
 * an executable tool's stderr lines the same way.
 */
async function pluginConsoleAsJson(log: JsonLogSink): Promise<{
  wrap(tool: string, run: (args: unknown, ctx: ToolContext) => unknown): (args: unknown, ctx: ToolContext) => unknown;
  restore(): void;
}> {
  const [{ AsyncLocalStorage }, { format }] = await Promise.all([import("node:async_hooks"), import("node:util")]);
  const calls = new AsyncLocalStorage<{ tool: string; traceparent?: string }>();
  const levels = { debug: "debug", log: "info", info: "info", warn: "warn", error: "error" } as const;
  const methods = console as unknown as Record<string, (...data: unknown[]) => void>;
  const saved = Object.fromEntries(Object.keys(levels).map((method) => [method, methods[method]]));
  for (const [method, level] of Object.entries(levels)) {
    methods[method] = (...data: unknown[]) => {
      const call = calls.getStore();
      log.entry(level, format(...data), { source: "plugin", tool: call?.tool, ...traceFields(call?.traceparent) });
    };
  }
  // An executable's stderr lines: MCP log levels as the four of a log line.
  executableLines = (tool, level, text, traceparent) => {
    const as = level === "debug"
      ? "debug"
      : level === "info" || level === "notice"
      ? "info"
      : level === "warning"
      ? "warn"
      : "error";
    log.entry(as, text, { source: "plugin", tool, ...traceFields(traceparent) });
  };
  return {
    wrap: (tool, run) => (args, ctx) => calls.run({ tool, traceparent: ctx.traceparent }, () => run(args, ctx)),
    restore: () => {
      Object.assign(console, saved);
      executableLines = undefined;
    },
  };
}

async function runServe({ values, positionals }: Parsed<typeof SERVE_FLAGS>, io: CliIo): Promise<number> {
  const target = positionals[0] ?? "./tools";
  const timeout = positiveInteger("--timeout", values.timeout, DEFAULT_TOOL_TIMEOUT_MS, { allowZero: true });
  const maxLineBytes = positiveInteger(
    "--max-line-bytes",
    values["max-line-bytes"],
    DEFAULT_MAX_LINE_BYTES,
  );
  const pageSize = positiveInteger("--page-size", values["page-size"], DEFAULT_PAGE_SIZE);
  const verbose = values.verbose === true || values.trace === true;
  const log = (line: string, fields?: Record<string, unknown>) => logLine(io.stderr, line, fields);
  const env = sys.env();
  // Without --http the metrics flags are still checked: --metrics-token alone is a mistake on every transport.
  const http = values.http === undefined ? void metricsOptions(values, env) : httpServeOptions(values, env);
  const tracer = commandTelemetry(env, log, values.name);
  const jsonLog = "entry" in io.stderr ? io.stderr as JsonLogSink : undefined;

  // `serve DIR`, or `serve DIR/add.ts` for that one file.
  const kind = await (await files()).kind(target);
  if (kind === undefined) throw new UsageError(`Cannot serve "${target}": no such directory`);
  let dir = target;
  let only: string | undefined;
  if (kind === "file") {
    dir = dirnameOf(target);
    only = basenameOf(target);
    if (!isPluginFile(only)) {
      throw new UsageError(`Cannot serve "${target}": not a plugin file; give its folder: mcp.ts serve ${dir}`);
    }
  }

  const skillsRoot = await skillsRootOf(values.skills, kind === "directory" ? dir : undefined);
  // One stderr line per skipped skill, at load and at each reload.
  const withSkills = async (catalog: Catalog): Promise<Catalog> => {
    if (!skillsRoot) return catalog;
    const { skills, skipped } = await loadSkills(skillsRoot);
    for (const { path, why } of skipped) log(`warning: skipped skill ${joinPath(skillsRoot, path)}: ${why}`);
    return { ...catalog, skills };
  };
  // Plugins run in this process: keep their console output off the protocol
  // stream, and their process.exit and stray errors from ending it.
  const redirected = guardProcessStdout(io);
  const pluginLines = jsonLog ? await pluginConsoleAsJson(jsonLog) : undefined;
  const unguard = guardProcess((error) =>
    log(`a plugin threw outside any request: ${verbose ? describeStack(error) : errorMessage(error)}`)
  );
  const copies: string[] = []; // fresh copies made by reloads, newest last
  let parts = new Map<string, Catalog>(); // what each file served at the last (re)load
  // --watch: reloads DIR on change and hands each new catalog to `apply`. One reload
  // at a time; changes during a reload cause one more. Returns a function that stops.
  const watchCatalog = (apply: (catalog: Catalog) => void) => {
    let generation = 0;
    let reloading: Promise<void> | undefined;
    let again = false;
    const reload = async () => {
      if (reloading) {
        again = true;
        return;
      }
      do {
        again = false;
        reloading = (async () => {
          const next = await loadCatalog(dir, {
            only,
            fresh: ++generation,
            previous: parts,
            maxOutputBytes: maxLineBytes,
          });
          if (next.copy) copies.push(next.copy);
          for (const failure of next.errors) {
            logLine(io.stderr, `Cannot load ${failure.file}: ${failure.message}`, undefined, "error");
          }
          try {
            apply(await withSkills(next.catalog));
            parts = next.parts;
            log(`reloaded "${target}": ${describeCatalog(next.catalog)}`);
          } catch (error) {
            log(`Cannot reload "${target}": ${errorMessage(error)}; still serving the previous set`);
          }
          // Calls in flight may still use the copy before: keep one, remove older ones.
          while (copies.length > 2) await removeCopy(copies.shift()!);
        })().catch((error) => log(errorMessage(error)));
        await reloading;
        reloading = undefined;
      } while (again);
    };
    const stops = [watchDirectory(dir, () => void reload())];
    if (skillsRoot) stops.push(watchDirectory(skillsRoot, () => void reload(), { recursive: true }));
    return Promise.all(stops).then((stopAll) => () => stopAll.forEach((stop) => stop()));
  };
  let stopDog = noop;
  try {
    const loaded = await loadCatalog(dir, { only, maxOutputBytes: maxLineBytes });
    loaded.catalog = await withSkills(loaded.catalog);
    parts = loaded.parts;
    for (const failure of loaded.errors) {
      logLine(io.stderr, `Cannot load ${failure.file}: ${failure.message}`, undefined, "error");
    }
    const duplicate = findCatalogDuplicate(loaded.catalog);
    if (duplicate) {
      log(`Cannot serve "${target}": ${duplicate}; rename one of them`);
      return 1;
    }
    // A module tool stuck in a synchronous loop ends the process within --timeout + a margin (see watchdog).
    const dog = watchdog((timeout || DEFAULT_TOOL_TIMEOUT_MS) + WATCHDOG_MARGIN_MS);
    stopDog = () => dog.stop();
    const watched = (catalog: Catalog): Catalog => ({
      ...catalog,
      tools: catalog.tools.map((tool) =>
        MODULE_EXTENSIONS.has(extensionOf(tool.source))
          ? { ...tool, run: dog.wrap(tool.name, pluginLines?.wrap(tool.name, tool.run) ?? tool.run) }
          : tool
      ),
    });
    const { tools, resources, templates, prompts } = watched(loaded.catalog);
    const served = describeCatalog(loaded.catalog);
    if (tools.length + resources.length + templates.length + prompts.length === 0) {
      log(`nothing to serve in "${target}" yet; serving empty lists`);
    }
    const watch = values.watch === true;
    const serverOptions: ServerOptions = {
      tools,
      resources: [...resources, ...templates],
      prompts,
      failed: loaded.errors,
      skills: loaded.catalog.skills,
      name: values.name,
      version: values["server-version"],
      instructions: values.instructions,
      timeout,
      pageSize,
      listChanged: watch,
      stateKey: env.MCP_TS_STATE_KEY,
      tracer,
      accessLog: jsonLog && accessLine(jsonLog),
      ...taskOptions(values, http !== undefined),
      onPluginError: verbose ? (error, label) => log(`"${label}" threw: ${describeStack(error)}`) : undefined,
      log, // what the server says of itself: a client that did not read and lost progress and log lines
      onTaskLog: values.trace
        ? (taskId, level, data) =>
          log(`task ${taskId} [${level}] ${typeof data === "string" ? data : JSON.stringify(data)}`)
        : undefined,
    };
    if (http) {
      const watching = watch ? (apply: (catalog: Catalog) => void) => watchCatalog(apply) : undefined;
      await serveHttp({
        http,
        serverOptions,
        maxLineBytes,
        io,
        trace: values.trace === true,
        watched,
        watching,
        dog,
        log,
      });
      await tracer?.flush(); // what is pending goes out, 2 s at most
      exitSoon();
      return 0;
    }
    const handle = serve({
      ...serverOptions,
      input: io.stdin,
      output: redirected.protocol,
      maxLineBytes,
      onTrace: values.trace ? (line) => void io.stderr.write(line + "\n") : undefined,
      log: values.trace ? (line) => void io.stderr.write(line + "\n") : log,
    });
    if (!io.stdin) {
      // A person at a terminal gets told what this is. Asked a moment later, and
      // only if no client has spoken by then: knowing costs ~10-20 ms on Bun.
      setTimeout(async () => {
        if (handle.heard || !(await sys.stdinIsTerminal())) return;
        log(
          `serving ${served} from "${target}" on stdin/stdout: MCP clients write JSON-RPC lines here; ` +
            `end with Ctrl-D or Ctrl-C. Try it from another terminal: mcp.ts list "${selfCommand()} serve ${target}"`,
        );
      }, 100).unref?.();
    }
    const stopWatching = watch ? await watchCatalog((catalog) => handle.server.setCatalog(watched(catalog))) : noop;
    (setTimeout(() => dog.start(), 50) as { unref?: () => void }).unref?.(); // off the start-up path
    const unwire = onStopSignals(() => void handle.shutdown());
    await handle.done;
    dog.stop();
    stopWatching();
    unwire();
    // Stray plugin timers must not keep a finished server alive; executable tools get their SIGTERM-to-SIGKILL
    // grace first, and a signal in the meantime ends it at once, tools' groups and all.
    io.stdin?.destroy?.();
    await tracer?.flush();
    exitSoon();
    return 0;
  } finally {
    stopDog(); // however serving ended: on Deno its worker would keep the process alive
    await Promise.all(copies.map(removeCopy));
    unguard();
    pluginLines?.restore(); // first: what it saved are the guard's stand-ins
    redirected.restore();
  }
}

// Skills (SEP-2640): --skills DIR2, else DIR/skills when there is one (`dir`: none for serve FILE).
async function skillsRootOf(given: string | undefined, dir: string | undefined): Promise<string | undefined> {
  if (given !== undefined && (await (await files()).kind(given)) !== "directory") {
    throw new UsageError(`Cannot serve skills from "${given}": no such directory`);
  }
  if (given !== undefined || dir === undefined) return given;
  const inside = joinPath(dir, "skills");
  return (await (await files()).kind(inside)) === "directory" ? inside : undefined;
}

// serve --http: the handler on its listener until SIGINT/SIGTERM, then calls in flight get the grace period, the
// streams are closed and the listener with them.
async function serveHttp({ http, serverOptions, maxLineBytes, io, trace, watched, watching, dog, log }: {
  http: NonNullable<ReturnType<typeof httpServeOptions>>;
  serverOptions: ServerOptions;
  maxLineBytes: number;
  io: CliIo;
  trace: boolean;
  watched: (catalog: Catalog) => Catalog;
  watching: ((apply: (catalog: Catalog) => void) => Promise<() => void>) | undefined;
  dog: { start(): void; stop(): void };
  log: (line: string, fields?: Record<string, unknown>) => void;
}): Promise<void> {
  const handler = createHandler({
    ...serverOptions,
    ...http.handler,
    maxBodyBytes: maxLineBytes,
    onTrace: trace ? (line) => void io.stderr.write(line + "\n") : undefined,
    onStateStore: (line) => log(line),
  });
  const listener = await listenFor(handler, http.listen);
  audienceFromListener(http.handler.auth, listener, http.handler.path);
  const stopWatching = watching ? await watching((catalog) => handler.core.setCatalog(watched(catalog))) : noop;
  await new Promise<void>((resolve) => {
    const stop = async () => {
      unwire();
      const closed = listener.close();
      const deadline = Date.now() + SHUTDOWN_GRACE_MS;
      while (handler.pending > 0 && Date.now() < deadline) await new Promise((wait) => setTimeout(wait, 20));
      handler.close();
      await Promise.race([closed, new Promise((wait) => setTimeout(wait, 500))]);
      await listener.close({ force: true });
      resolve();
    };
    const unwire = onStopSignals(() => void stop());
    const url = listenerUrl(listener, http.handler.path);
    log(`serving ${url}`, { url });
    setTimeout(() => dog.start(), 50); // off the start-up path
  });
  dog.stop();
  stopWatching();
}

// "3 tools, 1 resource, 2 prompts": what a catalog serves, for people.
function describeCatalog(catalog: Catalog): string {
  const count = (n: number, one: string) => `${n} ${one}${n === 1 ? "" : "s"}`;
  const { tools, resources, templates, prompts } = catalog;
  const parts = [count(tools.length, "tool")];
  if (resources.length + templates.length > 0) parts.push(count(resources.length + templates.length, "resource"));
  if (prompts.length > 0) parts.push(count(prompts.length, "prompt"));
  return parts.join(", ");
}

// `serve --http [HOST:]PORT` and its companions, checked: where to listen and the handler's options.
function httpServeOptions(
  values: FlagValues<typeof HTTP_FLAGS>,
  env: Record<string, string | undefined>,
): { listen: { hostname: string; port: number }; handler: HandlerOptions & { path: string } } {
  const address = String(values.http);
  const match = /^(?:(\[[0-9a-fA-F:.]+\]|[^:]+):)?(\d+)$/.exec(address);
  if (!match || Number(match[2]) > 65535) {
    throw new UsageError(`--http takes [HOST:]PORT, e.g. 8080 or 127.0.0.1:0, got "${address}"`);
  }
  const hostname = (match[1] ?? "127.0.0.1").replace(/^\[(.*)\]$/, "$1");
  const path = (values.path) ?? "/mcp";
  if (!path.startsWith("/")) throw new UsageError(`--path must start with "/", got "${path}"`);
  let auth: ResourceServerOptions | undefined;
  if (values["auth-issuer"] !== undefined) {
    const issuer = String(values["auth-issuer"]);
    try {
      new URL(issuer);
    } catch {
      throw new UsageError(`--auth-issuer takes the authorization server's issuer URL, got "${issuer}"`);
    }
    auth = { issuer };
    if (values["auth-audience"] !== undefined) auth.audience = String(values["auth-audience"]);
    const scopes = String(values["auth-scopes"] ?? "").split(/[\s,]+/).filter(Boolean);
    if (scopes.length) auth.scopes = scopes;
    const dpop = values["auth-dpop"];
    if (dpop !== undefined && dpop !== "allowed" && dpop !== "required") {
      throw new UsageError(`--auth-dpop takes allowed or required, got "${dpop}"`);
    }
    if (dpop !== undefined) auth.dpop = dpop;
    if (values["auth-dpop-nonce"] === true) auth.dpopNonce = true;
  } else if (
    values["auth-audience"] !== undefined || values["auth-scopes"] !== undefined ||
    values["auth-dpop"] !== undefined || values["auth-dpop-nonce"] !== undefined
  ) {
    throw new UsageError("--auth-audience, --auth-scopes and --auth-dpop* go with --auth-issuer URL");
  }
  const token = (values.token) ?? env.MCP_TS_TOKEN;
  if (token === "") throw new UsageError("--token needs a value (or unset MCP_TS_TOKEN)");
  if (token !== undefined && auth) throw new UsageError("--token and --auth-issuer exclude each other: choose one");
  const loopback = /^(localhost|127(\.\d+){3}|::1)$/i.test(hostname);
  if (auth && !loopback && auth.audience === undefined) {
    throw new UsageError(
      `Cannot check tokens' audience on ${hostname}: give --auth-audience URL, the URL clients reach this server at ` +
        `(e.g. https://mcp.example.com${path})`,
    );
  }
  if (!loopback && token === undefined && !auth && values["allow-unauthenticated"] !== true) {
    throw new UsageError(
      `Cannot serve on ${hostname} without a credential check: anyone who can reach it could run your tools; ` +
        "add --token TOKEN (or MCP_TS_TOKEN), or --allow-unauthenticated",
    );
  }
  const wildcard = hostname === "0.0.0.0" || hostname === "::";
  const bound = hostname.includes(":") ? `[${hostname}]` : hostname;
  const sessionTtl = values["session-ttl"] === undefined
    ? undefined
    : positiveInteger("--session-ttl", values["session-ttl"], DEFAULT_SESSION_TTL_MS);
  return {
    listen: { hostname, port: Number(match[2]) },
    handler: {
      path,
      token,
      auth,
      allowOrigins: values["allow-origin"],
      // DNS rebinding: on loopback the Host must name us; bound to all interfaces, the credential check guards.
      allowedHosts: wildcard ? ["*"] : [...LOOPBACK_HOSTS, bound.toLowerCase()],
      stateless: values.stateless === true,
      sessionTtl,
      maxSessions: values["max-sessions"] === undefined
        ? undefined
        : positiveInteger("--max-sessions", values["max-sessions"], DEFAULT_MAX_SESSIONS),
      ...stateOptions(values, env),
      ...metricsOptions(values, env),
    },
  };
}

// --state URL (or MCP_TS_STATE) and --heartbeat-ttl, checked (the URL's credentials never shown).
function stateOptions(values: FlagValues<typeof HTTP_FLAGS>, env: Record<string, string | undefined>): HandlerOptions {
  const state = values.state ?? env.MCP_TS_STATE;
  const url = parseStateUrl(state);
  if (!url && values["heartbeat-ttl"] !== undefined) {
    throw new UsageError("--heartbeat-ttl goes with --state redis://…");
  }
  if (!url) return {};
  return {
    state,
    heartbeatTtl: positiveInteger("--heartbeat-ttl", values["heartbeat-ttl"], DEFAULT_HEARTBEAT_TTL_MS),
  };
}

// --metrics and --metrics-token (or MCP_TS_METRICS_TOKEN), checked.
function metricsOptions(
  values: FlagValues<typeof HTTP_FLAGS>,
  env: Record<string, string | undefined>,
): HandlerOptions {
  if (values["metrics-token"] !== undefined && values.metrics !== true) {
    throw new UsageError("--metrics-token goes with --metrics");
  }
  // The variable is read only with --metrics: set in a shell, it stops no server that serves none.
  const metricsToken = values.metrics === true ? values["metrics-token"] ?? env.MCP_TS_METRICS_TOKEN : undefined;
  if (metricsToken === "") throw new UsageError("--metrics-token needs a value (or unset MCP_TS_METRICS_TOKEN)");
  return { metrics: values.metrics === true, metricsToken };
}

// listenHttp for a command: a busy or forbidden address is the user's to change (exit 2), said so.
async function listenFor(
  handler: (request: Request) => Promise<Response>,
  listen: { hostname: string; port: number },
): Promise<HttpListener> {
  try {
    return await listenHttp(handler, listen);
  } catch (error) {
    const text = `${(error as { code?: string }).code ?? ""} ${errorMessage(error)}`;
    const where = listen.hostname.includes(":")
      ? `[${listen.hostname}]:${listen.port}`
      : `${listen.hostname}:${listen.port}`;
    if (/EADDRINUSE|AddrInUse|address already in use/i.test(text)) {
      throw new UsageError(
        `Cannot listen on ${where}: the address is in use (another server?); choose another port, or ` +
          `--http ${where.replace(/:\d+$/, ":0")} for any free one`,
      );
    }
    if (/EACCES|PermissionDenied|permission denied/i.test(text)) {
      throw new UsageError(`Cannot listen on ${where}: not permitted (ports below 1024 need privileges)`);
    }
    throw error;
  }
}

// http://HOST:PORT/path of a listener (an IPv6 host in brackets), as `serving …` lines print it.
function listenerUrl(listener: HttpListener, path: string, hostname = listener.hostname): string {
  return `http://${
    hostname.includes(":") && !hostname.startsWith("[") ? `[${hostname}]` : hostname
  }:${listener.port}${path}`;
}

// A protected server on loopback without --auth-audience: the audience is this address, under any of its
// local names (a token names one of them), never what a request's Host says.
function audienceFromListener(auth: ResourceServerOptions | undefined, listener: HttpListener, path: string): void {
  if (!auth || auth.audience !== undefined) return;
  const urls = [listener.hostname, ...LOOPBACK_HOSTS].map((name) => listenerUrl(listener, path, name));
  auth.audience = [...new Set(urls)];
}

// An error with its stack, for --verbose.
function describeStack(error: unknown): string {
  const stack = error instanceof Error && typeof error.stack === "string" ? error.stack : "";
  return stack.includes(errorMessage(error)) ? stack : [errorMessage(error), stack].filter(Boolean).join("\n");
}

// --- 17c. The client's help, flags and ARGS; what it answers the server ---

// Every client command's help: what the options are (the usage line above it is the command's own).
const CLIENT_OPTIONS_HELP = `
<server> is ONE argument: an http:// or https:// URL (Streamable HTTP, either protocol era; the
2024-11-05 HTTP+SSE transport too), a command line in quotes ("deno run -A mcp.ts serve ./tools",
split with shell quoting and run without a shell), or a server name from --config FILE, else the
nearest .mcp.json (.cursor/mcp.json, .vscode/mcp.json), ~/.claude.json or Claude Desktop's config
(see: mcp.ts servers). \${VAR} and \${VAR:-default} in a config entry come from the environment.

Options:
  --timeout MS             idle timeout per request (default ${DEFAULT_REQUEST_TIMEOUT_MS}), restarted by progress
  --max-time MS            hard cap per request (default ${DEFAULT_MAX_TIME_MS})
  -H, --header "N: V"      an HTTP header on every request to an HTTP server (repeatable; never printed)
  -e, --env KEY=VALUE      add to a stdio server's environment (repeatable); it inherits ours
  --cwd DIR                a stdio server's working directory
  --config FILE            an MCP config file ({"mcpServers": {NAME: {command, args, env} | {url, headers}}})
  --protocol P             auto (default: server/discover first, else initialize), legacy, or a
                           version: ${[...MODERN_PROTOCOL_VERSIONS, ...SUPPORTED_PROTOCOL_VERSIONS].join(", ")}
  --json                   machine-readable JSON output
  -v, --verbose            stream the server's stderr, its log messages and progress to stderr
  --trace                  every message sent (>) and received (<) on stderr; HTTP request lines
                           and statuses too (no header values)
  --record FILE            write the session to FILE as a cassette (NDJSON; for mcp.ts replay)
  --retries N              retry start-up failures N times (a refused connection too), backing off
                           from ${RETRY_BASE_MS} ms (and a call the server died under, if the tool is idempotentHint)
  --max-line-bytes N       longest message accepted from the server (default ${DEFAULT_CLIENT_MAX_LINE_BYTES})

What the server may ask of the client (declared to it only when given):
  --root DIR               a root directory (repeatable): answers roots/list
  --elicit ACTION          answer forms with accept (their defaults, and --elicit-json over
                           them), decline or cancel; on a terminal without it, you are asked
  --elicit-json JSON       the values to accept a form with
  --sample-command "CMD"   answers sampling/createMessage: CMD gets the request's params as one JSON
                           line on stdin and prints a CreateMessageResult (or plain text)

Authorization, for an HTTP server that answers 401 (OAuth; tokens kept in MCP_TS_CREDENTIALS, else
~/.config/mcp.ts/credentials.json, 0600): a browser flow runs for login, --login, or on a terminal;
in a script a command that needs one exits 4 and names the mcp.ts login to run.
  --login                  a browser flow may run here (the URL is printed; $BROWSER opens it)
  --no-browser             only print the authorization URL
  --client-id ID           a client registered beforehand (else CIMD or dynamic registration)
  --client-secret SECRET   its secret (or MCP_TS_CLIENT_SECRET)
  --client-key FILE        a PEM private key: private_key_jwt instead of a secret
  --client-metadata-url U  a Client ID Metadata Document, where the server supports it
  --scope "A B"            the scopes to ask for (default: what the server asks)
  --callback-port N        the loopback port of the redirect (default ${DEFAULT_CALLBACK_PORT})
  --login-timeout MS       how long a login waits for the browser's redirect (default 300000)
  --grant client_credentials  tokens for the client itself, no browser (CI); with --client-id
  --grant jwt-bearer --assertion VALUE|@FILE   a JWT the platform issued (a Kubernetes service-account
                           token, a CI OIDC token; @FILE read again at every token request); --client-id if any
  --grant token-exchange --id-token VALUE|@FILE --idp-token-endpoint URL --idp-client-id ID
                           [--idp-client-secret S]: the identity provider's ID token exchanged for an ID-JAG,
                           then a token with it, as --client-id/--client-secret (enterprise-managed)
  --dpop, --no-dpop        require DPoP-bound tokens, or never ask for them (default: when the authorization
                           server offers DPoP with ES256)

Errors are one "mcp: ..." line on stderr; with --json, one JSON object {"error", "exitCode", ...}.
Exit codes: 0 success, 1 the tool reported an error, 2 usage error or unknown tool,
3 the server failed (could not start or be reached, died, error answer, timeout, asked for
input we cannot give), 4 the server wants authorization, 130 interrupted.
A list the server does not offer (no tools, resources or prompts) prints nothing, says so on
stderr and exits 0; reading a resource or prompt it does not offer is exit 2.
`;

const HELP_CALL = `Usage: mcp.ts call <server> <tool> [ARGS] [options]

Connects to the server (or starts it), calls one tool, prints the result, stops it.
ARGS: a JSON object ('{"a":1}'), - (JSON from stdin), @file.json, or key=value pairs
typed by the tool's inputSchema (zip=007 stays "007" when zip is a string). Default {}.
In pairs, key=@FILE takes FILE's text as the value (key=@@x is the text "@x"), key:=JSON a
JSON value as it is (tags:='["a","b"]', limit:=5).
Prints each text item on its own line; structured content (when there is no text, and
unless it only repeats an image) and other content as one JSON line each; on a terminal,
images and audio as one summary line ([image image/png, 26.7 KB]). --json prints the whole
result. -o FILE writes the result's one binary item (an image, say) to FILE.
--meta JSON adds that object to the request's _meta.
A call the server makes a task (a long job; the io.modelcontextprotocol/tasks extension, or
the 2025-11-25 experimental tasks) is followed to its end: polled, its questions answered as
a call's, printed as a call's result. On a terminal stderr shows "task ID: STATUS: message";
-v prints each change. A failed or cancelled task is exit 3; Ctrl-C and --max-time cancel it.
--detach (an HTTP server only) prints the task's id and exits 0 at once; follow it later
with mcp.ts task <server> result ID. A 2025-11-25 task may belong to the session that made it
(a warning says so): only a server that binds tasks to an OAuth subject finds it again.
${CLIENT_OPTIONS_HELP}`;

const HELP_SKILLS = `Usage: mcp.ts skills <server> [--json] [options]

Lists the server's skills (the io.modelcontextprotocol/skills extension: folders of instructions,
a SKILL.md and its files), one per line: its name and the first line of its description (its
URI too when two share a name). Reads no skill file. --json prints the entries as one array.
A server without skills is exit 2.
${CLIENT_OPTIONS_HELP}`;

const HELP_SKILL = `Usage: mcp.ts skill <server> NAME|URI [FILE] [--out DIR [--force]] [options]

Prints a skill's SKILL.md, or FILE of it (a path in the skill, as its manifest lists it), after
checking it against the skill's entry: its size, then its digest, then (SKILL.md) its
frontmatter. A file that fails a check is exit 3 naming the check, and nothing is printed.
NAME is looked up in skills/list (an unknown or ambiguous one is exit 2); a skill:// URI goes
through skills/get. --out DIR reads and checks every file of the skill, then writes them to
DIR/NAME at once (exit 2 when that exists, unless --force); a skill over --max-bytes N (default
64 MiB) or 512 files is exit 3 before a byte is read, and two names for one file are refused.
A "dynamic" skill has no manifest:
its SKILL.md is printed unverified (said on stderr), and --out is refused.
${CLIENT_OPTIONS_HELP}`;

const HELP_TASK = `Usage: mcp.ts task <server> get|result|cancel ID [options]

A task a call became (mcp.ts call --detach prints its id), by its id:
  get      prints STATUS[: statusMessage] (--json: the tasks/get result)
  result   (or wait) waits for its end, answering its questions, and prints it as call does
  cancel   asks the server to cancel it
An id the server does not know (unknown, expired, or another user's) is exit 2.
${CLIENT_OPTIONS_HELP}`;

const HELP_REQUEST = `Usage: mcp.ts request <server> <method> [JSON] [options]

Sends one request of any method with JSON as its params (default {}) and prints the result
as one JSON line: for trying methods and debugging servers (e.g. request <server> tools/list,
request <server> completion/complete '{"ref":…,"argument":…}'). A JSON-RPC error is exit 3
with its code and message. The session's own envelope (2026-07-28 _meta, progress token) is
added as for any request.
${CLIENT_OPTIONS_HELP}`;

const HELP_LIST = `Usage: mcp.ts list <server> [TOOL] [options]

Prints every tool of the server (all pages), one per line: its name, its arguments
(city*: string, days: integer; * = required) and the first line of its description, cut to
the terminal's width on a terminal. --json prints {"tools": [...]}.
With TOOL: that tool's description, arguments and output schema; --json prints its entry.
${CLIENT_OPTIONS_HELP}`;

const HELP_INFO = `Usage: mcp.ts info <server> [options]

Prints the protocol version and era (stateless 2026-07-28, or the legacy initialize
handshake), the transport, serverInfo, capabilities and instructions. --json prints the
initialize (or server/discover) result with "era" and "transport" added.
${CLIENT_OPTIONS_HELP}`;

const HELP_PING = `Usage: mcp.ts ping <server> [options]

Prints the round-trip time of one ping, in ms. --json prints {"ms": N}.
${CLIENT_OPTIONS_HELP}`;

const HELP_BATCH = `Usage: mcp.ts batch <server> [--concurrency N] [options]

Keeps one server for many calls. Each stdin line is {"tool": NAME, "arguments": {...}};
each gets one stdout line, in input order: the CallToolResult as JSON, or {"error": "..."}.
--concurrency N runs N calls at once (default 1); the output order does not change.
Exit code: the worst line's, 3 (server failed) > 2 (bad input line) > 1 (isError) > 0.
${CLIENT_OPTIONS_HELP}`;

const HELP_RESOURCES = `Usage: mcp.ts resources <server> [options]

Prints every resource (all pages), then every resource template: its URI, name and description.
--json prints {"resources": [...], "resourceTemplates": [...]}.
${CLIENT_OPTIONS_HELP}`;

const HELP_READ = `Usage: mcp.ts read <server> <uri> [options]

Prints a resource's contents: text as it is, binary contents as raw bytes when stdout is
not a terminal (on one it refuses: exit 2). -o FILE writes the contents to FILE. --json prints
the ReadResourceResult, binary contents in base64.
${CLIENT_OPTIONS_HELP}`;

const HELP_PROMPTS = `Usage: mcp.ts prompts <server> [options]

Prints every prompt (all pages): its name, its arguments (* = required) and description.
--json prints {"prompts": [...]}.
${CLIENT_OPTIONS_HELP}`;

const HELP_PROMPT = `Usage: mcp.ts prompt <server> <name> [ARGS] [options]

Prints a prompt's messages, one "[role] text" line each (other content as JSON).
ARGS as for call (a JSON object of strings, -, @file.json, or key=value pairs).
--json prints the GetPromptResult.
${CLIENT_OPTIONS_HELP}`;

const HELP_LOGIN = `Usage: mcp.ts login <server> [options]

Authorizes mcp.ts with an HTTP server's OAuth (a browser flow, or --grant client_credentials) and
keeps the token, so that later commands (and scripts) use it. Runs a fresh flow even when a token
is kept. A server that does not ask for authorization: says so, exit 0.
${CLIENT_OPTIONS_HELP}`;

const CLIENT_FLAGS = {
  header: { type: "string", short: "H", multiple: true },
  root: { type: "string", multiple: true },
  elicit: { type: "string" },
  "elicit-json": { type: "string" },
  "sample-command": { type: "string" },
  record: { type: "string" },
  "client-id": { type: "string" },
  "client-secret": { type: "string" },
  "client-key": { type: "string" },
  "client-metadata-url": { type: "string" },
  scope: { type: "string" },
  "callback-port": { type: "string" },
  "login-timeout": { type: "string" },
  "no-browser": { type: "boolean" },
  assertion: { type: "string" },
  "id-token": { type: "string" },
  "idp-token-endpoint": { type: "string" },
  "idp-client-id": { type: "string" },
  "idp-client-secret": { type: "string" },
  dpop: { type: "boolean" },
  "no-dpop": { type: "boolean" },
  login: { type: "boolean" },
  grant: { type: "string" },
  timeout: { type: "string" },
  "max-time": { type: "string" },
  env: { type: "string", short: "e", multiple: true },
  cwd: { type: "string" },
  config: { type: "string" },
  json: { type: "boolean" },
  verbose: { type: "boolean", short: "v" },
  trace: { type: "boolean" },
  retries: { type: "string" },
  protocol: { type: "string" },
  "max-line-bytes": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

// Each client command takes the flags above and its own: any other is a usage error naming it.
const CALL_FLAGS = {
  ...CLIENT_FLAGS,
  output: { type: "string", short: "o" },
  meta: { type: "string" },
  detach: { type: "boolean" },
} as const;
const READ_FLAGS = { ...CLIENT_FLAGS, output: { type: "string", short: "o" } } as const;
const BATCH_FLAGS = { ...CLIENT_FLAGS, concurrency: { type: "string" } } as const;
const SKILL_FLAGS = {
  ...CLIENT_FLAGS,
  out: { type: "string" },
  force: { type: "boolean" },
  "max-bytes": { type: "string" },
} as const;
// Every flag of a client command: where a server command line left unquoted ends.
const ANY_CLIENT_FLAG: FlagSpecs = { ...CALL_FLAGS, ...BATCH_FLAGS, ...SKILL_FLAGS };

// ARGS of `call` as given, checked before anything is spawned: a JSON object, or key=value pairs typed later by
// the schema (`json`: the key:=<json> ones, taken as they are).
type CallArgs = { kind: "object"; value: JsonObject } | { kind: "pairs"; pairs: string[]; json: JsonObject };

// A JSON object given on the command line (`what` names it in the usage error).
function jsonObjectArg(text: string, what: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`Cannot read ${what}: not JSON (${errorMessage(error)})`);
  }
  if (!isObject(value)) throw new UsageError(`Cannot use ${what}: a JSON object is needed, got ${jsonType(value)}`);
  return value;
}

async function readCallArgs(words: string[], io: CliIo): Promise<CallArgs> {
  if (words.length === 0) return { kind: "object", value: {} };
  const [first] = words;
  let text: string | undefined;
  let from = "";
  if (words.length === 1 && first === "-") {
    text = await readAll(io.stdin ?? proc().stdin);
    from = " from stdin";
  } else if (words.length === 1 && first.startsWith("@")) {
    try {
      const { readFile } = await import("node:fs/promises");
      text = await readFile(first.slice(1), "utf8");
    } catch (error) {
      throw new UsageError(`Cannot read ARGS from ${first}: ${errorMessage(error)}`);
    }
    from = ` from ${first}`;
  } else if (words.length === 1 && /^\s*[[{"\d-]/.test(first) && !/^[A-Za-z_][\w.-]*=/.test(first)) {
    text = first;
  }
  if (text !== undefined) {
    return { kind: "object", value: jsonObjectArg(text.trim() === "" ? "{}" : text, `ARGS${from}`) };
  }
  const pairs: string[] = [];
  const json: JsonObject = {};
  for (const word of words) {
    const equals = word.indexOf("=");
    if (equals <= 0) {
      throw new UsageError(
        `Cannot read ARGS ${JSON.stringify(word)}: give a JSON object, -, @file.json, or key=value pairs`,
      );
    }
    if (word[equals - 1] === ":" && equals > 1) {
      // key:=<json>: the value as JSON, whatever the schema says (mcpc's spelling).
      const key = word.slice(0, equals - 1);
      try {
        json[key] = JSON.parse(word.slice(equals + 1));
      } catch (error) {
        throw new UsageError(`Cannot read ${word}: the value after := is not JSON (${errorMessage(error)})`);
      }
    } else if (word.startsWith("@@", equals + 1)) {
      pairs.push(word.slice(0, equals + 1) + word.slice(equals + 2)); // key=@@x: the text "@x" (mcporter's escape)
    } else if (word[equals + 1] === "@" && word.length > equals + 2) {
      // key=@file: the file's text as the value (typed by the schema as any other).
      const file = word.slice(equals + 2);
      try {
        const { readFile } = await import("node:fs/promises");
        pairs.push(`${word.slice(0, equals)}=${await readFile(file, "utf8")}`);
      } catch (error) {
        throw new UsageError(`Cannot read ${word.slice(0, equals)}=@${file}: ${errorMessage(error)}`);
      }
    } else pairs.push(word);
  }
  return { kind: "pairs", pairs, json };
}

// --root DIR (repeatable) as the roots a client offers: file:// URIs, each named by its folder.
function rootsOf(values: { root?: string[] }): { uri: string; name: string }[] {
  return (values.root ?? []).map((dir) => {
    const path = resolvePath(dir);
    return { uri: fileUrl(path), name: basenameOf(trimEnd(path, "\\/")) || path };
  });
}

/**
 * What the client offers the server, from --root, --elicit/--elicit-json,
 * --sample-command (and a person at a terminal): the capabilities to declare
 * and the answers to give. Only what was given is declared.
 */
async function clientAnswers(
  values: FlagValues<typeof CLIENT_FLAGS>,
  io: CliIo,
): Promise<{ capabilities: JsonObject; onRequest: (method: string, params: JsonObject) => unknown }> {
  const capabilities: JsonObject = {};
  const roots = rootsOf(values);
  if (roots.length > 0) capabilities.roots = {};
  const elicit = values.elicit;
  if (elicit !== undefined && !["accept", "decline", "cancel"].includes(elicit)) {
    throw new UsageError(`--elicit takes accept, decline or cancel, got "${elicit}"`);
  }
  let given: JsonObject = {};
  if (values["elicit-json"] !== undefined) {
    if (elicit !== "accept") throw new UsageError("--elicit-json goes with --elicit accept");
    try {
      given = JSON.parse(values["elicit-json"]);
    } catch (error) {
      throw new UsageError(`Cannot read --elicit-json: not JSON (${errorMessage(error)})`);
    }
    if (!isObject(given)) throw new UsageError("Cannot use --elicit-json: a JSON object is needed");
  }
  // A person can answer a form when both ends of the terminal are theirs (asked only then: it costs on Bun).
  const interactive = elicit === undefined && io.stderr.isTTY === true && !io.stdin && (await sys.stdinIsTerminal());
  if (elicit !== undefined || interactive) capabilities.elicitation = {};
  const sampler = values["sample-command"];
  const sampleWords = sampler === undefined ? undefined : splitCommand(sampler);
  if (sampleWords !== undefined) {
    if (sampleWords.length === 0) throw new UsageError("--sample-command needs a command");
    capabilities.sampling = {};
  }
  const refuse = (method: string, hint: string) => {
    throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${method} (mcp.ts answers it when given ${hint})`);
  };
  return {
    capabilities,
    onRequest: async (method, params) => {
      switch (method) {
        case "roots/list":
          return roots.length > 0 ? { roots } : refuse(method, "--root DIR");
        case "elicitation/create":
          if (elicit !== undefined) {
            return answerElicitation(elicit, given, params, (line) => logLine(io.stderr, line));
          }
          return interactive ? await askElicitation(params) : refuse(method, "--elicit accept|decline|cancel");
        case "sampling/createMessage":
          return sampleWords ? await runSampleCommand(sampleWords, params) : refuse(method, '--sample-command "CMD"');
        default:
          throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${method}`);
      }
    },
  };
}

// --elicit: accept fills the form with its defaults and --elicit-json over them; a form that then
// does not fit the schema is declined (elicitation.mdx: the client should validate), and `say` tells why.
function answerElicitation(
  action: string,
  given: JsonObject,
  params: JsonObject,
  say: (line: string) => void = noop,
): JsonObject {
  if (action !== "accept") return { action };
  if (params.mode === "url") {
    say("declined a URL elicitation: --elicit accept cannot open it");
    return { action: "decline" }; // nothing here can open it
  }
  const schema = isObject(params.requestedSchema) ? params.requestedSchema : { type: "object" };
  const properties = isObject(schema.properties) ? schema.properties : {};
  const content: JsonObject = {};
  for (const [key, property] of Object.entries(properties)) {
    if (isObject(property) && property.default !== undefined) content[key] = property.default;
  }
  Object.assign(content, given);
  const problems = validate(schema, content);
  if (problems.length === 0) return { action: "accept", content };
  const required = Array.isArray(schema.required) ? schema.required.map(String) : [];
  const missing = required.filter((key) => content[key] === undefined);
  say(
    `declined the server's form (--elicit accept): ${
      missing.length
        ? `required field${missing.length > 1 ? "s" : ""} ${missing.join(", ")} ha${missing.length > 1 ? "ve" : "s"} ` +
          `no default`
        : problems.join("; ")
    }; give ${missing.length ? "them" : "valid values"} with --elicit-json '{"${missing[0] ?? "field"}": …}'`,
  );
  return { action: "decline" };
}

// A form asked field by field on the terminal. An empty answer takes the default; Ctrl-D cancels.
async function askElicitation(params: JsonObject): Promise<JsonObject> {
  const { createInterface } = await import("node:readline/promises");
  // One stream for the questions and what is said between them, so they come in order.
  const say = (text: string) => void proc().stderr.write(visible(text));
  const terminal = createInterface({ input: proc().stdin, output: proc().stderr });
  // One close listener for the whole form (one per question piled up past Node's listener limit).
  let closed = false;
  let waiting: ((answer: string | null) => void) | undefined;
  terminal.once("close", () => {
    closed = true;
    waiting?.(null);
  });
  const ask = (question: string) =>
    closed ? Promise.resolve(null) : new Promise<string | null>((resolve) => {
      waiting = resolve;
      terminal.question(visible(question)).then(resolve, () => resolve(null));
    });
  try {
    // own-line-ok: the interactive form speaks to the terminal itself (readline); say() makes the text visible.
    say(`mcp: the server asks: ${typeof params.message === "string" ? params.message : "(no message)"}\n`);
    if (params.mode === "url") {
      // own-line-ok: as above.
      say(`mcp: it asks you to open ${params.url}\n`);
      const answer = await ask("  opened and done? [y/N] ");
      return answer === null ? { action: "cancel" } : { action: /^y/i.test(answer) ? "accept" : "decline" };
    }
    const schema = isObject(params.requestedSchema) ? params.requestedSchema : {};
    const properties = isObject(schema.properties) ? schema.properties : {};
    const required = Array.isArray(schema.required) ? schema.required : [];
    const content: JsonObject = {};
    for (const [key, property] of Object.entries(properties)) {
      const field = isObject(property) ? property : {};
      const type = String(field.type ?? "string");
      const many = type === "array";
      const choices = choicesOf(many ? field.items : field);
      const format = typeof field.format === "string" && FORM_FORMATS[field.format] ? field.format : undefined;
      const hints = [
        choices
          ? (many ? "one or more, e.g. 1,3" : "a number or a value")
          : type === "boolean"
          ? "y/n"
          : format ?? type,
      ];
      if (required.includes(key)) hints.push("required");
      const shown = field.default === undefined ? "" : ` [${field.default}]`;
      const label = typeof field.title === "string" ? field.title : key;
      const about = typeof field.description === "string" ? ` — ${field.description}` : "";
      if (choices) say(choices.map((choice, i) => `    ${i + 1}) ${choice.label}`).join("\n") + "\n");
      for (;;) {
        const answer = await ask(`  ${label} (${hints.join(", ")})${about}${shown}: `);
        if (answer === null) return { action: "cancel" };
        const text = answer.trim();
        if (text === "") {
          if (field.default !== undefined) content[key] = field.default;
          else if (required.includes(key)) {
            say("  required: give a value\n");
            continue;
          }
          break;
        }
        // A choice by its number or its value; several, comma-separated, for a multi-select.
        const pick = (word: string): unknown => {
          const number = Number(word);
          if (Number.isInteger(number) && number >= 1 && number <= choices!.length) return choices![number - 1].value;
          return choices!.find((choice) => String(choice.value) === word || choice.label === word)?.value;
        };
        let value: unknown;
        if (choices) {
          const picked = (many ? text.split(",") : [text]).map((word) => pick(word.trim()));
          value = picked.includes(undefined) ? undefined : many ? picked : picked[0];
          if (value === undefined) {
            say(`  not one of the choices: give its number (1-${choices.length}) or its value\n`);
            continue;
          }
        } else {
          value = type === "boolean"
            ? /^(y|yes|true)$/i.test(text) ? true : /^(n|no|false)$/i.test(text) ? false : undefined
            : type === "number" || type === "integer"
            ? Number(text)
            : text;
          if (value === undefined || (typeof value === "number" && !Number.isFinite(value))) {
            say(`  not a ${type === "boolean" ? "yes or no" : type}\n`);
            continue;
          }
        }
        if (format && typeof value === "string" && !FORM_FORMATS[format].test(value)) {
          say(`  not a valid ${format}\n`);
          continue;
        }
        const problems = validate(field, value);
        if (problems.length > 0) {
          say(`  ${problems[0]}\n`);
          continue;
        }
        content[key] = value;
        break;
      }
    }
    const answer = await ask("  send it? [Y/n/c(ancel)] ");
    if (answer === null || /^c/i.test(answer)) return { action: "cancel" };
    return /^n/i.test(answer) ? { action: "decline" } : { action: "accept", content };
  } finally {
    terminal.close();
  }
}

// The string formats an elicitation form may ask for (elicitation.mdx), checked as a person types.
const FORM_FORMATS: Record<string, RegExp> = {
  email: /^[^\s@]+@[^\s@]+\.[^\s@]+$/,
  uri: /^[A-Za-z][A-Za-z0-9+.-]*:\S+$/,
  date: /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/,
  "date-time":
    /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt ]([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})$/,
};

// A field's choices, as elicitation forms spell them: enum (with enumNames), or oneOf/anyOf of titled consts.
function choicesOf(schema: unknown): { value: unknown; label: string }[] | undefined {
  if (!isObject(schema)) return undefined;
  if (Array.isArray(schema.enum)) {
    const names = Array.isArray(schema.enumNames) ? schema.enumNames : [];
    return schema.enum.map((value, i) => ({
      value,
      label: typeof names[i] === "string" && names[i] !== String(value) ? `${names[i]} (${value})` : String(value),
    }));
  }
  const variants = Array.isArray(schema.oneOf) ? schema.oneOf : Array.isArray(schema.anyOf) ? schema.anyOf : undefined;
  if (!variants?.every((variant) => isObject(variant) && variant.const !== undefined)) return undefined;
  return (variants as JsonObject[]).map((variant) => ({
    value: variant.const,
    label: typeof variant.title === "string" ? `${variant.title} (${variant.const})` : String(variant.const),
  }));
}

// --sample-command: the request's params as one JSON line on its stdin; its stdout a
// CreateMessageResult, or plain text taken as one assistant text message.
async function runSampleCommand(words: string[], params: JsonObject): Promise<JsonObject> {
  const out: Uint8Array[] = [];
  let errTail = "";
  const errDecoder = new TextDecoder();
  let finished!: (how: string) => void;
  const exited = new Promise<string>((resolve) => finished = resolve);
  let child: ChildHandle;
  try {
    child = await spawnChild(words[0], words.slice(1), { env: sys.env() as Record<string, string> }, {
      stdout: (chunk) => out.push(chunk),
      stderr: (chunk) => errTail = keepTail(errTail, errDecoder.decode(chunk, { stream: true }), 2048),
      exit: (code, signal) =>
        finished(code === 0 ? "" : code !== null ? `exited with code ${code}` : `ended on ${signal}`),
    });
  } catch (error) {
    throw new RpcError(ErrorCode.InternalError, `Cannot run the sample command "${words[0]}": ${errorMessage(error)}`);
  }
  child.write(JSON.stringify(params) + "\n");
  child.end();
  const failed = await exited;
  const text = new TextDecoder().decode(concatBytes(out, out.reduce((sum, chunk) => sum + chunk.length, 0))).trim();
  if (failed) {
    throw new RpcError(
      ErrorCode.InternalError,
      `the sample command ${failed}${errTail ? `: ${brief(errTail.trim())}` : ""}`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (isObject(parsed) && isObject(parsed.content)) {
    return { role: "assistant", model: basenameOf(words[0]), stopReason: "endTurn", ...parsed };
  }
  return { role: "assistant", content: { type: "text", text }, model: basenameOf(words[0]), stopReason: "endTurn" };
}

// --- 17d. The client commands ---

/**
 * --record FILE: the session as a cassette (CONTRACT "Proxy, recording and
 * replay"): a header line, then one line per message with its time and
 * direction. Messages only: no header values, no tokens.
 */
async function openRecording(file: string, server: string) {
  const { openSync, writeSync, closeSync } = await import("node:fs");
  let fd: number;
  try {
    fd = openSync(file, "w", 0o600);
  } catch (error) {
    throw new UsageError(`Cannot record to ${file}: ${errorMessage(error)}`);
  }
  const started = performance.now();
  // A URL's query and credentials may hold secrets: the cassette keeps its origin and path.
  const shown = /^https?:\/\//i.test(server)
    ? (() => {
      const url = new URL(server);
      return url.origin + url.pathname;
    })()
    : server;
  writeSync(fd, JSON.stringify({ mcpCassette: 1, server: shown, recorded: new Date().toISOString() }) + "\n");
  return {
    write: (direction: "send" | "recv", text: string) => {
      const t = Math.round((performance.now() - started) * 10) / 10;
      writeSync(fd, `{"t":${t},"dir":"${direction}","message":${text}}\n`);
    },
    close: () => closeSync(fd),
  };
}

async function readAll(stream: Readable): Promise<string> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === "string" ? encoder.encode(chunk) : chunk);
  return new TextDecoder().decode(concatBytes(chunks, chunks.reduce((sum, chunk) => sum + chunk.length, 0)));
}

/** Shows progress as one updating line on a terminal, or as lines with --verbose. */
function progressReporter(io: CliIo, verbose: boolean) {
  let tty: boolean | undefined; // asked on the first progress: on Bun the answer costs start-up time
  let shown = ""; // the progress line on the terminal now
  let lastTask = ""; // the task's state last shown
  // io.stderr is the command's one writer: the server's text in these lines is made visible there on a terminal.
  const control = (text: string) => void (io.stderr.control ? io.stderr.control(text) : io.stderr.write(text));
  // The line is ours, drawn in one write with its erase (two writes could be split by stdout's): the server's text in
  // it is made visible here.
  const draw = (line: string) => {
    shown = visible(line.slice(0, 200));
    control("\r\x1b[K" + shown);
  };
  // Runs `write` above the progress line: the line is cleared first and drawn again after.
  const above = (write: () => void) => {
    if (shown) control("\r\x1b[K");
    write();
    if (shown) control(shown);
  };
  return {
    update(params: JsonObject): void {
      tty ??= io.stderr.isTTY === true;
      const total = params.total === undefined ? "" : `/${params.total}`;
      const message = typeof params.message === "string" ? ` ${params.message}` : "";
      const line = `progress ${params.progress}${total}${message}`;
      if (tty) draw(line);
      else if (verbose) logLine(io.stderr, line);
    },
    /** A task's state: one updating line on a terminal; with -v a line per change. */
    task(task: JsonObject): void {
      const message = typeof task.statusMessage === "string" ? `: ${task.statusMessage}` : "";
      const line = `task ${task.taskId}: ${task.status}${message}`;
      if (line === lastTask) return;
      lastTask = line;
      tty ??= io.stderr.isTTY === true;
      if (verbose) this.note(line);
      if (tty) draw(line);
    },
    /** One line of ours (`mcp: MSG`, or a JSON entry), above the progress line. */
    note(msg: string, fields?: Record<string, unknown>): void {
      tty ??= io.stderr.isTTY === true;
      above(() => logLine(io.stderr, msg, fields));
    },
    /** Another's text as it is (a server's stderr, a --trace frame), above the progress line. */
    text(text: string): void {
      tty ??= io.stderr.isTTY === true;
      above(() => io.stderr.write(text.endsWith("\n") || !shown ? text : text + "\n"));
    },
    clear(): void {
      if (shown) control("\r\x1b[K");
      shown = "";
    },
    /** Clears the line and waits until stderr has taken it, before a result goes to stdout (another stream). */
    async settle(): Promise<void> {
      const drawn = shown !== "";
      this.clear();
      if (drawn) await io.stderr.drained?.();
    },
  };
}

/**
 * Some servers list a tool only to clients that can answer its questions (server-everything's
 * trigger-sampling-request, get-roots-list). After a miss with no near name, says which options would declare
 * what this client did not: from what is known already, never by starting the server again (one start per
 * command). The server's instructions naming the tool make it a certainty.
 */
function hiddenToolHint(options: ConnectOptions, name: string, initialized: JsonObject, near: boolean): string {
  const offered = options.capabilities ?? {};
  const missing = ["sampling", "roots", "elicitation"].filter((capability) => !isObject(offered[capability]));
  const instructions = typeof initialized.instructions === "string" ? initialized.instructions : "";
  const named = instructions.includes(name);
  if (missing.length === 0 || (near && !named)) return "";
  const flags: Record<string, string> = {
    sampling: "--sample-command CMD",
    roots: "--root DIR",
    elicitation: "--elicit",
  };
  const tries = missing.map((capability) => flags[capability]);
  const choices = tries.length > 1 ? `${tries.slice(0, -1).join(", ")} or ${tries.at(-1)}` : tries[0];
  return named
    ? ` (it is listed only to clients that can answer the server's questions: try ${choices})`
    : ` (a server may list a tool only to clients that can answer its questions: try ${choices})`;
}

// Ranks exit codes for batch: 3 > 2 > 1 > 0.
const EXIT_RANK = [0, 1, 2, 3];
function worse(a: number, b: number): number {
  return EXIT_RANK.indexOf(b) > EXIT_RANK.indexOf(a) ? b : a;
}

function exitCodeOf(error: unknown): number {
  if (error instanceof InterruptedError) return 130;
  if (error instanceof AuthorizationError) return 4;
  if (error instanceof UsageError || isPermissionError(error)) return 2;
  if (error instanceof ServerError) return 3;
  return 1;
}

/** Says what failed on stderr: one `mcp: …` line, or with --json one JSON object. Returns the exit code. */
function reportFailure(io: CliIo, error: unknown, json: boolean, serverStderr = ""): number {
  const code = exitCodeOf(error);
  if ("entry" in io.stderr) {
    (io.stderr as JsonLogSink).entry("error", describeFailure(error), {
      exit_code: code,
      code: error instanceof ServerError ? error.code : undefined,
      suggestions: error instanceof NotFoundError ? error.suggestions : undefined,
      stderr: serverStderr || undefined,
    });
    return code;
  }
  if (json) {
    const report: JsonObject = { error: describeFailure(error), exitCode: code };
    if (error instanceof ServerError && error.code !== undefined) report.code = error.code;
    if (error instanceof NotFoundError) report.suggestions = error.suggestions;
    if (serverStderr) report.stderr = serverStderr;
    io.stderr.write(JSON.stringify(report) + "\n");
    return code;
  }
  logLine(io.stderr, describeFailure(error), undefined, "error");
  if (serverStderr) {
    logLine(io.stderr, "the server's stderr ends with:");
    io.stderr.write(serverStderr.endsWith("\n") ? serverStderr : serverStderr + "\n");
  }
  return code;
}

// Words that look like ARGS of call/prompt: key=value, JSON, - or @file.
function looksLikeArgs(word: string): boolean {
  return /^[A-Za-z_][\w.-]*:?=/.test(word) || /^[[{]/.test(word) || word === "-" || word.startsWith("@");
}

/**
 * `call deno run -A mcp.ts serve ./tools add a=2`: a usage mistake whose first
 * word is a program (on PATH, or a path) was most likely an unquoted server
 * command. Returns the command line to use instead.
 */
async function unquotedServerHint(command: string, args: string[]): Promise<string | undefined> {
  const [first] = args;
  if (!first || args.length < 2 || /\s/.test(first) || first.startsWith("-")) return undefined;
  if (!/[\\/]/.test(first) && (await findOnPath(first, sys.env()).catch(() => undefined)) === undefined) {
    return undefined;
  }
  // The server command runs up to the first of our own long options.
  const end = args.findIndex((word, i) =>
    i > 0 && word.startsWith("--") && word.slice(2).split("=")[0] in ANY_CLIENT_FLAG
  );
  const words = end < 0 ? args : args.slice(0, end);
  let split = words.length;
  if (command === "call" || command === "prompt") {
    while (split > 1 && looksLikeArgs(words[split - 1])) split--;
    split--; // the tool or prompt name
  } else if (command === "read") {
    split--;
  }
  if (split < 1) return undefined;
  const server = words.slice(0, split).join(" ");
  const quoted = server.includes('"') ? `'${server}'` : `"${server}"`;
  return ["mcp.ts", command, quoted, ...words.slice(split), ...(end < 0 ? [] : args.slice(end))].join(" ");
}

// How many words each command takes after <server>.
// A usage error of a client command whose <server> is a command line left unquoted says so instead.
async function withQuoteHint(command: string, args: string[], error: unknown): Promise<unknown> {
  const hint = error instanceof UsageError ? await unquotedServerHint(command, args) : undefined;
  return hint ? new UsageError(`the server command must be one argument: quote it, as in ${hint}`) : error;
}

/** What a client command's body is given: the session, the command's I/O (server text made safe), the progress
 * line, and what most bodies need of the connection. */
interface ClientRun {
  client: McpClient;
  /** stdout and stderr: visible on a terminal (or, with --json, JSON whose DEL and C1 are escaped). */
  io: CliIo;
  /** The same with JSON escapes: batch prints JSON whatever --json says. */
  jsonIo: CliIo;
  json: boolean;
  progress: ReturnType<typeof progressReporter>;
  options: ConnectOptions;
  /** <server> as given, and the positionals after it. */
  target: string;
  rest: string[];
  /** Lines cut to the terminal's width; asked only where it matters (on Bun it costs start-up time). */
  fit(): RenderOptions;
  /** Whether the server offers a capability. */
  offers(capability: string): boolean;
  /** A list the server does not offer is an empty list. */
  listOrNone(capability: string, list: () => Promise<JsonObject[]>): Promise<JsonObject[]>;
  /** Says (unless --json) that the server offers none of `what`. */
  sayNone(what: string): void;
}

/**
 * What every client command shares, once: its flags read into ConnectOptions (answers to the server's questions,
 * OAuth, telemetry, the terminal-safe I/O), the connection, `body` with the session, and the end — a failure
 * reported with the server's stderr, spans flushed while the server stops, the server stopped. `server`: where to
 * connect when the command resolved it already (call --detach).
 */
async function withClient(
  command: string,
  { values, positionals }: Parsed<typeof CLIENT_FLAGS>,
  cliIo: CliIo,
  body: (run: ClientRun) => Promise<number | void>,
  server: string | ServerSpec = positionals[0],
): Promise<number> {
  const [target, ...rest] = positionals;
  checkSessionFlags(target, values);
  // Through a session, a task is a SEP-2663 one whatever the server's era (the daemon makes them of a 2025-11-25
  // server's): `call --detach` and `task` speak 2026-07-28 with the daemon.
  const tasksThroughSession = target?.startsWith("@") &&
    (command === "task" || (values as { detach?: boolean }).detach);
  const verbose = values.verbose === true;
  const json = values.json === true;
  const { env, headers } = connectionFlags(values);
  const protocol = tasksThroughSession ? "auto" : values.protocol;
  const versions = [...MODERN_PROTOCOL_VERSIONS, ...SUPPORTED_PROTOCOL_VERSIONS] as string[];
  if (protocol !== undefined && protocol !== "auto" && protocol !== "legacy" && !versions.includes(protocol)) {
    throw new UsageError(
      `--protocol takes auto, legacy or a version mcp.ts speaks (${versions.join(", ")}), got "${protocol}"`,
    );
  }
  const answers = await clientAnswers(values, cliIo);
  const oauth = await oauthOptions(command, target, values, cliIo);
  const interrupt = new AbortController();
  const stopSigint = sys.onSignal("SIGINT", () => interrupt.abort(new InterruptedError()));
  const progress = progressReporter(cliIo, verbose);
  // What the server sent reaches a terminal only as visible text; --json stays exact.
  // (--json and batch print JSON: on a terminal its DEL and C1 characters are \u escapes, the same value.)
  const jsonIo = {
    stdin: cliIo.stdin,
    stdout: terminalSafe(cliIo.stdout, true),
    stderr: terminalSafe(cliIo.stderr, true),
  };
  // (stderr is the command's one writer already, visible on a terminal; only --json's gets JSON's escapes.)
  const io = json ? jsonIo : { stdin: cliIo.stdin, stdout: terminalSafe(cliIo.stdout), stderr: cliIo.stderr };
  const recorder = values.record === undefined ? undefined : await openRecording(values.record, target);
  // Telemetry (OTEL_*): each request a CLIENT span, a CI job's TRACEPARENT their parent.
  const processEnv = sys.env();
  const tracer = commandTelemetry(processEnv, (line) => progress.note(line));
  const traceRoot = tracer && parseTraceparent(processEnv.TRACEPARENT, processEnv.TRACESTATE);
  if (traceRoot && processEnv.BAGGAGE) traceRoot.baggage = processEnv.BAGGAGE;
  const options: ConnectOptions = {
    env,
    cwd: values.cwd,
    tracer,
    traceRoot,
    traceCommand: traceRoot ? undefined : {},
    config: values.config,
    headers,
    oauth,
    protocol,
    capabilities: answers.capabilities,
    onRequest: answers.onRequest,
    logLevel: verbose ? "debug" : undefined,
    // Tools left out of a list matter where lists are shown.
    onWarning: command === "list" || verbose ? (message) => progress.note(`warning: ${message}`) : undefined,
    onMessage: recorder?.write,
    stopStepMs: cliIo.stopStepMs,
    wait: cliIo.wait,
    timeout: positiveInteger("--timeout", values.timeout, DEFAULT_REQUEST_TIMEOUT_MS),
    maxTime: positiveInteger("--max-time", values["max-time"], DEFAULT_MAX_TIME_MS),
    retries: positiveInteger("--retries", values.retries, 0, { allowZero: true }),
    maxLineBytes: positiveInteger("--max-line-bytes", values["max-line-bytes"], DEFAULT_CLIENT_MAX_LINE_BYTES),
    signal: interrupt.signal,
    onStderr: verbose ? (text) => progress.text(text) : undefined,
    onLog: verbose
      ? (params) => {
        const data = typeof params.data === "string" ? params.data : JSON.stringify(params.data);
        progress.note(`[${params.level}]${params.logger ? ` ${params.logger}:` : ""} ${data}`);
      }
      : undefined,
    onInvalidLine: verbose ? (text) => progress.note(`not JSON-RPC on the server's stdout: ${text}`) : undefined,
    onTrace: values.trace ? (line) => progress.text(line + "\n") : undefined,
  };

  let client: McpClient | undefined;
  let code = 0;
  try {
    client = await connect(server, options);
    const capabilities = isObject(client.initializeResult.capabilities) ? client.initializeResult.capabilities : {};
    const offers = (capability: string) => isObject(capabilities[capability]);
    code = await body({
      client,
      io,
      jsonIo,
      json,
      progress,
      options,
      target,
      rest,
      fit: () => io.stdout.isTTY ? { terminal: true, width: io.stdout.columns } : {},
      offers,
      listOrNone: async (capability, list) => {
        if (!offers(capability)) return [];
        return await list().catch((error) => {
          if (error instanceof ServerError && error.code === ErrorCode.MethodNotFound) return [];
          throw error;
        });
      },
      sayNone: (what) => void (json || progress.note(`the server offers no ${what}`)),
    }) ?? 0;
  } catch (error) {
    progress.clear();
    // After shutdown, so the tail holds what the server said while it was stopped.
    await client?.close();
    const stderr = error instanceof ServerError ? client?.stderr ?? error.stderr : "";
    code = reportFailure(io, error, json, exitCodeOf(error) === 3 && !verbose ? stderr : "");
  } finally {
    stopSigint();
    // Every span has ended: they go out while the server stops, 2 s at most (a dead collector changes no exit).
    const flushed = tracer?.flush();
    await client?.close();
    recorder?.close();
    await flushed;
  }
  if (client && client.invalidLines > 0) {
    logLine(
      io.stderr,
      `warning: ignored ${client.invalidLines} line(s) on the server's stdout that were not JSON-RPC` +
        (verbose ? "" : " (see them with --verbose)"),
    );
  }
  return code;
}

/** ARGS of call and prompt, read before anything is spawned: bad ones are a usage error (maybe an unquoted server). */
async function callArgsOf(command: string, { positionals, args }: Parsed<typeof CLIENT_FLAGS>, io: CliIo) {
  try {
    return await readCallArgs(positionals.slice(2), io);
  } catch (error) {
    throw await withQuoteHint(command, args, error);
  }
}

/** `call <server> <tool> [ARGS]`. */
async function runCall(input: Parsed<typeof CALL_FLAGS>, io: CliIo): Promise<number> {
  const { values, positionals } = input;
  const callArgs = await callArgsOf("call", input, io);
  const meta = values.meta === undefined ? undefined : jsonObjectArg(values.meta, "--meta");
  const detach = values.detach === true;
  const output = values.output;
  let server: string | ServerSpec = positionals[0];
  if (detach) {
    // A detached task lives on the server: one a stdio server would take with it when the command ends.
    server = await resolveServer(server, {
      config: values.config,
      env: { ...sys.env(), ...connectionFlags(values).env },
    });
    // A daemon's session (@NAME) outlives the command too: its server keeps the task for the next one.
    if (!isHttpSpec(server) && server.session === undefined) {
      throw new UsageError(
        "--detach needs an HTTP server (a URL, or a config entry with a url) or a session (@NAME): a stdio " +
          "server's task ends with the command",
      );
    }
  }
  return await withClient("call", input, io, async ({ client, io, json, progress, options, rest }) => {
    const name = rest[0];
    let args: JsonObject = callArgs.kind === "object" ? callArgs.value : {};
    const retries = options.retries ?? 0;
    try {
      // key=value follows the tool's schema (zip=007 stays a string when it is typed string),
      // and --retries needs its annotations: only then is the tool list worth a round trip.
      if (callArgs.kind === "pairs" || retries > 0) {
        const tools = await client.listTools();
        const tool = tools.find((candidate) => candidate.name === name);
        if (!tool) throw new NotFoundError("tool", name, tools.map((candidate) => String(candidate.name)));
        if (callArgs.kind === "pairs") args = { ...argsFromPairs(callArgs.pairs, tool.inputSchema), ...callArgs.json };
      }
      let result = await client.callTool(name, args, {
        meta,
        onProgress: (params) => progress.update(params),
        retries,
        onRetry: (error, attempt) =>
          progress.note(`${errorMessage(error)}; calling idempotent "${name}" again (${attempt} of ${retries})`),
        detach,
        onTask: (task) => progress.task(task),
      });
      await progress.settle();
      const detached = detach ? createdTask(result) : undefined;
      if (detached) {
        io.stdout.write(json ? JSON.stringify(result) + "\n" : `${detached.taskId}\n`);
        if (client.era !== "modern") {
          // 2025-11-25 tasks: a server may keep one only in the session that made it, which ends now.
          progress.note(
            "warning: a 2025-11-25 task may be its session's alone (mcp.ts serve keeps it so without a token " +
              "subject, server-everything always): a later command may not find it",
          );
        }
        return 0;
      }
      if (detach) progress.note("the server answered at once: there is no task to detach");
      if (output !== undefined) result = await writeBinaryItem(result, output);
      if (json) {
        io.stdout.write(JSON.stringify(result) + "\n");
      } else {
        const hasBinary = Array.isArray(result.content) && result.content.some((item) => binaryData(item));
        const rendered = renderCallResult(result, { terminal: hasBinary && io.stdout.isTTY === true });
        if (rendered.stdout) io.stdout.write(rendered.stdout);
        if (rendered.stderr) toolErrorText(io.stderr, rendered.stderr);
      }
      return result.isError === true ? 1 : 0;
    } catch (error) {
      if (error instanceof NotFoundError && error.why === undefined) {
        error.message += hiddenToolHint(options, name, client.initializeResult, error.suggestions.length > 0);
      }
      throw error;
    }
  }, server);
}

/** `list <server> [TOOL]`. */
function runList(input: Parsed<typeof CLIENT_FLAGS>, io: CliIo): Promise<number> {
  return withClient("list", input, io, async ({ client, io, json, rest: [name], listOrNone, sayNone, fit }) => {
    const tools = await listOrNone("tools", () => client.listTools());
    if (name !== undefined) {
      const tool = tools.find((candidate) => candidate.name === name);
      if (!tool) throw new NotFoundError("tool", name, tools.map((candidate) => String(candidate.name)));
      io.stdout.write(json ? JSON.stringify(tool) + "\n" : renderToolDetail(tool));
      return;
    }
    if (tools.length === 0) sayNone("tools");
    io.stdout.write(json ? JSON.stringify({ tools }) + "\n" : renderToolList(tools, fit()));
  });
}

/** `login <server>`: a session whose first refused request starts the OAuth flow. */
function runLogin(input: Parsed<typeof CLIENT_FLAGS>, io: CliIo): Promise<number> {
  return withClient("login", input, io, async ({ client, io, options, target }) => {
    const provider = client.auth;
    if (!(provider instanceof OAuthProvider)) {
      throw new UsageError(`mcp.ts login is for HTTP servers; "${target}" is a command (stdio servers need no login)`);
    }
    // Authorized during the connection, or now: the first request the server refuses starts the flow.
    if (!provider.authorized) await client.listTools().catch(noop);
    logLine(
      io.stderr,
      provider.authorized
        ? `logged in to ${client.spec.type === "stdio" ? target : (client.spec as HttpServerSpec).url}; ` +
          `the token is kept in ${options.oauth?.credentials ?? credentialsPath()}`
        : `${target} did not ask for authorization; nothing to log in to`,
    );
  });
}

/** `info <server>`. */
function runInfo(input: Parsed<typeof CLIENT_FLAGS>, io: CliIo): Promise<number> {
  return withClient("info", input, io, ({ client, io, json }) => {
    const era = { era: client.era, transport: client.transport };
    io.stdout.write(
      json ? JSON.stringify({ ...client.initializeResult, ...era }) + "\n" : renderInfo(client.initializeResult, era),
    );
    return Promise.resolve(0);
  });
}

/** `ping <server>`. */
function runPing(input: Parsed<typeof CLIENT_FLAGS>, io: CliIo): Promise<number> {
  return withClient("ping", input, io, async ({ client, io, json }) => {
    const ms = await client.ping();
    io.stdout.write(json ? JSON.stringify({ ms }) + "\n" : `${ms.toFixed(1)} ms\n`);
  });
}

/** `batch <server>`: NDJSON in, NDJSON out. */
function runBatch(input: Parsed<typeof BATCH_FLAGS>, io: CliIo): Promise<number> {
  const concurrency = positiveInteger("--concurrency", input.values.concurrency, 1);
  return withClient(
    "batch",
    input,
    io,
    ({ client, jsonIo, options }) => batchCalls(client, jsonIo, concurrency, options.maxLineBytes!),
  );
}

/** `resources <server>`. */
function runResources(input: Parsed<typeof CLIENT_FLAGS>, io: CliIo): Promise<number> {
  return withClient("resources", input, io, async ({ client, io, json, listOrNone, sayNone, fit }) => {
    const [resources, templates] = await Promise.all([
      listOrNone("resources", () => client.listResources()),
      listOrNone("resources", () => client.listResourceTemplates()),
    ]);
    if (resources.length + templates.length === 0) sayNone("resources");
    io.stdout.write(
      json
        ? JSON.stringify({ resources, resourceTemplates: templates }) + "\n"
        : renderResourceList(resources, templates, fit()),
    );
  });
}

/** `read <server> <uri>`. */
function runRead(input: Parsed<typeof READ_FLAGS>, io: CliIo): Promise<number> {
  const output = input.values.output;
  return withClient("read", input, io, async ({ client, io, json, offers, rest: [uri] }) => {
    if (!offers("resources")) throw new UsageError(`Cannot read ${uri}: the server offers no resources`);
    const result = await client.readResource(uri);
    if (json) return void io.stdout.write(JSON.stringify(result) + "\n");
    const parts = renderResourceContents(result);
    if (output !== undefined) return void await writeFileBytes(output, parts);
    const blobs = (result.contents as unknown[]).filter((item) => isObject(item) && typeof item.blob === "string");
    if (blobs.length > 0 && io.stdout.isTTY) {
      const what = blobs.map((item) =>
        summarizeBinary({ type: "resource", resource: item }, (item as JsonObject).blob as string)
      );
      throw new UsageError(
        `Cannot print binary contents ${what.join(", ")} to a terminal: write them to a file with -o FILE, ` +
          `or print them as base64 with --json`,
      );
    }
    for (const part of parts) io.stdout.write(part);
  });
}

/** `request <server> <method> [JSON]`. */
function runRequest(input: Parsed<typeof CLIENT_FLAGS>, io: CliIo): Promise<number> {
  const [, method, params] = input.positionals;
  const requestParams = jsonObjectArg(params ?? "{}", `the params of ${method}`);
  return withClient("request", input, io, async ({ client, io, progress }) => {
    const result = await client.request(method, requestParams, { onProgress: (update) => progress.update(update) });
    await progress.settle();
    io.stdout.write(JSON.stringify(result) + "\n");
  });
}

/** `prompts <server>`. */
function runPrompts(input: Parsed<typeof CLIENT_FLAGS>, io: CliIo): Promise<number> {
  return withClient("prompts", input, io, async ({ client, io, json, listOrNone, sayNone, fit }) => {
    const prompts = await listOrNone("prompts", () => client.listPrompts());
    if (prompts.length === 0) sayNone("prompts");
    io.stdout.write(json ? JSON.stringify({ prompts }) + "\n" : renderPromptList(prompts, fit()));
  });
}

/** `prompt <server> <name> [ARGS]`. */
async function runPrompt(input: Parsed<typeof CLIENT_FLAGS>, io: CliIo): Promise<number> {
  const callArgs = await callArgsOf("prompt", input, io);
  return await withClient("prompt", input, io, async ({ client, io, json, offers, rest: [name] }) => {
    if (!offers("prompts")) throw new UsageError(`Cannot get prompt "${name}": the server offers no prompts`);
    // Prompt arguments are strings, whatever they look like.
    const args = callArgs.kind === "pairs"
      ? { ...Object.fromEntries(callArgs.pairs.map(splitPair)), ...callArgs.json }
      : callArgs.value;
    const bad = Object.entries(args).find(([, value]) => typeof value !== "string");
    if (bad) throw new UsageError(`Cannot use prompt argument ${bad[0]}: prompt arguments are strings`);
    // Its arguments are known from the list: a missing one is our mistake, said before asking.
    const prompts = await client.listPrompts();
    const prompt = prompts.find((candidate) => candidate.name === name);
    if (!prompt) throw new NotFoundError("prompt", name, prompts.map((candidate) => String(candidate.name)));
    throwIfMissingArguments(prompt, args);
    const result = await client.getPrompt(name, args as Record<string, string>);
    io.stdout.write(json ? JSON.stringify(result) + "\n" : renderPromptMessages(result));
  });
}

// `call -o FILE`: writes the result's one binary item to FILE and returns the result without it.
async function writeBinaryItem(result: JsonObject, file: string): Promise<JsonObject> {
  const content = Array.isArray(result.content) ? result.content : [];
  const binary = content.filter((item) => binaryData(item) !== undefined);
  if (binary.length !== 1) {
    throw new UsageError(
      `Cannot write the result to ${file}: -o takes a result with one binary item, this one has ${binary.length}` +
        " (see it all with --json)",
    );
  }
  await writeFileBytes(file, [binaryBytes(binary[0])!]);
  const rest: JsonObject = { ...result, content: content.filter((item) => item !== binary[0]) };
  // Structured content that only repeats the item went to the file with it.
  if (JSON.stringify(rest.structuredContent ?? null).includes(binaryData(binary[0])!)) delete rest.structuredContent;
  return rest;
}

async function writeFileBytes(file: string, parts: Uint8Array[]): Promise<void> {
  const { writeFile } = await import("node:fs/promises");
  try {
    await writeFile(file, concatBytes(parts, parts.reduce((sum, part) => sum + part.length, 0)));
  } catch (error) {
    throw new UsageError(`Cannot write ${file}: ${errorMessage(error)}`);
  }
}

/** The non-blank lines of a stream; null stands for a line over `maxBytes`, which is skipped. */
async function* inputLines(stream: Readable, maxBytes: number): AsyncGenerator<string | null> {
  let ready: (string | null)[] = [];
  const reader = new FrameReader({ message: (text) => ready.push(text), oversize: () => ready.push(null) }, maxBytes);
  for await (const chunk of stream) {
    reader.push(typeof chunk === "string" ? encoder.encode(chunk) : chunk);
    if (ready.length > 0) {
      const batch = ready;
      ready = [];
      yield* batch;
    }
  }
  reader.end();
  yield* ready;
}

/** `batch`: one stdin line per call, one stdout line per input line, in input order. */
async function batchCalls(client: McpClient, io: CliIo, concurrency: number, maxLineBytes: number): Promise<number> {
  let worst = 0;
  const outputs: (string | undefined)[] = [];
  let nextToPrint = 0;
  const inFlight = new Set<Promise<void>>();
  const print = () => {
    while (nextToPrint < outputs.length && outputs[nextToPrint] !== undefined) {
      io.stdout.write(outputs[nextToPrint]!);
      outputs[nextToPrint++] = ""; // printed; keep the index, drop the text
    }
  };
  const runLine = async (index: number, line: string | null) => {
    let output: JsonObject | string;
    let level = 0;
    let request: unknown;
    try {
      request = line === null ? undefined : JSON.parse(line);
    } catch {
      request = undefined;
    }
    if (
      !isObject(request) || typeof request.tool !== "string" ||
      !(request.arguments === undefined || isObject(request.arguments))
    ) {
      output = { error: `line ${index + 1}: expected {"tool": NAME, "arguments": {...}}` };
      level = 2;
    } else {
      try {
        const result = await client.callTool(request.tool, (request.arguments ?? {}) as JsonObject);
        output = result;
        if (result.isError === true) level = 1;
      } catch (error) {
        output = { error: errorMessage(error) };
        level = exitCodeOf(error) === 130 ? 3 : exitCodeOf(error);
      }
    }
    worst = worse(worst, level);
    outputs[index] = JSON.stringify(output) + "\n";
    print();
  };
  let index = 0;
  for await (const line of inputLines(io.stdin ?? proc().stdin, maxLineBytes)) {
    const running = runLine(index++, line).finally(() => inFlight.delete(running));
    inFlight.add(running);
    outputs.push(undefined);
    if (inFlight.size >= concurrency) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  print();
  return worst;
}

// --- 17e. Tasks and skills: task, skills, skill ---

// Every skill of the server; one without the extension (skills/list not found) is exit 2.
async function skillsOf(client: McpClient): Promise<JsonObject[]> {
  try {
    return await client.listSkills();
  } catch (error) {
    if (error instanceof ServerError && error.code === ErrorCode.MethodNotFound) {
      throw new UsageError("the server does not offer skills");
    }
    throw error;
  }
}

// The skill a NAME (looked up in the listing) or a skill:// URI (skills/get) names: exit 2 when none or several.
async function findSkill(client: McpClient, wanted: string): Promise<JsonObject> {
  if (wanted.includes("://")) {
    try {
      return await client.getSkill(wanted);
    } catch (error) {
      if (!(error instanceof ServerError) || error.code !== ErrorCode.InvalidParams) throw error;
      throw new UsageError(`the server has no skill ${wanted}`);
    }
  }
  const skills = await skillsOf(client);
  const nameOf = (entry: JsonObject) =>
    isObject(entry.frontmatter) && typeof entry.frontmatter.name === "string"
      ? entry.frontmatter.name
      : String(entry.uri).split("/").at(-2) ?? "";
  const matches = skills.filter((entry) => nameOf(entry) === wanted);
  if (matches.length === 1) return matches[0];
  if (matches.length > 1) {
    throw new UsageError(
      `${matches.length} skills are named ${wanted}: give one's URI (${matches.map((entry) => entry.uri).join(", ")})`,
    );
  }
  const near = closestNames(wanted, skills.map(nameOf));
  throw new UsageError(
    `the server has no skill named ${wanted}${near.length > 0 ? `; did you mean ${near.join(", ")}?` : ""}`,
  );
}

// skill --out: what one skill may bring, at most (Safety: sizes checked before bytes are read).
const SKILL_OUT_MAX_FILES = 512;
const DEFAULT_SKILL_OUT_MAX_BYTES = 64 * 1024 * 1024;

// `skill --out DIR`: the manifest's count and sizes capped before a byte is read; every path decoded, normalised
// and checked (inside the skill, one name per file, SKILL.md only under the entry's own URI, so the frontmatter
// check runs on what is written as SKILL.md); then each file read, checked and written at once to a temporary
// directory beside DIR/NAME (one file in memory at a time), which is renamed into place.
async function writeSkill(
  client: McpClient,
  entry: JsonObject,
  out: string,
  { force, maxBytes }: { force: boolean; maxBytes: number },
  note: (line: string) => void,
): Promise<void> {
  if (!Array.isArray(entry.resources)) {
    throw new UsageError(`${entry.uri} is a dynamic skill: it lists no files to write`);
  }
  const root = String(entry.uri).replace(/\/SKILL\.md$/, "");
  const name = isObject(entry.frontmatter) && typeof entry.frontmatter.name === "string"
    ? entry.frontmatter.name
    : root.split("/").at(-1)!;
  if (!SKILL_NAME_PATTERN.test(name)) {
    throw new ServerError(`the skill's name ${brief(name)} cannot be a directory name`);
  }
  const items = (entry.resources as unknown[]).filter(isObject);
  if (items.length > SKILL_OUT_MAX_FILES) {
    throw new ServerError(
      `the skill lists ${items.length} files, over the cap of ${SKILL_OUT_MAX_FILES}: nothing written`,
    );
  }
  const listedBytes = items.reduce(
    (sum, item) => sum + (Number.isSafeInteger(item.size) ? item.size as number : Infinity),
    0,
  );
  if (listedBytes > maxBytes) {
    throw new ServerError(
      `the skill lists ${Number.isFinite(listedBytes) ? `${listedBytes} bytes` : "a file of no size"}, over ` +
        `--max-bytes ${maxBytes}: nothing written`,
    );
  }
  const seen = new Map<string, string>(); // a path as a file system may fold it → the URI that named it
  const paths = items.map((item) => {
    const uri = String(item.uri);
    let parts: string[] = [];
    try {
      if (uri.startsWith(root + "/")) parts = uri.slice(root.length + 1).split("/").map(decodeURIComponent);
    } catch { /* a broken %-escape: not a path */ }
    if (
      parts.length === 0 || parts.some((part) => part === "" || part === "." || part === ".." || /[\\/\0]/.test(part))
    ) {
      throw new ServerError(`the skill lists ${brief(uri)}, which is not a path inside it: nothing written`);
    }
    const folded = parts.join("/").normalize("NFC").toLowerCase();
    const other = seen.get(folded);
    if (other !== undefined) {
      throw new ServerError(
        `the skill lists ${brief(other)} and ${brief(uri)}, two names for one file: nothing written`,
      );
    }
    seen.set(folded, uri);
    if (folded === SKILL_FILE.toLowerCase() && uri !== entry.uri) {
      throw new ServerError(
        `the skill lists ${brief(uri)}, another name for its ${SKILL_FILE} (${entry.uri}): nothing written`,
      );
    }
    return parts;
  });
  const order = items.map((_, i) => i).sort((a, b) =>
    (items[b].uri === entry.uri ? 1 : 0) - (items[a].uri === entry.uri ? 1 : 0)
  );
  const { mkdir, rename, rm, stat, writeFile } = await import("node:fs/promises");
  const target = joinPath(out, name);
  const exists = await stat(target).then(() => true, () => false);
  if (exists && !force) throw new UsageError(`${target} exists: give --force to replace it`);
  const temporary = joinPath(out, `.${name}.mcp-${crypto.randomUUID()}`);
  try {
    let written = 0;
    for (const i of order) {
      const { bytes } = await client.readSkillFile(entry, String(items[i].uri)); // checked: its listed size
      written += bytes.length;
      if (written > maxBytes) throw new ServerError(`the skill is over --max-bytes ${maxBytes}: nothing written`);
      const file = joinPath(temporary, paths[i].join("/"));
      try {
        await mkdir(dirnameOf(file), { recursive: true });
        await writeFile(file, bytes);
      } catch (error) {
        throw new UsageError(`Cannot write ${target}: ${errorMessage(error)}`);
      }
    }
    if (exists) await rm(target, { recursive: true, force: true });
    await rename(temporary, target);
  } catch (error) {
    await rm(temporary, { recursive: true, force: true });
    if (error instanceof ServerError || error instanceof UsageError) throw error;
    throw new UsageError(`Cannot write ${target}: ${errorMessage(error)}`);
  }
  note(`wrote ${items.length} file(s) of ${entry.uri} to ${target}`);
}

/** `task <server> get|result|cancel ID`. */
function runTask(input: Parsed<typeof CLIENT_FLAGS>, io: CliIo): Promise<number> {
  const [, action, taskId] = input.positionals;
  if (!["get", "result", "wait", "cancel"].includes(action)) {
    throw new UsageError(`task takes get, result or cancel, got "${action}" (see: mcp.ts help task)`);
  }
  return withClient(
    "task",
    input,
    io,
    ({ client, io, json, progress }) => taskCommand(client, action, taskId, { json, io, progress }),
  );
}

/** `skills <server>`. */
function runSkills(input: Parsed<typeof CLIENT_FLAGS>, io: CliIo): Promise<number> {
  return withClient("skills", input, io, async ({ client, io, json, fit }) => {
    const skills = await skillsOf(client);
    io.stdout.write(json ? JSON.stringify(skills) + "\n" : renderSkillList(skills, fit()));
  });
}

/** `skill <server> NAME|URI [FILE] [--out DIR]`. */
function runSkill(input: Parsed<typeof SKILL_FLAGS>, io: CliIo): Promise<number> {
  const { values } = input;
  const maxBytes = positiveInteger("--max-bytes", values["max-bytes"], DEFAULT_SKILL_OUT_MAX_BYTES);
  if ((values.force !== undefined || values["max-bytes"] !== undefined) && values.out === undefined) {
    throw new UsageError("--force and --max-bytes go with --out DIR");
  }
  return withClient("skill", input, io, async ({ client, io, progress, rest: [wanted, file] }) => {
    const entry = await findSkill(client, wanted);
    if (values.out !== undefined) {
      const note = (line: string) => progress.note(line);
      return void await writeSkill(client, entry, values.out, { force: values.force === true, maxBytes }, note);
    }
    const root = String(entry.uri).replace(/\/SKILL\.md$/, "");
    const uri = file === undefined ? String(entry.uri) : `${root}/${file.split("/").map(encodeURIComponent).join("/")}`;
    if (entry.resources === "dynamic" && uri !== entry.uri) {
      throw new UsageError(`${entry.uri} is a dynamic skill: it lists no files, so only its SKILL.md can be read`);
    }
    if (Array.isArray(entry.resources) && !entry.resources.some((item) => isObject(item) && item.uri === uri)) {
      const files = entry.resources.map((item) => isObject(item) ? String(item.uri).slice(root.length + 1) : "");
      throw new UsageError(`${entry.uri} lists no ${file}; its files: ${files.join(", ")}`);
    }
    const { bytes, verified } = await client.readSkillFile(entry, uri);
    if (!verified) progress.note(`${uri} is unverified (dynamic skill)`);
    let text: string | undefined;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      if (io.stdout.isTTY) {
        throw new UsageError(`Cannot print ${uri} (${bytes.length} bytes of binary) to a terminal: use --out DIR`);
      }
    }
    io.stdout.write(text ?? bytes);
  });
}

// `task <server> get|result|cancel ID`: an unknown id (-32602) is a usage error, exit 2.
async function taskCommand(
  client: McpClient,
  action: string,
  taskId: string,
  { json, io, progress }: { json: boolean; io: CliIo; progress: ReturnType<typeof progressReporter> },
): Promise<number> {
  try {
    switch (action) {
      case "get": {
        const task = await client.tasks.get(taskId);
        const message = typeof task.statusMessage === "string" ? `: ${task.statusMessage}` : "";
        io.stdout.write(json ? JSON.stringify(task) + "\n" : `${task.status}${message}\n`);
        return 0;
      }
      case "cancel":
        await client.tasks.cancel(taskId);
        return 0;
    }
    const result = await client.tasks.result(taskId, { onTask: (task) => progress.task(task) });
    await progress.settle();
    if (json) io.stdout.write(JSON.stringify(result) + "\n");
    else {
      const rendered = renderCallResult(result, {});
      if (rendered.stdout) io.stdout.write(rendered.stdout);
      if (rendered.stderr) toolErrorText(io.stderr, rendered.stderr);
    }
    return result.isError === true ? 1 : 0;
  } catch (error) {
    if (error instanceof ServerError && !(error instanceof TaskEndedError) && error.code === ErrorCode.InvalidParams) {
      throw new UsageError(
        `the server does not know task ${taskId} (unknown, expired, or not yours): ${error.message}`,
      );
    }
    throw error;
  }
}

// --- 17f. Login, the gateway, the proxy, replay, servers ---

/** The OAuth options of a client command: its flags, the environment, and whether a browser may be used. */
async function oauthOptions(
  command: string,
  target: string,
  values: FlagValues<typeof CLIENT_FLAGS>,
  io: CliIo,
): Promise<OAuthOptions> {
  const env = sys.env();
  const grant = values.grant;
  const grants = ["client_credentials", "jwt-bearer", "token-exchange", "authorization_code"];
  if (grant !== undefined && !grants.includes(grant)) {
    throw new UsageError(`--grant takes client_credentials, jwt-bearer or token-exchange, got "${grant}"`);
  }
  if (values.dpop === true && values["no-dpop"] === true) {
    throw new UsageError("--dpop and --no-dpop: one or the other");
  }
  let clientKey: string | undefined;
  if (values["client-key"] !== undefined) {
    try {
      clientKey = await (await files()).readText(values["client-key"]);
    } catch (error) {
      throw new UsageError(`Cannot read --client-key ${values["client-key"]}: ${errorMessage(error)}`);
    }
  }
  const clientSecret = (values["client-secret"]) ?? env.MCP_TS_CLIENT_SECRET;
  const port = values["callback-port"] === undefined
    ? undefined
    : positiveInteger("--callback-port", values["callback-port"], DEFAULT_CALLBACK_PORT);
  const options: OAuthOptions = {
    clientId: values["client-id"],
    clientSecret,
    clientKey,
    clientMetadataUrl: values["client-metadata-url"],
    scope: values.scope,
    callbackPort: port,
    loginTimeout: values["login-timeout"] === undefined
      ? undefined
      : positiveInteger("--login-timeout", values["login-timeout"], AUTH_WAIT_MS),
    grant: grant as OAuthOptions["grant"],
    assertion: values.assertion,
    idToken: values["id-token"],
    idpTokenEndpoint: values["idp-token-endpoint"],
    idpClientId: values["idp-client-id"],
    idpClientSecret: values["idp-client-secret"],
    dpop: values.dpop === true ? "required" : values["no-dpop"] === true ? "off" : undefined,
    openBrowser: values["no-browser"] !== true,
    fresh: command === "login",
    serverName: target,
    env,
    // A browser flow runs for login, --login, or a person at a terminal; scripts get exit 4.
    interactive: async () =>
      command === "login" || values.login === true ||
      (io.stderr.isTTY === true && !io.stdin && (await sys.stdinIsTerminal())),
    onNote: (line) => logLine(io.stderr, line),
  };
  for (const key of Object.keys(options) as (keyof OAuthOptions)[]) {
    if (options[key] === undefined) delete options[key]; // leave the config entry's oauth where no flag is given
  }
  return options;
}

// --log FILE for proxy: every frame appended with its time and direction, one line each (tail -f works).
async function openFrameLog(file: string): Promise<(direction: "<" | ">", text: string) => void> {
  const { openSync, writeSync } = await import("node:fs");
  let fd: number;
  try {
    fd = openSync(file, "a", 0o600);
  } catch (error) {
    throw new UsageError(`Cannot log to ${file}: ${errorMessage(error)}`);
  }
  return (direction, text) => void writeSync(fd, `${new Date().toISOString()} ${direction} ${text}\n`);
}

// -e KEY=VALUE and -H "Name: Value" of a client command, checked. A header's value is never shown, not even in an error.
function connectionFlags(
  values: FlagValues<typeof CLIENT_FLAGS>,
): { env: Record<string, string>; headers: Record<string, string> } {
  const env: Record<string, string> = {};
  for (const pair of (values.env ?? []) as string[]) {
    const equals = pair.indexOf("=");
    if (equals <= 0) throw new UsageError(`-e needs KEY=VALUE, got ${JSON.stringify(pair)}`);
    env[pair.slice(0, equals)] = pair.slice(equals + 1);
  }
  const headers: Record<string, string> = {};
  for (const line of (values.header ?? []) as string[]) {
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon).trim() : "";
    if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(name)) {
      throw new UsageError(`-H takes "Name: Value", got a header without a valid name${name ? ` ("${name}")` : ""}`);
    }
    headers[name] = line.slice(colon + 1).trim();
  }
  return { env, headers };
}

// proxy --http, replay --http: raw messages over Streamable HTTP on the runtime's listener; `ready` gets the URL.
async function listenRaw(
  http: ReturnType<typeof httpServeOptions>,
  ready: (url: string) => void,
  metrics?: Metrics,
): Promise<{ downstream: Downstream; listener: HttpListener }> {
  const made = httpDownstream({
    metrics: metrics && { render: () => metrics.prometheus(), token: http.handler.metricsToken },
    path: http.handler.path,
    allowedHosts: http.handler.allowedHosts ?? LOOPBACK_HOSTS,
    allowOrigins: http.handler.allowOrigins,
    token: http.handler.token,
    auth: http.handler.auth,
    maxBodyBytes: http.handler.maxBodyBytes,
  });
  const listener = await listenFor(made.handler, http.listen);
  audienceFromListener(http.handler.auth, listener, http.handler.path);
  ready(listenerUrl(listener, http.handler.path));
  return { downstream: made.downstream, listener };
}

const HELP_GATEWAY = `Usage: mcp.ts gateway [<upstream>...] [--config FILE] [--http [HOST:]PORT] [options]

One MCP server (stdio, or Streamable HTTP with --http and every serve --http option) in front of
many. Upstreams: config names, NAME=<server> (a command line or URL), or with none every server
the config files define. It serves the union of their tools and prompts as <upstream>__<name>
(only [A-Za-z0-9_-], at most 64 characters: longer ones end in a stable hash), and their
resources and templates unchanged (a URI two serve goes to the first). Every upstream starts at
once (four at a time); one that fails or dies is restarted with backoff while the others serve,
and a call to it is an isError saying when it is tried again. Calls, progress, cancellation,
log messages and the upstreams' questions (sampling, elicitation, roots) pass through; a list
change upstream is a list_changed here. EOF, SIGINT and SIGTERM stop every upstream.
Upstreams are spoken to in the initialize era (their list changes come as notifications);
with --protocol auto, in 2026-07-28 where they speak it: their tasks (a task id becomes
<upstream>__<id>; tasks/* find their way back by it) and skills (skills/list the union in
upstream order, reads routed to the skill's upstream) then pass through, for clients that
declare those extensions.
  --prefix always|collisions   prefix every name (default), or only names two upstreams share
  --tools PATTERN              expose only names matching these globs (repeatable; !PATTERN excludes)
  --cache-ttl MS               keep resources/read answers MS (default 0: not kept)
  --cache-size N               at most N kept (default 256)
  --state redis://…            with --http: replicas share sessions, task ids and quotas (see serve --help);
                               a task is asked of the replica whose upstream runs it
  --instance-id NAME           this replica's name in the store (default a random one per process)
${CLIENT_OPTIONS_HELP}`;

const GATEWAY_FLAGS = {
  ...CLIENT_FLAGS,
  name: { type: "string" },
  "server-version": { type: "string" },
  instructions: { type: "string" },
  ...HTTP_FLAGS,
  prefix: { type: "string" },
  tools: { type: "string", multiple: true },
  "cache-ttl": { type: "string" },
  "cache-size": { type: "string" },
  "instance-id": { type: "string" },
} as const;

/** `gateway [<upstream>...]`: one MCP server in front of many (config names, NAME=<server>, or every configured one). */
async function runGateway({ values, positionals }: Parsed<typeof GATEWAY_FLAGS>, io: CliIo): Promise<number> {
  const prefix = (values.prefix) ?? "always";
  if (prefix !== "always" && prefix !== "collisions") {
    throw new UsageError(`--prefix takes always or collisions, got "${prefix}"`);
  }
  const env = sys.env();
  const { env: extra, headers } = connectionFlags(values);
  const config = values.config;
  const upstreams: GatewayUpstream[] = [];
  if (positionals.length === 0) {
    const seen = new Set<string>();
    for (const entry of await listConfiguredServers({ config, env })) {
      if (seen.has(entry.name) || entry.problem) continue;
      seen.add(entry.name);
      upstreams.push({
        name: entry.name,
        spec: await resolveServer(entry.name, { config, env: { ...env, ...extra } }),
      });
    }
    if (upstreams.length === 0) {
      throw new UsageError(
        "gateway found no upstreams: name them (NAME=<server>, or config names), or give --config FILE",
      );
    }
  }
  for (const word of positionals) {
    const equals = word.indexOf("=");
    const named = equals > 0 && /^[A-Za-z0-9_-]+$/.test(word.slice(0, equals));
    const name = named ? word.slice(0, equals) : word;
    const target = named ? word.slice(equals + 1) : word;
    if (upstreams.some((upstream) => upstream.name === name)) throw new UsageError(`upstream "${name}" is named twice`);
    try {
      upstreams.push({ name, spec: await resolveServer(target, { config, env: { ...env, ...extra } }) });
    } catch (error) {
      // One upstream that names nothing runnable is down for good, not the gateway's end (its calls are isError).
      if (!(error instanceof UsageError)) throw error;
      upstreams.push({ name, spec: { command: target, args: [] }, unusable: error.message });
    }
  }
  const usable = upstreams.find((upstream) => upstream.unusable === undefined);
  if (!usable) throw new UsageError(upstreams[0].unusable!);
  const log = (line: string, fields?: Record<string, unknown>) => logLine(io.stderr, line, fields);
  // Without --http the metrics flags are still checked: --metrics-token alone is a mistake on every transport.
  const http = values.http === undefined ? void metricsOptions(values, env) : httpServeOptions(values, env);
  let tracer = commandTelemetry(env, log, values.name);
  if (http?.handler.metrics) {
    // /metrics shows the upstream calls too: the gateway's clients record their durations where it serves them from.
    tracer ??= new Telemetry({}, {}, log);
    tracer.metrics ??= new Metrics(metricsResource(values.name ?? "mcp.ts"));
  }
  const jsonLog = "entry" in io.stderr ? io.stderr as JsonLogSink : undefined;
  // From now until every upstream is stopped, a signal asks for an orderly stop: it must not kill us half-way.
  let stopped!: () => void;
  const stopping = new Promise<void>((resolve) => stopped = resolve);
  const unwire = onStopSignals(() => stopped());
  const gateway = new Gateway(upstreams, {
    env: extra,
    headers,
    config,
    prefix,
    tools: values.tools,
    cacheTtl: positiveInteger("--cache-ttl", values["cache-ttl"], 0, { allowZero: true }),
    cacheSize: positiveInteger("--cache-size", values["cache-size"], 256),
    timeout: positiveInteger("--timeout", values.timeout, DEFAULT_REQUEST_TIMEOUT_MS),
    maxTime: positiveInteger("--max-time", values["max-time"], DEFAULT_MAX_TIME_MS),
    oauth: await oauthOptions("gateway", "", values, io),
    protocol: values.protocol,
    log,
    shared: http !== undefined,
    tracer,
  });
  await Promise.race([gateway.start(), stopping]);
  const first = gateway.catalog();
  const serverOptions: ServerOptions = {
    tools: first.tools,
    resources: [...first.resources, ...first.templates],
    prompts: first.prompts,
    name: (values.name) ?? "mcp.ts gateway",
    version: values["server-version"],
    instructions: values.instructions,
    timeout: 0, // an upstream's call takes as long as the client lets it (its own --timeout, --max-time)
    listChanged: true,
    tracer,
    serviceName: values.name ?? "mcp.ts",
    accessLog: jsonLog && accessLine(jsonLog),
    instanceId: instanceIdOf(values["instance-id"], http !== undefined),
    log,
    ...gateway.serverHooks(),
  };
  try {
    if (http) {
      const handler = createHandler({
        ...serverOptions,
        ...http.handler,
        onTrace: values.trace ? (line) => void io.stderr.write(line + "\n") : undefined,
        onStateStore: (line) => log(line),
      });
      if (handler.core.tasks.store) gateway.share(handler.core.tasks.store);
      gateway.onCatalog = (catalog) => handler.core.setCatalog(catalog);
      handler.core.setCatalog(first); // with what options cannot carry: the answer for a down upstream's names
      const listener = await listenFor(handler, http.listen);
      audienceFromListener(http.handler.auth, listener, http.handler.path);
      const url = listenerUrl(listener, http.handler.path);
      log(`serving ${url} (a gateway)`, { url });
      await stopping;
      handler.close();
      await listener.close({ force: true });
    } else {
      const handle = serve({ ...serverOptions, input: io.stdin, log });
      gateway.onCatalog = (catalog) => handle.server.setCatalog(catalog);
      handle.server.setCatalog(first); // with what options cannot carry: the answer for a down upstream's names
      void stopping.then(() => handle.shutdown());
      await handle.done;
    }
  } finally {
    await gateway.close();
    unwire();
    await tracer?.flush();
  }
  setTimeout(() => sys.exit(), SHUTDOWN_GRACE_MS).unref?.();
  return 0;
}

const HELP_PROXY = `Usage: mcp.ts proxy <server> [--http [HOST:]PORT] [--log FILE] [--record FILE] [options]

A transparent MCP server in front of <server>: every message is forwarded both ways unchanged (any
method, either era, the server's own requests), on stdin/stdout or, with --http, Streamable HTTP.
A stdio host reaches an HTTP server through it (with -H headers and the token of mcp.ts login), and
an HTTP client a stdio server. The upstream lives as long as the client: EOF or SIGTERM ends both.
  --log FILE               append every frame: "TIME < JSON" from the client, "TIME > JSON" to it
  --record FILE            write the session as a cassette for mcp.ts replay
  --http, --path, --token, --auth-issuer, --auth-scopes, --auth-audience, --allow-origin,
  --allow-unauthenticated, --metrics, --metrics-token
                           as for serve --http (--metrics: each request forwarded, as server and client);
                           with --auth-issuer each token subject is a principal of its own: an upstream's
                           question, an answer to it and a cancellation stay with the client they concern
${CLIENT_OPTIONS_HELP}`;

const PROXY_FLAGS = {
  ...CLIENT_FLAGS,
  ...LISTEN_FLAGS,
  "auth-issuer": { type: "string" },
  "auth-scopes": { type: "string" },
  "auth-audience": { type: "string" },
  log: { type: "string" },
  metrics: { type: "boolean" },
  "metrics-token": { type: "string" },
} as const;

/** `proxy <server>`: a transparent MCP server in front of `<server>`, on stdio or --http. */
async function runProxy({ values, positionals }: Parsed<typeof PROXY_FLAGS>, io: CliIo): Promise<number> {
  const target = positionals[0];
  const env = sys.env();
  const { env: extra, headers } = connectionFlags(values);
  const upstream = await resolveServer(target, {
    config: values.config,
    env: { ...env, ...extra },
  });
  // Without --http the metrics flags are still checked: --metrics-token alone is a mistake on every transport.
  const http = values.http === undefined ? void metricsOptions(values, env) : httpServeOptions(values, env);
  const frameLog = values.log === undefined ? undefined : await openFrameLog(values.log);
  const recorder = values.record === undefined ? undefined : await openRecording(values.record, target);
  const log = (line: string, fields?: Record<string, unknown>) => logLine(io.stderr, line, fields);
  const oauth = await oauthOptions("proxy", target, values, io);
  const tracer = commandTelemetry(env, log);
  const jsonLog = "entry" in io.stderr ? io.stderr as JsonLogSink : undefined;
  if (values.metrics && !http) throw new UsageError("--metrics goes with --http (GET /metrics)");
  // --metrics keeps durations (the telemetry's own when it exports metrics: its span counters show there too).
  let measure = tracer?.metrics;
  if (values.metrics && !measure) {
    measure = new Metrics(metricsResource());
    if (tracer) tracer.metrics = measure;
  }
  const served = http
    ? await listenRaw(
      http,
      (url) => log(`serving ${url} (proxying ${target})`, { url }),
      values.metrics ? measure : undefined,
    )
    : undefined;
  const downstream = served?.downstream;
  const listener = served?.listener;
  const handle = proxy(upstream, {
    env: extra,
    cwd: values.cwd,
    headers,
    oauth,
    maxLineBytes: positiveInteger(
      "--max-line-bytes",
      values["max-line-bytes"],
      DEFAULT_CLIENT_MAX_LINE_BYTES,
    ),
    // --trace: every frame in and out, as serve prints them (what the client sent "<", what it got ">").
    onFrame: values.trace
      ? (direction, text) => {
        frameLog?.(direction, text);
        io.stderr.write(`${direction} ${text}\n`);
      }
      : frameLog,
    onMessage: recorder?.write,
    onTrace: values.trace ? (line) => log(line) : undefined,
    // The upstream's stderr through the command's one writer: visible on a terminal, JSON lines with --log-format.
    onStderr: (text) => void io.stderr.write(text),
    log,
    tracer,
    telemetry: false, // the command's own, read above: none when it is off
    measure,
    accessLog: jsonLog && accessLine(jsonLog),
  }, downstream);
  const unwire = onStopSignals(() => handle.stop());
  const code = await handle.done;
  unwire();
  await tracer?.flush();
  recorder?.close();
  await listener?.close({ force: true });
  // Connections a client left open must not keep a finished proxy alive (the output is out by now).
  setTimeout(() => sys.exit(), SHUTDOWN_GRACE_MS).unref?.();
  return code;
}

const HELP_REPLAY = `Usage: mcp.ts replay <cassette> [--strict] [--http [HOST:]PORT] [--log FILE]

Serves a cassette (from --record) as a mock MCP server on stdin/stdout or Streamable HTTP. Each
request gets the recorded answer of the first unused recorded request with the same method and
params (ids and _meta ignored; initialize and server/discover by method alone), after what the
server sent before that answer; once all are used, the last match answers again. A request with
no match gets a -32603 error naming the closest recorded one, and replay goes on.
  --strict                 the recorded order, each recorded request once
  --log FILE               append every frame, as proxy --log does
`;

const REPLAY_FLAGS = {
  ...LISTEN_FLAGS,
  strict: { type: "boolean" },
  log: { type: "string" },
} as const;

/** `replay <cassette>`: a recorded session served as a mock MCP server, on stdio or --http. */
async function runReplay({ values, positionals }: Parsed<typeof REPLAY_FLAGS>, io: CliIo): Promise<number> {
  let text: string;
  try {
    text = await (await files()).readText(positionals[0]);
  } catch (error) {
    throw new UsageError(`Cannot read ${positionals[0]}: ${errorMessage(error)}`);
  }
  const { entries } = readCassette(text, positionals[0]);
  const player = new CassettePlayer(entries, { strict: values.strict === true });
  const frameLog = values.log === undefined ? undefined : await openFrameLog(values.log);
  const log = (line: string, fields?: Record<string, unknown>) => logLine(io.stderr, line, fields);
  if (values.http !== undefined) {
    const http = httpServeOptions(values, sys.env());
    const { downstream, listener } = await listenRaw(
      http,
      (url) => log(`serving ${url} (replaying ${positionals[0]})`, { url }),
    );
    void replay(player, downstream, frameLog);
    await new Promise<void>((resolve) => {
      onStopSignals(() => resolve());
    });
    await listener.close({ force: true });
    setTimeout(() => sys.exit(), SHUTDOWN_GRACE_MS).unref?.();
    return 0;
  }
  await replay(player, stdioDownstream(io.stdin), frameLog);
  return 0;
}

const HELP_LOGOUT = `Usage: mcp.ts logout [<server>] [--all]

Forgets the tokens kept for <server>; with --all also the client registrations made with its
authorization server; --all alone forgets every token and registration.
`;

const LOGOUT_FLAGS = {
  all: { type: "boolean" },
  config: { type: "string" },
} as const;

/** `logout [<server>] [--all]`: forgets stored tokens (and client registrations with --all). */
async function runLogout({ values, positionals }: Parsed<typeof LOGOUT_FLAGS>, io: CliIo): Promise<number> {
  if (positionals.length === 0 && values.all !== true) {
    throw new UsageError("logout needs a <server>, or --all to forget every token (see: mcp.ts help logout)");
  }
  let server: string | undefined;
  if (positionals[0] !== undefined) {
    const spec = await resolveServer(positionals[0], { config: values.config });
    if (!isHttpSpec(spec)) throw new UsageError(`"${positionals[0]}" is a command: only HTTP servers have tokens`);
    server = canonicalResource(spec.url);
  }
  const forgotten = await forgetCredentials({ server, clients: values.all === true });
  const clients = forgotten.clients ? ` and ${forgotten.clients} client registration(s)` : "";
  logLine(io.stderr, `forgot ${forgotten.tokens} token(s)${clients} (${credentialsPath()})`);
  return 0;
}

const HELP_INSTALL = `Usage: mcp.ts install <host> NAME -- <command…> | <URL> | --self DIR | --attach [options]

Writes server NAME into a host's MCP config, keeping every other key, comment and the file's
indentation; the previous file is kept as FILE.bak. Hosts and their files:
  claude-desktop  claude_desktop_config.json (a URL is reached through \`proxy\`: it runs commands only)
  claude-code     .mcp.json here, else ~/.claude.json (user scope)
  cursor          .cursor/mcp.json here, else ~/.cursor/mcp.json
  vscode          .vscode/mcp.json here, else the user profile's mcp.json ("servers")
  windsurf        ~/.codeium/windsurf/mcp_config.json ("serverUrl" for a URL)
  codex           .codex/config.toml here, else ~/.codex/config.toml ([mcp_servers.NAME])
  gemini          .gemini/settings.json here, else ~/.gemini/settings.json ("httpUrl" for a URL)
  zed             .zed/settings.json here, else Zed's settings.json ("context_servers")
HOME, XDG_CONFIG_HOME and APPDATA decide where the user files are.

Options:
  --self DIR           the entry that serves DIR with the npm package: npx -y ${PACKAGE_NAME} serve DIR
  --attach             the entry that shares the daemon's session NAME: npx -y ${PACKAGE_NAME} attach NAME
                       (one server for every host window; see: mcp.ts help connect)
  --runtime node|deno|bun   with --self or --attach: npx (default), deno run -A jsr:${PACKAGE_NAME}, or bunx
  --from-clone         with --self, --attach or claude-desktop's URL: the entry runs this file with the
                       runtime running it now (a clone, before or instead of the published package)
  -e, --env KEY=VALUE  (repeatable) the server's environment (a command)
  -H, --header "K: V"  (repeatable) sent with every request (a URL)
  --scope project|user where the host has both (default: project when its file exists here)
  --force              replace a server NAME already there
A file that does not parse is left untouched (exit 2, naming its line).
`;

const INSTALL_FLAGS = {
  self: { type: "string" },
  attach: { type: "boolean" },
  runtime: { type: "string" },
  env: { type: "string", short: "e", multiple: true },
  header: { type: "string", short: "H", multiple: true },
  scope: { type: "string" },
  force: { type: "boolean" },
  "from-clone": { type: "boolean" },
} as const;

/**
 * Whether the npm registry (npm's own npm_config_registry, else npmjs.org) has `name`: false on its 404, undefined
 * when it cannot tell (offline, slow, anything else). Asked only where an entry would fetch the package.
 */
async function onNpmRegistry(name: string, env: Record<string, string | undefined>): Promise<boolean | undefined> {
  const named = env.npm_config_registry || env.NPM_CONFIG_REGISTRY || "https://registry.npmjs.org/";
  const registry = named.endsWith("/") ? named : named + "/";
  try {
    const response = await fetchSameOrigin(new URL(name.replace("/", "%2f"), registry), {
      headers: { accept: "application/vnd.npm.install-v1+json" },
      signal: AbortSignal.timeout(NPM_CHECK_TIMEOUT_MS),
    });
    await response.body?.cancel();
    return response.status === 404 ? false : response.ok ? true : undefined;
  } catch {
    return undefined;
  }
}
const NPM_CHECK_TIMEOUT_MS = 3_000;

/** `install <host> NAME -- <command…> | <URL>`: one server written into a host's config. */
async function runInstall({ values, positionals }: Parsed<typeof INSTALL_FLAGS>, io: CliIo): Promise<number> {
  const [host, name, ...rest] = positionals;
  const { env, headers } = connectionFlags(values);
  const fromClone = values["from-clone"] === true;
  if (fromClone && values.runtime !== undefined) {
    throw new UsageError("install takes --from-clone (this file, with the runtime running it) or --runtime, not both");
  }
  let target: InstallTarget;
  if (values.self !== undefined || values.attach) {
    if (rest.length) throw new UsageError("install --self DIR or --attach takes no command or URL besides");
    if (values.self !== undefined && values.attach) {
      throw new UsageError("install takes --self DIR or --attach, not both");
    }
    const dir = values.self === undefined ? undefined : resolvePath(values.self);
    if (dir !== undefined && (await (await files()).kind(dir)) !== "directory") {
      throw new UsageError(`--self: "${dir}" is not a directory`);
    }
    const runtime = values.runtime ?? "node";
    const launch: Record<string, string[]> = {
      node: ["npx", "-y", PACKAGE_NAME],
      deno: ["deno", "run", "-A", `jsr:${PACKAGE_NAME}`],
      bun: ["bunx", PACKAGE_NAME],
    };
    if (!Object.hasOwn(launch, runtime)) throw new UsageError(`--runtime takes node, deno or bun, not "${runtime}"`);
    const [command, ...args] = fromClone ? await selfArgv([]) : launch[runtime];
    // --attach: every host window shares the daemon's session NAME (opened from the config name NAME if need be).
    target = { command, args: dir === undefined ? [...args, "attach", name] : [...args, "serve", dir], env };
  } else if (values.runtime !== undefined) {
    throw new UsageError("--runtime goes with --self DIR or --attach");
  } else if (rest.length === 1 && /^https?:\/\//i.test(rest[0])) {
    target = { url: checkUrl(rest[0], "the server URL"), headers };
    if (fromClone) {
      if (!HOSTS[host]?.stdioOnly) throw new UsageError(`--from-clone: ${host} takes the URL itself; no program runs`);
      target.launcher = await selfArgv([]);
    }
  } else if (fromClone) {
    throw new UsageError("--from-clone goes with --self DIR, --attach, or a URL for claude-desktop");
  } else if (rest.length === 0) {
    throw new UsageError(`install needs the server: -- <command…>, a URL, or --self DIR (see: mcp.ts help install)`);
  } else {
    // One word may be the whole command line, quoted: split it as <server> is split.
    const words = rest.length === 1 ? splitCommand(rest[0]) : rest;
    if (Object.keys(headers).length) throw new UsageError("-H goes with a URL; a command takes -e KEY=VALUE");
    target = { command: words[0], args: words.slice(1), env };
  }
  const written = await installServer(host, name, target, { scope: values.scope, force: values.force === true });
  const backup = written.backup ? `; the previous file is ${written.backup}` : "";
  io.stdout.write(`installed "${name}" in ${written.file} (${host}, ${written.scope} scope${backup})\n`);
  // An entry that fetches our package when the host starts it: a package not published yet cannot start.
  const fetched = "url" in target ? HOSTS[host]?.stdioOnly && !target.launcher : target.args.includes(PACKAGE_NAME);
  if (fetched && await onNpmRegistry(PACKAGE_NAME, sys.env()) === false) {
    logLine(
      io.stderr,
      `${PACKAGE_NAME} is not on the npm registry yet, so the entry cannot start there; ` +
        `install again with --force --from-clone for one that runs this file (${(await selfArgv([])).join(" ")})`,
      undefined,
      "warn",
    );
  }
  return 0;
}

const HELP_UNINSTALL = `Usage: mcp.ts uninstall <host> NAME [--scope project|user]

Removes server NAME from a host's MCP config (see: mcp.ts help install for the hosts and their
files), keeping everything else as it was; the previous file is kept as FILE.bak.
`;

const UNINSTALL_FLAGS = { scope: { type: "string" } } as const;

/** `uninstall <host> NAME`: the server removed from the host's config. */
async function runUninstall({ values, positionals }: Parsed<typeof UNINSTALL_FLAGS>, io: CliIo): Promise<number> {
  const [host, name] = positionals;
  const written = await installServer(host, name, undefined, { scope: values.scope });
  io.stdout.write(
    `removed "${name}" from ${written.file} (${host}, ${written.scope} scope; the previous file is ${written.backup})\n`,
  );
  return 0;
}

const HELP_PACK = `Usage: mcp.ts pack DIR [-o NAME.mcpb] [--name N] [--version V] [--description D] [--author A]

Makes an MCP Bundle of a tool folder: a zip that Claude Desktop (and every host that takes
.mcpb files) installs with one click. Inside: manifest.json (server.type node, the tools listed
with their descriptions), server/mcp.mjs (this program as JavaScript, for Node >= 18) and
tools/ (DIR's files, executables keeping their mode). Name, version, description and author
come from the flags, else from DIR/package.json, else DIR's name, 0.1.0 and the user's name.
-o defaults to NAME.mcpb here. Each plugin is loaded first: a folder with a broken one is not packed.
`;

const PACK_FLAGS = {
  output: { type: "string", short: "o" },
  name: { type: "string" },
  version: { type: "string" },
  description: { type: "string" },
  author: { type: "string" },
} as const;

// The most a bundle holds, counted from the files' sizes before a byte is read.
const PACK_MAX_BYTES = 256 * 1024 * 1024;
const PACK_MAX_FILES = 10_000;

/** `pack DIR -o NAME.mcpb`: a tool folder as an MCP Bundle. */
async function runPack({ values, positionals }: Parsed<typeof PACK_FLAGS>, io: CliIo): Promise<number> {
  const dir = resolvePath(positionals[0]);
  if ((await (await files()).kind(dir)) !== "directory") throw new UsageError(`pack: "${dir}" is not a directory`);
  const program = await ownJavaScript();
  const folder = await folderFiles(dir, (line) => logLine(io.stderr, line, undefined, "warn"));
  const about = await readJsonConfig(joinPath(dir, "package.json"), false).catch(() => undefined);
  const known = (key: string) => isObject(about) && typeof about[key] === "string" ? about[key] as string : undefined;
  const authorOf = isObject(about) && isObject(about.author) && typeof about.author.name === "string"
    ? about.author.name
    : known("author");
  const name = values.name ?? known("name")?.replace(/^@[^/]+\//, "") ?? basenameOf(dir);
  const loaded = await loadCatalog(dir);
  if (loaded.errors.length > 0) {
    const [first] = loaded.errors;
    throw new UsageError(`Cannot pack ${dir}: ${first.file}: ${first.message}`);
  }
  const typescript = folder.filter((file) => /\.m?ts$/.test(file.name) && !file.name.includes("/")).map((file) =>
    file.name
  );
  if (typescript.length) {
    // The bundle's Node floor rises from 18 for these alone: the one who packs it may rather write them as .js.
    logLine(
      io.stderr,
      `pack: ${typescript.join(", ")} ${typescript.length === 1 ? "is" : "are"} TypeScript: the bundle needs ` +
        "Node >= 22.18 (type stripping); written as .js, it runs on Node >= 18",
      undefined,
      "warn",
    );
  }
  const manifest = {
    manifest_version: MCPB_MANIFEST_VERSION,
    name,
    version: values.version ?? known("version") ?? "0.1.0",
    description: values.description ?? known("description") ?? `MCP tools from ${basenameOf(dir)}`,
    author: { name: values.author ?? authorOf ?? sys.env().USER ?? sys.env().USERNAME ?? "unknown" },
    server: {
      type: "node",
      entry_point: "server/mcp.mjs",
      mcp_config: {
        command: "node",
        args: ["${__dirname}/server/mcp.mjs", "serve", "${__dirname}/tools"],
        env: {},
      },
    },
    tools: loaded.catalog.tools.map((tool) => ({
      name: tool.name,
      description: String(tool.listing.description ?? ""),
    })),
    // A TypeScript plugin needs Node's type stripping; JavaScript and executables run on Node 18.
    compatibility: { runtimes: { node: typescript.length ? ">=22.18.0" : ">=18.0.0" } },
  };
  const entries: ZipEntry[] = [
    { name: "manifest.json", data: encoder.encode(JSON.stringify(manifest, null, 2) + "\n"), mode: 0o644 },
    { name: "server/mcp.mjs", data: encoder.encode(program), mode: 0o755 },
  ];
  const { readFile, writeFile } = await import("node:fs/promises");
  for (const file of folder) {
    const data = new Uint8Array(await readFile(joinPath(dir, file.name)));
    // Read no more than the size counted (a file growing meanwhile is cut where it was counted).
    entries.push({ name: `tools/${file.name}`, data: data.subarray(0, file.size), mode: file.mode });
  }
  const archive = await zipArchive(entries);
  const output = resolvePath(values.output ?? `${name}.mcpb`);
  await writeFile(output, archive);
  io.stdout.write(
    `packed ${manifest.tools.length} tools of ${dir} into ${output} (${entries.length} files, ` +
      `${Math.ceil(archive.length / 1024)} KiB)\n`,
  );
  return 0;
}

/** The regular files under DIR (dot entries left out, links skipped with a warning), sizes summed before reading. */
async function folderFiles(
  root: string,
  warn: (line: string) => void,
): Promise<{ name: string; size: number; mode: number }[]> {
  const { lstat, readdir } = await import("node:fs/promises");
  const found: { name: string; size: number; mode: number }[] = [];
  let total = 0;
  const walk = async (relative: string) => {
    const names = (await readdir(joinPath(root, relative))).sort();
    for (const name of names) {
      if (name.startsWith(".")) continue;
      const path = relative ? `${relative}/${name}` : name;
      const info = await lstat(joinPath(root, path));
      if (info.isDirectory()) await walk(path);
      else if (info.isSymbolicLink()) warn(`pack: skipped the link ${path} (a bundle holds files)`);
      else if (info.isFile()) {
        total += info.size;
        found.push({ name: path, size: info.size, mode: info.mode & 0o777 });
        if (found.length > PACK_MAX_FILES || total > PACK_MAX_BYTES) {
          throw new UsageError(
            `Cannot pack ${root}: over ${PACK_MAX_FILES} files or ${
              PACK_MAX_BYTES / 1024 / 1024
            } MiB (a bundle's bound)`,
          );
        }
      }
    }
  };
  await walk("");
  return found;
}

/** This program as JavaScript: the package's own file, or mcp.ts stripped of its types by the runtime. */
async function ownJavaScript(): Promise<string> {
  const url = new URL(import.meta.url);
  if (url.protocol !== "file:") {
    throw new UsageError(`pack needs this program as a local file; run it as: npx -y ${PACKAGE_NAME} pack …`);
  }
  const { fileURLToPath } = await import("node:url");
  const source = await (await files()).readText(fileURLToPath(url));
  if (!RUNNING_TYPESCRIPT) return source;
  const strip = await typeStripper();
  if (!strip) {
    throw new UsageError(
      `pack turns mcp.ts into JavaScript with the runtime's type stripper, which this one lacks (Node >= 22.18 and ` +
        `Deno have it); run it as: npx -y ${PACKAGE_NAME} pack …`,
    );
  }
  return javaScriptOf(source, strip);
}

// The flags that make a session's connection, set at `connect`: with `@NAME` they are a usage error.
const SESSION_CONNECTION_FLAGS = [
  "header",
  "env",
  "cwd",
  "config",
  "protocol",
  "root",
  "retries",
  "client-id",
  "client-secret",
  "client-key",
  "client-metadata-url",
  "scope",
  "callback-port",
  "grant",
  "assertion",
  "id-token",
  "idp-token-endpoint",
  "idp-client-id",
  "idp-client-secret",
  "dpop",
  "no-dpop",
  "login",
] as const;

/** `@NAME` with a flag that belongs to the session's connection: a usage error naming `connect --force`. */
function checkSessionFlags(target: string, values: Record<string, unknown>): void {
  if (!target.startsWith("@")) return;
  const given = SESSION_CONNECTION_FLAGS.filter((flag) => values[flag] !== undefined);
  if (given.length === 0) return;
  throw new UsageError(
    `${given.map((flag) => `--${flag}`).join(", ")} set${given.length === 1 ? "s" : ""} the connection of ${target}, ` +
      `made at connect: open it again with them (mcp.ts connect --force ${target.slice(1)} <server> …)`,
  );
}

const HELP_CONNECT = `Usage: mcp.ts connect NAME <server> [--idle MS] [--force] [client options]

Opens session NAME to <server> in the per-user daemon (started if it is not running) and returns
when it is ready; then @NAME is a <server> for every client command: call @NAME TOOL, list @NAME,
read @NAME URI, batch @NAME, task @NAME get ID, request @NAME METHOD. The connection's options
(-H, -e, --cwd, --config, --protocol, --root, --retries, the OAuth ones) are the session's, set
here; --timeout, --max-time, --json, -v, --elicit go with each command. A crashed stdio server is
reported on the next use (exit 3) and started again only with --retries N.
  --idle MS     end the session after MS without a use (default 1800000, 30 minutes)
  --force       replace an open session NAME
The daemon ends when it has no session. See also: sessions, disconnect, attach, daemon.
${CLIENT_OPTIONS_HELP}`;

const CONNECT_FLAGS = { ...CLIENT_FLAGS, idle: { type: "string" }, force: { type: "boolean" } } as const;

/** `connect NAME <server>`: a session opened in the daemon. */
async function runConnect({ values, positionals }: Parsed<typeof CONNECT_FLAGS>, io: CliIo): Promise<number> {
  const [name, target] = positionals;
  let opened: JsonObject;
  try {
    opened = await openSession(name, target, values, io);
  } catch (error) {
    // The server's own words on why it did not start, as `call` shows them.
    if (!(error instanceof ServerError) || !error.stderr) throw error;
    return reportFailure(io, error, values.json === true, error.stderr);
  }
  if (values.json) io.stdout.write(JSON.stringify(opened) + "\n");
  else io.stdout.write(`session "@${name}" is open: ${target} (${opened.era} ${opened.protocolVersion})\n`);
  return 0;
}

// Session NAME opened in the daemon (started when none runs) with the connection's flags: what `sessions` says of it.
async function openSession(
  name: string,
  target: string,
  values: FlagValues<typeof CONNECT_FLAGS>,
  io: CliIo,
): Promise<JsonObject> {
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name)) {
    throw new UsageError(
      `a session name is letters, digits, "_", "." and "-" (64 at most), not ${JSON.stringify(name)}`,
    );
  }
  if (target.startsWith("@")) throw new UsageError("connect takes a <server>, not another session");
  const { env: extra, headers } = connectionFlags(values);
  const roots = rootsOf(values);
  const oauth = await oauthOptions("connect", target, values, io);
  const request: SessionRequest = {
    name,
    target,
    cwd: resolvePath(values.cwd ?? "."),
    env: { ...sys.env(), ...extra } as Record<string, string>,
    config: values.config === undefined ? undefined : resolvePath(values.config),
    headers,
    protocol: values.protocol,
    roots: roots.length ? roots : undefined,
    retries: positiveInteger("--retries", values.retries, 0, { allowZero: true }),
    idle: positiveInteger("--idle", values.idle, DAEMON_IDLE_MS),
    timeout: positiveInteger("--timeout", values.timeout, DEFAULT_REQUEST_TIMEOUT_MS),
    maxTime: positiveInteger("--max-time", values["max-time"], DEFAULT_MAX_TIME_MS),
    oauth: {
      clientId: oauth.clientId,
      clientSecret: oauth.clientSecret,
      clientKey: oauth.clientKey,
      clientMetadataUrl: oauth.clientMetadataUrl,
      scope: oauth.scope,
      grant: oauth.grant,
      assertion: oauth.assertion,
      idToken: oauth.idToken,
      idpTokenEndpoint: oauth.idpTokenEndpoint,
      idpClientId: oauth.idpClientId,
      idpClientSecret: oauth.idpClientSecret,
      dpop: oauth.dpop,
      credentials: oauth.credentials,
    },
    force: values.force === true,
  };
  return await daemonRequest("open", request as unknown as JsonObject, { start: true, json: "entry" in io.stderr });
}

const HELP_SESSIONS = `Usage: mcp.ts sessions [--json]

The daemon's sessions: NAME, server, era and protocol version, uptime, calls, connections now, and
the last error. Nothing (and exit 0) when no daemon runs.
`;

const SESSIONS_FLAGS = { json: { type: "boolean" } } as const;

/** `sessions`: what the daemon holds open. */
async function runSessions({ values }: Parsed<typeof SESSIONS_FLAGS>, io: CliIo): Promise<number> {
  let sessions: JsonObject[] = [];
  try {
    const listed = await daemonRequest("list", {});
    sessions = Array.isArray(listed.sessions) ? listed.sessions.filter(isObject) : [];
  } catch (error) {
    if (!(error instanceof NoDaemonError)) throw error;
  }
  if (values.json) {
    io.stdout.write(JSON.stringify({ sessions }) + "\n");
    return 0;
  }
  if (sessions.length === 0) {
    logLine(io.stderr, "no sessions (open one with: mcp.ts connect NAME <server>)");
    return 0;
  }
  const rows = [["NAME", "SERVER", "ERA", "UP", "CALLS", "LAST ERROR"]];
  for (const session of sessions) {
    rows.push([
      `@${session.name}`,
      String(session.server),
      `${session.era ?? "-"} ${session.protocolVersion ?? ""}`.trim(),
      `${Math.round(Number(session.uptimeMs) / 1000)}s`,
      String(session.calls),
      session.lastError === null ? "" : String(session.lastError),
    ]);
  }
  io.stdout.write(renderRows(rows, {}));
  return 0;
}

const HELP_DISCONNECT = `Usage: mcp.ts disconnect NAME | --all

Ends session NAME (or every one): calls in flight through it get an error, its server is stopped.
`;

const DISCONNECT_FLAGS = { all: { type: "boolean" } } as const;

/** `disconnect NAME | --all`. */
async function runDisconnect({ values, positionals }: Parsed<typeof DISCONNECT_FLAGS>, io: CliIo): Promise<number> {
  if ((positionals.length === 0) === (values.all !== true)) {
    throw new UsageError("disconnect takes NAME or --all (see: mcp.ts help disconnect)");
  }
  const name = positionals[0]?.replace(/^@/, "");
  try {
    const closed = await daemonRequest("close", values.all ? { all: true } : { name });
    const names = Array.isArray(closed.closed) ? closed.closed : [];
    logLine(io.stderr, names.length ? `disconnected ${names.map((name) => `@${name}`).join(", ")}` : "no sessions");
  } catch (error) {
    if (!(error instanceof NoDaemonError) || !values.all) throw error;
    logLine(io.stderr, "no sessions");
  }
  return 0;
}

const HELP_ATTACH = `Usage: mcp.ts attach NAME

A stdio MCP server for a host's config, in front of the daemon's session NAME, opened from the
config name NAME when it is not open: every host window's attach shares the one server, each with
its own requests, ids, cancellations, subscriptions and questions.
`;

/** `attach NAME`: stdin and stdout joined to session NAME's socket. */
async function runAttach({ positionals }: Parsed<Record<never, never>>, io: CliIo): Promise<number> {
  const name = positionals[0].replace(/^@/, "");
  let connection: { socket: LocalSocket; rest: Uint8Array; reply: JsonObject };
  try {
    connection = await daemonConnection({ session: name, attach: true }, { start: true, json: "entry" in io.stderr });
  } catch (error) {
    if (!(error instanceof NoSessionError)) throw error;
    // Not open: open it from the config name, as `connect NAME NAME` would.
    await openSession(name, name, {}, io);
    connection = await daemonConnection({ session: name, attach: true });
  }
  const { socket, rest } = connection;
  const input = io.stdin ? streamSource(io.stdin) : processStdio().stdin();
  const closed = new Promise<void>((resolve) => socket.onClose(resolve));
  // At the host's pace: while it does not read our stdout, we do not read the daemon (which then holds back).
  const relay = (chunk: Uint8Array) => {
    if (io.stdout.write(chunk) || !io.stdout.once) return;
    socket.pause();
    io.stdout.once("drain", () => socket.resume());
  };
  if (rest.length) relay(rest);
  socket.onData(relay);
  socket.resume();
  input.start((chunk) => socket.write(chunk), () => socket.end());
  await closed;
  input.stop();
  return 0;
}

const HELP_DAEMON = `Usage: mcp.ts daemon status [--json] | stop | log

The per-user daemon that keeps sessions (see: mcp.ts help connect). It listens on a Unix socket in
$MCP_TS_STATE_DIR, else $XDG_RUNTIME_DIR/mcp.ts, else ~/.cache/mcp.ts/run (a directory that must
be yours with mode 0700); it starts on the first connect and ends when it has no session.
  status   its pid, socket and number of sessions (--json: {pid, socket, sessions})
  stop     end every session and the daemon
  log      print its log file (JSON lines when it was started with --log-format json)
`;

const DAEMON_FLAGS = { json: { type: "boolean" } } as const;

/** `daemon status|stop|log` (and `daemon run`, which the first connect starts). */
async function runDaemonCommand({ values, positionals }: Parsed<typeof DAEMON_FLAGS>, io: CliIo): Promise<number> {
  const [action] = positionals;
  const paths = daemonPaths();
  switch (action) {
    case "run":
      return await runDaemon(sys.env(), "entry" in io.stderr);
    case "status": {
      let status: JsonObject | undefined;
      try {
        status = await daemonRequest("status", {});
      } catch (error) {
        if (!(error instanceof NoDaemonError)) throw error;
      }
      if (values.json) {
        io.stdout.write(JSON.stringify(status ?? { pid: null, socket: paths.socket, sessions: 0 }) + "\n");
      } else if (status) {
        io.stdout.write(`running: pid ${status.pid}, ${status.sessions} session(s), ${status.socket}\n`);
      } else io.stdout.write(`not running (${paths.socket})\n`);
      return 0;
    }
    case "stop":
      try {
        const { pid } = await daemonRequest("stop", {});
        // Returns once it is gone (its servers stopped, its files removed): the next command starts afresh.
        const deadline = Date.now() + DAEMON_START_WAIT_MS;
        const alive = () => typeof pid === "number" && processAlive(pid);
        while (alive() && Date.now() < deadline) await abortableSleep(20);
        logLine(io.stderr, alive() ? `the daemon (pid ${pid}) is still stopping its sessions` : "the daemon stopped");
      } catch (error) {
        if (!(error instanceof NoDaemonError)) throw error;
        logLine(io.stderr, "no daemon is running");
      }
      return 0;
    case "log": {
      const text = await (await files()).readText(paths.log).catch(() => "");
      io.stdout.write(text);
      return 0;
    }
    default:
      throw new UsageError(`daemon takes status, stop or log, not ${JSON.stringify(action)} (see: mcp.ts help daemon)`);
  }
}

const HELP_SERVERS = `Usage: mcp.ts servers [--check] [--config FILE] [--json]

Prints every server name the MCP config files define, in the order names are looked up: NAME,
its transport (stdio, http, sse), its command line or URL as written (\${VAR} unexpanded), and
its file. With --config FILE, that file only. --json prints {"servers": [...]}.
--check connects to each (four at a time, --timeout MS each, default 10000) and prints a line
per server: ok with its tools, era, transport and time, or the failure; exit 3 if any failed.
Looked up: .mcp.json, .cursor/mcp.json, .vscode/mcp.json in this directory and each one above,
then ~/.claude.json (this project's servers, then the user's), then Claude Desktop's config, then
Codex's config.toml (a trusted project's, then ~/.codex's), Windsurf's, Gemini CLI's, Zed's,
Copilot CLI's, VS Code's and Cursor's user files, and .gemini/ and .zed/ settings here.
`;

const SERVERS_FLAGS = {
  config: { type: "string" },
  json: { type: "boolean" },
  check: { type: "boolean" },
  timeout: { type: "string" },
} as const;

/** `servers`: every name the config files define, where, and how it is reached. */
async function runServers({ values }: Parsed<typeof SERVERS_FLAGS>, io: CliIo): Promise<number> {
  const servers = await listConfiguredServers({ config: values.config });
  if (values.check) {
    const timeout = positiveInteger("--timeout", values.timeout, SERVERS_CHECK_TIMEOUT_MS);
    return await checkServers(servers.filter((server) => !server.shadowed), values, timeout, io);
  }
  if (values.json) {
    io.stdout.write(JSON.stringify({ servers }) + "\n");
    return 0;
  }
  if (servers.length === 0) {
    logLine(
      io.stderr,
      `no MCP config defines a server (looked for .mcp.json, .cursor/mcp.json and .vscode/mcp.json here and ` +
        `above, ~/.claude.json and ${claudeDesktopConfigPath()})`,
    );
    return 0;
  }
  const rows = servers.map((server) => [
    server.name,
    server.transport,
    server.problem ?? server.target,
    server.file + (server.shadowed ? " (shadowed by the one above)" : ""),
  ]);
  const widths = [0, 1, 2].map((column) => Math.max(...rows.map((row) => row[column].length)));
  for (const row of rows) {
    io.stdout.write(row.map((cell, i) => i < 3 ? cell.padEnd(widths[i]) : cell).join("  ") + "\n");
  }
  return 0;
}

const SERVERS_CHECK_TIMEOUT_MS = 10_000;
const SERVERS_CHECK_CONCURRENCY = 4;

// `servers --check`: each configured server connected to, listed and closed; a line each, in config order.
async function checkServers(
  servers: ConfiguredServer[],
  values: { config?: string; json?: boolean },
  timeout: number,
  io: CliIo,
): Promise<number> {
  const check = async (server: ConfiguredServer): Promise<JsonObject> => {
    if (server.problem) return { name: server.name, ok: false, error: server.problem };
    const started = performance.now();
    let client: McpClient | undefined;
    try {
      const spec = await resolveServer(server.name, { config: values.config });
      client = await connect(spec, { timeout, maxTime: timeout });
      const offers = isObject(client.initializeResult.capabilities) ? client.initializeResult.capabilities : {};
      const tools = isObject(offers.tools) ? (await client.listTools()).length : 0;
      return {
        name: server.name,
        ok: true,
        tools,
        era: client.era === "modern" ? client.protocolVersion : `legacy ${client.protocolVersion}`,
        transport: client.transport,
        ms: Math.round(performance.now() - started),
      };
    } catch (error) {
      return {
        name: server.name,
        ok: false,
        error: describeFailure(error),
        ms: Math.round(performance.now() - started),
      };
    } finally {
      await client?.close();
    }
  };
  const results: JsonObject[] = new Array(servers.length);
  let next = 0;
  await Promise.all(Array.from({ length: SERVERS_CHECK_CONCURRENCY }, async () => {
    for (let i = next++; i < servers.length; i = next++) results[i] = await check(servers[i]);
  }));
  const out = terminalSafe(io.stdout);
  if (values.json) io.stdout.write(JSON.stringify({ servers: results }) + "\n");
  else {
    const width = Math.max(0, ...results.map((result) => String(result.name).length));
    for (const result of results) {
      const what = result.ok
        ? `ok      ${result.tools} tools, ${result.era}, ${result.transport}, ${result.ms} ms`
        : `failed  ${result.error}`;
      out.write(`${String(result.name).padEnd(width)}  ${what}\n`);
    }
  }
  return results.every((result) => result.ok) ? 0 : 3;
}

// --- 17g. The command table (COMMANDS), the main help, main ---

/** Runs the CLI with `argv` (without the runtime and script) and returns the exit code. */
export async function main(argv: string[], io?: CliIo): Promise<number> {
  const own = io ? undefined : processIo();
  const cli: CliIo = io ?? own!;
  const unsupported = unsupportedRuntime(runtimeVersions());
  if (unsupported) {
    logLine(cli.stderr, unsupported, undefined, "error");
    await own?.drained();
    return 2;
  }
  try {
    return await run(argv, cli);
  } finally {
    // Exit only once the output is out (never process.exit() after writing).
    await own?.drained();
  }
}

/** One command of the CLI: its flags, how many positionals it takes, and what runs it. */
interface Command {
  /** What `mcp.ts help NAME` and `NAME --help` print; its first line is the usage. */
  help: string;
  flags: FlagSpecs;
  /** At least and at most this many positionals. */
  args: readonly [number, number];
  /** Its first positional is a <server>: missing, it is asked for; a usage error may be an unquoted command line. */
  server: boolean;
  run(input: Parsed<FlagSpecs>, io: CliIo): Promise<number>;
}

// Every command takes these: --help, and --log-format (read by `run` before the command's own flags).
const HELP_FLAG = { help: { type: "boolean", short: "h" }, "log-format": { type: "string" } } as const;

// A table entry, typed where it is written: `run` gets the values of exactly these flags.
function command<const S extends FlagSpecs>(entry: {
  help: string;
  flags: S;
  args: readonly [number, number];
  server?: boolean;
  run(input: Parsed<S & typeof HELP_FLAG>, io: CliIo): Promise<number>;
}): Command {
  return { server: false, ...entry, flags: { ...entry.flags, ...HELP_FLAG } } as unknown as Command;
}

// A client command: `<server>` first, then `args` more at least and at most.
// A client command: <server> and `least` to `most` words after it, its flags, its runner (withClient inside).
function clientCommand<const S extends FlagSpecs>(
  help: string,
  flags: S,
  least: number,
  most: number,
  run: (input: Parsed<S & typeof HELP_FLAG>, io: CliIo) => Promise<number>,
): Command {
  return command({ help, flags, args: [1 + least, 1 + most], server: true, run });
}

/** The commands, in the order `mcp.ts help` lists them; `run` looks a command up here. */
const COMMANDS: Record<string, Command> = {
  serve: command({ help: HELP_SERVE, flags: SERVE_FLAGS, args: [0, 1], run: runServe }),
  call: clientCommand(HELP_CALL, CALL_FLAGS, 1, Infinity, runCall),
  list: clientCommand(HELP_LIST, CLIENT_FLAGS, 0, 1, runList),
  info: clientCommand(HELP_INFO, CLIENT_FLAGS, 0, 0, runInfo),
  ping: clientCommand(HELP_PING, CLIENT_FLAGS, 0, 0, runPing),
  batch: clientCommand(HELP_BATCH, BATCH_FLAGS, 0, 0, runBatch),
  resources: clientCommand(HELP_RESOURCES, CLIENT_FLAGS, 0, 0, runResources),
  read: clientCommand(HELP_READ, READ_FLAGS, 1, 1, runRead),
  prompts: clientCommand(HELP_PROMPTS, CLIENT_FLAGS, 0, 0, runPrompts),
  prompt: clientCommand(HELP_PROMPT, CLIENT_FLAGS, 1, Infinity, runPrompt),
  request: clientCommand(HELP_REQUEST, CLIENT_FLAGS, 1, 2, runRequest),
  task: clientCommand(HELP_TASK, CLIENT_FLAGS, 2, 2, runTask),
  skills: clientCommand(HELP_SKILLS, CLIENT_FLAGS, 0, 0, runSkills),
  skill: clientCommand(HELP_SKILL, SKILL_FLAGS, 1, 2, runSkill),
  servers: command({ help: HELP_SERVERS, flags: SERVERS_FLAGS, args: [0, 0], run: runServers }),
  install: command({ help: HELP_INSTALL, flags: INSTALL_FLAGS, args: [2, Infinity], run: runInstall }),
  uninstall: command({ help: HELP_UNINSTALL, flags: UNINSTALL_FLAGS, args: [2, 2], run: runUninstall }),
  pack: command({ help: HELP_PACK, flags: PACK_FLAGS, args: [1, 1], run: runPack }),
  connect: command({ help: HELP_CONNECT, flags: CONNECT_FLAGS, args: [2, 2], run: runConnect }),
  sessions: command({ help: HELP_SESSIONS, flags: SESSIONS_FLAGS, args: [0, 0], run: runSessions }),
  disconnect: command({ help: HELP_DISCONNECT, flags: DISCONNECT_FLAGS, args: [0, 1], run: runDisconnect }),
  attach: command({ help: HELP_ATTACH, flags: {}, args: [1, 1], run: runAttach }),
  daemon: command({ help: HELP_DAEMON, flags: DAEMON_FLAGS, args: [1, 1], run: runDaemonCommand }),
  login: clientCommand(HELP_LOGIN, CLIENT_FLAGS, 0, 0, runLogin),
  logout: command({ help: HELP_LOGOUT, flags: LOGOUT_FLAGS, args: [0, 1], run: runLogout }),
  gateway: command({ help: HELP_GATEWAY, flags: GATEWAY_FLAGS, args: [0, Infinity], run: runGateway }),
  proxy: command({ help: HELP_PROXY, flags: PROXY_FLAGS, args: [1, 1], server: true, run: runProxy }),
  replay: command({ help: HELP_REPLAY, flags: REPLAY_FLAGS, args: [1, 1], run: runReplay }),
};

// What `mcp.ts help` prints: every command in a line; each command's own help is beside it above.
const HELP_MAIN = `mcp.ts ${VERSION} — the Model Context Protocol from a terminal

Usage:
  mcp.ts serve [DIR] [options]       serve the plugins in DIR (default ./tools) on stdio, or --http PORT
  mcp.ts call <server> <tool> [ARGS] call one tool and print its result
  mcp.ts list <server> [TOOL]        the server's tools with their arguments, or one tool in full
  mcp.ts info <server>               protocol version, serverInfo, capabilities, instructions
  mcp.ts ping <server>               round-trip time
  mcp.ts batch <server>              many calls on one server: NDJSON in, NDJSON out
  mcp.ts resources <server>          resources and resource templates
  mcp.ts read <server> <uri>         a resource's contents (binary: -o FILE, or --json for base64)
  mcp.ts prompts <server>            prompts
  mcp.ts prompt <server> <name> [ARGS]
                                     a prompt's messages
  mcp.ts request <server> <method> [JSON]
                                     any method by name; its result as JSON
  mcp.ts task <server> get|result|cancel ID
                                     a task a call became (call --detach prints its id)
  mcp.ts skills <server>             the server's skills (folders of instructions)
  mcp.ts skill <server> NAME [FILE]  a skill's SKILL.md (or FILE), checked against its digest (--out DIR: all)
  mcp.ts servers [--check]           the server names MCP config files define (--check: connect to each)
  mcp.ts install <host> NAME -- <command…> | <URL> | --self DIR
                                     write a server into a host's config (claude-code, cursor, codex, …)
  mcp.ts uninstall <host> NAME       remove it again
  mcp.ts pack DIR [-o NAME.mcpb]      a tool folder as an MCP Bundle (one click to install in Claude Desktop)
  mcp.ts connect NAME <server>       open a session in the per-user daemon: then @NAME is a <server>
  mcp.ts sessions                    the daemon's sessions; disconnect NAME|--all ends them
  mcp.ts attach NAME                 a stdio server for a host, sharing the daemon's session NAME
  mcp.ts daemon status|stop|log      the per-user daemon
  mcp.ts login <server>              authorize with an HTTP server's OAuth and keep the token
  mcp.ts logout [<server>] [--all]   forget its tokens (--all: every token and registration)
  mcp.ts gateway [<upstream>...]     one MCP server in front of many (config names, NAME=<server>)
  mcp.ts proxy <server>              a transparent MCP server in front of <server> (--log, --record, --http)
  mcp.ts replay <cassette>           serve a recorded session (--record) as a mock MCP server
  mcp.ts help [command]              this text, or a command's
  mcp.ts --version                   the version

Every command takes --log-format json (or MCP_TS_LOG_FORMAT=json): each stderr line a JSON object. With
OTEL_EXPORTER_OTLP_ENDPOINT set, commands send OpenTelemetry traces and metrics there (OTLP/HTTP JSON).

Run it with:  deno run -A mcp.ts …   |   bun mcp.ts …   |   node mcp.ts … (Node >= 22.18)
`;

// Flags, --help and the count of positionals, the same for every command; then its runner.
async function runCommand(name: string, entry: Command, args: string[], io: CliIo): Promise<number> {
  let parsed: Parsed<FlagSpecs>;
  try {
    const { values, positionals } = parseFlags(args, entry.flags, name);
    if (values.help) {
      io.stdout.write(entry.help);
      return 0;
    }
    const [least, most] = entry.args;
    if (entry.server && positionals.length === 0) {
      throw new UsageError(`${name} needs a <server> (see: mcp.ts help ${name})`);
    }
    if (positionals.length < least || positionals.length > most) {
      // What the usage line says it takes, up to its options.
      const usage = entry.help.split("\n")[0].replace(/^Usage: mcp\.ts \w+ ?/, "").replace(/ ?\[(options|--).*$/, "");
      throw new UsageError(
        `${name} takes ${usage || "no arguments"}, got ${positionals.length} argument${
          positionals.length === 1 ? "" : "s"
        } ` +
          `(see: mcp.ts help ${name})`,
      );
    }
    parsed = { values, positionals, args };
  } catch (error) {
    throw entry.server ? await withQuoteHint(name, args, error) : error;
  }
  return await entry.run(parsed, io);
}

async function run(argv: string[], cli: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  try {
    cli = withStderr(cli, logFormatOf(argv) === "json");
    const entry = name !== undefined && Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
    if (entry) return await runCommand(name, entry, rest, cli);
    switch (name) {
      case undefined:
      case "help":
      case "--help":
      case "-h": {
        const topic = name === "help" ? rest[0] : undefined;
        const asked = topic === undefined ? undefined : Object.hasOwn(COMMANDS, topic) ? COMMANDS[topic] : undefined;
        if (topic !== undefined && !asked && topic !== "main") throw new UsageError(`no help for "${topic}"`);
        if (name === undefined) {
          // No command is a usage mistake (exit 2) in a script; `mcp.ts help` is not.
          cli.stderr.write(`${HELP_MAIN}\nmcp: no command given (exit code 2; mcp.ts help prints this and exits 0)\n`);
          return 2;
        }
        cli.stdout.write(asked?.help ?? HELP_MAIN);
        return 0;
      }
      case "--version":
      case "-V":
        cli.stdout.write(`mcp.ts ${VERSION}\n`);
        return 0;
    }
    const listed = Object.keys(COMMANDS).filter((command) => command !== "request");
    throw new UsageError(`unknown command "${name}" (commands: ${[...listed, "help"].join(", ")})`);
  } catch (error) {
    return reportFailure(cli, error, rest.includes("--json"));
  }
}

// --log-format text|json (or MCP_TS_LOG_FORMAT); text when neither is given.
function logFormatOf(argv: string[]): "text" | "json" {
  const at = argv.findIndex((word) => word === "--log-format" || word.startsWith("--log-format="));
  const stop = argv.indexOf("--");
  let format = at >= 0 && (stop < 0 || at < stop)
    ? (argv[at].includes("=") ? argv[at].slice(argv[at].indexOf("=") + 1) : argv[at + 1])
    : undefined;
  format ??= sys.getEnv("MCP_TS_LOG_FORMAT");
  if (format === undefined || format === "" || format === "text") return "text";
  if (format === "json") return "json";
  throw new UsageError(`--log-format takes text or json, got "${format}"`);
}

// Every command's stderr is one writer (Safety: peer text never forges output), made on first use: in text,
// whatever is written passes the visible-text rule on a terminal (exact when piped; our own status line passes by
// control()); in JSON, each entry is one line (DEL and C1 escaped on a terminal). stdin and stdout are untouched.
function withStderr(cli: CliIo, json: boolean): CliIo {
  let stderr: OutputSink | undefined;
  return {
    get stdin() {
      return cli.stdin;
    },
    get stdout() {
      return cli.stdout;
    },
    get stderr() {
      return stderr ??= json ? jsonLogSink(terminalSafe(cli.stderr, true)) : terminalSafe(cli.stderr);
    },
    stopStepMs: cli.stopStepMs,
    wait: cli.wait,
  };
}

/**
 * The oldest runtimes mcp.ts runs on (CONTRACT: Deno >= 2.0, Bun >= 1.2, Node >= 22.18 for the .ts file, which Node
 * runs by stripping its types; the npm package's JavaScript, the same text stripped beforehand, runs on Node >= 18).
 */
const MINIMUM_RUNTIMES = { deno: "2.0.0", bun: "1.2.0", node: "22.18.0", nodeJavaScript: "18.0.0" } as const;

// Whether this is mcp.ts itself, not the JavaScript of the npm package or a bundle (see build/dist.mjs).
const RUNNING_TYPESCRIPT = import.meta.url.endsWith(".ts");

/**
 * Why this runtime cannot run mcp.ts, in one line with the way out, or
 * undefined when it can. Takes the runtime's name and version.
 * @internal
 */
export function unsupportedRuntime(
  versions: { deno?: string; bun?: string; node?: string },
  typescript: boolean = RUNNING_TYPESCRIPT,
): string | undefined {
  const older = (a: string, b: string) => {
    const [x, y] = [a, b].map((version) => version.split(/[.-]/).slice(0, 3).map(Number));
    for (let i = 0; i < 3; i++) if ((x[i] || 0) !== (y[i] || 0)) return (x[i] || 0) < (y[i] || 0);
    return false;
  };
  const name = versions.deno ? "deno" : versions.bun ? "bun" : "node";
  const version = versions[name];
  const minimum = name === "node" && !typescript ? MINIMUM_RUNTIMES.nodeJavaScript : MINIMUM_RUNTIMES[name];
  if (version === undefined || !older(version, minimum)) return undefined;
  const runtime = { deno: "Deno", bun: "Bun", node: "Node" }[name];
  const wayOut = name === "node" && typescript
    ? "upgrade it, or run the npm package, which is JavaScript for Node >= 18: npx -y @mcp-ts/mcp …"
    : "upgrade it";
  return `Cannot run on ${runtime} ${version}: mcp.ts needs ${runtime} >= ${minimum}; ${wayOut}`;
}

// Whether this file is the script the runtime was started with, for Node before 22.18 (no import.meta.main): the
// npm package's bin is a link to it (node_modules/.bin/mcp), and Node runs the file the link names.
async function isEntryScript(): Promise<boolean> {
  const script = proc().argv[1];
  if (typeof script !== "string") return false;
  const [{ realpathSync }, { fileURLToPath }] = await Promise.all([import("node:fs"), import("node:url")]);
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

// Deno without -A: it cannot prompt when stdio is not a terminal.
function isPermissionError(error: unknown): boolean {
  const name = (error as { name?: string })?.name;
  return name === "NotCapable" || name === "PermissionDenied";
}

function describeFailure(error: unknown): string {
  if (isPermissionError(error)) {
    return `${errorMessage(error).split("\n")[0]}; run it as: deno run -A mcp.ts …`;
  }
  if (error instanceof ServerError && error.code === ErrorCode.MissingRequiredClientCapability) {
    // The server needs an answer we were not told how to give: name the option that gives it.
    const needed = isObject(error.data) && isObject(error.data.requiredCapabilities)
      ? Object.keys(error.data.requiredCapabilities)
      : [];
    const flags: Record<string, string> = {
      elicitation: "--elicit accept|decline|cancel",
      sampling: '--sample-command "CMD"',
      roots: "--root DIR",
    };
    const hints = needed.filter((name) => name in flags).map((name) => flags[name]);
    if (hints.length > 0) return `${errorMessage(error)}; give ${hints.join(" and ")}`;
  }
  return errorMessage(error);
}

// Node before 22.18 has no import.meta.main: there the package's JavaScript runs, and mcp.ts itself (Node 22.6-22.17
// stripping types by flag) says it needs a newer Node instead of doing nothing. Node before 22.6 cannot load a .ts
// file at all, and fails before this line.
if (import.meta.main ?? await isEntryScript()) sys.setExitCode(await main(sys.args()));
