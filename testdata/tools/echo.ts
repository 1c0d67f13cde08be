// Returns its text unchanged: the smallest useful tool, and the benchmark's workload.
export default {
  description: "Echo the text back",
  inputSchema: {
    type: "object",
    properties: { text: { type: "string" } },
    required: ["text"],
  },
  run: ({ text }: { text: string }) => text,
};
