// mcp.ts's TOML subset reader and table editor (parseTomlText, editTomlTable, both @internal) against smol-toml, a
// full TOML 1.1 parser from npm. For interop/packages.sh (its `toml` part); run with a Node that loads .ts (>= 22.18):
//
//   node interop/lib/packages-toml.mjs [SEED [COUNT]]
//
// (a) Documents read alike: hand-written Codex config.toml files (lib/packages-toml-corpus.mjs), COUNT random nested
//     objects written by smol-toml's stringify, and the same objects written by this file in varied forms (literal,
//     multi-line and escaped strings, hex/octal/binary/underscored numbers, dotted keys, inline tables, headers,
//     arrays of tables, multi-line arrays with comments and trailing commas, dates, CRLF). Both readers' values must
//     be equal (dates: mcp.ts's text read by smol-toml's TomlDate). TOML 1.1-only documents and integers past 2^53 are
//     reported as notes.
// (b) Invalid documents (smol-toml must refuse each) must be refused by parseTomlText with an Error ending in
//     "at line N"; those only a full parser can tell (a table defined twice, an inline table extended) are notes.
// (c) editTomlTable(doc, "mcp_servers", X, entry|undefined): replace and remove the first server, add a new one (a
//     plain name, a dotted and quoted one): smol-toml must read the output as the original with only that changed.
//
// One line per check: "ok: ..." or "FAIL: ..." (then examples, indented, at most 5 per kind), "note: ..." for
// findings that do not fail; exit 1 when a check fails. Loads smol-toml from $IOP_CACHE/packages.
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { editTomlTable, parseTomlText } from "../../mcp.ts";
import { CODEX_CONFIGS, EDGES, INVALID, TOML_11 } from "./packages-toml-corpus.mjs";

const cache = process.env.IOP_CACHE || process.env.MCP_INTEROP_CACHE || join(homedir(), ".cache", "mcp-interop");
const smol = createRequire(join(cache, "packages", "package.json"))("smol-toml");
const SEED = Number(process.argv[2] ?? 1);
const COUNT = Number(process.argv[3] ?? 300);

const smolParse = (text) => smol.parse(text, { integersAsBigInt: "asNeeded" });
// JSON, with what JSON cannot say marked: <NaN>, <Infinity>, <-0>, <123n> (a BigInt).
const repr = (value) =>
  JSON.stringify(
    value,
    (_, v) =>
      typeof v === "bigint"
        ? `<${v}n>`
        : typeof v === "number" && (!Number.isFinite(v) || Object.is(v, -0))
        ? `<${Object.is(v, -0) ? "-0" : v}>`
        : v,
  )?.replace(/[\u007f-\u009f\u2028\u2029\ufeff]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`) ??
    String(value);
const show = (text, max = 400) => {
  const json = repr(text);
  return json.length > max ? json.slice(0, max) + `…" (${text.length} chars)` : json;
};
const firstLine = (error) => String(error?.message ?? error).split("\n")[0];

// --- values compared ---

// The first difference between A (mcp.ts's, or smol-toml's) and B (smol-toml's), as "path: what", or undefined.
// WRITTEN: A is a JSON value editTomlTable wrote, B what smol-toml read: an integer past 2^53 is then alike when it is
// A's number (JSON has no integers: 1e20 written as 100000000000000000000 is the same number).
function difference(a, b, path = "", written = false) {
  const here = path || "(root)";
  if (b instanceof Date) {
    if (a instanceof Date) return a.toISOString() === b.toISOString() ? undefined : `${here}: ${a} vs ${b}`;
    if (typeof a !== "string") return `${here}: ${show(a)} vs the date ${b.toISOString()}`;
    let read;
    try {
      read = new smol.TomlDate(a).toISOString();
    } catch {
      return `${here}: ${show(a)} vs the date ${b.toISOString()}`;
    }
    return read === b.toISOString() ? undefined : `${here}: ${show(a)} (${read}) vs the date ${b.toISOString()}`;
  }
  if (typeof b === "bigint") {
    if (written && (b > 2n ** 63n - 1n || b < -(2n ** 63n))) {
      return `${here}: ${show(a)} written as ${b}, an integer past 64 bits (invalid TOML)`;
    }
    return written && Number(b) === a ? undefined : `${here}: ${typeof a} ${show(a)} vs the integer ${b}`;
  }
  if (typeof b === "number") {
    return typeof a === "number" && Object.is(a, b)
      ? undefined
      : `${here}: ${show(a)} vs ${Object.is(b, -0) ? "-0" : b}`;
  }
  if (Array.isArray(b)) {
    if (!Array.isArray(a)) return `${here}: ${show(a)} vs an array`;
    if (a.length !== b.length) return `${here}: ${a.length} items vs ${b.length}`;
    for (let i = 0; i < b.length; i++) {
      const found = difference(a[i], b[i], `${path}[${i}]`, written);
      if (found) return found;
    }
    return undefined;
  }
  if (b !== null && typeof b === "object") {
    if (a === null || typeof a !== "object" || Array.isArray(a) || a instanceof Date) {
      return `${here}: ${show(a)} vs a table`;
    }
    const ka = Object.keys(a).sort(), kb = Object.keys(b).sort();
    const missing = kb.filter((k) => !Object.hasOwn(a, k)), extra = ka.filter((k) => !Object.hasOwn(b, k));
    if (missing.length || extra.length) {
      return `${here}: keys ${missing.length ? `missing ${show(missing)}` : ""}${
        extra.length ? ` extra ${show(extra)}` : ""
      }`;
    }
    for (const k of kb) {
      const found = difference(a[k], b[k], `${path}.${JSON.stringify(k)}`, written);
      if (found) return found;
    }
    return undefined;
  }
  return a === b ? undefined : `${here}: ${show(a)} vs ${show(b)}`;
}

// --- random documents ---

function mulberry32(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rng = mulberry32(SEED);
const int = (n) => Math.floor(rng() * n);
const pick = (items) => items[int(items.length)];
const chance = (p) => rng() < p;

const CHARS = [
  ..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
  ..." _-.,:;/#=[]{}$%&*!?~`+<>|@^",
  '"',
  "'",
  "\\",
  "\n",
  "\t",
  "\r",
  "\r\n",
  "\b",
  "\f",
  "\u0000",
  "\u001b",
  "\u001f",
  "é",
  "ß",
  "中",
  "ʎ",
  "😀",
  "\u2028",
  "\ufeff",
  "\u00a0",
  '"""',
  "'''",
  '\\"',
  "\\n",
  "${VAR}",
];
const KEYS = [
  "command",
  "args",
  "env",
  "url",
  "name",
  "a",
  "b",
  "x",
  "key",
  "bare_key",
  "bare-key",
  "1234",
  "-",
  "_",
  "with space",
  "dotted.key",
  'quo"te',
  "back\\slash",
  "apostrophe's",
  "ünï",
  "中文",
  "",
  "__proto__",
  "constructor",
  "toString",
  "tab\there",
  "line\nbreak",
  "#hash",
  "=",
  "[x]",
];
const randomString = (max = 12) => Array.from({ length: int(max + 1) }, () => pick(CHARS)).join("");
const randomKey = () => chance(0.3) ? randomString(6) : pick(KEYS);
const randomNumber = () =>
  pick([
    () => int(1000),
    () => -int(1e6),
    () => int(2 ** 31) * (chance(0.5) ? 1 : -1),
    () => Number.MAX_SAFE_INTEGER - int(100),
    () => 0,
    () => Math.round((rng() - 0.5) * 1e6) / 1000,
    () => rng() * 10 ** (int(40) - 20),
    () => 20.5,
    () => -0.25,
    () => 1e21,
    () => 5e-7,
    () => NaN,
    () => Infinity,
    () => -Infinity,
  ])();

function randomValue(depth) {
  const r = rng();
  if (r < 0.3) return randomString();
  if (r < 0.5) return randomNumber();
  if (r < 0.58) return chance(0.5);
  if (r < 0.75 && depth < 4) {
    const kind = int(4);
    const n = int(4);
    if (kind === 0) return Array.from({ length: n }, () => randomString(6));
    if (kind === 1) return Array.from({ length: n }, () => randomNumber());
    if (kind === 2) return Array.from({ length: n + 1 }, () => randomTable(depth + 1, 3)); // an array of tables
    return Array.from({ length: n }, () => randomValue(depth + 1)); // mixed
  }
  if (depth < 4) return randomTable(depth + 1, 4);
  return randomString();
}
function randomTable(depth, max) {
  const table = {};
  for (let i = int(max + 1); i > 0; i--) {
    const key = randomKey();
    if (Object.hasOwn(table, key)) continue;
    Object.defineProperty(table, key, {
      value: randomValue(depth),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return table;
}
const SERVER_NAMES = ["docs", "github", "my-server", "with.dot", "with space", "ünicode", "x_1"];
function randomServer() {
  const server = {};
  if (chance(0.7)) {
    server.command = pick(["npx", "docker", "/usr/local/bin/mcp", "C:\\Tools\\mcp.exe", randomString(8)]);
    server.args = Array.from(
      { length: int(5) },
      () => chance(0.5) ? pick(["-y", "--stdio", "@scope/pkg"]) : randomString(8),
    );
    if (chance(0.6)) {
      server.env = {};
      for (let i = int(4); i > 0; i--) {
        server.env[pick(["TOKEN", "A B", "PATH", "x.y", randomString(4)])] = randomString(8);
      }
    }
  } else {
    server.url = `https://${pick(["mcp.example.com", "localhost:8080"])}/mcp`;
    if (chance(0.5)) server.bearer_token_env_var = "TOKEN";
    if (chance(0.5)) server.http_headers = { "X-Client": randomString(6) };
  }
  if (chance(0.3)) server.enabled = chance(0.5);
  if (chance(0.3)) server.startup_timeout_sec = pick([20.5, 10, 0.5]);
  if (chance(0.2)) server.extra = randomTable(3, 3);
  return server;
}
// A random document: a table, with an mcp_servers table most of the time.
function randomDocument() {
  const doc = randomTable(0, 6);
  delete doc.mcp_servers;
  if (chance(0.7)) {
    doc.mcp_servers = {};
    for (let i = int(4); i > 0; i--) doc.mcp_servers[pick(SERVER_NAMES)] = randomServer();
  }
  return doc;
}
// A JSON entry for editTomlTable (what install writes: no NaN, no null).
function randomEntry() {
  const entry = randomServer();
  const clean = (v) =>
    typeof v === "number"
      ? (Number.isFinite(v) ? v : 1)
      : Array.isArray(v)
      ? v.map(clean)
      : v && typeof v === "object"
      ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k.replace(/\u007f/g, ""), clean(x)]))
      : typeof v === "string"
      ? v.replace(/\u007f/g, "") // U+007F is checked on its own (see "DEL" below)
      : v;
  return clean(entry);
}

// --- varied TOML, written here ---

const BARE = /^[A-Za-z0-9_-]+$/;
// What TOML's strings cannot hold raw: control characters but tab (and, multi-line, line breaks).
// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/;
// deno-lint-ignore no-control-regex
const CONTROL_MULTI = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;
const noControls = (s) => [...s].filter((ch) => !CONTROL.test(ch)).join("");
function basicString(s) {
  let out = "";
  for (const ch of s) {
    const code = ch.codePointAt(0);
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\t") out += chance(0.5) ? "\\t" : "\t";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\b") out += "\\b";
    else if (ch === "\f") out += "\\f";
    else if (code < 0x20 || code === 0x7f) out += `\\u${code.toString(16).padStart(4, "0")}`;
    else if (code > 0x7f && chance(0.3)) {
      out += code > 0xffff || chance(0.3)
        ? `\\U${code.toString(16).padStart(8, "0")}`
        : `\\u${code.toString(16).toUpperCase().padStart(4, "0")}`;
    } else out += ch;
  }
  return `"${out}"`;
}
function stringForm(s) {
  const forms = [() => basicString(s)];
  if (!s.includes("'") && !CONTROL.test(s.replace(/\t/g, ""))) forms.push(() => `'${s}'`);
  // A multi-line literal: no ''' inside, no control character but tab and line breaks (a lone CR neither). A line
  // break right after the opening delimiter is dropped, so a text starting with one gets another before it.
  if (!s.includes("'''") && !CONTROL_MULTI.test(s) && !/\r(?!\n)/.test(s)) {
    forms.push(() => `'''${/^\r?\n/.test(s) || chance(0.5) ? "\n" : ""}${s}'''`);
  }
  // A multi-line basic string: raw line breaks, a quote escaped where it would make a run of three or end the text,
  // now and then a line-ending backslash before a space and a word (it eats the break and the indent after it).
  forms.push(() => {
    const chars = [...s];
    let body = "", quotes = 0;
    chars.forEach((ch, i) => {
      if (ch === '"') {
        const escape = quotes === 2 || i === chars.length - 1;
        body += escape ? '\\"' : '"';
        quotes = escape ? 0 : quotes + 1;
        return;
      }
      quotes = 0;
      body += ch === "\n" && chance(0.8) ? "\n" : basicString(ch).slice(1, -1);
    });
    if (chance(0.3)) body = body.replace(/ (?=[^\s\\])/, " \\\n    ");
    return `"""${s.startsWith("\n") || chance(0.5) ? "\n" : ""}${body}"""`;
  });
  return pick(forms)();
}
function keyForm(k) {
  if (BARE.test(k) && chance(0.8)) return k;
  if (!k.includes("'") && !CONTROL.test(k.replace(/\t/g, "")) && chance(0.4)) return `'${k}'`;
  return basicString(k).replace(/\t/g, "\\t");
}
function numberForm(n) {
  if (Number.isNaN(n)) return pick(["nan", "+nan", "-nan"]);
  if (n === Infinity) return pick(["inf", "+inf"]);
  if (n === -Infinity) return "-inf";
  if (Object.is(n, -0)) return "-0.0";
  // An integral float past 2^53 as a float (as an integer it would be a 64-bit one, which the subset reads lossily).
  if (Number.isInteger(n) && Math.abs(n) > Number.MAX_SAFE_INTEGER) return n.toExponential();
  if (Number.isInteger(n)) {
    const r = int(6);
    if (n >= 0 && r === 0) return "0x" + n.toString(16).toUpperCase().replace(/(.)(?=(.{4})+$)/g, "$1_");
    if (n >= 0 && r === 1) return "0o" + n.toString(8);
    if (n >= 0 && r === 2) return "0b" + n.toString(2);
    if (r === 3) return String(n).replace(/(\d)(?=(\d{3})+$)/g, "$1_");
    if (n > 0 && r === 4) return "+" + n;
    return String(n);
  }
  const text = String(n); // 1.5, 1e+21, 5e-7: all TOML floats
  return chance(0.3) ? text.replace("e", "E") : text;
}
const pad = () => pick(["", " ", " ", "  ", "\t"]);
const comment = () => chance(0.2) ? `${pad()} # ${noControls(randomString(8))}` : "";
function valueForm(v, depth) {
  if (typeof v === "string") return stringForm(v);
  if (typeof v === "number") return numberForm(v);
  if (typeof v === "boolean") return String(v);
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) {
    if (v.length === 0) return pick(["[]", "[ ]", "[\n]"]);
    const multi = chance(0.4);
    const sep = multi ? () => `,${comment()}\n${"  ".repeat(depth + 1)}` : () => `,${pad()}`;
    let out = `[${pad()}${multi ? `${comment()}\n${"  ".repeat(depth + 1)}` : ""}`;
    out += v.map((item, i) => valueForm(item, depth + 1) + (i < v.length - 1 ? sep() : "")).join("");
    if (multi) out += `${chance(0.5) ? "," : ""}${comment()}\n${"  ".repeat(depth)}`;
    return out + `${pad()}]`;
  }
  const pairs = Object.entries(v).map(([k, x]) => `${keyForm(k)}${pad()}=${pad()}${valueForm(x, depth + 1)}`);
  return pairs.length ? `{${pad() || " "}${pairs.join(`,${pad()}`)}${pad() || " "}}` : "{}";
}
const isTable = (v) => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Date);
const isTableArray = (v) => Array.isArray(v) && v.length > 0 && v.every(isTable);
// Writes TABLE at PATH: its plain values first (some tables as dotted keys or inline), then its tables as headers.
function writeTable(table, path, lines) {
  const later = [];
  for (const [k, v] of Object.entries(table)) {
    const key = keyForm(k);
    if (isTable(v) && chance(0.65)) later.push([k, v]);
    else if (isTableArray(v) && chance(0.6)) later.push([k, v]);
    else if (
      isTable(v) && Object.keys(v).length > 0 && chance(0.5) &&
      Object.values(v).every((x) => !isTable(x) && !isTableArray(x))
    ) {
      for (const [k2, x] of Object.entries(v)) {
        lines.push(`${key}${pad()}.${pad()}${keyForm(k2)} = ${valueForm(x, 0)}${comment()}`);
      }
    } else lines.push(`${key}${pad()}=${pad()}${valueForm(v, 0)}${comment()}`);
    if (chance(0.1)) {
      lines.push(chance(0.5) ? "" : `#${noControls(randomString(10))}`);
    }
  }
  for (const [k, v] of later) {
    const sub = [...path, keyForm(k)];
    if (Array.isArray(v)) {
      for (const item of v) {
        lines.push("", `${chance(0.2) ? "  " : ""}[[${pad()}${sub.join(".")}${pad()}]]${comment()}`);
        writeTable(item, sub, lines);
      }
    } else {
      lines.push("", `[${pad()}${sub.join(`${pick(["", " "])}.${pick(["", " "])}`)}${pad()}]${comment()}`);
      writeTable(v, sub, lines);
    }
  }
}
function variedToml(doc) {
  const lines = chance(0.2) ? [`# written by packages-toml.mjs`, ""] : [];
  writeTable(doc, [], lines);
  let text = lines.join("\n") + (chance(0.9) ? "\n" : "");
  if (text.startsWith("\n")) text = text.slice(1);
  return text;
}
// Random dates for the varied documents (smol-toml's stringify writes a Date as an offset date-time).
const DATES = [
  "1979-05-27T07:32:00Z",
  "1979-05-27T00:32:00-07:00",
  "1979-05-27T00:32:00.999999-07:00",
  "1979-05-27 07:32:00Z",
  "1979-05-27T07:32:00",
  "1979-05-27",
  "07:32:00",
  "00:32:00.999",
];

// --- the checks ---

let failed = 0;
const out = (line) => process.stdout.write(line + "\n");
// One line, ok or FAIL, then the examples: grouped by kind (an example [kind, text], or text alone), the three
// shortest of each kind, with the count of the others.
function report(ok, what, examples = []) {
  if (ok) out(`ok: ${what}`);
  else {
    failed++;
    out(`FAIL: ${what}`);
  }
  const kinds = new Map();
  for (const example of examples) {
    const [kind, text] = Array.isArray(example) ? example : ["", example];
    kinds.set(kind, [...(kinds.get(kind) ?? []), text]);
  }
  for (const [kind, texts] of kinds) {
    if (kind) out(`  ${texts.length} × ${kind}:`);
    const indent = kind ? "    " : "  ";
    texts.sort((a, b) => a.length - b.length);
    for (const text of texts.slice(0, 3)) out(indent + text.replace(/\n/g, `\n${indent}  `));
    if (texts.length > 3) out(`${indent}… and ${texts.length - 3} more`);
  }
}

// (a) Documents.
const documents = []; // [name, text]
for (const [name, text] of CODEX_CONFIGS) {
  documents.push([name, text]);
  documents.push([`${name} (CRLF)`, text.replace(/\n/g, "\r\n")]);
}
let stringified = 0, varied = 0;
for (let i = 0; i < COUNT; i++) {
  const doc = randomDocument();
  try {
    documents.push([`stringify #${i}`, smol.stringify(doc)]);
    stringified++;
  } catch (error) {
    out(`note: smol-toml's stringify refused random object #${i}: ${firstLine(error)}`);
  }
  if (chance(0.3)) doc[pick(["when", "at", "date"])] = new smol.TomlDate(pick(DATES));
  documents.push([`varied #${i}`, variedToml(doc)]);
  varied++;
}

const readable = []; // [name, text, smol value] of documents both read alike
const unlike = [];
const smolRefused = [];
for (const [name, text] of documents) {
  let expected;
  try {
    expected = smolParse(text);
  } catch (error) {
    smolRefused.push(`${name}: smol-toml: ${firstLine(error)}\n${show(text)}`);
    continue;
  }
  let actual;
  try {
    actual = parseTomlText(text).value;
  } catch (error) {
    unlike.push(`${name}: parseTomlText threw "${firstLine(error)}", smol-toml read it\n${show(text)}`);
    continue;
  }
  const found = difference(actual, expected);
  if (found) unlike.push(`${name}: ${found}\n${show(text)}`);
  else readable.push([name, text, expected]);
}
// A document this file wrote wrong is its bug, not mcp.ts's: shown, not counted against mcp.ts.
if (smolRefused.length) {
  report(false, `smol-toml refused ${smolRefused.length} generated documents (a bug here)`, smolRefused);
}
report(
  unlike.length === 0,
  `parsed ${readable.length} of ${documents.length - smolRefused.length} documents alike ` +
    `(${CODEX_CONFIGS.length} Codex configs and their CRLF copies, ${stringified} by smol-toml's stringify, ` +
    `${varied} in varied forms; seed ${SEED})`,
  unlike,
);

for (const [name, text] of [...TOML_11, ...EDGES]) {
  let expected, actual;
  try {
    expected = smolParse(text);
  } catch (error) {
    report(false, `${name}: smol-toml refused it: ${firstLine(error)}`);
    continue;
  }
  try {
    actual = parseTomlText(text).value;
  } catch (error) {
    out(`note: ${name}: smol-toml reads it, parseTomlText: ${firstLine(error)}: ${show(text)}`);
    continue;
  }
  const found = difference(actual, expected);
  out(found ? `note: ${name}: read differently: ${found}: ${show(text)}` : `note: ${name}: read alike`);
}

// (b) Invalid documents.
let rejected = 0;
const missed = [], accepted = [], badMessage = [], lines = [];
for (const [name, text, must] of INVALID) {
  let smolError;
  try {
    smolParse(text);
  } catch (error) {
    smolError = error;
  }
  if (!smolError) {
    report(false, `${name}: smol-toml read it (the list is wrong): ${show(text)}`);
    continue;
  }
  try {
    const { value } = parseTomlText(text);
    const what = `${name}: ${show(text)} read as ${repr(value)} (smol-toml: ${
      firstLine(smolError).replace(/^Invalid TOML document: /, "")
    })`;
    (must ? missed : accepted).push(what);
  } catch (error) {
    rejected++;
    const line = /at line (\d+)$/.exec(error.message);
    if (!(error instanceof Error) || !line) badMessage.push(`${name}: ${show(error.message)}`);
    else if (smolError.line && Number(line[1]) !== smolError.line) {
      lines.push(`${name}: "${error.message}", smol-toml says line ${smolError.line}: ${show(text)}`);
    }
  }
}
report(
  missed.length === 0 && badMessage.length === 0,
  `rejected ${rejected} of ${INVALID.length} invalid documents (${INVALID.filter((d) => d[2]).length} must be)`,
  [...missed.map((m) => "accepted: " + m), ...badMessage.map((m) => 'no "at line N": ' + m)],
);
for (const what of accepted) out(`note: accepts invalid TOML (only a full parser can tell): ${what}`);
for (const what of lines) out(`note: another line: ${what}`);

// (c) editTomlTable.
let edits = 0, refused = 0;
const wrong = [];
const copy = (text) => smolParse(text); // a fresh copy of the original's value, TomlDates and all
for (const [name, text, original] of readable) {
  const servers = original.mcp_servers;
  const names = isTable(servers) ? Object.keys(servers).filter((n) => isTable(servers[n])) : [];
  const plans = [["add", "interop-new", randomEntry()], ["add", "new.server x", randomEntry()]];
  if (names.length) plans.push(["replace", names[0], randomEntry()], ["remove", names.at(-1), undefined]);
  const headers = parseTomlText(text).headers.filter((header) => header.path[0] === "mcp_servers");
  const form = servers === undefined
    ? "no mcp_servers"
    : headers.length
    ? "mcp_servers under [mcp_servers…] headers"
    : "mcp_servers with no header (an inline table, dotted keys)";
  for (const [verb, server, entry] of plans) {
    let edited;
    try {
      edited = editTomlTable(text, "mcp_servers", server, entry);
    } catch (error) {
      // Refused by design: a server written as an inline table or by dotted keys, not as [mcp_servers.X].
      if (
        /(is not written as a \[mcp_servers\..*\] table|is written as an inline table; edit it by hand) at line \d+$/
          .test(error.message)
      ) refused++;
      else {wrong.push([
          `${verb}, ${form}: threw`,
          `${name}: ${verb} ${show(server)} threw "${firstLine(error)}"\n${show(text)}`,
        ]);}
      continue;
    }
    edits++;
    const expected = copy(text);
    if (!isTable(expected.mcp_servers)) expected.mcp_servers = {};
    if (entry === undefined) delete expected.mcp_servers[server];
    else expected.mcp_servers[server] = entry;
    let actual;
    try {
      actual = smolParse(edited);
    } catch (error) {
      wrong.push([
        `${verb}, ${form}: smol-toml refuses the output (${firstLine(error).replace(/^Invalid TOML document: /, "")})`,
        `${name}: ${verb} ${show(server)}\nbefore: ${show(text)}\nafter:  ${show(edited)}`,
      ]);
      continue;
    }
    // Removing the last server of an implicit [mcp_servers] leaves no mcp_servers at all: the same to a host.
    if (Object.keys(expected.mcp_servers).length === 0 && !Object.hasOwn(actual, "mcp_servers")) {
      delete expected.mcp_servers;
    }
    const found = difference(expected, actual, "", true);
    if (found) {
      wrong.push([
        `${verb}, ${form}: read back otherwise`,
        `${name}: ${verb} ${show(server)}: ${found}\nbefore: ${show(text)}\nafter:  ${show(edited)}`,
      ]);
    }
  }
}
report(
  wrong.length === 0,
  `editTomlTable: ${edits} edits (add, replace, remove of mcp_servers.X) on ${readable.length} documents read back ` +
    `as intended by smol-toml (${refused} refused as documented: the server, or mcp_servers, not written as [mcp_servers.X] tables)`,
  wrong,
);

// Minimal cases, one check each.
function editCase(what, text, server, entry) {
  let edited, value;
  try {
    edited = editTomlTable(text, "mcp_servers", server, entry);
  } catch (error) {
    report(false, `${what}: editTomlTable threw "${error.message}"`, [`before: ${show(text)}`]);
    return;
  }
  try {
    value = smolParse(edited);
  } catch (error) {
    report(false, `${what}: smol-toml refuses the output: ${firstLine(error)}`, [
      `before: ${show(text)}`,
      `after:  ${show(edited)}`,
    ]);
    return;
  }
  const found = difference(entry, value.mcp_servers?.[server], "", true);
  report(!found, `${what}: ${found ?? "read back as written"}`, found ? [`after:  ${show(edited)}`] : []);
}
editCase("DEL (U+007F) in a value", "", "x", { command: "a\u007fb" });
editCase("DEL (U+007F) in a key", "", "x", { env: { "A\u007fB": "1" } });
editCase("a number past 2^63 in a value", "", "x", { tool_timeout_sec: 1e20 });
// An inline table is closed (TOML 1.0): a [mcp_servers.b] after it would be invalid, so mcp.ts refuses, at its line.
try {
  editTomlTable('mcp_servers = { a = { command = "x" } }\n', "mcp_servers", "b", { command: "y" });
  report(false, "add next to an inline mcp_servers table: not refused (a [mcp_servers.b] header would be invalid)");
} catch (error) {
  report(
    /inline table.* at line 1$/.test(error.message),
    `add next to an inline mcp_servers table is refused: "${error.message}"`,
  );
}
editCase("add next to servers written by dotted keys", 'mcp_servers.a.command = "x"\n', "b", { command: "y" });
try {
  editTomlTable('model = "o3"\n\n[mcp_servers]\na = { command = "x" }\n', "mcp_servers", "a", { command: "y" });
  report(false, "replacing an inline server table: not refused");
} catch (error) {
  const line = /at line (\d+)$/.exec(error.message)?.[1];
  if (line === "4") report(true, `replacing an inline server table is refused at its line: "${error.message}"`);
  else out(`note: replacing an inline server table is refused, at line ${line} (it is on line 4): "${error.message}"`);
}

process.exit(failed ? 1 : 0);
