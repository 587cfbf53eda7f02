// Drives `tollgate serve --host-access` with the official SDK client through
// a script of tool calls, one JSON line out per step, for test_serve_host.sh.
// Usage: node host.mjs STEPS.json -- CMD [ARG...]
// STEPS: [{"step": NAME, "tool": TOOL, "args": {...}}]; "$SESSION" in a
// string argument is the session_id of the last create_session step.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { readFileSync } from "node:fs";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const steps = JSON.parse(readFileSync(argv[0], "utf8"));
const [command, ...args] = argv.slice(sep + 1);

const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
// ELICIT=once|session|deny: the client declares elicitation and answers so,
// keeping what it was asked for the last line.
const elicit = process.env.ELICIT;
const asked = [];
const client = new Client({ name: "tollgate-host-test", version: "1.0.0" },
  elicit ? { capabilities: { elicitation: {} } } : {});
if (elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push({ message: req.params.message, choices: req.params.requestedSchema?.properties?.decision?.enum ?? null });
    return { action: "accept", content: { decision: elicit } };
  });
}
await client.connect(transport);
const tools = (await client.listTools()).tools;
console.log(JSON.stringify({
  step: "tools",
  tools: tools.map((t) => t.name).sort(),
  schemas: Object.fromEntries(tools.filter((t) => t.name.startsWith("host_") || t.name.endsWith("host_access"))
    .map((t) => [t.name, { input: !!t.inputSchema, output: !!t.outputSchema }])),
}));

let session = null;
const fill = (v) => typeof v === "string" ? v.replaceAll("$SESSION", session ?? "")
  : Array.isArray(v) ? v.map(fill)
  : v && typeof v === "object" ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fill(x)]))
  : v;

for (const s of steps) {
  let r;
  try {
    // Approvals wait up to the server's --ask-timeout: the SDK's own default suffices.
    const res = await client.callTool({ name: s.tool, arguments: fill(s.args ?? {}) });
    const text = (res.content || []).map((c) => c.text || "").join("\n");
    r = { isError: res.isError === true, text, structured: res.structuredContent ?? null };
  } catch (e) {
    r = { rpcError: e.code ?? null, message: String(e.message) };
  }
  if (s.tool === "create_session" && r.structured) session = r.structured.session_id;
  console.log(JSON.stringify({ step: s.step, ...r }));
}
if (elicit) console.log(JSON.stringify({ step: "elicitations", asked }));
await client.close();
