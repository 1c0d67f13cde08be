// The SDK v1 client's experimental task API (2025-11-25 tasks) against a server that takes task-augmented
// calls, run as one scripted session; prints one line per thing the client received, `STEP KIND detail`:
//   node sdk-tasks-client.mjs [--no-tasks-capability] "<server command>"|URL
// e.g. "deno run -A mcp.ts serve testdata/conformance/tools_tasks.ts" (StdioClientTransport), or the URL of a
// Streamable HTTP server (StreamableHTTPClientTransport: a 2025-11-25 session, DELETEd at the end). The client declares
// `{ tasks: {}, elicitation: {} }`, lists the tools (the SDK learns each one's execution.taskSupport from the list),
// then:
//   slow_compute    callToolStream {seconds: 1}: taskCreated, taskStatus..., result; then getTask and listTasks
//   confirm_delete  callToolStream {filename: "x"}: the task asks elicitation/create, answered by the client's
//                   request handler (accept, {confirm: true}); result "deleted 'x'"
//   failing_job     callToolStream {}: a completed task whose result is an isError one
//   cancel          callToolStream slow_compute {seconds: 30}; cancelTask when taskCreated comes; the stream ends
//                   with an error ("was cancelled"), and getTask says cancelled
// --no-tasks-capability: the client declares only `{ elicitation: {} }` (in 2025-11-25 a party's `tasks` capability
// says what it takes as a receiver; a requestor goes by the receiver's), and runs only the first two steps. notifications/tasks/status the server sends
// are printed as `notification tasks/status ID STATUS`. Exit 1 on an error the SDK raised outside a stream (a
// stream's own error is printed as an `error` line), 2 on bad usage.
import process from "node:process";
import { fromCache, stdioServer } from "./cache.mjs";

const { Client } = fromCache("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = fromCache("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = fromCache("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ElicitRequestSchema, TaskStatusNotificationSchema, RELATED_TASK_META_KEY } = fromCache(
  "@modelcontextprotocol/sdk/types.js",
);

const args = process.argv.slice(2);
const noTasks = args[0] === "--no-tasks-capability";
const [server, ...extra] = noTasks ? args.slice(1) : args;
if (!server || extra.length > 0) {
  console.error('usage: sdk-tasks-client.mjs [--no-tasks-capability] "<server command>"|URL');
  process.exit(2);
}

const say = (...words) => console.log(words.join(" ").replace(/\s*\n\s*/g, " "));
const texts = (result) =>
  (result?.content ?? []).filter((item) => item.type === "text").map((item) => item.text).join(" | ");
const status = (task) => `${task.status}${task.statusMessage ? `: ${task.statusMessage}` : ""}`;

const client = new Client(
  { name: "mcp-interop-sdk-tasks-client", version: "1.0.0" },
  { capabilities: noTasks ? { elicitation: {} } : { tasks: {}, elicitation: {} } },
);
let step = "connect";
client.setNotificationHandler(TaskStatusNotificationSchema, (n) => {
  say("notification", "tasks/status", n.params.taskId, n.params.status);
});
client.setRequestHandler(ElicitRequestSchema, (request) => {
  const related = request.params._meta?.[RELATED_TASK_META_KEY]?.taskId;
  say(step, "elicitation", JSON.stringify(request.params.message), `related-task=${related ?? "none"}`);
  return { action: "accept", content: { confirm: true } };
});
const overHttp = /^https?:\/\//.test(server);
const transport = overHttp
  ? new StreamableHTTPClientTransport(new URL(server))
  : new StdioClientTransport({ ...stdioServer(server), stderr: "inherit" });

// stream NAME ARGS [onCreated]: one callToolStream, each message it yields printed as a line; returns the task id.
async function stream(name, args, onCreated) {
  let taskId;
  for await (const message of client.experimental.tasks.callToolStream({ name, arguments: args })) {
    switch (message.type) {
      case "taskCreated":
        taskId = message.task.taskId;
        say(step, "taskCreated", taskId, status(message.task));
        await onCreated?.(taskId);
        break;
      case "taskStatus":
        say(step, "taskStatus", status(message.task));
        break;
      case "result":
        say(step, "result", `isError=${message.result.isError === true}`, texts(message.result));
        break;
      case "error":
        say(step, "error", message.error?.message ?? String(message.error));
        break;
      default:
        say(step, message.type, JSON.stringify(message));
    }
  }
  return taskId;
}

try {
  await client.connect(transport);
  say(step, "server", JSON.stringify(client.getServerVersion()));
  say(step, "capabilities.tasks", JSON.stringify(client.getServerCapabilities()?.tasks ?? null));

  step = "tools/list";
  const { tools } = await client.listTools();
  say(step, tools.map((tool) => `${tool.name}=${tool.execution?.taskSupport ?? "-"}`).join(" "));

  step = "slow_compute";
  const id = await stream("slow_compute", { seconds: 1 });
  if (id) {
    say(step, "getTask", status(await client.experimental.tasks.getTask(id)));
    const { tasks } = await client.experimental.tasks.listTasks();
    say(step, "listTasks", tasks.some((task) => task.taskId === id) ? "has it" : "lacks it", `(${tasks.length})`);
  }

  step = "confirm_delete";
  await stream("confirm_delete", { filename: "x" });

  // Without the capability, only the steps that show whether calls become tasks at all.
  if (!noTasks) {
    step = "failing_job";
    await stream("failing_job", {});

    step = "cancel";
    const cancelled = await stream("slow_compute", { seconds: 30, label: "long" }, async (taskId) => {
      const answer = await client.experimental.tasks.cancelTask(taskId);
      say(step, "cancelTask", status(answer));
    });
    if (cancelled) say(step, "getTask", status(await client.experimental.tasks.getTask(cancelled)));
  }
} catch (error) {
  say(step, "failed", error?.message ?? String(error));
  process.exitCode = 1;
} finally {
  if (overHttp && transport.sessionId) await transport.terminateSession().catch(() => {}); // DELETE
  await client.close().catch(() => {});
}
