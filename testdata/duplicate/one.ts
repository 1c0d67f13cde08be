export default { name: "same", run: () => 1 };
