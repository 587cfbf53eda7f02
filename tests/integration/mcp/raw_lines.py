#!/usr/bin/env python3
"""Speaks raw JSON-RPC lines to an MCP stdio server (argv: CMD...) to test
what an SDK client never sends: malformed lines, invalid requests, batches,
an oversized line, then stdin EOF. Prints one JSON line per reply and, at
the end, {"exit": STATUS} once the server exited after stdin closed."""
import json
import subprocess
import sys
import threading

proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
replies = []
done = threading.Event()


def reader():
    for line in proc.stdout:
        replies.append(line)
    done.set()


threading.Thread(target=reader, daemon=True).start()


def send(raw):
    proc.stdin.write(raw + b"\n")
    proc.stdin.flush()


def wait_replies(n, limit=30.0):
    """Waits (bounded) until n replies arrived."""
    step = 0.05
    waited = 0.0
    while len(replies) < n and waited < limit and not done.is_set():
        threading.Event().wait(step)
        waited += step


send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "raw", "version": "1"}}}).encode())
wait_replies(1)
send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
send(b"this is not json")
wait_replies(2)
send(b"[]")
wait_replies(3)
send(b'{"jsonrpc":"2.0","id":7}')
wait_replies(4)
send(b'{"jsonrpc":"1.0","id":8,"method":"ping"}')
wait_replies(5)
send(b'{"jsonrpc":"2.0","id":9,"method":"x","params":' + b'"' + b"a" * (5 * 1024 * 1024) + b'"}')
wait_replies(6)
send(b'{"jsonrpc":"2.0","id":10,"method":"ping"}')
wait_replies(7)
proc.stdin.close()
try:
    status = proc.wait(timeout=30)
except subprocess.TimeoutExpired:
    proc.kill()
    status = "did not exit"
done.wait(5)
for r in replies:
    try:
        m = json.loads(r)
    except ValueError:
        m = {"not_json": r[:200].decode("utf-8", "replace")}
    print(json.dumps({"id": m.get("id"), "error": (m.get("error") or {}).get("code"),
                      "has_result": "result" in m, "not_json": m.get("not_json")}))
print(json.dumps({"exit": status}))
