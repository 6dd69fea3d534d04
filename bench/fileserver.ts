/**
 * Fileserver throughput through a real master (ZMQ ROUTER, request lanes, worker threads, crypto):
 *  - `_serve_file`: 100 concurrent requesters fetch 1 MiB chunks of a large file (what a minion's
 *    fileclient does for a big `salt://` file), MB/s of file data delivered and decrypted;
 *  - `_file_hash`: 100 concurrent requesters ask for the hash of random files of a tree (what every
 *    minion does for each SLS at each state run), requests/s, with the count of files actually hashed
 *    (every file once per worker thread at most: unchanged files are never re-hashed);
 *  - `_file_list` of the same tree, requests/s (served from the list cache).
 * Client and master share this process (and its CPUs); the figures are end-to-end per master.
 */
import { createHash, randomBytes } from "node:crypto";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, utimesSync, writeFileSync, writeSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../src/shared/config/defaults.js";
import { configureLogging } from "../src/shared/log.js";
import { MasterServer } from "../src/main.js";
import { keyPool } from "../src/lib/minion/keys.js";
import { openAesReply, packageAes } from "../src/lib/minion/req-channel.js";
import { TestMinion } from "../src/lib/minion/test-minion.js";
import { ZmqReqTransport } from "../src/lib/zmq-req-client.js";
import { decodeWire, isMap, type WireValue } from "../src/shared/protocol/msgpack.js";
import { MasterContext, newEffects } from "../src/workers/req-handler/context.js";
import { handleRequest } from "../src/workers/req-handler/request.js";
import { installSubsystems } from "../src/workers/req-handler/subsystems.js";
import { KeyStore } from "../src/lib/pki/key-store.js";
import { loadOrCreateKeyPair } from "../src/lib/pki/master-keys.js";
import { SharedSecrets } from "../src/shared/secrets.js";
import { NonceSet } from "../src/shared/nonce-set.js";
import { Crypticle, generateKeyString } from "../src/shared/protocol/crypticle.js";
import { encodeWire } from "../src/shared/protocol/msgpack.js";
import type { BenchOptions, BenchRow } from "./types.js";
import { freePort } from "../tools/free-port.js";

const MiB = 1024 * 1024;
/** Concurrent requesters (the figure). */
const REQUESTERS = 100;


function writeBigFile(file: string, bytes: number): void {
  mkdirSync(path.dirname(file), { recursive: true });
  const fd = openSync(file, "w");
  const block = randomBytes(4 * MiB);
  for (let off = 0; off < bytes; off += block.length) writeSync(fd, block, 0, Math.min(block.length, bytes - off));
  closeSync(fd);
}

/**
 * The master's own cost, one thread: requests through the real request handler (session decrypt, tok,
 * replay check, fileserver, reply encryption) without sockets, lanes or a client in the way.
 */
async function perThread(root: string, srv: string, names: string[], bigBytes: number, keysDir: string, full: boolean): Promise<BenchRow[]> {
  const cfg: MasterConfig = {
    ...masterDefaults(),
    id: "bench_fs_thread",
    pki_dir: path.join(root, "pki-thread"),
    cachedir: path.join(root, "cache-thread"),
    sock_dir: path.join(root, "sock-thread"),
    file_roots: { base: [srv] },
    pillar_roots: { base: [path.join(root, "srv", "pillar")] },
    brine_lmdb_map_bytes: 2 ** 30,
  };
  mkdirSync(path.join(cfg.cachedir, "sessions"), { recursive: true });
  const store = new KeyStore(cfg.pki_dir);
  store.ensureDirs();
  loadOrCreateKeyPair(cfg.pki_dir, "master", 2048);
  const [keys] = (await keyPool(1, { dir: keysDir })).keys;
  store.write("accepted", "bench1", keys!.publicPem);
  const secrets = new SharedSecrets();
  secrets.setAesKey(generateKeyString());
  const ctx = new MasterContext(cfg, { secrets: secrets.sab, nonces: new NonceSet(1 << 20).sab, jids: new SharedArrayBuffer(8) });
  await installSubsystems(ctx);
  const session: Crypticle = ctx.sessions.get("bench1").crypticle;
  const frame = (load: Record<string, unknown>) =>
    encodeWire({
      enc: "aes",
      load: session.dumps({ ...load, id: "bench1", nonce: randomBytes(16).toString("hex"), ts: Math.floor(Date.now() / 1000), tok: keys!.tok }),
      version: 3,
      id: "bench1",
      enc_algo: "OAEP-SHA1",
      sig_algo: "PKCS1v15-SHA1",
    });
  const rows: BenchRow[] = [];
  const chunks = Math.min(bigBytes / MiB, full ? 256 : 64);
  await handleRequest(ctx, frame({ cmd: "_serve_file", path: "big/blob.bin", saltenv: "base", loc: 0 }), newEffects());
  let t0 = process.hrtime.bigint();
  let bytes = 0;
  for (let k = 0; k < chunks; k++) {
    const reply = await handleRequest(ctx, frame({ cmd: "_serve_file", path: "big/blob.bin", saltenv: "base", loc: k * MiB }), newEffects());
    bytes += reply.length;
  }
  let secs = Number(process.hrtime.bigint() - t0) / 1e9;
  rows.push({ figure: "_serve_file 1 MiB chunks through the request handler (per thread)", value: (chunks * MiB) / MiB / secs, unit: "MB/s", better: "higher", note: `${(bytes / MiB).toFixed(0)} MiB of encrypted replies; request building included` });
  const n = full ? 50_000 : 10_000;
  const frames = Array.from({ length: n }, (_, i) => frame({ cmd: "_file_hash", path: names[(i * 7919) % names.length], saltenv: "base" }));
  for (const name of names) await handleRequest(ctx, frame({ cmd: "_file_hash", path: name, saltenv: "base" }), newEffects()); // hash each once
  t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: 64 }, async (_, w) => {
    for (let i = w; i < n; i += 64) await handleRequest(ctx, frames[i]!, newEffects());
  }));
  secs = Number(process.hrtime.bigint() - t0) / 1e9;
  rows.push({ figure: "_file_hash through the request handler (per thread)", value: n / secs, unit: "req/s", better: "higher", note: `${names.length} files, hashes cached after the first request for each` });
  await ctx.store.close();
  return rows;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  configureLogging({ level: "quiet" });
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-bench-fs-"));
  const srv = path.join(root, "srv", "salt");
  const bigBytes = (opts.full ? 512 : 128) * MiB;
  const treeFiles = opts.full ? 20_000 : 2_000;
  const seconds = opts.full ? 10 : 3;
  writeBigFile(path.join(srv, "big", "blob.bin"), bigBytes);
  const names: string[] = [];
  for (let i = 0; i < treeFiles; i++) {
    const rel = `tree/d${i % 50}/s${i}.sls`;
    names.push(rel);
    mkdirSync(path.join(srv, path.dirname(rel)), { recursive: true });
    writeFileSync(path.join(srv, rel), `state_${i}:\n  test.nop:\n    - name: ${createHash("sha1").update(String(i)).digest("hex")}\n`);
  }
  const past = Date.now() / 1000 - 3600;
  for (const rel of [...names, "big/blob.bin"]) utimesSync(path.join(srv, rel), past, past);

  const threads = Math.max(2, Math.min(4, os.cpus().length));
  const cfg: MasterConfig = {
    ...masterDefaults(),
    id: "bench_fs",
    interface: "127.0.0.1",
    root_dir: root,
    pki_dir: path.join(root, "pki", "master"),
    cachedir: path.join(root, "cache"),
    sock_dir: path.join(root, "sock"),
    log_file: path.join(root, "log", "master"),
    file_roots: { base: [srv] },
    pillar_roots: { base: [path.join(root, "srv", "pillar")] },
    worker_threads: threads,
    auto_accept: true,
    loop_interval: 3600,
    ret_port: await freePort(),
    publish_port: await freePort(),
  };
  const keysDir = path.join(os.tmpdir(), "brine-bench-fs-keys");
  const rows: BenchRow[] = await perThread(root, srv, names, bigBytes, keysDir, opts.full);
  const server = new MasterServer(cfg);
  await server.start();
  const [keys] = (await keyPool(1, { dir: keysDir })).keys;
  const m = new TestMinion({ id: "benchfs1", master: "127.0.0.1", retPort: cfg.ret_port, keys: keys!, acceptanceWaitMs: 100, randomReauthDelayMs: 0 });
  const transports = Array.from({ length: REQUESTERS }, () => new ZmqReqTransport({ host: "127.0.0.1", port: cfg.ret_port }));
  try {
    await m.start();
    const ask = async (t: ZmqReqTransport, load: Record<string, unknown>): Promise<WireValue> => {
      const pkg = packageAes(m, { ...load, id: m.id });
      const raw = await t.request(pkg.body, { timeoutMs: 60_000, tries: 1 });
      return openAesReply(m.requestCrypticle()!, decodeWire(raw), pkg.nonce);
    };

    // --- _serve_file: 100 requesters pull 1 MiB chunks of the big file
    const chunks = bigBytes / MiB;
    await ask(transports[0]!, { cmd: "_serve_file", path: "big/blob.bin", saltenv: "base", loc: 0 });
    let next = 0;
    let bytes = 0;
    let t0 = process.hrtime.bigint();
    const rounds = opts.full ? 4 : 2;
    await Promise.all(
      transports.map(async (t) => {
        for (;;) {
          const k = next++;
          if (k >= chunks * rounds) return;
          const r = await ask(t, { cmd: "_serve_file", path: "big/blob.bin", saltenv: "base", loc: (k % chunks) * MiB });
          if (isMap(r) && Buffer.isBuffer(r.data)) bytes += r.data.length;
        }
      }),
    );
    let secs = Number(process.hrtime.bigint() - t0) / 1e9;
    if (bytes !== bigBytes * rounds) throw new Error(`_serve_file delivered ${bytes} of ${bigBytes * rounds} bytes`);
    rows.push({ figure: `_serve_file, ${REQUESTERS} concurrent requesters, 1 MiB chunks`, value: bytes / MiB / secs, unit: "MB/s", better: "higher", note: `${(bytes / MiB).toFixed(0)} MiB in ${secs.toFixed(1)} s, ${threads} worker threads` });

    // --- baseline: the cheapest AES command through the same path (_file_envs), for comparison
    let envs = 0;
    t0 = process.hrtime.bigint();
    const envUntil = Date.now() + seconds * 1000;
    await Promise.all(
      transports.map(async (t) => {
        while (Date.now() < envUntil) {
          await ask(t, { cmd: "_file_envs" });
          envs++;
        }
      }),
    );
    secs = Number(process.hrtime.bigint() - t0) / 1e9;
    const envRate = envs / secs;

    // --- _file_hash: 100 requesters, random files of the tree
    let hashes = 0;
    const hashRun = async (duration: number) => {
      const until = Date.now() + duration * 1000;
      await Promise.all(
        transports.map(async (t, i) => {
          let j = i;
          while (Date.now() < until) {
            j = (j * 7919 + 104729) % treeFiles;
            const r = await ask(t, { cmd: "_file_hash", path: names[j], saltenv: "base" });
            if (!isMap(r) || typeof r.hsum !== "string") throw new Error(`_file_hash failed: ${JSON.stringify(r)}`);
            hashes++;
          }
        }),
      );
    };
    await hashRun(1); // warm: each thread hashes the files it is asked for once
    hashes = 0;
    t0 = process.hrtime.bigint();
    await hashRun(seconds);
    secs = Number(process.hrtime.bigint() - t0) / 1e9;
    rows.push({ figure: `_file_hash, ${REQUESTERS} concurrent requesters, ${treeFiles} files`, value: hashes / secs, unit: "req/s", better: "higher", note: `${hashes} requests in ${secs.toFixed(1)} s; _file_envs (no file work) ${envRate.toFixed(0)} req/s on the same path` });

    // --- _file_list: the whole tree from the list cache
    let lists = 0;
    t0 = process.hrtime.bigint();
    const until = Date.now() + seconds * 1000;
    await Promise.all(
      transports.slice(0, 20).map(async (t) => {
        while (Date.now() < until) {
          const r = await ask(t, { cmd: "_file_list", saltenv: "base", prefix: "" });
          if (!Array.isArray(r) || r.length !== treeFiles + 1) throw new Error("_file_list incomplete");
          lists++;
        }
      }),
    );
    secs = Number(process.hrtime.bigint() - t0) / 1e9;
    rows.push({ figure: `_file_list of ${treeFiles + 1} files, 20 concurrent requesters`, value: lists / secs, unit: "req/s", better: "higher", note: "served from the list cache (no walk per request)" });
  } finally {
    for (const t of transports) t.close();
    await m.stop().catch(() => undefined);
    await server.stop();
    rmSync(root, { recursive: true, force: true });
  }
  return rows;
}
