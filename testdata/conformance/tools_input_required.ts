// The conformance suite's "input required" fixtures (input-required-result-*, 2026-07-28): tools and one prompt that
// ask the client questions under the keys the suite answers. In the 2026-07-28 era the first unanswered question ends
// the call with an input_required result, and the retry runs these again from the start, each answered question
// resolving at once; in the 2025 era the same calls are real requests to the client. So each one only asks, then
// builds its text from the answers, and does nothing irreversible before its last question.
import type { ToolContext } from "../../mcp.ts";

type Json = Record<string, unknown>;

/** An elicitation/create form asking for one string field. */
const askFor = (message: string, field: string, type = "string") => ({
  message,
  requestedSchema: { type: "object", properties: { [field]: { type } }, required: [field] },
});

/** The accepted value of `field` in an ElicitResult, or why there is none. */
function answer(result: Json, field: string): string {
  const content = result.content as Json | undefined;
  if (result.action !== "accept") return `(${String(result.action ?? "no answer")})`;
  const value = content?.[field];
  return typeof value === "string" ? value : JSON.stringify(value ?? null);
}

/** The text of a CreateMessageResult. */
function sampled(result: Json): string {
  const content = result.content as { type?: string; text?: string } | { type?: string; text?: string }[] | undefined;
  const first = Array.isArray(content) ? content[0] : content;
  return typeof first?.text === "string" ? first.text : JSON.stringify(content ?? null);
}

const listRoots = (roots: { uri: string; name?: string }[]) =>
  roots.length === 0 ? "(none)" : roots.map((root) => root.name ? `${root.uri} (${root.name})` : root.uri).join(", ");

const CAPITAL = {
  messages: [{ role: "user", content: { type: "text", text: "What is the capital of France?" } }],
  maxTokens: 100,
};

export default [
  {
    // input-required-result-basic-elicitation, -missing-input-response, -result-type, -ignore-extra-params,
    // -validate-input: round 1 asks "user_name", the retry answers {action: "accept", content: {name: "Alice"}}.
    name: "test_input_required_result_elicitation",
    description: "Asks the user's name (input key user_name) and greets them",
    run: async (_args: unknown, ctx: ToolContext) => {
      const result = await ctx.elicit(askFor("What is your name?", "name"), { key: "user_name" });
      return `Hello, ${answer(result, "name")}!`;
    },
  },
  {
    // input-required-result-basic-sampling: "capital_question", answered with a CreateMessageResult.
    name: "test_input_required_result_sampling",
    description: "Asks the client's LLM the capital of France (input key capital_question)",
    run: async (_args: unknown, ctx: ToolContext) => {
      const result = await ctx.sample(CAPITAL, { key: "capital_question" });
      return `LLM response: ${sampled(result)}`;
    },
  },
  {
    // input-required-result-basic-list-roots: "client_roots", answered with {roots: [...]}.
    name: "test_input_required_result_list_roots",
    description: "Asks the client for its roots (input key client_roots) and names them",
    run: async (_args: unknown, ctx: ToolContext) => {
      const roots = await ctx.roots({ key: "client_roots" });
      return `Client roots: ${listRoots(roots)}`;
    },
  },
  {
    // input-required-result-request-state: round 1 must carry a requestState (the server signs one); round 2 sends
    // it back with "confirm" answered {ok: true}, and its text must contain "state-ok". The server has verified the
    // requestState before run starts again (a tampered one is an error), so reaching the answer means it was good.
    name: "test_input_required_result_request_state",
    description: "Asks for a confirmation (input key confirm); says state-ok once the round trip completes",
    run: async (_args: unknown, ctx: ToolContext) => {
      const result = await ctx.elicit(askFor("Please confirm", "ok", "boolean"), { key: "confirm" });
      return `state-ok: confirm=${answer(result, "ok")}`;
    },
  },
  {
    // input-required-result-multiple-input-requests: three questions asked together (one input_required result with
    // an elicitation, a sampling and a roots/list request), all answered in one retry.
    name: "test_input_required_result_multiple_inputs",
    description: "Asks a name, an LLM greeting and the roots at once (input keys user_name, greeting, client_roots)",
    run: async (_args: unknown, ctx: ToolContext) => {
      const [name, greeting, roots] = await Promise.all([
        ctx.elicit(askFor("What is your name?", "name"), { key: "user_name" }),
        ctx.sample({
          messages: [{ role: "user", content: { type: "text", text: "Generate a greeting" } }],
          maxTokens: 50,
        }, { key: "greeting" }),
        ctx.roots({ key: "client_roots" }),
      ]);
      return `Name: ${answer(name, "name")}; greeting: ${sampled(greeting)}; roots: ${listRoots(roots)}`;
    },
  },
  {
    // input-required-result-multi-round: "step1" (name), then, once that is answered, "step2" (colour); round 2's
    // requestState must differ from round 1's (it carries step1's answer), round 3 completes.
    name: "test_input_required_result_multi_round",
    description: "Asks a name (input key step1), then a favourite colour (input key step2)",
    run: async (_args: unknown, ctx: ToolContext) => {
      const step1 = await ctx.elicit(askFor("Step 1: What is your name?", "name"), { key: "step1" });
      const step2 = await ctx.elicit(askFor("Step 2: What is your favorite color?", "color"), { key: "step2" });
      return `${answer(step1, "name")}'s favorite color is ${answer(step2, "color")}`;
    },
  },
  {
    // input-required-result-tampered-state: the retry sends "confirm" answered {ok: true} with requestState +
    // "-TAMPERED": the server must answer a JSON-RPC error before this runs again.
    name: "test_input_required_result_tampered_state",
    description: "Asks for a confirmation (input key confirm); a tampered requestState must be rejected",
    run: async (_args: unknown, ctx: ToolContext) => {
      const result = await ctx.elicit(askFor("Please confirm", "ok", "boolean"), { key: "confirm" });
      return `Confirmed: ok=${answer(result, "ok")}`;
    },
  },
  {
    // input-required-result-capability-check: called with client capabilities {sampling: {}} only; its
    // input_required result must hold at least one request and no elicitation/create. It asks sampling only.
    name: "test_input_required_result_capabilities",
    description: "Asks the client's LLM only (input key capital_question): needs the sampling capability alone",
    run: async (_args: unknown, ctx: ToolContext) => {
      const result = await ctx.sample(CAPITAL, { key: "capital_question" });
      return `LLM response: ${sampled(result)}`;
    },
  },
];

export const prompts = [
  {
    // input-required-result-non-tool-request: prompts/get asks "user_context", the retry answers
    // {action: "accept", content: {context: "test context"}} and gets a GetPromptResult.
    name: "test_input_required_result_prompt",
    description: "Asks the user what context to use (input key user_context), then builds the prompt with it",
    get: async (_args: Record<string, string>, ctx: ToolContext) => {
      const result = await ctx.elicit(askFor("What context should the prompt use?", "context"), {
        key: "user_context",
      });
      return `Answer using this context: ${answer(result, "context")}`;
    },
  },
];
