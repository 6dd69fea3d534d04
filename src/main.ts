/**
 * The composition root: builds one master from its configuration and wires its threads and sockets. Every
 * part lives in the folder of the thread that runs it (docs/ARCHITECTURE.md, "Threads and what they own"):
 * the main thread's sockets and hosts in src/main-thread/ (request port 4506, publish port 4505, event bus,
 * control socket, maintenance timer, metrics endpoint, the hosts of the API, automation, state-sync and Raft
 * threads), the request workers in src/workers/req-handler/, the publisher in src/workers/publisher/. This
 * file decides only what starts, in which order, and where each thread's output goes; a finished request
 * batch is applied by `applyBatchResult` (src/main-thread/batch-result.ts), which owns the output order.
 * The CLIs call it (src/cli/salt-master.ts; tests and tools/local-cluster.ts embed it).
 */
import { ConnBoard } from "./shared/conn-board.js";
import { GitUpdateSchedule } from "./lib/fileserver/git-cache.js";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { MasterConfig } from "./shared/config/defaults.js";
import { getLogger } from "./shared/log.js";
import { generateKeyString } from "./shared/protocol/crypticle.js";
import { packEvent } from "./shared/event-frame.js";
import { EventBusServer, busLimits } from "./main-thread/bus-server.js";
import { BUS_DROP_REASONS, PUBLISHER_COUNTS } from "./shared/metrics/labels.js";
import { nonceOwnerTotals } from "./main-thread/cluster/nonce-owner.js";
import { loadOrCreateKeyPair } from "./lib/pki/master-keys.js";
import { checkJobCache } from "./main-thread/lmdb-check.js";
import { prepareKeyStore } from "./lib/pki/key-store.js";
import { SharedSecrets } from "./shared/secrets.js";
import { SessionTable } from "./shared/session-table.js";
import { KeyTable } from "./shared/key-table.js";
import { readOption } from "./shared/config/options.js";
import { NonceSet } from "./shared/nonce-set.js";
import { JidGenerator, setJidSlot, sharedJidClock } from "./shared/protocol/jid.js";
import { QUEUE_FULL_REPLY, RequestLanes, SHUTDOWN_REPLY } from "./main-thread/req-pool.js";
import { ensureRootKey } from "./lib/pki/root-key.js";
import { prepareAuthorization } from "./main-thread/eauth-startup.js";
import { minionPolicy } from "./workers/req-handler/minion-policy.js";
import { Maintenance, nonceWindowMs } from "./main-thread/maintenance.js";
import { ReadinessFile } from "./main-thread/readiness.js";
import { CLUSTER_RING } from "./shared/sab-ring/layout.js";
import { requestTsWindowS } from "./workers/req-handler/replay-window.js";
import { NonceJournal } from "./shared/nonce-journal.js";
import { lmdbDir } from "./lib/store/lmdb-env.js";
import { ControlServer } from "./main-thread/control-server.js";
import { relayRunnerResult, runnerResultsChannel } from "./shared/runner-results.js";
import { jobReadsChannel, serveJobReads } from "./shared/cluster-job-reads.js";
import { jobReturnsChannel, serveReturnWatches } from "./shared/job-return-watch.js";
import type { BroadcastChannel } from "node:worker_threads";
import { RequestPort, type RouterTag } from "./main-thread/request-port.js";
import { PublishPort } from "./main-thread/publish-port.js";
import { applyBatchResult } from "./main-thread/batch-result.js";
import type { ClusterNode, RunnerClusterLink } from "./main-thread/cluster/cluster-node.js";
import { ClusterService } from "./main-thread/cluster/cluster-service.js";
import { ApiHost, isApiTag } from "./main-thread/api-host.js";
import { AutomationHost } from "./main-thread/automation-host.js";
import type { ApiTag } from "./api/messages.js";
import { ensureClusterKeys, isClustered, resolveLocalState } from "./shared/shared-fs.js";
import { MetricsHost } from "./main-thread/metrics-exporter.js";
import { prepareMasterSign } from "./lib/pki/master-sign.js";
import { answerHeapProbes } from "./shared/heap-probe.js";
import { LivePublishPeers, PublishPeersBoard } from "./shared/publish-peers.js";

const log = getLogger("brine.master");

/** Slots in the replay nonce set (per generation: 10 minutes, replay-window.ts); 2M × 8 B × 2 = 32 MiB. */
export const nonceSlots = 1 << 21;
/** How long a stopping master waits for in-flight requests. */
export const shutdownDrainMs = 10_000;
/** at start, how long the master waits for its request workers to load before it serves without the slow ones, ms */
const lanesReadyMsMax = 60_000;

/** a request from the ROUTER, or one from the HTTP API thread (src/main-thread/api-host.ts) */
type RequestTag = RouterTag | ApiTag;

export class MasterServer {
  private requestPort: RequestPort | undefined;
  private publishPort: PublishPort | undefined;
  private lanes: RequestLanes<RequestTag> | undefined;
  /** the HTTP API thread, with a `rest_cherrypy:` or `brine_api:` mapping in the config */
  private api: ApiHost | undefined;
  private bus: EventBusServer;
  private control: ControlServer | undefined;
  private maintenance: Maintenance | undefined;
  /** `cachedir/health/ready` while this master is ready (src/main-thread/readiness.ts) */
  private readiness: ReadinessFile | undefined;
  /** gitfs / git_pillar updates, run from the maintenance timer */
  private gitSchedule: GitUpdateSchedule | undefined;
  /** the reactor and the master schedule, with `reactor:` or `schedule:` in the config (src/automation/) */
  private automation: AutomationHost | undefined;
  private stopping = false;
  /** the metrics board and, with `brine_metrics`, the Prometheus endpoint (src/main-thread/metrics-exporter.ts) */
  private metrics: MetricsHost | undefined;
  /** the peer channel, Raft worker and forwarding, when `cluster_id` is set (src/main-thread/cluster/cluster-service.ts) */
  private cluster: ClusterService | undefined;
  readonly secrets = new SharedSecrets();
  readonly nonces = new NonceSet(nonceSlots);
  /** the replay nonces on disk, across restarts */
  private nonceJournal: NonceJournal | undefined;
  readonly jidClock = sharedJidClock();
  /**
   * The addresses connected to the publish port, for the request threads (src/shared/publish-peers.ts): they
   * fill it from /proc/net/tcp; a transport that knows its connections feeds it instead (LivePublishPeers).
   */
  readonly publishPeers = new PublishPeersBoard();
  /** with a transport that knows its subscribers (the native one): their addresses to the board as they come and go */
  private livePeers: { feed: LivePublishPeers } | undefined;
  /** jids for runner calls, from the same clock as the workers' job jids (never equal to one) */
  private readonly runnerJids = new JidGenerator(Date.now, this.jidClock);
  /** results of runner calls a request worker waits for (src/shared/runner-results.ts) */
  private readonly runnerResults: BroadcastChannel;

  constructor(readonly cfg: MasterConfig) {
    this.bus = new EventBusServer(cfg.sock_dir, busLimits(cfg));
    this.runnerResults = runnerResultsChannel(cfg);
  }

  /** Clustered: the request workers' cluster-wide job reads, relayed to the Raft worker (src/shared/cluster-job-reads.ts). */
  private jobReads: BroadcastChannel | undefined;
  /** the jobs whose returns request workers wait for (minion_publish), pushed from the bus (src/shared/job-return-watch.ts) */
  private jobReturns: BroadcastChannel | undefined;

  private prepareDirs(): void {
    const c = this.cfg;
    for (const d of [c.pki_dir, c.cachedir, c.sock_dir, path.join(c.cachedir, "sessions")]) mkdirSync(d, { recursive: true, mode: 0o700 });
    if (isClustered(c)) {
      // shared-filesystem mode: LMDB on local disk, one per master; cluster keys shared (src/shared/shared-fs.ts)
      resolveLocalState(c);
      // isolated filesystem: the cluster key comes from the join (or the founding), in ClusterService.start
      if (!c.cluster_isolated_filesystem) ensureClusterKeys(c);
    }
    const keyNote = prepareKeyStore(c);
    if (keyNote) log.warning(keyNote);
    // a damaged job cache stops the start here, with one message, before any thread maps it (lmdb-check.ts)
    const moved = checkJobCache(c);
    if (moved) process.stderr.write(`WARNING: ${moved}\n`);
    const keys = loadOrCreateKeyPair(c.pki_dir, "master", c.keysize);
    if (keys.created) log.info(`Generated master key pair in ${c.pki_dir}`);
    const signing = prepareMasterSign(c, (l) => log.warning(l));
    if (signing) log.info(signing);
    ensureRootKey(c.cachedir, c.user);
    prepareAuthorization(c, log);
    // Salt's CLI checks this file exists before publishing; we accept publishes on ret_port instead.
    writeFileSync(path.join(c.sock_dir, "publish_pull.ipc"), "");
    // Salt's netapi (a Python salt-api) checks this file to know a zeromq master runs
    writeFileSync(path.join(c.sock_dir, "workers.ipc"), "");
  }

  private lastPresent = new Set<string>();

  /** Salt's Maintenance.handle_presence: `salt/presence/change` {new, lost} when it changed, then `present`. */
  private async firePresence(): Promise<void> {
    const present = new Set(await this.lanes!.presentIds());
    const gained = [...present].filter((m) => !this.lastPresent.has(m));
    const lost = [...this.lastPresent].filter((m) => !present.has(m));
    this.lastPresent = present;
    if (gained.length || lost.length) this.fire("salt/presence/change", { new: gained, lost });
    this.fire("salt/presence/present", { present: [...present] });
  }

  fire(tag: string, data: unknown): void {
    this.metrics?.board.eventFired(tag);
    this.bus.publish([packEvent(tag, data)]);
  }

  /** fire() on this master's bus and, clustered, on every peer's (e.g. `salt/key` from salt-key). */
  fireAndForward(tag: string, data: unknown): void {
    const frame = packEvent(tag, data);
    this.metrics?.board.eventFired(tag);
    this.bus.publish([frame]);
    this.cluster?.forward([frame], []);
  }

  rotateAesKey(): void {
    // clustered: one key for every master (written to cluster_pki_dir/.aes and sent to the peers)
    if (this.cluster) return void this.cluster.rotateAes();
    this.secrets.setAesKey(generateKeyString());
    this.fire("key", { rotate_aes_key: true });
  }

  /**
   * Starts everything; on a failure part way (a port in use, a bad key), stops what did start (threads,
   * sockets, the Raft worker) before the error goes on, so an embedding process is not kept alive by them.
   */
  async start(): Promise<void> {
    try {
      await this.startParts();
    } catch (e) {
      await this.stop().catch((stopErr: Error) => log.warning(`stopping after a failed start: ${stopErr.message}`));
      throw e;
    }
  }

  private async startParts(): Promise<void> {
    const c = this.cfg;
    minionPolicy(c); // its options are checked before anything starts (CONFIG_INVALID names the option)
    answerHeapProbes("main");
    this.metrics = new MetricsHost(c); // so is brine_metrics
    this.prepareDirs();
    requestTsWindowS(c); // a bad brine_request_ts_window_s stops the start here
    // the replay nonces of the last run, before any worker runs (src/shared/nonce-journal.ts)
    mkdirSync(lmdbDir(c), { recursive: true, mode: 0o700 });
    this.nonceJournal = new NonceJournal(lmdbDir(c), this.nonces, nonceWindowMs);
    this.nonceJournal.load();
    await this.startCluster();
    if (this.cluster && c.cluster_isolated_filesystem) ensureClusterKeys(c); // checks the pair the join installed
    if (!this.cluster) this.secrets.setAesKey(generateKeyString());
    await this.bus.start();
    serveReturnWatches((this.jobReturns = jobReturnsChannel(c)), (fn) => this.bus.subscribe(fn));
    if (this.cluster) {
      const node = this.cluster.node;
      serveJobReads((this.jobReads = jobReadsChannel(c)), (jid) => node.raft.jobRead(jid), (q) => node.raft.minionQuery(q));
    }
    // native transport: the request port's closed connections, so a sign-in whose minion gave up is not worked on
    const connBoard = c.brine_minion_transport === "native" ? new ConnBoard() : undefined;
    const shared = {
      secrets: this.secrets.sab,
      nonces: this.nonces.sab,
      jids: this.jidClock.buffer as SharedArrayBuffer,
      metrics: this.metrics.sab,
      publishPeers: this.publishPeers.sab,
      sessions: SessionTable.create(readOption(c, "brine_session_table_minions")),
      keys: KeyTable.create(readOption(c, "brine_key_table_minions")),
      ...(connBoard ? { conns: connBoard.sab } : {}),
      ...(this.cluster ? { cluster: { nodeId: this.cluster.node.nodeId, ring: this.cluster.node.ringBuffer } } : {}),
    };

    // clustered: this master's own publishes go to the peers once sealed (one signature per publish in the cluster)
    this.publishPort = new PublishPort(c, this.secrets.sab, this.cluster ? (loads, frames) => this.cluster?.forwardPublishes(loads, frames) : undefined);
    this.requestPort = new RequestPort(c, (body, tag, conn) => this.lanes!.submit(body, tag, undefined, conn), () => this.stopping, connBoard, () => this.secrets.generation());
    if (c.brine_worker_nice > 0 && process.platform !== "linux") log.warning(`brine_worker_nice (${c.brine_worker_nice}) is ignored on ${process.platform}: a thread's own priority is Linux's`);
    this.lanes = new RequestLanes<RequestTag>(c, shared, (out) =>
      applyBatchResult(out, {
        bus: (frames) => this.bus.publish(frames),
        publisher: (loads) => this.publishPort!.publish(loads),
        ...(this.cluster && {
          peers: (events, verified, nonces) => this.cluster?.forward(events, verified, nonces),
          // session keys and data cache writes reach the peers before the reply that hands the key out
          sync: (batches) => this.cluster?.forwardSync(batches),
        }),
        reply: (tag, reply) => (isApiTag(tag) ? this.api?.reply(tag, reply) : this.requestPort!.reply(tag, reply)),
        // authorized clear `runner` requests: answered with their jid; the result comes on the bus
        // a minion's `minion_runner` waits for the result in its request worker (src/shared/runner-results.ts)
        runner: (run) => this.control?.startRunner(run, run.awaited ? relayRunnerResult(this.runnerResults, run.jid) : () => {}),
      }),
    );
    // clustered: a copy of a request another master answered gets that master's reply (cluster/resend-replies.ts)
    if (this.cluster) this.lanes.askPeersForReply = (key) => this.cluster?.askReply(key) ?? Promise.resolve(undefined);
    const host = c.interface.includes(":") ? `[${c.interface}]` : c.interface;
    await this.publishPort.bind(`tcp://${host}:${c.publish_port}`);
    if (this.publishPort.subscriberAddresses()) {
      // the native transport tells the board of each subscriber as it comes and goes (written once per turn)
      const feed = new LivePublishPeers(this.publishPeers, Date.now, (n) => log.warning(`${n} addresses connected to the publish port do not fit the shared board: each publish reads /proc/net/tcp itself`));
      this.publishPort.watchSubscribers(feed);
      this.livePeers = { feed };
    }
    await this.requestPort.bind(`tcp://${host}:${c.ret_port}`);

    this.control = new ControlServer(
      c,
      this.bus,
      () => this.lanes?.waiting() ?? 0,
      (tag, data) => this.fireAndForward(tag, data),
      () => this.rotateAesKey(),
      () => this.runnerClusterLink(),
      { nextJid: () => this.runnerJids.next(), fireLocal: (tag, data) => this.fire(tag, data), forwardSync: (batches) => this.cluster?.forwardSync(batches) },
    );
    this.control.metricsBoard = this.metrics.board;
    await this.control.start();
    this.automation = await AutomationHost.start(c, {
      subscribe: (fn) => this.bus.subscribe(fn),
      fire: (tag, data) => this.fire(tag, data),
      cluster: () => this.cluster && { nodeId: this.cluster.node.nodeId, ringBuffer: this.cluster.node.ringBuffer, health: this.cluster.health.sab },
    });
    if (this.automation) this.control.automation = (req) => this.automation!.request(req as never);
    this.api = await ApiHost.start(c, {
      submit: (body, tag, source) => !this.stopping && this.lanes!.submit(body, tag, source),
      refusedReply: () => (this.stopping ? SHUTDOWN_REPLY : QUEUE_FULL_REPLY),
      fire: (tag, data) => this.fire(tag, data),
    });
    const gitRoles = GitUpdateSchedule.roles(c);
    const gitSchedule = gitRoles.length ? new GitUpdateSchedule(c) : undefined;
    this.gitSchedule = gitSchedule;
    this.maintenance = new Maintenance(c.cachedir, c.id, c.loop_interval, c.rotate_aes_key, {
      rotate: () => this.rotateAesKey(),
      cleanup: async () => {
        const n = await this.lanes!.cleanup(Date.now());
        if (n) log.info(`job cache cleanup removed ${n} records`);
      },
      rotateNonces: () => this.nonceJournal!.rotate(),
      presence: c.presence_events ? () => this.firePresence() : undefined,
      gitUpdate: gitSchedule ? (now) => gitSchedule.tick(now, gitRoles) : undefined,
    }, Boolean(this.cluster));
    this.maintenance.start();
    await this.metrics.start({
      laneDepth: () => this.lanes!.depths(),
      sendQueues: () => [this.requestPort!.out, this.publishPort!.out].map((q) => ({ length: q.length, dropped: q.dropped })),
      publishFrames: () => this.publishPort!.out.sent,
      signInsResent: () => this.requestPort!.signInsRecalled,
      handshakeTimeouts: () => [this.requestPort!.handshakeTimeouts, this.publishPort!.handshakeTimeouts],
      publisher: () => PUBLISHER_COUNTS.map((what) => this.publishPort!.publisherCounts[what]),
      eventBus: () => ({ events: this.bus.events, readers: this.bus.subscribers, dropped: BUS_DROP_REASONS.map((r) => this.bus.dropped[r]) }),
      connected: async () => (this.stopping ? 0 : (await this.lanes!.presentIds()).length),
      ...(this.cluster ? { raftStatus: () => this.cluster!.node.raft.status(), ringBuffer: () => this.cluster?.node.ringBuffer, stateSyncCachedir: c.cachedir, nonceOwner: () => nonceOwnerTotals(this.cluster?.nonceOwnerCounters) } : {}),
    });
    // a worker still loading opens LMDB then (each named database in a write transaction of its own): the first
    // request would wait for it, and for any other process holding the environment's write lock
    await this.lanes.ready(Date.now() + lanesReadyMsMax);
    void this.requestPort.run();
    this.readiness = new ReadinessFile(c.cachedir, async () => {
      const node = this.cluster?.node;
      const group = node && (await node.raft.status()).groups.find((g) => g.group === CLUSTER_RING);
      // the same once-a-second look at the cluster group gives this master its jid slot (jid.ts: masters' jids disjoint)
      if (node && group) setJidSlot(this.jidClock, node.nodeId, [...group.voters, ...group.learners]);
      const joining = this.cluster?.health.board.joining;
      return { clustered: Boolean(node), serving: !this.stopping, ...(node ? { nodeId: node.nodeId } : {}), ...(group ? { group } : {}), ...(joining ? { joining } : {}) };
    });
    await this.readiness.start();
    log.info(`brine master ${c.id} listening: publish ${c.interface}:${c.publish_port}, requests ${c.interface}:${c.ret_port}`);
  }

  /** Stop accepting, finish in-flight requests, flush, close. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    log.info("master shutting down");
    await this.cluster?.handOff();
    this.readiness?.stop();
    this.maintenance?.stop();
    await this.gitSchedule?.stop();
    await this.automation?.stop();
    await this.metrics?.stop();
    await this.api?.stop();
    await this.lanes?.drain(Date.now() + shutdownDrainMs);
    await this.requestPort?.drained();
    await this.publishPort?.drained();
    this.livePeers?.feed.close();
    this.requestPort?.close();
    await this.publishPort?.close();
    await this.lanes?.destroy();
    await this.control?.stop();
    await this.stopCluster();
    this.nonceJournal?.close();
    this.runnerResults.close();
    this.jobReads?.close();
    this.jobReturns?.close();
    await this.bus.stop();
  }

  /** The metrics endpoint's port, when `brine_metrics` is set. */
  get metricsPort(): number | undefined {
    return this.metrics?.port;
  }

  // --- clustering (cluster-node.ts) ---------------------------------------------------------------------------

  /** The Raft worker handle and ring buffer, when `cluster_id` is set (for the peer layer and tests). */
  get clusterNode(): ClusterNode | undefined {
    return this.cluster?.node;
  }

  /** The cluster service (peer channel, forwarding, AES), when `cluster_id` is set. */
  get clusterService(): ClusterService | undefined {
    return this.cluster;
  }

  private runnerClusterLink(): RunnerClusterLink | undefined {
    const link = this.cluster?.node.runnerLink();
    const stateSyncPort = this.cluster?.stateSyncPort();
    return link && { ...link, health: this.cluster!.health.sab, ...(stateSyncPort ? { stateSyncPort } : {}) };
  }

  /**
   * With `cluster_id`: validate the cluster options and keys (refusing a wildcard or duplicate node id, unreadable
   * keys), start the Raft worker and the peer channel before anything else starts.
   */
  private async startCluster(): Promise<void> {
    if (!isClustered(this.cfg)) return;
    this.cluster = await ClusterService.start(this.cfg, {
      busPublish: (frames) => this.bus.publish(frames),
      publish: (from, loads, frames) => this.publishPort?.forwarded(from, loads, frames),
      setAesKey: (key) => {
        const first = this.secrets.generation() === 0;
        this.secrets.setAesKey(key);
        if (!first) this.fire("key", { rotate_aes_key: true });
      },
      presentIds: async () => (this.lanes && !this.stopping ? this.lanes.presentIds() : []),
      nonces: (packed) => this.nonceJournal?.peer(packed),
      nonceDecide: (packed) => this.nonceJournal!.decide(packed),
      nonceSab: this.nonces.sab,
      recallReply: (key) => (this.lanes ? this.lanes.recallReply(key) : Promise.resolve(undefined)),
    });
  }

  private async stopCluster(): Promise<void> {
    await this.cluster?.stop();
    this.cluster = undefined;
  }
}
