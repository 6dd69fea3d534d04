/**
 * The return path end to end, through a real master process with ONE request thread per lane
 * (`worker_threads: 1`): 32 protocol-v3 minions sign in, then flood the request port with `_return`s
 * for distinct jobs, 64 in flight per minion, over ZeroMQ from this process. Each reply comes after the
 * return is durable in the job cache. What the request-paths micro-benchmark measures on a thread of its
 * own, this measures with the master's main thread (ZeroMQ, batching, Piscina) and LMDB's writer
 * around it, and with the load generator on the same cores. (The 40k/s per-thread target is the
 * request thread's, request-paths.ts; here the main thread's ZeroMQ sends and receives weigh as much.)
 * BRINE_BENCH_MASTER_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR" profiles the master's threads.
 */
import { Crypticle } from "../src/shared/protocol/crypticle.js";
import { decodeWire } from "../src/shared/protocol/msgpack.js";
import { keyPool } from "../src/lib/minion/keys.js";
import { RawClient } from "../src/lib/minion/raw-client.js";
import { buildAuthRequest, handleAuthReply, newNonce, newSignInState, type SignInConfig } from "../src/lib/minion/sign-in.js";
import { packSalt, sealSalt } from "../src/lib/minion/wire.js";
import { startBrineMaster } from "./swarm.js";
import { cpuSecondsOf } from "../tools/swarm/proc-stats.js";
import type { BenchOptions, BenchRow } from "./types.js";

const minions = 32;
/** requests each minion keeps in flight on its DEALER socket */
const windowPerMinion = 64;

/** user + system CPU of a whole process (all its threads) so far, µs */
function processCpuUs(pid: number): number {
  return (cpuSecondsOf(`/proc/${pid}/stat`) ?? Number.NaN) * 1e6;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const perMinion = opts.full ? 5000 : 1500;
  const { keys } = await keyPool(minions);
  const master = await startBrineMaster({ worker_threads: 1 });
  const clients: RawClient[] = [];
  try {
    // sign in (auto_accept): each minion gets its session key
    const sessions: string[] = [];
    for (let i = 0; i < minions; i++) {
      const c = new RawClient({ host: "127.0.0.1", port: master.retPort, timeoutMs: 30_000 });
      clients.push(c);
      const cfg: SignInConfig = { id: `flood-${i}`, keys: keys[i]!, protocol: "v3", encAlgo: "OAEP-SHA1", sigAlgo: "PKCS1v15-SHA1", sendAlgos: true };
      const state = newSignInState();
      const req = buildAuthRequest(cfg, state);
      const outcome = handleAuthReply(cfg, state, req, decodeWire(await c.request(packSalt(req.envelope))));
      if (outcome.result !== "accepted" || !outcome.creds.session) throw new Error(`flood-${i} did not sign in: ${outcome.result}`);
      sessions.push(outcome.creds.session);
    }
    // every return encrypted beforehand, as a minion sends it
    const jidBase = 20261121000000000000n;
    const frames = sessions.map((key, i) => {
      const c = new Crypticle(key);
      const tok = keys[i]!.tok;
      return Array.from({ length: perMinion }, (_, j) => {
        const load = { cmd: "_return", id: `flood-${i}`, success: true, return: true, retcode: 0, jid: String(jidBase + BigInt(j)), fun: "test.ping", fun_args: [], nonce: newNonce(), ts: Math.floor(Date.now() / 1000), tok };
        return packSalt({ enc: "aes", load: sealSalt(c, load), version: 3, id: `flood-${i}`, enc_algo: "OAEP-SHA1", sig_algo: "PKCS1v15-SHA1" });
      });
    });
    const total = minions * perMinion;
    let refused = 0;
    const cpu0 = processCpuUs(master.pid);
    const t0 = process.hrtime.bigint();
    await Promise.all(
      clients.map(async (c, i) => {
        let sent = 0;
        let answered = 0;
        const empty = Buffer.alloc(0);
        while (sent < windowPerMinion && sent < perMinion) await c.sendOnly([empty, frames[i]![sent++]!]);
        while (answered < perMinion) {
          const reply = await c.receive(60_000);
          answered++;
          // a stored return is answered with a ciphertext (bin); anything else is a refusal
          if (!Buffer.isBuffer(decodeWire(reply[reply.length - 1]!))) refused++;
          if (sent < perMinion) await c.sendOnly([empty, frames[i]![sent++]!]);
        }
      }),
    );
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpuUs = processCpuUs(master.pid) - cpu0;
    if (refused) throw new Error(`${refused} of ${total} returns were refused`);
    return [
      {
        figure: "return flood, one request thread, end to end",
        value: total / seconds,
        unit: "returns/s",
        note: `${minions} v3 minions × ${perMinion}, ${windowPerMinion} in flight each; load generator on the same cores`,
      },
      { figure: "return flood, master CPU per return (all threads)", value: cpuUs / total, unit: "µs", better: "lower", note: "main thread, request thread, LMDB writer, GC" },
    ];
  } finally {
    for (const c of clients) c.close();
    await master.stop();
  }
}
