// One decoder for OTLP/HTTP JSON export bodies (ExportTraceServiceRequest, ExportMetricsServiceRequest), shared by
// everything lib/otlp-receiver.mjs receives, from the OpenTelemetry JS SDK and from mcp.ts alike. It never imports
// mcp.ts. @opentelemetry/otlp-transformer serializes requests and deserializes only responses, so the request side is
// written here, from the OTLP specification's "JSON Protobuf Encoding" and the proto files:
//
// - keys are the fields' lowerCamelCase JSON names; the proto's own names (start_time_unix_nano) are invalid there,
//   and so is any key with "_" or an upper-case first letter (an error); a well-formed key no message of that type
//   has is ignored, as the specification requires of receivers, and listed in `notes`
// - traceId and spanId (parentSpanId, links, exemplars) are hex, not base64: 32 and 16 lower-case digits, not all
//   zero (parentSpanId may be "" for none)
// - enums (span kind, status code, aggregation temporality) are integers, never their names, within their range
// - 64-bit integers (times, intValue, asInt, count, bucketCounts, zeroCount) are decimal strings; the protobuf JSON
//   mapping lets a decoder take a JSON integer too, so one is taken when it is exact (a safe integer) and listed in
//   `notes` ("int64 as a JSON number"), for a caller that wants the canonical form to reject it
// - 32-bit integers (flags, dropped*Count, scale) are JSON integers; doubles are numbers, or "NaN"/"Infinity"/
//   "-Infinity"; booleans are booleans; bytesValue is base64
// - an AnyValue holds one typed value at most; attribute keys are unique within a list; a metric holds exactly one of
//   gauge, sum, histogram, exponentialHistogram, summary; a histogram point has one bucket more than bounds (or
//   neither), bounds strictly increasing, and buckets adding up to its count; a span ends no earlier than it starts
//
// decodeOtlp(path, text) returns { signal, spans | metrics, resources, notes } or throws an OtlpDecodeError saying
// where the body breaks a rule:
//   spans:   [{ traceId, spanId, parentSpanId, name, kind, attributes: {k: v}, status: {code, message},
//              startTimeUnixNano, endTimeUnixNano, traceState, links, resource: {k: v}, scope: {name, version} }]
//   metrics: [{ name, unit, description, type: "gauge"|"sum"|"histogram"|"exponentialHistogram"|"summary",
//              aggregationTemporality, isMonotonic, resource, scope,
//              points: [{ attributes, startTimeUnixNano, timeUnixNano, value | count, sum, min, max,
//                         bucketCounts, explicitBounds }] }]
// Attribute values come out as plain JS values: strings, booleans, numbers (intValue as a Number when safe, else a
// BigInt), arrays, objects (kvlist), Uint8Array (bytes). Times and int64 counts come out as decimal strings.

export class OtlpDecodeError extends Error {}

const fail = (where, why) => {
  throw new OtlpDecodeError(`${where}: ${why}`);
};
const show = (value) => {
  const text = JSON.stringify(value);
  return text === undefined ? String(value) : text.length > 80 ? text.slice(0, 77) + "..." : text;
};
const isObject = (value) => typeof value === "object" && value !== null && !Array.isArray(value);

/** Decodes one export body posted to `path` (/v1/traces or /v1/metrics), its text as received. */
export function decodeOtlp(path, text) {
  let body;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw new OtlpDecodeError(`not JSON: ${error.message}`);
  }
  const notes = [];
  const d = new Decoder(notes);
  if (path === "/v1/traces") return { signal: "traces", ...d.traces(body), notes };
  if (path === "/v1/metrics") return { signal: "metrics", ...d.metrics(body), notes };
  throw new OtlpDecodeError(`${path}: not an OTLP/HTTP signal path (/v1/traces, /v1/metrics)`);
}

class Decoder {
  constructor(notes) {
    this.notes = notes;
  }

  note(text) {
    if (!this.notes.includes(text)) this.notes.push(text);
  }

  // The message at `where` as an object whose keys are checked against `fields` (its JSON names): a key that is not
  // lowerCamelCase is an error, an unknown one is noted and ignored, a null is the field's default (noted).
  message(value, where, fields) {
    if (!isObject(value)) fail(where, `a JSON object, got ${show(value)}`);
    const out = {};
    for (const [key, child] of Object.entries(value)) {
      if (!/^[a-z][A-Za-z0-9]*$/.test(key)) {
        fail(where, `key "${key}" is not a lowerCamelCase JSON name (OTLP/JSON takes no proto field names)`);
      }
      if (!fields.includes(key)) {
        this.note(`unknown field ${key} (in ${where.replace(/\[\d+\]/g, "[]")}) ignored`);
        continue;
      }
      if (child === null) {
        this.note(`null for ${key} (in ${where.replace(/\[\d+\]/g, "[]")})`);
        continue;
      }
      out[key] = child;
    }
    return out;
  }

  list(value, where) {
    if (value === undefined) return [];
    if (!Array.isArray(value)) fail(where, `a JSON array, got ${show(value)}`);
    return value;
  }

  string(value, where) {
    if (value === undefined) return "";
    if (typeof value !== "string") fail(where, `a string, got ${show(value)}`);
    return value;
  }

  bool(value, where) {
    if (value === undefined) return false;
    if (typeof value !== "boolean") fail(where, `a boolean, got ${show(value)}`);
    return value;
  }

  // A 64-bit integer (int64, fixed64, sfixed64, uint64): a decimal string, or an exact JSON integer (noted).
  int64(value, where, { unsigned = false } = {}) {
    if (value === undefined) return "0";
    let big;
    if (typeof value === "string") {
      if (!/^-?(0|[1-9][0-9]*)$/.test(value)) fail(where, `a 64-bit integer as a decimal string, got ${show(value)}`);
      big = BigInt(value);
    } else if (typeof value === "number") {
      if (!Number.isSafeInteger(value)) fail(where, `a 64-bit integer, got the JSON number ${show(value)}`);
      this.note(`int64 as a JSON number, not a decimal string (${where.replace(/\[\d+\]/g, "[]")})`);
      big = BigInt(value);
    } else fail(where, `a 64-bit integer as a decimal string, got ${show(value)}`);
    if (big > (unsigned ? 2n ** 64n - 1n : 2n ** 63n - 1n) || big < (unsigned ? 0n : -(2n ** 63n))) {
      fail(where, `out of range: ${value}`);
    }
    return big.toString();
  }

  // A 32-bit integer (uint32, fixed32, int32, sint32): a JSON integer.
  int32(value, where, { unsigned = true } = {}) {
    if (value === undefined) return 0;
    if (typeof value !== "number" || !Number.isInteger(value)) fail(where, `a 32-bit integer, got ${show(value)}`);
    if (unsigned ? value < 0 || value > 0xffffffff : value < -(2 ** 31) || value >= 2 ** 31) {
      fail(where, `out of range: ${value}`);
    }
    return value;
  }

  double(value, where) {
    if (value === undefined) return 0;
    if (typeof value === "number") return value;
    if (value === "NaN") return NaN;
    if (value === "Infinity") return Infinity;
    if (value === "-Infinity") return -Infinity;
    fail(where, `a double (a JSON number, "NaN", "Infinity", "-Infinity"), got ${show(value)}`);
  }

  // An enum: its integer, never its name (an OTLP/JSON rule), one of `allowed`.
  enumeration(value, where, allowed) {
    if (value === undefined) return 0;
    if (typeof value !== "number" || !Number.isInteger(value)) {
      fail(where, `an enum as an integer, got ${show(value)}`);
    }
    if (!allowed.includes(value)) fail(where, `${value} is none of ${allowed.join(", ")}`);
    return value;
  }

  id(value, where, bytes, { empty = false } = {}) {
    if (value === undefined || (empty && value === "")) {
      if (empty) return "";
      fail(where, "missing");
    }
    if (typeof value !== "string" || !new RegExp(`^[0-9a-f]{${bytes * 2}}$`).test(value)) {
      fail(where, `${bytes * 2} lower-case hex digits (not base64), got ${show(value)}`);
    }
    if (/^0+$/.test(value)) fail(where, "all zeros (an invalid id)");
    return value;
  }

  bytes(value, where) {
    if (typeof value !== "string" || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(value)) fail(where, `base64, got ${show(value)}`);
    return Uint8Array.from(atob(value.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
  }

  anyValue(value, where) {
    const fields = ["stringValue", "boolValue", "intValue", "doubleValue", "arrayValue", "kvlistValue", "bytesValue"];
    const v = this.message(value, where, fields);
    const keys = Object.keys(v);
    if (keys.length > 1) fail(where, `one typed value at most (a oneof), got ${keys.join(", ")}`);
    if (keys.length === 0) return undefined; // an empty AnyValue
    const [key] = keys;
    const inner = v[key];
    const at = `${where}.${key}`;
    switch (key) {
      case "stringValue":
        return this.string(inner, at);
      case "boolValue":
        return this.bool(inner, at);
      case "intValue": {
        const text = this.int64(inner, at);
        const big = BigInt(text);
        return big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
      }
      case "doubleValue":
        return this.double(inner, at);
      case "bytesValue":
        return this.bytes(inner, at);
      case "arrayValue": {
        const array = this.message(inner, at, ["values"]);
        return this.list(array.values, `${at}.values`).map((item, i) => this.anyValue(item, `${at}.values[${i}]`));
      }
      case "kvlistValue": {
        const kvlist = this.message(inner, at, ["values"]);
        return this.attributes(kvlist.values, `${at}.values`);
      }
    }
  }

  // A list of KeyValue as a plain object; a key twice is an error.
  attributes(value, where) {
    const out = {};
    this.list(value, where).forEach((item, i) => {
      const at = `${where}[${i}]`;
      const kv = this.message(item, at, ["key", "value"]);
      const key = this.string(kv.key, `${at}.key`);
      if (Object.hasOwn(out, key)) fail(at, `attribute key "${key}" twice`);
      const v = this.anyValue(kv.value ?? {}, `${at}.value`);
      Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
    });
    return out;
  }

  resource(value, where) {
    if (value === undefined) return {};
    const r = this.message(value, where, ["attributes", "droppedAttributesCount", "entityRefs"]);
    this.int32(r.droppedAttributesCount, `${where}.droppedAttributesCount`);
    return this.attributes(r.attributes, `${where}.attributes`);
  }

  scope(value, where) {
    if (value === undefined) return { name: "", version: "" };
    const s = this.message(value, where, ["name", "version", "attributes", "droppedAttributesCount"]);
    this.int32(s.droppedAttributesCount, `${where}.droppedAttributesCount`);
    return {
      name: this.string(s.name, `${where}.name`),
      version: this.string(s.version, `${where}.version`),
      attributes: this.attributes(s.attributes, `${where}.attributes`),
    };
  }

  traces(body) {
    const request = this.message(body, "ExportTraceServiceRequest", ["resourceSpans"]);
    const spans = [];
    const resources = [];
    this.list(request.resourceSpans, "resourceSpans").forEach((item, r) => {
      const where = `resourceSpans[${r}]`;
      const rs = this.message(item, where, ["resource", "scopeSpans", "schemaUrl"]);
      this.string(rs.schemaUrl, `${where}.schemaUrl`);
      const resource = this.resource(rs.resource, `${where}.resource`);
      resources.push(resource);
      this.list(rs.scopeSpans, `${where}.scopeSpans`).forEach((item, s) => {
        const at = `${where}.scopeSpans[${s}]`;
        const ss = this.message(item, at, ["scope", "spans", "schemaUrl"]);
        this.string(ss.schemaUrl, `${at}.schemaUrl`);
        const scope = this.scope(ss.scope, `${at}.scope`);
        this.list(ss.spans, `${at}.spans`).forEach((item, i) => {
          spans.push({ ...this.span(item, `${at}.spans[${i}]`), resource, scope });
        });
      });
    });
    return { resources, spans };
  }

  span(value, where) {
    const s = this.message(value, where, [
      "traceId",
      "spanId",
      "traceState",
      "parentSpanId",
      "flags",
      "name",
      "kind",
      "startTimeUnixNano",
      "endTimeUnixNano",
      "attributes",
      "droppedAttributesCount",
      "events",
      "droppedEventsCount",
      "links",
      "droppedLinksCount",
      "status",
    ]);
    const span = {
      traceId: this.id(s.traceId, `${where}.traceId`, 16),
      spanId: this.id(s.spanId, `${where}.spanId`, 8),
      parentSpanId: this.id(s.parentSpanId, `${where}.parentSpanId`, 8, { empty: true }),
      traceState: this.string(s.traceState, `${where}.traceState`),
      flags: this.int32(s.flags, `${where}.flags`),
      name: this.string(s.name, `${where}.name`),
      kind: this.enumeration(s.kind, `${where}.kind`, [0, 1, 2, 3, 4, 5]),
      startTimeUnixNano: this.int64(s.startTimeUnixNano, `${where}.startTimeUnixNano`, { unsigned: true }),
      endTimeUnixNano: this.int64(s.endTimeUnixNano, `${where}.endTimeUnixNano`, { unsigned: true }),
      attributes: this.attributes(s.attributes, `${where}.attributes`),
    };
    if (span.name === "") fail(`${where}.name`, "empty (a span has a name)");
    if (BigInt(span.endTimeUnixNano) < BigInt(span.startTimeUnixNano)) fail(where, "ends before it starts");
    for (const count of ["droppedAttributesCount", "droppedEventsCount", "droppedLinksCount"]) {
      this.int32(s[count], `${where}.${count}`);
    }
    span.events = this.list(s.events, `${where}.events`).map((item, i) => {
      const at = `${where}.events[${i}]`;
      const e = this.message(item, at, ["timeUnixNano", "name", "attributes", "droppedAttributesCount"]);
      this.int32(e.droppedAttributesCount, `${at}.droppedAttributesCount`);
      return {
        name: this.string(e.name, `${at}.name`),
        timeUnixNano: this.int64(e.timeUnixNano, `${at}.timeUnixNano`, { unsigned: true }),
        attributes: this.attributes(e.attributes, `${at}.attributes`),
      };
    });
    span.links = this.list(s.links, `${where}.links`).map((item, i) => {
      const at = `${where}.links[${i}]`;
      const l = this.message(item, at, [
        "traceId",
        "spanId",
        "traceState",
        "attributes",
        "droppedAttributesCount",
        "flags",
      ]);
      this.int32(l.droppedAttributesCount, `${at}.droppedAttributesCount`);
      this.int32(l.flags, `${at}.flags`);
      return {
        traceId: this.id(l.traceId, `${at}.traceId`, 16),
        spanId: this.id(l.spanId, `${at}.spanId`, 8),
        traceState: this.string(l.traceState, `${at}.traceState`),
        attributes: this.attributes(l.attributes, `${at}.attributes`),
      };
    });
    const status = s.status === undefined ? {} : this.message(s.status, `${where}.status`, ["message", "code"]);
    span.status = {
      code: this.enumeration(status.code, `${where}.status.code`, [0, 1, 2]),
      message: this.string(status.message, `${where}.status.message`),
    };
    return span;
  }

  metrics(body) {
    const request = this.message(body, "ExportMetricsServiceRequest", ["resourceMetrics"]);
    const metrics = [];
    const resources = [];
    this.list(request.resourceMetrics, "resourceMetrics").forEach((item, r) => {
      const where = `resourceMetrics[${r}]`;
      const rm = this.message(item, where, ["resource", "scopeMetrics", "schemaUrl"]);
      this.string(rm.schemaUrl, `${where}.schemaUrl`);
      const resource = this.resource(rm.resource, `${where}.resource`);
      resources.push(resource);
      this.list(rm.scopeMetrics, `${where}.scopeMetrics`).forEach((item, s) => {
        const at = `${where}.scopeMetrics[${s}]`;
        const sm = this.message(item, at, ["scope", "metrics", "schemaUrl"]);
        this.string(sm.schemaUrl, `${at}.schemaUrl`);
        const scope = this.scope(sm.scope, `${at}.scope`);
        this.list(sm.metrics, `${at}.metrics`).forEach((item, i) => {
          metrics.push({ ...this.metric(item, `${at}.metrics[${i}]`), resource, scope });
        });
      });
    });
    return { resources, metrics };
  }

  metric(value, where) {
    const types = ["gauge", "sum", "histogram", "exponentialHistogram", "summary"];
    const m = this.message(value, where, ["name", "description", "unit", "metadata", ...types]);
    const present = types.filter((type) => m[type] !== undefined);
    if (present.length !== 1) {
      fail(where, `exactly one of ${types.join(", ")} (a oneof), got ${present.join(", ") || "none"}`);
    }
    const [type] = present;
    const metric = {
      name: this.string(m.name, `${where}.name`),
      description: this.string(m.description, `${where}.description`),
      unit: this.string(m.unit, `${where}.unit`),
      type,
    };
    if (metric.name === "") fail(`${where}.name`, "empty (a metric has a name)");
    this.attributes(m.metadata, `${where}.metadata`);
    const at = `${where}.${type}`;
    const fields = {
      gauge: ["dataPoints"],
      sum: ["dataPoints", "aggregationTemporality", "isMonotonic"],
      histogram: ["dataPoints", "aggregationTemporality"],
      exponentialHistogram: ["dataPoints", "aggregationTemporality"],
      summary: ["dataPoints"],
    }[type];
    const data = this.message(m[type], at, fields);
    if (fields.includes("aggregationTemporality")) {
      // 0 (UNSPECIFIED) is not a temporality a point may have
      metric.aggregationTemporality = this.enumeration(data.aggregationTemporality, `${at}.aggregationTemporality`, [
        1,
        2,
      ]);
    }
    if (type === "sum") metric.isMonotonic = this.bool(data.isMonotonic, `${at}.isMonotonic`);
    metric.points = this.list(data.dataPoints, `${at}.dataPoints`).map((item, i) =>
      this.point(item, `${at}.dataPoints[${i}]`, type)
    );
    return metric;
  }

  point(value, where, type) {
    const common = ["attributes", "startTimeUnixNano", "timeUnixNano", "flags"];
    const fields = {
      gauge: [...common, "asDouble", "asInt", "exemplars"],
      sum: [...common, "asDouble", "asInt", "exemplars"],
      histogram: [...common, "count", "sum", "bucketCounts", "explicitBounds", "exemplars", "min", "max"],
      exponentialHistogram: [
        ...common,
        "count",
        "sum",
        "scale",
        "zeroCount",
        "positive",
        "negative",
        "exemplars",
        "min",
        "max",
        "zeroThreshold",
      ],
      summary: [...common, "count", "sum", "quantileValues"],
    }[type];
    const p = this.message(value, where, fields);
    const point = {
      attributes: this.attributes(p.attributes, `${where}.attributes`),
      startTimeUnixNano: this.int64(p.startTimeUnixNano, `${where}.startTimeUnixNano`, { unsigned: true }),
      timeUnixNano: this.int64(p.timeUnixNano, `${where}.timeUnixNano`, { unsigned: true }),
      flags: this.int32(p.flags, `${where}.flags`),
    };
    if (p.timeUnixNano === undefined) fail(`${where}.timeUnixNano`, "missing");
    if (BigInt(point.timeUnixNano) < BigInt(point.startTimeUnixNano)) fail(where, "its time is before its start");
    if (p.exemplars !== undefined) {
      this.list(p.exemplars, `${where}.exemplars`).forEach((item, i) =>
        this.exemplar(item, `${where}.exemplars[${i}]`)
      );
    }
    if (type === "gauge" || type === "sum") {
      if (p.asInt !== undefined && p.asDouble !== undefined) fail(where, "asInt and asDouble both (a oneof)");
      if (p.asInt === undefined && p.asDouble === undefined) fail(where, "no value (asInt or asDouble)");
      point.value = p.asInt !== undefined
        ? Number(this.int64(p.asInt, `${where}.asInt`))
        : this.double(p.asDouble, `${where}.asDouble`);
      return point;
    }
    point.count = Number(this.int64(p.count, `${where}.count`, { unsigned: true }));
    if (p.sum !== undefined) point.sum = this.double(p.sum, `${where}.sum`);
    if (type === "summary") {
      point.quantileValues = this.list(p.quantileValues, `${where}.quantileValues`).map((item, i) => {
        const q = this.message(item, `${where}.quantileValues[${i}]`, ["quantile", "value"]);
        return {
          quantile: this.double(q.quantile, `${where}.quantile`),
          value: this.double(q.value, `${where}.value`),
        };
      });
      return point;
    }
    if (p.min !== undefined) point.min = this.double(p.min, `${where}.min`);
    if (p.max !== undefined) point.max = this.double(p.max, `${where}.max`);
    if (type === "exponentialHistogram") {
      point.scale = this.int32(p.scale, `${where}.scale`, { unsigned: false });
      point.zeroCount = Number(this.int64(p.zeroCount, `${where}.zeroCount`, { unsigned: true }));
      let total = point.zeroCount;
      for (const side of ["positive", "negative"]) {
        if (p[side] === undefined) continue;
        const b = this.message(p[side], `${where}.${side}`, ["offset", "bucketCounts"]);
        this.int32(b.offset, `${where}.${side}.offset`, { unsigned: false });
        point[side] = this.list(b.bucketCounts, `${where}.${side}.bucketCounts`).map((count, i) =>
          Number(this.int64(count, `${where}.${side}.bucketCounts[${i}]`, { unsigned: true }))
        );
        total += point[side].reduce((a, b) => a + b, 0);
      }
      if (total !== point.count) fail(where, `the buckets add up to ${total}, its count is ${point.count}`);
      return point;
    }
    point.bucketCounts = this.list(p.bucketCounts, `${where}.bucketCounts`).map((count, i) =>
      Number(this.int64(count, `${where}.bucketCounts[${i}]`, { unsigned: true }))
    );
    point.explicitBounds = this.list(p.explicitBounds, `${where}.explicitBounds`).map((bound, i) =>
      this.double(bound, `${where}.explicitBounds[${i}]`)
    );
    const { bucketCounts, explicitBounds } = point;
    if (bucketCounts.length > 0 || explicitBounds.length > 0) {
      if (bucketCounts.length !== explicitBounds.length + 1) {
        fail(where, `${bucketCounts.length} buckets for ${explicitBounds.length} bounds (one more bucket than bounds)`);
      }
      explicitBounds.forEach((bound, i) => {
        if (i > 0 && !(bound > explicitBounds[i - 1])) fail(`${where}.explicitBounds`, "not strictly increasing");
      });
      const total = bucketCounts.reduce((a, b) => a + b, 0);
      if (total !== point.count) fail(where, `the buckets add up to ${total}, its count is ${point.count}`);
    }
    if (point.min !== undefined && point.max !== undefined && point.min > point.max) fail(where, "min > max");
    return point;
  }

  exemplar(value, where) {
    const e = this.message(value, where, [
      "filteredAttributes",
      "timeUnixNano",
      "asDouble",
      "asInt",
      "spanId",
      "traceId",
    ]);
    this.attributes(e.filteredAttributes, `${where}.filteredAttributes`);
    this.int64(e.timeUnixNano, `${where}.timeUnixNano`, { unsigned: true });
    if (e.asInt !== undefined) this.int64(e.asInt, `${where}.asInt`);
    if (e.asDouble !== undefined) this.double(e.asDouble, `${where}.asDouble`);
    if (e.spanId !== undefined) this.id(e.spanId, `${where}.spanId`, 8, { empty: true });
    if (e.traceId !== undefined) this.id(e.traceId, `${where}.traceId`, 16, { empty: true });
  }
}
