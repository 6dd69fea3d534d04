/**
 * The main thread's side of the nonce owner check (the decisions: src/shared/nonce-owner.ts; the asking worker:
 * src/workers/req-handler/nonce-owner-client.ts). Two roles, both on this thread because this is where the peer
 * channel's proxy (peer-proxy.ts) and the peers' up/down state already are, and where peers' nonces are already
 * recorded (the nonce set's SharedArrayBuffer and the journal): no new port to the Raft worker, whose internals
 * stay untouched.
 *
 * - Asker: a request worker's batch of asks (its BroadcastChannel) is split by decider (planAsks: the minion's
 *   owner when it is this master or up, else the first of its ring order that is; the order is read from this
 *   master's ring buffer only then); this master's own share is fresh at once (its worker's
 *   insert into the shared set was the decision); each other decider gets one `cl/nonce` request with its share's
 *   packed nonces, bounded by `brine_cluster_replay_owner_wait_ms`. A decider that fails or does not answer in
 *   time leaves its share undecided (accepted by the worker; counted here, one log line per 10 s), and is passed
 *   over as if down for deciderSkipMs (the next in each minion's order decides meanwhile), so a stalled master
 *   (SIGSTOP, a long GC) costs one bounded wait, not one per batch until its sessions time out. Only this master
 *   passes it over: the others still ask it, so what the stand-in lets through meanwhile is counted (`standIn`)
 *   beside the undecided ones: a copy of such a frame sent to another master may be acted on there too.
 * - Decider: a peer's `cl/nonce` request is checked (whole packed nonces, at most ownerAskNoncesMax) and
 *   answered by `decide` (the nonce set's check-and-insert per nonce; the fresh ones journaled).
 */
import { BroadcastChannel } from "node:worker_threads";
import { BrineError } from "../../shared/errors.js";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { NONCE_PACKED_BYTES } from "../../shared/nonce-set.js";
import { NONCE_FRESH, NONCE_SEEN, NONCE_UNDECIDED, badAsk, badWorkerAsk, planAsks, takeAnswer, type NonceOwnerMsg } from "../../shared/nonce-owner.js";
import type { PeerHandler } from "../../workers/raft/peer/peer-types.js";

export const NONCE_CHANNEL = "cl/nonce";
/** the largest count a worker's report of its own undecided acceptances may carry (a sanity bound), requests */
const undecidedReportMax = 2 ** 31 - 1;
/** a decider that failed or did not answer in time is passed over this long, ms */
export const deciderSkipMs = 2_000;

const log = getLogger("brine.cluster.nonces");
/** one line per 10 s for each flood, then a count of what was held back */
const undecidedLog = new LogBudget(1, 10_000, (line) => log.warning(line), "nonce owner checks undecided");
const refusedLog = new LogBudget(1, 10_000, (line) => log.warning(line), "nonce owner asks refused");

/** What the service needs of the peer channel (the cluster service's FilteredChannel has it). */
export interface NonceOwnerChannel {
  request(peerId: string, channel: string, payload: Uint8Array, timeoutMs: number): Promise<Uint8Array>;
  isUp(peerId: string): boolean;
  on(channel: string, handler: PeerHandler): () => void;
}

export interface NonceOwnerCounters {
  /** asks from this master's workers (one per batch that had requests of minions it does not own) */
  asks: number;
  /** nonces this master sent to a decider */
  askedRemote: number;
  /** of those, answered seen: replays refused */
  seenRemote: number;
  /** nonces left undecided (decider failed or slow, here or past a request worker's own deadline): accepted without the check */
  undecided: number;
  /**
   * nonces accepted on a stand-in's word while their owner, up, was passed over by this master alone (it failed or
   * was slow within deciderSkipMs): the other masters still ask the owner, so a copy sent to one of them meanwhile
   * may be acted on too, as with an undecided one
   */
  standIn: number;
  /** peers' nonces this master decided on, and how many of them it had seen */
  decided: number;
  decidedSeen: number;
  /** peers' asks refused as malformed */
  refused: number;
}

/** `c` in the order of labels.ts NONCE_OWNER_COUNTS (the metrics board's slots); undefined without the check. */
export function nonceOwnerTotals(c: NonceOwnerCounters | undefined): number[] | undefined {
  return c && [c.asks, c.askedRemote, c.seenRemote, c.undecided, c.standIn, c.decided, c.decidedSeen, c.refused];
}

export class NonceOwnerService {
  readonly counters: NonceOwnerCounters = { asks: 0, askedRemote: 0, seenRemote: 0, undecided: 0, standIn: 0, decided: 0, decidedSeen: 0, refused: 0 };
  private readonly ch: BroadcastChannel;
  private readonly off: () => void;
  /** deciders passed over until then (ms since the epoch): they failed or did not answer in time */
  private readonly skipUntil = new Map<string, number>();

  constructor(
    private readonly selfId: string,
    private readonly view: NonceOwnerChannel,
    /** the verdict per packed nonce of a peer's ask (this master's set, by check-and-insert; the fresh ones journaled) */
    private readonly decide: (packed: Uint8Array) => Uint8Array,
    /** brine_cluster_replay_owner_wait_ms */
    private readonly waitMs: number,
    channelName: string,
    /** a minion's order on the `cluster` ring, its owner first (RingReader.replicas), read only when its owner is down */
    private readonly orderOf: (id: string) => readonly string[],
    private readonly now: () => number = Date.now,
  ) {
    this.ch = new BroadcastChannel(channelName);
    this.ch.unref();
    this.ch.onmessage = (e: unknown) => this.onAsk((e as { data: NonceOwnerMsg }).data);
    this.off = view.on(NONCE_CHANNEL, (m) => this.onPeerAsk(m.from, m.payload));
  }

  /** A peer asks this master to decide: one verdict byte per nonce. */
  private onPeerAsk(from: string, payload: Uint8Array): Uint8Array {
    const why = badAsk(payload);
    if (why !== undefined) {
      this.counters.refused++;
      refusedLog.line(`refused a nonce owner ask from ${from}: ${why}`);
      throw new BrineError("NONCE_OWNER_BAD_ASK", why);
    }
    const v = this.decide(payload);
    this.counters.decided += v.length;
    for (const x of v) if (x === NONCE_SEEN) this.counters.decidedSeen++;
    return v;
  }

  /** A worker's asks: split by decider, each remote share asked once, the verdicts posted back together. */
  private onAsk(m: NonceOwnerMsg): void {
    // a worker's own undecided acceptances (its deadline passed before this thread's answer): counted with these
    if (m?.k === "undecided" && Number.isSafeInteger(m.n) && m.n > 0 && m.n <= undecidedReportMax) {
      this.counters.undecided += m.n;
      return;
    }
    if (!m || m.k !== "ask" || typeof m.from !== "string" || !Number.isSafeInteger(m.id)) return;
    const { from: to, id } = m;
    const bad = badWorkerAsk(m);
    if (bad !== undefined) {
      this.ch.postMessage({ k: "err", to, id, code: "NONCE_OWNER_BAD_ASK", text: bad } satisfies NonceOwnerMsg);
      return;
    }
    this.counters.asks++;
    const verdicts = new Uint8Array(m.which.length).fill(NONCE_UNDECIDED);
    const t = this.now();
    const ids = m.ids;
    const passedOver = (p: string) => (this.skipUntil.get(p) ?? 0) > t;
    const plan = planAsks(m.owners, m.which, this.selfId, (p) => this.view.isUp(p) && !passedOver(p), (i) => this.orderOf(String(ids[i])));
    for (const i of plan.local) verdicts[i] = NONCE_FRESH;
    const asks = [...plan.remote].map(([peer, indices]) => this.askPeer(peer, indices, m.n, verdicts));
    const done = () => {
      // an owner this master alone passes over is still every other master's decider: what a stand-in let through
      // may be acted on by one of them too, so it is counted with the undecided ones' risk
      m.which.forEach((o, i) => {
        const owner = m.owners[o]!;
        if (verdicts[i] === NONCE_FRESH && owner !== this.selfId && passedOver(owner) && this.view.isUp(owner)) this.counters.standIn++;
      });
      this.ch.postMessage({ k: "res", to, id, v: verdicts } satisfies NonceOwnerMsg);
    };
    if (asks.length === 0) done();
    else void Promise.all(asks).then(done);
  }

  /** One decider's share: its verdicts into `verdicts`, or left undecided (counted, logged). Never rejects. */
  private async askPeer(peer: string, indices: number[], packed: Uint8Array, verdicts: Uint8Array): Promise<void> {
    const body = new Uint8Array(indices.length * NONCE_PACKED_BYTES);
    indices.forEach((at, i) => body.set(packed.subarray(at * NONCE_PACKED_BYTES, (at + 1) * NONCE_PACKED_BYTES), i * NONCE_PACKED_BYTES));
    this.counters.askedRemote += indices.length;
    let why: string | undefined;
    try {
      why = takeAnswer(verdicts, indices, await this.view.request(peer, NONCE_CHANNEL, body, this.waitMs));
    } catch (e) {
      why = (e as Error).message;
    }
    if (why !== undefined) {
      this.counters.undecided += indices.length;
      this.skipUntil.set(peer, this.now() + deciderSkipMs);
      undecidedLog.line(`nonce owner ${peer} did not decide ${indices.length} request nonce(s) (${why}); accepted without it: a copy of those frames sent to another master meanwhile may be accepted too (${this.counters.undecided} undecided so far)`);
      return;
    }
    this.skipUntil.delete(peer);
    for (const at of indices) if (verdicts[at] === NONCE_SEEN) this.counters.seenRemote++;
  }

  close(): void {
    const c = this.counters;
    if (c.asks > 0 || c.decided > 0 || c.refused > 0) log.info(`nonce owner check: ${c.asks} asks of this master's workers, ${c.askedRemote} nonces asked of deciders, ${c.seenRemote} of them replays refused, ${c.undecided} undecided (accepted without a word), ${c.standIn} on a stand-in's word while their owner was passed over; ${c.decided} peers' nonces decided here, ${c.decidedSeen} of them seen; ${c.refused} malformed asks refused`);
    this.off();
    this.ch.close();
  }
}
