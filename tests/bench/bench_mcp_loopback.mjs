// Loaded with `node --import` before server-everything's Streamable HTTP server,
// which listens on every address (listen(PORT)): a listen by port alone is bound to
// 127.0.0.1 instead, so that the bench's direct HTTP server is reachable on loopback
// only.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const [port] = args;
  if (typeof port === "number" || (typeof port === "string" && /^[0-9]+$/.test(port))) {
    const cb = args.find((a) => typeof a === "function");
    return listen.call(this, { port: Number(port), host: "127.0.0.1" }, cb);
  }
  return listen.apply(this, args);
};
