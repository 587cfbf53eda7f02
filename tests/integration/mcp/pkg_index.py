#!/usr/bin/env python3
"""A package index on loopback for install_package's tests, with no internet:
a PEP 503 simple index holding a wheel this script builds (tgpkg 1.0.0), and
a minimal npm registry answering GET /NAME with a packument whose tarball is
the one given (made by `npm pack`). Every request is logged to LOG, one line
each. Usage: pkg_index.py PORT WORKDIR NPM_TARBALL LOG
"""
import base64
import hashlib
import http.server
import io
import json
import sys
import zipfile

port, workdir, tarball_path, log_path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]


def make_wheel():
    """A wheel is a zip with NAME-VER.dist-info/{METADATA,WHEEL,RECORD}."""
    files = {
        "tgpkg/__init__.py": b"VALUE = 'tgpkg-from-the-local-index'\n",
        "tgpkg-1.0.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tgpkg\nVersion: 1.0.0\n",
        "tgpkg-1.0.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tollgate-test\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{name},sha256={digest},{len(data)}\n"
    record += "tgpkg-1.0.0.dist-info/RECORD,,\n"
    files["tgpkg-1.0.0.dist-info/RECORD"] = record.encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


WHEEL_NAME = "tgpkg-1.0.0-py3-none-any.whl"
wheel = make_wheel()
wheel_sha = hashlib.sha256(wheel).hexdigest()
with open(tarball_path, "rb") as f:
    tarball = f.read()
integrity = "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()


class Handler(http.server.BaseHTTPRequestHandler):
    def send(self, code, body, ctype):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        host = (self.headers.get("Host") or "").split(":")[0]
        with open(log_path, "a") as log:
            log.write(f"{host} {self.path}\n")
        path = self.path.split("?")[0]
        if path in ("/simple/", "/simple"):
            self.send(200, b'<html><body><a href="tgpkg/">tgpkg</a></body></html>', "text/html")
        elif path in ("/simple/tgpkg/", "/simple/tgpkg"):
            body = f'<html><body><a href="/files/{WHEEL_NAME}#sha256={wheel_sha}">{WHEEL_NAME}</a></body></html>'
            self.send(200, body.encode(), "text/html")
        elif path == f"/files/{WHEEL_NAME}":
            self.send(200, wheel, "application/octet-stream")
        elif path == "/tgnpm":
            base = f"http://{self.headers.get('Host')}"
            doc = {
                "name": "tgnpm",
                "dist-tags": {"latest": "1.0.0"},
                "versions": {
                    "1.0.0": {
                        "name": "tgnpm",
                        "version": "1.0.0",
                        "main": "index.js",
                        "dist": {"tarball": f"{base}/tgnpm/-/tgnpm-1.0.0.tgz", "integrity": integrity},
                    }
                },
            }
            self.send(200, json.dumps(doc).encode(), "application/json")
        elif path == "/tgnpm/-/tgnpm-1.0.0.tgz":
            self.send(200, tarball, "application/octet-stream")
        else:
            self.send(404, b"not here\n", "text/plain")

    do_HEAD = do_GET

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
