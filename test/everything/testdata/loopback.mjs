// Preloaded (node --import) by `make test-everything-http`: server-everything
// listens on every interface at $PORT; this binds it to 127.0.0.1 instead,
// and with PORT=0 reports the port the OS picked in $CONNECTA_PORT_FILE, so
// the Makefile needs no port guessing.
import fs from "node:fs";
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if (typeof port !== "number" && !(typeof port === "string" && /^\d+$/.test(port))) {
    return listen.apply(this, args);
  }
  const file = process.env.CONNECTA_PORT_FILE;
  if (file) {
    this.once("listening", () => {
      fs.writeFileSync(file + ".tmp", String(this.address().port));
      fs.renameSync(file + ".tmp", file);
    });
  }
  const callback = args.find((a) => typeof a === "function");
  return listen.call(this, Number(port), "127.0.0.1", callback);
};
