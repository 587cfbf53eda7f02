#!/usr/bin/env python3
"""A small MCP stdio server, standard library only, that the image tests put
into an image as its Entrypoint (oci_layout.py mcp). Tools: fetch_url (GET
through whatever proxy the environment names: "STATUS BODY", or an error
result) and where (the working directory, the image's IMAGE_GREETING and
whether the host's Python packages are visible)."""
import json
import os
import sys
import urllib.request

TOOLS = [
    {"name": "fetch_url", "description": "GET a URL",
     "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}},
                     "required": ["url"]}},
    {"name": "where", "description": "where the server runs",
     "inputSchema": {"type": "object", "properties": {}}},
]


def text(s, error=False):
    return {"content": [{"type": "text", "text": s}], "isError": error}


def call(name, args):
    if name == "fetch_url":
        try:
            with urllib.request.urlopen(args.get("url", ""), timeout=20) as r:
                return text(f"{r.status} {r.read().decode().strip()}")
        except Exception as e:  # refused by the gate, or unreachable
            return text(f"failed: {e}", True)
    if name == "where":
        return text(" ".join([os.getcwd(), os.environ.get("IMAGE_GREETING", "-"),
                              str(os.path.exists("/usr/lib/python3/dist-packages"))]))
    return None


def main():
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "id" not in msg or "method" not in msg:
            continue
        method, params = msg["method"], msg.get("params") or {}
        result, error = None, None
        if method == "initialize":
            result = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                      "capabilities": {"tools": {}},
                      "serverInfo": {"name": "image-server", "version": "1.0.0"}}
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            result = call(params.get("name"), params.get("arguments") or {})
            if result is None:
                error = {"code": -32602, "message": "Unknown tool: %s" % params.get("name")}
        else:
            error = {"code": -32601, "message": "Method not found"}
        reply = {"jsonrpc": "2.0", "id": msg["id"]}
        reply.update({"error": error} if error else {"result": result})
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


main()
