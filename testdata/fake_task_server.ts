// A 2025-11-25 MCP server on stdio with the experimental tasks of that revision (basic/utilities/tasks.mdx),
// written without mcp.ts: tools that must be, may be, or cannot be called as tasks; tasks/get, tasks/result
// (waits for the end; a task input_required asks its question on the way, tagged with related-task),
// tasks/cancel. It says on stderr what it was asked ("fake-task: …"). FAKE_TASK_MODE=bad-status answers
// tasks/get with a status that does not exist.
import process from "node:process";
import { readMessages } from "./ndjson_stdin.ts";

// deno-lint-ignore no-explicit-any
type Message = Record<string, any>;
type Task = {
  taskId: string;
  status: string;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttl: number;
  pollInterval: number;
};

const mode = process.env.FAKE_TASK_MODE ?? "";
const note = (line: string) => process.stderr.write(`fake-task: ${line}\n`);
const write = (message: Message): void =>
  void process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");

const TOOLS = [
  { name: "research", description: "Asks a question mid-way", execution: { taskSupport: "required" } },
  { name: "render", description: "May be a task", execution: { taskSupport: "optional" } },
  { name: "doomed", description: "A task that fails", execution: { taskSupport: "required" } },
  { name: "forever", description: "A task that runs until cancelled", execution: { taskSupport: "required" } },
  { name: "plain", description: "Never a task" },
].map((tool) => ({ inputSchema: { type: "object" }, ...tool }));

const tasks = new Map<
  string,
  { task: Task; tool: string; result?: Message; error?: Message; waiting: (() => void)[] }
>();
let nextTask = 0;
let nextAsk = 0;
const asked = new Map<string, (answer: Message) => void>();

function update(id: string, status: string, statusMessage?: string) {
  const entry = tasks.get(id)!;
  if (["completed", "failed", "cancelled"].includes(entry.task.status)) return;
  entry.task = { ...entry.task, status, statusMessage, lastUpdatedAt: new Date().toISOString() };
  if (["completed", "failed", "cancelled"].includes(status)) { for (const wake of entry.waiting.splice(0)) wake(); }
}

function start(tool: string): Task {
  const now = new Date().toISOString();
  const task: Task = {
    taskId: `t-${++nextTask}`,
    status: "working",
    statusMessage: "starting",
    createdAt: now,
    lastUpdatedAt: now,
    ttl: 60_000,
    pollInterval: 100,
  };
  const entry = { task, tool, waiting: [] as (() => void)[] } as Message;
  tasks.set(task.taskId, entry as never);
  const later = (ms: number, then: () => void) => setTimeout(then, ms);
  if (tool === "research") later(150, () => update(task.taskId, "input_required", "which topic?"));
  if (tool === "render") {
    later(150, () => update(task.taskId, "working", "half way"));
    later(300, () => {
      entry.result = { content: [{ type: "text", text: "rendered" }] };
      update(task.taskId, "completed", "done");
    });
  }
  if (tool === "doomed") {
    later(150, () => {
      entry.error = { code: -32000, message: "the job's backend is gone" };
      update(task.taskId, "failed", "backend gone");
    });
  }
  return task;
}

// tasks/result: the end, waited for; input_required asks first (on stdio the request goes out as any other).
async function result(id: string): Promise<Message> {
  const entry = tasks.get(id)! as Message;
  if (entry.task.status === "input_required") {
    const askId = `ask-${++nextAsk}`;
    const answer = await new Promise<Message>((resolve) => {
      asked.set(askId, resolve);
      write({
        id: askId,
        method: "elicitation/create",
        params: {
          message: "Which topic?",
          requestedSchema: { type: "object", properties: { topic: { type: "string" } } },
          _meta: { "io.modelcontextprotocol/related-task": { taskId: id } },
        },
      });
    });
    note(`answer ${JSON.stringify(answer.result ?? answer.error)}`);
    update(id, "working", "answered");
    entry.result = {
      content: [{ type: "text", text: `researched ${JSON.stringify(answer.result?.content ?? null)}` }],
    };
    update(id, "completed", "done");
  }
  if (!["completed", "failed", "cancelled"].includes(entry.task.status)) {
    await new Promise<void>((resolve) => entry.waiting.push(resolve));
  }
  return entry;
}

async function handle(message: Message): Promise<void> {
  const { id, method, params = {} } = message;
  if (method === undefined) {
    if (typeof id === "string" && asked.has(id)) {
      asked.get(id)!(message);
      asked.delete(id);
    }
    return;
  }
  if (id === undefined) return; // notifications
  const reply = (result: Message) => write({ id, result });
  const fail = (code: number, text: string) => write({ id, error: { code, message: text } });
  const related = (taskId: string) => ({ _meta: { "io.modelcontextprotocol/related-task": { taskId } } });
  switch (method) {
    case "initialize":
      return reply({
        protocolVersion: "2025-11-25",
        capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
        serverInfo: { name: "fake-task-server", version: "1.0.0" },
      });
    case "tools/list":
      return reply({ tools: TOOLS });
    case "tools/call": {
      const tool = TOOLS.find((candidate) => candidate.name === params.name);
      note(`tools/call ${params.name} task=${params.task ? "yes" : "no"}`);
      if (!tool) return fail(-32602, `Unknown tool: ${params.name}`);
      const support = tool.execution?.taskSupport;
      if (params.task && !support) return fail(-32601, `${tool.name} cannot be a task`);
      if (!params.task && support === "required") return fail(-32601, `${tool.name} must be called as a task`);
      if (!params.task) return reply({ content: [{ type: "text", text: `${tool.name} at once` }] });
      return reply({ task: start(tool.name) });
    }
    case "tasks/get": {
      const entry = tasks.get(params.taskId);
      if (!entry) return fail(-32602, `Unknown task: ${params.taskId}`);
      return reply(mode === "bad-status" ? { ...entry.task, status: "sleeping" } : entry.task);
    }
    case "tasks/result": {
      if (!tasks.has(params.taskId)) return fail(-32602, `Unknown task: ${params.taskId}`);
      const entry = await result(params.taskId);
      note(`tasks/result ${params.taskId}`);
      if (entry.error) return write({ id, error: entry.error });
      if (entry.task.status === "cancelled") return fail(-32603, "the task was cancelled");
      return reply({ ...entry.result, ...related(params.taskId) });
    }
    case "tasks/cancel": {
      const entry = tasks.get(params.taskId);
      if (!entry) return fail(-32602, `Unknown task: ${params.taskId}`);
      note(`cancelled ${params.taskId}`);
      update(params.taskId, "cancelled", "cancelled on request");
      return reply(entry.task);
    }
    case "ping":
      return reply({});
  }
  fail(-32601, `Method not found: ${method}`);
}

readMessages((message) => void handle(message), () => process.exit(0));
