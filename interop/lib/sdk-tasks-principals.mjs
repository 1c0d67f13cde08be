// Two SDK v1 clients, A and B, each with its own Streamable HTTP session (no token) against one server that takes
// 2025-11-25 task-augmented calls; prints one line per thing each received, `WHO STEP detail`:
//   node sdk-tasks-principals.mjs URL
// e.g. the URL of `mcp.ts serve testdata/conformance/tools_tasks.ts --http 127.0.0.1:0`. Both declare
// `{ tasks: {}, elicitation: {} }` and list the tools. A starts `confirm_delete` {filename: "a-file"}
// (execution.taskSupport "required") with callToolStream; when taskCreated comes, before A reads on (so the task is
// still running), B tries A's task id: listTasks, getTask, getTaskResult, cancelTask (each with a 5 s timeout: a
// server that let B in might block); then A's listTasks and getTask; then A's stream goes on to the result. The task's
// elicitation/create (it may come before the probes) is answered by A (accept, {confirm: true}) only after them (or
// after 20 s), so the task is still waiting for A while B tries it. Lines:
//   sessions A=ID B=ID distinct|same
//   A taskCreated ID STATUS
//   B listTasks has it|lacks it (N)                    (or `B listTasks error code=C MESSAGE`)
//   B getTask|getTaskResult|cancelTask error code=C MESSAGE   (or `... answered JSON`: B reached A's task)
//   A listTasks has it|lacks it (N)
//   A getTask STATUS
//   WHO elicitation "MESSAGE" related-task=ID          (B's would be a question about A's task)
//   A result isError=false|true TEXT                  (or `A error MESSAGE`: the stream's own error)
//   A getTask STATUS                                  (at the end)
//   B elicitations N
// Exit 1 on an error the SDK raised outside those steps (connect, listTools), 2 on bad usage.
import process from "node:process";
import { fromCache } from "./cache.mjs";

const { Client } = fromCache("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = fromCache("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { CallToolResultSchema, ElicitRequestSchema, RELATED_TASK_META_KEY } = fromCache(
  "@modelcontextprotocol/sdk/types.js",
);

const [url, ...extra] = process.argv.slice(2);
if (!/^https?:\/\//.test(url ?? "") || extra.length > 0) {
  console.error("usage: sdk-tasks-principals.mjs URL");
  process.exit(2);
}
const PROBE = { timeout: 5000 };

const say = (...words) => console.log(words.join(" ").replace(/\s*\n\s*/g, " "));
const texts = (result) =>
  (result?.content ?? []).filter((item) => item.type === "text").map((item) => item.text).join(" | ");
const status = (task) => `${task.status}${task.statusMessage ? `: ${task.statusMessage}` : ""}`;
const failure = (error) => `error code=${error?.code ?? "none"} ${error?.message ?? String(error)}`;

// A's answers wait for this: the end of the probes.
let release;
const probed = new Promise((resolve) => {
  release = resolve;
  setTimeout(resolve, 20_000).unref();
});

// A client and what it was asked.
function principal(who) {
  const client = new Client(
    { name: `mcp-interop-tasks-principal-${who}`, version: "1.0.0" },
    { capabilities: { tasks: {}, elicitation: {} } },
  );
  const self = { who, client, transport: new StreamableHTTPClientTransport(new URL(url)), elicitations: 0 };
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    self.elicitations++;
    const related = request.params._meta?.[RELATED_TASK_META_KEY]?.taskId;
    say(who, "elicitation", JSON.stringify(request.params.message), `related-task=${related ?? "none"}`);
    if (who === "A") await probed;
    return { action: "accept", content: { confirm: true } };
  });
  return self;
}

// probe WHO STEP CALL: one request of B's on A's task; its answer or its error as a line.
async function probe(who, step, call) {
  try {
    say(who, step, "answered", JSON.stringify(await call()));
  } catch (error) {
    say(who, step, failure(error));
  }
}

// listed WHO CLIENT ID: whether the client's listTasks has ID.
async function listed(who, client, id) {
  try {
    const { tasks } = await client.experimental.tasks.listTasks(undefined, PROBE);
    say(who, "listTasks", tasks.some((task) => task.taskId === id) ? "has it" : "lacks it", `(${tasks.length})`);
  } catch (error) {
    say(who, "listTasks", failure(error));
  }
}

const a = principal("A");
const b = principal("B");
let step = "connect";
try {
  await a.client.connect(a.transport);
  await b.client.connect(b.transport);
  const [sa, sb] = [a.transport.sessionId, b.transport.sessionId];
  say("sessions", `A=${sa ?? "none"}`, `B=${sb ?? "none"}`, sa && sb && sa !== sb ? "distinct" : "same");
  step = "tools/list";
  await a.client.listTools(); // the SDK learns each tool's execution.taskSupport from the list
  await b.client.listTools();

  step = "confirm_delete";
  let id;
  const stream = a.client.experimental.tasks.callToolStream({
    name: "confirm_delete",
    arguments: { filename: "a-file" },
  });
  for await (const message of stream) {
    switch (message.type) {
      case "taskCreated":
        id = message.task.taskId;
        say("A", "taskCreated", id, status(message.task));
        await listed("B", b.client, id);
        await probe("B", "getTask", () => b.client.experimental.tasks.getTask(id, PROBE));
        await probe(
          "B",
          "getTaskResult",
          () => b.client.experimental.tasks.getTaskResult(id, CallToolResultSchema, PROBE),
        );
        await probe("B", "cancelTask", () => b.client.experimental.tasks.cancelTask(id, PROBE));
        await listed("A", a.client, id);
        say("A", "getTask", status(await a.client.experimental.tasks.getTask(id, PROBE)));
        release();
        break;
      case "taskStatus":
        say("A", "taskStatus", status(message.task));
        break;
      case "result":
        say("A", "result", `isError=${message.result.isError === true}`, texts(message.result));
        break;
      case "error":
        say("A", "error", message.error?.message ?? String(message.error));
        break;
      default:
        say("A", message.type, JSON.stringify(message));
    }
  }
  if (id) say("A", "getTask", status(await a.client.experimental.tasks.getTask(id, PROBE)));
  say("B", "elicitations", b.elicitations);
} catch (error) {
  say(step, "failed", error?.message ?? String(error));
  process.exitCode = 1;
} finally {
  // terminateSession: the session's DELETE, as a client that is done sends it
  for (const { client, transport } of [a, b]) {
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  }
}
