// Fault injection: a tool that throws a value with no toString, and one that
// throws from a timer after it has answered.
export default [
  {
    name: "null_proto",
    description: "Throws Object.create(null)",
    run: () => {
      throw Object.create(null);
    },
  },
  {
    name: "late_throw",
    description: "Answers, then throws from a timer and leaves a promise rejected",
    run: () => {
      setTimeout(() => {
        throw new Error("thrown from a timer");
      }, 5);
      Promise.reject(new Error("rejected and forgotten"));
      return "answered";
    },
  },
];
