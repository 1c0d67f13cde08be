// A browser for tests, as $BROWSER: fetches the authorization URL it is given and follows the redirects, the last
// of which reaches the client's loopback callback, as a person's browser would. It does not import mcp.ts.
import process from "node:process";

let url = process.argv.at(-1)!;
for (let hop = 0; hop < 10; hop++) {
  const response = await fetch(url, { redirect: "manual" });
  await response.body?.cancel();
  const next = response.headers.get("location");
  if (response.status < 300 || response.status >= 400 || !next) break;
  url = new URL(next, url).href;
}
