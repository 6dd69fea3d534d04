/**
 * The stress driver for ending a runner thread in the middle of a request to the master (run as a child
 * process: an abort ends it, not the test). Each round starts the real runner thread (src/runners/runner-thread.ts)
 * on a custom runner that sends a clear request to a ROUTER that never answers, waits until the request is out,
 * and ends the thread as its host would:
 *   end:       endThread (src/shared/thread-kit.ts): `stop`, the thread closes its sockets, `stopped`, terminate
 *   terminate: a bare worker.terminate() (what the control server did before)
 *   queued:    endThread, with the runner's requests (over 128 bytes, so zeromq.js does not copy them) sent to a
 *              port nobody listens on: they are still queued in libzmq when the thread closes their sockets, and
 *              libzmq hands each back to the thread's module after the close (src/shared/zmq-settle.ts)
 *   node runner-exit-stress.js <end|terminate|queued> <rounds>
 * Prints "rounds N" when every round ended.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Worker } from "node:worker_threads";
import * as zmq from "zeromq";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { endThread } from "../../src/shared/thread-kit.js";
import type { RunnerInit } from "../../src/runners/messages.js";
import { freePort } from "../../tools/free-port.js";

const mode = process.argv[2];
const rounds = Number(process.argv[3] ?? 10);
const root = mkdtempSync(path.join(os.tmpdir(), "brine-runner-exit-"));
const port = await freePort();
/** a port nobody binds: connections are refused, requests stay queued in libzmq */
const deadPort = await freePort();
const silent = new zmq.Router({ linger: 0 });
await silent.bind(`tcp://127.0.0.1:${port}`);
// it reads what comes and answers nothing: every request waits for its reply; each arrival wakes the round
let arrived: (() => void) | undefined;
void (async () => {
  for await (const _ of silent) {
    void _;
    arrived?.();
  }
})().catch(() => undefined);
const cfg = { ...masterDefaults(), root_dir: root, cachedir: path.join(root, "cache"), sock_dir: path.join(root, "sock"), pki_dir: path.join(root, "pki"), interface: "127.0.0.1", ret_port: port };
mkdirSync(path.join(cfg.cachedir, "extmods", "runners"), { recursive: true });
writeFileSync(path.join(cfg.cachedir, "extmods", "runners", "hang.mjs"), `export async function ask(ctx) {\n  ctx.print("asking");\n  return ctx.client.clearRequest({ cmd: "nothing" }, 60);\n}\n`);
// five requests of ~700 bytes each, queued; "queued" once their sends have long been accepted by libzmq
writeFileSync(
  path.join(cfg.cachedir, "extmods", "runners", "queue.mjs"),
  `export async function ask(ctx) {\n  const asks = Array.from({ length: 5 }, () => ctx.client.clearRequest({ cmd: "nothing", pad: "x".repeat(700) }, 60));\n  await new Promise((r) => setTimeout(r, 50));\n  ctx.print("queued");\n  return Promise.all(asks);\n}\n`,
);
try {
  for (let i = 0; i < rounds; i++) {
    const queued = mode === "queued";
    const init: RunnerInit = { cfg: queued ? { ...cfg, ret_port: deadPort } : cfg, fun: queued ? "queue.ask" : "hang.ask", arg: [], kwarg: {}, log: { level: "quiet", file: null, fileLevel: null } };
    // the round goes on once the ROUTER has the request: it is out and its reply awaited (a fixed wait after the
    // runner's print, as before, ended the thread before its send on a loaded box, where nothing could abort)
    const received = new Promise<void>((r) => (arrived = r));
    const w = new Worker(new URL("../../src/runners/runner-thread.js", import.meta.url), { workerData: init });
    await new Promise<void>((resolve, reject) => {
      if (queued) w.on("message", (m: { k?: string; text?: string }) => m.k === "print" && m.text === "queued" && resolve());
      else void received.then(resolve);
      w.once("error", reject);
      w.once("exit", (code) => reject(new Error(`the runner thread exited (code ${code}) before its request`)));
    });
    arrived = undefined;
    w.removeAllListeners("exit");
    w.removeAllListeners("message");
    if (mode === "terminate") await w.terminate();
    else await endThread(w, "runner", { ask: { k: "stop" }, answer: "stopped" }, 2000);
  }
  process.stdout.write(`rounds ${rounds}\n`);
} finally {
  silent.close();
  rmSync(root, { recursive: true, force: true });
}
