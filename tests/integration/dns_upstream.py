#!/usr/bin/env python3
# A tiny authoritative DNS server on loopback for tests: a real server that
# answers over UDP and TCP from a fixed zone and logs every query it receives
# (one "NAME TYPE" line), so a test can prove what went upstream and what did not.
#
#   dns_upstream.py --port-file F --log F [--port N] [--record NAME,TYPE,VALUE,TTL]...
#
# TYPE is A, AAAA or CNAME. An unknown name is NXDOMAIN; a known name without
# a record of the asked type is NOERROR with no answer. A name starting with
# "drop" is never answered (for time-outs). Stops on SIGTERM or after --lifetime.
import argparse
import ipaddress
import selectors
import signal
import socket
import struct
import sys
import time

TYPES = {"A": 1, "AAAA": 28, "CNAME": 5}
TYPE_NAMES = {v: k for k, v in TYPES.items()}

DEFAULT_ZONE = [
    "a.test,A,198.51.100.7,300",
    "www.example.com,A,93.184.216.34,3600",
    "www.example.com,AAAA,2606:2800:220:1:248:1893:25c8:1946,3600",
    "v6only.example.com,AAAA,2606:2800:220:1:248:1893:25c8:1947,3600",
    "v4only.example.com,A,93.184.216.35,120",
    "alias.example.com,CNAME,www.example.com,30",
    "private.example.com,A,10.1.2.3,300",
    "mixed.example.com,A,93.184.216.36,300",
    "mixed.example.com,A,127.0.0.1,300",
    "loop.example.com,A,127.0.0.1,300",
    "short.example.com,A,93.184.216.37,5",
]


def parse_name(msg, off):
    labels = []
    jumps = 0
    end = None
    while True:
        if off >= len(msg):
            raise ValueError("truncated name")
        n = msg[off]
        if n & 0xC0 == 0xC0:
            if off + 1 >= len(msg) or jumps > 20:
                raise ValueError("bad pointer")
            if end is None:
                end = off + 2
            off = ((n & 0x3F) << 8) | msg[off + 1]
            jumps += 1
            continue
        if n == 0:
            off += 1
            break
        labels.append(msg[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n
    return ".".join(labels).lower(), (end if end is not None else off)


def encode_name(name):
    out = b""
    for label in name.strip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def rr(name, rtype, ttl, value):
    if rtype == 1:
        rdata = ipaddress.IPv4Address(value).packed
    elif rtype == 28:
        rdata = ipaddress.IPv6Address(value).packed
    else:
        rdata = encode_name(value)
    return encode_name(name) + struct.pack(">HHIH", rtype, 1, ttl, len(rdata)) + rdata


def answer(zone, msg, log):
    if len(msg) < 12:
        return None
    qid, flags, qd = struct.unpack(">HHH", msg[:6])
    if qd != 1:
        return struct.pack(">HHHHHH", qid, 0x8001 | (flags & 0x0100), 0, 0, 0, 0)
    name, off = parse_name(msg, 12)
    qtype, qclass = struct.unpack(">HH", msg[off:off + 4])
    question = msg[12:off + 4]
    log.write("%s %s\n" % (name, TYPE_NAMES.get(qtype, str(qtype))))
    log.flush()
    if name.startswith("drop"):
        return None
    answers = []
    rcode = 0
    cur = name
    for _ in range(8):
        recs = zone.get(cur)
        if recs is None:
            rcode = 3 if cur == name else 0
            break
        cnames = [r for r in recs if r[0] == 5]
        if cnames and qtype != 5:
            answers.append(rr(cur, 5, cnames[0][1], cnames[0][2]))
            cur = cnames[0][2]
            continue
        answers += [rr(cur, t, ttl, v) for (t, ttl, v) in recs if t == qtype]
        break
    hdr = struct.pack(">HHHHHH", qid, 0x8480 | (flags & 0x0100) | rcode, 1, len(answers), 0, 0)
    return hdr + question + b"".join(answers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--record", action="append", default=[])
    ap.add_argument("--lifetime", type=float, default=600)
    # A server started again on the port of one that was stopped (the soak's
    # upstream-down fault); 0 lets the kernel pick.
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()

    zone = {}
    for spec in DEFAULT_ZONE + args.record:
        name, rtype, value, ttl = spec.split(",")
        zone.setdefault(name.lower(), []).append((TYPES[rtype], int(ttl), value))

    # UDP and TCP share one port number: the kernel picks a free UDP port,
    # which may be taken for TCP, so try again a bounded number of times.
    for attempt in range(100):
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", args.port))
        port = udp.getsockname()[1]
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            tcp.bind(("127.0.0.1", port))
            break
        except OSError:
            udp.close()
            tcp.close()
    else:
        sys.exit("dns_upstream: no port free for both UDP and TCP")
    tcp.listen(16)
    log = open(args.log, "a")
    with open(args.port_file + ".tmp", "w") as f:
        f.write("%d\n" % port)
    import os
    os.rename(args.port_file + ".tmp", args.port_file)

    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    sel = selectors.DefaultSelector()
    sel.register(udp, selectors.EVENT_READ, "udp")
    sel.register(tcp, selectors.EVENT_READ, "tcp")
    deadline = time.monotonic() + args.lifetime
    while time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1.0):
            try:
                if key.data == "udp":
                    msg, peer = udp.recvfrom(4096)
                    out = answer(zone, msg, log)
                    if out is not None:
                        udp.sendto(out, peer)
                else:
                    conn, _ = tcp.accept()
                    conn.settimeout(2)
                    hdr = conn.recv(2)
                    if len(hdr) == 2:
                        (n,) = struct.unpack(">H", hdr)
                        msg = b""
                        while len(msg) < n:
                            chunk = conn.recv(n - len(msg))
                            if not chunk:
                                break
                            msg += chunk
                        out = answer(zone, msg, log)
                        if out is not None:
                            conn.sendall(struct.pack(">H", len(out)) + out)
                    conn.close()
            except (ValueError, struct.error, OSError):
                continue


if __name__ == "__main__":
    main()
