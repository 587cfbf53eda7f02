# Run inside a sandbox by test_net_*.sh (passed with python3 -c, since the
# test's files are not visible there): tries one way out and says how it went.
#   tcp ADDR PORT | udp ADDR PORT | tcp6 ADDR PORT | listen PORT SECONDS READYFILE
# Exit 0: connected / sent; 1: failed (the reason on stdout); 2: bad usage.
import socket
import sys
import time


def main(argv):
    if len(argv) < 2:
        return 2
    what = argv[1]
    try:
        if what in ("tcp", "tcp6"):
            fam = socket.AF_INET6 if what == "tcp6" else socket.AF_INET
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(3)
            s.connect((argv[2], int(argv[3])))
            print("connected")
            return 0
        if what == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b"tollgate-probe", (argv[2], int(argv[3])))
            print("sent")
            return 0
        if what == "listen":
            # A listener on every address of the sandbox, for SECONDS at most.
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("0.0.0.0", int(argv[2])))
            s.listen(8)
            # Not vacuous: it answers (accepted here, so not counted below).
            c = socket.create_connection(("127.0.0.1", int(argv[2])), timeout=3)
            s.settimeout(3)
            s.accept()[0].close()
            c.close()
            with open(argv[4], "w") as f:
                f.write("listening\n")
            s.settimeout(0.2)
            end = time.monotonic() + float(argv[3])
            while time.monotonic() < end:
                try:
                    conn, peer = s.accept()
                    with open(argv[4], "a") as f:
                        f.write("accepted %s\n" % peer[0])
                    conn.close()
                except socket.timeout:
                    pass
            return 0
    except OSError as e:
        print(e.strerror or str(e))
        return 1
    return 2


sys.exit(main(sys.argv))
