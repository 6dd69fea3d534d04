/**
 * brine as a master of masters (`order_masters: True`): what a syndic sends up, in a request worker.
 *
 * - `_syndic_return` (Salt's AESFuncs._syndic_return): `load` is a list of per-jid batches
 *   `{id: <syndic>, jid, fun, arg, tgt, tgt_type, load: <the lower master's job load>, return: {<minion>:
 *   {return, retcode, success, fun_args}}, master_id?, out?}` (an old syndic sends one batch as the load
 *   itself). Each minion's return goes through this master's own `_return` handler (aes-funcs.ts: the
 *   `salt/job/<jid>/ret/<minion>` event, the durable job-cache write, `sig` checks), with `jid`, `id`,
 *   `master_id`, `fun`, `fun_args`, `out` and `sig` set as Salt sets them; the reply leaves only once every
 *   return of the request is durable, so a syndic may forget what it sent when the reply comes. A job load
 *   the lower master sent is saved when this master has none for the jid (a job published below, not by
 *   us). The syndic is registered in `cachedir/syndics/<id>` (Salt's syndic_dir: the CLI never reports a
 *   syndic itself as a minion that did not answer).
 * - `_minion_event` batches from a syndic (pretag `syndic/<id>`) that carry a lower master's
 *   `salt/job/<jid>/new` (Salt's _handle_minion_event → store_minions): the minions matched below are added
 *   to the job's expected minions and announced on this master's bus as
 *   `syndic/<syndic id>/salt/job/<jid>/new` `{jid, minions, syndic}` (the pretagged copy Salt 3006 let
 *   through and 3007 filters with the blacklisted `salt/job/*\/new`), which the CLI waits on (`syndic_wait`);
 *   the `not_connected` a brine lower master adds to its event (publish.ts) goes along, so the CLI reports
 *   those minions "[Not connected]" (a Python lower master sends none: "[No response]", as Salt's MoM says).
 *   A syndic's `salt/syndic/<id>/start` registers it as a syndic at once (the CLI never waits for a syndic).
 *   The batch's other events go through `_minion_event` unchanged (this wraps that handler); the
 *   `salt/job/<jid>/new` ones, taken here, and those whose tags are reserved for this master (the lower
 *   master's `salt/auth`, `salt/key`, …, which Salt 3007 filters too) are left out of it (its tag filter would
 *   refuse and log each: a warning per sign-in below a syndic), counted in one debug line, for a registered
 *   syndic only.
 *
 * Stricter than Salt, on purpose (docs/security.md, "A minion"): without `order_masters` a `_syndic_return`
 * is refused (a master with no syndics has nothing to take from one); a batch must name the syndic that
 * sent it when the request names one (v3); a syndic never speaks for a minion whose key this master has
 * accepted (its own minions answer for themselves); a return already stored for (jid, minion) is skipped
 * before the write and counted in one line per request (a syndic resending after a reconnect is expected,
 * not a replay attack: Salt issues #65516, #60251).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { validId, validJid } from "../../shared/protocol/ids.js";
import { isMap, type WireValue } from "../../shared/protocol/msgpack.js";
import { AES_FUNCS, registerAesFunc, tagRefusal, type AesResult } from "./aes-funcs.js";
import { addSubsystem } from "./subsystems.js";
import type { Effects, MasterContext } from "./context.js";

const log = getLogger("brine.syndic");

/** Most per-jid batches in one `_syndic_return`, and most minion returns in all of them. */
export const syndicBatchesMax = 10_000;
export const syndicReturnsMax = 100_000;
/** Longest `minions` list of one forwarded `salt/job/<jid>/new` taken. */
export const syndicMinionsPerJobMax = 100_000;

const refusals = new LogBudget(20, 60_000, (l) => log.warning(l), "refusals of syndic returns");
/** syndic ids this thread has registered in cachedir/syndics */
const registered = new WeakMap<MasterContext, Set<string>>();

const done = (ret: unknown): AesResult => ({ ret, mode: "send" });

function registerSyndic(ctx: MasterContext, id: string): void {
  let seen = registered.get(ctx);
  if (!seen) registered.set(ctx, (seen = new Set()));
  if (seen.has(id)) return;
  const dir = path.join(ctx.cfg.cachedir, "syndics");
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(path.join(dir, id), "", { flag: "a" });
    seen.add(id);
  } catch (e) {
    log.warning(`could not register syndic ${id} in ${dir}: ${(e as Error).message}`);
  }
}

/** The lower master's job load as this master keeps one: credentials and `Minions` out. */
function jobLoadOf(jid: string, raw: Record<string, WireValue>): { load: Record<string, unknown>; minions?: string[] } {
  const { Minions, key: _k, ...rest } = raw;
  const minions = Array.isArray(Minions) ? Minions.filter(validId) : undefined;
  return { load: { ...rest, jid }, minions };
}

async function doSyndicReturn(ctx: MasterContext, load: Record<string, WireValue>, fx: Effects): Promise<AesResult> {
  const sender = typeof load.id === "string" && load.id !== "" ? load.id : undefined;
  if (!ctx.cfg.order_masters) {
    refusals.line(`_syndic_return from ${String(sender ?? "an unnamed sender").slice(0, 64)} refused: this master has order_masters: False`);
    return done(false);
  }
  const batches = Array.isArray(load.load) ? load.load : [load];
  if (batches.length > syndicBatchesMax) {
    refusals.line(`_syndic_return from ${sender} refused: ${batches.length} batches (at most ${syndicBatchesMax})`);
    return done(false);
  }
  const doReturn = AES_FUNCS.get("_return")!;
  const pending: Promise<AesResult>[] = [];
  let returns = 0;
  let duplicates = 0;
  for (const b of batches) {
    if (!isMap(b) || !isMap(b.return) || !validId(b.id)) continue;
    const jid = b.jid;
    if (typeof jid !== "string" || (jid !== "req" && !validJid(jid))) continue;
    if (sender !== undefined && b.id !== sender) {
      refusals.line(`_syndic_return from ${sender} carries a batch in the name of ${String(b.id).slice(0, 64)}; skipped`);
      continue;
    }
    registerSyndic(ctx, b.id);
    if (validJid(jid) && isMap(b.load) && Object.keys(b.load).length > 0 && !ctx.jobs.getLoad(jid)) {
      const { load: jobLoad, minions } = jobLoadOf(jid, b.load);
      await ctx.jobs.saveLoad(jid, jobLoad, minions);
    }
    for (const [minion, item] of Object.entries(b.return)) {
      if (!validId(minion) || !isMap(item)) continue;
      if (++returns > syndicReturnsMax) break;
      if (ctx.acceptedKeys.get(minion) !== undefined) {
        refusals.line(`_syndic_return from ${b.id}: a return in the name of ${minion}, a minion of this master, skipped`);
        continue;
      }
      if (validJid(jid) && ctx.jobs.hasReturn(jid, minion)) {
        duplicates++;
        continue;
      }
      // Salt's order: jid and id, the minion's item, then what the batch says of the job
      const ret: Record<string, WireValue> = { jid, id: minion, ...item };
      for (const k of ["master_id", "fun", "fun_args", "out", "sig"] as const) if (k in b) ret[k] = b[k]!;
      ret.jid = jid;
      ret.id = minion;
      pending.push(Promise.resolve(doReturn(ctx, ret, fx)));
    }
  }
  await Promise.all(pending);
  if (duplicates) log.debug(`_syndic_return from ${sender ?? "a syndic"}: ${duplicates} return(s) already stored, skipped (a resent batch)`);
  return done(null);
}

const JOB_NEW = /^salt\/job\/(\d{20})\/new$/;

/** A syndic's forwarded `salt/job/<jid>/new`: the minions matched below it (see the header). */
async function noteSyndicMinions(ctx: MasterContext, load: Record<string, WireValue>, fx: Effects): Promise<void> {
  const sid = load.id;
  if (!validId(sid) || !Array.isArray(load.events) || typeof load.pretag !== "string" || !load.pretag.startsWith("syndic/")) return;
  for (const ev of load.events) {
    if (!isMap(ev) || typeof ev.tag !== "string") continue;
    const m = JOB_NEW.exec(ev.tag);
    const data = isMap(ev.data) ? ev.data : undefined;
    if (!m || !data || !Array.isArray(data.minions) || data.minions.length > syndicMinionsPerJobMax) continue;
    const jid = m[1]!;
    const minions = data.minions.filter(validId);
    if (minions.length === 0) continue;
    registerSyndic(ctx, sid);
    if (ctx.jobs.getLoad(jid)) await ctx.jobs.addMinions(jid, minions);
    // a brine lower master names the matched minions it does not see connected (publish.ts); only those it matched
    const matched = new Set(minions);
    const notConnected = Array.isArray(data.not_connected) ? data.not_connected.filter((x): x is string => typeof x === "string" && matched.has(x)) : [];
    ctx.fire(fx, `syndic/${sid}/salt/job/${jid}/new`, { jid, minions, syndic: sid, ...(notConnected.length ? { not_connected: notConnected } : {}) });
  }
}

let installed = false;
addSubsystem(() => {
  if (installed) return; // once per thread: the handler table is the module's, not the context's
  installed = true;
  registerAesFunc("_syndic_return", doSyndicReturn);
  const minionEvent = AES_FUNCS.get("_minion_event");
  if (!minionEvent) return;
  registerAesFunc("_minion_event", (ctx, load, fx, raw) => {
    if (!ctx.cfg.order_masters) return minionEvent(ctx, load, fx, raw);
    // a syndic announces itself when it signs in (Salt's fire_master_syndic_start): registered at once, the
    // CLI does not wait for it as a minion from its first job on
    if (validId(load.id) && load.tag === `salt/syndic/${load.id}/start`) registerSyndic(ctx, load.id);
    if (typeof load.pretag !== "string") return minionEvent(ctx, load, fx, raw);
    if (!load.pretag.startsWith("syndic/") || !Array.isArray(load.events)) return minionEvent(ctx, load, fx, raw);
    // the lower master's salt/job/<jid>/new were taken above; the tag filter would refuse (and log) each one,
    // as it would the lower master's own events a syndic in sync mode sends up routinely (salt/auth, salt/key …):
    // those are left out here and counted in one debug line
    let reserved = 0;
    const syndic = validId(load.id) && ctx.hasSyndicFile(load.id);
    const rest = load.events.filter((ev) => {
      if (!isMap(ev) || typeof ev.tag !== "string") return true;
      if (JOB_NEW.test(ev.tag)) return false;
      if (!syndic || tagRefusal(ev.tag, load.id as string) !== "reserved for the master") return true;
      reserved++;
      return false;
    });
    if (reserved) log.debug(`${reserved} event(s) of ${String(load.id).slice(0, 64)}'s lower master are reserved for this master (salt/auth, salt/key, …); not fired`);
    return noteSyndicMinions(ctx, load, fx).then(() => (rest.length ? minionEvent(ctx, { ...load, events: rest }, fx) : done(null)));
  });
});
