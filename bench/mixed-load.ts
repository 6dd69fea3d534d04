/**
 * `_return` latency under a mixed load (issue 14: "a `_return` never waits for the slowest frame of its
 * batch"). A real master process (`worker_threads: 2`: one request thread per lane, the box has 2 cores)
 * gets, for `seconds`, from this process over ZeroMQ:
 * - returns: `returners` v3 minions, each with one `_return` in flight at a time, as a Salt minion sends
 *   them (its request client waits for each reply); each round trip is timed;
 * - pillar renders: `pillarMinions` minions asking `_pillar` in a loop (a Jinja SLS of `pillarKeys` keys, and
 *   a `cmd_json` ext_pillar that takes `extPillarMs`: an external lookup the request thread waits on, not CPU);
 * - file chunks: `fileMinions` minions reading a 4 MiB file by `_serve_file`, chunk after chunk;
 * - sign-ins: `signers` clients sending `_auth` for an accepted minion in a loop (RSA on the clear lane);
 * the last three paced (a pause after each answer), so that the returns are most of the requests.
 * The returns share the request lane (and so batches) with the pillar renders and file chunks. Reported:
 * the returns' round-trip p50/p99, the counts of each kind, and the master's CPU (all its threads) per
 * request and per second. The load generator runs on the same cores: compare runs on one box, alternated.
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { Crypticle } from "../src/shared/protocol/crypticle.js";
import { decodeWire } from "../src/shared/protocol/msgpack.js";
import { keyPool, type MinionKeys } from "../src/lib/minion/keys.js";
import { RawClient } from "../src/lib/minion/raw-client.js";
import { buildAuthRequest, handleAuthReply, newNonce, newSignInState, type SignInConfig } from "../src/lib/minion/sign-in.js";
import { packSalt, sealSalt } from "../src/lib/minion/wire.js";
import { startBrineMaster } from "./swarm.js";
import { cpuSecondsOf } from "../tools/swarm/proc-stats.js";
import type { BenchOptions, BenchRow } from "./types.js";

const returners = 32;
const pillarMinions = 2;
const fileMinions = 2;
const signers = 1;
/** keys of the pillar SLS each `_pillar` renders (a Jinja loop) */
const pillarKeys = 300;
/** how long the pillar's cmd_json ext_pillar takes (a `sleep` before it prints), ms */
const extPillarMs = 50;
/** pause after each pillar render, file chunk and sign-in of one client, ms (the returns are not paced) */
const pillarPauseMs = 50;
const chunkPauseMs = 10;
const signInPauseMs = 20;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const fileBytes = 4 * 1024 * 1024;

function processCpuUs(pid: number): number {
  return (cpuSecondsOf(`/proc/${pid}/stat`) ?? Number.NaN) * 1e6;
}

function quantile(sorted: Float64Array, q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : Number.NaN;
}

interface Signed {
  id: string;
  keys: MinionKeys;
  client: RawClient;
  session: Crypticle;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const seconds = opts.full ? 60 : 20;
  const srv = mkdtempSync(path.join(os.tmpdir(), "brine-bench-mixed-"));
  mkdirSync(path.join(srv, "pillar"));
  mkdirSync(path.join(srv, "salt"));
  writeFileSync(path.join(srv, "pillar", "top.sls"), "base:\n  '*':\n    - big\n");
  writeFileSync(path.join(srv, "pillar", "big.sls"), `{% for i in range(${pillarKeys}) %}\nkey{{ i }}: value-{{ i }}-{{ grains.get('id', 'x') }}\n{% endfor %}\n`);
  writeFileSync(path.join(srv, "salt", "big.bin"), randomBytes(fileBytes));
  const all = returners + pillarMinions + fileMinions + 1;
  const { keys } = await keyPool(all);
  const master = await startBrineMaster({ worker_threads: 2, file_roots: { base: [path.join(srv, "salt")] }, pillar_roots: { base: [path.join(srv, "pillar")] }, ext_pillar: [{ cmd_json: `sh -c "sleep ${extPillarMs / 1000}; echo '{\\"ext\\": true}'"` }] });
  const clients: RawClient[] = [];
  let stop = false;
  try {
    const signIn = async (i: number): Promise<Signed> => {
      const client = new RawClient({ host: "127.0.0.1", port: master.retPort, timeoutMs: 60_000 });
      clients.push(client);
      const id = `mixed-${i}`;
      const cfg: SignInConfig = { id, keys: keys[i]!, protocol: "v3", encAlgo: "OAEP-SHA1", sigAlgo: "PKCS1v15-SHA1", sendAlgos: true };
      const state = newSignInState();
      const req = buildAuthRequest(cfg, state);
      const outcome = handleAuthReply(cfg, state, req, decodeWire(await client.request(packSalt(req.envelope))));
      if (outcome.result !== "accepted" || !outcome.creds.session) throw new Error(`${id} did not sign in: ${outcome.result}`);
      return { id, keys: keys[i]!, client, session: new Crypticle(outcome.creds.session) };
    };
    const minions: Signed[] = [];
    for (let i = 0; i < all - 1; i++) minions.push(await signIn(i));
    const frame = (m: Signed, load: Record<string, unknown>) =>
      packSalt({ enc: "aes", load: sealSalt(m.session, { ...load, id: m.id, nonce: newNonce(), ts: Math.floor(Date.now() / 1000), tok: m.keys.tok }), version: 3, id: m.id, enc_algo: "OAEP-SHA1", sig_algo: "PKCS1v15-SHA1" });
    const empty = Buffer.alloc(0);
    const ask = async (c: RawClient, body: Buffer) => {
      await c.sendOnly([empty, body]);
      return c.receive(60_000);
    };
    const counts = { returns: 0, pillars: 0, chunks: 0, signIns: 0, refused: 0 };
    const latencies: number[] = [];
    const pillarMs: number[] = [];
    let jid = 20261125000000000000n;
    const loops: Promise<void>[] = [];
    for (const m of minions.slice(0, returners)) {
      loops.push(
        (async () => {
          while (!stop) {
            const body = frame(m, { cmd: "_return", success: true, return: true, retcode: 0, jid: String(jid++), fun: "test.ping", fun_args: [] });
            const t0 = performance.now();
            const reply = await ask(m.client, body);
            latencies.push(performance.now() - t0);
            counts.returns++;
            if (!Buffer.isBuffer(decodeWire(reply[reply.length - 1]!))) counts.refused++;
          }
        })(),
      );
    }
    for (const m of minions.slice(returners, returners + pillarMinions)) {
      loops.push(
        (async () => {
          while (!stop) {
            const t0 = performance.now();
            await ask(m.client, frame(m, { cmd: "_pillar", grains: { id: m.id, os: "Debian" }, saltenv: null, pillarenv: null, pillar_override: {}, extra_minion_data: {}, ver: "2" }));
            pillarMs.push(performance.now() - t0);
            counts.pillars++;
            await pause(pillarPauseMs);
          }
        })(),
      );
    }
    for (const m of minions.slice(returners + pillarMinions)) {
      loops.push(
        (async () => {
          let loc = 0;
          while (!stop) {
            await ask(m.client, frame(m, { cmd: "_serve_file", path: "big.bin", loc, saltenv: "base" }));
            loc = (loc + 256 * 1024) % fileBytes;
            counts.chunks++;
            await pause(chunkPauseMs);
          }
        })(),
      );
    }
    // sign-ins: the last minion signs in again and again (each one RSA decrypt + sign on the clear lane)
    for (let s = 0; s < signers; s++) {
      const client = new RawClient({ host: "127.0.0.1", port: master.retPort, timeoutMs: 60_000 });
      clients.push(client);
      const cfg: SignInConfig = { id: `mixed-${all - 1}`, keys: keys[all - 1]!, protocol: "v3", encAlgo: "OAEP-SHA1", sigAlgo: "PKCS1v15-SHA1", sendAlgos: true };
      loops.push(
        (async () => {
          while (!stop) {
            const req = buildAuthRequest(cfg, newSignInState());
            await ask(client, packSalt(req.envelope));
            counts.signIns++;
            await pause(signInPauseMs);
          }
        })(),
      );
    }
    // a warm-up second, then the measured window
    await new Promise((r) => setTimeout(r, 1000));
    const c0 = { ...counts };
    latencies.length = 0;
    const cpu0 = processCpuUs(master.pid);
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const cpuUs = processCpuUs(master.pid) - cpu0;
    const wall = (performance.now() - t0) / 1000;
    const n = { returns: counts.returns - c0.returns, pillars: counts.pillars - c0.pillars, chunks: counts.chunks - c0.chunks, signIns: counts.signIns - c0.signIns };
    const lat = Float64Array.from(latencies).sort();
    stop = true;
    await Promise.all(loops);
    if (counts.refused) throw new Error(`${counts.refused} returns were refused`);
    // the ext_pillar command must really run (a command that fails at once makes the render cheap, and the figures
    // then describe another load): a render cannot be faster than its command's sleep
    const pillarP50 = quantile(Float64Array.from(pillarMs).sort(), 0.5);
    if (!(pillarP50 >= extPillarMs)) throw new Error(`pillar renders took ${pillarP50.toFixed(1)} ms (p50), less than the ext_pillar command's ${extPillarMs} ms: it did not run`);
    const requests = n.returns + n.pillars + n.chunks + n.signIns;
    const mix = `${n.returns} returns, ${n.pillars} pillar renders, ${n.chunks} file chunks, ${n.signIns} sign-ins in ${wall.toFixed(1)} s`;
    return [
      { figure: "mixed load: _return round trip p50", value: quantile(lat, 0.5), unit: "ms", better: "lower", note: `${returners} returners, one in flight each; ${mix}` },
      { figure: "mixed load: _return round trip p99", value: quantile(lat, 0.99), unit: "ms", better: "lower" },
      { figure: "mixed load: _return round trip max", value: lat[lat.length - 1] ?? Number.NaN, unit: "ms", better: "lower" },
      { figure: "mixed load: returns", value: n.returns / wall, unit: "returns/s" },
      { figure: "mixed load: pillar renders", value: n.pillars / wall, unit: "renders/s", note: `${pillarKeys} keys and a ${extPillarMs} ms cmd_json each; round trip p50 ${pillarP50.toFixed(1)} ms` },
      { figure: "mixed load: file chunks", value: n.chunks / wall, unit: "chunks/s", note: "256 KiB each" },
      { figure: "mixed load: sign-ins", value: n.signIns / wall, unit: "auth/s" },
      { figure: "mixed load: master CPU per request (all threads)", value: cpuUs / requests, unit: "µs", better: "lower", note: `${(cpuUs / 1e6 / wall).toFixed(2)} CPU-s per s` },
      { figure: "mixed load: master CPU per second", value: cpuUs / 1e6 / wall, unit: "CPU-s/s", better: "lower" },
    ];
  } finally {
    stop = true;
    for (const c of clients) c.close();
    await master.stop();
    rmSync(srv, { recursive: true, force: true });
  }
}
