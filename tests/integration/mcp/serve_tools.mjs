// install_package, bridge_data and inspect_state of `tollgate serve`, driven
// by the official TypeScript SDK client; one JSON line per step, asserted on
// by test_serve_tools.sh. Usage:
//   node serve_tools.mjs PYPI_HOSTPORT NPM_HOSTPORT SECRET -- CMD [ARG...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const [command, ...args] = argv.slice(sep + 1);
const [pypi, npmHost, secret] = argv.slice(0, sep);

function out(step, value) {
  console.log(JSON.stringify({ step, t: Date.now(), ...value }));
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
const client = new Client({ name: "tollgate-test", version: "1.0.0" }, {});
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
out("tools", { tools });

const a = (await call(client, "create_session", {})).structured?.session_id ?? "none";
const b = (await call(client, "create_session", {})).structured?.session_id ?? "none";
out("sessions", { a, b });
const run = (session_id, language, code, extra = {}) =>
  call(client, "execute_code", { session_id, language, code, ...extra });

// ---- install_package -----------------------------------------------------------------
out("pip", await call(client, "install_package", { manager: "pip", packages: ["tgpkg==1.0.0"], session_id: a }));
out("pip-import", await run(a, "python", "import tgpkg\nprint(tgpkg.VALUE)"));
// The index is the install's only: a later call of the session is refused.
out("pip-after", await run(a, "sh",
  `curl -s -m 5 -o /dev/null -w '%{http_code}' http://${pypi}/simple/tgpkg/; echo`));
out("npm", await call(client, "install_package", { manager: "npm", packages: ["tgnpm@1.0.0"], session_id: b }));
out("npm-require", await run(b, "node", "console.log(require('tgnpm').value)"));
out("npm-after", await run(b, "sh",
  `curl -s -m 5 -o /dev/null -w '%{http_code}' http://${npmHost}/tgnpm; echo`));
for (const [label, manager, packages] of [
  ["url", "pip", [`http://${pypi}/files/tgpkg-1.0.0-py3-none-any.whl`]],
  ["path", "pip", ["./tgpkg"]],
  ["abspath", "pip", ["/tmp/tgpkg.whl"]],
  ["reqfile", "pip", ["-r", "requirements.txt"]],
  ["shell", "pip", ["x; rm -rf /"]],
  ["range", "pip", ["tgpkg>=1.0"]],
  ["npm-git", "npm", ["user/repo"]],
  ["npm-url", "npm", ["https://example.com/x.tgz"]],
  ["npm-range", "npm", ["tgnpm@^1.0.0"]],
  ["npm-option", "npm", ["--registry=http://elsewhere"]],
]) {
  out(`refuse-${label}`, await call(client, "install_package", { manager, packages, session_id: a }));
}
out("refuse-manager", await call(client, "install_package", { manager: "gem", packages: ["x"], session_id: a }));
out("refuse-nosession", await call(client, "install_package", { manager: "pip", packages: ["x"], session_id: "sess-nope" }));

// ---- bridge_data ----------------------------------------------------------------------
const payload = { from: "python", numbers: [1, 2, 3], nested: { ok: true }, marker: "bridge-value-7f3a" };
out("py-write", await run(a, "python",
  `import json\njson.dump(json.loads(${JSON.stringify(JSON.stringify(payload))}), open('/work/result.json', 'w'))\n` +
  "import os\nos.makedirs('/work/sub', exist_ok=True)\nos.symlink('/etc/hostname', '/work/link.json')\n" +
  "os.symlink('/etc', '/work/etcdir')\nopen('/work/big.json', 'w').write('\"' + 'x' * (1024 * 1024 + 10) + '\"')\n" +
  "open('/work/notjson.txt', 'w').write('not json {')\nprint('written')"));
out("bridge-file", await call(client, "bridge_data", { from_session: a, to_session: b, key: "result", file: "result.json" }));
out("node-read", await run(b, "node",
  "const d = JSON.parse(require('fs').readFileSync('/work/.bridge/result.json', 'utf8'));" +
  "console.log(d.from, d.numbers.join('+'), d.nested.ok)"));
out("bridge-value", await call(client, "bridge_data", { from_session: b, to_session: a, key: "v-1", value: { n: 42 } }));
out("py-read", await run(a, "python", "import json\nprint(json.load(open('/work/.bridge/v-1.json'))['n'])"));
out("bridge-oversize", await call(client, "bridge_data", { from_session: a, to_session: b, key: "big", value: "y".repeat(1024 * 1024 + 1) }));
out("bridge-oversize-file", await call(client, "bridge_data", { from_session: a, to_session: b, key: "big", file: "big.json" }));
out("bridge-badkey", await call(client, "bridge_data", { from_session: a, to_session: b, key: "../x", value: 1 }));
out("bridge-unknown", await call(client, "bridge_data", { from_session: a, to_session: "sess-nope", key: "k", value: 1 }));
out("bridge-dotdot", await call(client, "bridge_data", { from_session: a, to_session: b, key: "k", file: "../etc/passwd" }));
out("bridge-abs", await call(client, "bridge_data", { from_session: a, to_session: b, key: "k", file: "/etc/passwd" }));
out("bridge-symlink", await call(client, "bridge_data", { from_session: a, to_session: b, key: "k", file: "link.json" }));
out("bridge-symdir", await call(client, "bridge_data", { from_session: a, to_session: b, key: "k", file: "etcdir/hostname" }));
out("bridge-notjson", await call(client, "bridge_data", { from_session: a, to_session: b, key: "k", file: "notjson.txt" }));
out("bridge-both", await call(client, "bridge_data", { from_session: a, to_session: b, key: "k", value: 1, file: "result.json" }));

// ---- inspect_state --------------------------------------------------------------------
out("bg", await run(a, "python",
  "import os, subprocess\n" +
  "subprocess.Popen(['python3', '-c', 'import time; time.sleep(300)', os.environ['API_TOKEN']],\n" +
  "  start_new_session=True,\n" +
  "  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n" +
  "open('/work/state.txt', 'w').write('12345')\nprint('started')",
  { secrets: ["API_TOKEN"] }));
const inspect = await call(client, "inspect_state", { session_id: a });
out("inspect", { ...inspect, leaked: JSON.stringify(inspect).includes(secret) });
out("inspect-unknown", await call(client, "inspect_state", { session_id: "sess-nope" }));

// ---- the audit --------------------------------------------------------------------------
const audit = await call(client, "audit_query", { kind: "bridge", limit: 50 });
out("audit-bridge", { ...audit, leaked: JSON.stringify(audit).includes("bridge-value-7f3a") });
const sandboxA = inspect.structured?.sandbox_id ?? "none";
out("audit-install", await call(client, "audit_query", { kind: "connection", sandbox_id: sandboxA, limit: 50 }));
out("audit-refused", await call(client, "audit_query", { decision: "deny", sandbox_id: sandboxA, limit: 50 }));
await client.close();
