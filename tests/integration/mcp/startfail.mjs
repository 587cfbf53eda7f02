// Starts an MCP stdio server (`tollgate wrap` or `serve` with flags that
// keep it from starting) with the official TypeScript SDK client and prints
// what the client sees when it connects: the initialize error's code and
// message, as an application would show them.
// Usage: node startfail.mjs -- CMD [ARG...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";

const argv = process.argv.slice(2);
const [command, ...args] = argv.slice(argv.indexOf("--") + 1);
// The minimal environment clients pass (the SDK's default) and, as
// docs/mcp.md's examples do, TOLLGATE_HOME; stderr hidden, as clients do.
const env = { ...getDefaultEnvironment(), TOLLGATE_HOME: process.env.TOLLGATE_HOME };
const transport = new StdioClientTransport({ command, args, env, stderr: "ignore" });
const client = new Client({ name: "tollgate-test", version: "1.0.0" }, {});
const timer = setTimeout(() => {
  console.log(JSON.stringify({ step: "connect", error: "no answer in 30 s" }));
  process.exit(3);
}, 30000);
try {
  await client.connect(transport);
  console.log(JSON.stringify({ step: "connect", ok: true }));
} catch (e) {
  console.log(JSON.stringify({ step: "connect", code: e.code ?? null, error: String(e.message) }));
}
clearTimeout(timer);
await client.close().catch(() => {});
process.exit(0);
