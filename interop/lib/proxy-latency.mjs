// What `mcp.ts proxy` (or `gateway`) adds to a call: sequential tools/call of one trivial tool against a stdio server
// directly and through a proxy (or gateway) in front of it, with the mcp.ts library's connect(), on whatever runtime
// runs this file:
//   deno run -A interop/lib/proxy-latency.mjs CALLS TOOL JSON "<direct server>" "<proxied server>" [WHAT]
//   bun interop/lib/proxy-latency.mjs 1000 echo '{"message":"hi"}' "mcp-server-everything stdio" \
//     "bun ./mcp.ts proxy 'mcp-server-everything stdio'"
// Both clients connect first, then take turns in blocks of 50 calls (after 100 warm-up calls each), so that whatever
// else the machine does falls on both alike. Prints per target the median, p90 and mean per call, then the median's
// difference. WHAT names what is in front (default "proxy"; gateway.sh gives "gateway"). Run from the repository root
// (it imports ./mcp.ts).
import process from "node:process";
import { connect } from "../../mcp.ts";

const [calls = "1000", tool, json = "{}", direct, proxied, what = "proxy"] = process.argv.slice(2);
if (!tool || !direct || !proxied) {
  console.error('usage: proxy-latency.mjs CALLS TOOL JSON "<direct server>" "<proxied server>" [WHAT]');
  process.exit(2);
}
const total = Number(calls);
const args = JSON.parse(json);
const BLOCK = 50;
const WARMUP = 100;

const targets = [{ name: "direct", command: direct }, { name: what === "proxy" ? "proxied" : what, command: proxied }];
for (const target of targets) {
  target.client = await connect(target.command);
  target.times = [];
  for (let i = 0; i < WARMUP; i++) await target.client.callTool(tool, args);
}
for (let done = 0; done < total; done += BLOCK) {
  for (const target of targets) {
    for (let i = 0; i < Math.min(BLOCK, total - done); i++) {
      const before = performance.now();
      const result = await target.client.callTool(tool, args);
      target.times.push(performance.now() - before);
      if (result.isError) throw new Error(`${target.name}: ${tool} failed: ${JSON.stringify(result)}`);
    }
  }
}
const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const ms = (value) => `${value.toFixed(3)} ms`;
for (const target of targets) {
  await target.client.close();
  const sorted = [...target.times].sort((a, b) => a - b);
  target.median = quantile(sorted, 0.5);
  const mean = sorted.reduce((sum, t) => sum + t, 0) / sorted.length;
  console.log(
    `${target.name.padEnd(8)} median ${ms(target.median)}, p90 ${ms(quantile(sorted, 0.9))}, mean ${ms(mean)}` +
      ` (${sorted.length} calls): ${target.command}`,
  );
}
const [a, b] = targets;
console.log(
  `added by the ${what}: ${ms(b.median - a.median)} per call (median), ${(b.median / a.median).toFixed(2)}x the direct`,
);
