// Calls an OAuth-protected Streamable HTTP MCP server with an official TypeScript SDK client, in one of four ways:
//   node sdk-auth-client.mjs v1|v2 URL none                 no credentials: what the SDK reports of the 401
//   node sdk-auth-client.mjs v2 URL empty-provider          an authProvider whose token() has none (and no
//                                                           onUnauthorized): what the SDK reports of the 401 then
//   node sdk-auth-client.mjs v1|v2 URL bearer               $IOP_BEARER_TOKEN as `Authorization: Bearer` (requestInit)
//   node sdk-auth-client.mjs v1|v2 URL client-credentials   the SDK's own ClientCredentialsProvider as authProvider:
//                                                           $IOP_CLIENT_ID, $IOP_CLIENT_SECRET, $IOP_ISSUER
//                                                           (expectedIssuer), $IOP_SCOPE (its scope, when set); it
//                                                           finds the AS through the server's 401 and Protected
//                                                           Resource Metadata, then POSTs /token
// v2 speaks 2026-07-28 when the server offers it (versionNegotiation "auto"); with --legacy after the mode, the SDK's
// default ("legacy": initialize, a session).
// The token and the secret come from the environment, never argv. It connects, lists the tools and calls `whoami`:
// stdout `tools: NAME, ...` and `whoami: TEXT`. stderr: the era, and one `http` line per request the SDK made (method,
// URL, the Authorization scheme only, a form's grant_type/scope/resource; then the status and WWW-Authenticate).
// Exit 0 on success; 1 on any error the SDK raised, printed as `error NAME (class C, status S, code K): MESSAGE` and
// `unauthorized-error yes|no` (whether it is the SDK's UnauthorizedError); 2 on bad usage.
import process from "node:process";
import { fromCache } from "./cache.mjs";

const [sdk, url, mode, flag] = process.argv.slice(2);
const legacy = flag === "--legacy";
if (
  !["v1", "v2"].includes(sdk) || !/^https?:\/\//.test(url ?? "") ||
  !["none", "empty-provider", "bearer", "client-credentials"].includes(mode) ||
  (mode === "empty-provider" && sdk !== "v2") || (flag !== undefined && !legacy)
) {
  console.error("usage: sdk-auth-client.mjs v1|v2 URL none|empty-provider (v2)|bearer|client-credentials [--legacy]");
  process.exit(2);
}

// fetch as the SDK calls it (the MCP requests and, with an authProvider, its OAuth requests too), logged without
// secrets: the Authorization header's scheme, a form body's grant_type, scope and resource.
const logged = async (input, init = {}) => {
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  const method = init.method ?? (input instanceof Request ? input.method : "GET");
  const where = input instanceof Request ? input.url : String(input);
  const scheme = (headers.get("authorization") ?? "").split(" ")[0];
  let form = "";
  const body = init.body;
  if (
    body instanceof URLSearchParams ||
    (typeof body === "string" && /form-urlencoded/.test(headers.get("content-type") ?? ""))
  ) {
    const fields = new URLSearchParams(body);
    form = ["grant_type", "scope", "resource"].filter((name) => fields.has(name))
      .map((name) => ` ${name}=${fields.get(name)}`).join("");
  } else if (typeof body === "string") {
    try {
      form = ` (${[JSON.parse(body)].flat().map((m) => m.method ?? "(response)").join(", ")})`;
    } catch {
      // not JSON
    }
  }
  const response = await globalThis.fetch(input, init);
  const challenge = response.headers.get("www-authenticate");
  console.error(
    `http ${method} ${where}${scheme ? ` authorization=${scheme}` : ""}${form} -> ${response.status}` +
      (challenge ? ` www-authenticate: ${challenge}` : ""),
  );
  return response;
};

const clientInfo = { name: "mcp-interop-sdk-auth-client", version: "1.0.0" };
const options = { fetch: logged };
if (mode === "empty-provider") options.authProvider = { token: () => Promise.resolve(undefined) };
if (mode === "bearer") options.requestInit = { headers: { Authorization: `Bearer ${process.env.IOP_BEARER_TOKEN}` } };

let client, transport, UnauthorizedError, ClientCredentialsProvider;
if (sdk === "v1") {
  const { Client } = fromCache("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = fromCache("@modelcontextprotocol/sdk/client/streamableHttp.js");
  ({ UnauthorizedError } = fromCache("@modelcontextprotocol/sdk/client/auth.js"));
  ({ ClientCredentialsProvider } = fromCache("@modelcontextprotocol/sdk/client/auth-extensions.js"));
  client = new Client(clientInfo);
  transport = () => new StreamableHTTPClientTransport(new URL(url), options);
} else {
  const sdkV2 = fromCache("@modelcontextprotocol/client");
  ({ UnauthorizedError, ClientCredentialsProvider } = sdkV2);
  client = new sdkV2.Client(clientInfo, legacy ? {} : { versionNegotiation: { mode: "auto" } });
  transport = () => new sdkV2.StreamableHTTPClientTransport(new URL(url), options);
}
if (mode === "client-credentials") {
  options.authProvider = new ClientCredentialsProvider({
    clientId: process.env.IOP_CLIENT_ID,
    clientSecret: process.env.IOP_CLIENT_SECRET,
    expectedIssuer: process.env.IOP_ISSUER,
    ...(process.env.IOP_SCOPE ? { scope: process.env.IOP_SCOPE } : {}),
  });
}

try {
  await client.connect(transport());
  console.error(
    sdk === "v1"
      ? `era legacy ${client.transport?.protocolVersion ?? "?"}`
      : `era ${client.getProtocolEra()} ${client.getNegotiatedProtocolVersion()}`,
  );
  const { tools } = await client.listTools();
  console.log(`tools: ${tools.map((tool) => tool.name).join(", ")}`);
  const result = await client.callTool({ name: "whoami", arguments: {} });
  console.log(`whoami: ${result.content?.map((part) => part.text ?? JSON.stringify(part)).join("")}`);
  if (result.isError) process.exitCode = 1;
} catch (error) {
  const about = [
    `class ${error?.constructor?.name ?? typeof error}`,
    error?.status ?? error?.data?.status ? `status ${error?.status ?? error?.data?.status}` : "",
    error?.code !== undefined ? `code ${error.code}` : "",
  ].filter(Boolean).join(", ");
  console.error(`error ${error?.name ?? "?"} (${about}): ${error?.message ?? error}`);
  console.error(`unauthorized-error ${error instanceof UnauthorizedError ? "yes" : "no"}`);
  process.exitCode = 1;
} finally {
  await client.close().catch(() => {});
}
