/**
 * The main thread's cluster service (only with `cluster_id`). The Raft worker owns the peer channel
 * (src/workers/raft/peer/: its sockets, handshakes and sessions) and carries Raft on it without leaving that
 * thread; this service reaches the rest of the channel through a PeerChannelProxy (peer-proxy/proxy.ts, one
 * MessagePort to the worker) and wires everything else that crosses it:
 *
 * - Raft: static bootstrap of the `cluster` group with self + the `cluster_peers` once their node ids are
 *   proven by the handshake (a master with no peers founds a one-voter group at start, in ClusterNode);
 *   joining through the leader;
 * - publishes and events: ClusterForwarder (forwarding.ts), with job-cache mirroring in its own thread;
 * - the cluster AES key: `cluster_pki_dir/.aes` at start; a rotation on any master writes the file and sends
 *   the key to every peer (channel `cl/aes`, authenticated and encrypted), newest (time, origin) wins, so
 *   every master ends with the same key, the file included;
 * - peer liveness (peer-health.ts) for `cluster.members`.
 *
 * Fault injection (tests, the demo): when `brine_cluster_chaos_file` names a file, the node ids listed in it
 * (one per line) are cut off: Raft, forwarded events and publishes to and from them are dropped, as a network
 * partition would drop them (here by FilteredChannel, src/shared/chaos-filter.ts; in the Raft worker, which
 * gets the same set, Raft's traffic and the worker's own channels). Polled every chaosPollMs; absent or empty means no partition.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { BrineError } from "../../shared/errors.js";
import { foundWaitMs, decideFounding, syncHoldsPromotion, type PeerAnswer } from "./founding.js";
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { cbor } from "../../shared/cbor.js";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { getLogger } from "../../shared/log.js";
import { ClusterNode } from "./cluster-node.js";
import { generateKeyString } from "../../shared/protocol/crypticle.js";
import { CLUSTER_RING } from "../../shared/sab-ring/layout.js";
import type { WorkerLimits } from "../../workers/raft/limits.js";
import { parseClusterConfig, type ClusterSettings } from "../../shared/cluster-config.js";
import { CacheSyncService } from "./sync-service.js";
import { FilteredChannel } from "../../shared/chaos-filter.js";
import { ClusterForwarder } from "./forwarding.js";
import { NonceOwnerService } from "./nonce-owner.js";
import { ResendReplies } from "./resend-replies.js";
import { nonceOwnerChannelName } from "../../shared/nonce-owner.js";
import { readOption } from "../../shared/config/options.js";
import path from "node:path";
import { RingReader } from "../../shared/sab-ring/reader.js";
import { MirrorThread } from "../state-sync-host.js";
import { createHealthBuffer, HealthWriter } from "../../shared/peer-health.js";
import type { PeerLimits } from "../../workers/raft/peer/limits.js";
import { PeerChannelProxy } from "./peer-proxy.js";
import { ensureClusterKeys, minionFacingKeyFiles, readOrCreateClusterAes, writeClusterAes } from "../../shared/shared-fs.js";
import { isWildcardAddress } from "../../shared/cluster-names.js";
import { StateSyncLink } from "./state-sync-link.js";
import type { PeerReport } from "../../workers/state-sync/messages.js";

const log = getLogger("brine.cluster");
/** a minion's whole order on the `cluster` ring (replicas() caps it at the ring's size), count */
const ringOrderMax = 1024;

export const AES_CHANNEL = "cl/aes";
export const HELLO_CHANNEL = "cl/hello";
export const JOIN_CHANNEL = "cl/join";
/** one hello or join request, ms */
const joinRequestTimeoutMs = 10_000;
/** between join attempts, ms */
const joinRetryMs = 500;
/** how long a stopping master waits for its Raft leadership hand-off before it stops anyway, ms */
const handOffWaitMsMax = 2_500;
/** one isolated-filesystem join exchange through one peer, ms */
const joinAttemptTimeoutMs = 3_000;
/** a master still looking for its cluster says why this often, ms */
const joinWhyLogMs = 10_000;
/** longest an introduced peer waits for our configured peers to prove their ids before it is dialled, ms */
const introductionWaitMs = 10_000;

/** What a master tells a peer when a session comes up (and answers to one). */
interface Hello {
  founded: boolean;
  voters: string[];
  leader: string | null;
  host: string;
  port: number;
}
export const chaosPollMs = 200;

/** What the service needs of the master. */
export interface ClusterHooks {
  /** frames onto the local event bus */
  busPublish(frames: Buffer[]): void;
  /** a peer's publishes to the local publisher thread (PublishPort.forwarded) */
  publish(from: string, loads: Uint8Array, frames?: Uint8Array[]): void;
  /** install a new publish AES key in the shared secrets (and tell local listeners) */
  setAesKey(key: string): void;
  /** the minions this master sees connected (shared with the peers: presence.ts) */
  presentIds?(): Promise<string[]>;
  /** a peer's accepted request nonces (packed, nonce-set.ts): to this master's replay nonce set */
  nonces?(packed: Uint8Array): void;
  /** a peer's nonce owner ask (packed nonces): one verdict per nonce by this master's set (src/shared/nonce-owner.ts) */
  nonceDecide?(packed: Uint8Array): Uint8Array;
  /** this master's replay nonce set, for bulk syncs (served to peers, filled from them) */
  nonceSab?: SharedArrayBuffer;
  /** the reply this master gave a request (its nonce and tag), for a peer holding a copy of it (resend-replies.ts) */
  recallReply?(key: string): Promise<Uint8Array | undefined>;
  /**
   * Called when this master, having joined as a learner, is about to ask for promotion to voter; `via` is the
   * member it joined through. The state-sync of keys and roots (issue 15) waits here; the promotion is asked
   * for when it resolves, retried after a rejection. Absent: in isolated-filesystem mode the keys, denied keys and
   * roots are pulled from `via` through the state-sync thread (pullBeforePromotion); otherwise promoted as soon as
   * the learner has the log.
   */
  beforePromotion?(via: string): Promise<void>;
}

export interface ClusterServiceOptions {
  peerLimits?: Partial<PeerLimits>;
  raftLimits?: Partial<WorkerLimits>;
}

/** (time, origin) of an AES key: the newest rotation wins everywhere. */
interface AesVersion {
  t: number;
  o: string;
}

function newer(a: AesVersion, b: AesVersion): boolean {
  return a.t !== b.t ? a.t > b.t : a.o > b.o;
}

export class ClusterService {
  readonly health = new HealthWriter(createHealthBuffer());
  private forwarder: ClusterForwarder | undefined;
  private nonceOwner: NonceOwnerService | undefined;
  private resendReplies: ResendReplies | undefined;
  private mirror: MirrorThread | undefined;
  private sync: CacheSyncService | undefined;
  private stateSync: StateSyncLink | undefined;
  private chaosTimer: NodeJS.Timeout | undefined;
  private founded = false;
  private founding = false;
  /** each peer's answer to our hello (its cluster, if it has one) */
  private readonly hellos = new Map<string, Hello>();
  private readonly leaderHints = new Set<string>();
  /** peers added at runtime because they introduced themselves (they joined) */
  private readonly added = new Set<string>();
  private stopped = false;
  private aesVersion: AesVersion = { t: 0, o: "" };
  private aesKey = "";
  private readonly view: FilteredChannel;

  private constructor(
    readonly cfg: MasterConfig,
    readonly settings: ClusterSettings,
    readonly transport: PeerChannelProxy,
    readonly node: ClusterNode,
    private readonly hooks: ClusterHooks,
  ) {
    this.view = new FilteredChannel(transport);
  }

  get nodeId(): string {
    return this.settings.nodeId;
  }

  /**
   * Validates the cluster options and keys (throwing a BrineError that names the fix), starts the Raft worker
   * and the peer channel. Call before the minion-facing sockets open.
   */
  static async start(cfg: MasterConfig, hooks: ClusterHooks, opts: ClusterServiceOptions = {}): Promise<ClusterService> {
    const settings = parseClusterConfig(cfg);
    // the worker loads the keys (a bad one fails its start with CLUSTER_KEY) and owns the sockets
    const { port1, port2 } = new MessageChannel();
    const known = settings.peers.flatMap((p) => (p.id === undefined ? [] : [p.id]));
    const transport = new PeerChannelProxy(port1, settings.nodeId, { ...(opts.peerLimits ? { limits: opts.peerLimits } : {}), known });
    let node: ClusterNode;
    try {
      node = await ClusterNode.start(cfg, opts.raftLimits, { peer: { settings, ...(opts.peerLimits ? { limits: opts.peerLimits } : {}), port: port2 } });
    } catch (e) {
      port1.close();
      throw e;
    }
    const svc = new ClusterService(cfg, settings, transport, node, hooks);
    try {
      await svc.wire();
    } catch (e) {
      await svc.stop();
      throw e;
    }
    return svc;
  }

  private async wire(): Promise<void> {
    const t = this.transport;
    let isolatedJoin: string | undefined;
    if (this.settings.isolated) {
      // the listener answers other masters' join attempts while this one looks for its cluster
      await t.start();
      isolatedJoin = await this.admitOrFound();
    }
    this.aesKey = readOrCreateClusterAes(this.cfg);
    this.hooks.setAesKey(this.aesKey);
    const link = new StateSyncLink(this.view, () => this.transport.status().flatMap((s) => (s.id === undefined ? [] : [s.id])));
    this.stateSync = link;
    this.mirror = new MirrorThread(this.cfg, this.hooks.nonceSab, () => link.newPort(), this.node.ringBuffer);
    this.forwarder = new ClusterForwarder(this.nodeId, this.view, {
      events: (f) => this.hooks.busPublish(f),
      publishes: (from, l, p) => this.hooks.publish(from, l, p),
      mirror: (f) => this.mirror?.push(f),
      heard: (from) => this.sync?.heard(from),
      nonces: (n) => this.hooks.nonces?.(n),
    });
    const decide = this.hooks.nonceDecide?.bind(this.hooks);
    const waitMs = readOption(this.cfg, "brine_cluster_replay_owner_wait_ms");
    if (decide && waitMs > 0) {
      const ring = new RingReader(this.node.ringBuffer);
      this.nonceOwner = new NonceOwnerService(this.nodeId, this.view, decide, waitMs, nonceOwnerChannelName(path.resolve(this.cfg.sock_dir), this.cfg.ret_port), (id) => ring.replicas(id, ringOrderMax));
    }
    if (this.hooks.recallReply) this.resendReplies = new ResendReplies(this.view, this.hooks.recallReply.bind(this.hooks));
    this.sync = new CacheSyncService(this.view, this.mirror, this.hooks.presentIds?.bind(this.hooks), this.cfg.job_cache !== false);
    this.view.on(AES_CHANNEL, (m) => this.onAes(m.from, m.payload));
    this.view.on(HELLO_CHANNEL, (m) => this.onHello(m.from, m.payload));
    this.view.on(JOIN_CHANNEL, (m) => this.onJoin(m.from, m.payload));
    const onUp = (id: string): void => {
      log.info(`cluster peer ${id} is up`);
      this.health.set(id, true);
      this.sendAes([id]);
      void this.sendHello(id);
      if (!this.view.cut.has(id)) {
        this.sync?.pull(id);
        this.stateSync?.peerUp(id);
      } else this.stateSync?.peersChanged();
    };
    t.events.on("peerUp", onUp);
    t.events.on("peerDown", (id, reason) => {
      log.warning(`cluster peer ${id} is down (${reason})`);
      this.health.set(id, false);
      this.stateSync?.peersChanged();
    });
    // (the worker's Raft link hears of the same sessions itself, and knows the members it restored)
    const status = await this.node.raft.status();
    this.founded = status.groups.some((g) => g.group === CLUSTER_RING);
    if (this.settings.isolated) {
      for (const id of t.upPeers()) onUp(id); // sessions that came up while this master was joining
      if (!this.founded) {
        // a fresh founder's group, or a join (admitted now, or a restart whose Raft state was wiped)
        this.founding = true;
        if (isolatedJoin === "") {
          await this.node.raft.bootstrap([this.nodeId]);
          this.founded = true;
          this.founding = false;
          log.info(`founded cluster ${this.settings.clusterId} (isolated filesystem) with ${this.nodeId}`);
        } else {
          // "leave" first: the leader may still count this master as a member (a wiped Raft state)
          void this.join(isolatedJoin ? [isolatedJoin] : [], true)
            .catch((e: Error) => log.error(`joining the cluster group failed: ${e.message}`))
            .finally(() => (this.founding = false));
        }
      }
    } else {
      await t.start();
    }
    if (typeof this.cfg.brine_cluster_chaos_file === "string" && this.cfg.brine_cluster_chaos_file) {
      const file = this.cfg.brine_cluster_chaos_file;
      this.chaosTimer = setInterval(() => this.pollChaos(file), chaosPollMs);
      this.chaosTimer.unref();
    }
    void this.maybeFound();
  }

  /**
   * Founding or joining, once every configured peer has answered a hello (so its node id is proven and we know
   * whether it already has a cluster):
   * - no peer has one: static bootstrap, `cluster` founded with self + the peers (identical genesis everywhere);
   * - a peer has one whose voters are exactly self + the peers: the same static bootstrap (it founded first);
   * - otherwise join it: an empty group here, then the leader adds this master as a learner and, once the
   *   snapshot has arrived, as a voter (a master founded alone can be joined this way later).
   */
  private async maybeFound(): Promise<void> {
    if (this.founded || this.founding || this.stopped || this.settings.isolated) return;
    const ids = this.transport.status().map((s) => s.id);
    if (ids.some((id) => id === undefined)) return;
    const peers = [...new Set(ids as string[])];
    if (!peers.every((p) => this.hellos.has(p))) return;
    const founders = [this.nodeId, ...peers].sort();
    const existing = peers.map((p) => ({ peer: p, h: this.hellos.get(p)! })).filter((x) => x.h.founded);
    const same = (a: string[]) => a.length === founders.length && [...a].sort().every((x, i) => x === founders[i]);
    this.founding = true;
    try {
      if (existing.length === 0 || existing.every((x) => same(x.h.voters))) {
        const created = await this.node.raft.bootstrap(founders);
        this.founded = true;
        log.info(created ? `founded cluster ${this.settings.clusterId} with ${founders.join(", ")}` : `cluster ${this.settings.clusterId} was already founded on this node`);
      } else {
        await this.join([...new Set(existing.map((x) => x.h.leader ?? x.peer))]);
      }
    } catch (e) {
      log.error(`founding or joining the cluster group failed: ${(e as Error).message}`);
    } finally {
      this.founding = false;
    }
  }

  /** Joins an existing cluster through its leader (one of `targets`, retried until it works or we stop). */
  /**
   * `rejoin`: this master was a member and lost its Raft state (a wiped cachedir): the leader first takes it out
   * of the group ("leave"), and only then is its empty group hosted and added again as a new learner, so the
   * leader's old view of it (commits beyond its empty log) never reaches it.
   */
  private async join(targets: string[], rejoin = false): Promise<void> {
    log.info(`joining cluster ${this.settings.clusterId} through ${targets.join(", ") || "the members it reaches"}`);
    const ask = async (kind: "addLearner" | "addVoter" | "leave"): Promise<void> => {
      for (let attempt = 0; !this.stopped; attempt++) {
        for (const t of [...new Set([...targets, ...this.leaderHints, ...(targets.length ? [] : this.transport.upPeers())])]) {
          if (!this.transport.isUp(t)) continue;
          try {
            const r = cbor.decode(await this.transport.request(t, JOIN_CHANNEL, cbor.encode({ kind }) as Uint8Array, joinRequestTimeoutMs)) as { ok?: boolean; leader?: string | null; error?: string };
            if (r.ok) return;
            if (r.leader) this.leaderHints.add(r.leader);
            if (r.error && attempt % 10 === 0) log.warning(`join (${kind}) through ${t}: ${r.error}`);
          } catch (e) {
            if (attempt % 10 === 0) log.warning(`join (${kind}) through ${t}: ${(e as Error).message}`);
          }
        }
        await new Promise((r) => setTimeout(r, joinRetryMs));
      }
    };
    const ready = this.hooks.beforePromotion?.bind(this.hooks) ?? (this.settings.isolated ? (via: string) => this.pullBeforePromotion(via) : undefined);
    // a learner in the middle of this transfer is not ready (readiness file, cluster.health): said before the
    // learner is added, so no readiness tick between its addition and the transfer finds it "in sync"
    if (ready) this.health.setJoining(`state-sync from ${targets[0] ?? "a member"} before promotion`);
    if (rejoin) await ask("leave");
    await this.node.raft.join();
    await ask("addLearner");
    // the leader's snapshot (or log) has reached us when our own group lists us
    while (!this.stopped) {
      const g = (await this.node.raft.status()).groups.find((x) => x.group === CLUSTER_RING);
      if (g && (g.learners.includes(this.nodeId) || g.voters.includes(this.nodeId))) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    if (ready) {
      for (;;) {
        try {
          await ready(targets[0] ?? this.transport.upPeers()[0] ?? "");
          break;
        } catch (e) {
          log.warning(`not asking for promotion yet: ${(e as Error).message}`);
          if (this.stopped) return;
          await new Promise((r) => setTimeout(r, joinRetryMs * 10));
        }
      }
      this.health.setJoining(undefined);
    }
    await ask("addVoter");
    this.founded = true;
    log.info(`joined cluster ${this.settings.clusterId} as a voter`);
  }

  /**
   * Isolated-filesystem start: with the cluster's Raft group already here (a restart), nothing to do. Otherwise
   * try to join through every `cluster_peers` entry (join-host.ts) until one admits this master (returns its node
   * id), or decideFounding (founding.ts) says to found (makes cluster.pem and the AES key unless they are here
   * already, e.g. provisioned by hand; returns ""). A master that holds other members' keys in `peers/` was in a
   * cluster (its Raft state was wiped): it never founds by itself. Logs why it waits every joinWhyLogMs;
   * throws CLUSTER_JOIN_TIMEOUT after `cluster_join_timeout`.
   */
  private async admitOrFound(): Promise<string | undefined> {
    const iso = this.settings.isolated!;
    if ((await this.node.raft.status()).groups.some((g) => g.group === CLUSTER_RING)) {
      // a member restarting; its cluster key must be here (a joiner never makes one of its own)
      if (!existsSync(minionFacingKeyFiles(this.cfg).pem)) {
        throw new BrineError("CLUSTER_KEY", `this master is in cluster ${this.settings.clusterId}'s Raft group but ${minionFacingKeyFiles(this.cfg).pem} is gone: run salt-run cluster.remove_member id=${this.nodeId} then cluster.readmit_member id=${this.nodeId} on another member, and start this one from an empty cluster_pki_dir and cachedir`);
      }
      return undefined;
    }
    let former: string[] = [];
    try {
      former = readdirSync(this.settings.peerKeyDir).filter((n) => n.endsWith(".pub") && n !== `${this.nodeId}.pub`);
    } catch {
      former = [];
    }
    const started = Date.now();
    const answers: PeerAnswer[] = this.settings.peers.map((p) => ({ address: `${p.host}:${p.port}`, ...(p.id ? { configuredId: p.id } : {}), answer: "none" }));
    let lastWhy = 0;
    const told = new Set<string>();
    log.info(`cluster ${this.settings.clusterId}: not in its Raft group; looking for the cluster through ${answers.map((a) => a.address).join(", ") || "no peer"}`);
    while (!this.stopped) {
      for (const [i, p] of this.settings.peers.entries()) {
        const r = await this.node.raft.joinAttempt(p.host, p.port, joinAttemptTimeoutMs);
        const a = answers[i]!;
        if (r.kind === "admitted") {
          log.info(`joined cluster ${this.settings.clusterId} through ${r.via} (${a.address}); members: ${r.members.join(", ")}`);
          return r.via;
        }
        a.answer = r.kind;
        if (r.kind === "no-cluster" && r.id) a.answeredId = r.id;
        if (r.kind === "refused") {
          a.refusal = `${r.reason}: ${r.detail}`;
          const line = `cluster join through ${a.address} refused (${r.reason}, ${r.by === "us" ? "by this master" : "by the peer"}): ${r.detail}`;
          if (!told.has(line)) log.error(line);
          told.add(line);
        }
      }
      const d = decideFounding({ selfId: this.nodeId, explicit: iso.found, formerMemberKeys: former.length, peers: answers, sinceStartMs: Date.now() - started, foundWaitMs: foundWaitMs });
      if (d.act === "found") {
        ensureClusterKeys(this.cfg);
        readOrCreateClusterAes(this.cfg);
        log.info(`founding cluster ${this.settings.clusterId}: ${d.why}; salt-key -F prints its cluster.pub fingerprint for cluster_pub_fingerprint`);
        return "";
      }
      const now = Date.now();
      if (now - started >= iso.joinTimeoutMs) {
        throw new BrineError("CLUSTER_JOIN_TIMEOUT", `no cluster admitted this master within cluster_join_timeout (${iso.joinTimeoutMs / 1000} s): ${d.why}`);
      }
      if (now - lastWhy >= joinWhyLogMs) {
        log.warning(`not in cluster ${this.settings.clusterId} yet: ${d.why}`);
        lastWhy = now;
      }
      await new Promise((r) => setTimeout(r, joinRetryMs * 2));
    }
    throw new BrineError("CLUSTER_JOIN_TIMEOUT", "stopped while joining");
  }

  /**
   * Isolated filesystem, before promotion: the minion keys, denied keys and both roots from `via` (the member that
   * admitted this master), through the state-sync thread. Throws (and the promotion waits) if a channel failed.
   */
  private async pullBeforePromotion(via: string): Promise<void> {
    const channels = ["keys", "denied_keys", "file_roots", "pillar_roots"];
    const r = await this.syncFrom(via, channels);
    const hold = syncHoldsPromotion(r);
    if (hold) throw new BrineError("CLUSTER_JOIN_SYNC", `state-sync from ${via} did not finish (${[hold, ...r.errors].join("; ")})`);
    if (r.errors.length) log.warning(`state-sync from ${via} before promotion refused ${r.errors.length} item(s) (first: ${r.errors[0]}); promoted anyway, a retry would refuse them again`);
    log.info(`state-sync from ${via} before promotion: ${r.items} item(s), ${r.bytes} bytes, ${r.deleted} deleted in ${r.ms} ms`);
  }

  /** A peer's hello: it tells us its listen address (we may have no link to it: it joined) and its cluster. */
  private async onHello(from: string, payload: Uint8Array): Promise<Uint8Array> {
    const h = cbor.decode(payload) as { host?: unknown; port?: unknown };
    if (typeof h.host === "string" && typeof h.port === "number") this.introduce(from, h.host, h.port);
    return cbor.encode(await this.helloInfo()) as Uint8Array;
  }

  /**
   * A peer that introduced itself and that we have no link to (it joined, listing us) is dialled. While one of
   * our configured peers has not proven its id yet, that may be the same master under another name (a host
   * name in our config, an address in its hello): the introduction waits until every configured id is known,
   * or introductionWaitMs at most.
   */
  private introduce(from: string, host: string, port: number, waited = 0): void {
    if (this.stopped || this.added.has(from)) return;
    const links = this.transport.status();
    if (links.some((s) => s.id === from)) return;
    const sameAddr = (p: { host: string; port: number }) => p.host.toLowerCase() === host.toLowerCase() && p.port === port;
    if (this.settings.peers.some(sameAddr)) return; // our own dial to it will learn its id
    if (links.some((s) => s.id === undefined) && waited < introductionWaitMs) {
      setTimeout(() => this.introduce(from, host, port, waited + 500), 500).unref();
      return;
    }
    if (isWildcardAddress(host)) {
      log.warning(`cluster peer ${from} listens on a wildcard address (${host}); list this master in its cluster_peers with a reachable address, or give it a specific interface`);
      return;
    }
    this.added.add(from);
    log.info(`cluster peer ${from} introduced itself at ${host}:${port}; dialling it`);
    this.transport.addPeer({ id: from, host, port });
  }

  private async helloInfo(): Promise<Hello> {
    const g = (await this.node.raft.status()).groups.find((x) => x.group === CLUSTER_RING);
    return { founded: Boolean(g) && this.founded, voters: g?.voters ?? [], leader: g?.leaderId ?? null, host: this.settings.listen.host, port: this.transport.port || this.settings.listen.port };
  }

  private async sendHello(peer: string): Promise<void> {
    try {
      const reply = await this.transport.request(peer, HELLO_CHANNEL, cbor.encode(await this.helloInfo()) as Uint8Array, joinRequestTimeoutMs);
      const h = cbor.decode(reply) as Hello;
      this.hellos.set(peer, { founded: Boolean(h.founded), voters: Array.isArray(h.voters) ? h.voters.filter((x): x is string => typeof x === "string") : [], leader: typeof h.leader === "string" ? h.leader : null, host: "", port: 0 });
      void this.maybeFound();
    } catch (e) {
      log.warning(`hello to ${peer} failed: ${(e as Error).message}`);
    }
  }

  /** A peer asks to be added to the cluster group (it joins): only the leader makes the change. */
  private async onJoin(from: string, payload: Uint8Array): Promise<Uint8Array> {
    const req = cbor.decode(payload) as { kind?: unknown };
    const kind = req.kind === "addVoter" ? "addVoter" : req.kind === "leave" ? "leave" : "addLearner";
    const g = (await this.node.raft.status()).groups.find((x) => x.group === CLUSTER_RING);
    if (!g || g.role !== "leader") return cbor.encode({ ok: false, leader: g?.leaderId ?? null, error: "not the leader" }) as Uint8Array;
    const member = g.learners.includes(from) || g.voters.includes(from);
    if ((kind === "addVoter" && g.voters.includes(from)) || (kind === "addLearner" && member) || (kind === "leave" && !member)) return cbor.encode({ ok: true }) as Uint8Array;
    try {
      if (kind === "leave") {
        // a member that lost its log (a wiped cachedir) comes back as a new learner: the leader's view of it (its
        // match index) would otherwise tell its empty log of commits beyond its end
        const r = await this.node.raft.changeMembership(CLUSTER_RING, { kind: "removeNode", node_id: from });
        log.warning(`cluster: ${from} comes back without its log; removed at index ${r.index}, to be added again as a learner`);
        return cbor.encode({ ok: true, index: r.index }) as Uint8Array;
      }
      const r = await this.node.raft.changeMembership(CLUSTER_RING, { kind, node_id: from });
      log.info(`cluster: ${from} added (${kind}) at index ${r.index}`);
      if (kind === "addVoter") {
        const voters = g.voters.length + 1;
        if (voters < this.settings.minVoters) log.warning(`cluster has ${voters} voter(s), fewer than cluster_min_voters (${this.settings.minVoters}); brine does not add voters by itself; cluster.remove_member keeps this floor`);
      }
      return cbor.encode({ ok: true, index: r.index }) as Uint8Array;
    } catch (e) {
      return cbor.encode({ ok: false, leader: g.leaderId, error: (e as Error).message }) as Uint8Array;
    }
  }

  /** The reply another master gave a request this master holds a copy of (resend-replies.ts), or undefined. */
  askReply(key: string): Promise<Uint8Array | undefined> {
    return this.resendReplies ? this.resendReplies.ask(key) : Promise.resolve(undefined);
  }

  /** Call with the events this master's request workers produced (after the local bus has them). */
  forward(events: readonly Uint8Array[], verified?: readonly number[], nonces?: Uint8Array): void {
    this.forwarder?.forward(events, verified, nonces);
  }

  /** This master's own publishes as its publisher thread sealed them (forwarding.ts forwardPublishes). */
  forwardPublishes(loads: Uint8Array, frames: readonly Uint8Array[]): void {
    this.forwarder?.forwardPublishes(loads, frames);
  }

  /** Cache-sync record batches this master's request workers produced (cache-sync/sync-service.ts). */
  forwardSync(batches: readonly Uint8Array[]): void {
    this.sync?.forward(batches);
  }

  /** Cache-sync counters (tests, metrics). */
  get syncCounters(): CacheSyncService["counters"] | undefined {
    return this.sync?.counters;
  }

  get forwardCounters() {
    return this.forwarder?.counters;
  }

  /** The nonce owner check's counters (tests, diagnostics); undefined when the check is off. */
  get nonceOwnerCounters() {
    return this.nonceOwner?.counters;
  }

  /**
   * Pulls state-sync channels (`keys`, `denied_keys`, `file_roots`, `pillar_roots`, `bank:<name>`) from `peer` and
   * resolves with what was installed, deleted and refused (the join awaits this before promotion).
   */
  syncFrom(peer: string, channels: string[]): Promise<PeerReport> {
    if (!this.stateSync) return Promise.reject(new Error("the cluster service is not running"));
    return this.stateSync.syncFrom(peer, channels);
  }

  /** A port on which a runner thread asks the state-sync thread (cluster.sync_roots, cluster.collect_from_peers). */
  stateSyncPort(): MessagePort | undefined {
    return this.stopped ? undefined : this.stateSync?.runnerPort();
  }

  /** Waits until forwarded job events are in the local job cache (tests). */
  async mirrorFlushed(): Promise<void> {
    await this.mirror?.flushed();
  }

  // ------------------------------------------------------------------ AES

  /** A rotation decided here (drop file, key delete): new key, file, every peer. */
  rotateAes(now = Date.now()): string {
    const key = generateKeyString();
    this.aesVersion = { t: Math.max(now, this.aesVersion.t + 1), o: this.nodeId };
    this.install(key);
    this.sendAes(this.view.upPeers());
    log.info(`rotated the cluster AES key; sent to ${this.view.upPeers().join(", ") || "no peer (none up)"}`);
    return key;
  }

  private install(key: string): void {
    this.aesKey = key;
    try {
      writeClusterAes(this.cfg, key);
    } catch (e) {
      log.error(`writing the cluster AES key failed: ${(e as Error).message}`);
    }
    this.hooks.setAesKey(key);
  }

  private sendAes(peers: string[]): void {
    if (this.aesVersion.t === 0) return; // the key from the file: every master read the same one
    const payload = cbor.encode({ k: this.aesKey, t: this.aesVersion.t, o: this.aesVersion.o }) as Uint8Array;
    for (const p of peers) {
      try {
        this.view.send(p, AES_CHANNEL, payload);
      } catch (e) {
        log.warning(`sending the AES key to ${p} failed: ${(e as Error).message}`);
      }
    }
  }

  private onAes(from: string, payload: Uint8Array): void {
    let v: { k?: unknown; t?: unknown; o?: unknown };
    try {
      v = cbor.decode(payload) as typeof v;
    } catch {
      return;
    }
    if (typeof v.k !== "string" || v.k.length === 0 || v.k.length > 128 || typeof v.t !== "number" || typeof v.o !== "string") return;
    const ver = { t: v.t, o: v.o };
    if (!newer(ver, this.aesVersion)) return;
    this.aesVersion = ver;
    if (v.k === this.aesKey) return;
    log.info(`cluster AES key rotated by ${v.o} (received from ${from})`);
    this.install(v.k);
  }

  // ------------------------------------------------------------------ chaos

  private pollChaos(file: string): void {
    let ids: string[] = [];
    try {
      ids = readFileSync(file, "utf8")
        .split(/\s+/)
        .filter((x) => x !== "" && x !== this.nodeId);
    } catch {
      ids = [];
    }
    this.isolate(ids);
  }

  /** Fault injection: drop all cluster traffic to and from these peers (an empty list heals). */
  isolate(ids: string[]): void {
    const next = new Set(ids.filter((x) => x !== this.nodeId));
    const same = next.size === this.view.cut.size && [...next].every((x) => this.view.cut.has(x));
    if (same) return;
    log.warning(next.size ? `fault injection: cut off from ${[...next].join(", ")}` : "fault injection: partition healed");
    const healed = [...this.view.cut].filter((x) => !next.has(x));
    this.view.cut = next;
    this.transport.cut([...next]);
    // what was written on either side meanwhile never crossed: pull it, as after a reconnect
    for (const p of healed) if (this.transport.isUp(p)) this.sync?.pull(p);
    this.stateSync?.peersChanged();
    for (const p of healed) if (this.transport.isUp(p)) this.stateSync?.peerUp(p);
  }

  // ------------------------------------------------------------------ stop

  /**
   * The master is stopping: Raft leadership goes to another master first (the worker bounds the wait by an
   * election timeout), so the cluster does not wait out an election timeout while this one drains.
   */
  async handOff(): Promise<void> {
    if (this.stopped) return;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        log.warning(`leadership hand-off before stopping did not answer within ${handOffWaitMsMax} ms; stopping anyway`);
        resolve();
      }, handOffWaitMsMax);
    });
    await Promise.race([this.node.raft.handOff().catch((e: Error) => log.warning(`leadership hand-off before stopping failed: ${e.message}`)), bound]);
    clearTimeout(timer);
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.chaosTimer) clearInterval(this.chaosTimer);
    this.forwarder?.close();
    this.nonceOwner?.close();
    this.resendReplies?.close();
    this.sync?.close();
    this.stateSync?.close();
    await this.transport.close().catch(() => undefined);
    await this.mirror?.stop().catch(() => undefined);
    await this.node.stop();
  }
}
