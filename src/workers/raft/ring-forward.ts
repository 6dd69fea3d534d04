/**
 * Proposals and reads for a ring group this master does not host, forwarded over the peer channel to a
 * master that does (one of the ring's founders: in Salt, as here, only founders ever host a ring).
 *
 *   runner on m3 ─ propose("jobs", RING_CONFIG) ─▶ Raft worker m3 (no group "jobs")
 *        ─ request "raft/ring" {op, group, entry | query} ─▶ Raft worker m1 (a founder)
 *        ─ its Raft core forwards to the ring's leader, waits for the commit ─▶ ProposeResult back to m3
 *
 * So a ring-operating runner works on any master, as route_set does for the cluster group (which every
 * master hosts). The founder answers with the same ProposeResult/ReadResult a local call gives, or the coded
 * error its own worker raised (a PeerRemoteError carrying that code).
 *
 * Founders are tried in order (sorted ids), skipping a founder that cannot be reached (no session, timeout,
 * lost connection) or does not host the group yet (it has not applied the ring's registry entry). Any other
 * answer is final: a founder that has no leader for the ring within the deadline speaks for every founder.
 *
 * Trust: the peer channel authenticated the sender as a cluster master; the handler takes only RING_CONFIG
 * proposals and the ring groups' reads, for groups this master hosts, validated as a local call is
 * (Group.propose encodes and validates the entry).
 */
import { cbor } from "../../shared/cbor.js";
import { BrineError, isBrineError, type ErrCode } from "../../shared/errors.js";
import { getLogger } from "../../shared/log.js";
import { CLUSTER_RING } from "../../shared/sab-ring/layout.js";
import type { ProposeResult, ReadQuery, ReadResult } from "./api.js";
import type { GroupManager } from "./manager.js";
import type { PeerMessage } from "./peer/peer-types.js";
import { PeerRemoteError } from "./peer/peer-types.js";
import type { ClusterEntry } from "./state-machines/entries.js";

/** The peer channel ring calls travel on (requests only). */
export const RING_CALL_CHANNEL = "raft/ring";
/** Reads a ring group answers for a peer. */
const RING_READS: ReadonlySet<ReadQuery> = new Set(["membership", "ring_config"]);
/** Errors after which the next founder is tried: this one could not be asked, or does not host the ring yet. */
const TRY_NEXT: ReadonlySet<string> = new Set([
  "CLUSTER_PEER_UNKNOWN",
  "CLUSTER_PEER_DOWN",
  "CLUSTER_PEER_TIMEOUT",
  "CLUSTER_PEER_QUEUE_FULL",
  "CLUSTER_PEER_CLOSED",
  "RAFT_UNKNOWN_GROUP",
  "RAFT_STOPPED",
]);

/** how long founders that do not host the ring yet are waited for, and how often they are asked again, ms */
const catchUpWaitMs = 3000;
const catchUpPollMs = 100;

const log = getLogger("brine.raft.ring-forward");

type RingCall = { op: "propose"; group: string; entry: ClusterEntry } | { op: "read"; group: string; query: ReadQuery };

/** What the forwarder needs of the peer channel (PeerTransport has it). */
export interface RingCallChannel {
  on(channel: string, handler: (m: PeerMessage) => Uint8Array | void | Promise<Uint8Array | void>): () => void;
  request(peerId: string, channel: string, payload: Uint8Array, timeoutMs: number): Promise<Uint8Array>;
}

/** The call a peer sent, checked; a BrineError (CLUSTER_BAD_ENTRY) for anything else. */
export function checkRingCall(raw: unknown): RingCall {
  if (typeof raw !== "object" || raw === null) throw new BrineError("CLUSTER_BAD_ENTRY", "ring call is not a map");
  const o = raw as Record<string, unknown>;
  if (typeof o.group !== "string" || o.group === CLUSTER_RING) throw new BrineError("CLUSTER_WRONG_GROUP", "ring calls name a ring group");
  if (o.op === "propose") {
    const e = o.entry as { kind?: unknown } | null;
    if (typeof e !== "object" || e === null || e.kind !== "RING_CONFIG") throw new BrineError("CLUSTER_WRONG_GROUP", "a forwarded proposal is a RING_CONFIG");
    return { op: "propose", group: o.group, entry: e as ClusterEntry };
  }
  if (o.op === "read" && typeof o.query === "string" && RING_READS.has(o.query as ReadQuery)) return { op: "read", group: o.group, query: o.query as ReadQuery };
  throw new BrineError("CLUSTER_BAD_ENTRY", "ring call op is propose or read (membership, ring_config)");
}

/** A founder's coded answer as the error its worker raised (so callers match the same codes as locally). */
function unwrap(e: unknown): unknown {
  if (!(e instanceof PeerRemoteError)) return e;
  const code = e.remoteCode as ErrCode;
  const err = new BrineError(code);
  err.message = `${e.peerId}: ${e.message.replace(/^.*? answered \S+: /, "")}`;
  return err;
}

export class RingForwarder {
  private readonly off: () => void;

  /** `timeoutMs`: how long one founder may take (its own request deadline plus a commit). */
  constructor(
    private readonly manager: GroupManager,
    private readonly channel: RingCallChannel,
    private readonly timeoutMs: number,
  ) {
    this.off = channel.on(RING_CALL_CHANNEL, (m) => this.serve(m));
  }

  close(): void {
    this.off();
  }

  /** True when a call for `group` must be forwarded: a ring group this master does not host. */
  forwards(group: string): boolean {
    return group !== CLUSTER_RING && !this.manager.has(group);
  }

  propose(group: string, entry: ClusterEntry): Promise<ProposeResult> {
    return this.call<ProposeResult>({ op: "propose", group, entry });
  }

  read(group: string, query: ReadQuery): Promise<ReadResult> {
    return this.call<ReadResult>({ op: "read", group, query });
  }

  private async call<T>(c: RingCall): Promise<T> {
    const founders = this.manager.ringFounders(c.group);
    if (founders === undefined) throw new BrineError("CLUSTER_NO_SUCH_RING", `${JSON.stringify(c.group)} is not an active ring`);
    const payload = Uint8Array.from(cbor.encode(c));
    const until = Date.now() + catchUpWaitMs;
    for (;;) {
      const tried: string[] = [];
      let lagging = 0;
      for (const peer of founders) {
        if (peer === this.manager.self) continue;
        try {
          return cbor.decode(await this.channel.request(peer, RING_CALL_CHANNEL, payload, this.timeoutMs)) as T;
        } catch (e) {
          const err = unwrap(e);
          if (!isBrineError(err) || !TRY_NEXT.has(err.code)) throw err;
          if (err.code === "RAFT_UNKNOWN_GROUP") lagging++;
          tried.push(`${peer} (${err.code})`);
        }
      }
      // founders that have not applied the ring's registry entry yet (it just committed) catch up in a tick or two
      if (lagging === 0 || Date.now() >= until) {
        throw new BrineError("CLUSTER_RING_UNREACHABLE", `ring ${c.group}: no founder answered: ${tried.join(", ") || "none but this master"}`);
      }
      await new Promise((r) => setTimeout(r, catchUpPollMs));
    }
  }

  private async serve(m: PeerMessage): Promise<Uint8Array> {
    if (!m.request) throw new BrineError("CLUSTER_PEER_CHANNEL", `${RING_CALL_CHANNEL} takes requests only`);
    let raw: unknown;
    try {
      raw = cbor.decode(m.payload);
    } catch {
      throw new BrineError("CLUSTER_BAD_ENTRY", "ring call is not CBOR");
    }
    const c = checkRingCall(raw);
    if (!this.manager.has(c.group)) throw new BrineError("RAFT_UNKNOWN_GROUP", `${c.group} is not hosted on ${this.manager.self}`);
    log.debug(`${m.from} forwards a ${c.op} for ring ${c.group}`);
    const r = c.op === "propose" ? await this.manager.propose(c.group, c.entry) : await this.manager.read(c.group, c.query);
    return Uint8Array.from(cbor.encode(r));
  }
}
