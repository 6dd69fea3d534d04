/**
 * Peer publish: the AES requests behind a minion's `publish.publish`, `publish.full_data` and `publish.runner`
 * (Salt's AESFuncs/RemoteFuncs minion_pub, minion_publish, pub_ret, minion_runner).
 *
 * - `minion_pub`: the `peer:` ACL (peer-acl.ts) decides, over every minion's data (with grains placed on a ring,
 *   the data elsewhere is asked for as the CLI's publish asks: src/lib/targeting/cluster.ts); an allowed job is published through the CLI's path
 *   (publish.ts handlePublish, as the master's user with its CLI key, as Salt's LocalClient does), so
 *   targeting, the job cache, the events and the audit line are a CLI publish's; the publish carries
 *   `id: <asking minion>` as Salt's does. Answer: `{jid, minions}`. The minion then polls `pub_ret`.
 * - `pub_ret`: the returns stored for a jid, `{minion: {ret, out?}}`, only to the minion that published it
 *   (the saved job load names it; Salt kept a `publish_auth/<jid>` file, CVE-2025-22242: no path is built from
 *   the request here, the jid must be a jid). With `jobs` placed on a ring, the load and the returns are read
 *   as the cluster holds them (src/shared/cluster-job-reads.ts), as `minion_publish`'s wait does.
 * - `minion_publish` (the older form, which waits on the master): publishes as `minion_pub`, waits for every
 *   targeted minion or the timeout, and answers the returns (`form: full`: each return's whole record with
 *   `ret`, and `__jid__`). The returns are pushed from the event bus (src/shared/job-return-watch.ts), the job
 *   cache read once at the end for any still missing.
 * - `minion_runner`: the `peer_run:` ACL decides; the runner runs in its own runner thread as a clear `runner`
 *   request's does (Effects.runs), and this request waits for its result (src/shared/runner-results.ts) and answers it.
 *
 * A refusal is Salt's answer, `{}` (the minion's publish module prints an empty dict: Salt gives the minion
 * no reason), and a warning on the master naming the minion, the function and why.
 */
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { isMap, decodeWire, type WireValue } from "../../shared/protocol/msgpack.js";
import { validId, validJid } from "../../shared/protocol/ids.js";
import { parseInput } from "../../lib/client/args.js";
import { checkMinions, type MinionData } from "../../lib/targeting/index.js";
import { clusterCheckMinions, clusterRecords } from "../../lib/targeting/cluster.js";
import { takeLinearRefusals, withLinearPatterns } from "../../lib/targeting/pcre.js";
import { splitPublishArgs } from "../../lib/auth/acl.js";
import { audit } from "./clear-funcs.js";
import { handlePublish } from "./publish.js";
import { exactTargetType, peerPublishDecision, peerRunDecision } from "../../lib/auth/peer-acl.js";
import { RunnerResultWaiter } from "../../shared/runner-results.js";
import type { Effects, MasterContext } from "./context.js";
import type { AesResult } from "./aes-funcs.js";
import { shown } from "../../shared/shown.js";
import { ClusterJobReader } from "../../shared/cluster-job-reads.js";
import { ReturnWatcher } from "../../shared/job-return-watch.js";
import { CoarseTimer } from "../../shared/coarse-timer.js";
import type { JobCopy } from "../../shared/placement.js";

const log = getLogger("brine.peer");

/** Longest a `minion_publish` waits for returns, and a `minion_runner` for its runner, seconds. */
export const peerPublishWaitSMax = 300;
export const peerRunnerWaitSMax = 600;

const refusals = new LogBudget(20, 60_000, (l) => log.warning(l), "peer publish refusals");
/** A return watch outlives its minion_publish's deadline by this much (the main thread ends it then if the worker did not), ms. */
const watchSlackMs = 5_000;
const watchers = new WeakMap<MasterContext, ReturnWatcher>();
/** one line per minute: the main thread did not take a return watch */
const watchFailures = new LogBudget(1, 60_000, (l) => log.warning(l), "minion_publish return watches");
/** the deadlines of minion_publish waits (one coarse timer for all of them) */
const waitTimer = new CoarseTimer(100);
/** one line per minute: a cluster-wide read failed, this master's copy answered */
const placedReads = new LogBudget(1, 60_000, (l) => log.warning(l), "peer publish reads under placement");
const readers = new WeakMap<MasterContext, ClusterJobReader>();

/**
 * `jid` as the cluster holds it when jobs are placed on a ring (its load and returns may be on other masters,
 * src/shared/cluster-job-reads.ts); undefined when jobs are not placed, or when the read failed (logged: this
 * master's copy answers then).
 */
async function placedCopy(ctx: MasterContext, jid: string, what: string): Promise<JobCopy | undefined> {
  if (!ctx.jobs.placing(jid)) return undefined;
  let r = readers.get(ctx);
  if (!r) readers.set(ctx, (r = new ClusterJobReader(ctx.cfg)));
  try {
    return await r.read(jid);
  } catch (e) {
    placedReads.line(`${what} for job ${jid}: the cluster-wide read failed (${(e as Error).message}); answering with the returns on this master only`);
    return undefined;
  }
}

const send = (ret: unknown): AesResult => ({ ret, mode: "send" });
/** Salt's refusal of every peer request: an empty dict, no reason. */
const REFUSED: AesResult = Object.freeze({ ret: {}, mode: "send" }) as AesResult;

function refuse(id: unknown, what: string, reason: string): AesResult {
  refusals.line(`${what} from minion ${shown(id)} refused: ${reason}`);
  return REFUSED;
}

interface PeerJob {
  id: string;
  fun: string | string[];
  arg: unknown[];
  tgt: string | string[];
  tgtType: string;
  ret: string;
}

/** The `peer:` decision and the job to publish, or the refusal (Salt's __verify_minion_publish and minion_pub's nodegroup expansion). */
async function preparePeerJob(ctx: MasterContext, load: Record<string, WireValue>, what: string): Promise<PeerJob | AesResult> {
  const id = load.id;
  let tgt = load.tgt;
  let tgtType = typeof load.tgt_type === "string" ? load.tgt_type : "glob";
  if (!validId(id)) return refuse(id, what, "invalid id");
  if (!(typeof tgt === "string" || (Array.isArray(tgt) && tgt.every((t) => typeof t === "string")))) return refuse(id, what, "tgt must be a string or a list of strings");
  if (tgtType.startsWith("node")) {
    const group = typeof tgt === "string" ? ctx.cfg.nodegroups[tgt] : undefined;
    if (group === undefined) return refuse(id, what, `unknown nodegroup ${shown(tgt)}`);
    tgt = group;
    tgtType = "compound";
  }
  const targets = { acceptedIds: ctx.acceptedIds(), minionData: (m: string) => ctx.minionCache.get(m), nodegroups: ctx.cfg.nodegroups };
  // As Salt's auth_check, over every minion's data (a Salt cluster's masters read one shared minion cache): with
  // grains placed on a ring, the ids whose data is on other masters are evaluated there, one question per
  // evaluation, as for the CLI's publish (src/lib/targeting/cluster.ts). A minion's patterns: linear time or no
  // match (src/lib/targeting/pcre.ts), here (each evaluation runs before its first await) and there (`linear`).
  const cluster = ctx.clusterMinions;
  const exactType = exactTargetType(tgtType);
  const targeted = withLinearPatterns(() => clusterCheckMinions(tgt, tgtType, { ...targets, greedy: true }, {}, cluster, true));
  const exactly = exactType === tgtType ? targeted : withLinearPatterns(() => clusterCheckMinions(tgt, exactType, { ...targets, greedy: true }, {}, cluster, true));
  const refusedBefore = takeLinearRefusals();
  const [minions, exact] = (await Promise.all([targeted, exactly])).map((r) => r.minions) as [string[], string[]];
  // the ACL's own targets (`G@role:web: [...]`) are judged over the targeted minions' data wherever it lives:
  // those whose records are on other masters are asked for first (one question)
  const here = (m: string) => ctx.minionCache.get(m);
  const theirs = await clusterRecords("data", minions.filter((m) => here(m) === undefined), () => undefined, cluster);
  const minionData = (m: string) => here(m) ?? (theirs.get(m) as MinionData | undefined);
  const verdict = withLinearPatterns(() =>
    peerPublishDecision({ peer: ctx.cfg.peer, load, minions, exactMinions: exact, minionsOf: (t) => checkMinions(t, "compound", { ...targets, minionData, greedy: false }).minions }),
  );
  if (refusedBefore.length || takeLinearRefusals().length) return refuse(id, what, "a target pattern needs backtracking (it matches nothing for a minion)");
  if (!verdict.ok) return refuse(id, what, verdict.reason);
  const compound = Array.isArray(verdict.fun);
  const noParse = Array.isArray(load.no_parse) ? load.no_parse : [];
  return {
    id,
    fun: verdict.fun,
    arg: compound ? verdict.arg : parseInput(verdict.arg, noParse),
    tgt: tgt as string | string[],
    tgtType,
    ret: typeof load.ret === "string" ? load.ret : "",
  };
}

/** Publishes an allowed peer job through the CLI's publish path; its jid and minions, or undefined when the master's CLI key is missing or the publish was refused. */
async function publishPeerJob(ctx: MasterContext, job: PeerJob, fx: Effects, what: string, jid?: string): Promise<{ jid: string | null; minions: string[] } | undefined> {
  const key = ctx.rootKey();
  if (key === undefined) {
    refuse(job.id, what, `the master's CLI key (cachedir/.${ctx.cfg.user}_key) is missing`);
    return undefined;
  }
  audit({ user: job.id, backend: "peer", fun: Array.isArray(job.fun) ? job.fun.join(",") : job.fun, target: job.tgt, source: `minion ${job.id}`, verdict: "allowed" });
  const r = (await handlePublish(ctx, { ...(jid !== undefined ? { jid } : {}), cmd: "publish", fun: job.fun, arg: job.arg as WireValue[], tgt: job.tgt, tgt_type: job.tgtType, ret: job.ret, user: ctx.cfg.user, key, kwargs: {} }, fx, `minion ${job.id}`, { id: job.id })) as Record<string, unknown>;
  const answer = isMap(r.load as WireValue) ? (r.load as Record<string, unknown>) : undefined;
  if (!answer || "error" in r || (answer.error !== undefined && answer.jid !== null)) {
    refusals.line(`${what} from minion ${job.id}: the publish was refused: ${JSON.stringify(r).slice(0, 200)}`);
    return undefined;
  }
  return { jid: typeof answer.jid === "string" ? answer.jid : null, minions: Array.isArray(answer.minions) ? (answer.minions as string[]) : [] };
}

/** `minion_pub`: publish, answer `{jid, minions}` at once. */
export async function doMinionPub(ctx: MasterContext, load: Record<string, WireValue>, fx: Effects): Promise<AesResult> {
  const job = await preparePeerJob(ctx, load, "minion_pub");
  if (!("fun" in job)) return job;
  const r = await publishPeerJob(ctx, job, fx, "minion_pub");
  return r ? send(r) : REFUSED;
}

/** `pub_ret`: the returns of a job this minion published, `{minion: {ret, out?}}` (Salt's get_cache_returns). */
export async function doPubRet(ctx: MasterContext, load: Record<string, WireValue>): Promise<AesResult> {
  const { id, jid } = load;
  if (!validId(id) || !validJid(jid) || !("tok" in load)) return refuse(id, "pub_ret", "a valid id, jid and tok are required");
  // placed on a ring: the load and the returns may be on the job's owners only
  const copy = await placedCopy(ctx, jid, "pub_ret");
  const job = copy?.load ?? ctx.jobs.getLoad(jid);
  if (!job || job.id !== id) return refuse(id, "pub_ret", `job ${jid} was not published by this minion`);
  return send(cacheReturns(copy?.returns ?? ctx.jobs.returnsFor(jid)));
}

function cacheReturns(returns: Record<string, Record<string, unknown>>): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const [m, rec] of Object.entries(returns)) {
    out[m] = { ret: rec.return, ...(rec.out !== undefined ? { out: rec.out } : {}) };
  }
  return out;
}

/** The timeout a `minion_publish` load asks for (`timeout`, else `tmo`, else the master's `timeout`), seconds; undefined when it is not a number. */
function publishTimeoutS(ctx: MasterContext, load: Record<string, WireValue>): number | undefined {
  const raw = "timeout" in load ? load.timeout : "tmo" in load ? load.tmo : ctx.cfg.timeout;
  const n = typeof raw === "number" ? raw : typeof raw === "string" && /^\s*-?\d+\s*$/.test(raw) ? Number(raw) : NaN;
  return Number.isFinite(n) ? Math.min(Math.max(Math.trunc(n), 0), peerPublishWaitSMax) : undefined;
}

/** The stored-return shape (job-cache.ts) of a return event's data: its `return` and the fields a return keeps. */
function returnOfEvent(ev: Record<string, unknown>): Record<string, unknown> {
  const rec: Record<string, unknown> = { return: ev.return };
  for (const k of ["retcode", "success", "out", "fun", "fun_args"]) if (ev[k] !== undefined) rec[k] = ev[k];
  return rec;
}

/**
 * `minion_publish`: publish, wait here for every targeted minion's return (or the timeout), answer them. The
 * returns are pushed from this master's event bus, where every master's returns land (src/shared/job-return-watch.ts;
 * Salt's minion_publish reads them from its bus too), watched before the job is published; when some are still
 * missing at the end (a forwarded event lost, a minion that did not return), the job cache is read once,
 * cluster-wide when jobs are placed on a ring.
 */
export async function doMinionPublish(ctx: MasterContext, load: Record<string, WireValue>, fx: Effects): Promise<AesResult> {
  const timeoutS = publishTimeoutS(ctx, load);
  if (timeoutS === undefined) return refuse(load.id, "minion_publish", `Failed to parse timeout value: ${shown(load.timeout ?? load.tmo, 32)}`);
  const job = await preparePeerJob(ctx, load, "minion_publish");
  if (!("fun" in job)) return job;
  const full = load.form === "full";
  const jid = ctx.jids.next();
  const deadline = Date.now() + timeoutS * 1000;
  const pushed: Record<string, Record<string, unknown>> = {};
  let expected: string[] | undefined;
  let wake: (() => void) | undefined;
  const complete = (returns: Record<string, unknown>) => expected !== undefined && !expected.some((m) => !(m in returns));
  let unwatch: (() => void) | undefined;
  try {
    let w = watchers.get(ctx);
    if (!w) watchers.set(ctx, (w = new ReturnWatcher(ctx.cfg)));
    unwatch = await w.watch(jid, deadline + watchSlackMs, (minion, data) => {
      if (!validId(minion) || minion in pushed) return;
      let ev: unknown;
      try {
        ev = decodeWire(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
      } catch {
        return;
      }
      if (!isMap(ev as WireValue) || !("return" in (ev as object))) return;
      pushed[minion] = returnOfEvent(ev as Record<string, unknown>);
      if (complete(pushed)) wake?.();
    });
  } catch (e) {
    watchFailures.line(`minion_publish from ${job.id}: the returns cannot be watched on the bus (${(e as Error).message}); the job cache is read at the end of the wait`);
  }
  let returns: Record<string, Record<string, unknown>> = pushed;
  try {
    const r = await publishPeerJob(ctx, job, fx, "minion_publish", jid);
    if (!r) return REFUSED;
    if (r.jid === null) return send(full ? { __jid__: null } : {});
    expected = r.minions;
    if (!complete(pushed)) {
      await new Promise<void>((res) => {
        const t = waitTimer.after(deadline - Date.now(), res);
        wake = () => {
          t.cancel();
          res();
        };
      });
    }
  } finally {
    unwatch?.();
  }
  // what the bus did not bring (a forwarded event lost, a minion that did not return): the job cache, once
  if (!complete(pushed)) {
    const cached = (await placedCopy(ctx, jid, "minion_publish"))?.returns ?? ctx.jobs.returnsFor(jid);
    returns = { ...cached, ...pushed };
  }
  const out: Record<string, unknown> = {};
  for (const [m, rec] of Object.entries(returns)) {
    if (full) {
      const { return: ret, ...rest } = rec;
      out[m] = { ...rest, jid, id: m, ret };
    } else out[m] = rec.return;
  }
  if (full) out.__jid__ = jid;
  return send(out);
}

const waiters = new WeakMap<MasterContext, RunnerResultWaiter>();

/** `minion_runner`: the runner's return, as Salt's Runner.run answers it (a failure: "Exception occurred in runner <fun>: <message>"). */
export async function doMinionRunner(ctx: MasterContext, load: Record<string, WireValue>, fx: Effects): Promise<AesResult> {
  const id = load.id;
  if (!validId(id)) return refuse(id, "minion_runner", "invalid id");
  const v = peerRunDecision(ctx.cfg.peer_run, load);
  if (!v.ok) return refuse(id, "minion_runner", v.reason);
  const noParse = Array.isArray(load.no_parse) ? load.no_parse : [];
  const { args, kwargs } = splitPublishArgs(parseInput(load.arg as unknown[], noParse));
  const { __kwarg__: _k, ...kwarg } = kwargs ?? {};
  audit({ user: id, backend: "peer_run", fun: `runner.${v.fun}`, source: `minion ${id}`, verdict: "allowed" });
  let waiter = waiters.get(ctx);
  if (!waiter) waiters.set(ctx, (waiter = new RunnerResultWaiter(ctx.cfg)));
  const jid = ctx.jids.next();
  const result = waiter.wait(jid, peerRunnerWaitSMax * 1000);
  fx.runs.push({ jid, fun: v.fun, arg: args, kwarg, user: ctx.cfg.user, awaited: true });
  const r = await result;
  if (r.packed) return send(decodeWire(Buffer.from(r.packed.buffer, r.packed.byteOffset, r.packed.byteLength)));
  // an unknown runner: Salt's Runner.run prints "'<fun>' is not available." on the master and answers {}
  if (r.error === `'${v.fun}' is not available.`) return refuse(id, "minion_runner", r.error);
  // Salt's Runner.run answers a failure as "Exception occurred in runner <fun>: <traceback>"
  return send(`Exception occurred in runner ${v.fun}: ${r.error ?? "no result"}`);
}
