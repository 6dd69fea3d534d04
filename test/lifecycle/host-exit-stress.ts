/**
 * The stress driver for stopping a host while its thread's request to the master waits for the reply (run as a
 * child process: an abort ends it, not the test). The master's request port is a ROUTER that never answers.
 * Each round starts the host's real thread, waits until its request reached that ROUTER, then stops the host:
 *   automation: AutomationHost with a schedule job every second (a runner call: a clear request to ret_port)
 *   api:        ApiHost (rest_cherrypy, plain HTTP on loopback) with a `local_async` call posted to it and taken by
 *               the request lanes, which never answer (the API thread's requests go through its link to the
 *               main thread, not a socket of its own: the stop must end it with an HTTP call in flight)
 *   node host-exit-stress.js <automation|api> <rounds>
 * Prints "rounds N" when every round ended, and each stop's milliseconds.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as zmq from "zeromq";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import { configureLogging } from "../../src/shared/log.js";
import { ensureRootKey } from "../../src/lib/pki/root-key.js";
import { AutomationHost } from "../../src/main-thread/automation-host.js";
import { ApiHost } from "../../src/main-thread/api-host.js";
import { freePort } from "../../tools/free-port.js";

const mode = process.argv[2] as "automation" | "api";
const rounds = Number(process.argv[3] ?? 5);
configureLogging({ level: process.env.STRESS_LOG ?? "quiet" });
const root = mkdtempSync(path.join(os.tmpdir(), "brine-host-exit-"));
const port = await freePort();
const silent = new zmq.Router({ linger: 0 });
await silent.bind(`tcp://127.0.0.1:${port}`);
// it reads what comes and answers nothing: every request waits for its reply
let heard: (() => void) | undefined;
void (async () => {
  for await (const _ of silent) heard?.();
})().catch(() => undefined);
const nextRequest = (ms: number) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no request reached the master's port within ${ms} ms`)), ms);
    heard = () => {
      clearTimeout(t);
      heard = undefined;
      resolve();
    };
  });

function cfgOf(round: number): MasterConfig {
  const dir = path.join(root, String(round));
  const cfg = { ...masterDefaults(), id: "stress", root_dir: dir, cachedir: path.join(dir, "cache"), sock_dir: path.join(dir, "sock"), pki_dir: path.join(dir, "pki"), interface: "127.0.0.1", ret_port: port, timeout: 120 } as MasterConfig;
  for (const d of [cfg.cachedir, cfg.sock_dir, cfg.pki_dir]) mkdirSync(d, { recursive: true });
  ensureRootKey(cfg.cachedir, cfg.user);
  return cfg;
}

async function automationRound(cfg: MasterConfig): Promise<() => Promise<void>> {
  const c = { ...cfg, schedule: { hang: { function: "test.arg", seconds: 1 } } } as MasterConfig;
  const asked = nextRequest(30_000);
  const host = (await AutomationHost.start(c, { subscribe: () => () => {}, fire: () => {}, stopDrainMs: 200 }))!;
  await asked;
  return () => host.stop();
}

async function apiRound(cfg: MasterConfig): Promise<() => Promise<void>> {
  const c = { ...cfg, rest_cherrypy: { port: 0, host: "127.0.0.1", disable_ssl: true }, netapi_enable_clients: ["local_async"] } as MasterConfig;
  let submitted: () => void = () => {};
  const inFlight = new Promise<void>((r) => (submitted = r));
  // the request lanes take the call and never answer it: it is in flight when the host stops
  const host = (await ApiHost.start(c, { submit: () => (submitted(), true), refusedReply: () => Buffer.alloc(0), fire: () => {} }))!;
  const body = JSON.stringify({ client: "local_async", tgt: "*", fun: "test.ping", username: "u", password: "p", eauth: "pam" });
  void fetch(`http://127.0.0.1:${host.port}/run`, { method: "POST", headers: { "content-type": "application/json", accept: "application/json" }, body }).catch(() => undefined);
  await inFlight;
  return () => host.stop();
}

const stops: number[] = [];
try {
  for (let i = 0; i < rounds; i++) {
    const cfg = cfgOf(i);
    const stop = await (mode === "automation" ? automationRound(cfg) : apiRound(cfg));
    // the request is out and its reply awaited
    await new Promise((r) => setTimeout(r, 30));
    const t0 = performance.now();
    await stop();
    stops.push(Math.round(performance.now() - t0));
  }
  process.stdout.write(`rounds ${rounds} stops ${stops.join(" ")}\n`);
} finally {
  silent.close();
  rmSync(root, { recursive: true, force: true });
}
