// The model's side of test_serve_fetch.sh: the official SDK client calls
// fetch_webpage and browser_fetch of `tollgate serve`, and answers the
// approvals serve asks of it (elicitation: deny, then once). Prints one JSON
// line per step. Usage: node fetch.mjs MODE ORIGIN -- CMD [ARG...]
// MODE: full (everything), short (a page, a refusal: the other process
// model), nochrome (browser_fetch without Chromium). ORIGIN: http://origin.test:PORT
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const [mode, origin] = argv.slice(0, sep);
const [command, ...args] = argv.slice(sep + 1);
const port = new URL(origin).port;

const t0 = Date.now();
function out(step, value) {
  console.log(JSON.stringify({ step, at: Date.now() - t0, ...value }));
}

async function call(client, name, a) {
  const t0 = Date.now();
  try {
    const r = await client.callTool({ name, arguments: a }, undefined, { timeout: 120000 });
    const text = (r.content || []).map((c) => c.text || "").join("\n");
    return { isError: r.isError === true, text, structured: r.structuredContent ?? null, ms: Date.now() - t0 };
  } catch (e) {
    return { rpcError: e.code ?? null, message: String(e.message) };
  }
}

const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "tollgate-fetch-test", version: "1.0.0" },
  { capabilities: { elicitation: {} } });
const answers = ["deny", "once"];
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params.message);
  return { action: "accept", content: { decision: answers.shift() ?? "deny" } };
});
await client.connect(transport);
const tools = (await client.listTools()).tools;
out("tools", {
  tools: tools.map((t) => t.name).sort(),
  schemas: Object.fromEntries(tools.filter((t) => t.name.endsWith("fetch") || t.name === "fetch_webpage")
    .map((t) => [t.name, { input: t.inputSchema, output: t.outputSchema ?? null }])),
});

const stats = async () => (await call(client, "sandbox_stats", {})).structured?.runs ?? null;

if (mode === "nochrome") {
  out("nochrome", await call(client, "browser_fetch", { url: `${origin}/js.html` }));
} else {
  out("page", await call(client, "fetch_webpage", { url: `${origin}/page.html#frag` }));
  if (mode === "full") {
    out("trunc", await call(client, "fetch_webpage", { url: `${origin}/page.html`, max_bytes: 100 }));
    out("js-plain", await call(client, "fetch_webpage", { url: `${origin}/js.html` }));
    out("js-browser", await call(client, "browser_fetch", { url: `${origin}/js.html`, wait_ms: 500 }));
    out("redirect", await call(client, "fetch_webpage", { url: `${origin}/dir` }));
    out("literal", await call(client, "fetch_webpage", { url: `http://127.0.0.1:${port}/page.html` }));
    out("text", await call(client, "fetch_webpage", { url: `${origin}/hello.txt` }));
    out("status404", await call(client, "fetch_webpage", { url: `${origin}/missing.html` }));
    for (const name of ["deny", "once"]) {
      const before = asked.length;
      const r = await call(client, "fetch_webpage", { url: `http://held.test:${port}/page.html` });
      out(`held-${name}`, { ...r, asked: asked.length - before, message: asked[before] ?? null });
    }
    out("private-name", await call(client, "fetch_webpage", { url: "http://inner.test/" }));
  }
  // Refused before any sandbox starts: the run count does not move, and no
  // one is asked.
  const runsBefore = await stats();
  const askedBefore = asked.length;
  const refusals = mode === "full"
    ? [["file", "file:///etc/passwd"], ["metadata", "http://169.254.169.254/latest/meta-data/"],
      ["rfc1918", "http://10.0.0.1/"], ["userinfo", `http://user:pw@origin.test:${port}/`],
      ["loopback-v6", "http://[::1]/"], ["ula-v6", "http://[fd00::1]/"],
      ["numeric", "http://2130706433/"], ["ftp", "ftp://origin.test/"],
      ["space", `${origin}/a b`], ["browser-metadata", "http://169.254.169.254/"]]
    : [["rfc1918", "http://10.0.0.1/"]];
  for (const [name, url] of refusals) {
    out(`refuse-${name}`, await call(client, name.startsWith("browser") ? "browser_fetch" : "fetch_webpage", { url }));
  }
  out("refuse-bad-max", await call(client, "fetch_webpage", { url: `${origin}/`, max_bytes: 99999999 }));
  out("refusals-ran", { runs: (await stats()) - runsBefore, asked: asked.length - askedBefore });
}
await client.close();
out("closed", {});
