/**
 * Cluster-wide job reads for the request workers (a minion's `pub_ret`, `minion_publish`): with `jobs` placed on
 * a ring, a job's load and returns live on its owners, not necessarily on the master the minion asks. A
 * request worker asks on this master's job-reads BroadcastChannel (request workers are a thread pool: no port
 * of their own to the Raft worker); the main thread relays the read to its Raft worker (`jobRead`: every
 * master's copy over `raft/placement`, merged) and posts the answer, which the asking worker picks by its
 * `from` token and call id. Messages in the one port style (src/shared/port-calls.ts): `{k: "read", from, id,
 * jid}`, answered `{k: "res", to, id, job}` or `{k: "err", to, id, code, text}`.
 *
 * The same channel carries the minion data reads (`_mine_get`, `_mine`'s merge, grain and pillar targeting) while
 * `grains` or `mine` is placed on a ring (src/workers/raft/minion-placement.ts): `{k: "minions", from, id, q}`
 * (a MinionQuery), answered `{k: "mres", to, id, v}` (a MinionAnswer) or `err`.
 */
import { BroadcastChannel } from "node:worker_threads";
import { randomBytes } from "node:crypto";
import path from "node:path";
import type { MasterConfig } from "./config/defaults.js";
import { BrineError } from "./errors.js";
import { PortCalls, portError, revivePortError, type PortError } from "./port-calls.js";
import type { JobCopy } from "./placement.js";
import type { MinionAnswer, MinionQuery } from "./minion-placement.js";
import { validJid } from "./protocol/ids.js";
import { getLogger } from "./log.js";
import { LogBudget } from "./log-budget.js";

/** How long a request worker waits for a cluster-wide job read (every master asked), ms. */
export const clusterJobReadTimeoutMs = 15_000;

type Msg =
  | { k: "read"; from: string; id: number; jid: string }
  | { k: "res"; to: string; id: number; job: JobCopy }
  | { k: "minions"; from: string; id: number; q: MinionQuery }
  | { k: "mres"; to: string; id: number; v: MinionAnswer }
  | ({ k: "err"; to: string; id: number } & PortError);

/** One channel per master (several masters may run in one process in tests): named by its socket directory and request port. */
export function jobReadsChannel(cfg: MasterConfig): BroadcastChannel {
  const ch = new BroadcastChannel(`brine-job-reads:${path.resolve(cfg.sock_dir)}:${cfg.ret_port}`);
  ch.unref();
  return ch;
}

const log = getLogger("brine.cluster.placement");
const unreachableLog = new LogBudget(1, 60_000, (l) => log.warning(l), "job reads with masters unreachable");

/**
 * Main thread: answers the request workers' reads with `read` (the Raft worker's merged copy; masters it could
 * not ask are logged) and their minion data questions with `minions`.
 */
export function serveJobReads(ch: BroadcastChannel, read: (jid: string) => Promise<{ job: JobCopy; unreachable: Record<string, string> }>, minions?: (q: MinionQuery) => Promise<MinionAnswer>): void {
  ch.onmessage = (e: unknown) => {
    const m = (e as { data: Msg }).data;
    if (!m || (m.k !== "read" && m.k !== "minions") || typeof m.from !== "string" || !Number.isSafeInteger(m.id)) return;
    const { from: to, id } = m;
    if (m.k === "minions") {
      if (!minions) {
        ch.postMessage({ k: "err", to, id, code: "THREAD_CALL", text: "this master answers no minion data reads" } satisfies Msg);
        return;
      }
      minions(m.q).then(
        (v) => {
          const down = Object.entries(v.unreachable);
          if (down.length > 0) unreachableLog.line(`a minion data read (${m.q.op}): ${down.length} master(s) could not be asked, answering from the others: ${down.map(([n, why]) => `${n} (${why})`).join(", ")}`);
          ch.postMessage({ k: "mres", to, id, v } satisfies Msg);
        },
        (err: unknown) => ch.postMessage({ k: "err", to, id, ...portError(err, "THREAD_CALL") } satisfies Msg),
      );
      return;
    }
    if (!validJid(m.jid)) {
      ch.postMessage({ k: "err", to, id, code: "PLACEMENT_BAD_MESSAGE", text: "a job read names no jid" } satisfies Msg);
      return;
    }
    const jid = m.jid;
    read(jid).then(
      ({ job, unreachable }) => {
        const down = Object.entries(unreachable);
        if (down.length > 0) unreachableLog.line(`a minion's read of job ${jid}: ${down.length} master(s) could not be asked, answering from the others: ${down.map(([n, why]) => `${n} (${why})`).join(", ")}`);
        ch.postMessage({ k: "res", to, id, job } satisfies Msg);
      },
      (err: unknown) => ch.postMessage({ k: "err", to, id, ...portError(err, "THREAD_CALL") } satisfies Msg),
    );
  };
}

/** Request worker: reads jobs as the cluster holds them, through the main thread. */
export class ClusterJobReader {
  private ch: BroadcastChannel | undefined;
  private readonly me = randomBytes(8).toString("hex");
  private readonly calls = new PortCalls<JobCopy | MinionAnswer>(clusterJobReadTimeoutMs, () => new BrineError("THREAD_NO_ANSWER", `no cluster-wide read within ${clusterJobReadTimeoutMs / 1000} s`));

  constructor(private readonly cfg: MasterConfig) {}

  /** `jid` merged from every master's copy (a master that could not be asked is left out, as the runners do). */
  read(jid: string): Promise<JobCopy> {
    const ch = this.channel();
    return this.calls.call((id) => ch.postMessage({ k: "read", from: this.me, id, jid } satisfies Msg)) as Promise<JobCopy>;
  }

  /** A question about the cluster's minion data (every master's, merged by this master's Raft worker). */
  minions(q: MinionQuery): Promise<MinionAnswer> {
    const ch = this.channel();
    return this.calls.call((id) => ch.postMessage({ k: "minions", from: this.me, id, q } satisfies Msg)) as Promise<MinionAnswer>;
  }

  private channel(): BroadcastChannel {
    if (this.ch) return this.ch;
    const ch = (this.ch = jobReadsChannel(this.cfg));
    ch.onmessage = (e: unknown) => {
      const m = (e as { data: Msg }).data;
      if (!m || (m.k !== "res" && m.k !== "mres" && m.k !== "err") || m.to !== this.me) return;
      if (m.k === "res") this.calls.resolve(m.id, m.job);
      else if (m.k === "mres") this.calls.resolve(m.id, m.v);
      else this.calls.reject(m.id, revivePortError(m, "THREAD_CALL"));
    };
    return ch;
  }
}
