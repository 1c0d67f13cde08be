// The hand-written TOML of interop/lib/packages-toml.mjs: Codex config.toml files as people write them (valid TOML
// 1.0 that mcp.ts's reader must read as a full parser does), documents only TOML 1.1 allows, and invalid documents
// (each with `must`: true when mcp.ts's reader has to refuse it too, false when only a full parser can tell).

/** Realistic Codex config.toml files: [name, text]. */
export const CODEX_CONFIGS = [
  [
    "codex: a plain one",
    `# ~/.codex/config.toml
model = "gpt-5-codex"
model_provider = "openai"
approval_policy = "on-request"   # untrusted | on-failure | on-request | never
sandbox_mode = "workspace-write"
model_reasoning_effort = "high"
hide_agent_reasoning = false

[projects."/home/ana/src/mcp"]
trust_level = "trusted"

[projects."C:\\\\Users\\\\ana\\\\src\\\\web"]
trust_level = "trusted"

[mcp_servers.docs]
command = "npx"
args = ["-y", "mcp-remote", "https://docs.example.com/mcp"]

[mcp_servers.github]
command = "docker"
args = [
  "run", "-i", "--rm",
  "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", # passed through from env
  "ghcr.io/github/github-mcp-server",
]
env = { "GITHUB_PERSONAL_ACCESS_TOKEN" = "ghp_xxx", GITHUB_TOOLSETS = "repos,issues" }
startup_timeout_sec = 20.5
tool_timeout_sec = 120
`,
  ],
  [
    "codex: sub-tables, remote servers, disabled ones",
    `model = 'o3'
# a literal string with backslashes
notify = ['C:\\Tools\\notify.exe', "--title", "Codex"]

[shell_environment_policy]
inherit = "core"
ignore_default_excludes = false
exclude = ["AWS_*", "AZURE_*"]
set = { PATH = "/usr/bin:/bin", LANG = "C.UTF-8" }

[mcp_servers.filesystem]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/home/ana/notes", ]
enabled = false

[mcp_servers.filesystem.env]
NODE_OPTIONS = "--max-old-space-size=256"
"HTTP_PROXY" = "http://proxy.local:3128"

[mcp_servers.linear]
url = "https://mcp.linear.app/mcp"
bearer_token_env_var = "LINEAR_TOKEN"
http_headers = { "X-Client" = "codex", "X-Trace" = "on" }
env_http_headers = { "X-Workspace" = "LINEAR_WORKSPACE" }
startup_timeout_sec = 10.0
enabled_tools = ["search_issues", "create_issue"]

  # indented, with a trailing comment
  [mcp_servers."my.dotted-server"]   # quoted, dotted name
  command = "/opt/mcp/bin/server"
  args = []
  enabled = true

[mcp_servers.'single quoted']
command = 'python3'
args = ['-m', 'server', '--root', 'C:\\data']
`,
  ],
  [
    "codex: profiles, multi-line strings, escapes",
    `profile = "fast"

[profiles.fast]
model = "gpt-5-codex-mini"
model_reasoning_effort = "low"
approval_policy = "never"

[profiles.careful]
model = "gpt-5-codex"
model_reasoning_effort = "high"
model_reasoning_summary = "detailed"

[model_providers.local]
name = "Local Ollama"
base_url = "http://localhost:11434/v1"
wire_api = "chat"
query_params = { api-version = "2025-04-01-preview" }
request_max_retries = 4
stream_idle_timeout_ms = 300_000

[tui]
notifications = ["agent-turn-complete", "approval-requested"]

[mcp_servers.script]
command = "bash"
args = ["-c", """
set -eu
cd "$HOME/mcp" && exec ./serve \\
    --stdio
"""]
description = '''
A server started by a script:
  it says "hello" and \\n is not an escape here.
'''
greeting = "Gr\\u00fc\\u00DFe \\U0001F600 \\"quoted\\" tab:\\t back\\\\slash"

[mcp_servers.script.env]
"KEY WITH SPACES" = "v"
'quoted.key' = "dotted but quoted"
a.b.c = "dotted keys make tables"
EMPTY = ""
`,
  ],
  [
    "codex: arrays of tables, numbers, dates kept as text",
    `# numbers in every form the subset reads
answer = 42
negative = -17
plus = +99
hex = 0xDEAD_beef
octal = 0o755
binary = 0b1101
big = 1_000_000
pi = 3.141_592
exp = 6.626e-34
upper = 1E+6
neg_zero = -0.0
infinity = inf
minus_inf = -inf
not_a_number = nan
updated = 2025-10-01T09:30:00Z
local_date = 2025-10-01
local_time = 07:32:00.5
spaced = 1979-05-27 07:32:00-07:00

[[hooks.before]]
name = "fmt"
run = ["deno", "fmt"]

[[hooks.before]]
name = "lint"
run = ["deno", "lint"]
timeout = 30

[hooks.before.extra]   # a table in the last item
note = "belongs to lint"

[[hooks.after]]

[mcp_servers.everything]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything"]
matrix = [[1, 2], [3, 4, [5]], [], ["mixed", 1, true, { inline = "table" }]]
`,
  ],
  [
    "codex: whitespace, comments and key forms",
    `
# leading blank lines and comments

	model="gpt-5"	# tabs around
"quoted key" = 1
'literal key' = 2
dotted . spaced . key = 3
site."google.com" = true
1234 = "a bare key of digits"
- = "a bare key that is a dash"
_under = "x"
"" = "the empty key"
"ʎǝʞ" = "unicode quoted key"
"\\u00e9" = "an escaped key"

[ mcp_servers . spaced ]  # spaces in a header
command = "x"   # comment
args = [  # comment after the bracket
  # a comment line
  "a",

  "b"  # comment before the comma
  ,
]
env = {}

[mcp_servers."with \\"quotes\\" and \\\\"]
command = "y"

[[mcp_servers.spaced.tools]]
name = "first"
[[mcp_servers.spaced.tools]]
name = "second"
`,
  ],
  [
    "codex: a table after its sub-tables, empty tables",
    `[mcp_servers.late.env]
TOKEN = "t"

[mcp_servers.late]
command = "late"

[mcp_servers]

[empty]

[another."empty".one]
`,
  ],
  ["codex: empty file", ``],
  ["codex: comments only", `# nothing here yet\n   # indented comment\n`],
  ["codex: no trailing newline", `model = "o3"\n[mcp_servers.last]\ncommand = "x"`],
];

/** Valid TOML 1.1 that TOML 1.0 (and mcp.ts's subset) need not read: [name, text]. */
export const TOML_11 = [
  ["1.1: an inline table over lines", `[mcp_servers.x]\nenv = {\n  A = "1",\n  B = "2"\n}\n`],
  ["1.1: a trailing comma in an inline table", `env = { A = "1", }\n`],
  ["1.1: \\e", `a = "\\e[1m"\n`],
  ["1.1: \\xHH", `a = "caf\\xe9"\n`],
  ["1.1: a time without seconds", `t = 07:32\n`],
];

/** Valid TOML the subset reads differently by design: [name, text]. */
export const EDGES = [
  ["an integer past 2^53", `n = 9007199254740993\n`],
  ["the largest 64-bit integer", `n = 9223372036854775807\n`],
  ["an integer past 64 bits (smol-toml takes it as a BigInt too)", `n = 99999999999999999999\n`],
];

/** Invalid TOML: [name, text, must]. must: mcp.ts's reader should refuse it too (a syntax error, a key twice). */
export const INVALID = [
  ["a key twice", `a = 1\na = 2\n`, true],
  ["a key twice, quoted the second time", `a = 1\n"a" = 2\n`, true],
  ["a key twice in a table", `[t]\nx = 1\nx = 2\n`, true],
  ["a key twice in an inline table", `t = { x = 1, x = 2 }\n`, true],
  ["a dotted key over a value", `a = 1\na.b = 2\n`, true],
  ["a header over a value", `a = 1\n[a]\n`, true],
  ["an unterminated string", `a = "abc\n`, true],
  ["an unterminated literal string", `a = 'abc\n`, true],
  ["an unterminated multi-line string", `a = """abc\n`, true],
  ["an unterminated multi-line literal", `a = '''abc\n`, true],
  ["a bad escape", `a = "\\q"\n`, true],
  ["a short \\u escape", `a = "\\u12"\n`, true],
  ["a surrogate \\u escape", `a = "\\uD800"\n`, true],
  ["a \\U escape past U+10FFFF", `a = "\\U00110000"\n`, true],
  ["a missing value", `a =\n`, true],
  ["a missing value before a comment", `a = # nothing\n`, true],
  ["a missing =", `a 1\n`, true],
  ["a key alone", `a\n`, true],
  ["two values on a line", `a = 1 b = 2\n`, true],
  ["an unterminated array", `a = [1, 2\n`, true],
  ["an array without commas", `a = [1 2]\n`, true],
  ["an unterminated inline table", `a = { b = 1\n`, true],
  ["an inline table without commas", `a = { b = 1 c = 2 }\n`, true],
  ["an unterminated header", `[a\nb = 1\n`, true],
  ["an empty header", `[]\n`, true],
  ["an unterminated array-of-tables header", `[[a]\n`, true],
  ["text after a header", `[a] b = 1\n`, true],
  ["an array of tables over a table", `[a]\n[[a]]\n`, true],
  ["a bare word", `a = hello\n`, true],
  ["a leading zero", `a = 012\n`, true],
  ["a float without digits after the point", `a = 1.\n`, true],
  ["a float without digits before the point", `a = .5\n`, true],
  ["True", `a = True\n`, true],
  ["a line break in a basic string", `a = "one\ntwo"\n`, true],
  ["a line break in a literal string", `a = 'one\ntwo'\n`, true],
  ["an invalid bare key", `a/b = 1\n`, true],
  // What only a full parser can tell: the subset is allowed to take these, reported as findings.
  ["a table header twice", `[a]\nx = 1\n[a]\ny = 2\n`, false],
  ["a sub-table header twice", `[a.b]\n[a.b]\n`, false],
  ["a header over a table made by dotted keys", `[a]\nb.c = 1\n[a.b]\nd = 1\n`, false],
  ["a dotted key into an inline table", `a = { b = 1 }\na.c = 2\n`, false],
  ["a header into an inline table", `a = { b = { c = 1 } }\n[a.b.d]\n`, false],
  ["an array of tables over a static array", `a = [1]\n[[a]]\n`, false],
  ["a table header over an array of tables", `[[a]]\n[a]\n`, false],
  ["a raw control character in a string", `a = "\u0001"\n`, false],
  ["a raw DEL in a string", `a = "\u007f"\n`, false],
  ["a raw control character in a comment", `# \u0001\na = 1\n`, false],
  ["a lone carriage return", `a = 1\rb = 2\n`, false],
  ["a double underscore", `a = 1__2\n`, false],
  ["a trailing underscore", `a = 1_\n`, false],
  ["a signed hex integer", `a = -0x10\n`, false],
  ["an underscore after 0x", `a = 0x_10\n`, false],
  ["a backslash before spaces and text", `a = """x\\  y"""\n`, false],
  ["a date with text after it", `a = 1979-05-27xyz\n`, false],
  ["a month 13", `a = 1979-13-01\n`, false],
];
