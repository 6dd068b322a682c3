// client.mjs — the official TypeScript MCP client (pinned in package-lock.json)
// as a user runs it against connecta; internal/server/tsclient_test.go drives it.
//
//   node client.mjs <scenario> <url>
//
// Each scenario prints one JSON line with what it saw and exits 0; a
// scenario that waits for the Go side reads one line from stdin first.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [scenario, url] = process.argv.slice(2);
const stdin = createInterface({ input: process.stdin });
const nextLine = () => new Promise((resolve) => stdin.once("line", resolve));

// connect returns a client; bodies collects every response body it reads
// with its content type (for the byte-identical check).
async function connect(bodies) {
  const fetchLike = async (input, init) => {
    const res = await fetch(input, init);
    if (!bodies || !res.headers.get("content-type")?.startsWith("application/json")) return res;
    const text = await res.clone().text();
    bodies.push({ contentType: res.headers.get("content-type"), text });
    return res;
  };
  const client = new Client({ name: "ts-client", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: fetchLike }));
  return client;
}

const code = (body) => ({ name: "execute_code", arguments: { code: body } });
const print = (v) => process.stdout.write(JSON.stringify(v) + "\n");

async function main() {
  switch (scenario) {
    // AbortSignal: the SDK sends notifications/cancelled on a POST of its
    // own and leaves the original request open.
    case "abort": {
      const client = await connect();
      const ac = new AbortController();
      const call = client.callTool(code(`async () => await connecta.call("down.slow", {})`), undefined, { signal: ac.signal });
      print({ event: "calling" });
      await nextLine();
      ac.abort("user pressed stop");
      const err = await call.then(() => null, (e) => String(e));
      print({ event: "aborted", error: err });
      await nextLine();
      await client.close();
      return;
    }
    // Two clients of one actor number their requests alike: one aborts,
    // the other's run completes.
    case "collide": {
      const [a, b] = [await connect(), await connect()];
      const sleep = code(`async () => (await connecta.call("down.sleep", {ms: 2000})).slept`);
      const ac = new AbortController();
      const ca = a.callTool(sleep, undefined, { signal: ac.signal });
      const cb = b.callTool(sleep);
      print({ event: "calling" });
      await nextLine(); // both runs are in flight
      ac.abort("only this one");
      const ra = await ca.then(() => "completed", (e) => "rejected: " + String(e));
      const rb = await cb;
      print({ a: ra, b: rb.content[0].text, bError: rb.isError ?? false });
      await a.close();
      await b.close();
      return;
    }
    // onprogress receives the first line while the program still waits on
    // a slow host call; a log level streams notifications/message.
    case "progress": {
      const client = await connect();
      const logs = [];
      client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params.level + ":" + n.params.data));
      const progress = [];
      let done = false;
      const start = Date.now();
      const res = await client.callTool(
        { ...code(`async () => { console.log("first line"); await connecta.call("down.sleep", {ms: 500}); console.warn("last line"); return 7 }`),
          _meta: { "io.modelcontextprotocol/logLevel": "info" } },
        undefined,
        { onprogress: (p) => progress.push({ ...p, ms: Date.now() - start, pending: !done }) },
      );
      done = true;
      print({ progress, logs, result: res.content[0].text, ms: Date.now() - start });
      await client.close();
      return;
    }
    // No progress token, no log level: the reply is the ordinary JSON one.
    case "plain": {
      const bodies = [];
      const client = await connect(bodies);
      await client.callTool(code(`async () => { console.log("x"); return 1+1 }`));
      print({ last: bodies[bodies.length - 1] });
      await client.close();
      return;
    }
    // A bearer token from $CONNECTA_TS_TOKEN (an OIDC access token or an
    // issued token): list the tools and make one top-level call. Without
    // a token, report how the connect fails.
    case "bearer": {
      const token = process.env.CONNECTA_TS_TOKEN || "";
      const client = new Client({ name: "ts-client", version: "1.0.0" });
      const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
      try {
        await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit }));
      } catch (e) {
        print({ connectError: String(e) });
        return;
      }
      const { tools } = await client.listTools();
      const res = await client.callTool({ name: "search_tools", arguments: { query: "issues" } });
      print({ tools: tools.map((t) => t.name).sort(), isError: !!res.isError });
      await client.close();
      return;
    }
    // Access rules: what one caller ($CONNECTA_TS_TOKEN) sees at each door,
    // as exact texts, for the Go side to compare with a server configured
    // without what the caller cannot reach.
    case "access": {
      const token = process.env.CONNECTA_TS_TOKEN || "";
      const client = new Client({ name: "ts-client", version: "1.0.0" });
      await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
      const text = (r) => JSON.stringify({ isError: !!r.isError, content: r.content });
      const { tools } = await client.listTools();
      const out = { tools: JSON.stringify(tools) };
      for (const [name, args] of JSON.parse(process.env.CONNECTA_TS_CALLS || "[]")) {
        out[name + " " + JSON.stringify(args)] = text(await client.callTool({ name, arguments: args }));
      }
      print(out);
      await client.close();
      return;
    }
    default:
      throw new Error("unknown scenario " + scenario);
  }
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
