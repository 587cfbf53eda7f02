// `tollgate wrap --listen` driven by the official TypeScript SDK client over
// Streamable HTTP: two sessions at once (each its own sandboxed server), the
// wrapped server-everything's echo and get-sum, the tool lists, a DELETE.
// One JSON line per step, asserted on by test_wrap_http.sh. Usage:
//   MCP_URL=... MCP_TOKEN=... node wrap_http.mjs PGREP_PATTERN
import { execFileSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const pattern = process.argv[2];

function out(step, value) {
  console.log(JSON.stringify({ step, ...value }));
}

// The host's pids of the wrapped servers (each sandbox's node).
function pids() {
  try {
    return execFileSync("pgrep", ["-f", pattern], { encoding: "utf8" }).trim().split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

async function connect(name) {
  const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN ?? ""}` } },
  });
  const client = new Client({ name, version: "1.0.0" }, {});
  await client.connect(transport);
  return { client, transport };
}

async function call(client, name, args) {
  try {
    const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });
    return { isError: r.isError === true, text: (r.content || []).map((c) => c.text || "").join("\n") };
  } catch (e) {
    return { rpcError: e.code ?? null, message: String(e.message) };
  }
}

const before = pids();
const a = await connect("client-a");
const b = await connect("client-b");
out("sessions", {
  a: a.transport.sessionId ?? null,
  b: b.transport.sessionId ?? null,
  server: a.client.getServerVersion()?.name ?? null,
});
out("pids", { before, both: pids() });
out("tools", { tools: (await a.client.listTools()).tools.map((t) => t.name).sort() });
out("echo", await call(a.client, "echo", { message: "hello over http" }));
out("sum", await call(b.client, "get-sum", { a: 2, b: 40 }));
out("hidden", await call(a.client, "get-env", {}));
// Ending session a ends its server; b's keeps running (bounded wait).
await a.transport.terminateSession();
let after = pids();
for (let i = 0; i < 100 && after.length >= 2; i++) {
  await new Promise((r) => setTimeout(r, 100));
  after = pids();
}
out("deleted", { after });
out("echo-b", await call(b.client, "echo", { message: "b still here" }));
await b.transport.terminateSession();
await b.client.close();
await a.client.close();
out("done", {});
