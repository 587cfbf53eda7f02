// Drives `tollgate serve` with the official SDK client through many
// execute_code calls (language sh, code `true`) and counts the server's open
// fds at each checkpoint: one JSON line per checkpoint, nothing else.
// Usage: node fds.mjs CHECKPOINT... -- TOLLGATE serve ...
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { execFileSync } from "node:child_process";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const checkpoints = argv.slice(0, sep).map(Number);
const [command, ...args] = argv.slice(sep + 1);

const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "tollgate-fds-test", version: "1.0.0" }, {});
await client.connect(transport);
const pid = transport.pid;

// What the shell would count: `ls /proc/PID/fd | wc -l`.
function fdCount() {
  return Number(execFileSync("sh", ["-c", `ls /proc/${pid}/fd | wc -l`], { encoding: "utf8" }).trim());
}

const started = Date.now();
let calls = 0;
let failed = 0;
let firstError = null;
for (const at of checkpoints) {
  while (calls < at) {
    calls++;
    try {
      const r = await client.callTool(
        { name: "execute_code", arguments: { language: "sh", code: "true", timeout: 30 } },
        CallToolResultSchema,
        { timeout: 60000 },
      );
      if (r.isError === true || r.structuredContent?.exit_status !== 0) {
        failed++;
        firstError ??= (r.content || []).map((c) => c.text || "").join("\n");
      }
    } catch (e) {
      failed++;
      firstError ??= String(e.message);
    }
  }
  // A call's answer is written before the server frees the sandbox in the
  // same loop turn; a ping's answer comes only after that turn has ended.
  await client.ping();
  console.log(JSON.stringify({ calls, fds: fdCount(), failed, firstError, ms: Date.now() - started }));
}
await client.close();
