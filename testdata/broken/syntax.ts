// A plugin with a syntax error.
export default { run: () => ( };
