#!/usr/bin/env python3
"""Raw-socket client for the proxy tests: sends bytes as given, prints what
came back in one line: "<status> <X-Tollgate-Reason>", "closed" (no answer)
or "timeout". Bounded in time. Only ever connects to 127.0.0.1."""
import argparse
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("payload", help="bytes to send, with Python escapes (\\r\\n, \\x00)")
    ap.add_argument("--repeat-header", type=int, default=0,
                    help="insert this many X-Pad header lines before the blank line")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--body", action="store_true", help="print the body line too")
    a = ap.parse_args()
    data = a.payload.encode("latin-1").decode("unicode_escape").encode("latin-1")
    if a.repeat_header:
        pad = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 100) for i in range(a.repeat_header))
        head, sep, rest = data.partition(b"\r\n\r\n")
        data = head + b"\r\n" + pad + b"\r\n" + rest
    s = socket.create_connection(("127.0.0.1", a.port), timeout=a.timeout)
    deadline = time.monotonic() + a.timeout
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass
    got = b""
    try:
        while b"\r\n\r\n" not in got or (a.body and not got.partition(b"\r\n\r\n")[2].endswith(b"\n")):
            s.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        if not got:
            print("timeout")
            return
    except ConnectionResetError:
        pass
    if not got:
        print("closed")
        return
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else "?"
    reason = "-"
    for l in lines[1:]:
        k, _, v = l.partition(":")
        if k.lower() == "x-tollgate-reason":
            reason = v.strip()
    out = f"{status} {reason}"
    if a.body:
        out += " " + body.decode("latin-1").strip()
    print(out)


if __name__ == "__main__":
    sys.exit(main())
