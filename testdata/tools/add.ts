// A tool is a file: its name is the file's name, its default export says what it does.
export default {
  title: "Add",
  description: "Add two numbers",
  inputSchema: {
    type: "object",
    properties: { a: { type: "number" }, b: { type: "number" } },
    required: ["a", "b"],
  },
  annotations: { readOnlyHint: true, idempotentHint: true },
  run: ({ a, b }: { a: number; b: number }) => a + b,
};
