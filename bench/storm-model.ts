/**
 * A model of an auth storm (issue 17): which order and drop policy of the clear (sign-in) lane signs a fleet in
 * soonest when the lane is slower than the storm. Not a measurement: a discrete-event simulation on a clock of its
 * own, seeded (the same figures on every run), to tell which lane policies are worth measuring on a real master.
 *
 * Each minion behaves as Salt 3007.x's does (salt/crypt.py `AsyncAuth._authenticate`, `sign_in`;
 * salt/transport/zeromq.py `RequestClient._send_recv`; bench/RESULTS.md session 11): one payload sent up to
 * `auth_tries` (7) times, `auth_timeout` (5 s) each, a timed-out try's connection closed and the next try sent on
 * a new one 300 ms later; all tries timed out, or a retry-later reply (`{"error": …}`), end the sign-in and the
 * next starts after `acceptance_wait_time` (10 s) with a new payload. The minions start within the first 500 ms; a
 * try reaches the lane 100-1,500 ms after its send (the accept and the handshake of a busy master), a reply the
 * minion 20 ms after its batch ends. The master: one clear-lane thread working batches of up to 64 sign-ins at
 * `signInMs` each (the wall time a sign-in takes the lane on a shared box: its CPU over the thread's share of a
 * core), the request port's 10 s memory of sign-in replies (a try with the same bytes is answered at once), the
 * connection board (a try whose connection closed is not worked on).
 *
 * Policies: `oldest first` (brine's lane: arrival order, the worker answers retry-later a sign-in older than
 * `brine_auth_stale_ms`, 4.5 s, and skips one whose connection closed); `oldest first, open connections never
 * stale` (the same without the bound: a connection still open is a minion still waiting); `newest first` (the same bounds, the newest
 * taken first, stale ones answered retry-later as soon as they pass the bound); `newest first, no reply` (stale ones
 * dropped without a reply once their minion closed the connection); `admission` (arrival order, a try refused at once
 * with retry-later when the lane holds more than 3 s of work).
 *
 * `BRINE_BENCH_MODEL_CASES=9500:4,5000:4` chooses the fleets (minions:signInMs); default 3,000, 5,000 and 9,500 at
 * 4 ms and 9,500 at 6 ms.
 */
import { Rng } from "../tools/raft-sim/rng.js";
import type { BenchOptions, BenchRow } from "./types.js";

const authTimeoutMs = 5000;
const authTries = 7;
const reconnectMs = 300;
const acceptanceWaitMs = 10_000;
const rememberMs = 10_000;
const staleMs = 4500;
const admitMs = 3000;
const batchMax = 64;

export const POLICIES = ["oldest first", "oldest first, open connections never stale", "newest first", "newest first, no reply", "admission"] as const;
export type Policy = (typeof POLICIES)[number];

/** A min-heap of timed events (ties in the order they were set). */
class Events {
  private h: { at: number; seq: number; run: () => void }[] = [];
  private seq = 0;
  now = 0;

  at(at: number, run: () => void): void {
    const h = this.h;
    h.push({ at, seq: this.seq++, run });
    for (let i = h.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (this.less(h[p]!, h[i]!)) break;
      [h[p], h[i]] = [h[i]!, h[p]!];
      i = p;
    }
  }

  private less(a: { at: number; seq: number }, b: { at: number; seq: number }): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  run(endMs: number, stop: () => boolean): void {
    const h = this.h;
    while (h.length && !stop()) {
      const top = h[0]!;
      if (top.at > endMs) return;
      const last = h.pop()!;
      if (h.length) {
        h[0] = last;
        for (let i = 0; ; ) {
          const l = 2 * i + 1;
          let m = i;
          if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
          if (l + 1 < h.length && this.less(h[l + 1]!, h[m]!)) m = l + 1;
          if (m === i) break;
          [h[m], h[i]] = [h[i]!, h[m]!];
          i = m;
        }
      }
      this.now = top.at;
      top.run();
    }
  }
}

export interface ModelOutcome {
  accepted: number;
  /** sign-ins worked on (RSA) */
  worked: number;
  /** worked on, and no minion took the reply (at its try, or from the memory at a later try) */
  wasted: number;
  tries: number;
  timedOutTries: number;
  /** retry-later replies that reached a minion still waiting (each ends its sign-in: 10 s before the next) */
  retryLaterHeard: number;
  lastAcceptedMs: number;
  /** time the lane worked, ms */
  busyMs: number;
}

interface Frame {
  arrival: number;
  minion: number;
  payload: number;
  conn: number;
}

export function modelStorm(policy: Policy, n: number, signInMs: number, seed = 17): ModelOutcome {
  const ev = new Events();
  const rng = new Rng(seed);
  const closed = new Set<number>();
  const memory = new Map<number, { at: number; taken: boolean }>();
  const queue: Frame[] = [];
  const out: ModelOutcome = { accepted: 0, worked: 0, wasted: 0, tries: 0, timedOutTries: 0, retryLaterHeard: 0, lastAcceptedMs: 0, busyMs: 0 };
  const live = new Array<number>(n).fill(-1);
  let conns = 0;
  let payloads = 0;
  let busy = false;

  const reply = (f: Frame, signed: boolean) =>
    ev.at(ev.now + 20, () => {
      if (live[f.minion] !== f.conn) return; // the minion stopped waiting on that connection
      live[f.minion] = -1;
      closed.add(f.conn);
      if (signed) {
        out.accepted++;
        out.lastAcceptedMs = ev.now;
        memory.get(f.payload)!.taken = true;
        return;
      }
      out.retryLaterHeard++;
      ev.at(ev.now + acceptanceWaitMs, () => signIn(f.minion));
    });

  /** The next batch by the policy; the frames answered retry-later meanwhile. */
  const take = (): Frame[] => {
    const batch: Frame[] = [];
    if (policy === "oldest first" || policy === "admission" || policy === "oldest first, open connections never stale") {
      const bound = policy !== "oldest first, open connections never stale";
      for (const f of queue.splice(0, batchMax)) {
        if (closed.has(f.conn)) continue;
        if (bound && ev.now - f.arrival > staleMs) reply(f, false);
        else batch.push(f);
      }
      return batch;
    }
    // newest first: the stale ones from the front (answered, or dropped once their connection closed), work from the back
    let k = 0;
    while (k < queue.length && ev.now - queue[k]!.arrival > staleMs) {
      const f = queue[k]!;
      if (policy === "newest first") reply(f, false);
      else if (!closed.has(f.conn)) break; // no reply: kept until its minion closes it
      k++;
    }
    queue.splice(0, k);
    while (batch.length < batchMax && queue.length) {
      const f = queue.pop()!;
      if (!closed.has(f.conn)) batch.push(f);
    }
    return batch;
  };

  const work = () => {
    while (!busy && queue.length) {
      const batch = take();
      if (!batch.length) continue;
      busy = true;
      const ms = batch.length * signInMs;
      out.busyMs += ms;
      ev.at(ev.now + ms, () => {
        busy = false;
        for (const f of batch) {
          out.worked++;
          if (memory.has(f.payload)) out.wasted++; // worked on twice
          memory.set(f.payload, { at: ev.now, taken: false });
          reply(f, true);
        }
        work();
      });
    }
  };

  const send = (minion: number, payload: number, tryNo: number) => {
    const conn = conns++;
    live[minion] = conn;
    out.tries++;
    ev.at(ev.now + 100 + rng.next() * 1400, () => {
      if (closed.has(conn)) return;
      const f: Frame = { arrival: ev.now, minion, payload, conn };
      const m = memory.get(payload);
      if (m && ev.now - m.at <= rememberMs) return reply(f, true);
      if (policy === "admission" && queue.length * signInMs > admitMs) return reply(f, false);
      queue.push(f);
      work();
    });
    ev.at(ev.now + authTimeoutMs, () => {
      if (live[minion] !== conn) return;
      out.timedOutTries++;
      closed.add(conn);
      live[minion] = -1;
      if (tryNo < authTries) ev.at(ev.now + reconnectMs, () => send(minion, payload, tryNo + 1));
      else ev.at(ev.now + acceptanceWaitMs, () => signIn(minion));
    });
  };
  const signIn = (minion: number) => send(minion, payloads++, 1);

  for (let i = 0; i < n; i++) ev.at(rng.next() * 500, () => signIn(i));
  ev.run(3_600_000, () => out.accepted === n);
  for (const m of memory.values()) if (!m.taken) out.wasted++;
  return out;
}

export async function run(_opts: BenchOptions): Promise<BenchRow[]> {
  const cases = (process.env.BRINE_BENCH_MODEL_CASES ?? "3000:4,5000:4,9500:4,9500:6").split(",").map((c) => c.split(":").map(Number) as [number, number]);
  const rows: BenchRow[] = [];
  for (const [n, ms] of cases) {
    for (const policy of POLICIES) {
      const o = modelStorm(policy, n, ms);
      rows.push({
        figure: `model ${n} at ${ms} ms a sign-in, ${policy}: all signed in within`,
        value: Math.round(o.lastAcceptedMs / 100) / 10,
        unit: "s",
        better: "lower",
        note: `the lane's work alone ${((n * ms) / 1000).toFixed(1)} s (busy ${(o.busyMs / 1000).toFixed(1)} s); tries ${(o.tries / n).toFixed(2)} per minion, ${o.timedOutTries} timed out; sign-ins worked on ${o.worked} (wasted ${o.wasted}); retry-later replies heard ${o.retryLaterHeard}${o.accepted < n ? `; only ${o.accepted} signed in` : ""}`,
      });
    }
  }
  return rows;
}
