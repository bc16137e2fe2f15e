// Preloaded with `node -r` by the HTTP interop tests: every server the script starts listens on
// 127.0.0.1 only, and the port it got (the tests ask for port 0) is printed to stderr.
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if (typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port))) {
    const callbacks = args.slice(1).filter((a) => typeof a === "function");
    this.once("listening", () => {
      process.stderr.write(`LISTENING ${this.address().port}\n`);
    });
    return listen.call(this, Number(port), "127.0.0.1", ...callbacks);
  }
  return listen.apply(this, args);
};
