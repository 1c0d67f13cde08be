// The OpenTelemetry JS SDK exporting to an OTLP/HTTP receiver, as any instrumented program would: one span of its
// own and one histogram, through the official OTLP/HTTP exporters (JSON: OTLPTraceExporter and OTLPMetricExporter of
// @opentelemetry/exporter-*-otlp-http send application/json). For interop/otel.sh, which checks that the same receiver
// and decoder take them (lib/otlp-receiver.mjs).
//
//   node lib/otel-sdk-export.mjs http://127.0.0.1:PORT
//
// Prints one JSON line: {"traceId","spanId","name","attributes","metric","values","service"}: what it exported, for
// the checks to compare. Loads the SDK from $IOP_CACHE/otel (interop/otel.sh installs it there).
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join } from "node:path";
import process from "node:process";

const cache = process.env.IOP_CACHE || process.env.MCP_INTEROP_CACHE || join(homedir(), ".cache", "mcp-interop");
const otel = createRequire(join(cache, "otel", "package.json"));
const { SpanKind, SpanStatusCode, diag, DiagConsoleLogger, DiagLogLevel } = otel("@opentelemetry/api");
const { TracerProvider, SimpleSpanProcessor } = otel("@opentelemetry/sdk-trace");
const { resourceFromAttributes } = otel("@opentelemetry/resources");
const { MeterProvider, PeriodicExportingMetricReader } = otel("@opentelemetry/sdk-metrics");
const { OTLPTraceExporter } = otel("@opentelemetry/exporter-trace-otlp-http");
const { OTLPMetricExporter } = otel("@opentelemetry/exporter-metrics-otlp-http");

const base = process.argv[2];
if (!base) {
  console.error("usage: node lib/otel-sdk-export.mjs http://127.0.0.1:PORT");
  process.exit(2);
}
diag.setLogger(new DiagConsoleLogger(), DiagLogLevel.WARN); // an export the receiver refuses is said on stderr

const service = "otel-sdk-interop";
const resource = resourceFromAttributes({ "service.name": service });

// Traces: a SimpleSpanProcessor exports each span as it ends; forceFlush waits for that export.
const spanExporter = new OTLPTraceExporter({ url: `${base}/v1/traces` });
const tracerProvider = new TracerProvider({
  resource,
  spanProcessors: [new SimpleSpanProcessor({ exporter: spanExporter })],
});
const tracer = tracerProvider.getTracer("otel-sdk-interop", "1.0.0");
const attributes = { "mcp.method.name": "tools/call", "gen_ai.tool.name": "add", "interop.answer": 42 };
const name = "tools/call add";
const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes });
span.setStatus({ code: SpanStatusCode.OK });
span.end();
await tracerProvider.forceFlush();

// Metrics: one histogram in seconds, cumulative (the exporter's default temporality), exported once by forceFlush.
const metricExporter = new OTLPMetricExporter({ url: `${base}/v1/metrics` });
const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 60_000 });
const meterProvider = new MeterProvider({ resource, readers: [reader] });
const metric = "mcp.client.operation.duration";
const histogram = meterProvider.getMeter("otel-sdk-interop", "1.0.0").createHistogram(metric, { unit: "s" });
const values = [0.004, 0.03, 0.7];
for (const value of values) histogram.record(value, { "mcp.method.name": "tools/call", "gen_ai.tool.name": "add" });
await meterProvider.forceFlush();

const { traceId, spanId } = span.spanContext();
console.log(JSON.stringify({ traceId, spanId, name, attributes, metric, values, service }));
await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()]);
