/**
 * Cluster-wide reads for the jobs.* runners: with `jobs` routed to a ring, a job lives on its owners (and, until
 * they have it, on the master that took it), not on every master. Before such a runner runs, its runner thread
 * asks the Raft worker for the job as every master holds it (peer channel `raft/placement`,
 * src/workers/raft/job-placement.ts) and hands the runner a ClusterJobView over the merged copy instead of
 * this master's job cache: the runners themselves (jobs.ts) are unchanged. Masters that could not be asked
 * (one owner down) are logged; the answer is what the others hold.
 *
 * Covered: lookup_jid, print_job, list_job, exit_success (one jid), list_jobs (every master's jobs, the newest
 * brine_cluster_list_jobs_max of them: past it a warning in the log and on the runner's output), last_run
 * (every master's jobs, then the newest match's whole copy), active (the whole copy of each job a minion says
 * it is running). The last two learn which jids they need only while they run: they ask the view for them
 * (wantJobs) before reading, and the view fetches what it lacks.
 */
import { getLogger } from "../shared/log.js";
import { JobCache } from "../lib/store/job-cache.js";
import { encodeListEntry } from "../lib/store/job-listing.js";
import type { Store } from "../lib/store/lmdb-env.js";
import type { JobCopy, ListedJob } from "../shared/placement.js";
import { argOf, type RunnerContext } from "./context.js";
import { filters, listJobsFilter } from "./list-jobs-filter.js";

const log = getLogger("brine.runner.jobs");

/** jobs.* runners that read one jid (their first argument, or `jid=`). */
const ONE_JID = new Set(["jobs.lookup_jid", "jobs.print_job", "jobs.list_job", "jobs.exit_success"]);
/** jobs.* runners that read every master's job list first. */
const LISTING = new Set(["jobs.list_jobs", "jobs.last_run"]);

/** How a view fetches a jid's cluster-wide copy it lacks. */
export type JobFetch = (jid: string) => Promise<JobCopy>;

/** A job cache whose reads answer from a merged cluster-wide copy (writes still go to this master's store). */
export class ClusterJobView extends JobCache {
  private readonly jobs: Map<string, JobCopy>;
  /** jids whose whole copy is here (a list entry holds no returns) */
  private readonly whole = new Set<string>();

  constructor(
    store: Store,
    jobs: ReadonlyMap<string, JobCopy>,
    private readonly fetch?: JobFetch,
    complete = false,
  ) {
    super(store);
    this.jobs = new Map(jobs);
    if (complete) for (const jid of jobs.keys()) this.whole.add(jid);
  }

  /** Fetches the whole copies of `jids` this view lacks (a view without a fetcher has what it has). */
  async want(jids: readonly string[]): Promise<void> {
    const fetch = this.fetch;
    if (!fetch) return;
    const missing = [...new Set(jids)].filter((jid) => !this.whole.has(jid));
    const copies = await Promise.all(missing.map((jid) => fetch(jid)));
    missing.forEach((jid, i) => {
      this.jobs.set(jid, copies[i]!);
      this.whole.add(jid);
    });
  }

  override getLoad(jid: string): Record<string, unknown> | undefined {
    const j = this.jobs.get(jid);
    if (!j?.load) return undefined;
    return { ...j.load, Minions: [...(j.minions ?? [])].sort() };
  }
  override hasLoad(jid: string): boolean {
    return this.jobs.get(jid)?.load !== undefined;
  }
  override expectedMinions(jid: string): string[] {
    return [...(this.jobs.get(jid)?.minions ?? [])];
  }
  override returnsFor(jid: string): Record<string, Record<string, unknown>> {
    return { ...(this.jobs.get(jid)?.returns ?? {}) };
  }
  override eachReturn(jid: string, each: (id: string, rec: Record<string, unknown>) => void): void {
    for (const [id, rec] of Object.entries(this.jobs.get(jid)?.returns ?? {})) each(id, rec);
  }
  override hasReturn(jid: string, id: string): boolean {
    return id in (this.jobs.get(jid)?.returns ?? {});
  }
  override endtime(jid: string): string | undefined {
    return this.jobs.get(jid)?.endtime;
  }
  override isNocache(jid: string): boolean {
    return this.jobs.get(jid)?.nocache === true;
  }
  override *loads(): IterableIterator<[string, Record<string, unknown>]> {
    for (const [jid, j] of [...this.jobs].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))) if (j.load) yield [jid, j.load];
  }
  /** The entries of the merged copy's jobs, made from their loads (the copy holds no stored entries). */
  override listing(each: (jid: string, bytes: Uint8Array, start: number) => void): void {
    for (const [jid, load] of this.loads()) each(jid, encodeListEntry(jid, load), 0);
  }
  override listJids(): string[] {
    return [...this.loads()].map(([jid]) => jid);
  }
}

function unreachableNote(fun: string, unreachable: Record<string, string>): void {
  const down = Object.entries(unreachable);
  if (down.length > 0) log.warning(`${fun}: ${down.length} master(s) could not be asked, answering from the others: ${down.map(([n, why]) => `${n} (${why})`).join(", ")}`);
}

/**
 * The job cache `fun` should read: this master's own unless clustered with `jobs` routed to a ring and `fun` a
 * cluster-wide read, then a ClusterJobView of what every master holds.
 */
export async function jobsFor(ctx: RunnerContext, fun: string, arg: unknown[], kwarg: Record<string, unknown>): Promise<JobCache> {
  const c = ctx.cluster;
  if (!c || !ctx.store || !fun.startsWith("jobs.") || c.ring.route("jobs") === null) return ctx.jobs;
  const fetch: JobFetch = async (jid) => {
    const r = await c.raft.jobRead(jid);
    unreachableNote(fun, r.unreachable);
    return r.job;
  };
  if (ONE_JID.has(fun)) {
    const jid = String(argOf(arg, kwarg, 0, "jid", ""));
    return new ClusterJobView(ctx.store, new Map([[jid, await fetch(jid)]]), undefined, true);
  }
  if (LISTING.has(fun)) {
    const max = ctx.cfg.brine_cluster_list_jobs_max;
    // list_jobs' filters are applied on each master before the cut, so the newest `max` matching jobs are read
    // (the runner applies them again: a master of an earlier version lists every job)
    const filter = fun === "jobs.list_jobs" ? listJobsFilter(arg, kwarg) : undefined;
    const r = await c.raft.jobList(max, filter && filters(filter) ? filter : undefined);
    unreachableNote(fun, r.unreachable);
    if (r.truncated) {
      const line = `${fun}: the cluster holds more than ${max} jobs${filter && filters(filter) ? " matching the filters" : ""} (brine_cluster_list_jobs_max): only the newest ${max} were read, the older ones are left out`;
      log.warning(line);
      ctx.print(`WARNING: ${line}`);
    }
    return new ClusterJobView(ctx.store, new Map(r.jobs.map(([jid, load, minions, endtime]: ListedJob) => [jid, { load, ...(minions ? { minions } : {}), ...(endtime !== null ? { endtime } : {}), returns: {} }])), fetch);
  }
  if (fun === "jobs.active") return new ClusterJobView(ctx.store, new Map(), fetch);
  return ctx.jobs;
}

/** Before reading `jids` whole (their returns): a cluster-wide view fetches what it lacks; a local cache has it all. */
export async function wantJobs(jobs: JobCache, jids: readonly string[]): Promise<void> {
  if (jobs instanceof ClusterJobView) await jobs.want(jids);
}
