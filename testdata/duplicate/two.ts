export default { name: "same", run: () => 2 };
