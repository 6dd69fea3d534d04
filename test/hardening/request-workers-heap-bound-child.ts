/**
 * The child of request-workers-heap-bound.test.ts, run in a process of its own because what it checks is that the
 * master's process lives and its request lane answers: a master (one request-lane worker) is sent at once, by one
 * signed-in minion on one DEALER (the transport lets a DEALER have requestsInFlightPerPeerMax requests in flight),
 * BIG (argv[2]) returns of a minion-initiated job (`jid: req`, whose load a worker keeps while the job's load
 * commits) of ELEMENTS (argv[3]) one-byte non-UTF-8 strings each (the costliest element once decoded: a Buffer view,
 * 104 bytes of V8 heap); then a bystander minion sends an ordinary return. Prints one JSON line of what it saw
 * (every heavy reply by kind, the bystander's, what the job cache holds, the decode-budget refusals the metrics
 * counted, the lines the master logged about its workers and their budget); exits 0 when every reply came, 3 when
 * one did not within REPLY_MS (argv[4], default 120 s): then without stopping the master.
 */
import { readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { mkdtempSync } from "node:fs";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";
import { formatJid } from "../../src/shared/protocol/jid.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { JobCache } from "../../src/lib/store/job-cache.js";
import { startTestMaster } from "../helpers/master.js";
import { scrapeMetrics } from "../helpers/metrics.js";
import { fastMinion, testKeys, v3RequestFrame } from "../helpers/minions.js";

const BIG = Number(process.argv[2]);
const ELEMENTS = Number(process.argv[3]);
/** how long the child waits for each reply, ms */
const REPLY_MS = Number(process.argv[4] ?? 120_000);

const root = mkdtempSync(path.join(os.tmpdir(), "brine-reqheap-"));
const logFile = path.join(root, "master.log");
try {
  const tm = await startTestMaster({ auto_accept: true, worker_threads: 2, brine_metrics: { port: 0 } }, undefined, { logFile });
  const [kh, kb] = await testKeys(2);
  const heavy = fastMinion(tm, "heavy", kh!);
  const bystander = fastMinion(tm, "bystander", kb!);
  await heavy.start();
  await bystander.start();
  const raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: REPLY_MS });
  const side = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: REPLY_MS });
  const big = new Array(ELEMENTS).fill(Buffer.from([0xff]));
  const frames = Array.from({ length: BIG }, () => v3RequestFrame(heavy, kh!, { cmd: "_return", jid: "req", fun: "test.arg", fun_args: [], retcode: 0, success: true, return: big }));
  const t0 = Date.now();
  for (const f of frames) await raw.sendOnly([Buffer.alloc(0), f]);
  const jid = formatJid(Date.now() - 1000, 0);
  const bys = side.aes({ cmd: "_return", id: "bystander", jid, fun: "test.ping", retcode: 0, success: true, return: true }, { key: bystander.creds!.session!, id: "bystander", keys: kb!, timeoutMs: REPLY_MS });
  const kinds: Record<string, number> = {};
  let answered = 0;
  for (; answered < BIG; answered++) {
    let reply: Buffer[];
    try {
      reply = await raw.receive(REPLY_MS);
    } catch {
      break; // no reply within REPLY_MS: the master is wedged or its worker died without answering
    }
    const body = decodeWire(reply[reply.length - 1]!);
    // a stored return's reply is sealed with the request's session key; a refusal is a clear string or map
    const kind = Buffer.isBuffer(body) ? "sealed" : JSON.stringify(body);
    kinds[kind] = (kinds[kind] ?? 0) + 1;
  }
  const b = await bys.catch((e: Error) => ({ reply: e.message, decrypted: undefined }));
  const ms = Date.now() - t0;
  const log = readFileSync(logFile, "utf8").split("\n").filter((l) => /lane|worker|heap|budget|memory/i.test(l)).map((l) => l.slice(0, 400)).slice(0, 20);
  if (answered < BIG) {
    // the master is not stopped (its stop would wait for the wedged lane): what was seen, then out
    console.log(JSON.stringify({ ms, answered, kinds, bystander: b.decrypted === undefined ? JSON.stringify(b.reply) : "sealed", log }));
    process.exit(3);
  }
  const refusedCounted = (await scrapeMetrics(tm)).get('brine_request_lane_refused_total{lane="req",reason="decode_budget"}');
  raw.close();
  side.close();
  await heavy.stop();
  await bystander.stop();
  await tm.stop(true);
  const jobs = new JobCache(openStore(tm.cfg));
  let heavyStored = 0;
  for (const j of jobs.listJids()) jobs.eachReturn(j, (id, rec) => id === "heavy" && Array.isArray(rec.return) && rec.return.length === ELEMENTS && heavyStored++);
  const bystanderStored = jobs.hasReturn(jid, "bystander");
  console.log(JSON.stringify({ ms, answered, kinds, bystander: b.decrypted === undefined ? JSON.stringify(b.reply) : "sealed", bystanderStored, heavyStored, refusedCounted, log }));
} finally {
  rmSync(root, { recursive: true, force: true });
}
