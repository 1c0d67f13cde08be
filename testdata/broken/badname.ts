// A tool whose name breaks the spec's rule (no spaces allowed).
export default { name: "bad name", run: () => "unreachable" };
