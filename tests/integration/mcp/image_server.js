// A small MCP stdio server in plain JavaScript, node's own modules only, that
// the image tests put into a Node image as its Entrypoint (oci_layout.py
// node-mcp). Newline-delimited JSON-RPC: initialize, ping, tools/list and
// tools/call. Tools: fetch_url (GET through the proxy HTTP_PROXY names, as
// an absolute-form request to it, since node's fetch does not read
// HTTP_PROXY: "STATUS BODY", or an error result) and where (the working
// directory, the image's IMAGE_GREETING, node's version and which of the
// paths given, the host's node modules, it can see: "none" when none).
"use strict";
const fs = require("fs");
const http = require("http");
const readline = require("readline");

const TOOLS = [
  {
    name: "fetch_url", description: "GET a URL",
    inputSchema: { type: "object", properties: { url: { type: "string" } }, required: ["url"] },
  },
  {
    name: "where", description: "where the server runs",
    inputSchema: { type: "object", properties: { paths: { type: "array", items: { type: "string" } } } },
  },
];

function text(s, isError = false) {
  return { content: [{ type: "text", text: s }], isError };
}

function fetchUrl(url) {
  return new Promise((resolve) => {
    const proxy = process.env.HTTP_PROXY || process.env.http_proxy;
    let target;
    try {
      target = new URL(url);
    } catch (e) {
      resolve(text(`failed: ${e.message}`, true));
      return;
    }
    const via = proxy ? new URL(proxy) : target;
    const req = http.request({
      host: via.hostname, port: via.port || 80, method: "GET",
      path: proxy ? target.href : target.pathname + target.search,
      headers: { Host: target.host }, timeout: 20000,
    }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => { body += d; });
      res.on("end", () => {
        const line = `${res.statusCode} ${body.trim()}`;
        resolve(text(res.statusCode === 200 ? line : `failed: ${line}`, res.statusCode !== 200));
      });
    });
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", (e) => resolve(text(`failed: ${e.message}`, true)));
    req.end();
  });
}

async function call(name, args) {
  if (name === "fetch_url") return fetchUrl(String(args.url ?? ""));
  if (name === "where") {
    const seen = (Array.isArray(args.paths) ? args.paths : []).filter((p) => fs.existsSync(String(p)));
    return text([process.cwd(), process.env.IMAGE_GREETING ?? "-", process.version,
      seen.join(",") || "none"].join(" "));
  }
  return null;
}

function reply(msg) {
  process.stdout.write(JSON.stringify(msg) + "\n");
}

async function handle(msg) {
  const params = msg.params || {};
  let result = null;
  let error = null;
  if (msg.method === "initialize") {
    result = {
      protocolVersion: params.protocolVersion || "2025-06-18",
      capabilities: { tools: {} },
      serverInfo: { name: "node-image-server", version: "1.0.0" },
    };
  } else if (msg.method === "ping") {
    result = {};
  } else if (msg.method === "tools/list") {
    result = { tools: TOOLS };
  } else if (msg.method === "tools/call") {
    result = await call(params.name, params.arguments || {});
    if (result === null) error = { code: -32602, message: `Unknown tool: ${params.name}` };
  } else {
    error = { code: -32601, message: "Method not found" };
  }
  reply(error ? { jsonrpc: "2.0", id: msg.id, error } : { jsonrpc: "2.0", id: msg.id, result });
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg === null || typeof msg !== "object" || !("id" in msg) || !("method" in msg)) return;
  handle(msg);
});
