/**
 * Captures what real libzmq peers put on the wire, for the ZMTP codec's golden tests
 * (test/fixtures/zmtp/captures.json; src/shared/protocol/zmtp.ts). Not product.
 *
 * - Clients: zeromq.js (its bundled libzmq) and, when `python3 -c "import zmq"` works, pyzmq (the libzmq a
 *   real salt-minion runs with) connect as SUB and REQ to a plain TCP listener that answers with brine's own
 *   greeting and READY; every byte they send in 600 ms is recorded (REQ: one request `hello`).
 * - Servers: a libzmq PUB and ROUTER are sent a SUB's / REQ's greeting and READY by a plain TCP client;
 *   their greeting and READY are recorded (the golden bytes of what brine's side sends).
 *
 *   node dist/tools/zmtp-capture.js > test/fixtures/zmtp/captures.json
 */
import net from "node:net";
import { execFileSync, spawn } from "node:child_process";
import * as zmq from "zeromq";
import { greeting, readyCommand, type ZmtpRole } from "../src/shared/protocol/zmtp.js";
import { freePort } from "./free-port.js";

const listenMs = 600;
/** the Python real-salt runs (the distribution's, with python3-zmq): SALT_PY, as ../shared/real-salt reads it */
const pythonBin = process.env.SALT_PY ?? "/usr/bin/python3";

interface Capture {
  peer: string;
  role: string;
  what: string;
  hex: string;
}

/** Listens as `role` with brine's greeting and READY; resolves with the bytes the first peer sent in listenMs. */
async function listenAndRecord(role: ZmtpRole, port: number, minor = 1): Promise<Buffer> {
  return new Promise((resolve) => {
    const server = net.createServer((sock) => {
      const got: Buffer[] = [];
      const g = greeting();
      g[11] = minor; // 0: a ZMTP 3.0 server, to which libzmq sends subscriptions as messages
      sock.write(g);
      let sentReady = false;
      sock.on("data", (d) => {
        got.push(d);
        const n = got.reduce((a, b) => a + b.length, 0);
        if (!sentReady && n >= 64) {
          sentReady = true;
          sock.write(readyCommand(role));
        }
      });
      setTimeout(() => {
        sock.destroy();
        server.close();
        resolve(Buffer.concat(got));
      }, listenMs);
    });
    server.listen(port, "127.0.0.1");
  });
}

/** Connects to a libzmq server socket as `peerType` and records what it sends in listenMs. */
async function connectAndRecord(port: number, peerType: string): Promise<Buffer> {
  return new Promise((resolve) => {
    const sock = net.connect(port, "127.0.0.1");
    const got: Buffer[] = [];
    sock.on("connect", () => {
      sock.write(greeting());
      sock.write(readyCommand(peerType));
    });
    sock.on("data", (d) => got.push(d));
    setTimeout(() => {
      sock.destroy();
      resolve(Buffer.concat(got));
    }, listenMs);
  });
}

function pyzmqVersion(): string | undefined {
  try {
    return execFileSync(pythonBin, ["-c", "import zmq; print(zmq.__version__, zmq.zmq_version())"], { encoding: "utf8" }).trim();
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  const out: Record<string, Capture> = {};
  const js = `zeromq.js (libzmq ${zmq.version})`;

  // clients of zeromq.js
  for (const [name, role, make, minor] of [
    ["js-sub-all-zmtp30", "PUB", async (p: number) => {
      const s = new zmq.Subscriber({ linger: 0 });
      s.subscribe("");
      s.subscribe("broadcast");
      s.connect(`tcp://127.0.0.1:${p}`);
      return () => s.close();
    }, 0],
    ["js-sub-all", "PUB", async (p: number) => {
      const s = new zmq.Subscriber({ linger: 0 });
      s.subscribe("");
      s.connect(`tcp://127.0.0.1:${p}`);
      return () => s.close();
    }],
    ["js-sub-topics", "PUB", async (p: number) => {
      const s = new zmq.Subscriber({ linger: 0 });
      s.subscribe("broadcast");
      s.subscribe("a94a8fe5ccb19ba61c4c0873d391e987982fbbd3");
      s.connect(`tcp://127.0.0.1:${p}`);
      return () => s.close();
    }],
    ["js-req", "ROUTER", async (p: number) => {
      const s = new zmq.Request({ linger: 0 });
      s.connect(`tcp://127.0.0.1:${p}`);
      void s.send("hello").catch(() => {});
      return () => s.close();
    }],
    ["js-dealer", "ROUTER", async (p: number) => {
      const s = new zmq.Dealer({ linger: 0, routingId: "minion-7" });
      s.connect(`tcp://127.0.0.1:${p}`);
      void s.send(["", "hello"]).catch(() => {});
      return () => s.close();
    }],
  ] as const) {
    const port = await freePort();
    const rec = listenAndRecord(role, port, minor ?? 1);
    const stop = await make(port);
    out[name] = { peer: js, role, what: name, hex: (await rec).toString("hex") };
    stop();
  }

  // clients of pyzmq
  const py = pyzmqVersion();
  if (py) {
    for (const [name, role, code] of [
      ["py-sub-all", "PUB", "s=c.socket(zmq.SUB); s.setsockopt(zmq.SUBSCRIBE, b''); s.connect(u)"],
      ["py-req", "ROUTER", "s=c.socket(zmq.REQ); s.connect(u); s.send(b'hello')"],
    ] as const) {
      const port = await freePort();
      const rec = listenAndRecord(role, port);
      const child = spawn(pythonBin, ["-c", `import zmq, time\nc=zmq.Context(); u='tcp://127.0.0.1:${port}'\n${code}\ntime.sleep(${(listenMs + 300) / 1000})`], { stdio: "ignore" });
      out[name] = { peer: `pyzmq ${py.split(" ")[0]} (libzmq ${py.split(" ")[1]})`, role, what: name, hex: (await rec).toString("hex") };
      child.kill();
    }
  }

  // libzmq servers: what a PUB and a ROUTER send a peer
  for (const [name, peerType, make] of [
    ["js-pub-server", "SUB", () => new zmq.Publisher({ linger: 0 })],
    ["js-router-server", "REQ", () => new zmq.Router({ linger: 0 })],
  ] as const) {
    const port = await freePort();
    const s = make();
    await s.bind(`tcp://127.0.0.1:${port}`);
    out[name] = { peer: js, role: peerType, what: name, hex: (await connectAndRecord(port, peerType)).toString("hex") };
    s.close();
  }
  process.stdout.write(JSON.stringify(out, null, 2) + "\n");
}

await main();
