// What every SDK client script here does with the SDK it drives: read the verb's options, then list (all pages),
// ping, or call a tool (with progress, and a cancellation after which the server must still answer).
// Each script passes its SDK's own calls; the output is the same whatever the SDK.
import process from "node:process";

/** The options after `list|ping|call`: TOOL, JSON, --progress, --cancel-after MS, --wire. */
export function verbOptions(rest) {
  const cancelAfter = rest.includes("--cancel-after") ? Number(rest[rest.indexOf("--cancel-after") + 1]) : undefined;
  const [tool, json = "{}"] = rest.filter((arg, i) => !arg.startsWith("--") && rest[i - 1] !== "--cancel-after");
  return { tool, json, cancelAfter, progress: rest.includes("--progress"), wire: rest.includes("--wire") };
}

/** Exits 2 with `usage` unless `verb` is list, ping, or call with a TOOL. */
export function checkUsage(ok, verb, tool, usage) {
  if (ok && ["list", "ping", "call"].includes(verb) && (verb !== "call" || tool)) return;
  console.error(usage);
  process.exit(2);
}

export const print = (value) => console.log(JSON.stringify(value, null, 2));

/** Every tool, following nextCursor; `listTools(params)` is the SDK's call. */
export async function allTools(listTools) {
  const tools = [];
  let cursor;
  do {
    const page = await listTools(cursor ? { cursor } : undefined);
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}

/**
 * Runs the verb with the SDK's calls: `listTools(params)`, `ping()`, `callTool(params, { signal, onprogress })`,
 * and `afterCancel()`, which shows the server still serving after a cancellation (default: list the tools again).
 */
export async function runVerb(verb, options, sdk) {
  const { tool, json, progress, cancelAfter } = options;
  if (verb === "list") return print({ tools: await allTools(sdk.listTools) });
  if (verb === "ping") {
    const before = performance.now();
    await sdk.ping();
    return console.log(`pong in ${(performance.now() - before).toFixed(1)} ms`);
  }
  const abort = new AbortController();
  if (cancelAfter !== undefined) setTimeout(() => abort.abort(`cancelled after ${cancelAfter} ms`), cancelAfter);
  try {
    print(
      await sdk.callTool({ name: tool, arguments: JSON.parse(json) }, {
        signal: abort.signal,
        onprogress: progress ? (p) => console.error("progress", JSON.stringify(p)) : undefined,
      }),
    );
  } catch (error) {
    if (!abort.signal.aborted) throw error;
    console.log(`cancelled: ${abort.signal.reason} (the SDK raised ${error?.name}: ${error?.message})`);
    if (sdk.afterCancel) return await sdk.afterCancel();
    const tools = await allTools(sdk.listTools); // the server must still be serving after a cancellation
    console.log(`tools/list after the cancellation: ${tools.map((t) => t.name).join(", ")}`);
  }
}
