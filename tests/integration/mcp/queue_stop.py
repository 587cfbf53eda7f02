# Raw MCP lines to `tollgate serve --max-sandboxes 1`: two long executions,
# the second waiting for the slot; once serve says it waits, SIGTERM. Prints
# serve's replies by id as JSON lines, then {"exit": status}.
# Usage: python3 queue_stop.py TOLLGATE serve ...
import json
import signal
import subprocess
import sys

p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def send(msg):
    p.stdin.write((json.dumps(msg) + "\n").encode())
    p.stdin.flush()


send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
      "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                 "clientInfo": {"name": "queue-stop", "version": "1"}}})
p.stdout.readline()
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
for i in (1, 2):
    send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
          "params": {"name": "execute_code", "_meta": {"progressToken": f"t{i}"},
                     "arguments": {"language": "sh", "code": "sleep 20; echo late", "timeout": 30}}})
# Bounded: serve sends a few lines per second; a missing notice ends at EOF.
for _ in range(200):
    line = p.stdout.readline()
    if not line:
        break
    msg = json.loads(line)
    if "waiting for a sandbox slot" in json.dumps(msg.get("params", {})):
        p.send_signal(signal.SIGTERM)
        break
for line in p.stdout:
    msg = json.loads(line)
    if "id" in msg:
        r = msg.get("result", {})
        print(json.dumps({"id": msg["id"], "isError": r.get("isError"),
                          "text": (r.get("content") or [{}])[0].get("text", "")}))
print(json.dumps({"exit": p.wait()}))
