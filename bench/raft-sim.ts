/**
 * Raft core benchmark: a 3-node group in one process, on the simulator's node harness (MemoryStorage as the
 * disk, the full Ready loop, a state machine that digests every entry).
 *
 * - Commit latency, in ticks of the simulated network (every message takes exactly one tick; read a tick as
 *   1 ms of network delay): from propose() to the result, for a proposal made on the leader and one made on
 *   a follower (forwarded). No fsync is simulated, so this is the protocol's round-trip cost only.
 * - Throughput: entries per second of wall time through the group with proposals batched between Readies
 *   (and, for comparison, one proposal per Ready), messages delivered synchronously.
 */
import type { BenchOptions, BenchRow } from "./types.js";
import type { RaftLimits } from "../src/workers/raft/core/limits.js";
import type { NodeObserver } from "../tools/raft-sim/node.js";
import { SimNode } from "../tools/raft-sim/node.js";
import { Network, QUIET_NET } from "../tools/raft-sim/network.js";
import { Rng } from "../tools/raft-sim/rng.js";
import { MemoryStorage } from "../src/workers/raft/core/storage.js";
import type { Message, NodeId, RequestResult } from "../src/workers/raft/core/types.js";

const VOTERS: NodeId[] = [1, 2, 3];
const ENTRY_BYTES = 64;
const TARGET_ENTRIES_PER_S = 10_000;
/** reference-points.md B7: commit p50 <= 2 ms on a LAN */
const TARGET_COMMIT_MS = 2;

const BENCH_LIMITS: Partial<RaftLimits> = {
  electionTicksMin: 10,
  heartbeatTicks: 1,
  maxInflightMsgs: 256,
  maxSizePerMsgBytes: 1 << 20,
  requestDeadlineTicks: 1000,
};

class Group implements NodeObserver {
  readonly nodes = new Map<NodeId, SimNode>();
  readonly results: { node: NodeId; r: RequestResult }[] = [];

  constructor() {
    const opts = { limits: BENCH_LIMITS, snapshotEveryEntries: 20_000, snapshotKeepEntries: 1000, snapshotPadBytes: 0 };
    for (const id of VOTERS) {
      const node = new SimNode(id, MemoryStorage.bootstrap(VOTERS), new Rng(id), opts, this);
      node.start();
      this.nodes.set(id, node);
    }
  }

  persisted(): void {}
  sent(): void {}
  applied(): void {}
  snapshotInstalled(): void {}
  result(node: SimNode, r: RequestResult): void {
    this.results.push({ node: node.id, r });
  }

  node(id: NodeId): SimNode {
    return this.nodes.get(id)!;
  }

  /** Ready loops and synchronous delivery until no message is left. */
  settle(): void {
    let queue: Message[] = [];
    for (const n of this.nodes.values()) queue.push(...n.processReady());
    while (queue.length > 0) {
      const next: Message[] = [];
      const touched = new Set<SimNode>();
      for (const m of queue) {
        const n = this.nodes.get(m.to)!;
        n.rn!.step(m);
        touched.add(n);
      }
      for (const n of touched) next.push(...n.processReady());
      queue = next;
    }
  }

  elect(): void {
    this.node(1).rn!.campaign();
    this.settle();
    if (this.node(1).rn!.raft.role !== "leader") throw new Error("bench: node 1 was not elected");
  }
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Commit latency in network ticks, for proposals made on `origin`, one at a time. */
function latencyTicks(origin: NodeId, samples: number): number[] {
  const g = new Group();
  g.elect();
  const net = new Network(new Rng(7), { ...QUIET_NET });
  const out: number[] = [];
  const payload = new Uint8Array(ENTRY_BYTES);
  for (let k = 0; k < samples; k++) {
    const start = net.now;
    const id = g.node(origin).rn!.propose(payload);
    for (let guard = 0; ; guard++) {
      if (guard > 100) throw new Error("bench: proposal did not commit");
      for (const n of g.nodes.values()) for (const m of n.processReady()) net.send(m);
      const done = g.results.find((x) => x.node === origin && x.r.id === id);
      if (done) {
        if (!done.r.ok) throw new Error(`bench: proposal failed: ${done.r.code}`);
        out.push(net.now - start);
        break;
      }
      net.now++;
      for (const m of net.takeDue()) g.node(m.to).rn!.step(m);
    }
    g.results.length = 0;
  }
  return out.sort((a, b) => a - b);
}

/** Entries per second of wall time, proposing `batch` entries on the leader per Ready cycle. */
function throughput(total: number, batch: number): number {
  const g = new Group();
  g.elect();
  const leader = g.node(1).rn!;
  const payload = new Uint8Array(ENTRY_BYTES);
  const started = process.hrtime.bigint();
  let acked = 0;
  let proposed = 0;
  while (proposed < total) {
    for (let k = 0; k < batch; k++) leader.propose(payload);
    proposed += batch;
    g.settle();
    acked += g.results.filter((x) => x.r.ok).length;
    g.results.length = 0;
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (acked !== proposed) throw new Error(`bench: ${acked} of ${proposed} proposals acknowledged`);
  return proposed / seconds;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const samples = opts.full ? 2000 : 300;
  const total = opts.full ? 500_000 : 100_000;
  const leaderLat = latencyTicks(1, samples);
  const followerLat = latencyTicks(2, samples);
  throughput(10_000, 256); // warm-up (JIT)
  const batched = throughput(total, 256);
  const unbatched = throughput(Math.floor(total / 10), 1);
  const note = "3-node in-memory group, 1 tick = 1 ms of simulated network delay, no fsync";
  return [
    { figure: "raft commit latency p50, proposal on leader", value: percentile(leaderLat, 50), unit: "ticks (ms)", target: TARGET_COMMIT_MS, better: "lower", note },
    { figure: "raft commit latency p99, proposal on leader", value: percentile(leaderLat, 99), unit: "ticks (ms)", better: "lower", note },
    { figure: "raft commit latency p50, proposal on follower (forwarded)", value: percentile(followerLat, 50), unit: "ticks (ms)", better: "lower", note },
    { figure: "raft commit latency p99, proposal on follower (forwarded)", value: percentile(followerLat, 99), unit: "ticks (ms)", better: "lower", note },
    {
      figure: "raft throughput, 3 nodes, batches of 256",
      value: Math.round(batched),
      unit: "entries/s",
      target: TARGET_ENTRIES_PER_S,
      better: "higher",
      note: `${total} entries of ${ENTRY_BYTES} B, wall time of one thread running all three nodes`,
    },
    {
      figure: "raft throughput, 3 nodes, one proposal per Ready",
      value: Math.round(unbatched),
      unit: "entries/s",
      better: "higher",
      note: "no batching: every entry pays a full round of Readies and messages",
    },
  ];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  run({ full: process.argv.includes("--full") }).then((rows) => {
    for (const r of rows) console.log(`${r.figure}: ${r.value} ${r.unit}${r.target !== undefined ? ` (target ${r.target})` : ""}`);
  });
}
