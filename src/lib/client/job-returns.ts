/**
 * Publish a job and yield each minion's return as it arrives, as Salt's LocalClient.cmd_iter does:
 * shared by brine's `salt` (LocalClient over the bus socket) and the HTTP API's `local` client (over the
 * API thread's bus feed). The event source must be subscribed before `pub` is called, so no return can
 * be missed; after the wait ends, every minion that did not return is yielded once with `missing: true`.
 *
 * A reader the bus dropped (it disconnects one that falls `pub_server_write_queue_size` events behind in a return
 * flood) loses the events until it is back: its source reconnects and says so (`watchGaps`); then the returns of
 * the minions still pending are read from the master's job cache (`recover`, the jobs.list_job path: cluster-wide
 * under placement), and again for those still missing when the wait ends. A return both read there and seen
 * on the bus is yielded once. Beyond Salt: its LocalClient reconnects (auto_reconnect) but reports the minions
 * whose returns went by meanwhile as not returned.
 */
import type { BusEvent } from "../../shared/event-frame.js";
import { ReturnWaiter } from "./return-waiter.js";
import type { JobReturn, PubOptions, PubReply } from "./local-client.js";

/** How often the wait re-checks its deadlines when no event arrives, ms. */
const tickMs = 100;

export interface JobReturnsOptions {
  timeoutMs: number;
  gatherJobTimeoutMs: number;
  onPub?: (r: PubReply) => void;
  /** the master is a master of masters (order_masters): wait at least this long for minions below syndics */
  syndicWaitMs?: number;
  /** ids never waited for (see ReturnWaiter) */
  notMinion?: (id: string) => boolean;
  /** registers a listener told when the event source was cut off and is back (events in between are lost) */
  watchGaps?: (fn: () => void) => () => void;
  /** the returns the job cache holds for these minions of job `jid` (each `data` a return event's: `return`, `retcode`, `out`) */
  recover?: (jid: string, ids: string[]) => Promise<{ id: string; data: Record<string, unknown> }[]>;
}

/** `subscribe` registers a listener for every bus event and returns its unsubscribe. */
export async function* jobReturns(
  subscribe: (fn: (e: BusEvent) => void) => () => void,
  pub: (o: PubOptions) => Promise<PubReply>,
  o: PubOptions,
  opts: JobReturnsOptions,
): AsyncGenerator<JobReturn> {
  const queue: BusEvent[] = [];
  let wake: (() => void) | undefined;
  const off = subscribe((e) => {
    if (e.tag.startsWith("salt/job/") || (opts.syndicWaitMs !== undefined && e.tag.startsWith("syndic/"))) {
      queue.push(e);
      wake?.();
    }
  });
  /** the source was cut off since the last recovery / ever */
  let gapPending = false;
  let gapped = false;
  const offGaps = opts.watchGaps?.(() => {
    gapPending = true;
    wake?.();
  });
  try {
    const reply = await pub(o);
    opts.onPub?.(reply);
    // a master of masters publishes with no minion of its own matched: the syndics' minions may answer
    if (!reply.jid || !reply.minions || (reply.minions.length === 0 && opts.syndicWaitMs === undefined)) return;
    const w = new ReturnWaiter(reply.jid, reply.minions, opts.timeoutMs, opts.gatherJobTimeoutMs, Date.now(), opts.syndicWaitMs, opts.notMinion);
    for (const m of reply.missing ?? []) yield { id: m, missing: true };
    const jid = reply.jid;
    /** the job cache's returns of `ids` the wait has not seen, fed to it as return events */
    const recovered = async (ids: string[]): Promise<JobReturn[]> => {
      if (!opts.recover || ids.length === 0) return [];
      const got = await opts.recover(jid, ids).catch(() => []);
      const out: JobReturn[] = [];
      for (const { id, data } of got) {
        const r = w.onEvent(`salt/job/${jid}/ret/${id}`, data, Date.now());
        if (r) out.push(r);
      }
      return out;
    };
    while (!w.done) {
      if (gapPending) {
        gapPending = false;
        gapped = true;
        yield* await recovered(w.pending());
      }
      while (queue.length) {
        const e = queue.shift()!;
        const r = w.onEvent(e.tag, e.data, Date.now());
        if (r) yield r;
      }
      const act = w.tick(Date.now());
      if (act?.type === "find_job") {
        const fj = await pub({ tgt: act.minions, tgtType: "list", fun: "saltutil.find_job", arg: [reply.jid], timeoutS: opts.gatherJobTimeoutMs / 1000 }).catch(() => undefined);
        if (fj?.jid) w.watchFindJob(fj.jid);
      } else if (act?.type === "done") {
        const back = gapped || gapPending ? await recovered(act.missing) : [];
        yield* back;
        const found = new Set(back.map((r) => r.id));
        for (const m of act.missing) {
          if (found.has(m)) continue;
          const syndic = w.viaSyndic.get(m);
          if (syndic === undefined) yield w.wasNotConnected(m) ? { id: m, missing: true, notConnected: true } : { id: m, missing: true };
          else yield w.notConnectedBelow(m) ? { id: m, missing: true, syndic, notConnected: true } : { id: m, missing: true, syndic };
        }
        break;
      }
      if (!queue.length) {
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, tickMs);
        });
        wake = undefined;
      }
    }
  } finally {
    off();
    offGaps?.();
  }
}
