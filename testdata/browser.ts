// A browser for tests, as $BROWSER: fetches the authorization URL it is given and follows the redirects, the last
// of which reaches the client's loopback callback, as a person's browser would. It does not import mcp.ts.
// With BROWSER_FORGE=FILE it first plays another local process: it calls the callback (the authorization URL's
// redirect_uri) with a wrong state and a made-up code, and writes the HTTP status it got to FILE.
import { writeFileSync } from "node:fs";
import process from "node:process";

let url = process.argv.at(-1)!;
const forge = process.env.BROWSER_FORGE;
if (forge) {
  const callback = new URL(new URL(url).searchParams.get("redirect_uri")!);
  callback.searchParams.set("code", "forged-code");
  callback.searchParams.set("state", "WRONG");
  const response = await fetch(callback);
  await response.body?.cancel();
  writeFileSync(forge, String(response.status));
}
for (let hop = 0; hop < 10; hop++) {
  const response = await fetch(url, { redirect: "manual" });
  await response.body?.cancel();
  const next = response.headers.get("location");
  if (response.status < 300 || response.status >= 400 || !next) break;
  url = new URL(next, url).href;
}
