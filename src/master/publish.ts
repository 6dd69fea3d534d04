/**
 * The `publish` clear command (Salt's ClearFuncs.publish): ACL blacklist, targeting against accepted
 * keys and the minion data cache, root-key authentication, jid allocation, the `<jid>` and
 * `salt/job/<jid>/new` events, the saved load, the 3007 `salt/job/<jid>/publish` event, and the
 * publish load handed to the publisher (which adds the serial, encrypts and signs, in order).
 */
import { timingSafeEqual } from "node:crypto";
import { getLogger } from "../log.js";
import { validJid } from "../protocol/ids.js";
import { isMap, type WireValue } from "../protocol/msgpack.js";
import { checkMinions } from "../targeting/index.js";
import type { Effects, MasterContext } from "./context.js";

const log = getLogger("brine.publish");

/** Keys copied from the CLI's kwargs into the publish load (Salt's _prep_pub). */
const KWARGS_FORWARDED = ["ret_config", "metadata", "module_executors", "executor_opts", "ret_kwargs"] as const;

const authError = { error: { name: "AuthenticationError", message: "Authentication error occurred." } };
const aclError = { error: { name: "AuthorizationError", message: "Authorization error occurred." } };

function keyMatches(given: unknown, want: string | undefined): boolean {
  if (typeof given !== "string" || want === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(want);
  return a.length === b.length && timingSafeEqual(a, b);
}

function blacklisted(list: string[] | undefined, value: string): boolean {
  if (!Array.isArray(list)) return false;
  return list.some((pat) => {
    try {
      return new RegExp(`^(?:${pat})$`).test(value);
    } catch {
      return pat === value;
    }
  });
}

function isStrList(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === "string");
}

export async function handlePublish(ctx: MasterContext, load: Record<string, WireValue>, fx: Effects): Promise<unknown> {
  const clear = (l: unknown) => ({ enc: "clear", load: l });
  const user = typeof load.user === "string" ? load.user : "root";
  const fun = load.fun;
  const tgt = load.tgt;
  const tgtType = typeof load.tgt_type === "string" ? load.tgt_type : "glob";
  const kwargs = isMap(load.kwargs) ? load.kwargs : {};
  if (!(typeof fun === "string" || isStrList(fun)) || !(typeof tgt === "string" || isStrList(tgt))) {
    log.warning("publish request with a malformed fun or tgt");
    return clear({ error: { name: "SaltInvocationError", message: "fun and tgt must be strings or lists of strings" } });
  }
  const arg = Array.isArray(load.arg) ? load.arg : [];
  const funs = typeof fun === "string" ? [fun] : fun;
  const bl = ctx.cfg.publisher_acl_blacklist ?? {};
  if (blacklisted(bl.users, user) || funs.some((f) => blacklisted(bl.modules, f))) {
    log.warning(`publish by ${user} of ${funs.join(",")} refused by publisher_acl_blacklist`);
    return clear(aclError);
  }
  if (!keyMatches(load.key, ctx.rootKey())) {
    log.warning(`Authentication failure of type "user" occurred for user ${user}`);
    if (validJid(load.jid)) ctx.fire(fx, `salt/job/${load.jid}/error`, { ...withoutKey(load), error: authError.error });
    return clear(authError);
  }
  const delimiter = typeof kwargs.delimiter === "string" ? kwargs.delimiter : ":";
  const { minions, missing } = checkMinions(tgt, tgtType, {
    acceptedIds: ctx.acceptedIds(),
    minionData: (id: string) => ctx.minionCache.get(id),
    nodegroups: ctx.cfg.nodegroups,
    greedy: true,
  }, { delimiter });
  if (minions.length === 0) {
    return clear({ jid: null, minions: [], error: `Master could not resolve minions for target ${String(tgt)}` });
  }
  const jid = validJid(load.jid) ? load.jid : ctx.jids.next();
  if (kwargs.nocache === true) await ctx.jobs.markNocache(jid);

  ctx.fire(fx, jid, { minions });
  ctx.fire(fx, `salt/job/${jid}/new`, { jid, tgt_type: tgtType, tgt, user, fun, arg, minions, missing });
  const saved = { ...withoutKey(load), jid, tgt_type: tgtType, user, arg, ret: load.ret ?? "" };
  await ctx.jobs.saveLoad(jid, saved, minions);

  const pub: Record<string, unknown> = { fun, arg, tgt, jid, ret: typeof load.ret === "string" ? load.ret : "", tgt_type: tgtType, user };
  if (delimiter !== ":") pub.delimiter = delimiter;
  for (const k of KWARGS_FORWARDED) if (kwargs[k] !== undefined) pub[k] = kwargs[k];
  if (typeof load.to === "number") pub.to = load.to;
  ctx.fire(fx, `salt/job/${jid}/publish`, pub);
  fx.publishes.push(pub);
  log.info(`User ${user} Published command ${funs.join(",")} with jid ${jid}`);
  return clear({ jid, minions, missing });
}

function withoutKey(load: Record<string, WireValue>): Record<string, WireValue> {
  const { key: _k, ...rest } = load;
  return rest;
}
