// Drives `tollgate serve --max-sandboxes 1 --max-queued 1` (queue) or
// `tollgate wrap` (wrap-stats) with the official SDK client, and asks the
// server's own control socket for its counters with `tollgate stats --pid`
// while the session is still open. One JSON line per step for the shell
// test. Usage: node queue.mjs SCENARIO [ARG...] -- TOLLGATE serve|wrap ...
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { execFileSync } from "node:child_process";

const argv = process.argv.slice(2);
const scenario = argv[0];
const sep = argv.indexOf("--");
const extra = argv.slice(1, sep);
const [command, ...args] = argv.slice(sep + 1);

function out(step, value) {
  console.log(JSON.stringify({ step, ...value }));
}

// `tollgate stats --pid PID` (command is the tollgate binary): JSON and table.
function stats(pid) {
  const run = (more) =>
    execFileSync(command, ["stats", "--pid", String(pid), ...more], {
      encoding: "utf8",
      timeout: 20000,
    });
  return { json: JSON.parse(run(["--json"]).split("\n")[0]), table: run([]) };
}

const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "tollgate-queue-test", version: "1.0.0" }, {});
await client.connect(transport);
const pid = transport.pid;

// One call; the order in which calls end is kept in `order`.
const order = [];
async function call(name, code, opts = {}) {
  const progress = [];
  try {
    const r = await client.callTool(
      { name: "execute_code", arguments: { language: "sh", code, timeout: 60 } },
      CallToolResultSchema,
      { onprogress: (p) => progress.push(p.message ?? ""), timeout: 120000, ...opts },
    );
    order.push(name);
    const text = (r.content || []).map((c) => c.text || "").join("\n");
    return { name, isError: r.isError === true, text, structured: r.structuredContent ?? null, progress };
  } catch (e) {
    order.push(name);
    return { name, rpcError: e.code ?? null, message: String(e.message), progress };
  }
}

if (scenario === "queue") {
  // Three at once against one slot and one place in the queue. Each prints
  // when it started and ended (the host's clock: no time namespace), so
  // the test sees whether two ever overlapped.
  const code = (n) => `echo start $(date +%s.%N); sleep 2; echo end $(date +%s.%N); echo done-${n}`;
  const results = await Promise.all([1, 2, 3].map((n) => call(`c${n}`, code(n))));
  out("three", { order: [...order], results });
  out("stats-after-three", stats(pid));

  // A queued call the client cancels: withdrawn, never run.
  order.length = 0;
  const ac = new AbortController();
  const first = call("running", "sleep 3; echo ran");
  let sawWaiting = false;
  const second = call("cancelled", "echo must-not-run", {
    signal: ac.signal,
    onprogress: (p) => {
      if (/waiting for a sandbox slot/.test(p.message ?? "") && !sawWaiting) {
        sawWaiting = true;
        ac.abort("the test cancels it");
      }
    },
  });
  const [r1, r2] = await Promise.all([first, second]);
  out("cancel", { sawWaiting, running: r1, cancelled: r2 });
  // The server notices a cancellation at its next tick (once a second):
  // sandbox_stats is asked after the running call ended, well after that.
  const st = await client.callTool({ name: "sandbox_stats", arguments: {} });
  out("sandbox-stats", { structured: st.structuredContent ?? null });
  out("stats-after-cancel", stats(pid));
} else if (scenario === "wrap-stats") {
  // extra: a URL the wrapped fetch server fetches through the gate.
  const [url] = extra;
  const r = await client.callTool({ name: "fetch_url", arguments: { url } });
  out("fetch", { isError: r.isError === true, text: (r.content || []).map((c) => c.text || "").join("\n") });
  out("stats", stats(pid));
}
await client.close();
