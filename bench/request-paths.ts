/**
 * Micro-benchmarks of the two hot request paths, per thread, through the real request handler
 * (`handleRequest` on a MasterContext with its LMDB store in a temp dir):
 *  - auth: a returning minion's `_auth` (token decrypt, AES/session/token OAEP to the minion, signed reply);
 *  - return: a v3 `_return` (decode, session decrypt, tok check, replay check, event, durable LMDB
 *    write in batches of 64 like the lanes make, encrypted reply).
 * Also Crypticle and msgpack figures (reference-points A3).
 */
import { generateKeyPairSync, randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults } from "../src/config/defaults.js";
import { MasterContext, newEffects } from "../src/master/context.js";
import { handleRequest } from "../src/master/request.js";
import { loadOrCreateKeyPair } from "../src/pki/master-keys.js";
import { KeyStore } from "../src/pki/key-store.js";
import { durable } from "../src/store/lmdb-env.js";
import { SharedSecrets } from "../src/shared/secrets.js";
import { NonceSet } from "../src/shared/nonce-set.js";
import { Crypticle, generateKeyString } from "../src/protocol/crypticle.js";
import { decodeWire, encodeWire } from "../src/protocol/msgpack.js";
import { oaepEncrypt, privateKey, publicKey } from "../src/protocol/rsa.js";
import { x931Sign } from "../src/protocol/x931.js";
import { cleanKey } from "../src/protocol/pem.js";
import { configureLogging } from "../src/log.js";
import { batchFramesMax, concurrentTasksPerWorker } from "../src/workers/req-handler/pool.js";
import type { BenchOptions, BenchRow } from "./types.js";
import { mainThreadCpuUs } from "./thread-cpu.js";

function rate(n: number, ns: bigint): number {
  return n / (Number(ns) / 1e9);
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  configureLogging({ level: "quiet" });
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-bench-"));
  const cfg = { ...masterDefaults(), id: "bench", pki_dir: path.join(root, "pki"), cachedir: path.join(root, "cache"), sock_dir: path.join(root, "sock"), brine_lmdb_map_bytes: 2 ** 32 };
  mkdirSync(path.join(cfg.cachedir, "sessions"), { recursive: true });
  const store = new KeyStore(cfg.pki_dir);
  store.ensureDirs();
  const mk = loadOrCreateKeyPair(cfg.pki_dir, "master", 2048);
  const secrets = new SharedSecrets();
  secrets.setAesKey(generateKeyString());
  const nonces = new NonceSet(1 << 20);
  const ctx = new MasterContext(cfg, { secrets: secrets.sab, nonces: nonces.sab, jids: new SharedArrayBuffer(8) });

  const { privateKey: mp, publicKey: mpub } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const minionPub = mpub.export({ type: "spki", format: "pem" }) as string;
  const minionPriv = privateKey(mp.export({ type: "pkcs1", format: "pem" }) as string);
  store.write("accepted", "bench1", minionPub);
  const masterPub = publicKey(mk.publicPem);
  const rows: BenchRow[] = [];

  // --- auth path (BRINE_BENCH_PART=return skips to the return path, for profiling it alone)
  const part = process.env.BRINE_BENCH_PART;
  const authN = part === "return" ? 1 : opts.full ? 2000 : 400;
  const authFrames = Array.from({ length: authN }, () =>
    encodeWire({
      enc: "clear",
      load: { cmd: "_auth", id: "bench1", nonce: randomUUID().replace(/-/g, ""), enc_algo: "OAEP-SHA1", sig_algo: "PKCS1v15-SHA1", token: oaepEncrypt(masterPub, Buffer.from(generateKeyString())), pub: cleanKey(minionPub) },
      version: 3,
    }),
  );
  await handleRequest(ctx, authFrames[0]!, newEffects());
  // The RSA-bound figure of one sign-in on this machine: one private decrypt + one private sign.
  // Measured interleaved with the auth path in rounds, so both see the same machine load.
  const k = privateKey(mk.privatePem);
  const blob = oaepEncrypt(masterPub, Buffer.from(generateKeyString()));
  const { privateDecrypt, sign, constants } = await import("node:crypto");
  // many short rounds, so load swings on a shared box hit both sides alike
  const rounds = 40;
  const per = Math.max(1, Math.floor(authN / rounds));
  let authNs = 0n;
  let rsaNs = 0n;
  for (let r = 0; r < rounds; r++) {
    let t = process.hrtime.bigint();
    for (let i = r * per; i < (r + 1) * per; i++) await handleRequest(ctx, authFrames[i % authN]!, newEffects());
    authNs += process.hrtime.bigint() - t;
    t = process.hrtime.bigint();
    for (let i = 0; i < per; i++) {
      privateDecrypt({ key: k, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha1" }, blob);
      sign("sha1", blob, k);
    }
    rsaNs += process.hrtime.bigint() - t;
  }
  const authRate = rate(rounds * per, authNs);
  const rsaBound = rate(rounds * per, rsaNs);
  let t0 = process.hrtime.bigint();
  rows.push({ figure: "auth path, returning minion (per thread)", value: authRate, unit: "auth/s", target: rsaBound / 1.5, better: "higher", note: `RSA-bound ${rsaBound.toFixed(0)}/s on this box; target = within 1.5x` });

  // --- return path (v3)
  const session = ctx.sessions.get("bench1").crypticle;
  const tok = x931Sign(minionPriv, Buffer.from("salt"));
  // the first warmN returns warm the path up (a long-running worker is past its JIT tiers); then retN are timed
  const warmN = 4_000;
  const retN = opts.full ? 100_000 : 40_000;
  const jidBase = 20260101000000000000n;
  const retFrames = Array.from({ length: warmN + retN }, (_, i) =>
    encodeWire({
      enc: "aes",
      load: session.dumps({ cmd: "_return", id: "bench1", success: true, return: true, retcode: 0, jid: (jidBase + BigInt(i)).toString(), fun: "test.ping", fun_args: [], user: "root", _stamp: "2026-11-21T15:54:04.342049", nonce: randomBytes(16).toString("hex"), ts: Math.floor(Date.now() / 1000), tok }),
      version: 3,
      id: "bench1",
      enc_algo: "OAEP-SHA1",
      sig_algo: "PKCS1v15-SHA1",
    }),
  );
  // As a lane worker runs it: batches of batchFramesMax, concurrentTasksPerWorker of them in flight,
  // so LMDB folds the writes of several batches into one durable transaction.
  let next = 0;
  let end = warmN;
  const runBatches = async () => {
    while (next < end) {
      const i = next;
      next += batchFramesMax;
      const fx = newEffects();
      await Promise.all(retFrames.slice(i, Math.min(i + batchFramesMax, end)).map((f) => handleRequest(ctx, f, fx)));
    }
  };
  await Promise.all(Array.from({ length: concurrentTasksPerWorker }, runBatches));
  next = warmN;
  end = warmN + retN;
  const cpu0 = mainThreadCpuUs();
  t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: concurrentTasksPerWorker }, runBatches));
  const retRate = rate(retN, process.hrtime.bigint() - t0);
  const cpu1 = mainThreadCpuUs();
  const check = decodeWire(await handleRequest(ctx, retFrames[0]!, newEffects()));
  if (check !== "bad load") throw new Error("bench: a replayed return was not refused");
  rows.push({ figure: "return path, v3 _return to durable LMDB (per thread)", value: retRate, unit: "returns/s", target: 40_000, better: "higher", note: `batches of ${batchFramesMax}, ${concurrentTasksPerWorker} in flight, as a lane worker runs them` });
  if (cpu0 !== undefined && cpu1 !== undefined && cpu1 > cpu0) {
    // the same run counted in the request thread's own CPU time: what one thread does per CPU-second,
    // apart from time the box gave to other processes and from fsync waits (LMDB's writer is another thread)
    const usPer = (cpu1 - cpu0) / retN;
    rows.push({ figure: "return path, per CPU-second of the request thread", value: 1e6 / usPer, unit: "returns/s", target: 40_000, better: "higher", note: `${usPer.toFixed(1)} µs of thread CPU per return (10 ms clock ticks)` });
  }

  // --- Crypticle and msgpack (A3)
  const c = new Crypticle(generateKeyString());
  const payload = { cmd: "_return", id: "m1", success: true, return: "x".repeat(200), retcode: 0, jid: "20261121155404239755", fun: "test.ping" };
  const n = 50_000;
  t0 = process.hrtime.bigint();
  let last: Buffer = Buffer.alloc(0);
  for (let i = 0; i < n; i++) last = c.dumps(payload);
  rows.push({ figure: "Crypticle encrypt, ~300 B", value: rate(n, process.hrtime.bigint() - t0), unit: "ops/s", target: 75_000, better: "higher" });
  t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) c.loads(last);
  rows.push({ figure: "Crypticle decrypt, ~300 B", value: rate(n, process.hrtime.bigint() - t0), unit: "ops/s", target: 140_000, better: "higher" });
  const packed = encodeWire(payload);
  t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) decodeWire(packed);
  rows.push({ figure: "wire msgpack decode (strict), ~300 B", value: rate(n, process.hrtime.bigint() - t0), unit: "ops/s", target: 687_000 / 2, better: "higher", note: "target: half of msgpackr's unchecked decode" });

  // --- LMDB group commit: many concurrent durable puts share transactions (reference A3: 536k/s)
  const lmN = opts.full ? 200_000 : 50_000;
  const rec = { return: true, retcode: 0, success: true, fun: "test.ping", fun_args: [] };
  t0 = process.hrtime.bigint();
  const puts: Promise<boolean>[] = [];
  for (let i = 0; i < lmN; i++) puts.push(durable(ctx.store.returns.put(`bench-gc/${i}`, rec)));
  await Promise.all(puts);
  rows.push({ figure: "LMDB durable puts, group commit (300 B)", value: rate(lmN, process.hrtime.bigint() - t0), unit: "puts/s", target: 100_000, better: "higher", note: "all in flight at once; each resolves after its fsync'd transaction" });

  await ctx.store.close();
  rmSync(root, { recursive: true, force: true });
  void writeFileSync;
  return rows;
}
