/**
 * cluster.recover_outbox(path, dry_run=False): the records a master removed from the cluster left in its
 * hand-off outbox (returns and job records it took that no owner acknowledged, minion mine and data records it
 * wrote), read from its LMDB environment on disk and adopted by this master, whose own hand-off then moves them
 * (docs/RINGS.md, "A removed master's outbox"). A removed master cannot hand anything on itself: its peer key is
 * forgotten, and every master refuses it. Beyond Salt (Salt's cluster has no outbox: one shared cachedir).
 *
 * - `path`: the removed master's LMDB environment (its `brine_lmdb_dir`, or its `cachedir`: envDirOf):
 *   a copy of it, or its disk mounted here; it is only read, opened read-only (its data.mdb never changes). This
 *   master's own environment is refused.
 * - Job records (`<jid>`, `<jid>/<minion>` in its outbox) are stored here as an owner stores a hand-off
 *   (handed-jobs.ts: nothing here is overwritten) and, while `jobs` is routed to a ring, put in this master's
 *   outbox, so the hand-off gives them to the jid's owners and this copy goes if this master is not one. With
 *   `jobs` routed to no ring (broadcast) they stay on this master (said in `note`).
 * - Minion records (`~m/<id>`, `~d/<id>`) are kept when newer than this master's (by stamp) and put in the
 *   outbox: to their owners while the bank is placed, to every master (spread) when it is not.
 * - Running it twice adopts the same records again: nothing changes (loads kept, returns not overwritten,
 *   minion records by stamp).
 */
import { existsSync, readdirSync, realpathSync } from "node:fs";
import path from "node:path";
import { BrineError } from "../shared/errors.js";
import { getLogger } from "../shared/log.js";
import { outboxJid } from "../shared/placement.js";
import { minionOutboxKey, parseMinionOutboxKey, type MinionRecord } from "../shared/minion-placement.js";
import { newerStamp } from "../shared/sync-records.js";
import { handoffStamp } from "../lib/store/job-cache.js";
import { jobRecord, returnRecord, storeHanded, type HandedJob } from "../lib/store/handed-jobs.js";
import { lmdbDir, openStore, type Store } from "../lib/store/lmdb-env.js";
import { MinionCache } from "../lib/store/minion-cache.js";
import { argOf, type RunnerContext, type RunnerFn } from "./context.js";
import { isTrue } from "./cluster-ops.js";
import { NOT_CLUSTERED } from "./cluster.js";

const log = getLogger("brine.runner.cluster");

/** What recover_outbox found and did. */
export interface RecoverResult {
  status: "ok";
  /** the LMDB environment read */
  path: string;
  dry_run: boolean;
  /** jobs with records recovered */
  jids: number;
  /** job outbox keys whose record was found (a job record or a return each) */
  job_records: number;
  /** minion records found (mine and data), and of them the ones newer than this master's (stored) */
  minion_records: number;
  minion_records_newer: number;
  /** outbox keys whose record the removed master no longer held (nothing to recover) */
  missing: number;
  /** the ring `jobs` is routed to (the job records go to its owners), null for broadcast */
  jobs_route: string | null;
  note: string;
}

/**
 * The LMDB environment `p` names: itself when it holds data.mdb; else a cachedir's: `<p>/brine-node/<id>/brine-lmdb`
 * (a clustered master's, resolveLocalState; the one there, or refused naming them when several masters share the
 * cachedir) or `<p>/brine-lmdb`.
 */
export function envDirOf(p: string): string {
  const has = (d: string) => existsSync(path.join(d, "data.mdb"));
  if (has(p)) return p;
  const nodes = path.join(p, "brine-node");
  const found = existsSync(nodes) ? readdirSync(nodes).map((id) => path.join(nodes, id, "brine-lmdb")).filter(has) : [];
  if (found.length === 1) return found[0]!;
  if (found.length > 1) throw new BrineError("CLUSTER_BAD_ARGUMENT", `${p} holds the LMDB environments of several masters: name the removed one's (${found.join(", ")})`);
  if (has(path.join(p, "brine-lmdb"))) return path.join(p, "brine-lmdb");
  throw new BrineError("CLUSTER_BAD_ARGUMENT", `no brine LMDB environment at ${p} (no data.mdb there, in ${path.join(p, "brine-node", "<id>", "brine-lmdb")} or in ${path.join(p, "brine-lmdb")}): name the removed master's brine_lmdb_dir or its cachedir`);
}

/**
 * Reads `from`'s outbox and (unless `dryRun`) adopts its records into `to` (see the header). `route(dataType)`
 * is the ring a data type is routed to now (null: broadcast).
 */
export async function recoverOutbox(from: Store, to: Store, route: (dataType: string) => string | null, dryRun: boolean): Promise<Omit<RecoverResult, "status" | "path" | "note">> {
  const jobs = new Map<string, HandedJob>();
  const jobKeys: string[] = [];
  const minion: MinionRecord[] = [];
  let missing = 0;
  const theirs = new MinionCache(from);
  for (const key of from.handoff.getKeys() as Iterable<string>) {
    const mk = parseMinionOutboxKey(key);
    if (mk) {
      const r = theirs.record(mk.bank, mk.id);
      if (r) minion.push(r);
      else missing++;
      continue;
    }
    const jid = outboxJid(key);
    let h = jobs.get(jid);
    if (!h) jobs.set(jid, (h = { jid }));
    if (key === jid ? jobRecord(from, jid, h) : returnRecord(from, jid, key, h)) jobKeys.push(key);
    else missing++;
  }
  for (const [jid, h] of jobs) if (Object.keys(h).length === 1) jobs.delete(jid);
  const jobsRoute = route("jobs");
  const ours = new MinionCache(to);
  let newer = 0;
  if (!dryRun) {
    const writes: Promise<unknown>[] = [];
    for (const h of jobs.values()) storeHanded(to, h, writes);
    await Promise.all(writes);
    // the outbox keys after their records (the hand-off reads the records when it takes a key)
    if (jobsRoute !== null) await Promise.all(jobKeys.map((k) => to.handoff.put(k, handoffStamp())));
    for (const r of minion) {
      if (!(await ours.applyPeer(r))) continue;
      newer++;
      await to.handoff.put(minionOutboxKey(r.k, r.id), handoffStamp());
    }
    await to.root.flushed;
  } else {
    for (const r of minion) if (newerStamp(r, ours.stampOf(r.k, r.id))) newer++;
  }
  return { dry_run: dryRun, jids: jobs.size, job_records: jobKeys.length, minion_records: minion.length, minion_records_newer: newer, missing, jobs_route: jobsRoute };
}

export const recoverRunners: Record<string, RunnerFn> = {
  "cluster.recover_outbox": async (ctx: RunnerContext, arg, kwarg) => {
    const p = argOf(arg, kwarg, 0, "path", undefined);
    if (typeof p !== "string" || !path.isAbsolute(p)) throw new BrineError("CLUSTER_BAD_ARGUMENT", `recover_outbox needs path=<the removed master's brine_lmdb_dir or cachedir>, an absolute path; got ${JSON.stringify(p)}`);
    const dryRun = isTrue(argOf(arg, kwarg, 1, "dry_run", false));
    if (!ctx.cfg.cluster_id || !ctx.cluster) return NOT_CLUSTERED;
    if (!ctx.store) throw new BrineError("CLUSTER_BAD_ARGUMENT", "this runner thread has no job cache store");
    const dir = envDirOf(p);
    const own = lmdbDir(ctx.cfg);
    if (existsSync(own) && realpathSync(own) === realpathSync(dir)) throw new BrineError("CLUSTER_BAD_ARGUMENT", `${dir} is this master's own LMDB environment: name the removed master's`);
    // read-only (LMDB's MDB_RDONLY): the removed master's data.mdb is never written, dry run or not
    const from = openStore({ cachedir: p, brine_lmdb_dir: dir, brine_lmdb_map_bytes: ctx.cfg.brine_lmdb_map_bytes }, { readOnly: true });
    try {
      const ring = ctx.cluster.ring;
      const r = await recoverOutbox(from, ctx.store, (dt) => ring.route(dt), dryRun);
      const goes = (dt: string) => {
        const to = ring.route(dt);
        return `${dt}: ${to === null ? "every master" : `the owners on ring ${to}`}`;
      };
      const notes = [
        r.jobs_route !== null
          ? `job records go from this master's outbox to their owners on ring ${r.jobs_route} (placement_check ${r.jobs_route} shows handoff_pending until they are there)`
          : "jobs are routed to no ring: the job records stay on this master (cluster.collect_from_peers on the others copies them there)",
        `minion records newer than this master's go to ${goes("mine")}, ${goes("grains")}`,
      ];
      const out: RecoverResult = { status: "ok", path: dir, ...r, note: notes.join("; ") };
      log.info(`recover_outbox${dryRun ? " (dry run)" : ""} of ${dir}: ${r.jids} jobs (${r.job_records} records), ${r.minion_records} minion records (${r.minion_records_newer} newer than here), ${r.missing} outbox keys without a record`);
      return out;
    } finally {
      await from.close();
    }
  },
};
