// A tool that answers at once, beside the stuck one.
export default {
  description: "Answers ok",
  inputSchema: { type: "object" },
  run: () => "ok",
};
