#!/usr/bin/env python3
"""Raw JSON-RPC to an MCP stdio server (argv: CMD...): initialize with each
protocol revision, the 2026-07-28 stateless requests (server/discover, _meta
per request, -32022), ping, logging/setLevel, a bad line, then stdin EOF.
Prints each reply (one JSON line) and {"exit": STATUS}."""
import json
import subprocess
import sys

lines = []
for i, v in enumerate(["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2031-01-01"]):
    lines.append({"jsonrpc": "2.0", "id": "init-" + v, "method": "initialize",
                  "params": {"protocolVersion": v, "capabilities": {},
                             "clientInfo": {"name": "raw", "version": "1"}}})
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
lines += [
    {"jsonrpc": "2.0", "id": "discover", "method": "server/discover", "params": {"_meta": meta}},
    {"jsonrpc": "2.0", "id": "list-stateless", "method": "tools/list", "params": {"_meta": meta}},
    {"jsonrpc": "2.0", "id": "list-future", "method": "tools/list",
     "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2031-01-01"}}},
    {"jsonrpc": "2.0", "id": "ping", "method": "ping"},
    {"jsonrpc": "2.0", "id": "level-ok", "method": "logging/setLevel", "params": {"level": "debug"}},
    {"jsonrpc": "2.0", "id": "exec", "method": "tools/call",
     "params": {"name": "execute_code", "arguments": {"language": "sh", "code": "echo hi"},
                "_meta": {"progressToken": "p1"}}},
    {"jsonrpc": "2.0", "id": "level-bad", "method": "logging/setLevel", "params": {"level": "loud"}},
    {"jsonrpc": "2.0", "id": "nope", "method": "no/such/method"},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "x"}},
]
data = b"".join(json.dumps(m).encode() + b"\n" for m in lines) + b"not json\n"
proc = subprocess.run(sys.argv[1:], input=data, stdout=subprocess.PIPE, timeout=60)
for raw in proc.stdout.splitlines():
    try:
        m = json.loads(raw)
    except ValueError:
        print(json.dumps({"not_json": raw[:200].decode("utf-8", "replace")}))
        continue
    r = m.get("result") or {}
    print(json.dumps({"id": m.get("id"), "method": m.get("method"),
                      "level": (m.get("params") or {}).get("level"),
                      "stdout": (r.get("structuredContent") or {}).get("stdout"),
                      "error": (m.get("error") or {}).get("code"),
                      "version": r.get("protocolVersion"),
                      "supported": r.get("supportedVersions"),
                      "resultType": r.get("resultType"),
                      "requested": ((m.get("error") or {}).get("data") or {}).get("requested")}))
print(json.dumps({"exit": proc.returncode}))
