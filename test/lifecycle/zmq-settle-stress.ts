/**
 * The stress driver for a thread that ends right after closing zeromq sockets with frames still queued (run as
 * a child process: an abort ends it, not the test). Each round starts a thread that opens DEALERs to a port
 * nobody listens on (their frames stay in libzmq's pipes), queues frames over 128 bytes (zeromq.js sends those
 * without copying: libzmq hands each back to the thread's module when it drops it), closes every DEALER
 * (linger 0, as brine's are) and is then ended with terminate():
 *   settle: the thread waits until libzmq has destroyed its sockets (ZmqSettle, src/shared/zmq-settle.ts) first
 *   bare:   it does not (what the join host's DEALERs did before)
 *   node zmq-settle-stress.js <settle|bare> <rounds>
 * Prints "rounds N" when every round ended.
 */
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import * as zmq from "zeromq";
import { ZmqSettle } from "../../src/shared/zmq-settle.js";
import { freePort } from "../../tools/free-port.js";

/** DEALERs per round, count */
const socketsPerRound = 20;
/** frames queued per DEALER, count */
const framesPerSocket = 5;
/** bytes per frame: over zeromq.js's 128-byte copy threshold */
const frameBytes = 4096;
/** how long a settling thread waits for libzmq, ms */
const settleWaitMs = 5_000;

if (isMainThread) {
  const mode = process.argv[2];
  const rounds = Number(process.argv[3] ?? 50);
  if (mode !== "settle" && mode !== "bare") throw new Error("usage: zmq-settle-stress.js <settle|bare> <rounds>");
  const port = await freePort(); // free now, and nobody binds it: connections are refused, frames stay queued
  for (let i = 0; i < rounds; i++) {
    const w = new Worker(new URL(import.meta.url), { workerData: { port, settle: mode === "settle" } });
    const left = await new Promise<unknown>((resolve) => w.once("message", resolve));
    if (left !== 0) throw new Error(`round ${i}: ${String(left)} socket(s) not destroyed within ${settleWaitMs} ms`);
    await w.terminate();
  }
  process.stdout.write(`rounds ${rounds}\n`);
} else {
  const { port, settle } = workerData as { port: number; settle: boolean };
  const watch = new ZmqSettle();
  const socks: zmq.Dealer[] = [];
  for (let k = 0; k < socketsPerRound; k++) {
    const s = new zmq.Dealer({ linger: 0 });
    if (settle) watch.watch(s);
    s.connect(`tcp://127.0.0.1:${port}`);
    for (let j = 0; j < framesPerSocket; j++) s.send(Buffer.alloc(frameBytes, j)).catch(() => undefined);
    socks.push(s);
  }
  await new Promise((r) => setImmediate(r));
  for (const s of socks) s.close();
  parentPort!.postMessage(settle ? await watch.settled(settleWaitMs) : 0);
}
