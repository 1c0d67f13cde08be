// A hand-written fake Redis server (RESP2) for tests: it never imports mcp.ts, so a bug in our client cannot hide in a
// shared parser. Runs unchanged under node, deno (-A) and bun.
//
//   fake_redis.ts [ok|slow|split|flaky|garbage|hang] [PORT]
//
// Listens on 127.0.0.1:PORT (default 0: any free port) and prints `listening redis://127.0.0.1:PORT` as its first
// stdout line, then one JSON line per command received, `{"conn":N,"cmd":["SET","k","v"]}` (N counts connections
// from 1; AUTH's arguments, and HELLO's after AUTH, are printed as "<redacted>"); `{"conn":N,"protocolError":…}` for
// a malformed frame (answered `-ERR Protocol error: …` and closed, as Redis does); `{"event":"down"}` and
// `{"event":"up"}` around an outage (below). Arrays of bulk strings are parsed across TCP chunks and pipelined;
// inline commands (`PING\r\n`, with Redis's quoting) are accepted for manual testing (nc, telnet).
//
// A real in-memory keyspace, 16 databases, expiry in ms (checked on access and by a 100 ms sweep). Replies are byte
// for byte those of Redis 7.0 for: PING ECHO AUTH HELLO SELECT CLIENT(SETNAME GETNAME ID INFO LIST; other
// subcommands +OK) QUIT RESET GET SET(EX PX EXAT PXAT KEEPTTL NX XX GET) MGET MSET DEL EXISTS TYPE EXPIRE PEXPIRE
// EXPIREAT PEXPIREAT TTL PTTL PERSIST INCR DECR INCRBY DECRBY KEYS SCAN ZADD(NX XX GT LT CH INCR) ZINCRBY ZREM ZCARD
// ZSCORE ZRANK ZREVRANK ZCOUNT ZRANGE(BYSCORE REV LIMIT WITHSCORES) ZREVRANGE ZRANGEBYSCORE ZREVRANGEBYSCORE
// ZREMRANGEBYSCORE HSET HGET HDEL HGETALL HLEN HEXISTS HMGET FLUSHALL FLUSHDB DBSIZE INFO PUBLISH (P)SUBSCRIBE
// (P)UNSUBSCRIBE, with Redis's errors (unknown command, arity, WRONGTYPE, NOAUTH, subscribed context). Known
// differences: KEYS/SCAN/HGETALL list in insertion order (SCAN returns everything at cursor 0, COUNT ignored); INFO
// is short; HELLO 3 is refused (-NOPROTO: this fake speaks RESP2 only); no BYLEX, EVAL, MULTI, lists or sets;
// CLIENT SETINFO is +OK (as 7.2); a line or bulk not ended by CRLF is a protocol error (Redis skips two bytes
// unchecked); HELLO says version 7.0.0.
//
// FAKE_REDIS_PASSWORD (and FAKE_REDIS_USER, default "default") require AUTH [user] pass: until then every command
// but AUTH, HELLO, QUIT and RESET answers -NOAUTH, a wrong pair -WRONGPASS.
//
// Modes: ok (as above); slow (every reply 200 ms late, in order); split (every reply written one byte at a time,
// setImmediate between); flaky (each connection closed after its every 5th command, once answered); garbage (the
// first command of a connection answered `HTTP/1.1 200 OK\r\n\r\n`, then closed); hang (reads, never answers).
//
// Outage ("Redis went away and came back", keys kept): SIGUSR1, or the command `DEBUG DOWN [ms]` (answered +OK
// first, for runtimes without signals), closes every connection and stops listening for FAKE_REDIS_DOWN_MS
// (default 1000) or ms, then listens again on the same port. `DEBUG SLEEP seconds` holds that connection's replies.
// SIGTERM and SIGINT exit 0; stdin is not read (its end does not stop the server).
import { Buffer } from "node:buffer";
import { createServer, type Server, type Socket } from "node:net";
import process from "node:process";
import { setImmediate } from "node:timers";

const MODES = ["ok", "slow", "split", "flaky", "garbage", "hang"];
let mode = process.argv[2] ?? "ok";
let portArgument = process.argv[3];
if (/^\d+$/.test(mode) && portArgument === undefined) [mode, portArgument] = ["ok", mode];
if (!MODES.includes(mode)) {
  process.stderr.write(`fake_redis.ts: unknown mode "${mode}" (one of ${MODES.join(", ")})\n`);
  process.exit(2);
}
const password = process.env.FAKE_REDIS_PASSWORD || undefined;
const username = process.env.FAKE_REDIS_USER || "default";
const defaultDownMs = Number(process.env.FAKE_REDIS_DOWN_MS || 1000);
const VERSION = "7.0.0";
const startedAt = Date.now();
const LLONG_MAX = 2n ** 63n - 1n;
const LLONG_MIN = -(2n ** 63n);
const INLINE_MAX = 64 * 1024; // PROTO_INLINE_MAX_SIZE
const BULK_MAX = 512 * 1024 * 1024; // proto-max-bulk-len

// --- Replies, as latin1 strings (one char per byte, so binary-safe and lengths are byte counts) ---

const OK = "+OK\r\n";
const NIL = "$-1\r\n";
const error = (message: string) => `-${message.replace(/[\r\n]/g, " ")}\r\n`;
const integer = (n: number | bigint) => `:${n}\r\n`;
const bulk = (s: string | null) => s === null ? NIL : `$${s.length}\r\n${s}\r\n`;
const array = (items: string[]) => `*${items.length}\r\n${items.join("")}`;
const bulks = (items: (string | null)[]) => array(items.map(bulk));
const SYNTAX = error("ERR syntax error");
const NOT_INTEGER = error("ERR value is not an integer or out of range");
const NOT_FLOAT = error("ERR value is not a valid float");
const NOT_RANGE = error("ERR min or max is not a float");
const WRONGTYPE = error("WRONGTYPE Operation against a key holding the wrong kind of value");
const WRONGPASS = error("WRONGPASS invalid username-password pair or user is disabled.");
const arity = (name: string) => error(`ERR wrong number of arguments for '${name}' command`);
/** printf's %.128s of a C string. */
const c128 = (s: string) => s.split("\0")[0].slice(0, 128);
const utf8 = (s: string) => Buffer.from(s, "latin1").toString("utf8");
const log = (line: unknown) => process.stdout.write(JSON.stringify(line) + "\n");

// --- Numbers as Redis reads and writes them ---

/** string2ll: no spaces, no '+', no leading zeros, within 64 bits. */
function parseInteger(s: string): bigint | null {
  if (s.length > 20 || !/^(0|-?[1-9][0-9]*)$/.test(s)) return null;
  const n = BigInt(s);
  return n < LLONG_MIN || n > LLONG_MAX ? null : n;
}

const FLOAT = /^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity)$/i;
const HEX_FLOAT = /^([+-]?)0x([0-9a-f]*)\.?([0-9a-f]*)(?:p([+-]?[0-9]+))?$/i;

/** The number strtod reads from all of s (decimal, hex, inf), or null; ±inf for an overflow. */
function strtod(s: string): number | null {
  if (FLOAT.test(s)) return /inf/i.test(s) ? (s[0] === "-" ? -Infinity : Infinity) : Number(s);
  const hex = HEX_FLOAT.exec(s);
  if (hex === null || hex[2] + hex[3] === "") return null;
  const mantissa = parseInt(hex[2] + hex[3], 16) / 16 ** hex[3].length;
  const value = mantissa * 2 ** Number(hex[4] ?? 0);
  return hex[1] === "-" ? -value : value;
}
const isSpace = (c: string) => c === " " || (c >= "\t" && c <= "\r");

/** getDoubleFromObject: the whole string is a number (strtod's decimal forms), not NaN, no overflow/underflow. */
function parseDouble(s: string): number | null {
  const value = strtod(s);
  if (value === null) return null;
  if (!Number.isFinite(value) && !/inf/i.test(s)) return null; // ERANGE
  if (value === 0 && !HEX_FLOAT.test(s) && /[1-9]/.test(s.replace(/[eE].*$/, ""))) return null; // underflow to zero
  return value;
}

/** A bare strtod whose end is checked (zslParseRange): leading spaces and "" (0) pass, overflow is ±inf. */
function parseLaxDouble(s: string): number | null {
  if (s === "") return 0;
  let start = 0;
  while (start < s.length && isSpace(s[start])) start++;
  return strtod(s.slice(start));
}

/** printf("%.17g"), as Redis 7.0 writes a score. */
function formatScore(d: number): string {
  if (d === Infinity) return "inf";
  if (d === -Infinity) return "-inf";
  if (d === 0) return Object.is(d, -0) ? "-0" : "0";
  const [mantissa, exponentText] = d.toExponential(16).split("e");
  const exponent = Number(exponentText);
  const trim = (s: string) => s.includes(".") ? s.replace(/\.?0+$/, "") : s;
  if (exponent < -4 || exponent >= 17) {
    return `${trim(mantissa)}e${exponent < 0 ? "-" : "+"}${String(Math.abs(exponent)).padStart(2, "0")}`;
  }
  return trim(d.toFixed(16 - exponent));
}

// --- Glob patterns (stringmatchlen: * ? [abc] [^a] [a-z] \x) ---

function globMatch(pattern: string, text: string): boolean {
  const stop = { longer: false };
  return matchFrom(pattern, 0, text, 0, stop);
}

function matchFrom(pattern: string, p: number, text: string, s: number, stop: { longer: boolean }): boolean {
  const at = (i: number) => i < pattern.length ? pattern.charCodeAt(i) : 0;
  let patternLength = pattern.length - p;
  let textLength = text.length - s;
  while (patternLength > 0 && textLength > 0) {
    const c = pattern[p];
    if (c === "*") {
      while (patternLength > 0 && pattern[p + 1] === "*") p++, patternLength--;
      if (patternLength === 1) return true;
      while (textLength > 0) {
        if (matchFrom(pattern, p + 1, text, s, stop)) return true;
        if (stop.longer) return false;
        s++, textLength--;
      }
      stop.longer = true;
      return false;
    } else if (c === "?") {
      s++, textLength--;
    } else if (c === "[") {
      p++, patternLength--;
      const not = pattern[p] === "^";
      if (not) p++, patternLength--;
      let match = false;
      const t = text.charCodeAt(s);
      for (;;) {
        if (pattern[p] === "\\" && patternLength >= 2) {
          p++, patternLength--;
          if (at(p) === t) match = true;
        } else if (pattern[p] === "]") {
          break;
        } else if (patternLength === 0) {
          p--, patternLength++;
          break;
        } else if (patternLength >= 3 && pattern[p + 1] === "-") {
          let start = at(p), end = at(p + 2);
          if (start > end) [start, end] = [end, start];
          p += 2, patternLength -= 2;
          if (t >= start && t <= end) match = true;
        } else if (at(p) === t) {
          match = true;
        }
        p++, patternLength--;
      }
      if (not) match = !match;
      if (!match) return false;
      s++, textLength--;
    } else {
      if (c === "\\" && patternLength >= 2) p++, patternLength--;
      if (at(p) !== text.charCodeAt(s)) return false;
      s++, textLength--;
    }
    p++, patternLength--;
    if (textLength === 0) {
      while (pattern[p] === "*") p++, patternLength--;
      break;
    }
  }
  return patternLength === 0 && textLength === 0;
}

// --- The keyspace ---

type Entry =
  & { expireAt: number | undefined }
  & ({ type: "string"; value: string } | { type: "zset"; value: Map<string, number> } | {
    type: "hash";
    value: Map<string, string>;
  });
const dbs: Map<string, Entry>[] = Array.from({ length: 16 }, () => new Map());
const expired = (entry: Entry, now = Date.now()) => entry.expireAt !== undefined && now > entry.expireAt;

function lookup(conn: Conn, key: string): Entry | undefined {
  const db = dbs[conn.db];
  const entry = db.get(key);
  if (entry && expired(entry)) {
    db.delete(key);
    return undefined;
  }
  return entry;
}

setInterval(() => {
  const now = Date.now();
  for (const db of dbs) for (const [key, entry] of db) if (expired(entry, now)) db.delete(key);
}, 100);

/** Members by score, then bytewise. */
function sortedMembers(zset: Map<string, number>): [string, number][] {
  return [...zset].sort(([a, x], [b, y]) => x - y || (a < b ? -1 : a > b ? 1 : 0));
}

// --- Connections ---

type Item = string[] | { protocolError: string };
type Conn = {
  id: number;
  socket: Socket;
  input: Buffer;
  db: number;
  authed: boolean;
  name: string | null;
  channels: Set<string>;
  patterns: Set<string>;
  pending: Item[]; // parsed while blocked (DEBUG SLEEP)
  blocked: boolean;
  closeWhenUnblocked: boolean;
  broken: boolean; // a protocol error was read: nothing after it is
  closing: boolean;
  commands: number;
  splitQueue: (Buffer | null)[]; // null: end the connection
  splitAt: number;
  splitBusy: boolean;
};
const conns = new Set<Conn>();
const channelSubscribers = new Map<string, Set<Conn>>();
const patternSubscribers = new Map<string, Set<Conn>>();
let connections = 0;
const subscribed = (conn: Conn) => conn.channels.size + conn.patterns.size > 0;
const subscriptions = (conn: Conn) => conn.channels.size + conn.patterns.size;

function send(conn: Conn, data: string): void {
  if (conn.closing || data === "") return;
  if (mode === "slow") setTimeout(() => write(conn, data), 200);
  else if (mode === "split") {
    conn.splitQueue.push(Buffer.from(data, "latin1"));
    pumpSplit(conn);
  } else write(conn, data);
}

function write(conn: Conn, data: string): void {
  if (!conn.socket.destroyed) conn.socket.write(Buffer.from(data, "latin1"));
}

function pumpSplit(conn: Conn): void {
  if (conn.splitBusy) return;
  conn.splitBusy = true;
  const step = () => {
    const head = conn.splitQueue[0];
    if (conn.socket.destroyed || head === undefined) {
      conn.splitBusy = false;
      return;
    }
    if (head === null) {
      conn.splitQueue.length = 0;
      conn.splitBusy = false;
      endSocket(conn);
      return;
    }
    const byte = head.subarray(conn.splitAt, conn.splitAt + 1);
    if (++conn.splitAt >= head.length) conn.splitQueue.shift(), conn.splitAt = 0;
    conn.socket.write(byte, () => setImmediate(step)); // the next byte once this one is out, a turn later
  };
  step();
}

/** Closes once what was already answered is written (Redis's close-after-reply). */
function close(conn: Conn): void {
  if (conn.closing) return;
  conn.closing = true;
  if (mode === "slow") setTimeout(() => endSocket(conn), 200);
  else if (mode === "split") {
    conn.splitQueue.push(null);
    pumpSplit(conn);
  } else endSocket(conn);
}

function endSocket(conn: Conn): void {
  if (conn.socket.destroyed) return;
  conn.socket.once("finish", () => conn.socket.destroy());
  conn.socket.end();
}

function forget(conn: Conn): void {
  conns.delete(conn);
  unsubscribeAll(conn, conn.channels, channelSubscribers);
  unsubscribeAll(conn, conn.patterns, patternSubscribers);
}

function unsubscribeAll(conn: Conn, mine: Set<string>, all: Map<string, Set<Conn>>): void {
  for (const name of mine) unsubscribeOne(conn, name, mine, all);
}

function unsubscribeOne(conn: Conn, name: string, mine: Set<string>, all: Map<string, Set<Conn>>): void {
  mine.delete(name);
  const set = all.get(name);
  set?.delete(conn);
  if (set?.size === 0) all.delete(name);
}

// --- Framing ---

class ProtocolError extends Error {}

/** One frame from conn.input: the command, [] for an empty one (`*0`, a blank line), null when incomplete. */
function parseFrame(conn: Conn): string[] | null {
  const buf = conn.input;
  if (buf.length === 0) return null;
  const line = (from: number, tooBig: string): number | null => {
    const cr = buf.indexOf(13, from);
    if (cr === -1) {
      if (buf.length - from > INLINE_MAX) throw new ProtocolError(tooBig);
      return null;
    }
    if (cr + 1 >= buf.length) return null;
    if (buf[cr + 1] !== 10) throw new ProtocolError("line not terminated by CRLF");
    return cr;
  };
  if (buf[0] !== 42 /* '*' */) return parseInline(conn);
  const end = line(1, "too big mbulk count string");
  if (end === null) return null;
  const count = parseInteger(buf.toString("latin1", 1, end));
  if (count === null || count > 2147483647n) throw new ProtocolError("invalid multibulk length");
  if (password !== undefined && !conn.authed && count > 10n) {
    throw new ProtocolError("unauthenticated multibulk length");
  }
  let pos = end + 2;
  const args: string[] = [];
  for (let i = 0; i < count; i++) {
    if (pos >= buf.length) return null;
    const lineEnd = line(pos, "too big bulk count string");
    if (lineEnd === null) return null;
    if (buf[pos] !== 36 /* '$' */) throw new ProtocolError(`expected '$', got '${String.fromCharCode(buf[pos])}'`);
    const length = parseInteger(buf.toString("latin1", pos + 1, lineEnd));
    if (length === null || length < 0n || length > BigInt(BULK_MAX)) throw new ProtocolError("invalid bulk length");
    if (password !== undefined && !conn.authed && length > 16384n) {
      throw new ProtocolError("unauthenticated bulk length");
    }
    const start = lineEnd + 2;
    const stop = start + Number(length);
    if (buf.length < stop + 2) return null;
    if (buf[stop] !== 13 || buf[stop + 1] !== 10) throw new ProtocolError("bulk not followed by CRLF");
    args.push(buf.toString("latin1", start, stop));
    pos = stop + 2;
  }
  conn.input = buf.subarray(pos);
  return args;
}

function parseInline(conn: Conn): string[] | null {
  const buf = conn.input;
  const newline = buf.indexOf(10);
  if (newline === -1) {
    if (buf.length > INLINE_MAX) throw new ProtocolError("too big inline request");
    return null;
  }
  const end = newline > 0 && buf[newline - 1] === 13 ? newline - 1 : newline;
  const args = splitArgs(buf.toString("latin1", 0, end));
  if (args === null) throw new ProtocolError("unbalanced quotes in request");
  conn.input = buf.subarray(newline + 1);
  return args;
}

/** sdssplitargs: words, "double quoted" with \n \r \t \b \a \xHH escapes, 'single quoted' with \'. */
function splitArgs(line: string): string[] | null {
  const args: string[] = [];
  const hex = (c: string) => /^[0-9a-fA-F]$/.test(c);
  let i = 0;
  const at = (k: number) => line[k] ?? "";
  for (;;) {
    while (i < line.length && isSpace(line[i])) i++;
    if (i >= line.length) return args;
    let current = "", inDouble = false, inSingle = false, done = false;
    while (!done) {
      const c = at(i);
      if (inDouble) {
        if (c === "\\" && at(i + 1) === "x" && hex(at(i + 2)) && hex(at(i + 3))) {
          current += String.fromCharCode(parseInt(line.slice(i + 2, i + 4), 16));
          i += 3;
        } else if (c === "\\" && at(i + 1) !== "") {
          i++;
          const escapes: Record<string, string> = { n: "\n", r: "\r", t: "\t", b: "\b", a: "\x07" };
          current += escapes[at(i)] ?? at(i);
        } else if (c === '"') {
          if (at(i + 1) !== "" && !isSpace(at(i + 1))) return null;
          done = true;
        } else if (c === "") return null;
        else current += c;
      } else if (inSingle) {
        if (c === "\\" && at(i + 1) === "'") {
          i++;
          current += "'";
        } else if (c === "'") {
          if (at(i + 1) !== "" && !isSpace(at(i + 1))) return null;
          done = true;
        } else if (c === "") return null;
        else current += c;
      } else if (c === " " || c === "\n" || c === "\r" || c === "\t" || c === "") done = true;
      else if (c === '"') inDouble = true;
      else if (c === "'") inSingle = true;
      else current += c;
      if (c !== "") i++;
    }
    args.push(current);
  }
}

function redacted(args: string[]): string[] {
  const name = args[0].toLowerCase();
  if (name === "auth") return args.map((arg, i) => i === 0 ? arg : "<redacted>");
  if (name !== "hello") return args;
  const out = [...args];
  for (let j = 2; j < out.length; j++) {
    const option = out[j].toLowerCase();
    if (option === "auth" && j + 2 < out.length) out[j + 1] = out[j + 2] = "<redacted>", j += 2;
    else if (option === "setname") j++;
  }
  return out;
}

/** The next command or protocol error in conn.input (logged as it is read), or null for none yet. */
function readItem(conn: Conn): Item | null {
  while (!conn.broken) {
    let args: string[] | null;
    try {
      args = parseFrame(conn);
    } catch (caught) {
      if (!(caught instanceof ProtocolError)) throw caught;
      conn.broken = true;
      conn.input = Buffer.alloc(0);
      log({ conn: conn.id, protocolError: caught.message });
      return { protocolError: `ERR Protocol error: ${caught.message}` };
    }
    if (args === null) return null;
    if (args.length === 0) continue;
    log({ conn: conn.id, cmd: redacted(args).map(utf8) });
    return args;
  }
  return null;
}

function pump(conn: Conn): void {
  while (!conn.closing) {
    if (conn.blocked) {
      for (let item = readItem(conn); item !== null; item = readItem(conn)) conn.pending.push(item);
      return;
    }
    const item = conn.pending.shift() ?? readItem(conn);
    if (item === null) return;
    if (mode === "hang") continue;
    if (!Array.isArray(item)) {
      send(conn, error(item.protocolError));
      close(conn);
      return;
    }
    if (mode === "garbage") {
      write(conn, "HTTP/1.1 200 OK\r\n\r\n");
      close(conn);
      return;
    }
    execute(conn, item);
  }
}

function execute(conn: Conn, args: string[]): void {
  conn.commands++;
  const reply = dispatch(conn, args);
  if (reply !== undefined) send(conn, reply);
  if (mode === "flaky" && conn.commands % 5 === 0) {
    if (conn.blocked) conn.closeWhenUnblocked = true;
    else close(conn);
  }
}

function block(conn: Conn, ms: number): void {
  conn.blocked = true;
  setTimeout(() => {
    conn.blocked = false;
    send(conn, OK);
    if (conn.closeWhenUnblocked) close(conn);
    else pump(conn);
  }, ms);
}

// --- Commands ---

type Handler = (conn: Conn, args: string[]) => string | undefined;
type Command = {
  arity: number; // Redis's: n exactly, -n at least
  run: Handler;
  noauth?: boolean; // allowed before AUTH
  pubsub?: boolean; // allowed while subscribed
  subcommands?: Map<string, Command>;
};

function dispatch(conn: Conn, args: string[]): string | undefined {
  const name = args[0].toLowerCase();
  if (name === "host:" || name === "post") { // Redis's answer to HTTP on its port: close, say nothing
    close(conn);
    return undefined;
  }
  let command = COMMANDS.get(name);
  if (command === undefined) {
    let preview = "";
    for (let i = 1; i < args.length && preview.length < 128; i++) {
      preview += `'${args[i].split("\0")[0].slice(0, 128 - preview.length)}' `;
    }
    return error(`ERR unknown command '${c128(args[0])}', with args beginning with: ${preview}`);
  }
  let fullname = name;
  if (command.subcommands && args.length >= 2) {
    const sub = args[1].toLowerCase();
    const subcommand = command.subcommands.get(sub);
    if (subcommand === undefined) {
      return error(`ERR unknown subcommand '${c128(args[1])}'. Try ${args[0].toUpperCase()} HELP.`);
    }
    command = subcommand;
    fullname = `${name}|${sub}`;
  }
  if ((command.arity > 0 && args.length !== command.arity) || args.length < -command.arity) return arity(fullname);
  if (password !== undefined && !conn.authed && !command.noauth) return error("NOAUTH Authentication required.");
  if (subscribed(conn) && !command.pubsub) {
    return error(
      `ERR Can't execute '${fullname}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context`,
    );
  }
  return command.run(conn, args);
}

function authenticate(conn: Conn, user: string, pass: string): boolean {
  const ok = password === undefined ? user === "default" : user === username && pass === password;
  if (ok) conn.authed = true;
  return ok;
}

function setName(conn: Conn, name: string): string | undefined {
  if (!/^[!-~]*$/.test(name)) return error("ERR Client names cannot contain spaces, newlines or special characters.");
  conn.name = name === "" ? null : name;
  return undefined;
}

function clientInfo(conn: Conn): string {
  const address = `${conn.socket.remoteAddress}:${conn.socket.remotePort}`;
  return `id=${conn.id} addr=${address} name=${conn.name ?? ""} db=${conn.db} sub=${conn.channels.size} ` +
    `psub=${conn.patterns.size} user=${username}\n`;
}

function stringValue(conn: Conn, key: string): string | null | undefined {
  const entry = lookup(conn, key);
  if (entry === undefined) return null;
  return entry.type === "string" ? entry.value : undefined; // undefined: the wrong type
}

function setString(conn: Conn, key: string, value: string, expireAt: number | undefined): void {
  dbs[conn.db].set(key, { type: "string", value, expireAt });
}

function setCommand(conn: Conn, args: string[]): string {
  let nx = false, xx = false, get = false, keepTtl = false;
  let unit: "ex" | "px" | "exat" | "pxat" | null = null;
  let expireText: string | null = null;
  for (let j = 3; j < args.length; j++) {
    const option = args[j].toLowerCase();
    const hasNext = j < args.length - 1;
    if (option === "nx" && !xx) nx = true;
    else if (option === "xx" && !nx) xx = true;
    else if (option === "get") get = true;
    else if (option === "keepttl" && unit === null) keepTtl = true;
    else if (
      (option === "ex" || option === "px" || option === "exat" || option === "pxat") && !keepTtl &&
      (unit === null || unit === option) && hasNext
    ) {
      unit = option;
      expireText = args[++j];
    } else return SYNTAX;
  }
  let expireAt: number | undefined;
  if (expireText !== null) {
    const n = parseInteger(expireText);
    if (n === null) return NOT_INTEGER;
    const seconds = unit === "ex" || unit === "exat";
    if (n <= 0n || (seconds && n > LLONG_MAX / 1000n)) return error("ERR invalid expire time in 'set' command");
    let ms = seconds ? n * 1000n : n;
    if (unit === "ex" || unit === "px") ms += BigInt(Date.now());
    if (ms > LLONG_MAX) return error("ERR invalid expire time in 'set' command");
    expireAt = Number(ms);
  }
  const old = lookup(conn, args[1]);
  let oldReply = NIL;
  if (get) {
    if (old !== undefined && old.type !== "string") return WRONGTYPE;
    oldReply = bulk(old?.value ?? null);
  }
  if ((nx && old !== undefined) || (xx && old === undefined)) return get ? oldReply : NIL;
  setString(conn, args[1], args[2], keepTtl ? old?.expireAt : expireAt);
  return get ? oldReply : OK;
}

function expireCommand(seconds: boolean, absolute: boolean, name: string): Handler {
  return (conn, args) => {
    let nx = false, xx = false, gt = false, lt = false;
    for (let j = 3; j < args.length; j++) {
      const option = args[j].toLowerCase();
      if (option === "nx") nx = true;
      else if (option === "xx") xx = true;
      else if (option === "gt") gt = true;
      else if (option === "lt") lt = true;
      else return error(`ERR Unsupported option ${args[j]}`);
    }
    if (nx && (xx || gt || lt)) return error("ERR NX and XX, GT or LT options at the same time are not compatible");
    if (gt && lt) return error("ERR GT and LT options at the same time are not compatible");
    let when = parseInteger(args[2]);
    if (when === null) return NOT_INTEGER;
    const invalid = error(`ERR invalid expire time in '${name}' command`);
    if (seconds) {
      if (when > LLONG_MAX / 1000n || when < LLONG_MIN / 1000n) return invalid;
      when *= 1000n;
    }
    const base = absolute ? 0n : BigInt(Date.now());
    if (when > LLONG_MAX - base) return invalid;
    when += base;
    const entry = lookup(conn, args[1]);
    if (entry === undefined) return integer(0);
    const current = entry.expireAt;
    if (nx && current !== undefined) return integer(0);
    if (xx && current === undefined) return integer(0);
    if (gt && (current === undefined || when <= BigInt(current))) return integer(0);
    if (lt && current !== undefined && when >= BigInt(current)) return integer(0);
    if (when <= BigInt(Date.now())) dbs[conn.db].delete(args[1]);
    else entry.expireAt = Number(when);
    return integer(1);
  };
}

function ttlCommand(ms: boolean): Handler {
  return (conn, args) => {
    const entry = lookup(conn, args[1]);
    if (entry === undefined) return integer(-2);
    if (entry.expireAt === undefined) return integer(-1);
    const ttl = Math.max(0, entry.expireAt - Date.now());
    return integer(ms ? ttl : Math.floor((ttl + 500) / 1000));
  };
}

function incrBy(conn: Conn, key: string, by: bigint): string {
  const entry = lookup(conn, key);
  if (entry !== undefined && entry.type !== "string") return WRONGTYPE;
  const current = entry === undefined ? 0n : parseInteger(entry.value);
  if (current === null) return NOT_INTEGER;
  if ((by < 0n && current < 0n && by < LLONG_MIN - current) || (by > 0n && current > 0n && by > LLONG_MAX - current)) {
    return error("ERR increment or decrement would overflow");
  }
  setString(conn, key, String(current + by), entry?.expireAt);
  return integer(current + by);
}

function zsetOf(conn: Conn, key: string): Map<string, number> | null | undefined {
  const entry = lookup(conn, key);
  if (entry === undefined) return null;
  return entry.type === "zset" ? entry.value : undefined; // undefined: the wrong type
}

function hashOf(conn: Conn, key: string): Map<string, string> | null | undefined {
  const entry = lookup(conn, key);
  if (entry === undefined) return null;
  return entry.type === "hash" ? entry.value : undefined;
}

function dropIfEmpty(conn: Conn, key: string, collection: Map<string, unknown>): void {
  if (collection.size === 0) dbs[conn.db].delete(key);
}

function zadd(presetIncr: boolean): Handler {
  return (conn, args) => {
    let nx = false, xx = false, gt = false, lt = false, ch = false, incr = presetIncr;
    let i = 2;
    for (; i < args.length; i++) {
      const option = args[i].toLowerCase();
      if (option === "nx") nx = true;
      else if (option === "xx") xx = true;
      else if (option === "gt") gt = true;
      else if (option === "lt") lt = true;
      else if (option === "ch") ch = true;
      else if (option === "incr") incr = true;
      else break;
    }
    const elements = args.length - i;
    if (elements % 2 !== 0 || elements === 0) return SYNTAX;
    if (nx && xx) return error("ERR XX and NX options at the same time are not compatible");
    if ((gt && nx) || (lt && nx) || (gt && lt)) {
      return error("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if (incr && elements > 2) return error("ERR INCR option supports a single increment-element pair");
    const scores: number[] = [];
    for (let j = i; j < args.length; j += 2) {
      const score = parseDouble(args[j]);
      if (score === null) return NOT_FLOAT;
      scores.push(score + 0); // -0 is kept as 0, as a small sorted set (a listpack) does
    }
    let zset = zsetOf(conn, args[1]);
    if (zset === undefined) return WRONGTYPE;
    let added = 0, updated = 0, processed = 0, last = 0;
    if (zset === null && !xx) {
      zset = new Map();
      dbs[conn.db].set(args[1], { type: "zset", value: zset, expireAt: undefined });
    }
    if (zset !== null) {
      for (let j = 0; j < scores.length; j++) {
        const member = args[i + 2 * j + 1];
        let score = scores[j];
        const current = zset.get(member);
        if (current !== undefined) {
          if (nx) continue;
          if (incr) {
            score += current;
            if (Number.isNaN(score)) return error("ERR resulting score is not a number (NaN)");
          }
          if ((lt && score >= current) || (gt && score <= current)) continue;
          if (score !== current) zset.set(member, score), updated++;
        } else if (!xx) {
          zset.set(member, score);
          added++;
        } else continue;
        processed++;
        last = score;
      }
      dropIfEmpty(conn, args[1], zset);
    }
    if (incr) return processed ? bulk(formatScore(last)) : NIL;
    return integer(ch ? added + updated : added);
  };
}

type ScoreRange = { min: number; max: number; minExclusive: boolean; maxExclusive: boolean };

function parseScoreRange(minText: string, maxText: string): ScoreRange | null {
  const item = (text: string): [number, boolean] | null => {
    const exclusive = text.startsWith("(");
    const value = parseLaxDouble(exclusive ? text.slice(1) : text);
    return value === null ? null : [value, exclusive];
  };
  const min = item(minText), max = item(maxText);
  if (min === null || max === null) return null;
  return { min: min[0], minExclusive: min[1], max: max[0], maxExclusive: max[1] };
}

const inRange = (score: number, range: ScoreRange) =>
  (range.minExclusive ? score > range.min : score >= range.min) &&
  (range.maxExclusive ? score < range.max : score <= range.max);

/** ZRANGE and its older forms (zrangeGenericCommand). */
function zrange(presetType: "rank" | "score" | null, presetReverse: boolean | null): Handler {
  return (conn, args) => {
    let rangeType: "rank" | "score" | "lex" | null = presetType;
    let reverse: boolean | null = presetReverse;
    let withScores = false;
    let offset = 0n, limit = -1n;
    for (let j = 4; j < args.length; j++) {
      const option = args[j].toLowerCase();
      const left = args.length - j - 1;
      if (option === "withscores") withScores = true;
      else if (option === "limit" && left >= 2) {
        const o = parseInteger(args[j + 1]), l = parseInteger(args[j + 2]);
        if (o === null || l === null) return NOT_INTEGER;
        [offset, limit] = [o, l];
        j += 2;
      } else if (reverse === null && option === "rev") reverse = true;
      else if (rangeType === null && option === "bylex") rangeType = "lex";
      else if (rangeType === null && option === "byscore") rangeType = "score";
      else return SYNTAX;
    }
    reverse ??= false;
    rangeType ??= "rank";
    if (limit !== -1n && rangeType === "rank") {
      return error("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
    }
    if (withScores && rangeType === "lex") {
      return error("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    if (rangeType === "lex") return error("ERR BYLEX is not supported by fake_redis.ts");
    let [minText, maxText] = [args[2], args[3]];
    if (reverse && rangeType === "score") [minText, maxText] = [maxText, minText];
    let start = 0n, end = 0n;
    let range: ScoreRange | null = null;
    if (rangeType === "rank") {
      const s = parseInteger(minText), e = parseInteger(maxText);
      if (s === null || e === null) return NOT_INTEGER;
      [start, end] = [s, e];
    } else {
      range = parseScoreRange(minText, maxText);
      if (range === null) return NOT_RANGE;
    }
    const zset = zsetOf(conn, args[1]);
    if (zset === null) return "*0\r\n";
    if (zset === undefined) return WRONGTYPE;
    let members = sortedMembers(zset);
    if (reverse) members.reverse();
    if (range === null) {
      const length = BigInt(members.length);
      if (start < 0n) start += length;
      if (end < 0n) end += length;
      if (start < 0n) start = 0n;
      if (start > end || start >= length) return "*0\r\n";
      if (end >= length) end = length - 1n;
      members = members.slice(Number(start), Number(end) + 1);
    } else {
      const scoreRange = range;
      members = members.filter(([, score]) => inRange(score, scoreRange));
      if (offset < 0n) members = [];
      else members = members.slice(Number(offset), limit < 0n ? undefined : Number(offset + limit));
    }
    return bulks(members.flatMap(([member, score]) => withScores ? [member, formatScore(score)] : [member]));
  };
}

function zrank(reverse: boolean): Handler {
  return (conn, args) => {
    const zset = zsetOf(conn, args[1]);
    if (zset === undefined) return WRONGTYPE;
    if (zset === null || !zset.has(args[2])) return NIL;
    const members = sortedMembers(zset).map(([member]) => member);
    const rank = members.indexOf(args[2]);
    return integer(reverse ? members.length - 1 - rank : rank);
  };
}

function flush(all: boolean): Handler {
  return (conn, args) => {
    if (args.length > 2 || (args.length === 2 && !/^(a?sync)$/i.test(args[1]))) return SYNTAX;
    for (const db of all ? dbs : [dbs[conn.db]]) db.clear();
    return OK;
  };
}

function subscribe(pattern: boolean): Handler {
  return (conn, args) => {
    const [mine, all, kind] = pattern
      ? [conn.patterns, patternSubscribers, "psubscribe"]
      : [conn.channels, channelSubscribers, "subscribe"];
    let out = "";
    for (const name of args.slice(1)) {
      if (!mine.has(name)) {
        mine.add(name);
        let set = all.get(name);
        if (set === undefined) all.set(name, set = new Set());
        set.add(conn);
      }
      out += array([bulk(kind), bulk(name), integer(subscriptions(conn))]);
    }
    return out;
  };
}

function unsubscribe(pattern: boolean): Handler {
  return (conn, args) => {
    const [mine, all, kind] = pattern
      ? [conn.patterns, patternSubscribers, "punsubscribe"]
      : [conn.channels, channelSubscribers, "unsubscribe"];
    const names = args.length > 1 ? args.slice(1) : [...mine];
    if (names.length === 0) return array([bulk(kind), NIL, integer(subscriptions(conn))]);
    let out = "";
    for (const name of names) {
      unsubscribeOne(conn, name, mine, all);
      out += array([bulk(kind), bulk(name), integer(subscriptions(conn))]);
    }
    return out;
  };
}

function publish(channel: string, message: string): number {
  let receivers = 0;
  for (const conn of channelSubscribers.get(channel) ?? []) {
    send(conn, bulks(["message", channel, message]));
    receivers++;
  }
  for (const [pattern, set] of patternSubscribers) {
    if (!globMatch(pattern, channel)) continue;
    for (const conn of set) {
      send(conn, bulks(["pmessage", pattern, channel, message]));
      receivers++;
    }
  }
  return receivers;
}

function info(): string {
  const keyspace = dbs.flatMap((db, i) => {
    const entries = [...db.values()].filter((entry) => !expired(entry));
    if (entries.length === 0) return [];
    const expires = entries.filter((entry) => entry.expireAt !== undefined).length;
    return [`db${i}:keys=${entries.length},expires=${expires},avg_ttl=0`];
  });
  return [
    "# Server",
    `redis_version:${VERSION}`,
    "redis_mode:standalone",
    "os:fake_redis.ts",
    `process_id:${process.pid}`,
    `tcp_port:${port}`,
    `uptime_in_seconds:${Math.floor((Date.now() - startedAt) / 1000)}`,
    "",
    "# Clients",
    `connected_clients:${conns.size}`,
    "",
    "# Keyspace",
    ...keyspace,
    "",
  ].join("\r\n");
}

const clientSubcommands = new Map<string, Command>([
  ["setname", { arity: 3, run: (conn, args) => setName(conn, args[2]) ?? OK }],
  ["getname", { arity: 2, run: (conn) => bulk(conn.name) }],
  ["id", { arity: 2, run: (conn) => integer(conn.id) }],
  ["info", { arity: 2, run: (conn) => bulk(clientInfo(conn)) }],
  ["list", { arity: -2, run: () => bulk([...conns].map(clientInfo).join("")) }],
  ["setinfo", { arity: 4, run: () => OK }],
]);
for (
  const name of [
    "caching",
    "getredir",
    "help",
    "kill",
    "no-evict",
    "no-touch",
    "pause",
    "reply",
    "tracking",
    "trackinginfo",
    "unblock",
    "unpause",
  ]
) clientSubcommands.set(name, { arity: -2, run: () => OK });

const COMMANDS = new Map<string, Command>([
  ["ping", {
    arity: -1,
    pubsub: true,
    run: (conn, args) => {
      if (args.length > 2) return arity("ping");
      if (subscribed(conn)) return bulks(["pong", args[1] ?? ""]);
      return args.length === 2 ? bulk(args[1]) : "+PONG\r\n";
    },
  }],
  ["echo", { arity: 2, run: (_conn, args) => bulk(args[1]) }],
  ["auth", {
    arity: -2,
    noauth: true,
    run: (conn, args) => {
      if (args.length > 3) return SYNTAX;
      if (args.length === 2 && password === undefined) {
        return error(
          "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        );
      }
      const [user, pass] = args.length === 2 ? ["default", args[1]] : [args[1], args[2]];
      return authenticate(conn, user, pass) ? OK : WRONGPASS;
    },
  }],
  ["hello", {
    arity: -1,
    noauth: true,
    run: (conn, args) => {
      let next = 1;
      if (args.length >= 2) {
        const version = parseInteger(args[1]);
        if (version === null) return error("ERR Protocol version is not an integer or out of range");
        if (version !== 2n) return error("NOPROTO unsupported protocol version"); // RESP2 only
        next = 2;
      }
      let credentials: [string, string] | null = null;
      let name: string | null = null;
      for (let j = next; j < args.length; j++) {
        const more = args.length - 1 - j;
        const option = args[j].toLowerCase();
        if (option === "auth" && more >= 2) credentials = [args[j + 1], args[j + 2]], j += 2;
        else if (option === "setname" && more >= 1) name = args[++j];
        else return error(`ERR Syntax error in HELLO option '${c128(args[j])}'`);
      }
      if (credentials !== null && !authenticate(conn, ...credentials)) return WRONGPASS;
      if (password !== undefined && !conn.authed) {
        return error(
          "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        );
      }
      if (name !== null) {
        const failed = setName(conn, name);
        if (failed !== undefined) return failed;
      }
      return array([
        ...["server", "redis", "version", VERSION, "proto"].map(bulk),
        integer(2),
        bulk("id"),
        integer(conn.id),
        ...["mode", "standalone", "role", "master", "modules"].map(bulk),
        "*0\r\n",
      ]);
    },
  }],
  ["quit", {
    arity: -1,
    noauth: true,
    pubsub: true,
    run: (conn) => {
      send(conn, OK);
      close(conn);
      return undefined;
    },
  }],
  ["reset", {
    arity: 1,
    noauth: true,
    pubsub: true,
    run: (conn) => {
      forget(conn);
      conns.add(conn);
      conn.db = 0;
      conn.name = null;
      conn.authed = password === undefined;
      return "+RESET\r\n";
    },
  }],
  ["select", {
    arity: 2,
    run: (conn, args) => {
      const db = parseInteger(args[1]);
      if (db === null) return NOT_INTEGER;
      if (db > 2147483647n || db < -2147483648n) {
        return error("ERR value is out of range, value must between -2147483648 and 2147483647");
      }
      if (db < 0n || db > 15n) return error("ERR DB index is out of range");
      conn.db = Number(db);
      return OK;
    },
  }],
  ["client", { arity: -2, run: () => SYNTAX, subcommands: clientSubcommands }],
  ["debug", {
    arity: -2,
    run: (conn, args) => {
      const sub = args[1].toLowerCase();
      if (sub === "sleep" && args.length === 3) {
        const ms = (parseFloat(args[2]) || 0) * 1000;
        if (ms <= 0) return OK;
        block(conn, ms);
        return undefined;
      }
      if (sub === "down" && args.length <= 3) {
        const ms = args.length === 3 ? parseInteger(args[2]) : BigInt(defaultDownMs);
        if (ms === null || ms < 0n) return NOT_INTEGER;
        send(conn, OK);
        goDown(Number(ms));
        return undefined;
      }
      return error(`ERR unknown subcommand or wrong number of arguments for '${c128(args[1])}'. Try DEBUG HELP.`);
    },
  }],
  ["get", {
    arity: 2,
    run: (conn, args) => {
      const value = stringValue(conn, args[1]);
      return value === undefined ? WRONGTYPE : bulk(value);
    },
  }],
  ["set", { arity: -3, run: setCommand }],
  ["mget", {
    arity: -2,
    run: (conn, args) => bulks(args.slice(1).map((key) => stringValue(conn, key) ?? null)),
  }],
  ["mset", {
    arity: -3,
    run: (conn, args) => {
      if (args.length % 2 === 0) return arity("mset");
      for (let i = 1; i < args.length; i += 2) setString(conn, args[i], args[i + 1], undefined);
      return OK;
    },
  }],
  ["del", {
    arity: -2,
    run: (conn, args) => {
      let deleted = 0;
      for (const key of args.slice(1)) if (lookup(conn, key) !== undefined && dbs[conn.db].delete(key)) deleted++;
      return integer(deleted);
    },
  }],
  ["exists", {
    arity: -2,
    run: (conn, args) => integer(args.slice(1).filter((key) => lookup(conn, key) !== undefined).length),
  }],
  ["type", { arity: 2, run: (conn, args) => `+${lookup(conn, args[1])?.type ?? "none"}\r\n` }],
  ["expire", { arity: -3, run: expireCommand(true, false, "expire") }],
  ["pexpire", { arity: -3, run: expireCommand(false, false, "pexpire") }],
  ["expireat", { arity: -3, run: expireCommand(true, true, "expireat") }],
  ["pexpireat", { arity: -3, run: expireCommand(false, true, "pexpireat") }],
  ["ttl", { arity: 2, run: ttlCommand(false) }],
  ["pttl", { arity: 2, run: ttlCommand(true) }],
  ["persist", {
    arity: 2,
    run: (conn, args) => {
      const entry = lookup(conn, args[1]);
      if (entry?.expireAt === undefined) return integer(0);
      entry.expireAt = undefined;
      return integer(1);
    },
  }],
  ["incr", { arity: 2, run: (conn, args) => incrBy(conn, args[1], 1n) }],
  ["decr", { arity: 2, run: (conn, args) => incrBy(conn, args[1], -1n) }],
  ["incrby", {
    arity: 3,
    run: (conn, args) => {
      const by = parseInteger(args[2]);
      return by === null ? NOT_INTEGER : incrBy(conn, args[1], by);
    },
  }],
  ["decrby", {
    arity: 3,
    run: (conn, args) => {
      const by = parseInteger(args[2]);
      if (by === null) return NOT_INTEGER;
      if (by === LLONG_MIN) return error("ERR decrement would overflow");
      return incrBy(conn, args[1], -by);
    },
  }],
  ["keys", {
    arity: 2,
    run: (conn, args) => bulks([...dbs[conn.db].keys()].filter((key) => lookup(conn, key) && globMatch(args[1], key))),
  }],
  ["scan", {
    arity: -2,
    run: (conn, args) => {
      if (!/^([+-]?[0-9]+)?$/.test(args[1]) || BigInt(args[1] || "0") > 2n ** 64n - 1n) {
        return error("ERR invalid cursor");
      }
      let pattern: string | null = null, type: string | null = null;
      for (let i = 2; i < args.length; i += 2) {
        const option = args[i].toLowerCase();
        if (option === "count" && i + 1 < args.length) {
          const count = parseInteger(args[i + 1]);
          if (count === null) return NOT_INTEGER;
          if (count < 1n) return SYNTAX;
        } else if (option === "match" && i + 1 < args.length) pattern = args[i + 1];
        else if (option === "type" && i + 1 < args.length) type = args[i + 1];
        else return SYNTAX;
      }
      const keys = BigInt(args[1] || "0") !== 0n ? [] : [...dbs[conn.db].keys()].filter((key) => {
        const entry = lookup(conn, key);
        return entry !== undefined && (pattern === null || globMatch(pattern, key)) &&
          (type === null || type.toLowerCase() === entry.type);
      });
      return array([bulk("0"), bulks(keys)]);
    },
  }],
  ["zadd", { arity: -4, run: zadd(false) }],
  ["zincrby", { arity: 4, run: zadd(true) }],
  ["zrem", {
    arity: -3,
    run: (conn, args) => {
      const zset = zsetOf(conn, args[1]);
      if (zset === undefined) return WRONGTYPE;
      if (zset === null) return integer(0);
      const removed = args.slice(2).filter((member) => zset.delete(member)).length;
      dropIfEmpty(conn, args[1], zset);
      return integer(removed);
    },
  }],
  ["zcard", {
    arity: 2,
    run: (conn, args) => {
      const zset = zsetOf(conn, args[1]);
      return zset === undefined ? WRONGTYPE : integer(zset?.size ?? 0);
    },
  }],
  ["zscore", {
    arity: 3,
    run: (conn, args) => {
      const zset = zsetOf(conn, args[1]);
      if (zset === undefined) return WRONGTYPE;
      const score = zset?.get(args[2]);
      return score === undefined ? NIL : bulk(formatScore(score));
    },
  }],
  ["zrank", { arity: 3, run: zrank(false) }],
  ["zrevrank", { arity: 3, run: zrank(true) }],
  ["zcount", {
    arity: 4,
    run: (conn, args) => {
      const range = parseScoreRange(args[2], args[3]);
      if (range === null) return NOT_RANGE;
      const zset = zsetOf(conn, args[1]);
      if (zset === undefined) return WRONGTYPE;
      return integer([...zset?.values() ?? []].filter((score) => inRange(score, range)).length);
    },
  }],
  ["zrange", { arity: -4, run: zrange(null, null) }],
  ["zrevrange", { arity: -4, run: zrange("rank", true) }],
  ["zrangebyscore", { arity: -4, run: zrange("score", false) }],
  ["zrevrangebyscore", { arity: -4, run: zrange("score", true) }],
  ["zremrangebyscore", {
    arity: 4,
    run: (conn, args) => {
      const range = parseScoreRange(args[2], args[3]);
      if (range === null) return NOT_RANGE;
      const zset = zsetOf(conn, args[1]);
      if (zset === undefined) return WRONGTYPE;
      if (zset === null) return integer(0);
      let removed = 0;
      for (const [member, score] of zset) if (inRange(score, range)) zset.delete(member), removed++;
      dropIfEmpty(conn, args[1], zset);
      return integer(removed);
    },
  }],
  ["hset", {
    arity: -4,
    run: (conn, args) => {
      if (args.length % 2 === 1) return arity("hset");
      let hash = hashOf(conn, args[1]);
      if (hash === undefined) return WRONGTYPE;
      if (hash === null) {
        hash = new Map();
        dbs[conn.db].set(args[1], { type: "hash", value: hash, expireAt: undefined });
      }
      let added = 0;
      for (let i = 2; i < args.length; i += 2) {
        if (!hash.has(args[i])) added++;
        hash.set(args[i], args[i + 1]);
      }
      return integer(added);
    },
  }],
  ["hget", {
    arity: 3,
    run: (conn, args) => {
      const hash = hashOf(conn, args[1]);
      return hash === undefined ? WRONGTYPE : bulk(hash?.get(args[2]) ?? null);
    },
  }],
  ["hmget", {
    arity: -3,
    run: (conn, args) => {
      const hash = hashOf(conn, args[1]);
      return hash === undefined ? WRONGTYPE : bulks(args.slice(2).map((field) => hash?.get(field) ?? null));
    },
  }],
  ["hdel", {
    arity: -3,
    run: (conn, args) => {
      const hash = hashOf(conn, args[1]);
      if (hash === undefined) return WRONGTYPE;
      if (hash === null) return integer(0);
      const removed = args.slice(2).filter((field) => hash.delete(field)).length;
      dropIfEmpty(conn, args[1], hash);
      return integer(removed);
    },
  }],
  ["hgetall", {
    arity: 2,
    run: (conn, args) => {
      const hash = hashOf(conn, args[1]);
      return hash === undefined ? WRONGTYPE : bulks([...hash ?? []].flat());
    },
  }],
  ["hlen", {
    arity: 2,
    run: (conn, args) => {
      const hash = hashOf(conn, args[1]);
      return hash === undefined ? WRONGTYPE : integer(hash?.size ?? 0);
    },
  }],
  ["hexists", {
    arity: 3,
    run: (conn, args) => {
      const hash = hashOf(conn, args[1]);
      return hash === undefined ? WRONGTYPE : integer(hash?.has(args[2]) ? 1 : 0);
    },
  }],
  ["flushall", { arity: -1, run: flush(true) }],
  ["flushdb", { arity: -1, run: flush(false) }],
  ["dbsize", {
    arity: 1,
    run: (conn) => integer([...dbs[conn.db].values()].filter((entry) => !expired(entry)).length),
  }],
  ["info", { arity: -1, run: () => bulk(info()) }],
  ["publish", { arity: 3, run: (_conn, args) => integer(publish(args[1], args[2])) }],
  ["subscribe", { arity: -2, pubsub: true, run: subscribe(false) }],
  ["psubscribe", { arity: -2, pubsub: true, run: subscribe(true) }],
  ["unsubscribe", { arity: -1, pubsub: true, run: unsubscribe(false) }],
  ["punsubscribe", { arity: -1, pubsub: true, run: unsubscribe(true) }],
]);

// --- Listening, and the outage ---

let server: Server | null = null;
let port = Number(portArgument ?? 0);
let down = false;

function accept(socket: Socket): void {
  if (down) {
    socket.destroy();
    return;
  }
  const conn: Conn = {
    id: ++connections,
    socket,
    input: Buffer.alloc(0),
    db: 0,
    authed: password === undefined,
    name: null,
    channels: new Set(),
    patterns: new Set(),
    pending: [],
    blocked: false,
    closeWhenUnblocked: false,
    broken: false,
    closing: false,
    commands: 0,
    splitQueue: [],
    splitAt: 0,
    splitBusy: false,
  };
  conns.add(conn);
  socket.setNoDelay(true);
  socket.on("data", (chunk: Buffer) => {
    if (conn.closing || conn.broken) return;
    conn.input = conn.input.length === 0 ? chunk : Buffer.concat([conn.input, chunk]);
    pump(conn);
  });
  socket.on("error", () => {}); // a client that resets is no news
  socket.on("close", () => forget(conn));
}

function listen(onListening: () => void, first: boolean): void {
  const next = createServer(accept);
  next.on("error", (failure: Error) => {
    if (first) {
      process.stderr.write(`fake_redis.ts: cannot listen on 127.0.0.1:${port}: ${failure.message}\n`);
      process.exit(1);
    }
    setTimeout(() => listen(onListening, false), 100); // the port not free yet: try again
  });
  next.listen(port, "127.0.0.1", () => {
    server = next;
    port = (next.address() as { port: number }).port;
    onListening();
  });
}

function goDown(ms: number): void {
  if (down) return;
  down = true;
  log({ event: "down" });
  server?.close();
  server = null;
  for (const conn of conns) close(conn);
  setTimeout(() =>
    listen(() => {
      down = false;
      log({ event: "up" });
    }, false), ms);
}

listen(() => process.stdout.write(`listening redis://127.0.0.1:${port}\n`), true);
try {
  process.on("SIGUSR1", () => goDown(defaultDownMs));
} catch {
  // no SIGUSR1 here (Windows): DEBUG DOWN does the same
}
for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => process.exit(0));
