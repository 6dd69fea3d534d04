/**
 * The AES command allow-list (Salt's AESFuncs as exposed to minions) and the handlers brine serves.
 * A command outside the list, or one starting with "_" twice, gets `{}` like Salt's run_func.
 * Handlers return the value to encrypt and the send mode; they never throw for bad minion input
 * (the request layer turns an unexpected throw into Salt's "Some exception handling minion payload").
 */
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { validId, validJid } from "../../shared/protocol/ids.js";
import { encodeWire, isMap, type MapEntrySpans, type WireValue } from "../../shared/protocol/msgpack.js";
import { fnmatchToRegExp as fnmatchRegex } from "../../lib/targeting/index.js";
import { takeLinearRefusals, withLinearPatterns } from "../../lib/targeting/pcre.js";
import { clusterCheckMinions, clusterRecords } from "../../lib/targeting/cluster.js";
import { readMine } from "../../lib/mine/get.js";
import { markVerified, type Effects, type MasterContext } from "./context.js";
import { masterOptsForMinion } from "./master-opts.js";
import { returnSignatureValid } from "./return-sig.js";
import { minionPolicy } from "./minion-policy.js";
import { returnSucceeded } from "../../shared/metrics/labels.js";
import { doMinionPub, doMinionPublish, doMinionRunner, doPubRet } from "./peer-publish.js";
import { doFileRecv } from "./file-recv.js";

const log = getLogger("brine.aesfuncs");

export type SendMode = "send" | "send_private";
export interface AesResult {
  ret: unknown;
  mode: SendMode;
}
/** `raw`: where the load's entries lie in the request's plaintext (absent for loads not decoded from one) */
type Handler = (ctx: MasterContext, load: Record<string, WireValue>, fx: Effects, raw?: MapEntrySpans) => AesResult | Promise<AesResult>;

/**
 * `_minion_event` tags a minion may not fire: Salt's blacklist (salt/utils/event.py valid_minion_tag),
 * plus the master's own presence events. Every tag fired from a minion's request passes this filter,
 * including the joined `pretag/tag` of a batch (Salt checks only `tag`, so its `pretag` forges any tag),
 * and the single-event form (Salt checks none there).
 */
const BLACKLISTED_TAGS = [
  "salt/job/*/publish",
  "salt/job/*/new",
  "salt/job/*/return",
  "salt/key",
  "salt/key/*",
  "salt/auth",
  "salt/auth/*",
  "salt/cloud/*",
  "salt/run/*",
  "salt/cluster/*",
  "salt/wheel/*/new",
  "salt/wheel/*/return",
  "salt/presence/*",
].map(fnmatchRegex);
/** Job tags that name a minion: a minion may fire them only under its own id (its return, progress, state errors). */
const MINION_JOB_TAG = /^salt\/job\/[^/]*\/(?:ret|prog|sub)\/([^/]*)/;
/** Characters no tag from a minion may hold: they would split a bus frame or a log line, or drive a terminal. */
const TAG_CONTROL = /[\x00-\x1f\x7f-\x9f]/;
/** Longest event tag accepted from a minion. */
export const minionTagBytesMax = 512;
/** Most events in one `_minion_event` batch. */
export const minionEventsPerBatchMax = 1000;
/** Refusals of what minions sent (events, mine data, patterns) logged per window per request thread; then one summary line per window. */
export const refusedEventLogsPerWindow = 20;
export const refusedEventLogWindowMs = 60_000;

const minionRefusals = new LogBudget(refusedEventLogsPerWindow, refusedEventLogWindowMs, (l) => log.warning(l), "refusals of what minions sent");

/** Why a minion may not fire `tag`, or undefined when it may. */
export function tagRefusal(tag: unknown, id: string): string | undefined {
  if (typeof tag !== "string" || tag.length === 0) return "not a tag";
  if (tag.length > minionTagBytesMax) return `longer than ${minionTagBytesMax}`;
  if (TAG_CONTROL.test(tag)) return "control characters";
  if (BLACKLISTED_TAGS.some((re) => re.test(tag))) return "reserved for the master";
  const named = MINION_JOB_TAG.exec(tag);
  if (named && named[1] !== id) return "names another minion";
  return undefined;
}

/** True when `id` may fire `tag`; otherwise logs the refusal (within the log budget) and returns false. */
function tagAllowed(tag: unknown, id: string): tag is string {
  const why = tagRefusal(tag, id);
  if (why === undefined) return true;
  minionRefusals.line(`Filtering blacklisted event tag ${String(tag).slice(0, 128)} from ${id} (${why})`);
  return false;
}

const send = (ret: unknown): AesResult => ({ ret, mode: "send" });

/** The reply to every stored (or refused-as-duplicate) return; shared, never mutated. */
const RETURN_DONE: AesResult = Object.freeze({ ret: null, mode: "send" });

/**
 * `_return`. Synchronous up to the durable write, and then only a `then` on it: the hot path of a
 * master under a return flood, where every async layer costs a promise and a suspended frame.
 */
function doReturn(ctx: MasterContext, load: Record<string, WireValue>, fx: Effects, raw?: MapEntrySpans): AesResult | Promise<AesResult> {
  const id = load.id;
  if (!("return" in load) || !validId(id) || (load.jid !== "req" && !validJid(load.jid))) {
    log.warning(`_return with a missing or invalid return/jid/id from ${String(id).slice(0, 64)}`);
    return send(false);
  }
  if ("sig" in load) {
    if (!returnSignatureValid(ctx.minionPublicKey(id), load, raw)) {
      if (ctx.cfg.require_minion_sign_messages || ctx.cfg.drop_messages_signature_fail) {
        log.critical(`_return: the signature of ${id}'s return does not verify; return dropped`);
        return send(false);
      }
      log.info(`Failed to verify event signature from minion ${id}; accepted (drop_messages_signature_fail is off)`);
    }
  } else if (ctx.cfg.require_minion_sign_messages) {
    log.critical(`_return: master requires signed messages, but ${id} sent none`);
    return send(false);
  }
  if (load.jid === "req") {
    // a minion-initiated job (e.g. a scheduled one): give it a jid and a load first
    const jid = ctx.jids.next();
    const fun = load.fun;
    return ctx.jobs.saveLoad(jid, { jid, fun, arg: load.fun_args ?? [], tgt_type: "glob", tgt: id, user: load.user ?? "root", ret: "" }, [id]).then(() => {
      load.jid = jid;
      return storeReturn(ctx, load, id, jid, fx);
    });
  }
  return storeReturn(ctx, load, id, load.jid as string, fx, raw);
}

/** What a return's event leaves out of the minion's load. */
const NOT_IN_RETURN_EVENT: ReadonlySet<string> = new Set(["nonce", "tok"]);

/** A copy of the load for an event: without what NOT_IN_RETURN_EVENT names. */
function eventData(load: Record<string, WireValue>): Record<string, WireValue> {
  const { nonce: _n, tok: _t, ...data } = load;
  return data;
}

/** `raw`: the load's entries as they came; the event re-sends them (absent: the load is encoded again). */
function storeReturn(ctx: MasterContext, load: Record<string, WireValue>, id: string, jid: string, fx: Effects, raw?: MapEntrySpans): AesResult | Promise<AesResult> {
  const tag = `salt/job/${jid}/ret/${id}`;
  if (raw?.buf) ctx.fireSpans(fx, tag, raw, NOT_IN_RETURN_EVENT);
  else ctx.fire(fx, tag, eventData(load), true);
  markVerified(fx);
  ctx.metrics.jobCompleted(load.fun, returnSucceeded(load));
  const fun = typeof load.fun === "string" ? load.fun : "";
  if ((fun === "state.sls" || fun === "state.highstate" || fun === "state.apply") && isMap(load.return)) {
    const eventLoad = eventData(load);
    for (const [key, item] of Object.entries(load.return)) {
      if (isMap(item) && item.result === false) {
        ctx.fire(fx, `salt/job/${jid}/sub/${id}/error/${fun}`, { ...eventLoad, return: { [key]: item } });
      }
    }
  }
  if (!ctx.cfg.job_cache || ctx.isNocache(jid)) return RETURN_DONE;
  // counted in the shared drop_stats (cluster.routes); the return is stored here all the same, and handed off to
  // the jid's owners when jobs are routed to a ring (the job cache's outbox)
  ctx.gate?.("jobs", jid);
  const saved = ctx.jobs.saveReturn(jid, id, load as never, ctx.cfg.job_cache_store_endtime).then((stored) => {
    if (!stored) log.info(`An extra return was detected from minion ${id}, please verify the minion, this could be a replay attack`);
    return RETURN_DONE;
  });
  // stored (lmdb-js encodes the record at the put): nothing refers to the load while the write becomes durable, so
  // its decode budget is free now (decode-budget.ts; a no-op for a return stored after a wait: charged until its reply)
  ctx.decodeBudget.letGo();
  return saved;
}

async function doPillar(ctx: MasterContext, load: Record<string, WireValue>, fx: Effects): Promise<AesResult> {
  const id = load.id;
  if (!validId(id)) return { ret: {}, mode: "send_private" };
  const grains = isMap(load.grains) ? (load.grains as Record<string, unknown>) : {};
  const pillar = ctx.compilePillar ? await ctx.compilePillar(id, grains, load) : {};
  if (ctx.cfg.minion_data_cache) {
    await ctx.minionCache.put(id, { grains, pillar });
    if (ctx.cfg.minion_data_cache_events) ctx.fire(fx, `minion/refresh/${id}`, { "Minion data cache refresh": id });
  }
  return { ret: pillar, mode: "send_private" };
}

function doMinionEvent(ctx: MasterContext, load: Record<string, WireValue>, fx: Effects): AesResult {
  const id = load.id;
  if (!validId(id)) return send(false);
  if (Array.isArray(load.events)) {
    if (load.events.length > minionEventsPerBatchMax) return send(false);
    const pretag = typeof load.pretag === "string" && load.pretag ? load.pretag : undefined;
    for (const ev of load.events) {
      if (!isMap(ev)) continue;
      const data = "data" in ev ? ev.data : ev;
      if (tagAllowed(ev.tag, id)) ctx.fire(fx, ev.tag, data);
      else continue; // as Salt: a refused tag drops its pretagged copy too
      // Salt's tagify(tag, base=pretag); the joined tag is checked as one, it is what listeners see
      const joined = pretag === undefined ? undefined : `${pretag}/${ev.tag}`;
      if (joined !== undefined && tagAllowed(joined, id)) ctx.fire(fx, joined, data);
    }
    return send(null); // Salt's AESFuncs._minion_event answers None
  }
  if (!("tag" in load) || !("data" in load)) return send(false);
  if (!tagAllowed(load.tag, id)) return send(false);
  const { nonce: _n, tok: _t, ...data } = load;
  ctx.fire(fx, load.tag, data);
  return send(null);
}

/** The bytes of entry `key` in the request's plaintext, or undefined when the load was not decoded from one. */
function entryBytes(raw: MapEntrySpans | undefined, key: string): number | undefined {
  if (!raw?.buf) return undefined;
  const i = raw.keys.indexOf(key);
  return i < 0 ? undefined : raw.ends[i]! - raw.starts[i]!;
}

/**
 * `_mine`: the minion's mine data, merged (or replaced with `clear`), bounded by `mine_max_size` per
 * minion: a store past it is refused and logged (one minion once stored 240 MB). The new data alone is
 * measured from the request's bytes (no work for a huge one); the merged whole is measured encoded, which
 * costs at most about twice the bound.
 */
async function doMine(ctx: MasterContext, load: Record<string, WireValue>, _fx: Effects, raw?: MapEntrySpans): Promise<AesResult> {
  const id = load.id;
  if (!validId(id) || !isMap(load.data)) return send(false);
  const max = minionPolicy(ctx.cfg).mineBytesMax;
  const incoming = entryBytes(raw, "data");
  const tooBig = (bytes: number) => {
    minionRefusals.line(`_mine from ${id} refused: its mine data would be ${bytes} bytes, over mine_max_size (${max} bytes)`);
    return send(false);
  };
  if (incoming !== undefined && incoming > max) return tooBig(incoming);
  const current = load.clear === true ? {} : (await mineOf(ctx, [id])).get(id) ?? {};
  const merged = { ...current, ...load.data };
  const bytes = encodeWire(merged).length;
  if (bytes > max) return tooBig(bytes);
  await ctx.minionCache.setMine(id, merged);
  return send(true);
}

async function doMineDelete(ctx: MasterContext, load: Record<string, WireValue>): Promise<AesResult> {
  const id = load.id;
  if (!validId(id) || typeof load.fun !== "string") return send(false);
  const current = { ...((await mineOf(ctx, [id])).get(id) ?? {}) };
  delete current[load.fun];
  await ctx.minionCache.setMine(id, current);
  return send(true);
}

async function doMineFlush(ctx: MasterContext, load: Record<string, WireValue>): Promise<AesResult> {
  if (!validId(load.id)) return send(false);
  await ctx.minionCache.setMine(load.id, {});
  return send(true);
}

/** The mine data of `ids`: this master's, or with `mine` placed on a ring, the cluster's newest copies. */
function mineOf(ctx: MasterContext, ids: readonly string[]): Promise<Map<string, Record<string, unknown>>> {
  return clusterRecords("mine", ids, (id) => ctx.minionCache.mine(id), ctx.clusterMinions);
}

/**
 * A minion's mine read (Salt's RemoteFuncs._mine_get; the rules, the master's `mine_get` ACL and the minion-side
 * `allow_tgt` ACL are in src/lib/mine/get.ts). The patterns come from minions (the target, and the allow_tgt other
 * minions stored): linear time or no match (src/lib/targeting/pcre.ts), never a stall of this lane; each
 * evaluation on this master runs before its first await, inside withLinearPatterns (and the other masters' likewise).
 */
async function doMineGet(ctx: MasterContext, load: Record<string, WireValue>): Promise<AesResult> {
  if (!validId(load.id) || !("tgt" in load) || !("fun" in load)) return send({});
  const requester = load.id;
  // Salt takes the old expr_form when tgt_type is not given
  const tgtType = "tgt_type" in load ? load.tgt_type : (load.expr_form ?? "glob");
  if (typeof tgtType !== "string") return send({});
  const targets = { acceptedIds: ctx.acceptedIds(), minionData: (id: string) => ctx.minionCache.get(id), nodegroups: ctx.cfg.nodegroups };
  const refused: string[] = [];
  const deps = {
    targetIds: async (tgt: unknown, type: string, greedy: boolean) => {
      const resolving = withLinearPatterns(() => clusterCheckMinions(tgt, type, { ...targets, greedy }, {}, ctx.clusterMinions, true));
      // taken before the first await: another request's patterns are evaluated on this thread meanwhile
      refused.push(...takeLinearRefusals());
      return (await resolving).minions;
    },
    mineOf: (ids: readonly string[]) => mineOf(ctx, ids),
  };
  const cfg = ctx.cfg as unknown as Record<string, unknown>;
  try {
    return send((await readMine(deps, requester, load.tgt, load.fun, tgtType, cfg.mine_get, "mine_get" in cfg)) as WireValue);
  } finally {
    if (refused.length) minionRefusals.line(`_mine_get from ${requester}: pattern ${JSON.stringify(refused[0]!.slice(0, 128))} needs backtracking (a backreference, a lookaround or a count over 16); it matches nothing for a minion`);
  }
}

export const AES_FUNCS: ReadonlyMap<string, Handler> = new Map<string, Handler>([
  ["_return", doReturn],
  ["_pillar", doPillar],
  ["_minion_event", doMinionEvent],
  ["_master_opts", (ctx, load) => send(masterOptsForMinion(ctx.cfg, load.env_only === true))],
  ["_mine", doMine],
  ["_mine_get", doMineGet],
  ["_mine_delete", doMineDelete],
  ["_mine_flush", doMineFlush],
  // peer publish (peer-publish.ts) and file pushes (file-recv.ts)
  ["minion_pub", doMinionPub],
  ["minion_publish", doMinionPublish],
  ["pub_ret", doPubRet],
  ["minion_runner", doMinionRunner],
  ["_file_recv", doFileRecv],
]);

/** Register more handlers (the fileserver adds its commands here). */
export function registerAesFunc(name: string, h: Handler): void {
  (AES_FUNCS as Map<string, Handler>).set(name, h);
}
