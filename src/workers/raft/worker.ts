/**
 * The Raft worker thread: the shell around GroupManager. It owns the Raft tick (one shared coarse timer for
 * every group), the LMDB environment (LmdbBackend), and the only RingWriter on the shared ring buffer; it
 * answers the calls of api.ts (ToRaft → FromRaft, the one port-call style) on its parentPort and on every port
 * a caller handed over with `connect`.
 *
 * Multi-master (`peer` in workerData), it also owns the peer channel (src/workers/raft/peer/: the ROUTER on
 * cluster_pool_port, the DEALERs, handshakes, sessions): it loads the cluster keys itself from the settings,
 * Raft talks to the transport directly (RaftPeerLink), and the main thread uses the rest of the channel
 * through PeerChannelHost (src/workers/raft/peer-proxy-host.ts) on the port it passed. The transport binds and
 * dials only when the main thread's proxy says start (its handlers are registered by then).
 *
 * Startup: load the cluster keys (multi-master), open LMDB, claim the ring buffer, restore the cluster
 * group from disk (or found it when the main thread passed founders and there is none), replay every group,
 * publish the ring; then ready() resolves.
 * A fatal error (the disk refused a commit) fails every caller with its code and ends the thread: the master
 * keeps serving minions, with the last published ring, and logs it loudly.
 */
import { readFileSync } from "node:fs";
import { PerformanceObserver, performance } from "node:perf_hooks";
import { parentPort, type MessagePort } from "node:worker_threads";
import { BrineError, isBrineError } from "../../shared/errors.js";
import { getLogger } from "../../shared/log.js";
import { RingWriter } from "../../shared/sab-ring/writer.js";
import { proposeEntriesMax, type EntryOutcome, type FromRaft, type ProposeReceipt, type ProposeResult, type ToRaft } from "./api.js";
import { portError, type PortError } from "../../shared/port-calls.js";
import { LmdbBackend } from "./lmdb-backend.js";
import { DEFAULT_WORKER_LIMITS, type WorkerLimits } from "./limits.js";
import { GroupManager } from "./manager.js";
import { loadClusterKeys, peerTransportOptions, type ClusterSettings } from "../../shared/cluster-config.js";
import { FilteredChannel } from "../../shared/chaos-filter.js";
import { PeerTransport } from "./peer/peer-transport.js";
import type { PeerLimits } from "./peer/limits.js";
import { PeerChannelHost } from "./peer-proxy-host.js";
import { RAFT_CHANNEL, RaftPeerLink } from "./raft-transport.js";
import { RAFT_WIRE_VERSION } from "./raft-wire.js";
import { RingForwarder } from "./ring-forward.js";
import { HeldJobsService } from "./held-jobs.js";
import { LeaderProgressService } from "./leader-progress.js";
import { JobPlacement } from "./job-placement.js";
import { hostTable, type PlacementTable } from "../../shared/placement.js";
import { MinionPlacement } from "./minion-placement.js";
import { RingReader } from "../../shared/sab-ring/reader.js";
import { shedOwnership } from "../../lib/store/shed.js";
import type { StoreConfig } from "../../lib/store/lmdb-env.js";
import { CLUSTER_RING } from "../../shared/sab-ring/layout.js";
import type { ClusterEntry } from "./state-machines/entries.js";
import type { LeaderWrite, ReadOptions, ReadQuery } from "./api.js";
import { closeInOrder, threadInit } from "../../shared/thread-kit.js";
import { JoinHost } from "./join-host.js";
import { NO_STAGES, StageClock, type StageSink } from "../../shared/metrics/stage-clock.js";

/** workerData of the Raft worker. */
export interface RaftWorkerInit {
  nodeId: string;
  ringBuffer: SharedArrayBuffer;
  /** the Raft LMDB directory (local disk) */
  dir: string;
  /**
   * Founders of the cluster group if this node has none on disk: [self] for a single master; absent when the
   * founding waits for peers (the multi-master join calls bootstrap() later).
   */
  founders?: string[];
  limits?: Partial<WorkerLimits>;
  /** the master's job cache (cluster.placement_check asks every master which jobs it holds) */
  jobStore?: StoreConfig;
  /** multi-master: the peer channel this worker owns, and the port its main-thread proxy talks on */
  peer?: RaftWorkerPeerInit;
  log: { level: string; file: string | null; fileLevel: string | null };
  /** keep a StageClock (NodeStatus.stages): `brine_raft_stage_clock`, for the benches */
  stageClock?: boolean;
  /** `brine_raft_leader_write`: how a leader writes its own new entries (ManagerOptions.leaderWrite) */
  leaderWrite?: LeaderWrite;
}

/** What the worker needs to own the peer channel (plain data: the keys are loaded here, not passed). */
export interface RaftWorkerPeerInit {
  /** validated by parseClusterConfig on the main thread */
  settings: ClusterSettings;
  limits?: Partial<PeerLimits>;
  /** to the main thread's PeerChannelProxy (src/main-thread/cluster/peer-proxy.ts); transferred */
  port: MessagePort;
}

const init = threadInit<RaftWorkerInit>("raft");
const log = getLogger("brine.raft");
const limits: WorkerLimits = { ...DEFAULT_WORKER_LIMITS, ...init.limits, raft: { ...DEFAULT_WORKER_LIMITS.raft, ...init.limits?.raft } };

let manager: GroupManager | undefined;
let writer: RingWriter | undefined;
let timer: NodeJS.Timeout | undefined;
let peerHost: PeerChannelHost | undefined;
let raftLink: RaftPeerLink | undefined;
/** the peer channel as this worker's own services use it: the transport seen through the fault-injection cut */
let peerTransport: FilteredChannel | undefined;
let forwarder: RingForwarder | undefined;
let heldJobs: HeldJobsService | undefined;
let leaderProgress: LeaderProgressService | undefined;
let joinHost: JoinHost | undefined;
let placement: JobPlacement | undefined;
let minionPlacement: MinionPlacement | undefined;
/**
 * where this thread's time goes, stage by stage (NodeStatus.stages; bench/cluster.ts reads it per commit), when
 * asked (`brine_raft_stage_clock`): otherwise its ~25 sections per commit are CPU no master needs
 */
const stageClock = init.stageClock === true ? new StageClock() : undefined;
const stages: StageSink = stageClock ?? NO_STAGES;
// garbage collection pauses of this thread (a worker's observer sees its own isolate's)
if (stageClock) {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) stageClock.addMs("gc", e.duration);
  }).observe({ entryTypes: ["gc"] });
}

function receipt(r: ProposeResult): ProposeReceipt {
  const { value: _echo, ...rest } = r;
  return rest;
}

async function startup(): Promise<GroupManager> {
  const peers = init.peer ? startPeerChannel(init.peer) : undefined;
  writer = RingWriter.attach(init.ringBuffer);
  const backend = new LmdbBackend(init.dir, limits.lmdbMapBytes);
  const m = new GroupManager({ self: init.nodeId, backend, ring: writer, limits, stages, ...(init.leaderWrite ? { leaderWrite: init.leaderWrite } : {}), ...(peers ? { transport: peers } : {}) });
  peers?.attach(m);
  m.onFatal = (e) => {
    log.critical(`raft worker stops: ${e.message}`);
    stopTimer();
    // let the failed outcomes reach their callers, then end the thread (its exit fails what remains)
    setTimeout(() => process.exit(1), 100);
  };
  if (init.founders && !m.has("cluster")) await m.bootstrap(init.founders);
  await m.start();
  learnMembers(m);
  // the cluster log's peer keys into peers/ and the keyring, now and whenever they change (join-host.ts)
  if (joinHost) {
    const host = joinHost;
    m.onPeerKeys = (keys) => host.reconcile(keys);
    m.notifyPeerKeys();
  }
  // a ring group's calls from a master that does not host it (one founder's request deadline plus a commit)
  if (peerTransport) forwarder = new RingForwarder(m, peerTransport, (limits.raft.requestDeadlineTicks ?? 100) * limits.tickMs + 2000);
  leaderProgress = new LeaderProgressService(peerTransport ?? NO_CHANNEL, () => m.status(), heldJobsTimeoutMs);
  if (init.jobStore) {
    const reader = new RingReader(init.ringBuffer);
    const ownership = (ring: string) => {
      const st = m.ringState(ring);
      return shedOwnership({ ring, self: init.nodeId, record: st.record, members: st.members ?? "self", owners: (key) => reader.replicas(key, st.replicas ?? 1, ring), tableReady: (reader.view(ring)?.nodes.length ?? 0) > 0 });
    };
    const held = (heldJobs = new HeldJobsService(init.jobStore, peerTransport ?? NO_CHANNEL, heldJobsTimeoutMs, init.nodeId, ownership, (peer) => peerTransport?.isUp(peer) ?? false));
    placement = new JobPlacement({
      store: () => held.open(),
      channel: peerTransport ?? NO_CHANNEL,
      self: init.nodeId,
      timeoutMs: placementTimeoutMs,
      route: () => reader.routes().jobs ?? null,
      localTable: (ring) => placementTable(m, reader, ring),
      hosts: (ring) => [...(m.ringState(ring).record?.founding_voters ?? [])],
      peers: () => otherMembers(m),
      up: (peer) => peerTransport?.isUp(peer) ?? false,
    });
    const served = placement.served;
    held.served = () => served;
    const jobs = placement;
    minionPlacement = new MinionPlacement({
      store: () => held.open(),
      channel: peerTransport ?? NO_CHANNEL,
      self: init.nodeId,
      timeoutMs: placementTimeoutMs,
      route: (dataType) => reader.route(dataType),
      localTable: (ring) => placementTable(m, reader, ring),
      table: (ring) => jobs.table(ring),
      peers: () => otherMembers(m),
      up: (peer) => peerTransport?.isUp(peer) ?? false,
    });
    const minions = minionPlacement;
    held.minionShed = async (ring, bank, dryRun) => {
      const r = (await minions.query({ op: "shed", ring, bank, dryRun })).shed;
      if (!r) throw new BrineError("RAFT_API_MISUSE", "a minion shed without its result");
      return r;
    };
  }
  let ticks = 0;
  let following = false;
  timer = setInterval(() => {
    let t = stages.now();
    m.tick();
    stages.add("tick", t);
    t = stages.now();
    placement?.tick();
    minionPlacement?.tick();
    stages.add("tick.placement", t);
    // about once a second: a ring's voters follow the cluster's (GroupManager.followRingVoters), one call at a time
    if (++ticks % Math.max(1, Math.round(followVotersEveryMs / limits.tickMs)) === 0 && !following) {
      following = true;
      m.followRingVoters()
        .catch((e: unknown) => log.warning(`ring voters did not follow the cluster's: ${(e as Error)?.message ?? String(e)}`))
        .finally(() => (following = false));
    }
  }, limits.tickMs);
  manager = m;
  return m;
}

/**
 * Keys (peers' may appear later: picked up lazily; ours is published if missing, as Salt does), the
 * transport (not started), its Raft link and the host serving the main thread's proxy.
 */
function startPeerChannel(p: RaftWorkerPeerInit): RaftPeerLink {
  const keys = loadClusterKeys(p.settings, { requirePeerKeys: false, publishSelf: true });
  // the Raft payloads' positional form (raft-wire.ts), told to every peer so that each sends it only where read
  const transport = new PeerTransport({ ...peerTransportOptions(p.settings, keys, p.limits), stages, channelVersions: { [RAFT_CHANNEL]: RAFT_WIRE_VERSION } });
  joinHost = new JoinHost({ settings: p.settings, self: keys.self, keyring: keys.keyring, transport, propose: async (e) => proposeAnywhere(await started, CLUSTER_RING, e), hasCluster: () => manager?.has(CLUSTER_RING) ?? false });
  const known = [...(init.founders ?? []), ...p.settings.peers.flatMap((x) => (x.id === undefined ? [] : [x.id]))];
  const link = new RaftPeerLink(transport, init.nodeId, known, stages);
  // the worker's own channels see the partition as Raft does (the main thread's proxy is filtered on its side)
  const view = new FilteredChannel(transport);
  peerHost = new PeerChannelHost(p.port, transport, (ids) => {
    link.setCut(ids);
    view.cut = new Set(ids);
  }, stages);
  peerTransport = view;
  raftLink = link;
  return link;
}

/** Members restored from disk or founded: the link needs their names before their sessions come up. */
function learnMembers(m: GroupManager): void {
  if (!raftLink) return;
  for (const g of m.status().groups) for (const id of [...g.voters, ...g.learners]) if (id !== init.nodeId) raftLink.learn(id);
}

function stopTimer(): void {
  if (timer) clearInterval(timer);
  timer = undefined;
}

/**
 * A graceful stop hands the leadership of the groups this master leads to their best successors first
 * (GroupManager.handOff), and waits until they took it, at most one election timeout (the core abandons a
 * transfer after that) or handOffWaitMsMax: the cluster then has a leader at once instead of after an
 * election timeout.
 */
async function handOffLeadership(): Promise<void> {
  const m = manager;
  if (!m) return;
  const groups = m.handOff();
  const until = Date.now() + Math.min((limits.raft.electionTicksMin ?? 10) * limits.tickMs, handOffWaitMsMax);
  while (groups.length > 0 && m.leadsAny(groups) && Date.now() < until) await new Promise((r) => setTimeout(r, handOffPollMs));
  if (m.leadsAny(groups)) log.warning(`stopping while still leading ${groups.filter((g) => m.leadsAny([g])).join(", ")}: the hand-off did not finish in time`);
}

/** This thread's time on a CPU and waiting for one (NodeStatus.thread), where Linux reports it. */
function threadSched(): { thread?: { runNs: number; waitNs: number } } {
  try {
    const [run, wait] = readFileSync("/proc/thread-self/schedstat", "utf8").split(" ").map(Number);
    return Number.isFinite(run) && Number.isFinite(wait) ? { thread: { runNs: run!, waitNs: wait! } } : {};
  } catch {
    return {};
  }
}

/** how often a stopping master looks whether its hand-off is done, ms */
const handOffPollMs = 5;
/** the longest a stopping master waits for its hand-off (less when the election timeout is shorter), ms */
const handOffWaitMsMax = 2_000;

/** A proposal to `group`: here when this master hosts it, else forwarded to one that does (ring-forward.ts). */
function proposeAnywhere(m: GroupManager, group: string, entry: ClusterEntry): Promise<ProposeResult> {
  return forwarder?.forwards(group) ? forwarder.propose(group, entry) : m.propose(group, entry);
}

/** A read of `group`, forwarded like proposeAnywhere (a forwarded read is always linearizable). */
function readAnywhere(m: GroupManager, group: string, query: ReadQuery, opts?: ReadOptions) {
  return forwarder?.forwards(group) ? forwarder.read(group, query) : m.read(group, query, opts);
}

/** A peer channel with no peers (a single master answers jobsHeld for itself alone). */
const NO_CHANNEL = {
  on: () => () => undefined,
  request: () => Promise.reject(new BrineError("CLUSTER_PEER_UNKNOWN", "no peer channel")),
};
/** how often ring leaders check that their ring's voters follow the cluster's, ms */
const followVotersEveryMs = 1000;
/** how long a master may take to store a hand-off, answer a job read or a table question, ms */
const placementTimeoutMs = 10_000;

/**
 * This master's table of `ring` for job placement, when it hosts the ring: under policy "voters" the slot
 * table it publishes in the shared ring, under "self" the ring's voters (each owns every jid).
 */
function placementTable(m: GroupManager, reader: RingReader, ring: string): PlacementTable | undefined {
  const st = m.ringState(ring);
  return hostTable({
    ring,
    self: m.self,
    record: st.record,
    members: st.members,
    replicas: st.replicas,
    groupVoters: m.status().groups.find((g) => g.group === ring)?.voters,
    view: reader.view(ring),
    epoch: reader.epoch(ring),
  });
}

/** how long one master may take to list its jids, ms */
const heldJobsTimeoutMs = 20_000;

/** Every other member of group "cluster" (voters and learners). */
function otherMembers(m: GroupManager): string[] {
  const g = m.status().groups.find((x) => x.group === CLUSTER_RING);
  return g ? [...g.voters, ...g.learners].filter((id) => id !== m.self) : [];
}

function jobPlacement(): JobPlacement {
  if (!placement) throw new BrineError("RAFT_API_MISUSE", "the raft worker was started without the job cache");
  return placement;
}

function jobCachePeers(): HeldJobsService {
  if (!heldJobs) throw new BrineError("RAFT_API_MISUSE", "the raft worker was started without the job cache");
  return heldJobs;
}

/** This master's jids and every other cluster member's. */
async function jobsHeldEverywhere(m: GroupManager, max: number) {
  const heldJobs = jobCachePeers();
  const peers = otherMembers(m);
  const others = await heldJobs.ask(peers, max);
  let self;
  try {
    self = heldJobs.local(max);
  } catch (e) {
    self = { error: (e as Error).message };
  }
  return { [m.self]: self, ...others };
}

const started = startup();
started.catch((e: unknown) => log.critical(`raft worker failed to start: ${(e as Error)?.message ?? String(e)}`));

/** The answer to one call (ToRaft without `connect`): a value, or a thrown error (coded). */
async function answer(m: Exclude<ToRaft, { k: "connect" }>): Promise<unknown> {
  switch (m.k) {
    case "ready":
      return (await started).status();
    case "propose": {
      const mgr = await started;
      if (!Array.isArray(m.entries) || m.entries.length > proposeEntriesMax) {
        throw new BrineError("RAFT_REJECTED", `a propose call takes at most ${proposeEntriesMax} entries`);
      }
      // receipts without the entry echo: the caller holds the entries, and copying them back is per-entry cost
      return Promise.all(
        m.entries.map((e) =>
          proposeAnywhere(mgr, m.group, e).then(
            (r): EntryOutcome => ({ ok: true, r: receipt(r) }),
            (err: unknown): EntryOutcome => ({ ok: false, ...callError(err) }),
          ),
        ),
      );
    }
    case "member":
      return (await started).changeMembership(m.group, m.change);
    case "read":
      return readAnywhere(await started, m.group, m.query, m.opts);
    case "status": {
      const elu = performance.eventLoopUtilization();
      return { ...(await started).status(), ...threadSched(), stages: { ...stageClock?.snapshot(), "loop.active": { us: Math.round(elu.active * 1000), n: 0 }, "loop.idle": { us: Math.round(elu.idle * 1000), n: 0 } } };
    }
    case "bootstrap": {
      const mgr = await started;
      const founded = await mgr.bootstrap(m.founders);
      if (founded) await mgr.start();
      learnMembers(mgr);
      return founded;
    }
    case "join": {
      const mgr = await started;
      const joined = await mgr.join();
      if (joined) await mgr.start();
      return joined;
    }
    case "jobsHeld":
      return jobsHeldEverywhere(await started, m.max);
    case "joinAttempt":
      await started;
      if (!joinHost) throw new BrineError("CLUSTER_CONFIG", "no peer channel");
      return joinHost.attempt(m.host, m.port, m.timeoutMs);
    case "jobRead":
      await started;
      return jobPlacement().clusterCopy(m.jid);
    case "jobList":
      await started;
      return jobPlacement().clusterList(Number.isSafeInteger(m.max) && m.max > 0 ? m.max : Infinity, m.filter);
    case "minionQuery":
      await started;
      if (!minionPlacement) throw new BrineError("RAFT_API_MISUSE", "the raft worker was started without the job cache");
      return minionPlacement.query(m.q);
    case "shedPeers":
      return jobCachePeers().shedOn(otherMembers(await started), m.args);
    case "leaderProgress":
      await started;
      return leaderProgress!.view();
    case "handOff":
      await started;
      return handOffLeadership();
    case "close":
      // the sockets first: libzmq must not outlive the thread, and no Raft message should go out mid-close; each
      // step runs even when one before it failed (closeInOrder)
      await closeInOrder("raft worker", [
        ["the leadership hand-off", handOffLeadership],
        ["the tick timer", stopTimer],
        ["the join host", () => joinHost?.close()],
        ["the peer channel host", () => peerHost?.close()],
        ["the Raft peer link", () => raftLink?.close()],
        ["the ring forwarder", () => forwarder?.close()],
        ["held jobs", () => heldJobs?.close()],
        ["leader progress", () => leaderProgress?.close()],
        ["job placement", () => placement?.close()],
        ["minion placement", () => minionPlacement?.close()],
        ["the Raft groups", async () => (manager ?? (await started)).close()],
        ["the ring writer", () => writer?.release()],
      ]);
      return undefined;
    default:
      throw new BrineError("RAFT_API_MISUSE", `unknown call ${JSON.stringify((m as { k?: unknown }).k)}`);
  }
}

/** An error as it goes back to a caller: its code, or RAFT_API_MISUSE (logged with its stack) for an uncoded one. */
function callError(e: unknown): PortError {
  if (!isBrineError(e)) log.error(`raft call failed: ${(e as Error)?.stack ?? String(e)}`);
  return portError(e, "RAFT_API_MISUSE");
}

/** Serves ToRaft on `port` (the parentPort, and each port a caller handed over with `connect`). */
function serve(port: MessagePort): void {
  port.on("message", (m: ToRaft) => {
    if (m?.k === "connect") return serve(m.port);
    const t = stages.now();
    answer(m).then(
      (v) => {
        const t = stages.now();
        port.postMessage({ k: "res", id: m.id, v } satisfies FromRaft);
        stages.add("port.answer", t);
      },
      (e: unknown) => port.postMessage({ k: "err", id: m.id, ...callError(e) } satisfies FromRaft),
    );
    stages.add("port.call", t);
  });
}

serve(parentPort!);

process.on("unhandledRejection", (e) => {
  log.critical(`raft worker: unhandled rejection: ${(e as Error)?.stack ?? String(e)}`);
  if (!isBrineError(e)) throw e instanceof Error ? e : new BrineError("RAFT_API_MISUSE", String(e));
});
