#!/usr/bin/env python3
"""An HTTP/1.1 origin for the proxy's forwarding tests, on 127.0.0.1 only.
GET /headers: the request head as the body. POST /echo: the body back.
GET /chunked: a chunked body. GET /close: a body ended by closing.
GET /big?n=N: N bytes. Anything else: 404."""
import http.server
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_body(self, body, ctype="text/plain"):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        if self.path == "/headers":
            self.send_body(("%s %s %s\n" % (self.command, self.path, self.request_version)).encode()
                           + bytes(self.headers))
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"chunk one,", b" chunk two", b"\n"):
                self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\nX-Trailer: yes\r\n\r\n")
        elif self.path == "/close":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"until close\n")
            self.close_connection = True
        elif self.path.startswith("/big?n="):
            n = int(self.path.split("=")[1])
            self.send_body(b"x" * n, "application/octet-stream")
        else:
            self.send_error(404)

    def do_POST(self):
        self.send_body(self.read_body())


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
