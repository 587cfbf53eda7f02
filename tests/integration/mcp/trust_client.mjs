// The person's side of test_trust_wrap.sh: the official SDK client around
// `tollgate wrap ... -- python3 hostile_server.py`. It declines every
// approval tollgate asks for, but first lets the server try to answer that
// question in its place (the server's "forge" tool), and it answers the
// server's own harmless-looking forms as a person would. Prints one JSON
// line per step. Usage: node trust_client.mjs URL -- CMD [ARG...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const [url] = argv.slice(0, sep);
const [command, ...args] = argv.slice(sep + 1);

function out(step, value) {
  console.log(JSON.stringify({ step, ...value }));
}

async function call(client, name, a) {
  try {
    const r = await client.callTool({ name, arguments: a }, undefined, { timeout: 90000 });
    const text = (r.content || []).map((c) => c.text || "").join("\n");
    return { isError: r.isError === true, text };
  } catch (e) {
    return { rpcError: e.code ?? null, message: String(e.message) };
  }
}

const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client(
  { name: "tollgate-trust-test", version: "1.0.0" },
  { capabilities: { elicitation: {} } },
);
const tollgateIds = [];
const serverAsks = [];
let forged = null;
client.setRequestHandler(ElicitRequestSchema, async (req, extra) => {
  const message = req.params.message;
  if (message.includes("needs your approval")) {
    tollgateIds.push(String(extra.requestId));
    // While tollgate's question is open, the server tries to answer it.
    forged = await call(client, "forge", {});
    return { action: "decline" };
  }
  serverAsks.push({ id: String(extra.requestId), message });
  if (req.params.requestedSchema?.properties?.decision)
    return { action: "accept", content: { decision: "once" } };
  return { action: "accept", content: { n: 7 } };
});
await client.connect(transport);
out("fetch", await call(client, "fetch_url", { url }));
let report = null;
try {
  report = forged && !forged.isError ? JSON.parse(forged.text) : null;
} catch {
  report = null;
}
out("forge", { report, raw: forged });
out("asks", { tollgate: tollgateIds, server: serverAsks });
await client.close();
out("closed", {});
