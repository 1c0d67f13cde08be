import type { ToolContext } from "../../mcp.ts";

// Counts to `steps`, waiting `ms` between steps, reporting progress and logging as it goes.
// It stops early when the call is cancelled or times out: ctx.signal tells it.
export default {
  description: "Wait, reporting progress (for trying cancellation, progress and timeouts)",
  inputSchema: {
    type: "object",
    properties: {
      steps: { type: "integer", minimum: 1, maximum: 1000 },
      ms: { type: "integer", minimum: 0, maximum: 60000 },
    },
    additionalProperties: false,
  },
  run: async ({ steps = 3, ms = 100 }: { steps?: number; ms?: number }, ctx: ToolContext) => {
    for (let step = 1; step <= steps; step++) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, ms);
        ctx.signal.addEventListener("abort", () => {
          clearTimeout(timer);
          reject(ctx.signal.reason);
        }, { once: true });
      });
      ctx.progress(step, steps, `step ${step} of ${steps}`);
      ctx.log("debug", `step ${step}`);
    }
    return `waited ${steps} x ${ms} ms`;
  },
};
