// `serve` against `run`: execute_code of print(1) in Python through the
// official MCP SDK client, one `tollgate serve` and one client connected throughout
// (an agent keeps its server), against `tollgate run --lang python --code 'print(1)'`
// of the same code, in interleaved rounds. A call is timed at the client, from
// callTool to its result; a run is the process's wall time, from fork to waitpid in
// bench_run_timer (node's own spawn of a process costs about 10 ms on this VM, which
// is node's and not run's: that figure, run as node sees it, is printed beside).
//
//   node tests/bench/bench_serve.mjs MCP_DIR ROUNDS TOLLGATE TIMER [FLAG...]
//
// TIMER: bench_run_timer.
// BENCH_SERVE_BWRAP=PATH (optional): bwrap, to time a bare `python3 -c 'print(1)'` under
// `bwrap --unshare-all` beside each run, in the same timer invocation.
// MCP_DIR: tests/integration/mcp (its node_modules has the SDK). FLAGs go to both
// serve and run (e.g. --audit FILE is given by bench_serve.sh, one file each).
import { spawn } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [mcpDir, roundsArg, tollgate, timer, ...flags] = process.argv.slice(2);
const rounds = Number(roundsArg);
if (!mcpDir || !(rounds >= 1) || !tollgate || !timer) {
  console.error("usage: node bench_serve.mjs MCP_DIR ROUNDS TOLLGATE TIMER [FLAG...]");
  process.exit(2);
}
const sdk = (p) => import(pathToFileURL(join(mcpDir, "node_modules/@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");

const serveAudit = process.env.BENCH_SERVE_AUDIT;
const runAudit = process.env.BENCH_RUN_AUDIT;
const code = "print(1)";

const transport = new StdioClientTransport({
  command: tollgate,
  args: ["serve", ...(serveAudit ? ["--audit", serveAudit] : []), ...flags],
  env: process.env,
  stderr: "inherit",
});
const client = new Client({ name: "tollgate-bench", version: "1.0.0" }, {});
await client.connect(transport);

async function serveOnce() {
  const t0 = performance.now();
  const r = await client.callTool({ name: "execute_code", arguments: { language: "python", code } },
    undefined, { timeout: 60000 });
  const ms = performance.now() - t0;
  const out = r.structuredContent?.stdout;
  if (r.isError || out !== "1\n") throw new Error(`execute_code: ${JSON.stringify(r).slice(0, 400)}`);
  return ms;
}

// stdout and the wall time as node sees it.
function spawnOnce(cmd, args) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const p = spawn(cmd, args, { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout.on("data", (d) => { out += d; });
    p.on("error", reject);
    p.on("close", (status) => {
      if (status !== 0) reject(new Error(`${cmd}: exit ${status}, stdout ${JSON.stringify(out)}`));
      else resolve({ out, ms: performance.now() - t0 });
    });
  });
}
const bwrap = process.env.BENCH_SERVE_BWRAP;
const bwrapArgs = ["--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
  "/usr/bin/python3", "-c", code];
const runArgs = ["run", ...(runAudit ? ["--audit", runAudit] : []), ...flags, "--lang", "python", "--code", code];
const t = { serve: [], run: [], runNode: [], bwrap: [] };
async function runOnce() {
  const { out, ms } = await spawnOnce(timer, ["-n", "1", "-w", "0", "run", tollgate, ...runArgs,
    ...(bwrap ? ["::", "bwrap", bwrap, ...bwrapArgs] : [])]);
  const m = /^run runs=1 failed=0 median_ms=([0-9.]+)/m.exec(out);
  const b = /^bwrap runs=1 failed=0 median_ms=([0-9.]+)/m.exec(out);
  if (!m || !out.startsWith(bwrap ? "1\n1\n" : "1\n") || (bwrap && !b)) throw new Error(`run: ${JSON.stringify(out)}`);
  return [Number(m[1]), ms, b ? Number(b[1]) : null];
}

// One of each first (page cache, python's first start), not counted.
await serveOnce();
await runOnce();
const pushRun = ([ms, nodeMs, bwrapMs]) => {
  t.run.push(ms);
  t.runNode.push(nodeMs);
  if (bwrapMs !== null) t.bwrap.push(bwrapMs);
};
for (let i = 0; i < rounds; i++) {
  // Alternate which goes first, so that neither always follows the other.
  if (i % 2 === 0) {
    t.serve.push(await serveOnce());
    pushRun(await runOnce());
  } else {
    pushRun(await runOnce());
    t.serve.push(await serveOnce());
  }
}
await client.close();

const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const pct = (v, q) => [...v].sort((a, b) => a - b)[Math.min(v.length - 1, Math.floor(v.length * q))];
const row = (name, v) => console.log(
  `${name.padEnd(44)} median ${median(v).toFixed(1).padStart(7)} ms  p90 ${pct(v, 0.9).toFixed(1).padStart(7)} ms  min ${Math.min(...v).toFixed(1).padStart(7)} ms`);
console.log(`${rounds} interleaved rounds`);
row("serve: execute_code print(1), at the client", t.serve);
row("run --lang python --code 'print(1)'", t.run);
row("  the same run, as node's spawn sees it", t.runNode);
if (bwrap) row("bwrap --unshare-all python3 -c 'print(1)'", t.bwrap);
// Medians; goal: serve/run <= 1.3.
console.log(`ratio serve/run: ${(median(t.serve) / median(t.run)).toFixed(2)}`);
if (bwrap) console.log(`ratio serve/bwrap: ${(median(t.serve) / median(t.bwrap)).toFixed(2)}`);
