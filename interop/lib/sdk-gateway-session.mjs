// One scripted session against `mcp.ts gateway` in front of server-everything, server-memory and
// `mcp.ts serve testdata/tools` (named everything, memory and tools), driven by an official TypeScript SDK client:
//   node sdk-gateway-session.mjs v1|v2 "<stdio gateway command>"|URL [--direct NAME="<command>"]... [--wire]
// The script: tools/list (the three upstreams' tools must all be there, prefixed), call everything__echo,
// everything__get-sum, memory__create_entities then memory__read_graph, tools__add, then
// everything__trigger-long-running-operation {duration: 1, steps: 2} with a progress token (onprogress must fire),
// prompts/list, resources/list and resources/templates/list, resources/read of the first resource, prompts/get
// everything__args-prompt {city: "Oslo"}; then server-everything's questions, answered by this client's handlers (it
// declares roots, sampling and elicitation): everything__get-roots-list (roots/list: our one root),
// everything__trigger-sampling-request (sampling/createMessage: a canned answer),
// everything__trigger-elicitation-request (elicitation/create: accepted with {name: "Ada"}), each asked of this client
// during its own call; then close (v1 over HTTP: DELETE the session). In the 2026-07-28 era (v2) the gateway asks them
// as input_required results, which the SDK fulfils with the same handlers and retries. Behind an HTTP gateway (a URL)
// the upstreams are shared by its clients, so the gateway offers them no roots: server-everything then does not list
// get-roots-list (tools/list must not have everything__get-roots-list, a call to it must fail), and this client is
// never asked roots/list. Over stdio the roots are offered and the tool must be listed.
// --direct NAME="<command>" (repeatable, in the gateway's order): also connect an SDK v1 client straight to each
// upstream's stdio command and compare: the gateway's resources and templates must be theirs, unchanged and in that
// order (every page; a URI two serve: the first's), the read's contents the same, and its prompts theirs, each
// prefixed NAME__.
// stdout: one line per step, "ok   STEP: what came" or "FAIL STEP: what came (expected ...)"; stderr: with --wire
// every message sent (">") and received ("<"), with its time. Exit 1 when a step failed or the SDK raised, 2 on bad
// usage.
// v1: @modelcontextprotocol/sdk's Client. v2: @modelcontextprotocol/client's, versionNegotiation { mode: "auto" }.
import process from "node:process";
import { fromCache, stdioServer } from "./cache.mjs";

const [sdk, server, ...rest] = process.argv.slice(2);
const wire = rest.includes("--wire");
const direct = rest.flatMap((arg, at) => (rest[at - 1] === "--direct" ? [arg] : [])).map((arg) => {
  const equals = arg.indexOf("=");
  return { name: arg.slice(0, equals), command: arg.slice(equals + 1) };
});
if (!["v1", "v2"].includes(sdk) || !server) {
  console.error(
    'usage: sdk-gateway-session.mjs v1|v2 "<stdio gateway command>"|URL [--direct NAME="<command>"]... [--wire]',
  );
  process.exit(2);
}
const http = /^https?:\/\//.test(server);

const started = performance.now();
const elapsed = () => `+${Math.round(performance.now() - started)}ms`.padStart(8);
let failures = 0;
const step = (name, ok, detail, expected) => {
  if (!ok) failures++;
  console.log(`${ok ? "ok  " : "FAIL"} ${name}: ${detail}${ok || !expected ? "" : ` (expected ${expected})`}`);
};

// Every message a transport hands the client (the SDK sets `onmessage` in connect()): the first protocolVersion
// answered is noted, and with --wire every message is printed, sent ones too.
let negotiated;
function watch(transport, label) {
  let handler;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () => handler,
    set: (fn) => {
      handler = fn && ((message, extra) => {
        if (label === "session") negotiated ??= message?.result?.protocolVersion;
        if (wire) console.error(`wire ${elapsed()} ${label} < ${JSON.stringify(message)}`);
        return fn(message, extra);
      });
    },
  });
  if (wire) {
    const send = transport.send;
    transport.send = function (message, options) {
      console.error(`wire ${elapsed()} ${label} > ${JSON.stringify(message)}`);
      return send.call(this, message, options);
    };
  }
  return transport;
}

const clientInfo = { name: "mcp-interop-sdk-gateway-session", version: "1.0.0" };
const capabilities = { roots: {}, sampling: {}, elicitation: {} };
// Each session's root is its own, to tell whose roots the upstream has.
const ROOTS = "file:///tmp/mcp-interop-gateway-root/";
const ROOT = { uri: `${ROOTS}${sdk}-${process.pid}`, name: "interop-root" };
const SAMPLED = "sampled by the interop client";
const asked = []; // the questions asked of this client during the current step
const everAsked = new Set(); // and during the whole session
const answers = {
  "roots/list": () => ({ roots: [ROOT] }),
  "sampling/createMessage": () => ({
    model: "interop-model",
    role: "assistant",
    content: { type: "text", text: SAMPLED },
    stopReason: "endTurn",
  }),
  "elicitation/create": () => ({ action: "accept", content: { name: "Ada" } }),
};
const v1 = sdk === "v1";
let client, transport;
if (v1) {
  const { Client } = fromCache("@modelcontextprotocol/sdk/client/index.js");
  const types = fromCache("@modelcontextprotocol/sdk/types.js");
  client = new Client(clientInfo, { capabilities });
  for (
    const [method, schema] of [
      ["roots/list", types.ListRootsRequestSchema],
      ["sampling/createMessage", types.CreateMessageRequestSchema],
      ["elicitation/create", types.ElicitRequestSchema],
    ]
  ) {
    client.setRequestHandler(schema, () => (asked.push(method), everAsked.add(method), answers[method]()));
  }
  if (http) {
    const { StreamableHTTPClientTransport } = fromCache("@modelcontextprotocol/sdk/client/streamableHttp.js");
    transport = new StreamableHTTPClientTransport(new URL(server));
  } else {
    const { StdioClientTransport } = fromCache("@modelcontextprotocol/sdk/client/stdio.js");
    transport = new StdioClientTransport({ ...stdioServer(server), stderr: "ignore" });
  }
} else {
  const { Client, StreamableHTTPClientTransport } = fromCache("@modelcontextprotocol/client");
  client = new Client(clientInfo, { capabilities, versionNegotiation: { mode: "auto" } });
  for (const method of Object.keys(answers)) {
    client.setRequestHandler(method, () => (asked.push(method), everAsked.add(method), answers[method]()));
  }
  if (http) {
    transport = new StreamableHTTPClientTransport(new URL(server));
  } else {
    const { StdioClientTransport } = fromCache("@modelcontextprotocol/client/stdio");
    const Stdio = StdioClientTransport;
    transport = new Stdio({ ...stdioServer(server), stderr: "ignore" });
    transport.constructor = function Sibling(params) {
      return watch(new Stdio(params), "probe");
    };
  }
}
watch(transport, "session");

// The direct clients: SDK v1 over stdio to each upstream itself.
for (const upstream of direct) {
  const { Client } = fromCache("@modelcontextprotocol/sdk/client/index.js");
  const { StdioClientTransport } = fromCache("@modelcontextprotocol/sdk/client/stdio.js");
  upstream.client = new Client({ name: "mcp-interop-direct", version: "1.0.0" });
  await upstream.client.connect(new StdioClientTransport({ ...stdioServer(upstream.command), stderr: "ignore" }));
}
const offers = (upstream, capability) => upstream.client.getServerCapabilities()?.[capability] !== undefined;

const text = (result) =>
  (result.content ?? result.contents ?? result.messages ?? [])
    .map((item) => item.text ?? item.content?.text ?? item.type).join(" | ").replace(/\s+/g, " ");
const short = (value, length = 100) => (value.length > length ? `${value.slice(0, length)}...` : value);
const call = (name, args, options) =>
  v1
    ? client.callTool({ name, arguments: args }, undefined, options)
    : client.callTool({ name, arguments: args }, options);
// Every page of a list.
async function all(target, method, key) {
  const items = [];
  let cursor;
  do {
    const page = await target[method](cursor ? { cursor } : undefined);
    items.push(...page[key]);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const canonical = (value) =>
  Array.isArray(value)
    ? value.map(canonical)
    : value && typeof value === "object"
    ? Object.fromEntries(Object.keys(value).sort().map((key) => [key, canonical(value[key])]))
    : value;
// What differs between two lists of objects keyed by `key`, in short.
function difference(got, want, key) {
  const a = new Map(got.map((item) => [item[key], JSON.stringify(canonical(item))]));
  const b = new Map(want.map((item) => [item[key], JSON.stringify(canonical(item))]));
  const lines = [];
  for (const [k, v] of b) {
    if (!a.has(k)) lines.push(`missing ${k}`);
    else if (a.get(k) !== v) lines.push(`${k}: ${a.get(k)} vs ${v}`);
  }
  for (const k of a.keys()) if (!b.has(k)) lines.push(`extra ${k}`);
  return lines.join("; ") || "the same items, another order";
}

try {
  await client.connect(transport);
  const info = client.getServerVersion();
  const era = v1 ? `protocol ${negotiated}` : `era ${client.getProtocolEra()} ${client.getNegotiatedProtocolVersion()}`;
  step(
    "connect",
    info?.name === "mcp.ts gateway",
    `${JSON.stringify(info)}, ${era}`,
    'serverInfo.name "mcp.ts gateway"',
  );

  const tools = v1
    ? await all(client, "listTools", "tools")
    : (await client.listTools(undefined, { cacheMode: "bypass" })).tools;
  const names = tools.map((tool) => tool.name);
  const per = {};
  for (const name of names) per[name.split("__")[0]] = (per[name.split("__")[0]] ?? 0) + 1;
  const wanted = [
    "everything__echo",
    "everything__get-sum",
    "everything__trigger-long-running-operation",
    "memory__create_entities",
    "memory__read_graph",
    "tools__add",
  ];
  const missing = wanted.filter((name) => !names.includes(name));
  // server-everything lists get-roots-list only to a client that declares roots: over stdio the gateway offers ours,
  // behind --http (upstreams shared by several clients) none.
  const roots = names.includes("everything__get-roots-list");
  step(
    "tools/list",
    missing.length === 0 && names.every((name) => /^(everything|memory|tools)__[A-Za-z0-9_-]+$/.test(name)) &&
      roots === !http,
    `${names.length} tools ${JSON.stringify(per)}${missing.length ? `, missing ${missing.join(", ")}` : ""}, ` +
      `everything__get-roots-list ${roots ? "listed" : "not listed"}`,
    `${wanted.join(", ")}, every name <upstream>__<name>, everything__get-roots-list ` +
      (http ? "not listed (no roots offered to a shared upstream)" : "listed (our roots offered)"),
  );

  const echo = text(await call("everything__echo", { message: "hi" }));
  step("call everything__echo", echo === "Echo: hi", echo, '"Echo: hi"');
  const sum = text(await call("everything__get-sum", { a: 2, b: 3 }));
  step("call everything__get-sum", sum.includes("The sum of 2 and 3 is 5"), sum, '"The sum of 2 and 3 is 5"');
  const entity = { name: "gateway-interop", entityType: "check", observations: ["seen through mcp.ts gateway"] };
  const created = await call("memory__create_entities", { entities: [entity] });
  step("call memory__create_entities", !created.isError, short(text(created)), "no isError");
  const graph = text(await call("memory__read_graph", {}));
  step("call memory__read_graph", graph.includes("seen through mcp.ts gateway"), short(graph), "the entity created");
  const add = await call("tools__add", { a: 2, b: 3 });
  step("call tools__add", text(add) === "5" && !add.isError, text(add), '"5"');

  const progress = [];
  const long = await call("everything__trigger-long-running-operation", { duration: 1, steps: 2 }, {
    onprogress: (p) => progress.push(`${p.progress}/${p.total}`),
  });
  step(
    "call everything__trigger-long-running-operation",
    progress.length >= 1 && text(long).includes("Long running operation completed"),
    `onprogress [${progress.join(", ")}]; ${short(text(long))}`,
    "onprogress at least once, then the result",
  );

  const prompts = await all(client, "listPrompts", "prompts");
  const promptNames = prompts.map((prompt) => prompt.name);
  let promptsOk = promptNames.includes("everything__args-prompt");
  let promptsWhy = "everything__args-prompt";
  if (direct.length) {
    const theirs = [];
    for (const upstream of direct) {
      if (!offers(upstream, "prompts")) continue;
      theirs.push(...(await all(upstream.client, "listPrompts", "prompts")).map((p) => `${upstream.name}__${p.name}`));
    }
    promptsOk &&= same(promptNames, theirs);
    promptsWhy += `, and the upstreams' own ${theirs.length} prompts, prefixed (${theirs.join(", ")})`;
  }
  step("prompts/list", promptsOk, `${promptNames.length} prompts: ${promptNames.join(", ")}`, promptsWhy);

  const resources = await all(client, "listResources", "resources");
  const templates = await all(client, "listResourceTemplates", "resourceTemplates");
  if (direct.length) {
    const theirs = [];
    const theirTemplates = [];
    const from = [];
    for (const upstream of direct) {
      if (!offers(upstream, "resources")) continue;
      const own = await all(upstream.client, "listResources", "resources");
      for (const resource of own) if (!theirs.some((r) => r.uri === resource.uri)) theirs.push(resource);
      theirTemplates.push(...await all(upstream.client, "listResourceTemplates", "resourceTemplates"));
      from.push(`${upstream.name} ${own.length}`);
    }
    step(
      "resources/list",
      same(resources, theirs),
      `${resources.length} resources (the upstreams directly: ${from.join(", ")})` +
        (same(resources, theirs) ? ", the same JSON" : `: ${short(difference(resources, theirs, "uri"), 600)}`),
      "the upstreams' own, unchanged",
    );
    step(
      "resources/templates/list",
      same(templates, theirTemplates),
      `${templates.length} templates: ${templates.map((t) => t.uriTemplate).join(", ")}` +
        (same(templates, theirTemplates)
          ? "; the same JSON"
          : `: ${short(difference(templates, theirTemplates, "uriTemplate"), 600)}`),
      "the upstreams' own, unchanged",
    );
  } else {
    step("resources/list", resources.length > 0, `${resources.length} resources`, "some");
    step(
      "resources/templates/list",
      true,
      `${templates.length} templates: ${templates.map((t) => t.uriTemplate).join(", ")}`,
    );
  }

  const uri = resources[0]?.uri;
  const read = await client.readResource({ uri });
  let readOk = text(read).length > 0;
  let readWhy = "contents";
  const owner = direct.find((upstream) => upstream.name === "everything");
  if (owner) {
    const theirs = await owner.client.readResource({ uri });
    readOk &&= same(read.contents, theirs.contents);
    readWhy = "server-everything's contents, unchanged";
  }
  step(`resources/read ${uri}`, readOk, short(text(read), 70), readWhy);

  const prompt = text(await client.getPrompt({ name: "everything__args-prompt", arguments: { city: "Oslo" } }));
  step(
    "prompts/get everything__args-prompt",
    prompt.includes("What's weather in Oslo?"),
    prompt,
    '"What\'s weather in Oslo?"',
  );

  // The upstream's questions, asked during its tool call: the gateway passes them to this client.
  // The question must have been asked of this client during the call (`during`), or at some time in the session.
  const ask = async (tool, args, method, want, why = "", during = true) => {
    asked.length = 0;
    const result = await call(tool, args);
    const got = text(result);
    step(
      `call ${tool}`,
      !result.isError && got.includes(want) && (during ? asked.includes(method) : everAsked.has(method)),
      `asked us: [${asked.join(", ")}]; ${short(got, 140)}${why && why(got)}`,
      `${method} asked of this client${during ? " during the call" : ""}, then "${want}"`,
    );
  };
  if (!http) {
    // server-everything asks for the roots once on its own, 350 ms after its initialize (the gateway passes that to
    // its one client), and keeps them; get-roots-list asks only when it has none: so asked at some time, not
    // necessarily during the call. The root must be ours.
    await ask("everything__get-roots-list", {}, "roots/list", ROOT.uri, (got) => {
      if (got.includes(ROOT.uri)) return everAsked.has("roots/list") ? " (ours)" : " (ours, never asked of us?)";
      return ` (not ours, ${ROOT.uri}: another client's)`;
    }, false);
  } else {
    // Behind --http the upstream's session is every client's: the gateway offers it no roots, so the tool is not
    // there (the call fails) and nobody is asked roots/list.
    let outcome;
    try {
      const result = await call("everything__get-roots-list", {});
      outcome = result.isError ? `isError: ${short(text(result), 140)}` : undefined;
      if (!outcome) outcome = `answered: ${short(text(result), 140)}`;
    } catch (error) {
      outcome = `the SDK raised ${error?.name}: ${error?.message ?? error}`;
    }
    step(
      "everything__get-roots-list (no roots behind --http)",
      !outcome.startsWith("answered") && !everAsked.has("roots/list"),
      `${outcome}; roots/list asked of us: ${everAsked.has("roots/list") ? "yes" : "never"}`,
      "the call fails (not listed), and roots/list never asked of this client",
    );
  }
  await ask("everything__trigger-sampling-request", { prompt: "hi", maxTokens: 10 }, "sampling/createMessage", SAMPLED);
  await ask(
    "everything__trigger-elicitation-request",
    {},
    "elicitation/create",
    "User provided the requested information",
  );
} catch (error) {
  step("session", false, `the SDK raised ${error?.name}: ${error?.message ?? error}`);
} finally {
  if (v1 && http && transport.sessionId) await transport.terminateSession().catch(() => {}); // DELETE
  await client.close().catch(() => {});
  for (const upstream of direct) await upstream.client?.close().catch(() => {});
}
console.log(`${failures === 0 ? "all steps as expected" : `${failures} steps FAILED`} (${elapsed().trim()})`);
process.exitCode = failures === 0 ? 0 : 1;
