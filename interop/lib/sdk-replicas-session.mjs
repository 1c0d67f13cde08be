// One SDK v1 client session (2025-11-25, Mcp-Session-Id) used many times, for servers that share their sessions
// behind a load balancer; prints what it did, one line per step:
//   node sdk-replicas-session.mjs URL ROUNDS TOOL '{"json":"arguments"}'
// e.g. the URL of HAProxy in front of `mcp.ts serve ... --http ... --state redis://...` replicas. @modelcontextprotocol/sdk's
// Client + StreamableHTTPClientTransport: connect (initialize, notifications/initialized, the GET stream), then ROUNDS
// times tools/list (every page) and tools/call TOOL, each answer checked against the first round's; then
// terminateSession (DELETE) and close. Lines:
//   session ID                                   (after connect)
//   rounds N ok M tools T answer "TEXT"          (M rounds of N gave the first round's tool count and text)
//   round I failed MESSAGE                       (an error the SDK raised, or another answer than round 1's)
//   deleted ID                                   (terminateSession answered)
// Exit 1 when a round failed or connect/DELETE raised, 2 on bad usage.
import process from "node:process";
import { fromCache } from "./cache.mjs";
import { allTools } from "./drive.mjs";

const { Client } = fromCache("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = fromCache("@modelcontextprotocol/sdk/client/streamableHttp.js");

const [url, rounds, tool, json = "{}", ...extra] = process.argv.slice(2);
if (!/^https?:\/\//.test(url ?? "") || !(Number(rounds) > 0) || !tool || extra.length > 0) {
  console.error("usage: sdk-replicas-session.mjs URL ROUNDS TOOL [JSON]");
  process.exit(2);
}

const say = (...words) => console.log(words.join(" ").replace(/\s*\n\s*/g, " "));
const texts = (result) =>
  (result?.content ?? []).filter((item) => item.type === "text").map((item) => item.text).join(" | ");

const client = new Client({ name: "mcp-interop-sdk-replicas", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url));
let ok = 0;
let first;
try {
  await client.connect(transport);
  say("session", transport.sessionId ?? "none");
  for (let round = 1; round <= Number(rounds); round++) {
    try {
      const tools = await allTools((params) => client.listTools(params));
      const result = await client.callTool({ name: tool, arguments: JSON.parse(json) });
      const seen = { tools: tools.length, text: `${result.isError ? "isError " : ""}${texts(result)}` };
      first ??= seen;
      if (seen.tools !== first.tools || seen.text !== first.text) {
        say("round", round, "failed", `tools ${seen.tools} answer ${JSON.stringify(seen.text)}`);
      } else ok++;
    } catch (error) {
      say("round", round, "failed", error?.message ?? String(error));
    }
  }
  say("rounds", rounds, "ok", ok, "tools", first?.tools ?? 0, "answer", JSON.stringify(first?.text ?? ""));
  const id = transport.sessionId;
  await transport.terminateSession();
  say("deleted", id);
} catch (error) {
  say("failed", error?.message ?? String(error));
  process.exitCode = 1;
} finally {
  await client.close().catch(() => {});
}
if (ok !== Number(rounds)) process.exitCode = 1;
