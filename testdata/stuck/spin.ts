// Fault injection: a tool stuck in a synchronous loop. Nothing on the event loop can stop it: the server's
// watchdog must end the process with one line naming "spin", and /health must not answer meanwhile.
export default {
  description: "Loops for ever (synchronously)",
  inputSchema: { type: "object" },
  run: () => {
    for (;;) {
      // stuck
    }
  },
};
