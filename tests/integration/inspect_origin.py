#!/usr/bin/env python3
"""An HTTPS origin for the inspection tests: answers every request with a
JSON echo of what it received (method, path, headers, body), so a test can
see what the gate sent. GET /echo-header/NAME answers with the value of
the request's NAME header in the body; /echo-chunks with the Authorization
value 50 times in 7-byte chunks; /big/N answers N bytes, chunked; /gzip
the Authorization value gzip-encoded, whatever Accept-Encoding asked.
Usage: inspect_origin.py PORT CERT KEY [BIND_ADDRESS]."""
import gzip
import http.server
import json
import ssl
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _answer(self):
        # One line per request on stderr: the test's log of what arrived.
        sys.stderr.write("REQ %s %s %s auth=%s\n" % (
            self.command, self.path, self.headers.get("User-Agent", "-"),
            self.headers.get("Authorization", "-")))
        sys.stderr.flush()
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if len(body) < n:
            return  # the connection was cut: the request never arrived whole
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            body = b"".join(chunks)
        sys.stderr.write("GOT %s %d bytes\n" % (self.path, len(body)))
        sys.stderr.flush()
        if self.path.startswith("/echo-header/"):
            out = (self.headers.get(self.path[len("/echo-header/"):]) or "").encode()
            ctype = "text/plain"
        elif self.path == "/echo-chunks":
            # The Authorization value 50 times between runs of x, sent in
            # 7-byte chunks: every chunk boundary falls somewhere in a value.
            auth = (self.headers.get("Authorization") or "").encode()
            out = b"".join(b"x" * k + auth for k in range(50))
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(out), 7):
                piece = out[i:i + 7]
                self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        elif self.path == "/gzip":
            out = gzip.compress((self.headers.get("Authorization") or "").encode())
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        elif self.path.startswith("/big/"):
            size = int(self.path[len("/big/"):])
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            left = size
            while left > 0:
                n = min(left, 65536)
                self.wfile.write(b"%x\r\n" % n + b"x" * n + b"\r\n")
                left -= n
            self.wfile.write(b"0\r\n\r\n")
            return
        else:
            out = json.dumps({
                "method": self.command,
                "path": self.path,
                "headers": {k: v for k, v in self.headers.items()},
                "body": body.decode("utf-8", "replace"),
            }).encode()
            ctype = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def main():
    port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    bind = sys.argv[4] if len(sys.argv) > 4 else "127.0.0.1"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv = TLSServer((bind, port), Handler)
    srv.ctx = ctx
    srv.serve_forever()


class TLSServer(http.server.ThreadingHTTPServer):
    """The handshake runs in the request's thread: one slow client cannot
    hold the accept loop."""

    def finish_request(self, request, client_address):
        request.settimeout(30)
        try:
            tls = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        self.RequestHandlerClass(tls, client_address, self)


if __name__ == "__main__":
    main()
