// One file, several tools: in an array each tool names itself.
export default [
  { name: "first", description: "The first of two", run: () => "one" },
  { name: "second", description: "The second of two", run: () => "two" },
];
