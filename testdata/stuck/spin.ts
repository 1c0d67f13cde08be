// Fault injection: a tool stuck in a synchronous loop. Nothing on the event loop can stop it: the server's
// watchdog must end the process with one line naming "spin", and /health must not answer meanwhile. It says
// "spin: looping" on stderr (synchronously, before the loop) so that a test knows when it has begun.
import { writeSync } from "node:fs";

export default {
  description: "Loops for ever (synchronously)",
  inputSchema: { type: "object" },
  run: () => {
    writeSync(2, "spin: looping\n");
    for (;;) {
      // stuck
    }
  },
};
