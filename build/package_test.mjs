// The npm package as a user gets it: built by build/dist.mjs, packed by npm, installed into a fresh prefix, run
// by each Node of PACKAGE_TEST_NODES (the Node binaries to run it under, ":"-separated; default: the node
// running this), by npx from the tarball, imported by an ESM project and type-checked by tsc (TSC, and the
// @types/node of TYPES_NODE_DIR), and added with Bun (when `bun` is on PATH).
//   node --test build/package_test.mjs
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, delimiter, dirname, join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const TOOLS = join(ROOT, "testdata", "tools");
const VERSION = JSON.parse(readFileSync(join(ROOT, "deno.json"), "utf8")).version;
const NODES = (process.env.PACKAGE_TEST_NODES || process.execPath).split(":").filter(Boolean);
const work = mkdtempSync(join(tmpdir(), "mcp-package-test-"));
let tarball = "";

// A command's stdout, stderr and status, never throwing; PATH starting with `node`'s folder when given.
function run(command, args, options = {}) {
  const env = { ...process.env, npm_config_loglevel: "error", npm_config_fund: "false", npm_config_audit: "false" };
  if (options.node) env.PATH = dirname(options.node) + delimiter + env.PATH;
  Object.assign(env, options.env ?? {});
  const result = spawnSync(command, args, { cwd: options.cwd ?? work, env, encoding: "utf8", timeout: 120_000 });
  return { stdout: result.stdout ?? "", stderr: result.stderr ?? "", status: result.status, error: result.error };
}

function ok(result, what) {
  assert.equal(
    result.status,
    0,
    `${what}: exit ${result.status}\n${result.stdout}\n${result.stderr}${result.error ?? ""}`,
  );
  return result.stdout;
}

before(() => {
  const out = join(work, "npm");
  ok(run(process.execPath, ["--no-warnings", join(ROOT, "build", "dist.mjs"), out]), "build/dist.mjs");
  const packed = ok(run("npm", ["pack", "--silent", "--pack-destination", work], { cwd: out }), "npm pack");
  tarball = join(work, packed.trim().split("\n").at(-1));
});
after(() => rmSync(work, { recursive: true, force: true }));

describe("the npm package", () => {
  test("holds the program as JavaScript, its declarations, README and LICENSE; bin mcp and mcp.ts", () => {
    const listed = ok(run("tar", ["-tzf", tarball]), "tar");
    for (const name of ["bin.js", "mcp.js", "mcp.d.ts", "package.json", "README.md", "LICENSE"]) {
      assert.match(listed, new RegExp(`^package/${name.replace(".", "\\.")}$`, "m"), name);
    }
    assert.doesNotMatch(listed, /^package\/mcp\.ts$/m, "no TypeScript: Node does not strip types under node_modules");
    const unpacked = join(work, "unpacked");
    mkdirSync(unpacked, { recursive: true });
    ok(run("tar", ["-xzf", tarball, "-C", unpacked]), "tar -x");
    const manifest = JSON.parse(readFileSync(join(unpacked, "package", "package.json"), "utf8"));
    assert.equal(manifest.name, "@mcp-ts/mcp");
    assert.equal(manifest.version, VERSION);
    assert.equal(manifest.type, "module");
    assert.deepEqual(manifest.bin, { "mcp": "bin.js", "mcp.ts": "bin.js" });
    assert.deepEqual(manifest.exports["."], { types: "./mcp.d.ts", default: "./mcp.js" });
    assert.deepEqual(manifest.engines, { node: ">=18" });
    assert.equal(manifest.license, "MIT");
    const program = readFileSync(join(unpacked, "package", "mcp.js"), "utf8");
    assert.match(program, /^#!\/usr\/bin\/env node\n/);
    assert.doesNotMatch(program, /[^\t\n\r\x20-\x7e]/, "printable ASCII only: V8 reads it one byte a character");
    // Lines stay mcp.ts's: a stack trace through mcp.js names the line to read in mcp.ts.
    assert.equal(program.split("\n").length, readFileSync(join(ROOT, "mcp.ts"), "utf8").split("\n").length);
    const types = readFileSync(join(unpacked, "package", "mcp.d.ts"), "utf8");
    for (const name of ["serve", "connect", "createHandler"]) {
      assert.match(types, new RegExp(`export declare function ${name}\\(`), name);
    }
    assert.match(types, /@internal\s+\*\/\s+export declare function parseJsonText/, "@internal marked as such");
  });

  test("deno task dist's build (Deno's type stripper) is byte for byte the one Node made", (t) => {
    if (run("deno", ["--version"]).status !== 0) return t.skip("no deno on PATH");
    const out = join(work, "npm-deno");
    ok(run("deno", ["run", "-A", join(ROOT, "build", "dist.mjs"), out]), "deno run build/dist.mjs");
    assert.deepEqual(readdirSync(out).sort(), readdirSync(join(work, "npm")).sort());
    for (const name of readdirSync(out)) {
      assert.ok(readFileSync(join(out, name)).equals(readFileSync(join(work, "npm", name))), name);
    }
  });

  for (const node of NODES) {
    const version = execFileSync(node, ["--version"], { encoding: "utf8" }).trim();
    const major = Number(version.slice(1).split(".")[0]);
    const loadsTypeScript = major > 22 || (major === 22 && Number(version.split(".")[1]) >= 18);
    if (!loadsTypeScript) {
      test(`build/dist.mjs on Node ${version} says in one line to build with Deno, and writes nothing`, () => {
        const out = join(work, `npm-${version}`);
        const result = run(node, [join(ROOT, "build", "dist.mjs"), out], { node });
        assert.equal(result.status, 1, result.stderr);
        assert.equal(result.stdout, "");
        assert.match(result.stderr, /^dist: Node \S+ cannot strip the types of mcp\.ts .*`deno task dist`[^\n]*\n$/);
        assert.equal(existsSync(out), false);
      });
    }
    test(`installed into a fresh prefix, mcp runs on Node ${version}`, () => {
      const prefix = join(work, `prefix-${version}`);
      ok(run("npm", ["install", "-g", "--prefix", prefix, tarball], { node }), "npm install -g");
      const bin = process.platform === "win32" ? join(prefix, "mcp.cmd") : join(prefix, "bin", "mcp");
      assert.equal(ok(run(bin, ["--version"], { node }), "mcp --version").trim(), `mcp.ts ${VERSION}`);
      assert.equal(ok(run(bin, ["--version"], { node, cwd: ROOT }), "mcp.ts --version").trim(), `mcp.ts ${VERSION}`);
      // The server is the package too, started by its command name.
      const server = `${bin} serve ${TOOLS}`;
      const wc = ok(run(bin, ["call", server, "wc", "text=a b c"], { node, cwd: ROOT }), "call wc");
      assert.equal(wc.trim(), "lines=1 words=3 bytes=5");
      if (loadsTypeScript) {
        assert.equal(ok(run(bin, ["call", server, "add", "a=2", "b=3"], { node, cwd: ROOT }), "call add").trim(), "5");
      } else {
        // Node before 22.6 has no type stripper: a .ts plugin is skipped, saying why and what to do.
        const listed = run(bin, ["list", server, "-v"], { node, cwd: ROOT });
        assert.equal(listed.status, 0, listed.stderr);
        assert.match(listed.stderr, new RegExp(`add\\.ts: Node ${version.slice(1)} cannot load TypeScript`));
        assert.match(listed.stdout, /^wc /m);
      }
    });
  }

  test("npx -y runs it from the tarball", () => {
    const cache = join(work, "npx-cache");
    // As a user types it, a path starting with ./ (npx takes a bare name for a command on PATH).
    const out = ok(
      run("npx", [
        "-y",
        `./${basename(tarball)}`,
        "call",
        `node ${join(work, "unpacked", "package", "bin.js")} serve ${TOOLS}`,
        "wc",
        "text=x",
      ], {
        env: { npm_config_cache: cache },
      }),
      "npx",
    );
    assert.equal(out.trim(), "lines=1 words=1 bytes=1");
  });

  test("an ESM project imports the library, and tsc checks a typed use (and fails a wrong one)", () => {
    const project = join(work, "esm");
    mkdirSync(project, { recursive: true });
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "p", private: true, type: "module" }));
    ok(run("npm", ["install", tarball], { cwd: project }), "npm install");
    writeFileSync(
      join(project, "use.mjs"),
      `import { createHandler, VERSION } from "@mcp-ts/mcp";
const handler = createHandler({ tools: [{ name: "double", description: "Twice n", run: ({ n }) => n * 2 }] });
const body = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "double", arguments: { n: 21 },
  _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": { name: "t", version: "1" }, "io.modelcontextprotocol/clientCapabilities": {} } } };
const response = await handler(new Request("http://localhost/mcp", { method: "POST", body: JSON.stringify(body),
  headers: { "content-type": "application/json", accept: "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "double" } }));
const text = await response.text();
console.log(VERSION, response.status, /"text":"42"/.test(text) ? "42" : text);
`,
    );
    assert.equal(ok(run(process.execPath, ["use.mjs"], { cwd: project }), "node use.mjs").trim(), `${VERSION} 200 42`);
    const tsc = process.env.TSC;
    const types = process.env.TYPES_NODE_DIR;
    if (!tsc || !types) {
      return void console.log("# tsc skipped: set TSC and TYPES_NODE_DIR (the folder holding @types)");
    }
    const config = {
      compilerOptions: {
        strict: true,
        noEmit: true,
        target: "es2022",
        module: "nodenext",
        moduleResolution: "nodenext",
        typeRoots: [types],
        types: ["node"],
        skipLibCheck: false,
        lib: ["es2023", "dom"],
      },
    };
    writeFileSync(join(project, "tsconfig.json"), JSON.stringify(config));
    writeFileSync(
      join(project, "good.ts"),
      `import { connect, createHandler, serve, type ToolDefinition, type McpClient } from "@mcp-ts/mcp";
const double: ToolDefinition = { name: "double", run: ({ n }: { n: number }) => n * 2 };
const handler = createHandler({ tools: [double], path: "/mcp" });
const answer: Promise<Response> = handler(new Request("http://localhost/mcp"));
const server = serve({ name: "embedded", tools: [double] });
const done: Promise<void> = server.done;
async function use(): Promise<number> {
  const client: McpClient = await connect("node server.js", { timeout: 10_000 });
  const result = await client.callTool("double", { n: 2 });
  await client.close();
  return result.isError === true ? 1 : 0;
}
void answer; void done; void use;
`,
    );
    const good = run(tsc, ["-p", "."], { cwd: project });
    assert.equal(good.status, 0, `tsc on a typed use:\n${good.stdout}${good.stderr}`);
    writeFileSync(
      join(project, "bad.ts"),
      `import { createHandler } from "@mcp-ts/mcp";\ncreateHandler({ tools: 5 });\n`,
    );
    const bad = run(tsc, ["-p", "."], { cwd: project });
    assert.notEqual(bad.status, 0, "tsc must reject tools: 5");
    assert.match(bad.stdout, /bad\.ts\(2,/);
  });

  test("bun add the tarball, then bunx mcp (and under Bun itself)", (t) => {
    if (run("bun", ["--version"]).status !== 0) return t.skip("no bun on PATH");
    const project = join(work, "bun");
    mkdirSync(project, { recursive: true });
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "b", private: true }));
    ok(run("bun", ["add", tarball], { cwd: project }), "bun add");
    assert.equal(ok(run("bunx", ["mcp", "--version"], { cwd: project }), "bunx mcp").trim(), `mcp.ts ${VERSION}`);
    const server = `bun ${join(project, "node_modules", "@mcp-ts", "mcp", "bin.js")} serve ${TOOLS}`;
    const out = ok(run("bunx", ["--bun", "mcp", "call", server, "add", "a=2", "b=3"], { cwd: project }), "bunx --bun");
    assert.equal(out.trim(), "5");
  });

  test("deno runs the installed package's command", (t) => {
    if (run("deno", ["--version"]).status !== 0) return t.skip("no deno on PATH");
    const bin = join(work, "esm", "node_modules", "@mcp-ts", "mcp", "bin.js");
    if (!readdirSync(join(work, "esm", "node_modules", "@mcp-ts", "mcp")).includes("bin.js")) {
      return t.skip("no esm project");
    }
    const out = ok(
      run("deno", ["run", "-A", bin, "call", `deno run -A ${bin} serve ${TOOLS}`, "add", "a=2", "b=3"]),
      "deno",
    );
    assert.equal(out.trim(), "5");
  });
});
