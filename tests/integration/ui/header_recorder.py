"""Another local server the person's browser may visit: answers every GET
with a small page, sets a cookie of its own (so the test can show that the
browser does send 127.0.0.1 cookies across ports), and writes each request's
path and headers as one JSON line to LOG.
usage: header_recorder.py PORT LOG"""
import http.server
import json
import sys

port, log = int(sys.argv[1]), sys.argv[2]


class Recorder(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as f:
            f.write(json.dumps({"port": port, "path": self.path,
                                "headers": [[k, v] for k, v in self.headers.items()]}) + "\n")
        body = b"<!doctype html><title>another server</title><p>recorded</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Set-Cookie", "probe=set-by-%d; Path=/" % port)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", port), Recorder).serve_forever()
