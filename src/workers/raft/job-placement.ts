/**
 * Job placement's shell, in the Raft worker (the thread that owns the peer channel and knows the rings): the
 * decisions are src/shared/placement.ts's. Peer channel `raft/placement`, requests only:
 *
 * - **Hand-off** (`store`): when `jobs` is routed to a ring, every job record this master writes (request
 *   workers, runner threads: src/lib/store/job-cache.ts) is also put in the outbox `jobs/handoff`, before the
 *   record itself, in the same durable commit as the write a minion's reply waits for. Every
 *   handoffIntervalMs (on the worker's one timer) a round takes up to handoffRoundKeysMax outbox keys,
 *   names each jid's owners, sends each owner its records, and settles what every owner acknowledged: the
 *   outbox key goes (if its stamp did not change meanwhile), and so does this master's copy of the record when
 *   it is not an owner. An owner acknowledges only what it has on disk (it refuses jids it does not own by its
 *   own table). Nothing is dropped before that, so a return acknowledged to a minion survives any one master's
 *   death: it is on the master that took it until the owners have it. A failed send is retried next round.
 * - **Tables** (`table`): a master outside the ring has no slot table of it (only its hosts publish it in the
 *   shared ring); it asks one of the ring's founders and keeps the answer tableTtlMs (dropped at once when an
 *   owner refuses a jid as not its own).
 * - **Reads** (`read`, `list`): the jobs.* runners ask, through their Raft worker port, every master of the
 *   cluster for its copy of a jid (or its list of jobs) and merge them, so a job is found wherever it lives and
 *   while one of its owners is down; a list is the newest `max` jobs (brine_cluster_list_jobs_max), each
 *   master's pages read only as far as the merge needs them.
 */
import { BrineError, ERR } from "../../shared/errors.js";
import { cbor } from "../../shared/cbor.js";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { validId, validJid } from "../../shared/protocol/ids.js";
import { ringSlots } from "../../shared/sab-ring/layout.js";
import {
  mergeCopies,
  NewestJobs,
  outboxJid,
  mustHandOn,
  ownersOf,
  sameOwnership,
  planRound,
  settleRound,
  tableUsable,
  type JobCopy,
  type ListedJob,
  type PlacementTable,
} from "../../shared/placement.js";
import { MINION_OUTBOX_PREFIX } from "../../shared/minion-placement.js";
import type { Store } from "../../lib/store/lmdb-env.js";
import { JobCache, handoffStamp } from "../../lib/store/job-cache.js";
import { formatJob } from "../../lib/store/job-listing.js";
import { checkHanded, jobRecord, returnRecord, storeHanded, type HandedJob } from "../../lib/store/handed-jobs.js";
import { checkListJobsFilter, entryMatches, type ListJobsFilter } from "../../lib/store/job-filter.js";
import type { PeerMessage } from "./peer/peer-types.js";
import type { RingCallChannel } from "./ring-forward.js";
import { unknownKind } from "./peer-kinds.js";

export const PLACEMENT_CHANNEL = "raft/placement";
/** how often a hand-off round may start (the worker's tick calls `tick`), ms */
export const handoffIntervalMs = 100;
/** outbox keys one round takes at most, count */
export const handoffRoundKeysMax = 2_000;
/** one hand-off request's records at most (the peer channel's frame is 8 MiB), bytes */
export const handoffRequestBytesMax = 4 * 1024 * 1024;
/** how long a table fetched from a host of the ring is used, ms */
export const tableTtlMs = 10_000;
/** one page of a master's `list` answer at most (newest jobs first; the asker pages on), bytes */
export const listPageBytesMax = 4 * 1024 * 1024;
/** one page of this master's own list in a cluster-wide list (read in place, never sent), jobs */
export const localPageJobsMax = 1_000;
/** jobs one filtered `list` page looks at most (it may then hold none: the asker pages on from its cursor), count */
export const listFilterScanMax = 20_000;
/** job-cache keys one round looks at when the ring's table changed (rebalancing), count */
export const rebalanceRoundKeysMax = 5_000;

const log = getLogger("brine.cluster.placement");
const roundLog = new LogBudget(1, 10_000, (line) => log.warning(line), "job hand-off");

/** The requests of `raft/placement`. */
export type PlacementOp = "store" | "read" | "list" | "table";

export interface PlacementDeps {
  /** the job cache (opened lazily by the caller, shared with HeldJobsService) */
  store: () => Store;
  channel: RingCallChannel;
  self: string;
  timeoutMs: number;
  /** the ring `jobs` is routed to now, null for broadcast */
  route: () => string | null;
  /** this master's own table of `ring` when it hosts it */
  localTable: (ring: string) => PlacementTable | undefined;
  /** masters that may answer a table question (the ring's founders) */
  hosts: (ring: string) => string[];
  /** every other master of the cluster (reads ask them all) */
  peers: () => string[];
  /** whether the peer channel has a session with `peer` now: one without is not asked (no wait for a dead master) */
  up: (peer: string) => boolean;
  now?: () => number;
  /** one `list` page at most, bytes (listPageBytesMax; tests make it small) */
  listPageBytes?: number;
}

/** A master's copy of a jid, or why it could not be had. */
export type CopyAnswer = JobCopy | { error: string };

export interface ClusterJob {
  job: JobCopy;
  /** masters that could not be asked, with why */
  unreachable: Record<string, string>;
}

export interface ClusterJobList {
  /** the newest jobs (at most the `max` asked for), oldest first */
  jobs: ListedJob[];
  /** masters that could not be asked (or stopped answering between pages), with why */
  unreachable: Record<string, string>;
  /** the cluster holds more jobs than the `max` asked for: the older ones were left out */
  truncated?: true;
}

/**
 * The job cache's databases a rebalancing scan walks, in order: every part of a job record (a master may hold
 * a job's end time, expected minions or nocache mark without its load: the load lives where it was published,
 * or a hand-off was cut short), then returns. A job record found in several is put in the outbox once.
 */
const RESCAN_PHASES = ["loads", "minions", "endtimes", "nocache", "returns"] as const;

/** A rebalancing scan in progress: the job cache's keys, in key order, from `after` on. */
interface Rescan {
  prev: PlacementTable;
  next: PlacementTable;
  /** which database is being walked (RESCAN_PHASES, in order) */
  phase: (typeof RESCAN_PHASES)[number];
  /** the last key looked at, undefined at the start of a phase */
  after: string | undefined;
}

export class JobPlacement {
  private readonly now: () => number;
  private busy = false;
  private last = 0;
  private remote: { table: PlacementTable; at: number } | undefined;
  /** outbox keys found without a record last round (key -> stamp): gone for good if the same next round */
  private absent = new Map<string, number>();
  private readonly off: () => void;
  /** the table of the routed ring this master hosted at its last round (rebalancing compares with it) */
  private seen: PlacementTable | undefined;
  private rescan: Rescan | undefined;
  /** the table last written to `jobs/placed-by` */
  private stored: PlacementTable | undefined;
  /** `raft/placement` requests this master answered since its start, by op (placement_check shows them) */
  readonly served: Record<PlacementOp, number> = { store: 0, read: 0, list: 0, table: 0 };

  constructor(private readonly d: PlacementDeps) {
    this.now = d.now ?? Date.now;
    this.off = d.channel.on(PLACEMENT_CHANNEL, (m) => this.serve(m));
  }

  close(): void {
    this.off();
  }

  /** Called on every tick of the worker's timer: starts a round when one is due and none runs. */
  tick(): void {
    if (this.busy || this.now() - this.last < handoffIntervalMs) return;
    this.last = this.now();
    this.busy = true;
    this.round()
      .catch((e: unknown) => {
        roundLog.line(`a job hand-off round failed: ${(e as Error)?.message ?? String(e)}`);
      })
      .finally(() => (this.busy = false));
  }

  /** One hand-off round (see the header). Resolves when it settled what it could. */
  async round(): Promise<void> {
    const ring = this.d.route();
    if (ring === null) {
      this.seen = this.rescan = undefined;
      return;
    }
    const s = this.d.store();
    await this.rebalance(ring, s);
    const entries: [string, number][] = [];
    // the outbox's minion records (`~d/<id>`, `~m/<id>`) sort after every jid: minion-placement.ts hands them off
    for (const { key, value } of s.handoff.getRange({ end: MINION_OUTBOX_PREFIX, limit: handoffRoundKeysMax })) entries.push([key, value]);
    if (entries.length === 0) return;
    const table = await this.table(ring);
    if (!table) {
      roundLog.line(`${entries.length} job records wait to be handed off: no table of ring ${ring} on ${this.d.self} and none of its hosts answered`);
      return;
    }
    const plan = planRound(entries, (jid) => ownersOf(table, jid), this.d.self);
    const orphans: [string, number][] = [];
    const absentNow = new Map<string, number>();
    const records = new Map<string, HandedJob>();
    for (const [jid, j] of plan.jobs) {
      const h: HandedJob = { jid };
      j.keys = j.keys.filter(([key, stamp]) => {
        const found = key === jid ? jobRecord(s, jid, h) : returnRecord(s, jid, key, h);
        if (found) return true;
        // the record's write may not have committed yet (its stamp did): only the same stamp twice is an orphan
        if (this.absent.get(key) === stamp) orphans.push([key, stamp]);
        else absentNow.set(key, stamp);
        return false;
      });
      records.set(jid, h);
    }
    this.absent = absentNow;
    const acked = new Map<string, Set<string>>();
    await Promise.all(
      [...plan.byPeer].map(async ([peer, jids]) => {
        const ok = new Set<string>();
        if (!this.d.up(peer)) {
          roundLog.line(`jobs for ${peer} wait on ${this.d.self}: ${peer} is down`);
          acked.set(peer, ok);
          return;
        }
        const jobs = jids.filter((jid) => plan.jobs.get(jid)!.keys.length > 0).map((jid) => records.get(jid)!);
        for (const batch of byteBatches(jobs, handoffRequestBytesMax)) {
          try {
            const a = cbor.decode(await this.d.channel.request(peer, PLACEMENT_CHANNEL, cbor.encode({ op: "store", ring, jobs: batch }) as Uint8Array, this.d.timeoutMs)) as { ok?: unknown; refused?: unknown };
            if (Array.isArray(a?.ok)) for (const jid of a.ok) if (typeof jid === "string") ok.add(jid);
            if (Array.isArray(a?.refused) && a.refused.length > 0) {
              this.remote = undefined;
              roundLog.line(`${peer} refused ${a.refused.length} jobs of ring ${ring} as not its own (tables differ; asked again next round)`);
            }
          } catch (e) {
            // the owner has no table of the ring (it is not a host, or not yet): ask for a table again
            if ((e as Error).message.includes(ERR.PLACEMENT_NO_TABLE)) this.remote = undefined;
            roundLog.line(`handing ${batch.length} jobs to ${peer} failed, retried next round: ${(e as Error).message}`);
            break;
          }
        }
        acked.set(peer, ok);
      }),
    );
    const st = settleRound(plan, acked, this.d.self);
    if (st.settled.length === 0 && orphans.length === 0) return;
    await s.root.transaction(() => {
      for (const [key, stamp] of orphans) if (s.handoff.get(key) === stamp) s.handoff.removeSync(key);
      for (const [key, stamp] of st.settled) {
        // a write since the round read it rewrote the stamp: that record goes again next round
        if (s.handoff.get(key) !== stamp) continue;
        s.handoff.removeSync(key);
        if (!st.drop.has(key)) continue;
        if (key.includes("/")) s.returns.removeSync(key);
        else for (const db of [s.loads, s.listed, s.minions, s.endtimes, s.nocache] as const) db.removeSync(key);
      }
    });
  }

  /**
   * Rebalancing: when the table of the routed ring this master hosts changes (a voter joined or left the ring,
   * replicas or the policy changed), every record this master must hand on (mustHandOn: it no longer owns the
   * jid, or the jid has a new owner) is put back in the outbox, up to rebalanceRoundKeysMax keys of the job
   * cache per round across its databases (RESCAN_PHASES), so the hand-off gives it to its new owners and a
   * master no longer among them drops its copy once they have it. A master that never hosted the ring holds nothing past its outbox, which follows the
   * current table anyway; one that hosted it and left (a voter removed from the ring while it runs) goes on
   * with a host's table, so its copies move to their owners too.
   */
  private async rebalance(ring: string, s: Store): Promise<void> {
    // after a start: the table this master's copies were placed by when it stopped (a change while it was down)
    const prev = this.seen ?? storedTable(s.placedBy.get(ring), ring);
    const own = this.d.localTable(ring);
    const t = own && tableUsable(own) ? own : prev?.ring === ring ? await this.table(ring) : undefined;
    if (!t || !tableUsable(t)) return;
    this.seen = t;
    if (prev && prev.ring === ring && !sameOwnership(prev, t)) {
      // a change during a scan: compare with the table the scan started from (what the copies were placed by)
      this.rescan = { prev: this.rescan?.prev ?? prev, next: t, phase: "loads", after: undefined };
      log.info(`ring ${ring}'s owners changed (voters ${prev.nodes.join(",") || prev.voters.join(",")} -> ${t.nodes.join(",") || t.voters.join(",")}, replicas ${prev.replicas} -> ${t.replicas}): jobs whose owners changed go back to the hand-off`);
    } else if (prev && prev.ring !== ring) this.rescan = undefined;
    // what the copies are placed by: the scan's starting table until the scan is done (a restart resumes it)
    const placedBy = this.rescan?.prev ?? t;
    if (!this.stored || !sameOwnership(placedBy, this.stored)) {
      await s.placedBy.put(ring, tableRecord(placedBy));
      this.stored = placedBy;
    }
    const r = this.rescan;
    if (!r) return;
    r.next = t;
    // up to rebalanceRoundKeysMax keys a round, across phases (a small cache is walked in one round)
    const moved: string[] = [];
    let budget = rebalanceRoundKeysMax;
    while (budget > 0 && this.rescan) {
      const keys: string[] = [];
      for (const key of s[r.phase].getKeys({ ...(r.after !== undefined ? { start: r.after } : {}), limit: budget + 1 })) {
        if (key === r.after) continue;
        keys.push(key as string);
        if (keys.length >= budget) break;
      }
      budget -= keys.length;
      // a job record with a load was put in the outbox whole by the `loads` phase
      const part = r.phase !== "loads" && r.phase !== "returns";
      for (const key of keys) if (!(part && s.loads.doesExist(key)) && mustHandOn(r.prev, r.next, outboxJid(key), this.d.self)) moved.push(key);
      if (budget > 0) {
        const next = RESCAN_PHASES[RESCAN_PHASES.indexOf(r.phase) + 1];
        r.after = undefined;
        if (next) r.phase = next;
        else {
          this.rescan = undefined;
          log.info(`ring ${ring}: the rebalancing scan of this master's job cache is done`);
        }
      } else r.after = keys[keys.length - 1];
    }
    if (moved.length > 0) {
      await s.root.transaction(() => {
        for (const key of moved) if (!s.handoff.doesExist(key)) s.handoff.putSync(key, handoffStamp());
      });
    }
  }

  /** The table to place `ring`'s jobs with: this master's own, else one fetched from a host. */
  async table(ring: string): Promise<PlacementTable | undefined> {
    const own = this.d.localTable(ring);
    if (own && tableUsable(own)) return own;
    if (this.remote && this.remote.table.ring === ring && this.now() - this.remote.at < tableTtlMs) return this.remote.table;
    this.remote = undefined;
    for (const host of this.d.hosts(ring)) {
      if (host === this.d.self || !this.d.up(host)) continue;
      try {
        const t = checkTable(cbor.decode(await this.d.channel.request(host, PLACEMENT_CHANNEL, cbor.encode({ op: "table", ring }) as Uint8Array, this.d.timeoutMs)), ring);
        if (tableUsable(t)) {
          this.remote = { table: t, at: this.now() };
          return t;
        }
      } catch (e) {
        log.debug(`ring ${ring}'s table from ${host}: ${(e as Error).message}`);
      }
    }
    return undefined;
  }

  // --- reads ---------------------------------------------------------------------------------------------

  /** This master's copy of `jid`. */
  localCopy(jid: string): JobCopy {
    const s = this.d.store();
    const out: JobCopy = { returns: {} };
    const load = s.loads.get(jid);
    const minions = s.minions.get(jid);
    const endtime = s.endtimes.get(jid);
    if (load) out.load = load;
    if (Array.isArray(minions)) out.minions = minions;
    if (typeof endtime === "string") out.endtime = endtime;
    if (s.nocache.get(jid) === true) out.nocache = true;
    // as readers see them (a runner job's return stored as msgpack bytes comes decoded)
    out.returns = new JobCache(s).returnsFor(jid);
    return out;
  }

  /**
   * One page of this master's jobs: newest first from `before` (exclusive; the newest job when absent) until
   * `pageBytes`, answered oldest first, with `next` (the cursor of the following page) when jobs are left.
   * A page holds at least one job, so paging always advances. With `filter` (jobs.list_jobs' search_* and time
   * filters) only matching jobs are listed, and a page looks at no more than listFilterScanMax jobs: it may then
   * hold none, its cursor being the last job looked at.
   */
  localList(before?: string, pageBytes = Infinity, pageJobs = Infinity, filter?: ListJobsFilter): { jobs: ListedJob[]; next?: string } {
    const s = this.d.store();
    const jobs: ListedJob[] = [];
    let bytes = 0;
    let next: string | undefined;
    // with a filter, a page looks at most listFilterScanMax jobs: it may hold none, its cursor the last looked at
    let scanned = 0;
    let seen: string | undefined;
    for (const { key, value } of s.loads.getRange({ reverse: true, ...(before !== undefined ? { start: before } : {}) })) {
      if (!value || key === before) continue;
      if (filter) {
        if (scanned >= listFilterScanMax && seen !== undefined) {
          next = seen;
          break;
        }
        scanned++;
        seen = key;
        if (!entryMatches(filter, formatJob(key, value))) continue;
      }
      const m = s.minions.get(key);
      const e = s.endtimes.get(key);
      const job: ListedJob = [key, value, Array.isArray(m) ? m : null, typeof e === "string" ? e : null];
      if (jobs.length >= pageJobs) {
        next = jobs[jobs.length - 1]![0];
        break;
      }
      if (pageBytes !== Infinity) {
        bytes += (cbor.encode(job) as Uint8Array).byteLength;
        if (bytes > pageBytes && jobs.length > 0) {
          next = jobs[jobs.length - 1]![0];
          break;
        }
      }
      jobs.push(job);
    }
    return { jobs: jobs.reverse(), ...(next !== undefined ? { next } : {}) };
  }

  /** One page of `peer`'s job list, older than `before` (one peer-channel request), `filter` applied there. */
  private async peerPage(peer: string, before: string | undefined, filter?: ListJobsFilter): Promise<{ jobs: ListedJob[]; next?: string }> {
    const a = checkList(cbor.decode(await this.d.channel.request(peer, PLACEMENT_CHANNEL, cbor.encode({ op: "list", ...(before !== undefined ? { before } : {}), ...(filter ? { filter } : {}) }) as Uint8Array, this.d.timeoutMs)));
    if (before !== undefined && a.next !== undefined && a.next >= before) throw new BrineError("PLACEMENT_BAD_MESSAGE", `list page cursor did not move back (${a.next} after ${before})`);
    return a;
  }

  /** `jid` as the cluster holds it: this master's copy merged with every other master's. */
  async clusterCopy(jid: string): Promise<ClusterJob> {
    if (!validJid(jid)) return { job: { returns: {} }, unreachable: {} };
    const unreachable: Record<string, string> = {};
    const copies = await Promise.all(
      this.d.peers().map(async (p): Promise<JobCopy | undefined> => {
        if (!this.d.up(p)) {
          unreachable[p] = "down (no peer session)";
          return undefined;
        }
        try {
          return checkCopy(cbor.decode(await this.d.channel.request(p, PLACEMENT_CHANNEL, cbor.encode({ op: "read", jid }) as Uint8Array, this.d.timeoutMs)));
        } catch (e) {
          unreachable[p] = (e as Error).message;
          return undefined;
        }
      }),
    );
    return { job: mergeCopies([this.localCopy(jid), ...copies.filter((c): c is JobCopy => c !== undefined)]), unreachable };
  }

  /**
   * The newest `max` jobs of every master, merged (NewestJobs: each master's list read page by page, newest
   * first, only as far as the merge needs), so this thread holds at most `max` jobs and one page per master
   * however many jobs the cluster keeps; `truncated` when older ones were left out.
   */
  async clusterList(max = Infinity, filter?: ListJobsFilter): Promise<ClusterJobList> {
    const unreachable: Record<string, string> = {};
    const peers = this.d.peers();
    const merge = new NewestJobs(peers.length + 1, max);
    const cursor: (string | undefined)[] = [];
    for (const [i, p] of peers.entries()) {
      if (this.d.up(p)) continue;
      unreachable[p] = "down (no peer session)";
      merge.end(i + 1);
    }
    while (merge.take() === "need") {
      await Promise.all(
        merge.wanting().map(async (i) => {
          try {
            // this master's own pages by count (nothing crosses a channel: no encoding to measure them)
            const page = i === 0 ? this.localList(cursor[i], Infinity, localPageJobsMax, filter) : await this.peerPage(peers[i - 1]!, cursor[i], filter);
            cursor[i] = page.next;
            merge.feed(i, page.jobs, page.next !== undefined);
          } catch (e) {
            // a master that stops answering between pages: what it gave is merged, the rest is left out (logged)
            unreachable[peers[i - 1] ?? this.d.self] = (e as Error).message;
            merge.end(i);
          }
        }),
      );
    }
    const r = merge.result();
    return { jobs: r.jobs, unreachable, ...(r.truncated ? { truncated: true } : {}) };
  }

  // --- serving peers -------------------------------------------------------------------------------------

  private async serve(m: PeerMessage): Promise<Uint8Array> {
    if (!m.request) throw new BrineError("CLUSTER_PEER_CHANNEL", `${PLACEMENT_CHANNEL} takes requests only`);
    let q: Record<string, unknown>;
    try {
      q = cbor.decode(m.payload) as Record<string, unknown>;
    } catch {
      throw new BrineError("PLACEMENT_BAD_MESSAGE", "not CBOR");
    }
    if (typeof q !== "object" || q === null) throw new BrineError("PLACEMENT_BAD_MESSAGE", "not a map");
    if (typeof q.op === "string" && q.op in this.served) this.served[q.op as PlacementOp]++;
    switch (q.op) {
      case "store":
        return cbor.encode(await this.serveStore(m.from, q)) as Uint8Array;
      case "read":
        if (!validJid(q.jid)) throw new BrineError("PLACEMENT_BAD_MESSAGE", "read names no jid");
        return cbor.encode(this.localCopy(q.jid)) as Uint8Array;
      case "list":
        if (q.before !== undefined && !validJid(q.before)) throw new BrineError("PLACEMENT_BAD_MESSAGE", "list's cursor is not a jid");
      {
        const filter = q.filter === undefined ? undefined : checkListJobsFilter(q.filter);
        if (q.filter !== undefined && !filter) throw new BrineError("PLACEMENT_BAD_MESSAGE", "list's filter is malformed");
        return cbor.encode(this.localList(q.before, this.d.listPageBytes ?? listPageBytesMax, Infinity, filter)) as Uint8Array;
      }
      case "table": {
        const t = typeof q.ring === "string" ? this.d.localTable(q.ring) : undefined;
        if (!t || !tableUsable(t)) throw new BrineError("PLACEMENT_NO_TABLE", `${this.d.self} has no table of ring ${String(q.ring)}`);
        return cbor.encode(t) as Uint8Array;
      }
      default:
        throw unknownKind(PLACEMENT_CHANNEL, q.op, this.d.self);
    }
  }

  /** Stores the jobs a peer hands off that this master owns; answers once they are on disk. */
  private async serveStore(from: string, q: Record<string, unknown>): Promise<{ ok: string[]; refused: string[] }> {
    const ring = this.d.route();
    if (ring === null || q.ring !== ring) throw new BrineError("PLACEMENT_NO_TABLE", `jobs are routed to ${ring ?? "no ring"} on ${this.d.self}, not ${String(q.ring)}`);
    const t = this.d.localTable(ring);
    if (!t || !tableUsable(t)) throw new BrineError("PLACEMENT_NO_TABLE", `${this.d.self} has no table of ring ${ring} yet`);
    if (!Array.isArray(q.jobs)) throw new BrineError("PLACEMENT_BAD_MESSAGE", "store carries no jobs");
    const s = this.d.store();
    const ok: string[] = [];
    const refused: string[] = [];
    const writes: Promise<unknown>[] = [];
    for (const raw of q.jobs) {
      const h = checkHanded(raw);
      if (!h) {
        roundLog.line(`${from} handed off a malformed job record: ignored`);
        continue;
      }
      if (!ownersOf(t, h.jid).includes(this.d.self)) {
        refused.push(h.jid);
        continue;
      }
      storeHanded(s, h, writes);
      ok.push(h.jid);
    }
    await Promise.all(writes);
    await s.root.flushed;
    return { ok, refused };
  }
}

/** Splits items (jobs, minion records: minion-placement.ts) into requests of at most `max` bytes encoded (a single larger item goes alone). */
export function byteBatches<T>(items: readonly T[], max: number): T[][] {
  const out: T[][] = [];
  let cur: T[] = [];
  let bytes = 0;
  for (const j of items) {
    const b = (cbor.encode(j) as Uint8Array).byteLength;
    if (cur.length > 0 && bytes + b > max) {
      out.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(j);
    bytes += b;
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === "string");

function checkTable(raw: unknown, ring: string): PlacementTable {
  if (!isMap(raw) || raw.ring !== ring || (raw.members !== "self" && raw.members !== "voters") || !Number.isSafeInteger(raw.replicas) || !isStrings(raw.voters) || !isStrings(raw.nodes) || !(raw.owners instanceof Uint8Array) || !Number.isSafeInteger(raw.epoch)) {
    throw new BrineError("PLACEMENT_BAD_MESSAGE", "malformed table");
  }
  if (raw.members === "voters" && raw.owners.length !== ringSlots) throw new BrineError("PLACEMENT_BAD_MESSAGE", "table of the wrong size");
  return { ring, members: raw.members, replicas: raw.replicas as number, voters: raw.voters, nodes: raw.nodes, owners: raw.owners, epoch: raw.epoch as number };
}

/** A table as `jobs/placed-by` keeps it. */
export function tableRecord(t: PlacementTable): Record<string, unknown> {
  return { ring: t.ring, members: t.members, replicas: t.replicas, voters: [...t.voters], nodes: [...t.nodes], owners: t.owners, epoch: t.epoch };
}

/** The table `jobs/placed-by` kept for `ring`, undefined when there is none or it does not read as one (logged). */
export function storedTable(raw: unknown, ring: string): PlacementTable | undefined {
  if (raw === undefined) return undefined;
  try {
    const t = checkTable(raw, ring);
    return tableUsable(t) ? t : undefined;
  } catch (e) {
    log.warning(`the table ring ${ring}'s jobs were placed by, kept in jobs/placed-by, is unreadable (${(e as Error).message}): no rebalancing against it`);
    return undefined;
  }
}

function checkCopy(raw: unknown): JobCopy {
  if (!isMap(raw) || !isMap(raw.returns)) throw new BrineError("PLACEMENT_BAD_MESSAGE", "malformed job copy");
  const c: JobCopy = { returns: {} };
  for (const [id, r] of Object.entries(raw.returns)) if (validId(id) && isMap(r)) c.returns[id] = r;
  if (isMap(raw.load)) c.load = raw.load;
  if (isStrings(raw.minions)) c.minions = raw.minions;
  if (typeof raw.endtime === "string") c.endtime = raw.endtime;
  if (raw.nocache === true) c.nocache = true;
  return c;
}

function checkList(raw: unknown): { jobs: ListedJob[]; next?: string } {
  if (!isMap(raw) || !Array.isArray(raw.jobs)) throw new BrineError("PLACEMENT_BAD_MESSAGE", "malformed job list");
  const jobs: ListedJob[] = [];
  for (const j of raw.jobs) {
    if (!Array.isArray(j) || j.length !== 4 || !validJid(j[0]) || !isMap(j[1])) continue;
    jobs.push([j[0], j[1], isStrings(j[2]) ? j[2] : null, typeof j[3] === "string" ? j[3] : null]);
  }
  if (raw.next !== undefined && !validJid(raw.next)) throw new BrineError("PLACEMENT_BAD_MESSAGE", "list page cursor is not a jid");
  return { jobs, ...(raw.next !== undefined ? { next: raw.next } : {}) };
}
