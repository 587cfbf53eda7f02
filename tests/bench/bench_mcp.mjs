// What a tool call pays for going through `tollgate wrap`: server-everything's `echo`
// with a 100 B and a 100 KiB message, called by the official MCP SDK client on the
// same server directly and through wrap, the two sessions open side by side and
// their calls interleaved (the order swaps every call, so load on a shared machine
// hits both alike). A call is timed at the client, from callTool to its result.
//
//   node tests/bench/bench_mcp.mjs MCP_DIR CALLS SECONDS stdio TOLLGATE AUDIT [BEFORE AUDIT2]
//   node tests/bench/bench_mcp.mjs MCP_DIR CALLS SECONDS http DIRECT_URL WRAP_URL TOKEN_FILE \
//       [BEFORE_URL TOKEN_FILE2]
//
// MCP_DIR: tests/integration/mcp (its node_modules has the SDK and the server).
// CALLS: calls of each size on each path; SECONDS caps each size's loop (at least 20
// calls each). stdio: the client starts both servers itself, the wrapped one as
// `tollgate wrap --audit AUDIT --workdir MCP_DIR -- node /work/node_modules/...`
// (the sandbox binds the work directory at /work). http: both already listen;
// wrap's bearer token is read from TOKEN_FILE. With the bracketed arguments, a third
// path: the wrap of a before build (tollgate binary BEFORE, or listening at BEFORE_URL),
// interleaved with the other two, and `ratio wrap/wrap-before SIZE` besides.
// Prints per path and size the median, p90, p99 and min in microseconds, then
// `ratio wrap/direct SIZE: R` (medians) and `ratio added_us wrap SIZE: U` (median
// difference), prefixed by "http " for the HTTP pair.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [mcpDir, callsArg, secondsArg, mode, ...rest] = process.argv.slice(2);
const calls = Number(callsArg);
const seconds = Number(secondsArg);
if (!mcpDir || !(calls >= 1) || !(seconds > 0) || !["stdio", "http"].includes(mode)) {
  console.error("usage: node bench_mcp.mjs MCP_DIR CALLS SECONDS stdio|http ...");
  process.exit(2);
}
const sdk = (p) => import(pathToFileURL(join(mcpDir, "node_modules/@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const everything = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";

async function connect(transport) {
  const client = new Client({ name: "tollgate-bench-mcp", version: "1.0.0" }, {});
  await client.connect(transport);
  return client;
}

// The paths, each a client: "direct", "wrap" and, with a before build given,
// "wrap-before" (the same wrap from that build, in the same run).
const paths = [];
let prefix;
if (mode === "stdio") {
  const [tollgate, audit, beforeTollgate, beforeAudit] = rest;
  const { StdioClientTransport } = await sdk("client/stdio.js");
  const wrapOf = (bin, db) => new StdioClientTransport({
    command: bin,
    args: ["wrap", "--audit", db, "--workdir", mcpDir, "--", "node", `/work/${everything}`, "stdio"],
    env: process.env, stderr: "inherit",
  });
  paths.push(["direct", await connect(new StdioClientTransport({
    command: "node", args: [join(mcpDir, everything), "stdio"], env: process.env, stderr: "ignore",
  }))]);
  paths.push(["wrap", await connect(wrapOf(tollgate, audit))]);
  if (beforeTollgate) paths.push(["wrap-before", await connect(wrapOf(beforeTollgate, beforeAudit))]);
  prefix = "";
} else {
  const [directUrl, wrapUrl, tokenFile, beforeUrl, beforeTokenFile] = rest;
  const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
  const wrapAt = (url, file) => new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${readFileSync(file, "utf8").trim()}` } },
  });
  paths.push(["direct", await connect(new StreamableHTTPClientTransport(new URL(directUrl)))]);
  paths.push(["wrap", await connect(wrapAt(wrapUrl, tokenFile))]);
  if (beforeUrl) paths.push(["wrap-before", await connect(wrapAt(beforeUrl, beforeTokenFile))]);
  prefix = "http ";
}

// MCP_SIZES (e.g. "100B"): only those sizes, for a profile of one.
const only = process.env.MCP_SIZES?.split(/[ ,]+/);
const sizes = [["100B", 100], ["100KiB", 100 * 1024]].filter(([label]) => !only || only.includes(label));
async function call(client, message) {
  const t0 = performance.now();
  const r = await client.callTool({ name: "echo", arguments: { message } }, undefined, { timeout: 30000 });
  const us = (performance.now() - t0) * 1000;
  const text = r.content?.[0]?.text;
  if (r.isError || text !== `Echo: ${message}`) {
    throw new Error(`echo: ${JSON.stringify(r).slice(0, 300)}`);
  }
  return us;
}

const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const pct = (v, q) => [...v].sort((a, b) => a - b)[Math.min(v.length - 1, Math.floor(v.length * q))];
const fmt = (x) => x.toFixed(0).padStart(8);
const row = (name, v) => console.log(`${name.padEnd(28)} n=${String(v.length).padEnd(5)} median ${fmt(median(v))} us` +
  `  p90 ${fmt(pct(v, 0.9))} us  p99 ${fmt(pct(v, 0.99))} us  min ${fmt(Math.min(...v))} us`);

const ratios = [];
for (const [label, n] of sizes) {
  // A message of n bytes of printable ASCII (JSON carries it as is).
  const message = "x".repeat(n);
  // Warm every path (JIT, page cache, the sandbox's first calls); not counted.
  for (let i = 0; i < 20; i++) for (const [, c] of paths) await call(c, message);
  const t = Object.fromEntries(paths.map(([name]) => [name, []]));
  const until = performance.now() + seconds * 1000;
  for (let i = 0; i < calls && (i < 20 || performance.now() < until); i++) {
    // Each call in turn starts the round, so load hits every path alike.
    for (let k = 0; k < paths.length; k++) {
      const [name, c] = paths[(i + k) % paths.length];
      t[name].push(await call(c, message));
    }
  }
  for (const [name] of paths) row(`${prefix}${name.padEnd(11)} echo ${label}`, t[name]);
  for (const [name] of paths.slice(1)) {
    ratios.push(`ratio ${prefix}${name}/direct ${label}: ${(median(t[name]) / median(t.direct)).toFixed(2)}`);
    ratios.push(`ratio added_us ${prefix}${name} ${label}: ${(median(t[name]) - median(t.direct)).toFixed(0)}`);
    ratios.push(`ratio ${prefix}${name}/direct p99 ${label}: ${(pct(t[name], 0.99) / pct(t.direct, 0.99)).toFixed(2)}`);
  }
  if (t["wrap-before"]) {
    ratios.push(`ratio ${prefix}wrap/wrap-before ${label}: ${(median(t.wrap) / median(t["wrap-before"])).toFixed(2)}`);
  }
}
for (const [, c] of paths) await c.close();
for (const r of ratios) console.log(r);
