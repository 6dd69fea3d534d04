/**
 * The main thread's handle on clustering (only when `cluster_id` is set): it names the node, creates the
 * shared ring buffer, starts the Raft worker (src/workers/raft/worker.ts; with peers, that worker also owns the
 * peer channel, given the settings and the port of the cluster service's PeerChannelProxy) and hands runner
 * threads what they need to see live cluster state: the ring buffer (read with RingReader) and a MessagePort
 * to the worker's API.
 *
 * Node identity: the master's `id` (validated; a wildcard such as 0.0.0.0 is refused at startup), never
 * `interface` (salt-cluster.md §1: Salt keyed everything by interface, so masters bound to 0.0.0.0 collided).
 *
 * Bootstrap: a master without `cluster_peers` founds a one-voter cluster group on first start, so a single
 * clustered master already has a real ring (`salt-run cluster.ring_info`: is_clustered, one node, epoch >= 1).
 * With peers, founding needs their node ids, which only the peer handshake (the multi-master work) learns; the
 * worker then starts without a cluster group, and that handshake calls `raft.bootstrap(self + peer ids)`:
 * the genesis is a pure function of the sorted founders, so every founder builds the same one.
 */
import { MessageChannel, type Worker, type MessagePort } from "node:worker_threads";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { BrineError } from "../../shared/errors.js";
import { getLogger } from "../../shared/log.js";
import { createRingBuffer } from "../../shared/sab-ring/layout.js";
import { RaftClient } from "../../workers/raft/client.js";
import { raftLmdbDir } from "../../workers/raft/lmdb-backend.js";
import { clusterNodeIdOf } from "../../shared/node-ids.js";
import type { RaftWorkerInit, RaftWorkerPeerInit } from "../../workers/raft/worker.js";
import type { NodeStatus } from "../../workers/raft/api.js";
import { electionTicksOf, type WorkerLimits } from "../../workers/raft/limits.js";
import { endThread, spawnThread, threadLogSettings } from "../../shared/thread-kit.js";

const log = getLogger("brine.cluster");

/** What a runner thread gets when clustering is on (RunnerInit.cluster). */
export interface RunnerClusterLink {
  nodeId: string;
  ringBuffer: SharedArrayBuffer;
  /** connected to the Raft worker's API; transfer it to the runner thread */
  raftPort: MessagePort;
  /** peer liveness as the peer channel sees it (src/shared/peer-health.ts), when the peer channel runs */
  health?: SharedArrayBuffer;
  /** connected to the state-sync thread (engine.ts RunnerAsk), when the peer channel runs; transfer it too */
  stateSyncPort?: MessagePort;
}

/** how long a Raft worker that failed its start gets to close its sockets before it is ended, ms */
const raftCloseWaitMsMax = 5_000;

export class ClusterNode {
  private stopped = false;

  private constructor(
    readonly nodeId: string,
    readonly ringBuffer: SharedArrayBuffer,
    private readonly worker: Worker,
    readonly raft: RaftClient,
  ) {}

  /**
   * Starts the Raft worker and waits until it has restored every group from disk and published the ring, for
   * as long as that takes (RaftClient.ready(): no deadline; a warning every call deadline while it lasts).
   * Throws CLUSTER_BAD_NODE_ID (before anything starts) for an unusable `id`, or the worker's coded error.
   */
  static async start(cfg: MasterConfig, limits?: Partial<WorkerLimits>, opts: { peer?: RaftWorkerPeerInit } = {}): Promise<ClusterNode> {
    const nodeId = clusterNodeIdOf(cfg);
    const ringBuffer = createRingBuffer();
    const peers = Array.isArray(cfg.cluster_peers) ? cfg.cluster_peers : [];
    // cluster_election_min/max, unless the caller's limits (tests) set the tick or the election timeout themselves
    const electionTicksMin = electionTicksOf(cfg);
    if (electionTicksMin !== undefined && limits?.tickMs === undefined) limits = { ...limits, raft: { electionTicksMin, ...limits?.raft } };
    const init: RaftWorkerInit = {
      nodeId,
      ringBuffer,
      dir: raftLmdbDir(cfg),
      jobStore: { cachedir: cfg.cachedir, brine_lmdb_dir: cfg.brine_lmdb_dir, brine_lmdb_map_bytes: cfg.brine_lmdb_map_bytes },
      // isolated filesystem: founding waits for the cluster key (ClusterService.admitOrFound decides)
      ...(peers.length === 0 && cfg.cluster_isolated_filesystem !== true ? { founders: [nodeId] } : {}),
      ...(limits ? { limits } : {}),
      ...(opts.peer ? { peer: opts.peer } : {}),
      log: threadLogSettings(),
      ...(cfg.brine_raft_stage_clock === true ? { stageClock: true } : {}),
      ...(cfg.brine_raft_leader_write === "background" ? { leaderWrite: "background" as const } : {}),
    };
    let node: ClusterNode | undefined;
    // policy: logged; the ring stays at its last published state (no restart: it could fork the group)
    const worker = spawnThread({
      name: "raft",
      url: new URL("../../workers/raft/worker.js", import.meta.url),
      workerData: init,
      ...(opts.peer ? { transferList: [opts.peer.port] } : {}),
      onExit: (code) => {
        if (!node?.stopped) log.critical(`raft worker exited (code ${code}); cluster state is frozen at its last published ring`);
      },
    });
    const raft = new RaftClient(worker);
    node = new ClusterNode(nodeId, ringBuffer, worker, raft);
    let status: NodeStatus;
    // ready() has no deadline (a slow start is a loaded box, not a lost call): say so while it lasts
    let waitedMs = 0;
    const slow = setInterval(() => {
      waitedMs += raft.callTimeoutMs;
      log.warning(`the raft worker has not finished starting after ${waitedMs / 1000} s (modules, keys, restoring its groups from disk): still waiting`);
    }, raft.callTimeoutMs);
    slow.unref();
    try {
      status = await raft.ready();
    } catch (e) {
      // its sockets closed first where it still answers: a thread ended with a zeromq socket open aborts the process
      await endThread(worker, "raft", { close: () => raft.close() }, raftCloseWaitMsMax);
      throw e instanceof BrineError ? e : new BrineError("RAFT_STOPPED", (e as Error).message);
    } finally {
      clearInterval(slow);
    }
    const cluster = status.groups.find((g) => g.group === "cluster");
    if (cluster) {
      log.info(`cluster ${String(cfg.cluster_id)}: node ${nodeId}, ${cluster.voters.length} voter(s), ring epoch ${cluster.ringEpoch}`);
    } else {
      log.warning(`cluster ${String(cfg.cluster_id)}: node ${nodeId} waits for its peers to found the cluster group`);
    }
    return node;
  }

  /** A fresh port to the Raft worker for one runner thread (the worker serves its API on the other end). */
  runnerLink(): RunnerClusterLink | undefined {
    if (this.stopped) return undefined;
    const { port1, port2 } = new MessageChannel();
    this.raft.connect(port2);
    return { nodeId: this.nodeId, ringBuffer: this.ringBuffer, raftPort: port1 };
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    // the worker closes its sockets (and hands leadership off) before it is ended, bounded by one call's wait
    await endThread(this.worker, "raft", { close: () => this.raft.close() }, this.raft.callTimeoutMs);
    this.raft.dispose();
  }
}
