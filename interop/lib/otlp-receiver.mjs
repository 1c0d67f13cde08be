// An OTLP/HTTP receiver (JSON encoding) for interop/otel.sh: POST /v1/traces and /v1/metrics, every body through the
// one decoder of lib/otlp-decode.mjs, whoever sent it (the OpenTelemetry JS SDK's exporters, mcp.ts).
//
//   node lib/otlp-receiver.mjs [[HOST:]PORT]        (default 127.0.0.1:0)
//
// stdout: `listening http://HOST:PORT` first, then one JSON line per export request:
//   {"n":1,"path":"/v1/traces","contentType":"application/json","userAgent":"…","ok":true,"notes":[…],
//    "decoded":{signal, resources, spans | metrics},"body":"<the text as received>"}
//   {"n":2,"path":"/v1/metrics",…,"ok":false,"error":"resourceMetrics[0]…: why"}
// A body that decodes gets 200 `{}` (a full success, as a collector answers); one that does not, 400 with a
// google.rpc.Status JSON (code 3, INVALID_ARGUMENT) saying why; a Content-Type other than application/json 415, and
// that is a failure too (this receiver takes only OTLP/JSON); another path 404, another method 405. gzip bodies
// (Content-Encoding: gzip) are inflated first. SIGTERM or SIGINT stops it.
import { createServer } from "node:http";
import process from "node:process";
import { gunzipSync } from "node:zlib";
import { decodeOtlp } from "./otlp-decode.mjs";

const [host, port] = (() => {
  const arg = process.argv[2] ?? "127.0.0.1:0";
  const at = arg.lastIndexOf(":");
  return at < 0 ? ["127.0.0.1", Number(arg)] : [arg.slice(0, at), Number(arg.slice(at + 1))];
})();

// JSON for the log: BigInt (an int64 attribute past 2^53) as its decimal string, bytes as base64.
const replacer = (_key, value) =>
  typeof value === "bigint"
    ? value.toString()
    : value instanceof Uint8Array
    ? Buffer.from(value).toString("base64")
    : value;

let n = 0;
const server = createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    const path = new URL(request.url, "http://receiver").pathname;
    const answer = (status, body) => {
      response.writeHead(status, { "content-type": "application/json" });
      response.end(JSON.stringify(body));
    };
    if (path !== "/v1/traces" && path !== "/v1/metrics") return answer(404, { code: 5, message: "not found" });
    if (request.method !== "POST") return answer(405, { code: 12, message: "POST only" });
    const record = {
      n: ++n,
      path,
      contentType: request.headers["content-type"] ?? "",
      userAgent: request.headers["user-agent"] ?? "",
    };
    let status = 200;
    try {
      let raw = Buffer.concat(chunks);
      if (/^gzip$/i.test(request.headers["content-encoding"] ?? "")) raw = gunzipSync(raw);
      const text = raw.toString("utf8");
      record.body = text;
      if (!/^application\/json(\s*;.*)?$/i.test(record.contentType)) {
        status = 415;
        throw new Error(`Content-Type ${JSON.stringify(record.contentType)}: not OTLP/JSON (application/json)`);
      }
      const { notes, ...decoded } = decodeOtlp(path, text);
      Object.assign(record, { ok: true, notes, decoded });
    } catch (error) {
      if (status === 200) status = 400;
      Object.assign(record, { ok: false, error: error.message });
    }
    process.stdout.write(JSON.stringify(record, replacer) + "\n");
    if (status === 200) answer(200, {});
    else answer(status, { code: 3, message: record.error });
  });
});

server.listen(port, host, () => {
  const address = server.address();
  process.stdout.write(`listening http://${address.address}:${address.port}\n`);
});
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => server.close(() => process.exit(0)));
