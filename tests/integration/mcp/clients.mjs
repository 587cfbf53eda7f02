// test_clients.sh's serve client: the official SDK client calls
// execute_code once per step of a JSON file ([{step, language, code}]) and
// prints one JSON line per step: the call's structured result, or its error.
// Usage: node clients.mjs STEPS.json -- CMD [ARG...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { readFileSync } from "node:fs";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const steps = JSON.parse(readFileSync(argv[0], "utf8"));
const [command, ...args] = argv.slice(sep + 1);

const client = new Client({ name: "tollgate-test-clients", version: "1.0.0" }, {});
await client.connect(new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" }));
console.log(JSON.stringify({ step: "initialize", server: client.getServerVersion() ?? null }));
for (const s of steps) {
  try {
    const r = await client.callTool(
      { name: s.tool ?? "execute_code", arguments: s.arguments ?? { language: s.language, code: s.code, timeout: 60 } },
      undefined,
      { timeout: 90000 },
    );
    console.log(JSON.stringify({ step: s.step, isError: r.isError === true, structured: r.structuredContent ?? null }));
  } catch (e) {
    console.log(JSON.stringify({ step: s.step, rpcError: e.code ?? null, message: String(e.message) }));
  }
}
await client.close();
