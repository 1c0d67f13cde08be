// A load balancer without affinity, for tests: every HTTP request goes to the next upstream in turn, whatever its
// connection or headers (no session stickiness). It never imports mcp.ts.
//
//   round_robin_proxy.ts URL1 URL2 [...]
//
// Prints `listening http://127.0.0.1:PORT` on its first stdout line, then one line per request:
// `METHOD PATH -> UPSTREAM_INDEX STATUS`. Bodies and responses (SSE included) are streamed through as they come.
import { createServer, request as httpRequest } from "node:http";
import process from "node:process";

const upstreams = process.argv.slice(2).map((text) => new URL(text));
if (upstreams.length === 0) {
  console.error("usage: round_robin_proxy.ts URL1 URL2 [...]");
  process.exit(2);
}
let next = 0;

const server = createServer((incoming, outgoing) => {
  const index = next++ % upstreams.length;
  const target = upstreams[index];
  const headers = { ...incoming.headers, host: target.host, connection: "close" };
  const forwarded = httpRequest({
    host: target.hostname,
    port: target.port,
    method: incoming.method,
    path: incoming.url,
    headers,
  }, (answer) => {
    console.log(`${incoming.method} ${incoming.url} -> ${index} ${answer.statusCode}`);
    outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(outgoing);
  });
  forwarded.on("error", (error) => {
    console.log(`${incoming.method} ${incoming.url} -> ${index} error ${error.message}`);
    if (!outgoing.headersSent) outgoing.writeHead(502);
    outgoing.end();
  });
  outgoing.on("close", () => forwarded.destroy());
  incoming.pipe(forwarded);
});
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  console.log(`listening http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`);
});
process.on("SIGTERM", () => process.exit(0));
