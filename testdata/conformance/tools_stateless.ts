// The conformance suite's diagnostic tools for the 2026-07-28 HTTP scenarios: server-stateless (a missing client
// capability, a response stream, logging without a logLevel, list changes on subscriptions/listen) and the SEP-2243
// custom-header checks (http-custom-header-server-validation).
//
// The two triggers change the lists the way a person editing DIR would: they write or remove a plugin file in the
// served folder, and `serve --watch` reloads it and sends list_changed. Each call toggles its one generated file
// (zz_generated_tool.ts, zz_generated_prompt.ts: git ignores them), so calls alternate adding and removing it.
import { existsSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ToolContext } from "../../mcp.ts";

/**
 * The folder being served. After a --watch reload this module runs from a fresh copy of it made beside it
 * (`.NAME.mcp-reload-PID-N`), where a write would go unseen: map the copy back to NAME.
 */
function servedFolder(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const copy = /^\.(.+)\.mcp-reload-\d+-\d+$/.exec(basename(here));
  if (copy) {
    const original = join(dirname(here), copy[1]);
    if (existsSync(original)) return original;
  }
  return here;
}

/** Adds `name` to the served folder with `source`, or removes it when it is there. Says which. */
function toggle(name: string, source: string): string {
  const file = join(servedFolder(), name);
  if (existsSync(file)) {
    rmSync(file, { force: true });
    return `removed ${name}`;
  }
  // Written beside it under a dot name (which --watch ignores), then renamed: the reload never sees half a file.
  const partial = join(servedFolder(), `.${name}.partial`);
  writeFileSync(partial, source);
  renameSync(partial, file);
  return `added ${name}`;
}

const HEADER = "// Written by test_trigger_*_change (tools_stateless.ts), removed by its next call; git ignores it.\n";

const GENERATED_TOOL = HEADER + `export default {
  name: "test_generated_tool",
  description: "Added by test_trigger_tool_change; its next call removes it",
  run: () => "generated",
};
`;

const GENERATED_PROMPT = HEADER + `export const prompts = [{
  name: "test_generated_prompt",
  description: "Added by test_trigger_prompt_change; its next call removes it",
  get: () => "generated",
}];
`;

export default [
  {
    // server-stateless: called with client capabilities {}; asking sampling must end the call with -32021
    // (data.requiredCapabilities {sampling: {}}, HTTP 400). Not caught here: the error is the point.
    name: "test_missing_capability",
    description: "Needs the sampling capability: without it the call is a MissingRequiredClientCapability error",
    run: async (_args: unknown, ctx: ToolContext) => {
      const result = await ctx.sample({
        messages: [{ role: "user", content: { type: "text", text: "Say hello" } }],
        maxTokens: 20,
      }, { key: "needs_sampling" });
      return `Sampled: ${JSON.stringify(result.content ?? null)}`;
    },
  },
  {
    // server-stateless: called with client capabilities {elicitation: {}}; within 600 ms the response stream must
    // carry at least one frame that is not an error, and no server-to-client request (it asks by input_required).
    name: "test_streaming_elicitation",
    description: "Reports progress and logs, then asks the user a question (input key confirm)",
    run: async (_args: unknown, ctx: ToolContext) => {
      ctx.progress(0, 1, "asking");
      ctx.log("info", "asking the user to confirm");
      const result = await ctx.elicit({
        message: "Continue?",
        requestedSchema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] },
      }, { key: "confirm" });
      ctx.progress(1, 1, "answered");
      return `Answered: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`;
    },
  },
  {
    // server-stateless: called without _meta logLevel; its logs must not reach the client, and it must answer
    // within 500 ms.
    name: "test_logging_tool",
    description: "Logs three messages (at info, warning and error) and returns",
    run: (_args: unknown, ctx: ToolContext) => {
      ctx.log("info", "test_logging_tool: info");
      ctx.log("warning", "test_logging_tool: warning");
      ctx.log("error", "test_logging_tool: error");
      return "Logged three messages";
    },
  },
  {
    // server-stateless: called while a subscriptions/listen stream is open; under `serve --watch` the tool list
    // changes, and notifications/tools/list_changed must reach streams that asked for toolsListChanged only.
    name: "test_trigger_tool_change",
    description: "Changes the tool list: adds test_generated_tool to the served folder, or removes it (needs --watch)",
    run: () => toggle("zz_generated_tool.ts", GENERATED_TOOL),
  },
  {
    // server-stateless: the same for prompts (notifications/prompts/list_changed, promptsListChanged).
    name: "test_trigger_prompt_change",
    description:
      "Changes the prompt list: adds test_generated_prompt to the served folder, or removes it (needs --watch)",
    run: () => toggle("zz_generated_prompt.ts", GENERATED_PROMPT),
  },
  {
    // http-custom-header-server-validation (SEP-2243): a string argument mirrored into the Mcp-Param-Region header.
    // The server must accept a matching header (plain or =?base64?...?=) and reject a missing or malformed one.
    name: "test_header_param",
    description: "Echoes its region argument, which clients mirror into the Mcp-Param-Region header",
    inputSchema: {
      type: "object",
      properties: { region: { type: "string", description: "Any region name", "x-mcp-header": "Region" } },
      required: ["region"],
    },
    run: ({ region }: { region: string }) => `region=${region}`,
  },
];
