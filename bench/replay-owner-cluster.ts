/**
 * The nonce owner check's cost on real masters (issue #13; the in-thread figures are in replay-nonces.ts): three
 * brine masters (real processes, HAProxy in front, loopback 127.0.0.74-77, the addresses of
 * test/cluster-e2e/replay-two-masters-at-once, so never both at once), one v3 minion signed in. Fresh
 * `_minion_event` frames of that minion are sent straight to one master, `inFlight` at a time:
 *
 * - to its owner (no ask: the path of an unclustered master plus one ring lookup);
 * - to a non-owner (each batch asks the owner over the peer channel before acting),
 *
 * 4 and 64 at a time (a quiet fleet: batches of about one frame, each paying a whole peer request; a busy one).
 *
 * CPU is read from /proc for each master process (every thread: main, request workers, Raft worker with the peer
 * channel) before and after each phase, and the masters' idle CPU over the same time is taken off. Per request:
 * what the receiving master spends in each case (the difference is what asking costs the asking master, peer
 * channel included), and what the owner spends beyond what a peer that only receives the forwarded event
 * spends (deciding for the non-owner). Latency: median request time, owner vs
 * non-owner. Skips (no rows) when HAProxy is missing or the addresses are taken.
 */
import { readFileSync } from "node:fs";
import { newNonce } from "../src/lib/minion/sign-in.js";
import { RawClient } from "../src/lib/minion/raw-client.js";
import { decodeWire } from "../src/shared/protocol/msgpack.js";
import { assignSlots } from "../src/shared/sab-ring/assign.js";
import { hashString } from "../src/shared/sab-ring/hash.js";
import { ringSlots } from "../src/shared/sab-ring/layout.js";
import { keyPool } from "../src/lib/minion/keys.js";
import { ClusterHarness, minionEventFrame, minionThrough, RET_PORT, skipReason, sleep } from "../tools/local-cluster.js";
import type { BenchOptions, BenchRow } from "./types.js";

const LB = "127.0.0.74";
const HOSTS = ["127.0.0.75", "127.0.0.76", "127.0.0.77"];
/** requests in flight at once (one DEALER each, sequential): a quiet fleet and a busy one, count */
const inFlights = [4, 64];

const clockTicks = 100; // USER_HZ on Linux

/** CPU seconds a process has used, all threads (utime + stime of /proc/<pid>/stat). */
function cpuS(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / clockTicks;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const why = await skipReason(LB, HOSTS);
  if (why) {
    console.error(`replay-owner-cluster: skipped (${why})`);
    return [];
  }
  const requests = opts.full ? 20_000 : 4_000;
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-replay-bench", privateCachedir: true, extra: { worker_threads: 3 } });
  const minion = minionThrough(LB, "rob-1", (await keyPool(1)).keys[0]!);
  try {
    await h.waitLeader([0, 1, 2], 3);
    await minion.start();
    const table = assignSlots(h.masters.map((m) => m.id));
    const owner = h.masters.findIndex((m) => m.id === table.nodes[table.owners[hashString(minion.id) & (ringSlots - 1)]!]);
    const other = (owner + 1) % 3;
    const pids = h.masters.map((m) => m.proc!.pid!);
    const cpu = () => pids.map(cpuS);

    /** `n` fresh frames to `host`, inFlight at a time: CPU per master (s) and each request's time (ms) */
    const phase = async (host: string, n: number, inFlight: number): Promise<{ cpu: number[]; ms: number[]; wallS: number }> => {
      const clients = Array.from({ length: inFlight }, () => new RawClient({ host, port: RET_PORT, timeoutMs: 10_000 }));
      const ms: number[] = [];
      let next = 0;
      const before = cpu();
      const t0 = performance.now();
      await Promise.all(
        clients.map(async (c) => {
          while (next < n) {
            next++;
            const f = minionEventFrame(minion, "v3", newNonce(), "rob/x");
            const t = performance.now();
            const r = decodeWire(await c.request(f));
            ms.push(performance.now() - t);
            if (!Buffer.isBuffer(r)) throw new Error(`a fresh frame was refused: ${JSON.stringify(r)}`);
          }
        }),
      );
      const wallS = (performance.now() - t0) / 1000;
      const after = cpu();
      for (const c of clients) c.close();
      return { cpu: after.map((a, i) => a - before[i]!), ms: ms.sort((a, b) => a - b), wallS };
    };
    await phase(HOSTS[owner]!, 1_000, 16); // warm-up: both paths, every master
    await phase(HOSTS[other]!, 1_000, 16);
    // the masters' idle CPU per second
    const i0 = cpu();
    await sleep(5_000);
    const idlePerS = cpu().map((x, i) => (x - i0[i]!) / 5);
    const rows: BenchRow[] = [];
    for (const inFlight of inFlights) {
      const own = await phase(HOSTS[owner]!, requests, inFlight);
      const ask = await phase(HOSTS[other]!, requests, inFlight);
      const per = (p: { cpu: number[]; wallS: number }, i: number) => ((p.cpu[i]! - idlePerS[i]! * p.wallS) * 1e6) / requests;
      const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
      const note = `load ${load}`;
      // sent to the owner: the owner handles it, a non-owner receives its forwarded event and nonce;
      // sent to a non-owner: that one handles it and asks, the owner decides and receives the forward
      rows.push(
        { figure: `real cluster, ${inFlight} in flight: CPU per request on the master it reaches, the owner`, value: per(own, owner), unit: "µs", note },
        { figure: `real cluster, ${inFlight} in flight: CPU per request on the master it reaches, a non-owner (asks)`, value: per(ask, other), unit: "µs", note },
        { figure: `real cluster, ${inFlight} in flight: CPU per request the asking adds there`, value: per(ask, other) - per(own, owner), unit: "µs", note },
        { figure: `real cluster, ${inFlight} in flight: CPU per request deciding adds on the owner`, value: per(ask, owner) - per(own, other), unit: "µs", note: `${note}; beside a peer that only receives the forward` },
        { figure: `real cluster, ${inFlight} in flight: median request, to the owner / to a non-owner`, value: own.ms[own.ms.length >> 1]!, unit: "ms", note: `${note}; non-owner ${ask.ms[ask.ms.length >> 1]!.toFixed(2)} ms` },
      );
    }
    return rows;
  } finally {
    await minion.stop();
    await h.stop();
  }
}
