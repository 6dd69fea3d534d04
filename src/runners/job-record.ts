/**
 * A job the master itself ran (a runner call, a scheduled wheel call) stored in the job cache, as Salt's
 * RunnerClient stores it (salt/client/mixins.py → salt.utils.job.store_job): the load names the master as the
 * target (`tgt: <master id>`, `tgt_type: list`), the return is the master's. So `jobs.list_jobs` lists it with
 * its jid and `jobs.lookup_jid` answers it. Written when the call ends, before its `/ret` event, as Salt does.
 */
import type { JobCache } from "../lib/store/job-cache.js";
import { jidToTime } from "../shared/protocol/jid.js";

export interface MasterJob {
  jid: string;
  /** `runner.<fun>` or `wheel.<fun>` */
  fun: string;
  fun_args: unknown[];
  user: string;
}

/**
 * `packed`: the return's msgpack encoding when the caller has it (stored as those bytes: job-cache.ts).
 * The load, the return and the end time go in one write transaction, and the promise resolves once it is
 * committed (readable by every thread: a `jobs.lookup_jid` after the reply finds it), not once it is on disk:
 * the caller already has the result, so a crash in the flush window (lmdb-js flushes right after the commit)
 * loses a record, never an answer, as Salt's local_cache (no fsync) does. Waiting for two fsyncs was most of a
 * short runner call (bench/job-cache-scale.ts). A minion's return stays durable before its reply (saveReturn).
 */
export async function storeMasterJob(jobs: JobCache, masterId: string, job: MasterJob, ret: { return: unknown; success: boolean; packed?: Uint8Array }): Promise<void> {
  const stored = ret.packed ? { return: undefined, return_msgpack: ret.packed } : { return: ret.return };
  await Promise.all([
    jobs.saveLoad(job.jid, { fun: job.fun, fun_args: job.fun_args, jid: job.jid, user: job.user, tgt: masterId, tgt_type: "list" }, [masterId]),
    jobs.addReturn(job.jid, masterId, { ...stored, success: ret.success, fun: job.fun, fun_args: job.fun_args }),
    jobs.setEndtime(job.jid, jidToTime(job.jid)),
  ]);
}
