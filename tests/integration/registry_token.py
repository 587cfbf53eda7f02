#!/usr/bin/env python3
"""A bearer-token issuer for docker-registry's `auth: token:` (the pull tests).

usage: registry_token.py PORT TLS_CERT TLS_KEY SIGN_CERT SIGN_KEY USER:PASSWORD LOG

Serves GET /token over HTTPS on 127.0.0.1:PORT. With the right basic
credentials it grants the scope asked for (repository:NAME:ACTIONS) in an
RS256 JWT whose x5c header carries SIGN_CERT, which the registry's
rootcertbundle trusts; without them it answers 401. Each request is one line
of LOG: "basic" or "none", then the scope.
"""
import base64
import http.server
import json
import os
import ssl
import sys
import time
import urllib.parse

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization

port, tls_cert, tls_key, sign_cert, sign_key, creds, log = sys.argv[1:8]
with open(sign_cert, "rb") as f:
    cert_der = x509.load_pem_x509_certificate(f.read()).public_bytes(serialization.Encoding.DER)
with open(sign_key, "rb") as f:
    key_pem = f.read()


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query)
        auth = self.headers.get("Authorization", "")
        ok = auth == "Basic " + base64.b64encode(creds.encode()).decode()
        scope = query.get("scope", [""])[0]
        with open(log, "a") as f:
            f.write("%s %s %s\n" % ("basic" if ok else ("wrong" if auth else "none"),
                                    query.get("service", [""])[0], scope))
        if url.path != "/token":
            self.send_error(404)
            return
        if not ok:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="tollgate-test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        access = []
        parts = scope.split(":")
        if len(parts) == 3 and parts[0] == "repository":
            access.append({"type": "repository", "name": parts[1],
                           "actions": parts[2].split(",")})
        now = int(time.time())
        claims = {"iss": "tollgate-test-issuer", "sub": creds.split(":")[0],
                  "aud": query.get("service", [""])[0], "iat": now, "nbf": now - 10,
                  "exp": now + 300, "jti": base64.b16encode(os.urandom(8)).decode(),
                  "access": access}
        token = jwt.encode(claims, key_pem, algorithm="RS256",
                           headers={"x5c": [base64.b64encode(cert_der).decode()]})
        body = json.dumps({"token": token, "expires_in": 300}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(tls_cert, tls_key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
