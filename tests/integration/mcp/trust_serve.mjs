// The model's side of test_trust_serve.sh: the official SDK client drives
// `tollgate serve` and tries to widen what the operator allows. Prints one
// JSON line per step. Usage: node trust_serve.mjs MODE URL -- CMD [ARG...]
// MODE: plain (no elicitation: a person decides through the control socket),
// elicit (the client elicits and answers deny, then once), list (tools only).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const [mode, url] = argv.slice(0, sep);
const [command, ...args] = argv.slice(sep + 1);
const target = new URL(url);
const pattern = `${target.hostname}:${target.port}`;

function out(step, value) {
  console.log(JSON.stringify({ step, ...value }));
}

async function call(client, name, a) {
  try {
    const r = await client.callTool({ name, arguments: a }, undefined, { timeout: 120000 });
    const text = (r.content || []).map((c) => c.text || "").join("\n");
    return { isError: r.isError === true, text, structured: r.structuredContent ?? null };
  } catch (e) {
    return { rpcError: e.code ?? null, message: String(e.message) };
  }
}

const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client(
  { name: "tollgate-trust-serve", version: "1.0.0" },
  mode === "elicit" ? { capabilities: { elicitation: {} } } : {},
);
const answers = ["deny", "once"];
const asked = [];
if (mode === "elicit") {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params.message);
    return { action: "accept", content: { decision: answers.shift() ?? "deny" } };
  });
}
await client.connect(transport);
out("tools", { tools: (await client.listTools()).tools.map((t) => t.name).sort() });
const fetch = `curl -s -m 100 -o /dev/null -w '%{http_code}' ${url}; echo`;

if (mode === "plain") {
  for (const [name, d] of [["star", "*"], ["star-port", "*:443"], ["tld", "*.com"],
    ["psl", "*.co.uk"], ["bare-suffix", "com"], ["deny-rule", "evil.test"],
    ["deny-wild", "*.evil.test"], ["addr", "10.0.0.1"], ["cidr", "0.0.0.0/0"]]) {
    out(`refuse-${name}`, await call(client, "execute_code", {
      language: "sh", code: "echo ran", allowed_domains: [d],
    }));
  }
  out("refuse-egress", await call(client, "request_egress", { domain: "*.com" }));
  out("refuse-session", await call(client, "create_session", { allowed_domains: ["*"] }));
  out("hidden-approve", await call(client, "approve_egress", { id: 1 }));
  out("hidden-vault", await call(client, "vault_list", {}));
  out("ram-over", await call(client, "execute_code", {
    language: "sh", code: "echo ran", limits: { ram_mb: 4096 },
  }));
  out("set-over", await call(client, "set_resource_limits", { ram_mb: 4096 }));
  out("timeout-over", await call(client, "execute_code", { language: "sh", code: "echo ran", timeout: 600 }));
  out("defaults", await call(client, "execute_code", {
    language: "python",
    code: "import resource as r\nprint(r.getrlimit(r.RLIMIT_DATA)[0], r.getrlimit(r.RLIMIT_NPROC)[0])",
  }));
  out("stats", await call(client, "sandbox_stats", {}));
  // The model names the origin: the fetch waits for a person (the test's
  // approver, through the control socket).
  out("held", await call(client, "execute_code", {
    language: "sh", code: fetch, allowed_domains: [pattern], timeout: 120,
  }));
  out("egress", await call(client, "request_egress", { domain: pattern }));
} else if (mode === "elicit") {
  for (const name of ["deny", "once"]) {
    const before = asked.length;
    const r = await call(client, "execute_code", {
      language: "sh", code: fetch, allowed_domains: [pattern], timeout: 120,
    });
    out(`elicit-${name}`, { ...r, asked: asked.length - before, message: asked[before] ?? null });
  }
}
await client.close();
out("closed", {});
