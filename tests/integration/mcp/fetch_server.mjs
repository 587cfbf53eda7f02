// A small MCP stdio server of the tests' own with one tool, fetch_url, to
// show a wrapped server's egress passing through tollgate's gate. It sends
// plain HTTP through the proxy named by HTTP_PROXY (absolute-form request),
// as a proxy-aware client does: Node 20's fetch ignores proxy variables.
// With FETCH_MODE=native it uses Node's own fetch instead, which only the
// gate's transparent listeners (ports 80 and 443) catch.
import http from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

function get(url) {
  const proxy = process.env.HTTP_PROXY || process.env.http_proxy;
  const target = new URL(url);
  const via = proxy ? new URL(proxy) : target;
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: via.hostname,
        port: via.port || 80,
        method: "GET",
        path: proxy ? target.href : target.pathname + target.search,
        headers: { host: target.host },
        timeout: 10000,
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode, body }));
      },
    );
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", reject);
    req.end();
  });
}

const server = new McpServer({ name: "tollgate-test-fetch", version: "1.0.0" });
server.registerTool(
  "fetch_url",
  { description: "GET an http:// URL", inputSchema: { url: z.string() } },
  async ({ url }) => {
    try {
      const r =
        process.env.FETCH_MODE === "native"
          ? await fetch(url, { signal: AbortSignal.timeout(10000) }).then(async (res) => ({
              status: res.status,
              body: await res.text(),
            }))
          : await get(url);
      const ok = r.status >= 200 && r.status < 300;
      return { content: [{ type: "text", text: `${r.status} ${r.body.trim()}` }], isError: !ok };
    } catch (e) {
      const why = e.cause?.code ?? e.message;
      return { content: [{ type: "text", text: `fetch failed: ${why}` }], isError: true };
    }
  },
);
await server.connect(new StdioServerTransport());
