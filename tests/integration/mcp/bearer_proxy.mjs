// The conformance harness (@modelcontextprotocol/conformance) has no way to
// send a bearer token, and `tollgate serve --listen` refuses every request
// without one. This loopback relay adds the token and otherwise passes each
// request and its (streamed) answer through unchanged, except that a Host or
// Origin naming the relay itself is rewritten to name the server, so that
// the server's own Host and Origin checks still judge every other value.
// Usage: node bearer_proxy.mjs LISTEN_PORT TARGET_PORT TOKEN_FILE
import http from "node:http";
import { readFileSync } from "node:fs";

const [listenPort, targetPort, tokenFile] = process.argv.slice(2);
const token = readFileSync(tokenFile, "utf8").trim();
const own = new Set([`localhost:${listenPort}`, `127.0.0.1:${listenPort}`]);

http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  if (own.has(headers.host)) headers.host = `127.0.0.1:${targetPort}`;
  if (headers.origin && own.has(headers.origin.replace(/^http:\/\//, ""))) {
    headers.origin = `http://127.0.0.1:${targetPort}`;
  }
  const up = http.request({ host: "127.0.0.1", port: targetPort, method: req.method, path: req.url, headers }, (r) => {
    res.writeHead(r.statusCode, r.headers);
    r.pipe(res);
  });
  up.on("error", () => { res.writeHead(502); res.end(); });
  res.on("close", () => up.destroy());
  req.pipe(up);
}).listen(Number(listenPort), "127.0.0.1", () => console.log("ready"));
