// Drives `tollgate serve` with the official TypeScript SDK client through
// calls whose proposed domains nobody answers: one the ask timeout refuses
// while the code waits, one the code stops waiting for first (its call's
// timeout), one that still waits when the call ends (a name looked up while
// held, the lookup given up on). Prints one JSON line per call.
// Usage: node unanswered.mjs PORT -- CMD [ARG...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const [port] = argv.slice(0, sep);
const [command, ...args] = argv.slice(sep + 1);
const client = new Client({ name: "tollgate-test", version: "1.0.0" }, {});
await client.connect(new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" }));

async function run(step, args) {
  const r = await client.callTool({ name: "execute_code", arguments: { language: "sh", ...args } });
  console.log(JSON.stringify({ step, isError: r.isError === true, structured: r.structuredContent ?? null,
    text: (r.content || []).map((c) => c.text || "").join("\n") }));
}
const curl = (host, secs) => `curl -s -m ${secs} -o /dev/null -w '%{http_code}' http://${host}:${port}/; echo`;
// Held at connect, for longer than --ask-timeout.
await run("timed-out", { code: curl("slow.test", 30), allowed_domains: [`slow.test:${port}`], timeout: 30 });
// Held at connect; the call's timeout ends the code first.
await run("abandoned", { code: curl("late.test", 30), allowed_domains: [`late.test:${port}`], timeout: 2 });
// Held when the name is looked up (any port); the lookup is given up on.
await run("waiting", {
  code: "RES_OPTIONS='timeout:1 attempts:1' getent hosts dns.test >/dev/null || echo gave-up",
  allowed_domains: ["dns.test"], timeout: 30,
});
await client.close();
