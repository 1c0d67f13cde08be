// The conformance suite's task fixtures (tasks-*, the io.modelcontextprotocol/tasks extension of 2026-07-28): the
// tools its scenarios call, as the suite's Go fixture (panyam/mcpkit examples/tasks-v2) behaves. A tool with
// `execution.taskSupport` becomes a task when its run calls ctx.task() (or is still working after the server's
// grace period); questions asked after that are the task's inputRequests, answered by tasks/update.
import type { ToolContext } from "../../mcp.ts";

type Json = Record<string, unknown>;

/** Waits `ms`, or rejects when the call is cancelled. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });
}

/** An elicitation/create form asking for one field. */
const form = (message: string, field: string, type: string) => ({
  message,
  requestedSchema: { type: "object", properties: { [field]: { type } }, required: [field] },
});

export default [
  {
    name: "greet",
    description: "Greets at once (never a task)",
    inputSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
    run: ({ name }: { name: string }) => `Hello, ${name}!`,
  },
  {
    name: "slow_compute",
    description: "Computes for `seconds` (a task when the client can take one; 0 answers at once)",
    inputSchema: {
      type: "object",
      properties: { seconds: { type: "number" }, label: { type: "string" } },
      required: ["seconds"],
    },
    execution: { taskSupport: "optional" },
    run: async ({ seconds, label = "job" }: { seconds: number; label?: string }, ctx: ToolContext) => {
      if (!(seconds > 0)) return `Computation "${label}" completed instantly. Result: 42.`;
      await ctx.task(`computing "${label}"`);
      for (let i = 1; i <= seconds; i++) {
        await sleep(1000, ctx.signal);
        ctx.progress(i, seconds, `${i}/${seconds} seconds`);
      }
      return `Computation "${label}" completed after ${seconds} seconds. Result: 42.`;
    },
  },
  {
    name: "failing_job",
    description: "A task whose tool fails after a second (a completed task with an isError result)",
    execution: { taskSupport: "required" },
    run: async (_: Json, ctx: ToolContext) => {
      await ctx.task();
      await sleep(1000, ctx.signal);
      throw new Error("simulated failure: job crashed");
    },
  },
  {
    name: "protocol_error_job",
    description: "A task that ends in a JSON-RPC error (a failed task)",
    execution: { taskSupport: "required" },
    run: async (_: Json, ctx: ToolContext) => {
      await ctx.task();
      await sleep(500, ctx.signal);
      // Any error with a JSON-RPC code fails the task with that error.
      throw Object.assign(new Error("simulated protocol error: the job's backend refused it"), { code: -32603 });
    },
  },
  {
    name: "confirm_delete",
    description: "Asks, inside its task, whether to delete a file",
    inputSchema: { type: "object", properties: { filename: { type: "string" } }, required: ["filename"] },
    execution: { taskSupport: "required" },
    run: async ({ filename }: { filename: string }, ctx: ToolContext) => {
      await ctx.task();
      const answer = await ctx.elicit(form(`Delete '${filename}'?`, "confirm", "boolean"));
      const confirmed = answer.action === "accept" && (answer.content as Json | undefined)?.confirm === true;
      return confirmed ? `deleted '${filename}'` : `kept '${filename}'`;
    },
  },
  {
    name: "multi_input",
    description: "Asks two questions at once inside its task",
    execution: { taskSupport: "required" },
    run: async (_: Json, ctx: ToolContext) => {
      await ctx.task();
      const [named, confirmed] = await Promise.all([
        ctx.elicit(form("Enter your name:", "name", "string")),
        ctx.elicit(form("Confirm action?", "confirm", "boolean")),
      ]);
      const name = (named.content as Json | undefined)?.name;
      const confirm = (confirmed.content as Json | undefined)?.confirm;
      return `name=${JSON.stringify(name ?? null)} confirmed=${confirm === true}`;
    },
  },
  {
    name: "test_tool_with_task",
    description: "Asks for a name before its task (an input_required round), then computes in the task",
    execution: { taskSupport: "required" },
    run: async (_: Json, ctx: ToolContext) => {
      const answer = await ctx.elicit(form("What is your name?", "name", "string"), { key: "user_name" });
      const name = (answer.content as Json | undefined)?.name ?? "stranger";
      await ctx.task();
      await sleep(50, ctx.signal);
      return `Hello, ${name}! (computed in task)`;
    },
  },
];
