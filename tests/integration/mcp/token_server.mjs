// A small MCP stdio server of the tests' own that reads its API token from
// the environment (GH_TOKEN), as servers from npm do. Its tool call_api
// sends Authorization: Bearer $GH_TOKEN to an https:// URL with Node's own
// fetch (through the gate's transparent 443 listener) and answers with the
// status and the body; show_token answers with the variable itself.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "tollgate-test-token", version: "1.0.0" });
server.registerTool(
  "call_api",
  { description: "GET an https:// URL with the token", inputSchema: { url: z.string() } },
  async ({ url }) => {
    try {
      const res = await fetch(url, {
        headers: { Authorization: `Bearer ${process.env.GH_TOKEN ?? ""}` },
        signal: AbortSignal.timeout(15000),
      });
      const body = await res.text();
      const why = res.headers.get("x-tollgate-reason") ?? "-";
      return { content: [{ type: "text", text: `${res.status} ${why} ${body.trim()}` }] };
    } catch (e) {
      const why = e.cause?.code ?? e.message;
      return { content: [{ type: "text", text: `fetch failed: ${why}` }], isError: true };
    }
  },
);
server.registerTool(
  "show_token",
  { description: "the token variable as the server sees it", inputSchema: {} },
  async () => ({ content: [{ type: "text", text: process.env.GH_TOKEN ?? "(unset)" }] }),
);
await server.connect(new StdioServerTransport());
