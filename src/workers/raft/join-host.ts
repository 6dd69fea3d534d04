/**
 * The I/O shell of the isolated-filesystem join (the exchange itself is join.ts, sans-I/O), in the Raft worker,
 * which owns the peer channel's port, the peer keyring and the files in `cluster_pki_dir/peers/`:
 *
 * - responder: JOIN frames arriving on the peer port (inbound.ts) go to a ResponderExchange per connection
 *   (at most joinsPendingMax, each forgotten after joinExchangeTtlMs). An admitted joiner's key is written
 *   here, then committed to the cluster log (a PEER_KEY entry: state-machines/peer-keys.ts), and only then does
 *   ADMIT go back. A refusal is one log line here (LogBudget) and a REFUSE frame that the joiner logs;
 * - every member: `reconcile` mirrors the log's peer keys into `peers/<id>.pub` and the keyring, and dials a new
 *   member at the address it gave; a tombstone (`cluster.remove_member`) deletes the file and forgets the key, so
 *   the removed master's handshakes are refused, and its joins too ("removed", even with the secret) until
 *   `cluster.readmit_member` marks the tombstone re-admitted. A member that was down learns all of it when it
 *   catches up with the log;
 * - joiner: `attempt(host, port)` runs one exchange over its own DEALER socket; only after ADMIT verified does it
 *   write anything: the members' keys, cluster.pem / cluster.pub and the publish AES key.
 */
import { randomBytes, createPrivateKey, createPublicKey, type KeyObject } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import * as zmq from "zeromq";
import { ZmqSettle } from "../../shared/zmq-settle.js";
import { BrineError } from "../../shared/errors.js";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import type { ClusterSettings } from "../../shared/cluster-config.js";
import type { FileKeyring, PeerIdentity } from "../../shared/cluster-keys.js";
import { isKeyFileId, parsePeerPublicKey } from "../../shared/cluster-keys.js";
import { CLUSTER_AES_FILE, replaceAtomically } from "../../shared/shared-fs.js";
import { pemFinger } from "../../shared/protocol/pem.js";
import { JoinError, JoinReplayGuard, JoinerExchange, ResponderExchange, decodeJoinFrame, noClusterFrame, peekRefusal, refuseFrame, type ClusterPin, type Admitted } from "./peer/join.js";
import type { PeerTransport } from "./peer/peer-transport.js";
import type { ClusterEntry, PeerKeyValue } from "./state-machines/entries.js";
import type { ProposeResult } from "./api.js";

const log = getLogger("brine.cluster.join");
/** refusal lines the responder logs per window (a refused joiner retries every second or so), count */
const refusalLinesPerWindowMax = 10;
/** ms */
const refusalLogWindowMs = 60_000;

/** how long the joiner waits for ADMIT after its proof (the member commits the key first), ms */
const admitWaitMs = 15_000;
/** responder exchanges held at once, count */
const joinsPendingMax = 32;
/** a responder exchange not finished within this is forgotten, ms */
const joinExchangeTtlMs = 30_000;
/** a peer that refuses this member's handshakes as unknown is probed for a second cluster at most this often, ms */
const secondClusterProbeEveryMs = 60_000;
/** how long close() waits for libzmq to destroy the join sockets (zmq-settle.ts), ms */
const socketsDestroyedWaitMs = 2_000;
/** how long a probe waits for the peer's challenge, ms */
const secondClusterProbeWaitMs = 5_000;

/** What one join attempt through one address gave. */
export type JoinAttempt =
  | { kind: "admitted"; via: string; members: string[] }
  | { kind: "no-cluster"; id: string | null }
  | { kind: "refused"; reason: string; detail: string; by: "us" | "them" }
  | { kind: "unreachable"; detail: string };

export interface JoinHostOptions {
  settings: ClusterSettings;
  self: PeerIdentity;
  keyring: FileKeyring;
  transport: PeerTransport;
  /** commits an entry to the cluster group (on the leader, through it when this master is a follower) */
  propose(entry: ClusterEntry): Promise<ProposeResult>;
  /** whether this master hosts the cluster group (without it, it answers "no cluster here", cluster.pem or not) */
  hasCluster(): boolean;
}

function pemOf(k: KeyObject): string {
  return k.export({ type: "spki", format: "pem" }) as string;
}

export class JoinHost {
  private readonly pending = new Map<string, { ex: ResponderExchange; at: number }>();
  /** the DEALERs of join attempts in flight: closed by close(), since a thread ended with a zeromq socket open aborts the process */
  private readonly dialing = new Set<zmq.Dealer>();
  /** every DEALER until libzmq has destroyed it: close() waits for them (a REFUSE frame may still be queued: zmq-settle.ts) */
  private readonly settle = new ZmqSettle();
  private readonly replay = new JoinReplayGuard();
  private readonly refusals = new LogBudget(refusalLinesPerWindowMax, refusalLogWindowMs, (l) => log.warning(l));

  /** address -> when it was last probed for a second cluster */
  private readonly probed = new Map<string, number>();

  constructor(private readonly o: JoinHostOptions) {
    o.transport.onJoinFrame((conn, frame) => this.onFrame(conn, frame));
    o.transport.events.on("refused", (info) => {
      if (info.direction === "remote" && info.reason === "unknown-peer" && info.address) void this.probeSecondCluster(info.address);
    });
  }

  /**
   * A peer that does not know this member's key may be a master of a second cluster founded with the same
   * cluster_id (two founders that could not see each other): run the join exchange as far as its CHALLENGE, which
   * shows the peer's cluster key, and if that key is another one, refuse it as "another-cluster" (logged here, and
   * by the peer when it reads the REFUSE). Never sends a PROOF; at most once a minute per address.
   */
  private async probeSecondCluster(address: string): Promise<void> {
    const now = Date.now();
    if (!this.s.isolated || !this.o.hasCluster() || now - (this.probed.get(address) ?? 0) < secondClusterProbeEveryMs) return;
    this.probed.set(address, now);
    const a = splitAddress(address);
    if (!a) return;
    const r = await this.exchange(a.host, a.port, secondClusterProbeWaitMs, true).catch((e: Error) => ({ kind: "unreachable" as const, detail: e.message }));
    if (r.kind === "refused" && r.reason === "another-cluster") log.error(`cluster: SECOND CLUSTER at ${address}: ${r.detail}`);
  }

  private get s(): ClusterSettings {
    return this.o.settings;
  }

  private file(name: string): string {
    return path.join(this.s.clusterPkiDir, name);
  }

  // ------------------------------------------------------------------ responder

  private clusterKey(): { privateKey: KeyObject; pubPem: string } | undefined {
    const pem = this.file("cluster.pem");
    if (!existsSync(pem)) return undefined;
    const privateKey = createPrivateKey(readFileSync(pem));
    return { privateKey, pubPem: readFileSync(this.file("cluster.pub"), "utf8") };
  }

  private async onFrame(conn: string, frame: Uint8Array): Promise<Uint8Array | undefined> {
    const now = Date.now();
    for (const [k, p] of this.pending) if (now - p.at > joinExchangeTtlMs) (p.ex.abort(), this.pending.delete(k));
    let t: string;
    try {
      t = decodeJoinFrame(frame).t;
    } catch (e) {
      const held = this.pending.get(conn);
      this.pending.delete(conn);
      held?.ex.abort();
      if (e instanceof JoinError && e.remote) {
        this.refusals.line(`cluster join: ${held?.ex.joinerId ?? "a joining master"} refused this cluster (${e.reason}): ${e.detail}`);
        return undefined;
      }
      log.warning(`cluster join: dropped a malformed join frame: ${(e as Error).message}`);
      return undefined;
    }
    if (!this.s.isolated) return refuseFrame(new JoinError("state", `${this.s.nodeId} is not in isolated-filesystem mode (cluster_isolated_filesystem); it takes new masters through a shared cluster_pki_dir`));
    if (t === "discover") return this.onDiscover(conn, frame);
    if (t === "proof") return this.onProof(conn, frame);
    return refuseFrame(new JoinError("state", `unexpected ${t}`));
  }

  private onDiscover(conn: string, frame: Uint8Array): Uint8Array {
    if (this.pending.size >= joinsPendingMax) return refuseFrame(new JoinError("busy", `${joinsPendingMax} joins in progress`));
    const iso = this.s.isolated!;
    let clusterKey: { privateKey: KeyObject; pubPem: string } | undefined;
    try {
      clusterKey = this.o.hasCluster() ? this.clusterKey() : undefined;
    } catch (e) {
      log.error(`cluster join: the cluster key in ${this.s.clusterPkiDir} is not readable: ${(e as Error).message}`);
    }
    const ex = new ResponderExchange(
      {
        clusterId: this.s.clusterId,
        selfId: this.s.nodeId,
        privateKey: this.o.self.privateKey,
        publicKey: this.o.self.publicKey,
        secret: iso.secret,
        ...(clusterKey ? { clusterKey } : {}),
        knownKey: (id) => this.o.keyring.get(id),
        removed: (id) => this.removed.has(id),
        now: Date.now,
        random: (n) => randomBytes(n),
      },
      this.replay,
    );
    try {
      const out = ex.onDiscover(frame);
      this.pending.set(conn, { ex, at: Date.now() });
      return out;
    } catch (e) {
      const err = e instanceof JoinError ? e : new JoinError("bad-frame", (e as Error).message);
      if (err.reason === "no-cluster") {
        log.info(`cluster join: ${ex.joinerId ?? "a master"} asked to join; this master has no cluster yet`);
        return noClusterFrame(this.s.nodeId);
      }
      this.refusals.line(`cluster join: refused ${ex.joinerId ?? "a master"} (${err.reason}): ${err.detail}`);
      return refuseFrame(err);
    }
  }

  private async onProof(conn: string, frame: Uint8Array): Promise<Uint8Array> {
    const held = this.pending.get(conn);
    this.pending.delete(conn);
    if (!held) return refuseFrame(new JoinError("state", "PROOF without a DISCOVER on this connection"));
    let who: Admitted;
    try {
      who = held.ex.onProof(frame);
    } catch (e) {
      const err = e instanceof JoinError ? e : new JoinError("bad-frame", (e as Error).message);
      this.refusals.line(`cluster join: refused ${held.ex.joinerId ?? "a master"} (${err.reason}): ${err.detail}`);
      return refuseFrame(err);
    }
    try {
      this.record(who.id, who.pub, who.host, who.port);
      const r = await this.o.propose({ kind: "PEER_KEY", value: { id: who.id, pub: who.pub, host: who.host, port: who.port } });
      if (r.applied === "refused") throw new BrineError("CLUSTER_NOT_COMMITTED", `the cluster log refused ${who.id}'s key: ${r.refusal?.message ?? "refused"}`);
      const members: Record<string, string> = { [this.s.nodeId]: pemOf(this.o.self.publicKey) };
      for (const id of this.o.keyring.peerIds()) {
        const k = this.o.keyring.loaded(id);
        if (k && id !== who.id) members[id] = pemOf(k);
      }
      const addresses: Record<string, { host: string; port: number }> = {};
      for (const st of this.o.transport.status()) {
        if (st.id === undefined || st.id === who.id) continue;
        const a = splitAddress(st.address);
        if (a) addresses[st.id] = a;
      }
      const out = held.ex.admitted({ clusterPem: readFileSync(this.file("cluster.pem"), "utf8"), aes: readFileSync(this.file(CLUSTER_AES_FILE), "utf8").trim(), members, addresses });
      log.info(`cluster join: admitted ${who.id} (${who.host}:${who.port}, key ${pemFinger(who.pub)}); its key is in the cluster log at index ${r.index}`);
      return out;
    } catch (e) {
      held.ex.abort();
      // a key written here but not committed is taken back (a later log entry would not know it)
      if (!this.logged.has(who.id)) this.forgetHere(who.id, "its admission did not commit");
      log.error(`cluster join: admitting ${who.id} failed: ${(e as Error).message}`);
      return refuseFrame(new JoinError("state", `the responder could not admit: ${(e as Error).message}`));
    }
  }

  /**
   * Writes a member's key and dials it (the joiner's, one in ADMIT, one from the log). Refuses another key for a
   * known id unless `replace` (the cluster log is authoritative: a master removed and admitted again).
   */
  private record(id: string, pub: string, host?: string, port?: number, replace = false): void {
    if (!isKeyFileId(id) || id === this.s.nodeId) throw new BrineError("CLUSTER_BAD_NODE_ID", `${JSON.stringify(id)} cannot be a peer's id here`);
    const key = parsePeerPublicKey(pub, `key of ${id}`);
    const known = this.o.keyring.get(id);
    const same = known?.export({ type: "spki", format: "der" }).equals(key.export({ type: "spki", format: "der" }));
    if (known && !same && !replace) throw new BrineError("CLUSTER_PEER_REFUSED", `${id} is known with another key`);
    if (!same) {
      mkdirSync(this.s.peerKeyDir, { recursive: true, mode: 0o755 });
      replaceAtomically(path.join(this.s.peerKeyDir, `${id}.pub`), pemOf(key), 0o644);
      this.o.keyring.set(id, pemOf(key));
      if (known) log.warning(`cluster: ${id}'s key replaced by the one the cluster log holds (it was admitted again)`);
    }
    if (host !== undefined && port !== undefined) this.dial(id, host, port);
  }

  private dial(id: string, host: string, port: number): void {
    const known = this.o.transport.status().some((st) => st.id === id || st.address === `${host}:${port}`);
    if (!known && !this.s.peers.some((p) => p.host === host && p.port === port)) this.o.transport.addPeer({ id, host, port });
  }

  /** ids whose key the cluster log holds (not tombstoned), as last reconciled */
  private readonly logged = new Set<string>();
  /** ids the cluster log records as removed and not re-admitted: their joins are refused ("removed") */
  private readonly removed = new Set<string>();

  /** Mirrors the cluster log's peer keys (manager.onPeerKeys): records each key, forgets each tombstone. */
  reconcile(keys: readonly PeerKeyValue[]): void {
    for (const k of keys) {
      if (k.id === this.s.nodeId) continue;
      try {
        if (k.pub === null) {
          this.logged.delete(k.id);
          if (k.readmit) this.removed.delete(k.id);
          else this.removed.add(k.id);
          if (this.o.keyring.loaded(k.id) || existsSync(path.join(this.s.peerKeyDir, `${k.id}.pub`))) this.forgetHere(k.id, "cluster.remove_member");
        } else {
          this.logged.add(k.id);
          this.removed.delete(k.id);
          this.record(k.id, k.pub, k.host, k.port, true);
        }
      } catch (e) {
        log.error(`cluster: the log's key of ${k.id} could not be recorded: ${(e as Error).message}`);
      }
    }
  }

  private forgetHere(id: string, why: string): void {
    if (!isKeyFileId(id) || id === this.s.nodeId) return;
    rmSync(path.join(this.s.peerKeyDir, `${id}.pub`), { force: true });
    this.o.keyring.delete(id);
    log.warning(`cluster: ${id}'s key is forgotten (${why}); its handshakes are refused until it is admitted again`);
  }

  // ------------------------------------------------------------------ joiner

  /** One join exchange through `host:port`. Writes nothing unless admitted. */
  async attempt(host: string, port: number, timeoutMs: number): Promise<JoinAttempt> {
    const r = await this.exchange(host, port, timeoutMs, false);
    if (r.kind === "same-cluster") throw new BrineError("CLUSTER_JOIN_REFUSED", "a join attempt ended as a probe");
    return r;
  }

  /**
   * The exchange behind attempt(); a `probe` (a member checking whether a peer is in its own cluster) pins this
   * master's own cluster key and stops before the PROOF ("same-cluster" when the keys match).
   */
  private async exchange(host: string, port: number, timeoutMs: number, probe: boolean): Promise<JoinAttempt | { kind: "same-cluster" }> {
    const iso = this.s.isolated;
    if (!iso) throw new BrineError("CLUSTER_CONFIG", "joining with a secret needs cluster_isolated_filesystem");
    const pin = probe ? this.ownPin() : this.pin();
    if (probe && !pin) return { kind: "unreachable", detail: "no cluster key of its own to compare" };
    const ex = new JoinerExchange({
      clusterId: this.s.clusterId,
      selfId: this.s.nodeId,
      listen: this.s.listen,
      privateKey: this.o.self.privateKey,
      publicKey: this.o.self.publicKey,
      secret: iso.secret,
      ...(pin ? { pin } : {}),
      now: Date.now,
      random: (n) => randomBytes(n),
    });
    const sock = new zmq.Dealer({ linger: 0, receiveTimeout: timeoutMs, sendTimeout: timeoutMs, connectTimeout: timeoutMs });
    this.settle.watch(sock);
    this.dialing.add(sock);
    const h = host.includes(":") ? `[${host}]` : host;
    try {
      sock.connect(`tcp://${h}:${port}`);
      const exchange = async (f: Uint8Array): Promise<Uint8Array> => {
        await sock.send(f);
        const [reply] = await sock.receive();
        return reply!;
      };
      let challenge: Uint8Array;
      try {
        challenge = await exchange(ex.discover);
      } catch (e) {
        return { kind: "unreachable", detail: (e as Error).message };
      }
      const refusal = peekRefusal(challenge);
      if (refusal?.reason === "no-cluster") return { kind: "no-cluster", id: refusal.id ?? null };
      let proof: Uint8Array;
      try {
        proof = ex.onChallenge(challenge);
      } catch (e) {
        const err = e instanceof JoinError ? e : new JoinError("bad-frame", (e as Error).message);
        if (!err.remote) await sock.send(refuseFrame(err)).catch(() => undefined);
        return { kind: "refused", reason: err.reason, detail: err.detail, by: err.remote ? "them" : "us" };
      }
      if (probe) return { kind: "same-cluster" };
      let admit: Uint8Array;
      try {
        // the member commits this master's key to the cluster log before it answers: allow for a commit
        sock.receiveTimeout = Math.max(timeoutMs, admitWaitMs);
        admit = await exchange(proof);
      } catch (e) {
        return { kind: "unreachable", detail: `no answer to the proof: ${(e as Error).message}` };
      }
      try {
        const a = ex.onAdmit(admit);
        this.install(a.clusterPem, a.clusterPub, a.aes, a.members, a.addresses);
        return { kind: "admitted", via: a.via, members: Object.keys(a.members).sort() };
      } catch (e) {
        const err = e instanceof JoinError ? e : new JoinError("bad-frame", (e as Error).message);
        return { kind: "refused", reason: err.reason, detail: err.detail, by: err.remote ? "them" : "us" };
      }
    } finally {
      ex.abort();
      this.dialing.delete(sock);
      if (!sock.closed) sock.close();
    }
  }

  /**
   * Closes the sockets of join attempts in flight (each attempt then ends as unreachable), and waits (at most
   * socketsDestroyedWaitMs) until libzmq has destroyed every socket of this host, so the thread may then end.
   */
  async close(): Promise<void> {
    for (const sock of this.dialing) if (!sock.closed) sock.close();
    this.dialing.clear();
    const open = await this.settle.settled(socketsDestroyedWaitMs);
    if (open) log.warning(`join: ${open} socket(s) not yet destroyed by libzmq ${socketsDestroyedWaitMs} ms after close; ending this thread now may abort the process`);
  }

  /** This master's own cluster key, else the fingerprint, else a cluster.pub put in cluster_pki_dir by hand, else none (no cluster is trusted). */
  private pin(): ClusterPin | undefined {
    const own = this.ownPin();
    if (own) return own;
    const iso = this.s.isolated!;
    if (iso.fingerprint) return { fingerprint: iso.fingerprint, hashType: iso.hashType };
    const pub = this.file("cluster.pub");
    if (existsSync(pub)) return { clusterPub: readFileSync(pub, "utf8") };
    return undefined;
  }

  /** With cluster.pem beside cluster.pub: the key of the cluster this master founded or joined (another key is another cluster). */
  private ownPin(): ClusterPin | undefined {
    const pub = this.file("cluster.pub");
    return existsSync(pub) && existsSync(this.file("cluster.pem")) ? { clusterPub: readFileSync(pub, "utf8"), own: true } : undefined;
  }

  private install(clusterPem: string, clusterPub: string, aes: string, members: Record<string, string>, addresses: Record<string, { host: string; port: number }>): void {
    for (const [id, pub] of Object.entries(members)) {
      try {
        const a = addresses[id];
        this.record(id, pub, a?.host, a?.port);
      } catch (e) {
        log.warning(`cluster join: the key of member ${id} was not recorded: ${(e as Error).message}`);
      }
    }
    mkdirSync(this.s.clusterPkiDir, { recursive: true, mode: 0o700 });
    // the derived public half must match what the challenge was signed with (checked in join.ts)
    createPublicKey(createPrivateKey(clusterPem));
    replaceAtomically(this.file("cluster.pub"), clusterPub, 0o644);
    replaceAtomically(this.file(CLUSTER_AES_FILE), aes, 0o600);
    replaceAtomically(this.file("cluster.pem"), clusterPem, 0o400);
  }
}

function splitAddress(a: string): { host: string; port: number } | undefined {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(a);
  if (!m) return undefined;
  return { host: m[1]!, port: Number(m[2]) };
}
