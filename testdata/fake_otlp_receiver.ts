// A hand-written OTLP/HTTP receiver (JSON encoding) for tests: it never imports mcp.ts.
//
//   fake_otlp_receiver.ts [ok|503|hang|flaky] [PORT]
//
// Prints `listening http://127.0.0.1:PORT` on its first stdout line, then one JSON line per export request:
// `{"path":…,"headers":{…},"body":…}` when the body is valid OTLP JSON, `{"path":…,"invalid":"why"}` when it is not
// (answered 400). The checks are the OTLP JSON encoding's strict rules: lowerCamelCase keys, trace and span ids as
// lowercase hex of 32 and 16 digits, 64-bit integers (times, intValue, counts) as decimal strings, enums (span kind,
// status code, temporality) as integers, every attribute value one of the typed forms.
// ok: 200 with {} (what a collector says). 503: every export refused with 503. hang: never answered. flaky: the
// first export refused with 503, the rest as ok.
import { Buffer } from "node:buffer";
import { createServer } from "node:http";
import process from "node:process";

const mode = process.argv[2] ?? "ok";
let refusedOnce = false;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
const isObject = (value: unknown): value is Record<string, Json> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

function fail(why: string): never {
  throw new Error(why);
}

// Every key in the document is lowerCamelCase (no snake_case, as protobuf's JSON mapping writes them), except
// attribute keys, which are data.
function checkKeys(value: Json, where: string): void {
  if (Array.isArray(value)) return value.forEach((item, index) => checkKeys(item, `${where}[${index}]`));
  if (!isObject(value)) return;
  for (const [key, child] of Object.entries(value)) {
    if (!/^[a-z][A-Za-z0-9]*$/.test(key)) fail(`${where}: key "${key}" is not lowerCamelCase`);
    checkKeys(child, `${where}.${key}`);
  }
}

const int64 = (value: unknown, where: string) => {
  if (typeof value !== "string" || !/^-?\d+$/.test(value)) {
    fail(`${where}: an int64 as a decimal string, got ${JSON.stringify(value)}`);
  }
};
const hex = (value: unknown, digits: number, where: string) => {
  if (typeof value !== "string" || !new RegExp(`^[0-9a-f]{${digits}}$`).test(value) || /^0+$/.test(value)) {
    fail(`${where}: ${digits} lowercase hex digits, not all zero, got ${JSON.stringify(value)}`);
  }
};
const integer = (value: unknown, where: string, allowed: number[]) => {
  if (typeof value !== "number" || !allowed.includes(value)) {
    fail(`${where}: an integer enum in ${allowed}, got ${JSON.stringify(value)}`);
  }
};

function checkAnyValue(value: unknown, where: string): void {
  if (!isObject(value)) fail(`${where}: an AnyValue object`);
  const keys = Object.keys(value);
  if (keys.length !== 1) fail(`${where}: exactly one typed value, got ${keys}`);
  const [key] = keys;
  const inner = value[key];
  if (key === "stringValue") { if (typeof inner !== "string") fail(`${where}: stringValue not a string`); }
  else if (key === "boolValue") { if (typeof inner !== "boolean") fail(`${where}: boolValue not a boolean`); }
  else if (key === "intValue") int64(inner, `${where}.intValue`);
  else if (key === "doubleValue") { if (typeof inner !== "number") fail(`${where}: doubleValue not a number`); }
  else if (key === "arrayValue") {
    if (!isObject(inner) || !Array.isArray(inner.values)) fail(`${where}: arrayValue.values`);
    inner.values.forEach((item, index) => checkAnyValue(item, `${where}.arrayValue.values[${index}]`));
  } else fail(`${where}: unknown value type ${key}`);
}

function checkAttributes(list: unknown, where: string): void {
  if (list === undefined) return;
  if (!Array.isArray(list)) fail(`${where}: attributes are a list`);
  const seen = new Set<string>();
  list.forEach((attribute, index) => {
    if (!isObject(attribute) || typeof attribute.key !== "string") fail(`${where}[${index}]: {key, value}`);
    if (seen.has(attribute.key)) fail(`${where}: key ${attribute.key} twice`);
    seen.add(attribute.key);
    checkAnyValue(attribute.value, `${where}[${index}].value`);
  });
}

function checkResource(resource: unknown, where: string): void {
  if (!isObject(resource)) fail(`${where}: a resource`);
  checkAttributes(resource.attributes, `${where}.attributes`);
}

function checkTraces(body: Json): void {
  if (!isObject(body) || !Array.isArray(body.resourceSpans)) fail("resourceSpans is a list");
  body.resourceSpans.forEach((resourceSpans, r) => {
    const where = `resourceSpans[${r}]`;
    if (!isObject(resourceSpans) || !Array.isArray(resourceSpans.scopeSpans)) fail(`${where}.scopeSpans`);
    checkResource(resourceSpans.resource, `${where}.resource`);
    resourceSpans.scopeSpans.forEach((scopeSpans, s) => {
      if (!isObject(scopeSpans) || !Array.isArray(scopeSpans.spans)) fail(`${where}.scopeSpans[${s}].spans`);
      if (!isObject(scopeSpans.scope) || typeof scopeSpans.scope.name !== "string") fail(`${where}: scope.name`);
      scopeSpans.spans.forEach((span, index) => {
        const at = `${where}.scopeSpans[${s}].spans[${index}]`;
        if (!isObject(span)) fail(`${at}: a span`);
        hex(span.traceId, 32, `${at}.traceId`);
        hex(span.spanId, 16, `${at}.spanId`);
        if (span.parentSpanId !== undefined && span.parentSpanId !== "") {
          hex(span.parentSpanId, 16, `${at}.parentSpanId`);
        }
        if (typeof span.name !== "string" || span.name === "") fail(`${at}.name`);
        integer(span.kind, `${at}.kind`, [0, 1, 2, 3, 4, 5]);
        int64(span.startTimeUnixNano, `${at}.startTimeUnixNano`);
        int64(span.endTimeUnixNano, `${at}.endTimeUnixNano`);
        if (BigInt(span.endTimeUnixNano as string) < BigInt(span.startTimeUnixNano as string)) {
          fail(`${at}: ends before it starts`);
        }
        checkAttributes(span.attributes, `${at}.attributes`);
        if (span.status !== undefined) {
          if (!isObject(span.status)) fail(`${at}.status`);
          if (span.status.code !== undefined) integer(span.status.code, `${at}.status.code`, [0, 1, 2]);
          if (span.status.message !== undefined && typeof span.status.message !== "string") {
            fail(`${at}.status.message`);
          }
        }
        if (span.links !== undefined) {
          if (!Array.isArray(span.links)) fail(`${at}.links`);
          span.links.forEach((link, l) => {
            if (!isObject(link)) fail(`${at}.links[${l}]`);
            hex(link.traceId, 32, `${at}.links[${l}].traceId`);
            hex(link.spanId, 16, `${at}.links[${l}].spanId`);
          });
        }
      });
    });
  });
}

function checkDataPoint(point: unknown, where: string, histogram: boolean): void {
  if (!isObject(point)) fail(`${where}: a data point`);
  checkAttributes(point.attributes, `${where}.attributes`);
  int64(point.startTimeUnixNano, `${where}.startTimeUnixNano`);
  int64(point.timeUnixNano, `${where}.timeUnixNano`);
  if (!histogram) {
    if (point.asInt !== undefined) int64(point.asInt, `${where}.asInt`);
    else if (typeof point.asDouble !== "number") fail(`${where}: asInt or asDouble`);
    return;
  }
  int64(point.count, `${where}.count`);
  if (typeof point.sum !== "number") fail(`${where}.sum: a number`);
  if (!Array.isArray(point.bucketCounts) || !Array.isArray(point.explicitBounds)) fail(`${where}: buckets`);
  point.bucketCounts.forEach((count, index) => int64(count, `${where}.bucketCounts[${index}]`));
  if (point.bucketCounts.length !== point.explicitBounds.length + 1) fail(`${where}: one more bucket than bounds`);
  const total = point.bucketCounts.reduce((sum, count) => sum + BigInt(count as string), 0n);
  if (total !== BigInt(point.count as string)) fail(`${where}: the buckets add up to ${total}, count ${point.count}`);
}

function checkMetrics(body: Json): void {
  if (!isObject(body) || !Array.isArray(body.resourceMetrics)) fail("resourceMetrics is a list");
  body.resourceMetrics.forEach((resourceMetrics, r) => {
    const where = `resourceMetrics[${r}]`;
    if (!isObject(resourceMetrics) || !Array.isArray(resourceMetrics.scopeMetrics)) fail(`${where}.scopeMetrics`);
    checkResource(resourceMetrics.resource, `${where}.resource`);
    resourceMetrics.scopeMetrics.forEach((scopeMetrics, s) => {
      if (!isObject(scopeMetrics) || !Array.isArray(scopeMetrics.metrics)) fail(`${where}.scopeMetrics[${s}].metrics`);
      scopeMetrics.metrics.forEach((metric, index) => {
        const at = `${where}.scopeMetrics[${s}].metrics[${index}]`;
        if (!isObject(metric) || typeof metric.name !== "string") fail(`${at}.name`);
        const kind = metric.histogram ?? metric.sum;
        if (!isObject(kind) || !Array.isArray(kind.dataPoints)) fail(`${at}: a histogram or a sum with dataPoints`);
        integer(kind.aggregationTemporality, `${at}.aggregationTemporality`, [1, 2]);
        if (metric.sum !== undefined && typeof (metric.sum as Record<string, Json>).isMonotonic !== "boolean") {
          fail(`${at}.sum.isMonotonic`);
        }
        kind.dataPoints.forEach((point, p) =>
          checkDataPoint(point, `${at}.dataPoints[${p}]`, metric.histogram !== undefined)
        );
      });
    });
  });
}

const server = createServer((request, response) => {
  const chunks: Uint8Array[] = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    if (mode === "hang") return; // never answered
    const path = request.url ?? "";
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(request.headers)) headers[name] = String(value);
    if (mode === "503" || (mode === "flaky" && !refusedOnce)) {
      refusedOnce = true;
      process.stdout.write(JSON.stringify({ path, refused: 503 }) + "\n");
      response.writeHead(503).end();
      return;
    }
    try {
      if (request.method !== "POST") fail(`method ${request.method}`);
      if (!/^application\/json\b/.test(headers["content-type"] ?? "")) fail(`content-type ${headers["content-type"]}`);
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Json;
      checkKeys(body, "body");
      if (path === "/v1/traces") checkTraces(body);
      else if (path === "/v1/metrics") checkMetrics(body);
      else fail(`no such path ${path}`);
      process.stdout.write(JSON.stringify({ path, headers, body }) + "\n");
      response.writeHead(200, { "content-type": "application/json" }).end("{}");
    } catch (error) {
      process.stdout.write(JSON.stringify({ path, invalid: (error as Error).message }) + "\n");
      response.writeHead(400, { "content-type": "application/json" }).end("{}");
    }
  });
});
server.listen(Number(process.argv[3] ?? 0), "127.0.0.1", () => {
  const address = server.address() as { port: number };
  process.stdout.write(`listening http://127.0.0.1:${address.port}\n`);
});
process.on("SIGTERM", () => process.exit(0));
