/**
 * The libzmq floor of bench/fleet-memory.ts: a bare ZeroMQ ROUTER and PUB in a process of their own, no brine
 * code, that echoes each request. The bench connects N DEALER+SUB pairs to it and reads its RSS: what libzmq
 * (and zeromq.js) cost per connected minion on this box. argv: ROUTER port, PUB port, batch size in bytes
 * (ZMQ_IN_BATCH_SIZE and ZMQ_OUT_BATCH_SIZE on both sockets; 0 = libzmq's default, 8192).
 */
import { readFileSync } from "node:fs";
import * as zmq from "zeromq";
import { setBatchSizes } from "../src/main-thread/zmq-memory.js";

const [retPort, pubPort, batch] = process.argv.slice(2).map(Number) as [number, number, number];
const ctx = new zmq.Context({ maxSockets: 100_000 });
const router = new zmq.Router({ context: ctx, linger: 0, backlog: 5000 });
const pub = new zmq.Publisher({ context: ctx, linger: 0, backlog: 5000 });
if (batch > 0) for (const s of [router, pub]) setBatchSizes(s, batch);
await router.bind(`tcp://127.0.0.1:${retPort}`);
await pub.bind(`tcp://127.0.0.1:${pubPort}`);

const rssKb = () => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync("/proc/self/status", "utf8"))?.[1] ?? NaN);
process.on("message", (m: { t: string }) => {
  if (m.t === "rss") process.send!({ t: "rss", rssKb: rssKb() });
  else if (m.t === "publish") void pub.send(["", Buffer.alloc(300)]).then(() => process.send!({ t: "published" }));
  else if (m.t === "exit") process.exit(0);
});
process.send!({ t: "ready" });
for await (const [id, body] of router) await router.send([id!, body!]);
