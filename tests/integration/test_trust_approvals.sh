#!/usr/bin/env bash
# The trust boundary (docs/threat-model.md), "exhaustion does not take the gate down": one client floods
# `tollgate proxy --ask` with held CONNECTs to names nobody will approve.
# It may hold APPROVAL_PENDING_PER_CLIENT (32) approvals at once; beyond it
# each request is refused at once (429, too-many-pending) and audited with
# that reason, while another client still gets its question asked and a
# decision frees a place. Everything is held before resolution: no packet
# leaves loopback.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/proxy_lib.sh"
command -v sqlite3 >/dev/null || skip "sqlite3"

CAP=32
start_proxy flood --ask '*.flood.test' --ask-timeout 5m
DB=$TEST_TMP/flood.db

out=$(timeout 120 python3 - "$PROXY_PORT" "$TOLLGATE" "$TEST_TMP/flood.sock" "$CAP" <<'PY'
import json, socket, subprocess, sys, time
port, tollgate, sock, cap = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])

def connect(name, src="127.0.0.1"):
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (name.encode(), name.encode()))
    return s

def pending():
    r = subprocess.run([tollgate, "pending", "--control", sock, "--json"],
                       capture_output=True, text=True, timeout=10)
    return [json.loads(l) for l in r.stdout.splitlines() if l.strip()]

def wait_pending(n):
    for _ in range(200):  # 20 s at most
        p = pending()
        if len(p) >= n:
            return p
        time.sleep(0.1)
    return pending()

def answer(s):
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            b = s.recv(4096)
            if not b:
                break
            got += b
    except socket.timeout:
        return "timeout"
    head = got.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    reason = [l.split(":", 1)[1].strip() for l in head[1:] if l.lower().startswith("x-tollgate-reason:")]
    return "%s %s" % (head[0].split(" ")[1] if head[0] else "closed", reason[0] if reason else "-")

def still_held(s):
    s.setblocking(False)
    try:
        s.recv(1)  # an answer or EOF: not held
        return False
    except BlockingIOError:
        return True
    finally:
        s.settimeout(10)

held = [connect("n%d.flood.test" % i) for i in range(cap)]
print("pending after the flood: %d" % len(wait_pending(cap)))
over = [answer(connect("over%d.flood.test" % i)) for i in range(8)]
print("over the cap: %s" % ",".join(sorted(set(over))))
print("over the cap, count: %d" % len(over))
print("held still held: %d" % sum(still_held(s) for s in held))
# A request that joins a pending approval adds no question: held too.
joiner = connect("n0.flood.test")
for _ in range(200):  # until it has joined, 20 s at most
    if any(a.get("host") == "n0.flood.test" and a.get("waiters") == 2 for a in pending()):
        break
    time.sleep(0.1)
print("joiner held: %s" % still_held(joiner))
# Another client (another source address) is asked as usual.
other = connect("other.flood.test", src="127.0.0.2")
p = wait_pending(cap + 1)
print("other client pending: %s" % any(a.get("host") == "other.flood.test" for a in p))
# A decision frees a place for the flooding client.
first = [a for a in p if a.get("host") == "n1.flood.test"][0]
subprocess.run([tollgate, "deny", str(first["id"]), "--control", sock],
               capture_output=True, timeout=10, check=True)
print("denied one: %s" % answer(held[1]))
again = connect("again.flood.test")
p = wait_pending(cap + 1)
print("after a decision, pending again: %s" % any(a.get("host") == "again.flood.test" for a in p))
print("and held: %s" % still_held(again))
PY
)
echo "$out"
line() { grep "^$1: " <<<"$out" | head -1 | cut -d' ' -f2- | sed "s/^[^:]*: //"; }
expect_eq "the client holds $CAP approvals" "$(line 'pending after the flood')" "$CAP"
expect_eq "past the cap: 429 too-many-pending at once" "$(line 'over the cap')" "429 too-many-pending"
expect_eq "every request past the cap refused" "$(line 'over the cap, count')" 8
expect_eq "the held requests stay held" "$(line 'held still held')" "$CAP"
expect_eq "a request joining a pending approval is held, not refused" "$(line 'joiner held')" "True"
expect_eq "another client's request is asked" "$(line 'other client pending')" "True"
expect_eq "a denied held request gets its 403" "$(line 'denied one')" "403 approval-denied"
expect_eq "a decision frees a place: asked again" "$(line 'after a decision, pending again')" "True"
expect_eq "and that request is held" "$(line 'and held')" "True"

stop_proxy "$PROXY_PID"
expect_eq "gateway exits 0" "$STOP_RC" 0
n=$(audit_count "$DB" "kind='decision' and decision='deny' and reason='too-many-pending'")
expect_eq "audit: one too-many-pending row per refused request" "$n" 8
n=$(audit_count "$DB" "kind='decision' and reason='too-many-pending' and host like 'over%.flood.test'")
expect_eq "audit: the rows name the refused hosts" "$n" 8
finish
