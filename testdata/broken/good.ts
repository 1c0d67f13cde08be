// The one tool of this directory that loads: the others must not stop it serving.
export default { description: "Still served", run: () => "fine" };
