/**
 * A copy of a request that lands on another master of the cluster gets the reply the first copy got (docs/security.md,
 * "A resend"): Salt 3007's `_pillar` sends the same bytes again on a new connection, which the balancer may hand to
 * any master. The master that answered the first remembers its reply (src/shared/nonce-replies.ts, kept by its
 * request lane); a master holding a copy it remembers nothing for asks every master it sees up, on peer channel
 * `cl/reply`, with the copy's key (its nonce and tag, 64 hex characters), and sends the first non-empty answer to the
 * minion: the same bytes, sealed for that minion by the master that acted. A master answers from its memory, waiting
 * while the first may still be in flight there, or with nothing (empty).
 *
 * Peers are trusted members (docs/security.md, "A peer master"): an answer is passed on as it is. A master of a
 * version without this channel answers with an error, counted as nothing.
 */
import { BrineError } from "../../shared/errors.js";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { NONCE_HEX, TAG_HEX, resendReplyBytesMax } from "../../shared/nonce-replies.js";
import type { PeerHandler } from "../../workers/raft/peer/peer-types.js";

export const REPLY_CHANNEL = "cl/reply";
/**
 * How long a master waits for the others' answers, ms: the first may still be in flight on the one that took it
 * (a `_pillar` whose render outlasted the minion's 60 s request_channel_timeout).
 */
export const resendPeerWaitMs = 60_000;

const log = getLogger("brine.cluster.resend");
const refusedLog = new LogBudget(1, 10_000, (line) => log.warning(line), "reply asks refused");
const KEY = new RegExp(`^[0-9a-f]{${NONCE_HEX + TAG_HEX}}$`);
const NONE = new Uint8Array(0);

export interface ResendChannel {
  request(peerId: string, channel: string, payload: Uint8Array, timeoutMs: number): Promise<Uint8Array>;
  upPeers(): string[];
  on(channel: string, handler: PeerHandler): () => void;
}

export class ResendReplies {
  private readonly off: () => void;
  /**
   * Asks in flight by key: more copies of one request (a minion's tries, or a captured frame replayed in a loop)
   * share one ask per master instead of multiplying the peer channel's traffic by the masters for each copy.
   */
  private readonly inFlight = new Map<string, Promise<Uint8Array | undefined>>();

  constructor(
    private readonly view: ResendChannel,
    /** the reply this master gave the request a key names, if it remembers it (RequestLanes.recallReply) */
    recall: (key: string) => Promise<Uint8Array | undefined>,
    private readonly waitMs = resendPeerWaitMs,
  ) {
    this.off = view.on(REPLY_CHANNEL, async (m) => {
      const key = Buffer.from(m.payload).toString("latin1");
      if (!KEY.test(key)) {
        refusedLog.line(`refused a reply ask from ${m.from}: not a request key (${m.payload.byteLength} bytes)`);
        throw new BrineError("RESEND_BAD_ASK", `${m.payload.byteLength} bytes`);
      }
      const reply = await recall(key);
      return reply && reply.byteLength <= resendReplyBytesMax ? reply : NONE;
    });
  }

  /** The reply some other master gave the request `key` names, or undefined when none that is up remembers it. */
  ask(key: string): Promise<Uint8Array | undefined> {
    const joined = this.inFlight.get(key);
    if (joined) return joined;
    const peers = this.view.upPeers();
    if (peers.length === 0) return Promise.resolve(undefined);
    const asked = this.askAll(key, peers);
    this.inFlight.set(key, asked);
    void asked.then(() => this.inFlight.delete(key));
    return asked;
  }

  private askAll(key: string, peers: string[]): Promise<Uint8Array | undefined> {
    const body = Buffer.from(key, "latin1");
    return new Promise((resolve) => {
      let left = peers.length;
      const one = (r: Uint8Array | undefined) => {
        if (r && r.byteLength > 0) {
          left = -1;
          resolve(r);
        } else if (--left === 0) resolve(undefined);
      };
      for (const p of peers) this.view.request(p, REPLY_CHANNEL, body, this.waitMs).then(one, () => one(undefined));
    });
  }

  close(): void {
    this.off();
  }
}
