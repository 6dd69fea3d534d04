/**
 * A job the master itself ran (a runner call, a scheduled wheel call) stored in the job cache, as Salt's
 * RunnerClient stores it (salt/client/mixins.py → salt.utils.job.store_job): the load names the master as the
 * target (`tgt: <master id>`, `tgt_type: list`), and the master's return is the call's whole record, Salt's
 * `{fun, jid, user, fun_args, _stamp, return, success}` (and `retcode: 1` when the runner failed), which is what
 * Salt 3007's `jobs.lookup_jid` answers for a runner job (seen with the Python master). So `jobs.list_jobs` lists it
 * with its jid and `jobs.lookup_jid` answers it. Written when the call ends, before its `/ret` event, as Salt does.
 */
import type { JobCache } from "../lib/store/job-cache.js";
import { jidToTime } from "../shared/protocol/jid.js";
import { encodeWire, headOfEncodedEntry } from "../shared/protocol/msgpack.js";
import { stamp } from "../shared/event-frame.js";

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
export async function storeMasterJob(jobs: JobCache, masterId: string, job: MasterJob, ret: { return: unknown; success: boolean; packed?: Uint8Array; retcode?: number }): Promise<void> {
  // made before the first await: a caller may transfer `packed` away once this returns its promise
  const head = { fun: job.fun, jid: job.jid, user: job.user, fun_args: job.fun_args, _stamp: stamp() };
  const tail = { success: ret.success, ...(ret.retcode !== undefined ? { retcode: ret.retcode } : {}) };
  const stored = ret.packed ? { return: undefined, return_msgpack: recordWithEncodedReturn(head, ret.packed, tail) } : { return: { ...head, return: ret.return, ...tail } };
  await Promise.all([
    jobs.saveLoad(job.jid, { fun: job.fun, fun_args: job.fun_args, jid: job.jid, user: job.user, tgt: masterId, tgt_type: "list" }, [masterId]),
    jobs.addReturn(job.jid, masterId, { ...stored, success: ret.success, fun: job.fun, fun_args: job.fun_args }),
    jobs.setEndtime(job.jid, jidToTime(job.jid)),
  ]);
}

/**
 * `{...head, return: <packed>, ...tail}` as msgpack, the return's bytes copied as they are (never decoded): Salt's
 * key order, the return between the call's description and its outcome.
 */
export function recordWithEncodedReturn(head: Record<string, unknown>, packed: Uint8Array, tail: Record<string, unknown>): Buffer {
  const n = Object.keys(head).length + 1 + Object.keys(tail).length;
  if (n > 15) throw new Error(`a job record of ${n} fields`); // a fixmap's header below
  const start = headOfEncodedEntry(head, "return");
  const rest = encodeWire(tail);
  start[0] = 0x80 | n; // the map's count with the tail's entries; the tail's own fixmap header is dropped below
  return Buffer.concat([start, packed, rest.subarray(1)]);
}
