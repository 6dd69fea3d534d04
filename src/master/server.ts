/**
 * The master process's main thread. Owns the sockets: ROUTER on ret_port and PUB on publish_port
 * (zeromq), the local event bus and control sockets. It does no crypto and no decoding: request
 * frames go to the request lanes in batches; replies go back to the ROUTER with the identity and
 * delimiter frames they came with; publish loads go to the publisher thread and its frames to PUB;
 * event frames go to the bus. See docs/ARCHITECTURE.md for the thread contract.
 */
import { GitUpdateSchedule } from "../fileserver/git-cache.js";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { prepareMasterSign } from "../pki/master-sign.js";
import { Publisher, Router } from "zeromq";
import type { MasterConfig } from "../config/defaults.js";
import { getLogger, loggingConfig } from "../log.js";
import { generateKeyString } from "../protocol/crypticle.js";
import { packEvent } from "../events/event-frame.js";
import { EventBusServer } from "../events/bus-server.js";
import { loadOrCreateKeyPair } from "../pki/master-keys.js";
import { checkJobCache } from "../store/lmdb-check.js";
import { KeyStore } from "../pki/key-store.js";
import { SharedSecrets } from "../shared/secrets.js";
import { NonceSet } from "../shared/nonce-set.js";
import { JidGenerator, sharedJidClock } from "../protocol/jid.js";
import { PublisherClient } from "../workers/publisher/client.js";
import { QUEUE_FULL_REPLY, RequestLanes, SHUTDOWN_REPLY } from "../workers/req-handler/pool.js";
import { ensureRootKey } from "./root-key.js";
import { prepareAuthorization } from "../auth/startup.js";
import { minionPolicy } from "./minion-policy.js";
import { Maintenance, nonceWindowMs } from "./maintenance.js";
import { requestTsWindowS } from "./replay-window.js";
import { NonceJournal } from "../shared/nonce-journal.js";
import { lmdbDir } from "../store/lmdb-env.js";
import { ControlServer } from "./control-server.js";
import { SendQueue } from "../transport/send-queue.js";
import type { ClusterNode, RunnerClusterLink } from "./cluster-node.js";
import { ClusterService } from "../cluster/cluster-service.js";
import { ApiHost, isApiTag } from "../api/host.js";
import { AutomationHost } from "../automation/host.js";
import type { ApiTag } from "../api/messages.js";
import { ensureClusterKeys, isClustered, minionFacingKeyFiles, minionPkiDir, resolveLocalState } from "../cluster/shared-fs.js";
import { MetricsHost } from "../metrics/exporter.js";

const log = getLogger("brine.master");

/** Slots in the replay nonce set (per generation: 10 minutes, replay-window.ts); 2M × 8 B × 2 = 32 MiB. */
export const nonceSlots = 1 << 21;
/** How long a stopping master waits for in-flight requests. */
export const shutdownDrainMs = 10_000;

type RouterTag = Buffer[]; // identity + delimiter frames, echoed back with the reply
/** a request from the ROUTER, or one from the HTTP API thread (src/api/host.ts) */
type RequestTag = RouterTag | ApiTag;

export class MasterServer {
  private router: Router | undefined;
  private pub: Publisher | undefined;
  private lanes: RequestLanes<RequestTag> | undefined;
  /** the HTTP API thread, with a `rest_cherrypy:` or `brine_api:` mapping in the config */
  private api: ApiHost | undefined;
  private publisher: PublisherClient | undefined;
  private bus: EventBusServer;
  private control: ControlServer | undefined;
  private maintenance: Maintenance | undefined;
  /** the reactor and the master schedule, with `reactor:` or `schedule:` in the config (src/automation/) */
  private automation: AutomationHost | undefined;
  private routerOut: SendQueue | undefined;
  private pubOut: SendQueue | undefined;
  private stopping = false;
  /** the metrics board and, with `brine_metrics`, the Prometheus endpoint (src/metrics/exporter.ts) */
  private metrics: MetricsHost | undefined;
  /** the peer channel, Raft worker and forwarding, when `cluster_id` is set (src/cluster/cluster-service.ts) */
  private cluster: ClusterService | undefined;
  readonly secrets = new SharedSecrets();
  readonly nonces = new NonceSet(nonceSlots);
  /** the replay nonces on disk, across restarts */
  private nonceJournal: NonceJournal | undefined;
  readonly jidClock = sharedJidClock();
  /** jids for runner calls, from the same clock as the workers' job jids (never equal to one) */
  private readonly runnerJids = new JidGenerator(Date.now, this.jidClock);

  constructor(readonly cfg: MasterConfig) {
    this.bus = new EventBusServer(cfg.sock_dir);
  }

  private prepareDirs(): void {
    const c = this.cfg;
    for (const d of [c.pki_dir, c.cachedir, c.sock_dir, path.join(c.cachedir, "sessions")]) mkdirSync(d, { recursive: true, mode: 0o700 });
    if (isClustered(c)) {
      // shared-filesystem mode: LMDB on local disk, one per master; cluster keys shared (src/cluster/shared-fs.ts)
      resolveLocalState(c);
      ensureClusterKeys(c);
    }
    new KeyStore(minionPkiDir(c)).ensureDirs();
    // a damaged job cache stops the start here, with one message, before any thread maps it (lmdb-check.ts)
    const moved = checkJobCache(c);
    if (moved) process.stderr.write(`WARNING: ${moved}\n`);
    const keys = loadOrCreateKeyPair(c.pki_dir, "master", c.keysize);
    if (keys.created) log.info(`Generated master key pair in ${c.pki_dir}`);
    const signing = prepareMasterSign(c);
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
    this.metrics = new MetricsHost(c); // so is brine_metrics
    this.prepareDirs();
    requestTsWindowS(c); // a bad brine_request_ts_window_s stops the start here
    // the replay nonces of the last run, before any worker runs (src/shared/nonce-journal.ts)
    mkdirSync(lmdbDir(c), { recursive: true, mode: 0o700 });
    this.nonceJournal = new NonceJournal(lmdbDir(c), this.nonces, nonceWindowMs);
    this.nonceJournal.load();
    await this.startCluster();
    if (!this.cluster) this.secrets.setAesKey(generateKeyString());
    await this.bus.start();
    const shared = { secrets: this.secrets.sab, nonces: this.nonces.sab, jids: this.jidClock.buffer as SharedArrayBuffer, metrics: this.metrics.sab };

    this.pub = new Publisher({ sendHighWaterMark: c.pub_hwm, backlog: c.zmq_backlog, linger: 0, tcpKeepalive: 1, tcpKeepaliveIdle: 300, ipv6: c.ipv6 });
    this.pubOut = new SendQueue((m) => this.pub!.send(m), "publish");
    this.publisher = new PublisherClient(
      {
        secrets: this.secrets.sab,
        pkiDir: path.dirname(minionFacingKeyFiles(c).pem),
        keyName: path.basename(minionFacingKeyFiles(c).pem, ".pem"),
        signPubMessages: c.sign_pub_messages,
        signingAlgorithm: c.publish_signing_algorithm,
        clustered: Boolean(c.cluster_id),
        log: (({ level, file, fileLevel }) => ({ level, file: file ?? null, fileLevel: fileLevel ?? null }))(loggingConfig()),
      },
      (frames) => frames.forEach((f) => this.pubOut!.push([f])),
    );
    this.lanes = new RequestLanes<RequestTag>(c, shared, (replies, events, publishes, sync, runs, verified, nonces) => {
      // Order: events first (a CLI listening for returns sees them), then publishes, then replies.
      this.bus.publish(events.map((e) => Buffer.from(e.buffer, e.byteOffset, e.byteLength)));
      this.publisher!.publish(publishes);
      this.cluster?.forward(events, publishes, verified, nonces);
      // session keys and data cache writes reach the peers before the reply that hands the key out
      if (sync) this.cluster?.forwardSync(sync);
      for (const r of replies) {
        if (isApiTag(r.tag)) this.api?.reply(r.tag, r.reply);
        else this.routerOut!.push([...r.tag, r.reply]);
      }
      // authorized clear `runner` requests: answered with their jid; the result comes on the bus
      for (const run of runs ?? []) this.control?.startRunner(run, () => {});
    });

    this.router = new Router({ backlog: c.zmq_backlog, linger: 0, ipv6: c.ipv6, mandatory: false });
    this.routerOut = new SendQueue((m) => this.router!.send(m), "router");
    const host = c.interface.includes(":") ? `[${c.interface}]` : c.interface;
    await this.pub.bind(`tcp://${host}:${c.publish_port}`);
    await this.router.bind(`tcp://${host}:${c.ret_port}`);

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
      sendQueues: () => [this.routerOut!, this.pubOut!].map((q) => ({ length: q.length, dropped: q.dropped })),
      connected: async () => (this.stopping ? 0 : (await this.lanes!.presentIds()).length),
      ...(this.cluster ? { raftStatus: () => this.cluster!.node.raft.status(), ringBuffer: () => this.cluster?.node.ringBuffer } : {}),
    });
    void this.receiveLoop();
    log.info(`brine master ${c.id} listening: publish ${c.interface}:${c.publish_port}, requests ${c.interface}:${c.ret_port}`);
  }

  private async receiveLoop(): Promise<void> {
    const router = this.router!;
    try {
      for await (const frames of router) {
        if (frames.length < 2) continue; // an identity with no body: nothing to answer
        const body = frames[frames.length - 1]!;
        const tag = frames.slice(0, -1);
        if (this.stopping) {
          this.routerOut!.push([...tag, SHUTDOWN_REPLY]);
          continue;
        }
        if (!this.lanes!.submit(body, tag)) {
          log.warning("request lane full; answering retry-later");
          this.routerOut!.push([...tag, QUEUE_FULL_REPLY]);
        }
      }
    } catch (e) {
      if (!this.stopping) log.error(`request socket failed: ${(e as Error).message}`);
    }
  }

  /** Stop accepting, finish in-flight requests, flush, close. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    log.info("master shutting down");
    this.maintenance?.stop();
    await this.automation?.stop();
    await this.metrics?.stop();
    await this.api?.stop();
    await this.lanes?.drain(Date.now() + shutdownDrainMs);
    await this.routerOut?.drained();
    await this.pubOut?.drained();
    this.router?.close();
    this.pub?.close();
    await this.lanes?.destroy();
    await this.publisher?.stop();
    await this.control?.stop();
    await this.stopCluster();
    this.nonceJournal?.close();
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
    return link && { ...link, health: this.cluster!.health.sab };
  }

  /**
   * With `cluster_id`: validate the cluster options and keys (refusing a wildcard or duplicate node id, unreadable
   * keys), start the Raft worker and the peer channel before anything else starts.
   */
  private async startCluster(): Promise<void> {
    if (!isClustered(this.cfg)) return;
    this.cluster = await ClusterService.start(this.cfg, {
      busPublish: (frames) => this.bus.publish(frames),
      publish: (loads) => this.publisher?.publish(loads),
      setAesKey: (key) => {
        const first = this.secrets.generation() === 0;
        this.secrets.setAesKey(key);
        if (!first) this.fire("key", { rotate_aes_key: true });
      },
      presentIds: async () => (this.lanes && !this.stopping ? this.lanes.presentIds() : []),
      nonces: (packed) => this.nonceJournal?.peer(packed),
      nonceSab: this.nonces.sab,
    });
  }

  private async stopCluster(): Promise<void> {
    await this.cluster?.stop();
    this.cluster = undefined;
  }
}
