/** jobs.* runners over the job cache. */
import { jidToTime } from "../shared/protocol/jid.js";
import { pyTruthy } from "../lib/wheel/salt-errors.js";
import { decodeWire, encodeWire, encodeWithEncodedEntry } from "../shared/protocol/msgpack.js";
import { JobMapWriter, formatJob, withEndtime as listEntryWithEndtime } from "../lib/store/job-listing.js";
import { returnBytes } from "../lib/store/job-cache.js";
import { argOf, EncodedReturn, type RunnerContext, type RunnerFn } from "./context.js";
import { wantJobs } from "./cluster-jobs.js";
import { entryMatches, extSourceChecked, filterOf, filters, listJobsFilter, type ListJobsFilter } from "./list-jobs-filter.js";

/** Salt's get_jids / print_job: `EndTime` when job_cache_store_endtime is on and the job has one. */
function withEndtime(ctx: RunnerContext, jid: string, job: Record<string, unknown>): Record<string, unknown> {
  if (!ctx.cfg.job_cache_store_endtime) return job;
  const endtime = ctx.jobs.endtime(jid);
  return endtime ? { ...job, EndTime: endtime } : job;
}

/**
 * The jobs list_jobs lists, oldest first, as the msgpack map {jid: entry} made of the stored entries' bytes
 * (job-listing.ts: nothing decoded, nothing encoded again; EndTime added when kept). Entries the cache had to
 * make from their loads are stored once the walk is done (not when `warming`: a warm-up writes nothing).
 * `jids`: also collects the listed jids; `from`: from that jid on.
 */
async function listed(ctx: RunnerContext, filter: ListJobsFilter, opts: { jids?: string[]; from?: string; warming?: boolean } = {}): Promise<Buffer> {
  const endtimes = ctx.cfg.job_cache_store_endtime === true;
  const filtering = filters(filter);
  const repaired: [string, Buffer][] = [];
  const map = new JobMapWriter(listedBytesHint);
  ctx.jobs.listing(
    (jid, bytes, start, walked) => {
      if (filtering && !entryMatches(filter, decodeWire(bytes.subarray(start)) as Record<string, unknown>)) return;
      // the end times come with the walk (one range read); a view that has none to give is asked per job
      const endtime = endtimes ? (walked === undefined ? ctx.jobs.endtime(jid) : walked) : undefined;
      if (endtime) map.add(jid, listEntryWithEndtime(bytes.subarray(start), endtime));
      else map.add(jid, bytes, start);
      opts.jids?.push(jid);
    },
    (jid, e) => repaired.push([jid, e]),
    { endtimes, ...(opts.from !== undefined ? { from: opts.from } : {}) },
  );
  if (repaired.length && !opts.warming) await ctx.jobs.storeEntries(repaired);
  return map.finish();
}

/** Where the answer's buffer starts (it doubles as it fills: a 100,000-job answer is ~13 MB). */
const listedBytesHint = 1024 * 1024;

/**
 * The answer is made of the stored entries' bytes (job-listing.ts): nothing decoded, nothing encoded again.
 * With `outputter`, Salt's {outputter, data} (salt-run prints data with it).
 */
const listJobs: RunnerFn = async (ctx, arg, kwarg) => {
  const filter = listJobsFilter(arg, kwarg);
  if (pyTruthy(argOf(arg, kwarg, 7, "display_progress", false))) ctx.print("Querying returner local_cache for jobs.");
  const bytes = await listed(ctx, filter);
  const outputter = argOf(arg, kwarg, 1, "outputter", undefined);
  return pyTruthy(outputter) ? { outputter, data: decodeWire(bytes) } : new EncodedReturn(bytes, true);
};

/** jobs.lookup_jid's value for an expected minion that did not return (missing=True), msgpack. */
const NOT_RETURNED = encodeWire("Minion did not return");

/**
 * lookup_jid(jid, ext_source, returned, missing, display_progress): {id: return} of the job's returns (when
 * `returned`), then "Minion did not return" for each expected minion without one (when `missing`); Salt's
 * {outputter, data} when the first return names an outputter (`out`: a state run's highstate). Written as msgpack
 * while the returns are read (one range read, one decode each; a runner's stored result is copied as the bytes it
 * was stored as), never collected into objects and encoded again.
 */
const lookupJid: RunnerFn = async (ctx, arg, kwarg) => {
  const jid = String(argOf(arg, kwarg, 0, "jid", ""));
  extSourceChecked("jobs.lookup_jid", argOf(arg, kwarg, 1, "ext_source", undefined));
  const returned = pyTruthy(argOf(arg, kwarg, 2, "returned", true));
  const missing = pyTruthy(argOf(arg, kwarg, 3, "missing", false));
  const progress = pyTruthy(argOf(arg, kwarg, 4, "display_progress", false));
  if (progress) ctx.print("Querying returner: local_cache");
  const map = new JobMapWriter(lookupBytesHint);
  const seen = new Set<string>();
  let outputter: unknown;
  ctx.jobs.eachReturn(jid, (id, rec) => {
    if (!seen.size) outputter = rec.out;
    seen.add(id);
    if (progress) ctx.print(id);
    if (returned) map.add(id, returnBytes(rec));
  });
  if (missing) {
    for (const id of ctx.jobs.expectedMinions(jid)) if (!seen.has(id)) map.add(id, NOT_RETURNED);
  }
  const data = map.finish();
  // (a small answer's buffer may be a slice of Node's pool: not its sole owner)
  if (pyTruthy(outputter)) return new EncodedReturn(encodeWithEncodedEntry({ outputter }, "data", data));
  return new EncodedReturn(data, true);
};

/** Where a lookup_jid answer's buffer starts (it doubles as it fills), bytes. */
const lookupBytesHint = 16 * 1024;

/** Salt's local_cache get_jid: each minion's `return` (and `out` when the minion named an outputter). */
function resultOf(ctx: RunnerContext, jid: string): Record<string, Record<string, unknown>> {
  const result: Record<string, Record<string, unknown>> = {};
  for (const [id, rec] of Object.entries(ctx.jobs.returnsFor(jid))) {
    const r: Record<string, unknown> = { return: rec.return };
    for (const k of ["retcode", "success", "out"]) if (rec[k] !== undefined) r[k] = rec[k];
    result[id] = r;
  }
  return result;
}

const listJob: RunnerFn = async (ctx, arg, kwarg) => {
  const jid = String(argOf(arg, kwarg, 0, "jid", ""));
  const load = ctx.jobs.getLoad(jid);
  if (!load) return {};
  return { jid, ...formatJob(jid, load), Minions: load.Minions, Result: resultOf(ctx, jid) };
};

/** print_job(jid): {jid: the job's description and Result}; Salt's "Error" entry when no load is cached. */
async function printJob(ctx: RunnerContext, jid: string): Promise<Record<string, unknown>> {
  const load = ctx.jobs.getLoad(jid);
  if (!load) return { [jid]: { Error: "Cannot contact returner or no job with this jid", StartTime: jidToTime(jid), Result: resultOf(ctx, jid) } };
  // Salt's order: the job's fields, Minions (local_cache's .minions.p), StartTime, Result
  const { StartTime, ...fields } = formatJob(jid, load);
  const minions = Array.isArray(load.Minions) ? load.Minions : ctx.jobs.expectedMinions(jid);
  return { [jid]: withEndtime(ctx, jid, { ...fields, ...(minions.length ? { Minions: minions } : {}), StartTime, Result: resultOf(ctx, jid) }) };
}

/**
 * last_run(ext_source, outputter, metadata, function, target): print_job of the newest cached job (jids sort
 * by time) among those list_jobs lists with search_metadata=metadata, search_function=function and
 * search_target=target (as Salt's last_run calls it: globs, a metadata pair that matches); False when there
 * is none, or when `metadata` is given and is not a dictionary (Salt's answer).
 */
const lastRun: RunnerFn = async (ctx, arg, kwarg) => {
  const metadata = argOf(arg, kwarg, 2, "metadata", null);
  if (pyTruthy(metadata) && (typeof metadata !== "object" || Array.isArray(metadata))) return false;
  const matching: string[] = [];
  await listed(ctx, filterOf(metadata, argOf(arg, kwarg, 3, "function", undefined), argOf(arg, kwarg, 4, "target", undefined)), { jids: matching });
  const jids = matching.sort();
  if (!jids.length) return false;
  const newest = jids[jids.length - 1]!;
  await wantJobs(ctx.jobs, [newest]);
  return printJob(ctx, newest);
};

/**
 * exit_success(jid): per minion, whether it returned a truthy `return` (Salt's test is Python truthiness);
 * expected minions that did not return are False.
 */
const exitSuccess: RunnerFn = async (ctx, arg, kwarg) => {
  const jid = String(argOf(arg, kwarg, 0, "jid", ""));
  const load = ctx.jobs.getLoad(jid);
  const result = resultOf(ctx, jid);
  const minions = Array.isArray(load?.Minions) ? (load!.Minions as string[]) : ctx.jobs.expectedMinions(jid);
  const out: Record<string, boolean> = {};
  for (const id of minions) out[id] = id in result && "return" in result[id]! ? pyTruthy(result[id]!.return) : false;
  for (const [id, r] of Object.entries(result)) if ("return" in r && pyTruthy(r.return)) out[id] = true;
  return out;
};

/** jobs.active: ask every minion what it is running (saltutil.running) and group by jid. */
const active: RunnerFn = async (ctx, arg, kwarg) => {
  const timeoutS = Number(argOf(arg, kwarg, 0, "timeout", ctx.cfg.timeout));
  const out: Record<string, Record<string, unknown>> = {};
  for await (const r of ctx.client.cmdIter({ tgt: "*", fun: "saltutil.running", timeoutS })) {
    if ("missing" in r) continue;
    const running = r.data.return;
    if (!Array.isArray(running)) continue;
    for (const job of running) {
      if (!job || typeof job !== "object") continue;
      const j = job as Record<string, unknown>;
      const jid = String(j.jid);
      const entry = (out[jid] ??= { ...formatJob(jid, j), Running: [], Returned: [] });
      (entry.Running as unknown[]).push({ [r.id]: j.pid });
    }
  }
  await wantJobs(ctx.jobs, Object.keys(out));
  for (const jid of Object.keys(out)) {
    out[jid]!.Returned = Object.keys(ctx.jobs.returnsFor(jid));
  }
  return out;
};

/** What a spare thread's warm-up reads at most: returns (and as many list entries), records. */
const warmRecordsMax = 256;
/** ...each of at most this many stored bytes (a larger one is passed over), bytes. */
const warmRecordBytesMax = 4096;

/**
 * Runs jobs.lookup_jid and jobs.list_jobs's reads once over a few of the newest jobs (a spare runner thread, before
 * its call, runner-thread.ts): a fresh thread runs every path cold — a lookup of 100 returns took 5-10 ms as a
 * thread's first read and ~0.5 ms as its second (bench/job-cache-scale.ts) — and a spare has the time. Reads only,
 * bounded (warmRecordsMax records of at most warmRecordBytesMax bytes, as many list entries); nothing is answered.
 * `stop`: asked between jobs (the call came). Resolves with how many jobs it looked up and list entries it read.
 */
export async function warmJobReads(ctx: Pick<RunnerContext, "cfg" | "jobs">, stop: () => boolean = () => false): Promise<number> {
  const read = ctx as RunnerContext; // the two runners below read only the configuration and the job cache
  let done = 0;
  for (const jid of ctx.jobs.warmingJids(warmRecordsMax, warmRecordBytesMax)) {
    if (stop()) return done;
    await lookupJid(read, [jid], {});
    done++;
  }
  const from = ctx.jobs.nthNewestJid(warmRecordsMax);
  if (from === undefined || stop()) return done;
  const jids: string[] = [];
  await listed(read, {}, { jids, from, warming: true });
  return done + jids.length;
}

export const jobsRunners: Record<string, RunnerFn> = {
  "jobs.list_jobs": listJobs,
  "jobs.lookup_jid": lookupJid,
  "jobs.list_job": listJob,
  "jobs.active": active,
  "jobs.print_job": async (ctx, arg, kwarg) => printJob(ctx, String(argOf(arg, kwarg, 0, "jid", ""))),
  "jobs.last_run": lastRun,
  "jobs.exit_success": exitSuccess,
};
