/**
 * Everything a request worker needs to answer requests, built once per thread from the master's
 * configuration and the shared buffers the main thread created (AES key, nonce set).
 */
import type { KeyObject } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { Crypticle, type LoadsOptions } from "../../shared/protocol/crypticle.js";
import { DecodeBudget } from "./decode-budget.js";
import { JidGenerator } from "../../shared/protocol/jid.js";
import { privateKey, publicKey } from "../../shared/protocol/rsa.js";
import { AcceptedKeyCache, keyStoreFor, type KeyStore } from "../../lib/pki/key-store.js";
import { KeyTable } from "../../shared/key-table.js";
import { SessionKeys } from "../../lib/store/sessions.js";
import { SessionKeyWaitRoom, SessionKeyWaits } from "./session-wait.js";
import { V3Marks } from "../../lib/store/v3-marks.js";
import { AuthCipherCache } from "./auth-cipher-cache.js";
import { SharedSecrets } from "../../shared/secrets.js";
import { SessionTable } from "../../shared/session-table.js";
import { NonceSet } from "../../shared/nonce-set.js";
import { nonceOwnerChannelName } from "../../shared/nonce-owner.js";
import { NonceOwnerClient } from "./nonce-owner-client.js";
import { openStore, type Store } from "../../lib/store/lmdb-env.js";
import { JobCache } from "../../lib/store/job-cache.js";
import { MinionCache } from "../../lib/store/minion-cache.js";
import { cleanKey } from "../../shared/protocol/pem.js";
import { packEvent, packEventFromSpans } from "../../shared/event-frame.js";
import { newMapEntrySpans, type MapEntrySpans } from "../../shared/protocol/msgpack.js";
import { isClustered, minionFacingKeyFiles } from "../../shared/shared-fs.js";
import { Authenticator } from "../../lib/auth/authenticate.js";
import type { EauthBackend } from "../../lib/auth/backend.js";
import { makeEauthBackends } from "../../lib/auth/backends/index.js";
import { authOptions } from "../../lib/auth/options.js";
import { readOption } from "../../shared/config/options.js";
import { TokenStore } from "../../lib/auth/tokens.js";
import type { WheelContext } from "../../lib/wheel/types.js";
import { getLogger } from "../../shared/log.js";
import { boardPeers, localPresent, presenceMode, publishSockets, readPublishPeers } from "./presence.js";
import { PublishPeersBoard } from "../../shared/publish-peers.js";
import { MetricsBoard } from "../../shared/metrics/board.js";
import { RingReader, type GateVerdict } from "../../shared/sab-ring/reader.js";
import { ClusterJobReader } from "../../shared/cluster-job-reads.js";
import { LogBudget } from "../../shared/log-budget.js";
import { dataTypeOf } from "../../shared/minion-placement.js";
import { PlacedAddresses, type ClusterMinions } from "../../lib/targeting/cluster.js";
import { MasterPubSigner } from "../../lib/pki/master-sign.js";

/** How long a thread trusts its cached copy of an accepted key file. */
export const acceptedKeyCacheTtlMs = 1000;
/** accepted keys a thread keeps its own copy of (with the shared key table: only ids the table cannot hold), count */
export const acceptedKeyCacheEntriesMax = 200_000;
/** a job's nocache mark, as a request thread read it, is reused this long (one LMDB read per job, not per return), ms */
export const nocacheMarkMsMax = 1_000;
/** jobs whose nocache mark a request thread keeps, count */
export const nocacheMarksMax = 1_024;

export interface SharedBuffers {
  secrets: SharedArrayBuffer;
  nonces: SharedArrayBuffer;
  /** the last jid's microsecond timestamp (BigInt64), shared so jids are unique across threads */
  jids: SharedArrayBuffer;
  /** the metrics board (src/shared/metrics/board.ts); absent: this thread counts into a board nobody reads */
  metrics?: SharedArrayBuffer;
  /** clustered: this master's node id and the shared ring buffer the Raft worker publishes (its gates) */
  cluster?: { nodeId: string; ring: SharedArrayBuffer };
  /** the publish port's connected addresses (src/shared/publish-peers.ts); absent: this thread keeps its own */
  publishPeers?: SharedArrayBuffer;
  /** the minions' session keys (src/shared/session-table.ts); absent: this thread keeps every minion's itself */
  sessions?: SharedArrayBuffer;
  /** the minions' accepted keys and verified toks (src/shared/key-table.ts); absent: this thread keeps every minion's itself */
  keys?: SharedArrayBuffer;
  /** the request port's connections that closed (src/shared/conn-board.ts; native transport); absent: none known */
  conns?: SharedArrayBuffer;
}

/** What one request produced besides its reply: events for the bus, publishes for the PUB socket. */
export interface Effects {
  events: Buffer[];
  publishes: Record<string, unknown>[];
  /** key-state changes the main thread should know of (e.g. to invalidate caches, rotate) */
  notes: string[];
  /** runners an authorized clear `runner` request asked for; the main thread starts their threads */
  runs: RunnerLaunch[];
  /**
   * Indices into `events` of the job records this master vouches for: a `_return` that passed every request
   * check, a job's `new` event from an authorized publish. Clustered, only these are stored in the peers' job
   * caches (the flag travels beside the frames, never in event data a minion controls); see markVerified.
   */
  verified: number[];
  /** nonces of the AES requests dispatched (to the nonce journal and the peers: master/replay-window.ts) */
  nonces: string[];
}

/** A runner call to start on the main thread (its jid was assigned by the request worker). */
export interface RunnerLaunch {
  jid: string;
  fun: string;
  arg: unknown[];
  kwarg: Record<string, unknown>;
  user: string;
  /** a request worker waits for the result (a minion's `minion_runner`): the main thread posts it (src/shared/runner-results.ts) */
  awaited?: boolean;
}

export function newEffects(): Effects {
  return { events: [], publishes: [], notes: [], runs: [], verified: [], nonces: [] };
}

/** Marks the event just fired as a job record this master verified (its own `_return` or publish path only). */
export function markVerified(fx: Effects): void {
  fx.verified.push(fx.events.length - 1);
}

const log = getLogger("brine.context");
/** one line a minute: a minion data read across masters failed or left a master out */
const minionReadLog = new LogBudget(1, 60_000, (line) => log.warning(line), "minion data reads across masters");

export class MasterContext {
  readonly keys: KeyStore;
  readonly acceptedKeys: AcceptedKeyCache;
  readonly sessions: SessionKeys;
  /** clustered: requests sealed with a session key a peer is still sending wait here for it (session-wait.ts) */
  readonly sessionWaits: SessionKeyWaitRoom | undefined;
  /** clustered with `cluster_isolated_filesystem`: a minion's accepted key reaches this master by state-sync */
  readonly isolatedFs: boolean;
  /** minions that sign in with protocol v3: a v2 request in their name is refused (v3-marks.ts) */
  readonly v3Marks: V3Marks;
  readonly secrets: SharedSecrets;
  readonly nonces: NonceSet;
  readonly store: Store;
  readonly jobs: JobCache;
  readonly minionCache: MinionCache;
  readonly jids: JidGenerator;
  /** this master's counters, shared by every thread (src/shared/metrics/board.ts) */
  readonly metrics: MetricsBoard;
  /** jid → [nocache mark, when read] (isNocache) */
  private readonly nocacheMarks = new Map<string, [boolean, number]>();
  /** the addresses connected to the publish port, shared by every request thread (src/shared/publish-peers.ts) */
  readonly publishPeers: PublishPeersBoard;
  /**
   * Clustered: Salt's owns_for gate over the shared ring (src/shared/sab-ring/reader.ts) for `dataType`'s key,
   * counting not_a_member / other_ring_member in the shared drop_stats. The write happens whatever the
   * verdict: with `jobs` routed to a ring, the job cache also queues each record for the jid's owners (the
   * hand-off outbox, src/workers/raft/job-placement.ts), which drops this copy once they have it.
   */
  readonly gate: ((dataType: string, key: string) => GateVerdict) | undefined;
  /**
   * Clustered: the other masters' minion data, for targeting and mine reads while `grains` or `mine` is placed
   * on a ring (src/lib/targeting/cluster.ts; asked through the main thread's Raft worker).
   */
  readonly clusterMinions: ClusterMinions | undefined;
  /**
   * Clustered: asks the master that decides for a minion this master does not own whether a request nonce is
   * fresh, before the request is acted on (nonce-owner-client.ts); undefined unclustered or with the check off.
   */
  readonly nonceOwner: NonceOwnerClient | undefined;
  /** the grains presence matches connections against, the cluster's while `grains` is placed (src/lib/targeting/cluster.ts) */
  readonly addresses = new PlacedAddresses((id) => this.minionCache.get(id)?.grains as Record<string, unknown> | undefined, () => this.clusterMinions, () => this.now());
  readonly masterPriv: KeyObject;
  readonly masterPubClean: string;
  /** `pub_sig` of accepted sign-ins, with `master_sign_pubkey` (pki/master-sign.ts) */
  readonly pubSigner: MasterPubSigner | undefined;
  /**
   * Where the entries of the AES request being handled lie in its plaintext (request.ts). One per thread:
   * a request's decode fills it and its handler reads it synchronously, before any other request runs.
   */
  readonly loadSpans: MapEntrySpans = newMapEntrySpans();
  readonly loadSpansOpts: LoadsOptions = { spans: this.loadSpans };
  /** what this thread's requests hold decoded, against decodedHeldBytesMax (decode-budget.ts; request.ts charges it) */
  readonly decodeBudget = new DecodeBudget();
  /** per-minion OAEP ciphertexts of the AES and session keys, reused across sign-ins */
  readonly authCiphers = new AuthCipherCache();
  private aesCache: { gen: number; c: Crypticle } | undefined;
  private readonly cliKeyCache = new Map<string, { mtimeMs: number; key: string }>();
  private authenticator: Authenticator | undefined;
  /** brine_clear_request_bytes_max, read once (request.ts checks every frame against it) */
  readonly clearRequestBytesMax: number;
  /** eauth backends by name; set before the first clear command to replace the configured ones (tests) */
  eauthBackends: ReadonlyMap<string, EauthBackend> | undefined;

  constructor(
    readonly cfg: MasterConfig,
    shared: SharedBuffers,
    readonly now: () => number = Date.now,
  ) {
    this.clearRequestBytesMax = readOption(cfg, "brine_clear_request_bytes_max");
    this.jids = new JidGenerator(now, new BigInt64Array(shared.jids));
    this.metrics = new MetricsBoard(shared.metrics);
    this.publishPeers = new PublishPeersBoard(shared.publishPeers);
    let placed: ((jid: string) => boolean) | undefined;
    if (shared.cluster) {
      const ring = new RingReader(shared.cluster.ring);
      const self = shared.cluster.nodeId;
      const ownerWaitMs = readOption(cfg, "brine_cluster_replay_owner_wait_ms");
      if (ownerWaitMs > 0) this.nonceOwner = new NonceOwnerClient(nonceOwnerChannelName(path.resolve(cfg.sock_dir), cfg.ret_port), ring, self, ownerWaitMs);
      this.gate = (dataType, key) => ring.gate(dataType, key, self);
      placed = () => ring.route("jobs") !== null;
      let reader: ClusterJobReader | undefined;
      this.clusterMinions = {
        ask: (q) => (reader ??= new ClusterJobReader(cfg)).minions(q),
        placed: (bank) => ring.route(dataTypeOf(bank)) !== null,
        warn: (line) => minionReadLog.line(line),
      };
    }
    // clustered: minion keys and the key pair minions see are the shared ones in cluster_pki_dir
    this.keys = keyStoreFor(cfg);
    this.acceptedKeys = new AcceptedKeyCache(this.keys, acceptedKeyCacheTtlMs, acceptedKeyCacheEntriesMax, now, undefined, shared.keys && new KeyTable(shared.keys), (line) => log.warning(line));
    this.sessions = new SessionKeys(cfg.cachedir, cfg.publish_session, now, shared.sessions && new SessionTable(shared.sessions));
    this.sessionWaits = isClustered(cfg) ? new SessionKeyWaitRoom(new SessionKeyWaits(now)) : undefined;
    this.isolatedFs = isClustered(cfg) && cfg.cluster_isolated_filesystem === true;
    this.v3Marks = new V3Marks(cfg.cachedir, now);
    this.secrets = new SharedSecrets(shared.secrets);
    this.nonces = new NonceSet(shared.nonces);
    this.store = openStore(cfg);
    this.jobs = new JobCache(this.store, placed);
    this.minionCache = new MinionCache(this.store);
    const keyFiles = minionFacingKeyFiles(cfg);
    const pem = readFileSync(keyFiles.pem, "utf8");
    this.masterPriv = privateKey(pem);
    this.masterPubClean = cleanKey(readFileSync(keyFiles.pub, "utf8"));
    this.pubSigner = MasterPubSigner.load(cfg, this.masterPubClean);
  }

  /** The current publish AES Crypticle (v2 requests, auth replies); rebuilt when the key rotates. */
  /** Whether a session key this master holds for `id` seals `cipher` (false when its file cannot be read). */
  sessionOpens(id: string, cipher: Buffer): boolean {
    try {
      return this.sessions.opens(id, cipher);
    } catch {
      return false;
    }
  }

  aes(): { crypticle: Crypticle; generation: number } {
    const { key, generation } = this.secrets.aesKey();
    if (!this.aesCache || this.aesCache.gen !== generation) this.aesCache = { gen: generation, c: new Crypticle(key) };
    return { crypticle: this.aesCache.c, generation };
  }

  minionPublicKey(id: string): KeyObject | undefined {
    const accepted = this.acceptedKeys.get(id);
    return accepted === undefined ? undefined : this.parsedKey(accepted.pem);
  }

  /** An accepted key's parse (the thread's bounded cache of parsed keys, rsa.ts), or undefined when it does not parse. */
  parsedKey(pem: string): KeyObject | undefined {
    try {
      return publicKey(pem);
    } catch {
      return undefined;
    }
  }

  /** The CLI key of the master's own user (`cachedir/.<user>_key`), re-read when the file changes. */
  rootKey(): string | undefined {
    return this.cliKey(this.cfg.user);
  }

  /** The CLI key of one local user (`cachedir/.<user>_key`), or undefined when it has none. */
  cliKey(user: string): string | undefined {
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(user)) return undefined;
    const file = path.join(this.cfg.cachedir, `.${user}_key`);
    try {
      const st = statSync(file);
      let hit = this.cliKeyCache.get(user);
      if (!hit || hit.mtimeMs !== st.mtimeMs) {
        hit = { mtimeMs: st.mtimeMs, key: readFileSync(file, "utf8").trim() };
        this.cliKeyCache.set(user, hit);
      }
      return hit.key;
    } catch {
      this.cliKeyCache.delete(user);
      return undefined;
    }
  }

  /** Every local user's CLI key: the master's user, root, and the plain names in publisher_acl (Salt's access_keys). */
  cliKeys(): Record<string, string> {
    const out: Record<string, string> = {};
    const acl = this.cfg.publisher_acl;
    const names = new Set([this.cfg.user, "root", ...(acl && typeof acl === "object" ? Object.keys(acl) : [])]);
    for (const n of names) {
      const k = this.cliKey(n);
      if (k !== undefined) out[n] = k;
    }
    return out;
  }

  /** Authentication for clear commands (eauth backends, tokens, CLI keys), built at first use. */
  auth(): Authenticator {
    if (!this.authenticator) {
      this.authenticator = new Authenticator({
        opts: authOptions(this.cfg),
        backends: this.eauthBackends ?? makeEauthBackends(this.cfg),
        tokens: new TokenStore(this.store, this.now),
        cliKeys: () => this.cliKeys(),
        masterUser: this.cfg.user,
        nowMs: this.now,
        warn: (m) => log.warning(m),
      });
    }
    return this.authenticator;
  }

  /**
   * Whether job `jid` was published with `nocache` (its returns are not stored), read from the job cache at most
   * once per nocacheMarkMsMax per thread: a return flood to one job pays one LMDB read (a read transaction and
   * its timer) instead of one per return. A publish marks the job before it is published, so no return can
   * come before the mark.
   */
  isNocache(jid: string): boolean {
    const now = this.now();
    const seen = this.nocacheMarks.get(jid);
    if (seen && now - seen[1] >= 0 && now - seen[1] < nocacheMarkMsMax) return seen[0];
    const mark = this.jobs.isNocache(jid);
    this.nocacheMarks.delete(jid);
    if (this.nocacheMarks.size >= nocacheMarksMax) this.nocacheMarks.delete(this.nocacheMarks.keys().next().value!);
    this.nocacheMarks.set(jid, [mark, now]);
    return mark;
  }

  /**
   * The accepted minions this master sees connected (presence.ts localPresent; with `connections`, the publish
   * port's peers from the shared board when its snapshot is fresh, else one read that refreshes it).
   */
  async presentHere(): Promise<string[]> {
    const now = this.now();
    const connections = presenceMode(this.cfg) === "connections";
    const peers = connections ? boardPeers(this.publishPeers, readPublishPeers(this.cfg), now, undefined, publishSockets(this.cfg)) : undefined;
    return localPresent(this.cfg, this.store, this.acceptedIds(), await this.presenceGrains(this.acceptedIds(), connections), now, peers);
  }

  /**
   * The grains presence matches `ids`' connections against: this master's, and with `grains` placed on a ring the
   * addresses of those whose data is on other masters (PlacedAddresses); `connections` false: none needed.
   */
  async presenceGrains(ids: readonly string[], connections = presenceMode(this.cfg) === "connections"): Promise<(id: string) => Record<string, unknown> | undefined> {
    return connections ? this.addresses.lookup(ids) : (id) => this.minionCache.get(id)?.grains as Record<string, unknown> | undefined;
  }

  /** What a wheel function may do from this request thread: its events and key notes go with the request's effects. */
  wheelContext(fx: Effects): WheelContext {
    return {
      cfg: this.cfg,
      note: (change) => fx.notes.push(change),
      fire: (tag, data) => this.fire(fx, tag, data),
      connectedIds: () => this.presentHere(),
      now: this.now,
    };
  }

  /** Queue an event for the bus; `owned`: `data` was made for this event alone and may be stamped in place. */
  fire(fx: Effects, tag: string, data: unknown, owned = false): void {
    this.metrics.eventFired(tag);
    fx.events.push(packEvent(tag, data, new Date(), owned));
  }

  /** Queue an event whose data is a decoded map's entries as they came (see packEventFromSpans). */
  fireSpans(fx: Effects, tag: string, spans: MapEntrySpans, drop: ReadonlySet<string>): void {
    this.metrics.eventFired(tag);
    fx.events.push(packEventFromSpans(tag, spans, drop));
  }

  /** Pillar compiler, installed by the pillar subsystem; without one `_pillar` answers {}. */
  compilePillar?: (id: string, grains: Record<string, unknown>, load: Record<string, unknown>) => Promise<Record<string, unknown>>;

  acceptedIds(): readonly string[] {
    return this.keys.listCached("accepted", this.now());
  }

  hasSyndicFile(id: string): boolean {
    return existsSync(path.join(this.cfg.cachedir, "syndics", id));
  }
}
