// Makes the npm package from mcp.ts, the one source: `deno task dist` (`deno run -A build/dist.mjs [OUT]`, or
// `node build/dist.mjs [OUT]` on Node >= 22.18) writes dist/npm/ with the program as JavaScript (node:module's own
// type stripper, Deno's or Node's: the same text with its types blanked, so line and column numbers match mcp.ts),
// its type declarations (tsc, from mcp.ts), package.json, README and LICENSE. Node refuses to strip types under
// node_modules, and Node before 22.18 cannot run a .ts file at all: the package ships JavaScript, and runs on
// Node 18+, Bun and Deno.
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const out = resolve(process.argv[2] ?? join(root, "dist", "npm"));
const deno = JSON.parse(readFileSync(join(root, "deno.json"), "utf8"));
const source = readFileSync(join(root, "mcp.ts"), "utf8");

// The version in the file and in deno.json are one number (a test holds them together); say so here too.
const fileVersion = /export const VERSION = "([^"]+)"/.exec(source)?.[1];
if (fileVersion !== deno.version) throw new Error(`mcp.ts says ${fileVersion}, deno.json ${deno.version}`);

// The program, made as `mcp.ts pack` makes a bundle's: the same stripper (node:module's, Node's warning kept off
// stderr) and javaScriptOf (the types blanked, the shebang naming node). A Node that cannot load mcp.ts (before
// 22.18) or has no stripper (before 22.13; Bun) is told, in one line and before anything is written, what can.
const mcp = await import("../mcp.ts").catch((error) => {
  if (error?.code !== "ERR_UNKNOWN_FILE_EXTENSION") throw error;
});
const strip = await mcp?.typeStripper();
if (!strip) {
  const runtime = process.versions.bun ? `Bun ${process.versions.bun}` : `Node ${process.versions.node}`;
  const line = `dist: ${runtime} cannot strip the types of mcp.ts (Deno and Node >= 22.18 can): ` +
    "run `deno task dist` (or `npx -y deno run -A build/dist.mjs`) instead\n";
  // Drained, then exit: nothing else runs (no output folder emptied).
  await new Promise((done) => process.stderr.write(line, done));
  process.exit(1);
}
const { javaScriptOf } = mcp;

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
writeFileSync(join(out, "mcp.js"), javaScriptOf(source, strip));
// The command: Node's compile cache first (Node >= 22.1; V8's code for mcp.js kept between starts, ~10 ms of
// each start of a 0.8 MB file), then mcp.js's main. Importing mcp.js runs nothing: it is not the entry script.
writeFileSync(
  join(out, "bin.js"),
  `#!/usr/bin/env node
// The mcp command of ${deno.name}: Node's compile cache on, then mcp.js (the program; see build/dist.mjs).
import module from "node:module";
module.enableCompileCache?.();
const { main } = await import("./mcp.js");
process.exitCode = await main(process.argv.slice(2));
`,
);
for (const name of ["mcp.js", "bin.js"]) chmodSync(join(out, name), 0o755);

// The declarations: what a TypeScript user of `import { serve, connect, createHandler }` sees (@internal ones
// kept, marked so in their comments: public types name some of them).
// --noCheck: the types were checked by `deno check`; this only writes them down (1.5 s, not 3).
// tsc from TSC, else from PATH, else fetched by npx (pinned: the version CI makes and checks them with).
const tscArgs = [
  "--declaration",
  "--emitDeclarationOnly",
  "--noCheck",
  "--skipLibCheck",
  "--target",
  "es2023",
  "--module",
  "esnext",
  "--moduleResolution",
  "bundler",
  "--outDir",
  out,
  join(root, "mcp.ts"),
];
const spawnOptions = { stdio: "inherit", shell: process.platform === "win32" };
try {
  execFileSync(process.env.TSC ?? "tsc", tscArgs, spawnOptions);
} catch (error) {
  if (error.code !== "ENOENT" || process.env.TSC) throw error;
  execFileSync("npx", ["-y", "-p", "typescript@5.9.3", "tsc", ...tscArgs], spawnOptions);
}

writeFileSync(
  join(out, "package.json"),
  JSON.stringify(
    {
      name: deno.name,
      version: deno.version,
      description: "The Model Context Protocol from a terminal, a shell script and a server fleet: " +
        "serve a folder of tools, call any MCP server, gateway, proxy and replay, in one file, no dependencies.",
      license: "MIT",
      type: "module",
      bin: { "mcp": "bin.js", "mcp.ts": "bin.js" },
      exports: { ".": { types: "./mcp.d.ts", default: "./mcp.js" }, "./package.json": "./package.json" },
      types: "./mcp.d.ts",
      files: ["mcp.js", "bin.js", "mcp.d.ts", "README.md", "LICENSE"],
      engines: { node: ">=18" },
      keywords: ["mcp", "model-context-protocol", "cli", "server", "client", "gateway"],
    },
    null,
    2,
  ) + "\n",
);
for (const name of ["README.md", "LICENSE"]) writeFileSync(join(out, name), readFileSync(join(root, name)));
console.log(`dist: ${deno.name}@${deno.version} in ${out}`);
