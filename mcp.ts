// mcp.ts — the Model Context Protocol from a terminal, in one file, no dependencies.
//
//   deno run -A mcp.ts serve ./tools        an MCP server on stdio; tools are plugin files in ./tools
//   bun mcp.ts serve ./tools                the same on Bun
//   node mcp.ts serve ./tools               the same on Node >= 22.18 (type stripping)
//   import { serve } from "./mcp.ts"        the same server as a library, on any streams
//
// Contents, low level to high level; each section uses only those above it:
//   1. Constants          protocol versions, error codes, limits
//   2. Errors             RpcError (crosses the wire), UsageError (exit code 2)
//   3. Framing            bytes in, lines out (NDJSON or Content-Length), batched writes
//   4. JSON-RPC peer      message checks, request/response matching, notifications
//   5. Schema validation  the JSON Schema keywords tool schemas use
//   6. MCP server         lifecycle, tools, cancellation, progress, logging, timeouts
//   7. Plugins            the only file-system and import() I/O of the server
//   8. Serving streams    a server on a byte stream pair, with shutdown
//   9. CLI                argv → exit code; `if (import.meta.main)` is the last line

import { Buffer } from "node:buffer";
import { readdir } from "node:fs/promises";
import { basename, extname, join, resolve } from "node:path";
import process from "node:process";
import type { Readable, Writable } from "node:stream";
import { setImmediate } from "node:timers";
import { pathToFileURL } from "node:url";
import { parseArgs, type ParseArgsConfig } from "node:util";

// === 1. Constants ============================================================
// Everything a reader may want to tune or look up lives here. No behaviour.

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
// A Content-Length header block longer than this is not a header block.
const MAX_HEADER_BYTES = 8 * 1024;
// MCP tool names (spec 2025-11-25, server/tools.mdx "Tool names").
const TOOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
const NEWLINE = 0x0a;

// === 2. Errors ===============================================================
// Two error types of our own: RpcError carries a JSON-RPC code to the peer,
// UsageError is a user mistake the CLI turns into exit code 2. Everything else
// uses the built-ins (TypeError, RangeError, SyntaxError).

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

function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
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
  /** A message longer than the cap was skipped; called once per such message. */
  oversize(limit: number): void;
  /** The framing was recognised from the first bytes of the stream. */
  framing?(framing: Framing): void;
}

const CONTENT_LENGTH_PREFIX = "content-length:";

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
      const text = new TextDecoder().decode(head.subarray(i, i + wanted)).toLowerCase();
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
    while (start < length) {
      const newline = chunk.indexOf(NEWLINE, start);
      if (newline === -1) {
        this.#append(chunk.subarray(start));
        return;
      }
      if (this.#skipping) {
        this.#skipping = false;
      } else if (this.#partsBytes === 0) {
        if (newline - start > this.#maxBytes) this.#handlers.oversize(this.#maxBytes);
        else this.#emit(chunk.subarray(start, newline));
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
        const end = findHeaderEnd(chunk, start, this.#parts, this.#partsBytes);
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
      this.#skipping = true;
      this.#parts = [];
      this.#partsBytes = 0;
      this.#handlers.oversize(this.#maxBytes);
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
    let end = bytes.length;
    if (end > 0 && bytes[end - 1] === 0x0d) end--; // CRLF
    if (end === 0) return;
    const text = this.#decoder.decode(end === bytes.length ? bytes : bytes.subarray(0, end));
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
function findHeaderEnd(chunk: Uint8Array, start: number, parts: Uint8Array[], partsBytes: number): number {
  // Look back at most 3 bytes into the pieces already read.
  const tail: number[] = [];
  for (let p = parts.length - 1; p >= 0 && tail.length < 3; p--) {
    const part = parts[p];
    for (let i = part.length - 1; i >= 0 && tail.length < 3; i--) tail.unshift(part[i]);
  }
  void partsBytes;
  let previous = tail.filter((byte) => byte !== 0x0d).slice(-1)[0] ?? -1;
  for (let i = start; i < chunk.length; i++) {
    const byte = chunk[i];
    if (byte === 0x0d) continue;
    if (byte === NEWLINE && previous === NEWLINE) return i + 1;
    previous = byte;
  }
  return -1;
}

/** Something bytes can be written to: a Node-style writable stream is one. */
export interface ByteSink {
  write(chunk: string | Uint8Array, callback?: (error?: Error | null) => void): boolean;
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
      this.framing === "ndjson" ? text + "\n" : `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
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

// === 4. JSON-RPC peer ========================================================
// Checks incoming messages against JSON-RPC 2.0, dispatches requests and
// notifications to the owner, matches responses to our own requests. Knows no
// MCP methods and no streams: the owner hands in texts and a send function.

/** A JSON-RPC request id (MCP forbids null). */
export type RequestId = string | number;

/** A JSON object as received. */
export type JsonObject = Record<string, unknown>;

/** Returned by a request handler that must not be answered (a cancelled request). */
export const NO_RESPONSE: unique symbol = Symbol("no response");

/** What a {@linkcode JsonRpcPeer} needs from its owner. */
export interface PeerHandlers {
  /** Writes one message text. */
  send(text: string): void;
  /** Handles a request; returns its result (or a promise of it), or throws an RpcError. */
  request(method: string, params: JsonObject, id: RequestId): unknown;
  /** Handles a notification; never answered. */
  notification(method: string, params: JsonObject): void;
}

interface PendingRequest {
  resolve(result: unknown): void;
  reject(error: Error): void;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
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

  constructor(handlers: PeerHandlers) {
    this.#handlers = handlers;
  }

  /** Handles one incoming message text. */
  receive(text: string): void {
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      this.#sendError(null, ErrorCode.ParseError, "Parse error: not valid JSON");
      return;
    }
    if (!isObject(message)) {
      const what = Array.isArray(message)
        ? "a JSON array (batches are not part of MCP since 2025-06-18)"
        : "not an object";
      this.#sendError(null, ErrorCode.InvalidRequest, `Invalid request: message is ${what}`);
      return;
    }
    const { id, method } = message;
    const hasId = "id" in message;
    if (hasId && !isRequestId(id)) {
      this.#sendError(null, ErrorCode.InvalidRequest, "Invalid request: id must be a string or a number");
      return;
    }
    const replyId = hasId ? id as RequestId : null;
    if (message.jsonrpc !== "2.0") {
      this.#sendError(replyId, ErrorCode.InvalidRequest, 'Invalid request: "jsonrpc" must be "2.0"');
      return;
    }
    if (method === undefined && hasId && ("result" in message || "error" in message)) {
      this.#settle(id as RequestId, message);
      return;
    }
    if (typeof method !== "string") {
      this.#sendError(replyId, ErrorCode.InvalidRequest, 'Invalid request: "method" must be a string');
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
      text = JSON.stringify({ jsonrpc: "2.0", id, result: result ?? {} });
    } catch (error) {
      this.#sendFailure(id, error);
      return;
    }
    this.#handlers.send(text);
  }

  #sendFailure(id: RequestId, error: unknown): void {
    if (error === NO_RESPONSE) return;
    if (error instanceof RpcError) this.#sendError(id, error.code, error.message, error.data);
    else this.#sendError(id, ErrorCode.InternalError, `Internal error: ${errorMessage(error)}`);
  }

  #sendError(id: RequestId | null, code: number, message: string, data?: unknown): void {
    if (this.#closed) return;
    const error = data === undefined ? { code, message } : { code, message, data };
    this.#handlers.send(JSON.stringify({ jsonrpc: "2.0", id, error }));
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

  /** Sends a request and resolves with its result; rejects with RpcError on an error response. */
  request(method: string, params: JsonObject | undefined, signal?: AbortSignal): Promise<unknown> {
    if (this.#closed) return Promise.reject(this.#closed);
    if (signal?.aborted) return Promise.reject(signal.reason);
    const id = ++this.#nextId;
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.#pending.delete(id);
        this.notify("notifications/cancelled", { requestId: id, reason: errorMessage(signal?.reason) });
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
      );
    });
  }

  /** Sends a notification. */
  notify(method: string, params?: JsonObject): void {
    if (this.#closed) return;
    this.#handlers.send(JSON.stringify(params ? { jsonrpc: "2.0", method, params } : { jsonrpc: "2.0", method }));
  }

  /** Ends the conversation: pending requests fail with `reason`, later sends are dropped. */
  close(reason: Error): void {
    if (this.#closed) return;
    this.#closed = reason;
    for (const pending of this.#pending.values()) pending.reject(reason);
    this.#pending.clear();
  }
}

// === 5. Schema validation ====================================================
// The JSON Schema keywords tool input schemas use, checked without compiling.
// Returns every violation as "<path> <rule> (<keyword>)"; never throws on a
// schema it does not understand (unknown keywords are ignored, as the spec says).

/** Checks `value` against a JSON Schema; returns the violations, empty when valid. */
export function validate(schema: unknown, value: unknown): string[] {
  const errors: string[] = [];
  checkSchema(schema, value, "arguments", errors);
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

function childPath(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

function brief(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? text.slice(0, 57) + "..." : text;
}

function checkSchema(schema: unknown, value: unknown, path: string, errors: string[]): void {
  if (schema === false) {
    errors.push(`${path} is not allowed (false schema)`);
    return;
  }
  if (!isObject(schema)) return; // true, or not a schema: anything goes
  const s = schema;
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    if (!types.some((type) => hasType(value, type))) {
      errors.push(`${path} must be ${types.join(" or ")}, got ${jsonType(value)} (type)`);
      return; // the other keywords would only repeat the same mistake
    }
  }
  if (Array.isArray(s.enum) && !s.enum.some((option) => deepEqual(option, value))) {
    errors.push(`${path} must be one of ${brief(s.enum)} (enum)`);
  }
  if ("const" in s && !deepEqual(s.const, value)) errors.push(`${path} must equal ${brief(s.const)} (const)`);

  if (typeof value === "number") {
    if (typeof s.minimum === "number" && value < s.minimum) errors.push(`${path} must be >= ${s.minimum} (minimum)`);
    if (typeof s.maximum === "number" && value > s.maximum) errors.push(`${path} must be <= ${s.maximum} (maximum)`);
    if (typeof s.exclusiveMinimum === "number" && value <= s.exclusiveMinimum) {
      errors.push(`${path} must be > ${s.exclusiveMinimum} (exclusiveMinimum)`);
    }
    if (typeof s.exclusiveMaximum === "number" && value >= s.exclusiveMaximum) {
      errors.push(`${path} must be < ${s.exclusiveMaximum} (exclusiveMaximum)`);
    }
    if (typeof s.multipleOf === "number" && s.multipleOf > 0 && !Number.isInteger(value / s.multipleOf)) {
      errors.push(`${path} must be a multiple of ${s.multipleOf} (multipleOf)`);
    }
  } else if (typeof value === "string") {
    if (typeof s.minLength === "number" || typeof s.maxLength === "number") {
      const length = codePointLength(value);
      if (typeof s.minLength === "number" && length < s.minLength) {
        errors.push(`${path} must be at least ${s.minLength} characters long (minLength)`);
      }
      if (typeof s.maxLength === "number" && length > s.maxLength) {
        errors.push(`${path} must be at most ${s.maxLength} characters long (maxLength)`);
      }
    }
    if (typeof s.pattern === "string") {
      const regex = compilePattern(s.pattern);
      if (regex && !regex.test(value)) errors.push(`${path} must match ${brief(s.pattern)} (pattern)`);
    }
  } else if (Array.isArray(value)) {
    if (typeof s.minItems === "number" && value.length < s.minItems) {
      errors.push(`${path} must have at least ${s.minItems} items (minItems)`);
    }
    if (typeof s.maxItems === "number" && value.length > s.maxItems) {
      errors.push(`${path} must have at most ${s.maxItems} items (maxItems)`);
    }
    // 2020-12 prefixItems, and the draft-07 tuple form of items
    const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
    for (let i = 0; i < value.length; i++) {
      const itemSchema = i < prefix.length ? prefix[i] : Array.isArray(s.items) ? s.additionalItems : s.items;
      if (itemSchema !== undefined) checkSchema(itemSchema, value[i], childPath(path, i), errors);
    }
    if (s.uniqueItems === true) {
      for (let i = 1; i < value.length; i++) {
        if (value.slice(0, i).some((earlier) => deepEqual(earlier, value[i]))) {
          errors.push(`${path} must not repeat items (uniqueItems)`);
          break;
        }
      }
    }
  } else if (isObject(value)) {
    if (Array.isArray(s.required)) {
      for (const key of s.required) {
        if (typeof key === "string" && !(key in value)) errors.push(`${childPath(path, key)} is required (required)`);
      }
    }
    const properties = isObject(s.properties) ? s.properties : undefined;
    for (const key of Object.keys(value)) {
      if (properties && key in properties) {
        checkSchema(properties[key], value[key], childPath(path, key), errors);
      } else if (s.additionalProperties === false) {
        errors.push(`${childPath(path, key)} is not an allowed property (additionalProperties)`);
      } else if (isObject(s.additionalProperties)) {
        checkSchema(s.additionalProperties, value[key], childPath(path, key), errors);
      }
    }
    const count = Object.keys(value).length;
    if (typeof s.minProperties === "number" && count < s.minProperties) {
      errors.push(`${path} must have at least ${s.minProperties} properties (minProperties)`);
    }
    if (typeof s.maxProperties === "number" && count > s.maxProperties) {
      errors.push(`${path} must have at most ${s.maxProperties} properties (maxProperties)`);
    }
  }

  if (Array.isArray(s.allOf)) { for (const sub of s.allOf) checkSchema(sub, value, path, errors); }
  if (Array.isArray(s.anyOf) && !s.anyOf.some((sub) => validatesAgainst(sub, value))) {
    errors.push(`${path} must match at least one schema of anyOf (anyOf)`);
  }
  if (Array.isArray(s.oneOf)) {
    const matches = s.oneOf.filter((sub) => validatesAgainst(sub, value)).length;
    if (matches !== 1) errors.push(`${path} must match exactly one schema of oneOf, matched ${matches} (oneOf)`);
  }
  if (s.not !== undefined && validatesAgainst(s.not, value)) {
    errors.push(`${path} must not match the schema in not (not)`);
  }
}

function validatesAgainst(schema: unknown, value: unknown): boolean {
  const errors: string[] = [];
  checkSchema(schema, value, "", errors);
  return errors.length === 0;
}

// === 6. MCP server ===========================================================
// The server role over a JSON-RPC peer: lifecycle, tools/list, tools/call with
// validation, cancellation, progress, logging and timeouts. Pure protocol: it
// is handed tools and a send function, and touches no files, streams or process.

/** What a tool's `run` receives beside its arguments. */
export interface ToolContext {
  /** Aborts on notifications/cancelled, on timeout and on shutdown. */
  readonly signal: AbortSignal;
  /** The JSON-RPC id of the tools/call request. */
  readonly requestId: RequestId;
  /** Reports progress; a no-op when the caller sent no progressToken. */
  progress(progress: number, total?: number, message?: string): void;
  /** Sends a log notification when `level` is at or above the client's level. */
  log(level: LogLevel, data: unknown): void;
  /** Asks the client to sample its LLM (sampling/createMessage). */
  sample(params: JsonObject): Promise<JsonObject>;
  /** Asks the client to ask its user (elicitation/create). */
  elicit(params: JsonObject): Promise<JsonObject>;
  /** Asks the client for its roots (roots/list). */
  roots(): Promise<{ uri: string; name?: string }[]>;
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
  // deno-lint-ignore no-explicit-any
  run(args: any, ctx: ToolContext): unknown;
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
}

const LISTED_TOOL_FIELDS = ["title", "description", "outputSchema", "annotations", "icons", "_meta"] as const;

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
  const listing: JsonObject = { name };
  for (const field of LISTED_TOOL_FIELDS) {
    if (definition[field] !== undefined) listing[field] = definition[field];
  }
  listing.inputSchema = inputSchema;
  return { name, listing, source, run: definition.run as ToolDefinition["run"] };
}

/** Options of an {@linkcode McpServer}. */
export interface ServerOptions {
  /** Tools to serve (plain definitions are checked with defineTool). */
  tools?: (Tool | ToolDefinition)[];
  /** serverInfo.name (default "mcp.ts"). */
  name?: string;
  /** serverInfo.version (default this file's VERSION). */
  version?: string;
  /** Sent in the initialize result. */
  instructions?: string;
  /** Per tool call, in ms (default 60000); 0 disables it. */
  timeout?: number;
  /** Tools per tools/list page (default 100). */
  pageSize?: number;
  /** Declare tools.listChanged (true when the tool set can change, e.g. --watch). */
  listChanged?: boolean;
  /** Diagnostics for the operator (default: dropped). */
  log?: (line: string) => void;
}

// Per-request view of the client: for the legacy era, what initialize
// negotiated; the stateless 2026-07-28 era will build one from each request's _meta.
interface ClientView {
  protocolVersion: string;
  capabilities: JsonObject;
  logLevel: number; // index in LOG_LEVELS
}

// A tools/call in flight.
interface ToolCall {
  id: RequestId;
  tool: Tool;
  deadline: number; // ms since epoch; Infinity without a timeout
  controller: AbortController | undefined; // made on first use of ctx.signal
  done: boolean; // answered, cancelled or timed out: nothing more may be sent for it
  progressToken: RequestId | undefined;
  lastProgress: number;
  resolve(result: unknown): void; // answers the request (or, with NO_RESPONSE, drops it)
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

function errorResult(text: string): JsonObject {
  return { content: [{ type: "text", text }], isError: true };
}

/**
 * The server side of one MCP connection. Feed it message texts with
 * `receive`; it answers through the `send` function it was made with.
 */
export class McpServer {
  #options: ServerOptions;
  #peer: JsonRpcPeer;
  #tools: Tool[] = [];
  #toolsByName = new Map<string, Tool>();
  #client: ClientView = {
    protocolVersion: LATEST_PROTOCOL_VERSION,
    capabilities: {},
    logLevel: LOG_LEVELS.indexOf(DEFAULT_LOG_LEVEL),
  };
  #initialized = false;
  #calls = new Map<RequestId, ToolCall>();
  #sweepTimer: ReturnType<typeof setTimeout> | undefined;
  #sweepAt = Infinity;
  #idle: (() => void)[] = [];
  #timeout: number;
  #pageSize: number;
  #whenWritten: (callback: () => void) => void;

  constructor(options: ServerOptions, send: (text: string) => void, whenWritten?: (callback: () => void) => void) {
    this.#options = options;
    this.#whenWritten = whenWritten ?? setImmediate;
    this.#timeout = options.timeout ?? DEFAULT_TOOL_TIMEOUT_MS;
    this.#pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
    this.#peer = new JsonRpcPeer({
      send,
      request: (method, params, id) => this.#request(method, params, id),
      notification: (method, params) => this.#notification(method, params),
    });
    this.setTools(options.tools ?? []);
  }

  /** Replaces the served tools; with listChanged, tells the client. Calls in flight keep their tool. */
  setTools(tools: (Tool | ToolDefinition)[]): void {
    const byName = new Map<string, Tool>();
    for (const item of tools) {
      const tool = "listing" in item && "source" in item ? item as Tool : defineTool(item);
      const other = byName.get(tool.name);
      if (other) {
        throw new TypeError(`two tools are named "${tool.name}": ${other.source} and ${tool.source}`);
      }
      byName.set(tool.name, tool);
    }
    const hadTools = this.#tools.length > 0 || this.#initialized;
    this.#tools = [...byName.values()];
    this.#toolsByName = byName;
    if (hadTools && this.#options.listChanged && this.#initialized) {
      this.#peer.notify("notifications/tools/list_changed");
    }
  }

  /** Handles one incoming message text. */
  receive(text: string): void {
    this.#peer.receive(text);
  }

  /** Answers a message that was dropped before parsing (e.g. an over-long line). */
  reject(code: number, message: string): void {
    this.#peer.reject(code, message);
  }

  /** The number of tool calls in flight. */
  get pending(): number {
    return this.#calls.size;
  }

  /** Resolves when no tool call is in flight. */
  idle(): Promise<void> {
    if (this.#calls.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Aborts every call in flight (they get no response) and stops the peer. */
  close(reason: Error = new Error("server shut down")): void {
    for (const call of this.#calls.values()) {
      call.done = true;
      call.controller?.abort(reason);
      call.resolve(NO_RESPONSE);
    }
    this.#calls.clear();
    this.#settleIdle();
    clearTimeout(this.#sweepTimer);
    this.#peer.close(reason);
  }

  // --- dispatch -------------------------------------------------------------

  #request(method: string, params: JsonObject, id: RequestId): unknown {
    switch (method) {
      case "initialize":
        return this.#initialize(params);
      case "ping":
        return {};
      case "tools/list":
        return this.#listTools(params);
      case "tools/call":
        return this.#callTool(params, id);
      case "logging/setLevel":
        return this.#setLogLevel(params);
      default:
        throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${method}`);
    }
  }

  #notification(method: string, params: JsonObject): void {
    switch (method) {
      case "notifications/initialized":
        this.#initialized = true;
        return;
      case "notifications/cancelled": {
        const call = this.#calls.get(params.requestId as RequestId);
        if (!call) return; // unknown or finished: MAY be ignored (cancellation.mdx)
        // cancellation.mdx: the cancelled request gets no response.
        this.#finish(call, NO_RESPONSE);
        call.controller?.abort(
          new Error(typeof params.reason === "string" ? params.reason : "cancelled by the client"),
        );
        return;
      }
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
    this.#client.protocolVersion = version;
    this.#client.capabilities = isObject(params.capabilities) ? params.capabilities : {};
    const result: JsonObject = {
      protocolVersion: version,
      capabilities: this.capabilities(),
      serverInfo: { name: this.#options.name ?? "mcp.ts", version: this.#options.version ?? VERSION },
    };
    if (this.#options.instructions) result.instructions = this.#options.instructions;
    return result;
  }

  /** The capabilities this server declares: only what it really does. */
  capabilities(): JsonObject {
    return { tools: { listChanged: this.#options.listChanged === true }, logging: {} };
  }

  #setLogLevel(params: JsonObject): JsonObject {
    const level = LOG_LEVELS.indexOf(params.level as LogLevel);
    if (level < 0) {
      throw new RpcError(ErrorCode.InvalidParams, `Invalid params: level must be one of ${LOG_LEVELS.join(", ")}`);
    }
    this.#client.logLevel = level;
    return {};
  }

  // --- tools ----------------------------------------------------------------

  #listTools(params: JsonObject): JsonObject {
    const start = params.cursor === undefined ? 0 : decodeCursor(params.cursor, this.#tools.length);
    const end = start + this.#pageSize;
    const result: JsonObject = { tools: this.#tools.slice(start, end).map((tool) => tool.listing) };
    if (end < this.#tools.length) result.nextCursor = encodeCursor(end);
    return result;
  }

  #callTool(params: JsonObject, id: RequestId): unknown {
    const { name } = params;
    if (typeof name !== "string") {
      throw new RpcError(ErrorCode.InvalidParams, "Invalid params: tools/call needs a name");
    }
    const tool = this.#toolsByName.get(name);
    if (!tool) throw new RpcError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    const args = params.arguments ?? {};
    if (!isObject(args)) throw new RpcError(ErrorCode.InvalidParams, "Invalid params: arguments must be an object");
    // spec 2025-11-25 (SEP-1303): input validation errors are tool execution errors.
    const violations = validate(tool.listing.inputSchema, args);
    if (violations.length > 0) {
      return errorResult(`Invalid arguments for tool "${name}": ${violations.join("; ")}`);
    }
    if (this.#calls.has(id)) {
      // A reused id would make cancellation ambiguous; the spec forbids it.
      throw new RpcError(ErrorCode.InvalidRequest, `Invalid request: id ${JSON.stringify(id)} is already in use`);
    }
    const meta = isObject(params._meta) ? params._meta : undefined;
    const token = meta?.progressToken;
    const call: ToolCall = {
      id,
      tool,
      deadline: this.#timeout > 0 ? Date.now() + this.#timeout : Infinity,
      controller: undefined,
      done: false,
      progressToken: isRequestId(token) ? token : undefined,
      lastProgress: -Infinity,
      resolve: () => {},
    };
    let value: unknown;
    try {
      value = tool.run(args, this.#context(call));
    } catch (error) {
      call.done = true;
      return errorResult(errorMessage(error));
    }
    if (!(value instanceof Promise)) {
      // A synchronous tool: no promise, no bookkeeping.
      call.done = true;
      return toCallToolResult(value);
    }
    return new Promise((resolve) => {
      call.resolve = resolve;
      this.#calls.set(id, call);
      this.#scheduleSweep(call.deadline);
      value.then(
        (settled) => this.#finish(call, toCallToolResult(settled)),
        (error) => this.#finish(call, errorResult(errorMessage(error))),
      );
    });
  }

  // Settles a call once: with its result, its timeout, or NO_RESPONSE when cancelled.
  #finish(call: ToolCall, result: unknown): void {
    if (call.done) return;
    call.done = true;
    const settle = () => {
      this.#calls.delete(call.id);
      call.resolve(result);
      if (this.#calls.size === 0) this.#settleIdle();
    };
    // SDK clients handle notifications a microtask late but responses at once, so a
    // response read in the same chunk as the last progress notification overtakes it:
    // answer a call that reported progress a moment after that notification is written.
    if (call.lastProgress !== -Infinity && result !== NO_RESPONSE) {
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

  #context(call: ToolCall): ToolContext {
    // deno-lint-ignore no-this-alias
    const server = this;
    return {
      requestId: call.id,
      // Most tools never look at the signal: make the controller on first use.
      get signal() {
        call.controller ??= new AbortController();
        return call.controller.signal;
      },
      progress(progress: number, total?: number, message?: string) {
        // progress.mdx: only with a token, strictly increasing, and not after the response.
        if (call.progressToken === undefined || call.done || !(progress > call.lastProgress)) return;
        call.lastProgress = progress;
        const params: JsonObject = { progressToken: call.progressToken, progress };
        if (total !== undefined) params.total = total;
        if (message !== undefined) params.message = message;
        server.#peer.notify("notifications/progress", params);
      },
      log(level: LogLevel, data: unknown) {
        const index = LOG_LEVELS.indexOf(level);
        if (call.done || index < server.#client.logLevel) return;
        server.#peer.notify("notifications/message", {
          level: index < 0 ? "info" : level,
          logger: call.tool.name,
          data,
        });
      },
      sample: (params: JsonObject) =>
        this.#clientRequest(call, "sampling", "sampling/createMessage", params) as Promise<JsonObject>,
      elicit: (params: JsonObject) =>
        this.#clientRequest(call, "elicitation", "elicitation/create", params) as Promise<JsonObject>,
      roots: async () => {
        const result = await this.#clientRequest(call, "roots", "roots/list", {});
        return (isObject(result) && Array.isArray(result.roots) ? result.roots : []) as {
          uri: string;
          name?: string;
        }[];
      },
    };
  }

  // Server→client requests made on behalf of a tool call; they end with it.
  async #clientRequest(call: ToolCall, capability: string, method: string, params: JsonObject): Promise<unknown> {
    if (!isObject(this.#client.capabilities[capability])) {
      throw new Error(`Cannot send ${method}: the client did not declare the "${capability}" capability`);
    }
    if (call.done) throw new Error(`Cannot send ${method}: the tool call has ended`);
    call.controller ??= new AbortController();
    return await this.#peer.request(method, params, call.controller.signal);
  }

  // One timer for all deadlines: a timer per call costs a third of throughput.
  #scheduleSweep(deadline: number): void {
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
    for (const call of this.#calls.values()) {
      if (call.deadline <= now) {
        const reason = new DOMException(`Tool "${call.tool.name}" timed out after ${this.#timeout} ms`, "TimeoutError");
        this.#finish(call, errorResult(reason.message));
        call.controller?.abort(reason);
      } else if (call.deadline < next) {
        next = call.deadline;
      }
    }
    if (next !== Infinity) this.#scheduleSweep(next);
  }
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

// === 7. Plugins ==============================================================
// Turns a directory into tools: which files count, importing modules, shaping
// what they export. The only file-system and import() I/O of the server.

/** A file of DIR that could not become a tool. */
export interface PluginError {
  file: string;
  message: string;
}

const MODULE_EXTENSIONS = new Set([".ts", ".js", ".mjs", ".mts"]);

/** Whether a file name in DIR may be a tool (contract: "Files starting with . or _ ..."). */
export function isPluginFile(name: string): boolean {
  if (name.startsWith(".") || name.startsWith("_")) return false;
  if (name.endsWith(".json") || name.endsWith(".md") || name.endsWith(".d.ts")) return false;
  return !/_test\.[^.]+$/.test(name);
}

/** Loads the tools of DIR. Files that fail are returned as errors; the rest load. */
export async function loadTools(dir: string): Promise<{ tools: Tool[]; errors: PluginError[] }> {
  const root = resolve(dir);
  const entries = await readdir(root, { withFileTypes: true });
  const files = entries
    .filter((entry) => (entry.isFile() || entry.isSymbolicLink()) && isPluginFile(entry.name))
    .map((entry) => entry.name)
    .sort();
  const errors: PluginError[] = [];
  const loaded = await Promise.all(files.map(async (name): Promise<Tool[]> => {
    const file = join(root, name);
    const extension = extname(name);
    if (!MODULE_EXTENSIONS.has(extension)) return []; // executable tools arrive with their own loader
    try {
      const module = await import(pathToFileURL(file).href);
      return moduleTools(module, basename(name, extension), join(dir, name));
    } catch (error) {
      errors.push({ file: join(dir, name), message: errorMessage(error).split("\n")[0] });
      return [];
    }
  }));
  return { tools: loaded.flat(), errors };
}

function moduleTools(module: JsonObject, baseName: string, source: string): Tool[] {
  const exported = module.default;
  if (exported === undefined) {
    throw new TypeError("no default export (export default { description, inputSchema, run })");
  }
  if (!Array.isArray(exported)) return [defineTool(exported, baseName, source)];
  // In an array each tool names itself; a lone one may still borrow the file's name.
  return exported.map((item) => defineTool(item, exported.length === 1 ? baseName : undefined, source));
}

/** Two tools with one name: names both files. */
export function findDuplicate(tools: Tool[]): string | undefined {
  const seen = new Map<string, Tool>();
  for (const tool of tools) {
    const other = seen.get(tool.name);
    if (other) return `two tools are named "${tool.name}": ${other.source} and ${tool.source}`;
    seen.set(tool.name, tool);
  }
  return undefined;
}

// === 8. Serving streams ======================================================
// A server on a byte-stream pair: framing in both directions, backpressure,
// tracing, and the end of the conversation (EOF, a closed output, shutdown).

/** Options of {@linkcode serve}. */
export interface ServeOptions extends ServerOptions {
  /** Where requests come from (default process.stdin). */
  input?: Readable;
  /** Where responses go (default process.stdout). */
  output?: ByteSink & Partial<Pick<Writable, "once" | "on">>;
  /** Longest message accepted, in bytes (default 4 MiB). */
  maxLineBytes?: number;
  /** Writes every frame in (`<`) and out (`>`) to `log`. */
  trace?: boolean;
}

/** A running server, as returned by {@linkcode serve}. */
export interface ServeHandle {
  /** The protocol server, e.g. to replace its tools. */
  server: McpServer;
  /** Resolves when the conversation is over and everything is written. */
  done: Promise<void>;
  /** Stops reading, waits up to `graceMs` for calls in flight, then aborts them and finishes. */
  shutdown(graceMs?: number): Promise<void>;
}

/** Serves tools over a byte-stream pair (stdin/stdout by default) until the input ends. */
export function serve(options: ServeOptions = {}): ServeHandle {
  const input = options.input ?? process.stdin;
  const output = options.output ?? process.stdout;
  const log = options.log ?? (() => {});
  const maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  let outputClosed = false;

  const writer = new FrameWriter((text, written) => {
    if (outputClosed) return true;
    return written ? output.write(text, written) : output.write(text);
  });
  const send = options.trace
    ? (text: string) => {
      log(`> ${text}`);
      writer.send(text);
    }
    : (text: string) => writer.send(text);
  const server = new McpServer(options, send, (callback) => writer.whenWritten(callback));
  const reader = new FrameReader({
    message: options.trace
      ? (text) => {
        log(`< ${text}`);
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

  // Backpressure: stop reading while the output cannot keep up.
  writer.onBackpressure = () => {
    if (!output.once) return;
    input.pause();
    output.once("drain", () => input.resume());
  };

  let finished = false;
  let resolveDone!: () => void;
  const done = new Promise<void>((resolve) => resolveDone = resolve);

  const finish = () => {
    if (finished) return;
    finished = true;
    input.off("data", onData);
    input.off("end", onEnd);
    server.close();
    writer.flush();
    if (outputClosed) {
      resolveDone();
      return;
    }
    // Resolve only once the last bytes are handed to the OS.
    output.write("", () => resolveDone());
  };
  const onData = (chunk: Uint8Array | string) => {
    reader.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  };
  const onEnd = () => {
    reader.end();
    // EOF: answer what is in flight, then finish.
    server.idle().then(() => setImmediate(finish));
  };
  input.on("data", onData);
  input.on("end", onEnd);
  input.on("error", onEnd);
  output.on?.("error", () => {
    // A closed stdout (EPIPE): nobody is listening; end quietly.
    outputClosed = true;
    finish();
  });

  const shutdown = async (graceMs = SHUTDOWN_GRACE_MS) => {
    input.off("data", onData);
    input.pause();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      server.idle(),
      new Promise<void>((resolve) => timer = setTimeout(resolve, graceMs)),
    ]);
    clearTimeout(timer);
    finish();
    await done;
  };

  return { server, done, shutdown };
}

// === 9. CLI ==================================================================
// argv in, exit code out. Parses flags, loads plugins, wires process streams
// and signals. The only place that touches process-wide state.

const HELP: Record<string, string> = {
  main: `mcp.ts ${VERSION} — the Model Context Protocol from a terminal

Usage:
  mcp.ts serve [DIR] [options]     serve the tool plugins in DIR (default ./tools) on stdin/stdout
  mcp.ts help [command]            this text, or a command's
  mcp.ts --version                 the version

Run it with:  deno run -A mcp.ts …   |   bun mcp.ts …   |   node mcp.ts … (Node >= 22.18)
`,
  serve: `Usage: mcp.ts serve [DIR] [options]

Serves every tool plugin in DIR (default ./tools) as an MCP server on stdin/stdout
(newline-delimited JSON-RPC; Content-Length framing is recognised too).

Options:
  --name NAME              serverInfo.name (default "mcp.ts")
  --server-version V       serverInfo.version (default ${VERSION})
  --instructions TEXT      instructions sent in the initialize result
  --timeout MS             per tool call (default ${DEFAULT_TOOL_TIMEOUT_MS}; 0 = none)
  --max-line-bytes N       longest message accepted (default ${DEFAULT_MAX_LINE_BYTES})
  --page-size N            tools per tools/list page (default ${DEFAULT_PAGE_SIZE})
  --trace                  every frame in (<) and out (>) on stderr
  -h, --help               this text
`,
};

/** The process pieces the CLI uses; tests may pass their own. */
export interface CliIo {
  stdin: Readable;
  stdout: Writable;
  stderr: { write(text: string): unknown };
}

function positiveInteger(flag: string, text: string | undefined, fallback: number, allowZero = false): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < (allowZero ? 0 : 1)) {
    throw new UsageError(`${flag} needs a ${allowZero ? "non-negative" : "positive"} integer, got "${text}"`);
  }
  return value;
}

function parseFlags(args: string[], options: NonNullable<ParseArgsConfig["options"]>, command: string) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    const message = errorMessage(error).replace(/\. To specify a positional.*$/s, "");
    throw new UsageError(`${message} (see: mcp.ts help ${command})`);
  }
}

async function runServe(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(args, {
    name: { type: "string" },
    "server-version": { type: "string" },
    instructions: { type: "string" },
    timeout: { type: "string" },
    "max-line-bytes": { type: "string" },
    "page-size": { type: "string" },
    trace: { type: "boolean" },
    help: { type: "boolean", short: "h" },
  }, "serve");
  if (values.help) {
    io.stderr.write(HELP.serve);
    return 0;
  }
  if (positionals.length > 1) throw new UsageError(`serve takes one directory, got ${positionals.length}`);
  const dir = positionals[0] ?? "./tools";
  const timeout = positiveInteger("--timeout", values.timeout as string | undefined, DEFAULT_TOOL_TIMEOUT_MS, true);
  const maxLineBytes = positiveInteger(
    "--max-line-bytes",
    values["max-line-bytes"] as string | undefined,
    DEFAULT_MAX_LINE_BYTES,
  );
  const pageSize = positiveInteger("--page-size", values["page-size"] as string | undefined, DEFAULT_PAGE_SIZE);
  const log = (line: string) => void io.stderr.write(`mcp: ${line}\n`);

  // Plugins run in this process: keep their console output off the protocol stream.
  const redirected = redirectConsoleToStderr(io);
  try {
    let loaded;
    try {
      loaded = await loadTools(dir);
    } catch (error) {
      if ((error as { code?: string }).code === "ENOENT") {
        throw new UsageError(`Cannot serve "${dir}": no such directory`);
      }
      throw error;
    }
    for (const failure of loaded.errors) log(`Cannot load ${failure.file}: ${failure.message}`);
    const duplicate = findDuplicate(loaded.tools);
    if (duplicate) {
      log(`Cannot serve "${dir}": ${duplicate}; rename one of them`);
      return 1;
    }
    if (loaded.tools.length === 0) log(`no tools in "${dir}"; serving an empty list`);
    const handle = serve({
      tools: loaded.tools,
      input: io.stdin,
      output: redirected.protocol,
      name: values.name as string | undefined,
      version: values["server-version"] as string | undefined,
      instructions: values.instructions as string | undefined,
      timeout,
      maxLineBytes,
      pageSize,
      trace: values.trace as boolean | undefined,
      log: values.trace ? (line) => void io.stderr.write(line + "\n") : log,
    });
    const onSignal = () => void handle.shutdown();
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    await handle.done;
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    // Stray plugin timers must not keep a finished server alive. The output is
    // flushed by now, so exiting cannot cut it off.
    io.stdin.destroy?.();
    setTimeout(() => process.exit(), 200).unref();
    return 0;
  } finally {
    redirected.restore();
  }
}

function redirectConsoleToStderr(io: CliIo): { protocol: Writable; restore(): void } {
  const saved = { log: console.log, info: console.info, debug: console.debug, warn: console.warn };
  const toStderr = (...data: unknown[]) => console.error(...data);
  console.log =
    console.info =
    console.debug =
    console.warn =
      toStderr;
  // Node's console writes through process.stdout.write: send that to stderr as
  // well, keeping the real write for the protocol.
  const stdout = io.stdout;
  const realWrite = stdout.write;
  let protocol: CliIo["stdout"] = stdout;
  if (stdout === process.stdout) {
    const write = realWrite.bind(stdout);
    protocol = {
      write,
      once: (event: string, listener: () => void) => stdout.once(event, listener),
      on: (event: string, listener: () => void) => stdout.on(event, listener),
    } as unknown as Writable;
    stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) =>
      process.stderr.write(chunk, ...(rest as []))) as typeof stdout.write;
  }
  return {
    protocol,
    restore() {
      Object.assign(console, saved);
      stdout.write = realWrite;
    },
  };
}

/** Runs the CLI with `argv` (without the runtime and script) and returns the exit code. */
export async function main(argv: string[], io?: CliIo): Promise<number> {
  const cli: CliIo = io ?? { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr };
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case "serve":
        return await runServe(rest, cli);
      case undefined:
      case "help":
      case "--help":
      case "-h": {
        const topic = command === "help" ? rest[0] : undefined;
        if (topic !== undefined && !(topic in HELP)) throw new UsageError(`no help for "${topic}"`);
        if (command === undefined) {
          cli.stderr.write(HELP.main);
          return 2;
        }
        cli.stdout.write(HELP[topic ?? "main"]);
        return 0;
      }
      case "--version":
      case "-V":
        cli.stdout.write(`mcp.ts ${VERSION}\n`);
        return 0;
      default:
        throw new UsageError(`unknown command "${command}" (commands: serve, help)`);
    }
  } catch (error) {
    cli.stderr.write(`mcp: ${describeFailure(error)}\n`);
    return error instanceof UsageError ? 2 : 1;
  }
}

function describeFailure(error: unknown): string {
  const name = (error as { name?: string })?.name;
  // Deno without -A: it cannot prompt when stdio is not a terminal.
  if (name === "NotCapable" || name === "PermissionDenied") {
    return `${errorMessage(error).split("\n")[0]}; run it as: deno run -A mcp.ts …`;
  }
  return errorMessage(error);
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2));
