#!/usr/bin/env python3
"""A hostile registry for the pull tests: HTTPS on 127.0.0.1:PORT.

usage: registry_hostile.py PORT TLS_CERT TLS_KEY

/v2/evil/manifests/TAG answers, by TAG:
  big        a 5 MiB manifest            loop       a redirect to itself
  downgrade  a redirect to plain HTTP    garbage    bytes that are not JSON
  claim      a Docker-Content-Digest that is not the manifest's
  layers     a manifest of 129 layers    mediatype  a layer of an unknown type
  long       a manifest whose layer the registry serves longer than its size
  short      ... and shorter              noisy      a 500 with a 10 MiB body
  slow       a layer sent half, then nothing for 120 s (a pull to interrupt)

/v2/auth/ asks for basic credentials u:p (a Basic challenge); its image's
layer is a redirect to https://localhost:PORT/redirected/..., which records
whether an Authorization header came with it: GET /seen lists them.
"""
import gzip
import hashlib
import io
import http.server
import json
import ssl
import sys
import tarfile
import time

port, cert, key = sys.argv[1:4]
CONFIG = json.dumps({"architecture": "amd64", "os": "linux", "config": {}}).encode()
LAYER = b"\x1f\x8b" + b"x" * 98  # its digest is all that is checked before unpacking
LONG = LAYER + b"y" * 100
MT = "application/vnd.oci.image.manifest.v1+json"


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def manifest(layers, layer_type="application/vnd.oci.image.layer.v1.tar+gzip"):
    return json.dumps({
        "schemaVersion": 2, "mediaType": MT,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": sha(CONFIG), "size": len(CONFIG)},
        "layers": [{"mediaType": layer_type, "digest": d, "size": n} for d, n in layers]}).encode()


def auth_layer():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        data = b"fetched through a redirect\n"
        info = tarfile.TarInfo("srv/redirected")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0)


AUTH_LAYER = auth_layer()
SLOW = b"\x1f\x8b" + b"s" * (4 << 20)  # half of it more than a pull gathers before a write
BLOBS = {sha(CONFIG): CONFIG, sha(LAYER): LAYER, sha(SLOW): SLOW}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        p = self.path
        if p == "/seen":
            return self.answer(200, json.dumps(self.server.seen).encode())
        if p.startswith("/redirected/"):
            self.server.seen.append(self.headers.get("Authorization", "none"))
            return self.answer(200, AUTH_LAYER)
        if p.startswith("/v2/auth/"):
            if self.headers.get("Authorization") != "Basic dTpw":
                return self.answer(401, b"", [("WWW-Authenticate", 'Basic realm="hostile"')])
            if p == "/v2/auth/manifests/1":
                return self.answer(200, manifest([(sha(AUTH_LAYER), len(AUTH_LAYER))]),
                                   [("Content-Type", MT)])
            if p == "/v2/auth/blobs/" + sha(CONFIG):
                return self.answer(200, CONFIG)
            if p == "/v2/auth/blobs/" + sha(AUTH_LAYER):
                return self.answer(307, b"", [
                    ("Location", "https://localhost:%s/redirected/%s" % (port, sha(AUTH_LAYER)))])
            return self.answer(404)
        if p.startswith("/v2/evil/blobs/"):
            d = p[len("/v2/evil/blobs/"):]
            body = BLOBS.get(d)
            if body is None:
                return self.answer(404)
            if d == sha(LAYER):
                body = self.server.layer_body
            if d == sha(SLOW):
                self.send_response(200)
                self.send_header("Content-Length", str(len(SLOW)))
                self.end_headers()
                self.wfile.write(SLOW[:len(SLOW) // 2])
                self.wfile.flush()
                time.sleep(120)
                return
            return self.answer(200, body)
        if not p.startswith("/v2/evil/manifests/"):
            return self.answer(404)
        tag = p[len("/v2/evil/manifests/"):]
        ct = [("Content-Type", MT)]
        if tag == "big":
            return self.answer(200, b"{" + b" " * (5 << 20) + b"}", ct)
        if tag == "loop":
            return self.answer(302, b"", [("Location", p)])
        if tag == "downgrade":
            return self.answer(302, b"", [("Location", "http://127.0.0.1:%s%s" % (port, p))])
        if tag == "garbage":
            return self.answer(200, b"\x00\x01 not a manifest", ct)
        if tag == "claim":
            body = manifest([(sha(LAYER), len(LAYER))])
            return self.answer(200, body, ct + [("Docker-Content-Digest", sha(b"other"))])
        if tag == "layers":
            return self.answer(200, manifest([(sha(LAYER), len(LAYER))] * 129), ct)
        if tag == "mediatype":
            return self.answer(200, manifest([(sha(LAYER), len(LAYER))],
                                             "application/vnd.example.layer.v1.tar+lz4"), ct)
        if tag in ("long", "short"):
            self.server.layer_body = LONG if tag == "long" else LAYER[:50]
            return self.answer(200, manifest([(sha(LAYER), len(LAYER))]), ct)
        if tag == "slow":
            return self.answer(200, manifest([(sha(SLOW), len(SLOW))]), ct)
        if tag == "noisy":
            return self.answer(500, b"e" * (10 << 20))
        return self.answer(404)


server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), Handler)
server.layer_body = LAYER
server.seen = []
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
