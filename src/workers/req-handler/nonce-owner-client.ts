/**
 * A request worker's side of the nonce owner check (the decisions: src/shared/nonce-owner.ts). Clustered, a
 * request whose minion this master does not own on the `cluster` ring waits, after its nonce passed this
 * master's own set, for the decider's verdict before it is acted on: the worker collects the asks of the
 * frames it handles in one turn (a batch: handleRequest runs synchronously up to here for each frame), posts
 * them in one message to the main thread (each with its minion's ring owner, one ring lookup here; the main
 * thread reads the rest of a minion's ring order only when its owner is down, and asks each decider once, over
 * the peer channel), and settles
 * each frame's promise with its verdict. The batch does not hold its lane: its other frames are answered
 * meanwhile (batch-replies.ts), and other batches run. No answer within the bound (the main thread's peer
 * request times out at `brine_cluster_replay_owner_wait_ms`; this side's deadline is a tick of the shared
 * coarse timer later): every frame of the ask is undecided (accepted, logged, and reported to the main thread,
 * which counts it with its own: `{k: "undecided"}`).
 */
import { BroadcastChannel } from "node:worker_threads";
import { randomBytes } from "node:crypto";
import { BrineError } from "../../shared/errors.js";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { NONCE_PACKED_BYTES, packNonces } from "../../shared/nonce-set.js";
import { NONCE_UNDECIDED, needsAsk, type NonceOwnerMsg } from "../../shared/nonce-owner.js";
import { PortCalls, revivePortError } from "../../shared/port-calls.js";
import { sharedTimer } from "../../shared/coarse-timer.js";
import type { RingReader } from "../../shared/sab-ring/reader.js";

const log = getLogger("brine.request");
/** one line per 10 s when asks go unanswered, then a count of what was held back */
const undecidedLog = new LogBudget(1, 10_000, (line) => log.warning(line), "nonce owner checks");
/** this side's deadline past the main thread's peer request bound, ms (the shared coarse timer's tick is 25 ms) */
const askSlackMs = 100;

interface Pending {
  /** the distinct owners of this turn's asks, and per ask the index of its owner */
  owners: string[];
  which: number[];
  ids: string[];
  nonces: string[];
  settle: ((v: number) => void)[];
}

export class NonceOwnerClient {
  private readonly me = randomBytes(8).toString("hex");
  private ch: BroadcastChannel | undefined;
  private readonly calls: PortCalls<Uint8Array>;
  private pending: Pending | undefined;

  constructor(
    private readonly channelName: string,
    private readonly ring: RingReader,
    private readonly self: string,
    waitMs: number,
  ) {
    this.calls = new PortCalls<Uint8Array>(waitMs + askSlackMs, () => new BrineError("THREAD_NO_ANSWER", `no nonce owner verdict within ${waitMs + askSlackMs} ms`), sharedTimer);
  }

  /**
   * The decider's verdict on `nonce` of minion `id` (NONCE_SEEN, NONCE_FRESH, NONCE_UNDECIDED), or undefined
   * when this master decides itself: it owns `id`, or no ring is published (its own set's insert was the
   * decision). Call after the nonce passed this master's own set.
   */
  ask(id: string, nonce: string): Promise<number> | undefined {
    let owner: string | null;
    try {
      owner = this.ring.owner(id);
    } catch (e) {
      undecidedLog.line(`nonce owner check: the ring could not be read (${(e as Error).message}); this master decides alone`);
      this.reportUndecided(1);
      return undefined;
    }
    if (owner === null || !needsAsk(owner, this.self)) return undefined;
    let p = this.pending;
    if (!p) {
      p = this.pending = { owners: [], which: [], ids: [], nonces: [], settle: [] };
      queueMicrotask(() => this.flush());
    }
    let o = p.owners.indexOf(owner);
    if (o < 0) o = p.owners.push(owner) - 1;
    p.which.push(o);
    p.ids.push(id);
    p.nonces.push(nonce);
    return new Promise<number>((r) => p.settle.push(r));
  }

  /** One message for every ask of this turn; each frame settles with its verdict (undecided on any failure). */
  private flush(): void {
    const p = this.pending!;
    this.pending = undefined;
    const undecided = (why: string) => {
      undecidedLog.line(`nonce owner check of ${p.settle.length} request(s) undecided (${why}); accepted without it`);
      this.reportUndecided(p.settle.length);
      for (const s of p.settle) s(NONCE_UNDECIDED);
    };
    const n = packNonces(p.nonces);
    if (n.byteLength !== p.nonces.length * NONCE_PACKED_BYTES) {
      undecided("a nonce did not pack");
      return;
    }
    const ch = this.channel();
    this.calls.call((id) => ch.postMessage({ k: "ask", from: this.me, id, owners: p.owners, which: Uint8Array.from(p.which), ids: p.ids, n } satisfies NonceOwnerMsg)).then(
      (v) => {
        if (v.length !== p.settle.length) undecided(`${v.length} verdicts for ${p.settle.length} requests`);
        else p.settle.forEach((s, i) => s(v[i]!));
      },
      (e: Error) => undecided(e.message),
    );
  }

  /** The main thread counts what a worker accepted undecided on its own with what it left undecided itself. */
  private reportUndecided(n: number): void {
    this.channel().postMessage({ k: "undecided", n } satisfies NonceOwnerMsg);
  }

  private channel(): BroadcastChannel {
    if (this.ch) return this.ch;
    const ch = (this.ch = new BroadcastChannel(this.channelName));
    ch.unref();
    ch.onmessage = (e: unknown) => {
      const m = (e as { data: NonceOwnerMsg }).data;
      if (!m || (m.k !== "res" && m.k !== "err") || m.to !== this.me) return;
      if (m.k === "res") this.calls.resolve(m.id, m.v);
      else this.calls.reject(m.id, revivePortError(m, "THREAD_CALL"));
    };
    return ch;
  }
}
