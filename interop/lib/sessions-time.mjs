// Times a command run again and again, one run after the other: wall milliseconds from spawn to exit, each run's
// stdout checked. One untimed run first (a cold cache, a session's first use), then N timed ones.
//   node sessions-time.mjs N ERE COMMAND [ARG...]
// Prints "median MS min MS max MS" (one decimal) on stdout; exit 1, with the failing run's exit code, stdout and stderr
// on stderr, when a run exits non-zero or prints no line matching ERE (an empty ERE matches anything).
import { spawnSync } from "node:child_process";
import process from "node:process";

const [count, pattern, command, ...args] = process.argv.slice(2);
const n = Number(count);
if (!Number.isInteger(n) || n < 1 || pattern === undefined || !command) {
  console.error("usage: sessions-time.mjs N ERE COMMAND [ARG...]");
  process.exit(2);
}
const want = new RegExp(pattern, "m");

function once() {
  const began = process.hrtime.bigint();
  const run = spawnSync(command, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 60_000 });
  const ms = Number(process.hrtime.bigint() - began) / 1e6;
  if (run.status !== 0 || !want.test(run.stdout)) {
    const why = run.error ? run.error.message : run.signal ? `signal ${run.signal}` : `exit ${run.status}`;
    console.error(`sessions-time: ${why}, stdout ${want.test(run.stdout) ? "as expected" : `without /${pattern}/`}`);
    for (const [name, text] of [["stdout", run.stdout], ["stderr", run.stderr]]) {
      for (const line of (text ?? "").split("\n").filter(Boolean).slice(0, 20)) console.error(`  ${name}: ${line}`);
    }
    process.exit(1);
  }
  return ms;
}

once();
const times = Array.from({ length: n }, once).sort((a, b) => a - b);
const median = n % 2 ? times[(n - 1) / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
console.log(`median ${median.toFixed(1)} min ${times[0].toFixed(1)} max ${times[n - 1].toFixed(1)}`);
