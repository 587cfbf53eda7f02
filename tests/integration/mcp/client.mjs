// Drives an MCP stdio server (here: `tollgate wrap ... -- SERVER`) with the
// official TypeScript SDK client and prints one JSON line per step, which
// the shell tests assert on. Usage: node client.mjs SCENARIO -- CMD [ARG...]
// With MCP_URL set (and MCP_TOKEN, the bearer token), the same scenarios
// run over the Streamable HTTP transport against a server already
// listening there: node client.mjs SCENARIO [ARG...] --
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { writeFileSync } from "node:fs";

const argv = process.argv.slice(2);
const scenario = argv[0];
const sep = argv.indexOf("--");
const [command, ...args] = argv.slice(sep + 1);
const extra = argv.slice(1, sep); // scenario arguments

function out(step, value) {
  console.log(JSON.stringify({ step, ...value }));
}

// A call's outcome: a result (isError or not) or a JSON-RPC error.
async function call(client, name, args) {
  try {
    const r = await client.callTool({ name, arguments: args });
    const text = (r.content || []).map((c) => c.text || "").join("\n");
    return { isError: r.isError === true, text, structured: r.structuredContent ?? null };
  } catch (e) {
    return { rpcError: e.code ?? null, message: String(e.message) };
  }
}

const transport = process.env.MCP_URL
  ? new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN ?? ""}` } },
  })
  : new StdioClientTransport({
    command,
    args,
    env: process.env,
    stderr: "inherit",
  });
// The "elicit" scenario declares elicitation and answers from a script of
// decisions (one per elicitation/create), after a short pause so that
// progress notifications come while the call waits.
const elicitations = [];
let answers = [];
const client = new Client(
  { name: "tollgate-test", version: "1.0.0" },
  scenario.endsWith("elicit") ? { capabilities: { elicitation: {} } } : {},
);
if (scenario.endsWith("elicit")) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    elicitations.push({
      message: req.params.message,
      choices: req.params.requestedSchema?.properties?.decision?.enum ?? null,
    });
    await new Promise((res) => setTimeout(res, 1500));
    const decision = answers.shift() ?? "deny";
    if (decision === "decline" || decision === "cancel") return { action: decision };
    return { action: "accept", content: { decision } };
  });
}
// Every notifications/message the server sends (serve's event bus among them).
const logs = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
await client.connect(transport);
out("initialize", {
  server: client.getServerVersion()?.name ?? null,
});

if (scenario === "everything") {
  const tools = (await client.listTools()).tools.map((t) => t.name).sort();
  out("tools", { tools });
  out("echo", await call(client, "echo", { message: "hello through the gate" }));
  out("sum", await call(client, "get-sum", { a: 2, b: 3 }));
  out("hidden", await call(client, extra[0] || "get-env", {}));
  out("ping", { ok: JSON.stringify(await client.ping()) });
} else if (scenario === "rate") {
  out("first", await call(client, "echo", { message: "one" }));
  out("second", await call(client, "echo", { message: "two" }));
} else if (scenario === "fetch") {
  const tools = (await client.listTools()).tools.map((t) => t.name).sort();
  out("tools", { tools });
  for (const url of extra) out("fetch", { url, ...(await call(client, "fetch_url", { url })) });
} else if (scenario === "token") {
  // extra: URLs for call_api, in order.
  out("token", await call(client, "show_token", {}));
  for (const url of extra) out("call", { url, ...(await call(client, "call_api", { url })) });
} else if (scenario === "serve") {
  // extra: the origin's URL allowed, the one refused.
  const [allowedUrl, refusedUrl, allowedPattern] = extra;
  const tools = (await client.listTools()).tools;
  out("tools", {
    tools: tools.map((t) => t.name).sort(),
    schemas: tools.every((t) => t.inputSchema && t.inputSchema.type === "object"),
  });
  out("runtimes", await call(client, "list_runtimes", {}));
  out("python", await call(client, "execute_code", {
    language: "python",
    code: "import sys\nprint('out', 6 * 7)\nprint('oops', file=sys.stderr)\nsys.exit(3)",
  }));
  const curl = (url) => `curl -s -m 10 -o /dev/null -w '%{http_code}' ${url}; echo`;
  out("allowed", await call(client, "execute_code", {
    language: "sh", code: curl(allowedUrl), allowed_domains: [allowedPattern],
  }));
  out("refused", await call(client, "execute_code", {
    language: "sh", code: curl(refusedUrl), allowed_domains: [allowedPattern],
  }));
  out("timeout", await call(client, "execute_code", { language: "sh", code: "sleep 30", timeout: 1 }));
  out("oom", await call(client, "execute_code", {
    language: "sh", code: "dd if=/dev/zero of=/tmp/fill bs=1M count=128 2>/dev/null", limits: { ram_mb: 32 },
  }));
  out("badlang", await call(client, "execute_code", { language: "cobol", code: "x" }));
  out("unknown", await call(client, "no_such_tool", {}));
  let progress = 0;
  const r = await client.callTool(
    { name: "execute_code", arguments: { language: "sh", code: "sleep 3; echo done" } },
    undefined,
    { onprogress: () => progress++ },
  );
  out("progress", { progress, text: r.structuredContent?.stdout ?? null });
  out("valid", await call(client, "validate_code", { language: "python", code: "print(1)\n" }));
  out("invalid-python", await call(client, "validate_code", { language: "python", code: "x = 1\ndef f(:\n  pass\n" }));
  out("invalid-node", await call(client, "validate_code", { language: "node", code: "let a = 1;\nlet b = ;\n" }));
  out("invalid-sh", await call(client, "validate_code", { language: "sh", code: "echo hi\nif then\n" }));
  out("audit", await call(client, "audit_query", { decision: "deny", host: "denied.test" }));
  out("vault", await call(client, "vault_list", {}));
  out("stats", await call(client, "sandbox_stats", {}));
  out("secret", await call(client, "execute_code", {
    language: "sh", secrets: ["API_TOKEN"],
    code: 'echo "len=${#API_TOKEN}"; echo "tok=$API_TOKEN"; printf %s "$API_TOKEN" | base64',
  }));
  out("secret-unknown", await call(client, "execute_code", { language: "sh", code: "true", secrets: ["NO_SUCH_SECRET"] }));
  const art = await call(client, "execute_code", {
    language: "sh", out: true,
    code: 'echo hi > "$TOLLGATE_OUT/a.txt"; mkdir "$TOLLGATE_OUT/d"; printf "\\377\\376" > "$TOLLGATE_OUT/d/b.bin"',
  });
  out("art", art);
  const runId = art.structured?.run_id ?? "none";
  const list = await call(client, "get_artifacts", { run_id: runId });
  out("art-list", list);
  out("art-get", await call(client, "get_artifacts", { run_id: runId, name: "a.txt" }));
  out("art-bin", await call(client, "get_artifacts", { run_id: runId, name: "d/b.bin" }));
  out("art-verify", await call(client, "verify_artifact", { run_id: runId }));
  if (list.structured?.dir) writeFileSync(`${list.structured.dir}/a.txt`, "tampered\n");
  out("art-tampered", await call(client, "verify_artifact", { run_id: runId }));
  out("art-bad", await call(client, "get_artifacts", { run_id: "../../etc" }));
  out("art-escape", await call(client, "get_artifacts", { run_id: runId, name: "../../../etc/passwd" }));
  const sess = await call(client, "create_session", { allowed_domains: [allowedPattern] });
  out("sess", sess);
  const sid = sess.structured?.session_id ?? "none";
  // A file, a /tmp file and a background process: all there for the next call.
  out("sess-write", await call(client, "execute_code", {
    language: "sh", session_id: sid,
    code: `echo kept > /work/state.txt; echo tmp > /tmp/t; sleep 300 >/dev/null 2>&1 & echo $! > /tmp/bg; ${curl(allowedUrl)}`,
  }));
  out("sess-read", await call(client, "execute_code", {
    language: "sh", session_id: sid,
    code: 'cat /work/state.txt /tmp/t; kill -0 "$(cat /tmp/bg)" && echo alive',
  }));
  // A call's own allowed_domains hold for that call only.
  out("sess-call-domain", await call(client, "execute_code", {
    language: "sh", session_id: sid, code: curl(refusedUrl), allowed_domains: [`${new URL(refusedUrl).hostname}:${new URL(refusedUrl).port}`],
  }));
  out("sess-call-domain-gone", await call(client, "execute_code", {
    language: "sh", session_id: sid, code: curl(refusedUrl),
  }));
  out("sess-limits", await call(client, "execute_code", { language: "sh", session_id: sid, code: "true", limits: { pids: 10 } }));
  const sess2 = await call(client, "create_session", {});
  out("sess2-look", await call(client, "execute_code", {
    language: "sh", session_id: sess2.structured?.session_id ?? "none",
    code: "test ! -e /work/state.txt && test ! -e /tmp/t && ! grep -qs 'slee[p] 300' /proc/[0-9]*/cmdline && echo isolated",
  }));
  out("sess-fresh", await call(client, "execute_code", { language: "sh", code: "cat /work/state.txt" }));
  out("sess-list", await call(client, "list_sessions", {}));
  out("sess-term", await call(client, "terminate_session", { session_id: sid }));
  out("sess-gone", await call(client, "execute_code", { language: "sh", session_id: sid, code: "true" }));
  out("sess-list2", await call(client, "list_sessions", {}));
  out("secret-env", await call(client, "execute_code", { language: "sh", code: "true", secrets: ["X=env:HOME"] }));
  out("limits-bad", await call(client, "set_resource_limits", { pids: 99999999 }));
  out("limits", await call(client, "set_resource_limits", { timeout: 1, pids: 64 }));
  out("limits-applied", await call(client, "execute_code", { language: "sh", code: "sleep 20" }));
  out("limits-cleared", await call(client, "set_resource_limits", { timeout: null, pids: null }));
  const refused = new URL(refusedUrl);
  out("egress-bad", await call(client, "request_egress", { domain: "not a host!" }));
  out("egress", await call(client, "request_egress", { domain: `${refused.hostname}:${refused.port}` }));
  out("egress-applied", await call(client, "execute_code", { language: "sh", code: curl(refusedUrl) }));
  out("bus-logs", { logs: logs.filter((l) => typeof l.data === "object" && l.data !== null && l.data.event) });
} else if (scenario === "approve") {
  // extra: a URL an ask rule holds. Approve the first request, deny the second.
  const [url] = extra;
  const curl = `curl -s -m 20 -o /dev/null -w '%{http_code}' ${url}; echo`;
  for (const verdict of ["approve_egress", "deny_egress"]) {
    const running = call(client, "execute_code", { language: "sh", code: curl, timeout: 30 });
    let pending = [];
    for (let i = 0; i < 200 && pending.length === 0; i++) {
      const r = await call(client, "list_pending_approvals", {});
      pending = r.structured?.pending ?? [];
      if (pending.length === 0) await new Promise((res) => setTimeout(res, 100));
    }
    out(`pending-${verdict}`, { host: pending[0]?.host ?? null, port: pending[0]?.port ?? null });
    const decided = pending.length ? await call(client, verdict, { id: pending[0].id }) : null;
    const r = await running;
    out(verdict, { decided: decided?.text ?? null, stdout: r.structured?.stdout?.trim() ?? null });
  }
  out("stale", await call(client, "approve_egress", { id: 999999 }));
} else if (scenario === "flood") {
  // Three executions at once against --max-sandboxes 2 --max-queued 0: one is
  // refused at once.
  const calls = [0, 1, 2].map(() =>
    call(client, "execute_code", { language: "sh", code: "sleep 2; echo done", timeout: 30 }));
  const results = await Promise.all(calls);
  out("flood", {
    done: results.filter((r) => !r.isError && r.structured?.stdout?.trim() === "done").length,
    refused: results.filter((r) => r.isError && /^sandbox queue full/.test(r.text)).length,
  });
} else if (scenario === "held") {
  // extra: a URL an ask rule holds; someone else (the control socket) decides it.
  const [url] = extra;
  const curl = `curl -s -m 20 -o /dev/null -w '%{http_code}' ${url}; echo`;
  const r = await call(client, "execute_code", { language: "sh", code: curl, timeout: 30 });
  out("held", { stdout: r.structured?.stdout?.trim() ?? null });
} else if (scenario === "elicit") {
  // extra: a URL an ask rule holds. Each run: the answers to give, the
  // number of fetches its code makes.
  const [url] = extra;
  const fetch1 = `curl -s -m 20 -o /dev/null -w '%{http_code}' ${url}`;
  const runs = [
    ["once", ["once"], `${fetch1}; echo`],
    ["deny", ["deny"], `${fetch1}; echo`],
    ["decline", ["decline"], `${fetch1}; echo`],
    ["session", ["session"], `${fetch1}; echo -n ' '; ${fetch1}; echo`],
  ];
  for (const [name, script, code] of runs) {
    answers = [...script];
    const before = elicitations.length;
    const progress = [];
    const r = await client.callTool(
      { name: "execute_code", arguments: { language: "sh", code, timeout: 30 } },
      undefined,
      { onprogress: (p) => progress.push(p.message ?? ""), timeout: 60000 },
    );
    out(`elicit-${name}`, {
      stdout: r.structuredContent?.stdout?.trim() ?? null,
      asked: elicitations.length - before,
      message: elicitations[before]?.message ?? null,
      choices: elicitations[before]?.choices ?? null,
      waitingProgress: progress.some((m) => m.includes("waiting for approval")),
    });
  }
} else if (scenario === "wrap-elicit") {
  // extra: a URL an ask rule of wrap holds; the wrapped fetch server asks
  // for it twice: answered once, then deny.
  const [url] = extra;
  for (const decision of ["once", "deny"]) {
    answers = [decision];
    const before = elicitations.length;
    const r = await call(client, "fetch_url", { url });
    out(`wrap-elicit-${decision}`, {
      ...r, asked: elicitations.length - before, message: elicitations[before]?.message ?? null,
    });
  }
} else if (scenario === "vocab") {
  // One call of serve in a fresh sandbox, then a session with two calls:
  // test_job_vocabulary.sh compares the audit rows they leave with run's
  // and wrap's.
  out("fresh", await call(client, "execute_code", { language: "sh", code: "echo fresh" }));
  const s = await call(client, "create_session", {});
  out("session", s);
  const id = s.structured?.session_id;
  out("sess-1", await call(client, "execute_code", { language: "sh", code: "echo one", session_id: id }));
  out("sess-2", await call(client, "execute_code", { language: "sh", code: "exit 3", session_id: id }));
  out("terminated", await call(client, "terminate_session", { session_id: id }));
} else if (scenario === "tool") {
  // extra: a tool's name and its arguments as JSON.
  out("call", await call(client, extra[0], JSON.parse(extra[1] ?? "{}")));
} else if (scenario === "lang-code") {
  // extra: a language and code for execute_code, then (when not "") code
  // for validate_code, then "session": the code again, in a session
  // ("session-lang": one made with create_session's language).
  const [language, code, check, session] = extra;
  out("code", await call(client, "execute_code", { language, code }));
  if (check) out("validate", await call(client, "validate_code", { language, code: check }));
  if (session === "session" || session === "session-lang") {
    const s = await call(client, "create_session", session === "session-lang" ? { language } : {});
    out("session-create", s);
    const session_id = s.structured?.session_id ?? "none";
    out("session-code", await call(client, "execute_code", { language, code, session_id }));
    await call(client, "terminate_session", { session_id });
  }
} else if (scenario === "image-sessions") {
  // extra: a language with an image (serve --image), code that writes over
  // the image, code that reads it back. Two sessions in the image, a fresh
  // call, a session made after the first ended, a host session, and a call
  // in another language in the image's session.
  const [language, write, read] = extra;
  const a = await call(client, "create_session", { language });
  const b = await call(client, "create_session", { language });
  out("session-a", a);
  const sa = a.structured?.session_id ?? "none";
  const sb = b.structured?.session_id ?? "none";
  out("a-write", await call(client, "execute_code", { language, code: write, session_id: sa }));
  out("a-read", await call(client, "execute_code", { language, code: read, session_id: sa }));
  out("b-read", await call(client, "execute_code", { language, code: read, session_id: sb }));
  out("fresh-read", await call(client, "execute_code", { language, code: read }));
  out("a-end", await call(client, "terminate_session", { session_id: sa }));
  const c = await call(client, "create_session", { language });
  const sc = c.structured?.session_id ?? "none";
  out("c-read", await call(client, "execute_code", { language, code: read, session_id: sc }));
  out("c-other", await call(client, "execute_code", { language: "sh", code: "true", session_id: sc }));
  const h = await call(client, "create_session", {});
  const sh = h.structured?.session_id ?? "none";
  out("host-session", await call(client, "execute_code", { language, code: read, session_id: sh }));
  for (const id of [sb, sc, sh]) await call(client, "terminate_session", { session_id: id });
} else if (scenario === "code") {
  // extra: sh code, each run by execute_code in a fresh sandbox.
  for (const code of extra) out("code", await call(client, "execute_code", { language: "sh", code }));
} else if (scenario === "code-secrets") {
  // extra: vault names execute_code is asked to give a fresh sandbox.
  out("named", await call(client, "execute_code", { language: "sh", code: "true", secrets: extra }));
} else if (scenario === "gated-code") {
  // extra: a directory, then sh code run by execute_code in fresh sandboxes;
  // before call i (from 1) the client writes DIR/at.i and waits (at most
  // 60 s) for the test's DIR/go.i: the test changes the world in between.
  const { existsSync } = await import("node:fs");
  const [dir, ...codes] = extra;
  for (let i = 0; i < codes.length; i++) {
    if (i > 0) {
      writeFileSync(`${dir}/at.${i}`, "");
      for (let t = 0; t < 600 && !existsSync(`${dir}/go.${i}`); t++)
        await new Promise((res) => setTimeout(res, 100));
    }
    out("code", await call(client, "execute_code", { language: "sh", code: codes[i] }));
  }
} else if (scenario === "session-code") {
  // extra: sh code: the first run by execute_code in a fresh sandbox, then
  // each in one session; then validate_code of a syntax error on line 2.
  out("fresh", await call(client, "execute_code", { language: "sh", code: extra[0] ?? "true" }));
  const s = await call(client, "create_session", {});
  out("session", s);
  const session_id = s.structured?.session_id ?? "none";
  for (const code of extra) out("code", await call(client, "execute_code", { language: "sh", code, session_id }));
  out("validate", await call(client, "validate_code", { language: "sh", code: "true\nif then\n" }));
  out("terminate", await call(client, "terminate_session", { session_id }));
} else if (scenario === "http-elicit") {
  // Over HTTP (MCP_URL): what the stdio tests check, compactly. extra: the
  // origin's URL allowed, the one refused, the allowed pattern, a URL an
  // ask rule holds (answered once, then deny, by elicitation).
  const [allowedUrl, refusedUrl, allowedPattern, heldUrl] = extra;
  out("session", { id: transport.sessionId ?? null, version: transport.protocolVersion ?? null });
  const tools = (await client.listTools()).tools;
  out("tools", {
    tools: tools.map((t) => t.name).sort(),
    schemas: tools.every((t) => t.inputSchema && t.inputSchema.type === "object"),
  });
  const curl = (url) => `curl -s -m 10 -o /dev/null -w '%{http_code}' ${url}; echo`;
  out("allowed", await call(client, "execute_code", {
    language: "sh", code: curl(allowedUrl), allowed_domains: [allowedPattern],
  }));
  out("refused", await call(client, "execute_code", {
    language: "sh", code: curl(refusedUrl), allowed_domains: [allowedPattern],
  }));
  out("unknown", await call(client, "no_such_tool", {}));
  let progress = 0;
  const r = await client.callTool(
    { name: "execute_code", arguments: { language: "sh", code: "sleep 2; echo done" } },
    undefined,
    { onprogress: () => progress++ },
  );
  out("progress", { progress, text: r.structuredContent?.stdout ?? null });
  for (const decision of ["once", "deny"]) {
    answers = [decision];
    const before = elicitations.length;
    const waiting = [];
    const e = await client.callTool(
      { name: "execute_code", arguments: { language: "sh", code: curl(heldUrl), timeout: 30 } },
      undefined,
      { onprogress: (p) => waiting.push(p.message ?? ""), timeout: 60000 },
    );
    out(`elicit-${decision}`, {
      stdout: e.structuredContent?.stdout?.trim() ?? null,
      asked: elicitations.length - before,
      message: elicitations[before]?.message ?? null,
      waitingProgress: waiting.some((m) => m.includes("waiting for approval")),
    });
  }
  out("bus-logs", { logs: logs.filter((l) => typeof l.data === "object" && l.data !== null && l.data.event).length });
  await transport.terminateSession();
  out("terminated", { id: transport.sessionId ?? null });
} else {
  out("error", { message: `unknown scenario ${scenario}` });
}
await client.close();
out("closed", {});
