/**
 * The stress driver for a thread that ends with zeromq loaded (run as a child process: an abort ends it, not
 * the test that runs it). Each round starts a peer channel thread (peer-channel-thread.ts), waits for its
 * "closed" and ends it at once with worker.terminate(), as the Raft worker's host does after `close`.
 *   node thread-exit-stress.js <rounds> [host]
 * Prints one line: the rounds done and how many had both sessions up before the close.
 */
import { generateKeyPairSync } from "node:crypto";
import { Worker } from "node:worker_threads";
import { freePort } from "../../tools/free-port.js";

const rounds = Number(process.argv[2] ?? 20);
const host = process.argv[3] ?? "127.0.0.1";
const pem = () => generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ type: "pkcs8", format: "pem" }) as string;
const keys = { a: pem(), b: pem() };
let up = 0;
for (let i = 0; i < rounds; i++) {
  // fresh ports each round: a closed ROUTER frees its port on libzmq's I/O thread a moment later
  const ports = { a: await freePort(host), b: await freePort(host) };
  const w = new Worker(new URL("./peer-channel-thread.js", import.meta.url), { workerData: { keys, ports, host } });
  const done = await new Promise<{ up: boolean }>((resolve, reject) => {
    w.once("message", resolve);
    w.once("error", reject);
    w.once("exit", (code) => reject(new Error(`the peer channel thread exited (code ${code}) before it closed`)));
  });
  if (done.up) up++;
  await w.terminate();
}
process.stdout.write(`rounds ${rounds} up ${up}\n`);
