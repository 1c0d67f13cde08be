// The checks of interop/otel.sh on what lib/otlp-receiver.mjs logged and on a /metrics page: one line per check,
// "ok: ..." or "FAIL: ..." (then the evidence, indented); otel.sh counts them. Exit 0 unless a usage error.
//
//   node lib/otel-verify.mjs strict LOG               the shared decoder (lib/otlp-decode.mjs) refuses malformed
//                                                     variants of the SDK's own bodies in LOG, and takes them as sent
//   node lib/otel-verify.mjs sdk LOG 'JSON'           the SDK's span and histogram (JSON: lib/otel-sdk-export.mjs's
//                                                     line) came through the receiver as exported
//   node lib/otel-verify.mjs mcp LOG TRACE SPAN TRANSPORT CHAIN
//                                                     mcp.ts's spans and metrics: `call` under
//                                                     TRACEPARENT=00-TRACE-SPAN-01 through CHAIN (see below) over
//                                                     TRANSPORT (pipe: stdio children, tcp: --http); waits up to
//                                                     15 s for the servers' exports
//   node lib/otel-verify.mjs prom FILE WHAT [EXPECT...]
//                                                     a /metrics page, parsed by prom2javascript; EXPECT:
//                                                     FAMILY{label="v",...}=N: one series with at least those
//                                                     labels (label="": without it), N its _count (a histogram) or
//                                                     its value
//   node lib/otel-verify.mjs prom-strict FILE         the parser refuses broken variants of that page
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { setTimeout as sleep } from "node:timers/promises";
import { isDeepStrictEqual } from "node:util";
import { decodeOtlp } from "./otlp-decode.mjs";

const cache = process.env.IOP_CACHE || process.env.MCP_INTEROP_CACHE || join(homedir(), ".cache", "mcp-interop");
const otel = createRequire(join(cache, "otel", "package.json"));

// The MCP semantic conventions' explicit bucket boundaries for mcp.{client,server}.operation.duration (seconds).
const MCP_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];

const cut = (text, n = 1500) => (text.length > n ? text.slice(0, n) + ` ... (${text.length} characters)` : text);
const json = (value) =>
  JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? v.toString() : v instanceof Uint8Array ? [...v] : v));
function ok(what) {
  console.log(`ok: ${what}`);
}
function fail(what, ...evidence) {
  console.log(`FAIL: ${what}`);
  for (const item of evidence) {
    for (const line of String(item).split("\n")) console.log(`  ${line}`);
  }
}
// check(cond, what, ...evidence): ok or FAIL
function check(condition, what, ...evidence) {
  if (condition) ok(what);
  else fail(what, ...evidence);
  return condition;
}

const readLog = (file) =>
  readFileSync(file, "utf8").split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line));

// --- strict: the decoder is no pushover ---------------------------------------------------------------------------

function strict(log) {
  const traces = log.find((r) => r.ok && r.path === "/v1/traces");
  const metrics = log.find((r) => r.ok && r.path === "/v1/metrics");
  if (!traces || !metrics) return fail("strict: the SDK's bodies to mutate are in the log", "none decoded");
  const span = (b) => b.resourceSpans[0].scopeSpans[0].spans[0];
  const point = (b) => b.resourceMetrics[0].scopeMetrics[0].metrics[0].histogram.dataPoints[0];
  const histogram = (b) => b.resourceMetrics[0].scopeMetrics[0].metrics[0];
  const hexToBase64 = (hex) => Buffer.from(hex, "hex").toString("base64");
  const variants = [
    ["/v1/traces", "traceId in base64 (protobuf's default JSON for bytes)", (b) => {
      span(b).traceId = hexToBase64(span(b).traceId);
    }],
    ["/v1/traces", "spanId of 15 hex digits", (b) => {
      span(b).spanId = span(b).spanId.slice(1);
    }],
    ["/v1/traces", "spanId in upper case", (b) => {
      span(b).spanId = span(b).spanId.toUpperCase().replace(/^[0-9]/, "A");
    }],
    ["/v1/traces", "parentSpanId all zeros", (b) => {
      span(b).parentSpanId = "0000000000000000";
    }],
    ["/v1/traces", 'kind as its name ("SPAN_KIND_CLIENT")', (b) => {
      span(b).kind = "SPAN_KIND_CLIENT";
    }],
    ["/v1/traces", "kind 6 (no such kind)", (b) => {
      span(b).kind = 6;
    }],
    ["/v1/traces", 'status.code as its name ("STATUS_CODE_OK")', (b) => {
      span(b).status = { code: "STATUS_CODE_OK" };
    }],
    ["/v1/traces", "startTimeUnixNano as a JSON number past 2^53", (b) => {
      span(b).startTimeUnixNano = Number(span(b).startTimeUnixNano);
    }],
    ["/v1/traces", 'endTimeUnixNano "1.7e18" (not a decimal integer)', (b) => {
      span(b).endTimeUnixNano = "1.7e18";
    }],
    ["/v1/traces", "the proto field name start_time_unix_nano", (b) => {
      span(b).start_time_unix_nano = span(b).startTimeUnixNano;
      delete span(b).startTimeUnixNano;
    }],
    ["/v1/traces", 'intValue "42.5"', (b) => {
      span(b).attributes.push({ key: "x.bad", value: { intValue: "42.5" } });
    }],
    ["/v1/traces", "an AnyValue with two values", (b) => {
      span(b).attributes.push({ key: "x.two", value: { stringValue: "a", boolValue: true } });
    }],
    ["/v1/traces", "an attribute key twice", (b) => {
      span(b).attributes.push(span(b).attributes[0]);
    }],
    ["/v1/traces", "ending before it starts", (b) => {
      span(b).endTimeUnixNano = String(BigInt(span(b).startTimeUnixNano) - 1n);
    }],
    ["/v1/metrics", 'aggregationTemporality as its name ("AGGREGATION_TEMPORALITY_CUMULATIVE")', (b) => {
      histogram(b).histogram.aggregationTemporality = "AGGREGATION_TEMPORALITY_CUMULATIVE";
    }],
    ["/v1/metrics", "aggregationTemporality 0 (unspecified)", (b) => {
      histogram(b).histogram.aggregationTemporality = 0;
    }],
    ["/v1/metrics", "bucketCounts adding up to more than count", (b) => {
      point(b).bucketCounts[0] = String(Number(point(b).bucketCounts[0]) + 1);
    }],
    ["/v1/metrics", "one bucket fewer than bounds + 1", (b) => {
      point(b).bucketCounts.pop();
    }],
    ["/v1/metrics", 'count "3.0"', (b) => {
      point(b).count = "3.0";
    }],
    ["/v1/metrics", "a metric with histogram and sum both", (b) => {
      histogram(b).sum = { dataPoints: [], aggregationTemporality: 2, isMonotonic: true };
    }],
    ["/v1/metrics", "the proto field name data_points", (b) => {
      histogram(b).histogram.data_points = histogram(b).histogram.dataPoints;
      delete histogram(b).histogram.dataPoints;
    }],
  ];
  for (const [path, what, mutate] of variants) {
    const body = JSON.parse((path === "/v1/traces" ? traces : metrics).body);
    mutate(body);
    try {
      decodeOtlp(path, JSON.stringify(body));
      fail(`decoder: refuses ${what}`, "it was accepted");
    } catch (error) {
      ok(`decoder: refuses ${what}: ${error.message}`);
    }
  }
}

// --- sdk: the official SDK's export, decoded --------------------------------------------------------------------

function sdk(log, expected) {
  const want = JSON.parse(expected);
  const bad = log.filter((r) => !r.ok);
  check(
    bad.length === 0,
    `SDK: every body the SDK's exporters sent (${log.length}) decodes`,
    ...bad.map((r) => `${r.path}: ${r.error}\n${cut(r.body ?? "")}`),
  );
  const traces = log.filter((r) => r.ok && r.path === "/v1/traces");
  const spans = traces.flatMap((r) => r.decoded.spans);
  const span = spans.find((s) => s.spanId === want.spanId);
  if (!check(span, `SDK: its span ${want.spanId} is among the ${spans.length} decoded`, json(spans))) return;
  const notes = traces.flatMap((r) => r.notes);
  ok(
    `SDK: /v1/traces Content-Type ${traces[0].contentType}, User-Agent ${traces[0].userAgent}; decoder notes: ${
      notes.join("; ") || "none"
    }`,
  );
  check(
    span.traceId === want.traceId && span.name === want.name && span.kind === 3 && span.parentSpanId === "",
    `SDK: span traceId ${want.traceId}, name "${want.name}", kind 3 (CLIENT), no parent`,
    json(span),
  );
  check(
    isDeepStrictEqual(span.attributes, want.attributes),
    `SDK: span attributes ${json(want.attributes)}`,
    json(span),
  );
  check(span.status.code === 1, "SDK: span status code 1 (OK)", json(span.status));
  check(span.resource["service.name"] === want.service, `SDK: resource service.name "${want.service}"`, json(span));

  const bodies = log.filter((r) => r.ok && r.path === "/v1/metrics");
  const metric = bodies.flatMap((r) => r.decoded.metrics).findLast((m) => m.name === want.metric);
  if (!check(metric, `SDK: its histogram ${want.metric} decodes from /v1/metrics`, ...bodies.map((r) => r.body))) {
    return;
  }
  const point = metric.points[0];
  const sum = want.values.reduce((a, b) => a + b, 0);
  check(
    metric.type === "histogram" && metric.unit === "s" && metric.aggregationTemporality === 2 &&
      metric.points.length === 1 && point.count === want.values.length && Math.abs(point.sum - sum) < 1e-9 &&
      point.min === Math.min(...want.values) && point.max === Math.max(...want.values),
    `SDK: histogram unit s, aggregationTemporality 2, one point: count ${want.values.length}, sum ${sum}, min, max ` +
      `(notes: ${[...new Set(bodies.flatMap((r) => r.notes))].join("; ") || "none"})`,
    json(metric),
  );
}

// --- mcp: mcp.ts's own export -------------------------------------------------------------------------------------
// CHAIN names the processes a `tools/call` crosses and the tool name on each hop: "call>add>serve" (call's CLIENT span
// "tools/call add", serve's SERVER span), "call>t__add>gateway>add>serve" (through a gateway: its SERVER span
// "tools/call t__add", its CLIENT span "tools/call add" to the upstream).

const spanKind = (s) => (s.kind === 2 ? "SERVER" : s.kind === 3 ? "CLIENT" : `kind ${s.kind}`);
const instanceOf = (x) => x.resource["service.instance.id"];
const spansOf = (log) => log.filter((r) => r.ok && r.path === "/v1/traces").flatMap((r) => r.decoded.spans);

// The chain's spans, outermost first, as far as the log has them.
function walk(spans, traceId, parentId, tools) {
  const chain = [];
  let parent = { spanId: parentId, process: undefined };
  for (const [i, tool] of tools.entries()) {
    const name = `tools/call ${tool}`;
    const client = spans.find((s) =>
      s.kind === 3 && s.name === name && s.traceId === traceId && s.parentSpanId === parent.spanId &&
      (i === 0 || instanceOf(s) === parent.process)
    );
    if (!client) break;
    chain.push(client);
    const server = spans.find((s) =>
      s.kind === 2 && s.name === name && s.traceId === traceId && s.parentSpanId === client.spanId &&
      instanceOf(s) !== instanceOf(client)
    );
    if (!server) break;
    chain.push(server);
    parent = { spanId: server.spanId, process: instanceOf(server) };
  }
  return chain;
}

async function mcp(file, traceId, parentId, transport, chainText) {
  const parts = chainText.split(">");
  const roles = parts.filter((_, i) => i % 2 === 0);
  const tools = parts.filter((_, i) => i % 2 === 1);
  const who = `mcp.ts (${roles.join(" > ")}, ${transport})`;
  let log = readLog(file);
  const metricNames = (log) =>
    new Set(log.filter((r) => r.ok && r.path === "/v1/metrics").flatMap((r) => r.decoded.metrics).map((m) => m.name));
  const ready = (log) =>
    walk(spansOf(log), traceId, parentId, tools).length === tools.length * 2 &&
    metricNames(log).has("mcp.server.operation.duration") && metricNames(log).has("mcp.client.operation.duration");
  for (let waited = 0; waited < 15_000 && !ready(log); waited += 100) {
    await sleep(100);
    log = readLog(file);
  }

  const bad = log.filter((r) => !r.ok);
  const paths = log.reduce((n, r) => ({ ...n, [r.path]: (n[r.path] ?? 0) + 1 }), {});
  check(
    log.length > 0 && bad.length === 0,
    `${who}: every export body decodes (${Object.entries(paths).map(([p, n]) => `${n} to ${p}`).join(", ")})`,
    ...bad.map((r) => `${r.path} (${r.contentType}): ${r.error}\n${cut(r.body ?? "")}`),
  );
  const notes = log.filter((r) => r.ok && r.notes.length > 0);
  check(
    log.length > 0 && notes.length === 0,
    `${who}: every body in OTLP/JSON's canonical form (int64s as decimal strings, no unknown fields, no nulls)`,
    ...notes.map((r) => `${r.path}: ${r.notes.join("; ")}`),
  );
  const contentTypes = [...new Set(log.map((r) => r.contentType))];
  check(contentTypes.length === 1 && contentTypes[0] === "application/json", `${who}: Content-Type ${contentTypes}`);

  const spans = spansOf(log);
  const show = (s) =>
    s && json({
      name: s.name,
      kind: s.kind,
      traceId: s.traceId,
      spanId: s.spanId,
      parentSpanId: s.parentSpanId,
      attributes: s.attributes,
      status: s.status,
      links: s.links,
      instance: instanceOf(s),
    });
  const all = spans.map(show).join("\n");
  // The chain, link by link: each span where it must be, named for its hop's tool.
  const chain = walk(spans, traceId, parentId, tools);
  const processes = new Map(); // instance → role
  for (let i = 0; i < tools.length * 2; i++) {
    const span = chain[i];
    const kind = i % 2 === 0 ? "CLIENT" : "SERVER";
    const role = roles[Math.floor((i + 1) / 2)];
    const name = `tools/call ${tools[Math.floor(i / 2)]}`;
    const parent = i === 0
      ? `TRACEPARENT's span ${parentId}`
      : `${roles[Math.floor(i / 2)]}'s ${i % 2 === 0 ? "SERVER" : "CLIENT"} span`;
    const where = i % 2 === 0 && i > 0 ? "in the same process" : i > 0 ? "in another process" : `in trace ${traceId}`;
    if (!check(span, `${who}: ${role}'s ${kind} span "${name}", the child of ${parent}, ${where}`, all)) break;
    processes.set(instanceOf(span), role);
    const tool = tools[Math.floor(i / 2)];
    check(
      span.attributes["mcp.method.name"] === "tools/call" && span.attributes["gen_ai.tool.name"] === tool &&
        span.attributes["network.transport"] === transport,
      `${who}: ${role}'s ${kind} span has mcp.method.name "tools/call", gen_ai.tool.name "${tool}", ` +
        `network.transport "${transport}"`,
      show(span),
    );
  }
  // Every span: its parent is TRACEPARENT's span or one received in the same trace; a root only outside the call's
  // trace (what a gateway asks its upstreams on its own at start).
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const astray = spans.filter((s) => {
    if (s.parentSpanId === "") return s.traceId === traceId;
    if (s.parentSpanId === parentId) return s.traceId !== traceId || s.kind !== 3;
    const parent = byId.get(s.parentSpanId);
    if (!parent || parent.traceId !== s.traceId) return true;
    // a SERVER span's parent is a CLIENT span of another process; a CLIENT span's, a SERVER span of its own
    return s.kind === 2
      ? parent.kind !== 3 || instanceOf(parent) === instanceOf(s) || parent.name !== s.name
      : parent.kind !== 2 || instanceOf(parent) !== instanceOf(s);
  });
  const inTrace = spans.filter((s) => s.traceId === traceId);
  check(
    spans.length > 0 && astray.length === 0,
    `${who}: ${spans.length} spans from ${new Set(spans.map(instanceOf)).size} processes, ${inTrace.length} in the ` +
      "call's trace: each the child of TRACEPARENT's span or of a span received (a SERVER span of another process's " +
      "CLIENT span of its name, a CLIENT span of its own process's SERVER span), roots only outside the trace",
    ...astray.map(show),
  );
  const unnamed = spans.filter((s) => typeof s.resource["service.name"] !== "string");
  const services = [
    ...new Set(spans.map((s) => `${processes.get(instanceOf(s)) ?? "?"} ${s.resource["service.name"]}`)),
  ];
  check(
    spans.length > 0 && unnamed.length === 0,
    `${who}: every /v1/traces resource has service.name (${services.join(", ")})`,
    ...unnamed.map((s) => json(s.resource)),
  );

  // Metrics, per process: the last body has everything (cumulative); a point for each span's operation.
  const bodies = log.filter((r) => r.ok && r.path === "/v1/metrics");
  for (const [instance, role] of processes) {
    const last = bodies.findLast((r) => r.decoded.metrics.some((m) => instanceOf(m) === instance));
    if (!check(last, `${who}: ${role} exported /v1/metrics`, ...bodies.map((r) => cut(r.body)))) continue;
    const metrics = last.decoded.metrics;
    const own = spans.filter((s) => instanceOf(s) === instance);
    for (const [name, kind] of [["mcp.client.operation.duration", 3], ["mcp.server.operation.duration", 2]]) {
      const wanted = own.filter((s) => s.kind === kind);
      const metric = metrics.find((m) => m.name === name);
      if (wanted.length === 0 && !metric) continue;
      if (!check(metric, `${who}: ${role}: ${name} (it made ${wanted.length} such spans)`, cut(last.body))) continue;
      const malformed = metric.points.filter((p) =>
        !isDeepStrictEqual(p.explicitBounds, MCP_BUCKETS) || p.bucketCounts.reduce((a, b) => a + b, 0) !== p.count ||
        !(p.min <= p.max) || !(p.sum >= 0)
      );
      check(
        metric.type === "histogram" && metric.unit === "s" && metric.aggregationTemporality === 2 &&
          malformed.length === 0,
        `${who}: ${role}: ${name} a histogram, unit "s", aggregationTemporality 2, ${metric.points.length} points ` +
          "at the semantic conventions' bounds, min <= max",
        json(metric),
      );
      const missing = wanted.filter((s) =>
        !metric.points.some((p) =>
          p.count >= 1 && p.attributes["mcp.method.name"] === s.attributes["mcp.method.name"] &&
          p.attributes["gen_ai.tool.name"] === s.attributes["gen_ai.tool.name"]
        )
      );
      check(
        missing.length === 0,
        `${who}: ${role}: ${name} has a point for each of its ${wanted.length} ${spanKind({ kind })} spans' ` +
          `operations (${[...new Set(wanted.map((s) => s.name))].join(", ")})`,
        ...missing.map(show),
        json(metric.points.map((p) => p.attributes)),
      );
    }
    // The span processor's counter: as many spans as that process exported.
    const processed = metrics.find((m) => m.name === "otel.sdk.processor.span.processed");
    if (!check(processed, `${who}: ${role}: otel.sdk.processor.span.processed`, cut(last.body))) continue;
    const plain = processed.points.find((p) => Object.keys(p.attributes).length === 0);
    check(
      processed.type === "sum" && processed.isMonotonic && processed.aggregationTemporality === 2 &&
        processed.unit === "{span}" && plain?.value === own.length,
      `${who}: ${role}: otel.sdk.processor.span.processed a monotonic cumulative sum, unit {span}, = ${own.length}, ` +
        "the spans it exported",
      json(processed),
    );
  }
}

// --- prom: a /metrics page through a Prometheus text-format parser from npm ---------------------------------------
// prom2javascript: it throws on a line it cannot parse (name, labels, value, timestamp), groups a histogram's
// _bucket, _sum and _count lines into one series per label set (le aside), and throws when a series' +Inf bucket is
// not its _count. (parse-prometheus-text-format, the better-known one, folds every series of a labelled histogram
// into one, labels lost: its issue #13, open since 2020.)

async function prom(file, what, expects) {
  const text = readFileSync(file, "utf8");
  const { getMetricsFromIterator } = otel("prom2javascript");
  let families;
  try {
    families = await getMetricsFromIterator(text.split("\n")[Symbol.iterator]());
  } catch (error) {
    return fail(`${what}: prom2javascript parses /metrics`, error.message, cut(text));
  }
  // No sample line may have gone missing, nor a family be typed by a TYPE line that is not exactly its own.
  const sampleLines = text.split("\n").filter((line) => line.trim() !== "" && !line.startsWith("#")).length;
  const typeLines = [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]);
  let samples = 0;
  const problems = [];
  for (const [name, family] of Object.entries(families)) {
    for (const series of family.data) {
      for (const label of Object.keys(series.labels ?? {})) {
        if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(label) || label.startsWith("__")) {
          problems.push(`${name}: label name ${JSON.stringify(label)}`);
        }
      }
      samples += family.type === "histogram"
        ? Object.keys(series.buckets).length + (series.sum === undefined ? 0 : 1) + 1
        : 1;
    }
    if (!typeLines.some(([typed, type]) => typed === name && type === family.type)) {
      problems.push(`${name}: no "# TYPE ${name} ${family.type}" line`);
    }
  }
  check(
    problems.length === 0 && samples === sampleLines,
    `${what}: prom2javascript parses /metrics: ${Object.keys(families).length} families ` +
      `(${Object.entries(families).map(([n, f]) => `${n} ${f.type}`).join(", ")}), ${samples} samples of ` +
      `${sampleLines} lines`,
    ...problems,
    `samples parsed ${samples}, sample lines ${sampleLines}`,
  );
  const target = families.target_info;
  check(
    target && target.type === "gauge" && target.data.length === 1 && target.data[0].value === 1 &&
      typeof target.data[0].labels?.service_name === "string",
    `${what}: target_info, a gauge of 1 with service_name (${json(target?.data[0]?.labels)})`,
    json(target),
  );
  check(
    families.mcp_server_operation_duration_seconds?.type === "histogram",
    `${what}: mcp_server_operation_duration_seconds is a histogram`,
    json(Object.entries(families).map(([n, f]) => [n, f.type])),
  );
  for (const [name, family] of Object.entries(families).filter(([, f]) => f.type === "histogram")) {
    const broken = [];
    for (const series of family.data) {
      const buckets = Object.entries(series.buckets)
        .map(([le, v]) => [le, le === "+Inf" ? Infinity : Number(le), v])
        .sort((a, b) => a[1] - b[1]);
      const why = [];
      if (buckets.some(([, , v], i) => i > 0 && v < buckets[i - 1][2])) why.push("buckets not cumulative");
      if (buckets.at(-1)?.[0] !== "+Inf") why.push("no +Inf bucket");
      else if (buckets.at(-1)[2] !== series.count) why.push(`+Inf ${buckets.at(-1)[2]} != _count ${series.count}`);
      if (series.sum === undefined) why.push("no _sum");
      const bounds = buckets.slice(0, -1).map(([, le]) => le);
      if (!isDeepStrictEqual(bounds, MCP_BUCKETS)) why.push(`bounds ${bounds}`);
      if (why.length > 0) broken.push(`${json(series.labels)}: ${why.join(", ")}`);
    }
    check(
      broken.length === 0,
      `${what}: ${name}: ${family.data.length} series, buckets cumulative at the semantic conventions' bounds, ` +
        "ending at +Inf = _count, with _sum",
      ...broken,
    );
  }
  for (const expect of expects) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}=(\d+)$/.exec(expect);
    if (!match) throw new Error(`bad EXPECT ${expect}`);
    const [, name, labelText, count] = match;
    const labels = Object.fromEntries(
      [...labelText.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)].map((m) => [m[1], m[2]]),
    );
    const family = families[name];
    // A label of "" is one the series must not have (in Prometheus an empty label is an absent one).
    const found = family?.data.filter((s) => Object.entries(labels).every(([k, v]) => (s.labels?.[k] ?? "") === v)) ??
      [];
    const histogram = family?.type === "histogram";
    check(
      found.length === 1 && (histogram ? found[0].count : found[0].value) === Number(count),
      `${what}: ${name}{${labelText}} ${histogram ? "has _count" : "="} ${count}`,
      `series with those labels: ${found.length}`,
      ...found.map((s) => json(s)),
      ...(found.length === 0 ? (family?.data ?? []).map((s) => json(s.labels)) : []),
    );
  }
}

// prom-strict: the parser refuses a page broken in ways a scraper must notice.
async function promStrict(file) {
  const text = readFileSync(file, "utf8");
  const { getMetricsFromIterator } = otel("prom2javascript");
  const inf = /^(\w+_bucket\{[^}]*le="\+Inf"\}) (\d+)$/m;
  const variants = [
    ["a +Inf bucket that is not its _count", (t) => t.replace(inf, (_, series, n) => `${series} ${Number(n) + 1}`)],
    ["a label value without quotes", (t) => t.replace(/mcp_method_name="([^"]*)"/, "mcp_method_name=$1")],
    ['a sample value "three"', (t) => t.replace(/^(target_info\{.*\}) 1$/m, "$1 three")],
  ];
  for (const [what, mutate] of variants) {
    const broken = mutate(text);
    if (broken === text) {
      fail(`prom2javascript: refuses ${what}`, "the page had nothing to break that way", cut(text));
      continue;
    }
    try {
      await getMetricsFromIterator(broken.split("\n")[Symbol.iterator]());
      fail(`prom2javascript: refuses ${what}`, "it was accepted");
    } catch (error) {
      ok(`prom2javascript: refuses ${what}: ${cut(error.message, 200)}`);
    }
  }
}

const [mode, ...args] = process.argv.slice(2);
if (mode === "strict" && args.length === 1) strict(readLog(args[0]));
else if (mode === "sdk" && args.length === 2) sdk(readLog(args[0]), args[1]);
else if (mode === "mcp" && args.length === 5) await mcp(...args);
else if (mode === "prom" && args.length >= 2) await prom(args[0], args[1], args.slice(2));
else if (mode === "prom-strict" && args.length === 1) await promStrict(args[0]);
else {
  console.error(
    "usage: otel-verify.mjs strict LOG | sdk LOG JSON | mcp LOG TRACE SPAN TRANSPORT CHAIN | prom FILE WHAT [EXPECT...] | prom-strict FILE",
  );
  process.exit(2);
}
