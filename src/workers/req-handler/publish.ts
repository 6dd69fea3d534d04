/**
 * The `publish` clear command (Salt's ClearFuncs.publish): authentication (a `token` or `eauth` in the
 * load's `kwargs` is judged alone, never the key that comes with it; else the CLI key of `user`), the
 * ACL blacklist, targeting against accepted keys and the minion data cache, authorization of the
 * user's auth list against the function, its arguments and every targeted minion, jid allocation, the
 * `<jid>` and `salt/job/<jid>/new` events, the saved load (credentials stripped), the 3007
 * `salt/job/<jid>/publish` event, and the publish load handed to the publisher (which adds the serial,
 * encrypts and signs, in order). Refusals are Salt's top-level `{"error": {...}}` and one audit line.
 * A minion's peer publish (peer-publish.ts) comes through here too, with the master's CLI key, as Salt's
 * LocalClient sends it; its load and publish then carry the asking minion's `id`.
 * A job's `salt/job/<jid>/new` names the matched minions this master does not see connected when it publishes
 * (`not_connected`, beyond Salt's event; with `brine_presence: connections`, at most `notConnectedMinionsMax`
 * matched, a larger job logged; the publish port's peers from the request threads' shared board, src/shared/publish-peers.ts, which
 * says when it reads /proc/net/tcp and how old an answer it may give): a minion not connected then
 * never gets the job, even if it connects before the wait ends (a failover minion moving here), so brine's CLI
 * reports it "[Not connected]" rather than "[No response]"; a syndic carries the event up, so a master of
 * masters' CLI can say the same of a minion below it.
 */
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { credentialKind } from "../../lib/auth/authenticate.js";
import { publishAllowed } from "../../lib/auth/acl.js";
import { audit } from "./clear-funcs.js";
import { saltJobFilesOn, writeSaltJobLoad } from "../../lib/store/salt-job-files.js";
import { validJid } from "../../shared/protocol/ids.js";
import { isMap, type WireValue } from "../../shared/protocol/msgpack.js";
import { clusterCheckMinions, clusterRecords } from "../../lib/targeting/cluster.js";
import type { MinionData } from "../../lib/store/minion-cache.js";
import { checkMinions } from "../../lib/targeting/index.js";
import { markVerified, type Effects, type MasterContext } from "./context.js";
import { notConnectedAtPublish } from "./presence.js";

const log = getLogger("brine.publish");

/** Keys copied from the CLI's kwargs into the publish load (Salt's _prep_pub). */
const KWARGS_FORWARDED = ["ret_config", "metadata", "module_executors", "executor_opts", "ret_kwargs"] as const;

const authError = { error: { name: "AuthenticationError", message: "Authentication error occurred." } };
const aclError = { error: { name: "AuthorizationError", message: "Authorization error occurred." } };

/** Credentials a publish may carry in its kwargs; never saved, fired or published. */
const KWARG_CREDENTIALS = ["token", "eauth", "username", "password"] as const;

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

/**
 * Most matched minions a publish looks up the presence of, count: five times the 20,000-minion fleet of issue 17 (and
 * the indexed key store's 100,000 keys), so that a job to a whole fleet that size names its minions not connected. A
 * larger job names none, and the master says so in its log (at most once per 10 minutes per thread): the CLI then
 * tells "[Not connected]" from "[No response]" only by the presence it reads when its wait ends.
 */
export const notConnectedMinionsMax = 100_000;
const presenceSkipped = new LogBudget(1, 600_000, (l) => log.warning(l), "publishes too large to look up presence");

/** A job a minion publishes to its peers (peer-publish.ts): its id goes into the saved load and the publish, as Salt's `id`. */
export interface PeerOrigin {
  id: string;
}

export async function handlePublish(ctx: MasterContext, load: Record<string, WireValue>, fx: Effects, source?: string, peer?: PeerOrigin): Promise<unknown> {
  const clear = (l: unknown) => ({ enc: "clear", load: l });
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

  // who is asking: a token or eauth in kwargs alone, else the CLI key of `user`
  const kind = credentialKind(kwargs as Record<string, unknown>);
  const rawOutcome = await ctx.auth().authenticate((kind === "user" ? load : kwargs) as Record<string, unknown>, kind, source);
  // a job a syndic forwards from a master of masters carries the publishing user's auth list: it binds
  // the syndic's root-key publish here, as Salt's ClearFuncs.publish applies it (an empty one: no limit)
  const outcome = rawOutcome.ok && kind === "user" && rawOutcome.rights === "full" ? withSyndicAuthList(rawOutcome, kwargs.auth_list) : rawOutcome;
  const fail = (error: { name: string; message: string }) => {
    if (validJid(load.jid)) ctx.fire(fx, `salt/job/${load.jid}/error`, { ...withoutCredentials(load), error });
    return { error };
  };
  if (!outcome.ok) {
    audit({ user: outcome.username, backend: outcome.backend, fun: funs.join(","), target: tgt, source, verdict: `denied: ${outcome.reason}` });
    log.warning(`Authentication failure of type "${kind}" occurred.`);
    return fail(authError.error);
  }
  const user = kind === "user" ? (typeof load.user === "string" ? load.user : "root") : outcome.username;

  const bl = ctx.cfg.publisher_acl_blacklist ?? {};
  if (blacklisted(bl.users, user) || funs.some((f) => blacklisted(bl.modules, f))) {
    audit({ user, backend: outcome.backend, fun: funs.join(","), target: tgt, source, verdict: "denied: publisher_acl_blacklist" });
    log.warning(`publish by ${user} of ${funs.join(",")} refused by publisher_acl_blacklist`);
    return fail(aclError.error);
  }
  const delimiter = typeof kwargs.delimiter === "string" ? kwargs.delimiter : ":";
  const targets = {
    acceptedIds: ctx.acceptedIds(),
    minionData: (id: string) => ctx.minionCache.get(id),
    nodegroups: ctx.cfg.nodegroups,
    greedy: true,
  };
  // with grains placed on a ring, the ids whose data is on other masters are evaluated there (one question each)
  const { minions, missing } = await clusterCheckMinions(tgt, tgtType, targets, { delimiter }, ctx.clusterMinions);
  if (outcome.rights !== "full") {
    // an ACL's target (G@..., I@...) is judged over the targeted minions' data: with grains placed on a ring,
    // the data of those whose records are on other masters is asked for first (one question)
    const here = (id: string) => ctx.minionCache.get(id);
    const theirs = await clusterRecords("data", minions.filter((id) => here(id) === undefined), () => undefined, ctx.clusterMinions);
    const minionData = (id: string) => here(id) ?? (theirs.get(id) as MinionData | undefined);
    const allowed = publishAllowed({
      authList: outcome.rights,
      fun,
      arg,
      minions,
      minionsOf: (t) => checkMinions(t, "compound", { ...targets, minionData, greedy: false }).minions,
      whitelist: ["saltutil.find_job"],
    });
    if (!allowed) {
      audit({ user, backend: outcome.backend, fun: funs.join(","), target: tgt, source, verdict: "denied: not in the user's auth list" });
      log.warning(`Authentication failure of type "${kind}" occurred.`);
      return fail(aclError.error);
    }
  }
  audit({ user, backend: outcome.backend, fun: funs.join(","), target: tgt, source, verdict: "allowed" });
  // a master of masters publishes even when none of its own minions match: the syndics' minions may
  if (minions.length === 0 && !ctx.cfg.order_masters) {
    return clear({ jid: null, minions: [], error: `Master could not resolve minions for target ${String(tgt)}` });
  }
  const jid = validJid(load.jid) ? load.jid : ctx.jids.next();
  if (kwargs.nocache === true) await ctx.jobs.markNocache(jid);

  ctx.fire(fx, jid, { minions });
  // a peer job's `new` names the publishing minion (beyond Salt's event): clustered, the peers store the job's load
  // from this event, and pub_ret on any master answers only that minion
  // which of its minions are not connected here now, and so will never get it (see the header)
  const notConnected = minions.length > 0 && minions.length <= notConnectedMinionsMax ? notConnectedAtPublish(ctx.cfg, ctx.store, ctx.publishPeers, minions, await ctx.presenceGrains(minions), ctx.now()) : undefined;
  if (minions.length > notConnectedMinionsMax) presenceSkipped.line(`job ${jid} matched ${minions.length} minions, more than notConnectedMinionsMax (${notConnectedMinionsMax}): its salt/job/${jid}/new names none as not connected, and the CLI reports a minion that connected after the publish and never returned "[No response]", not "[Not connected]"`);
  ctx.fire(fx, `salt/job/${jid}/new`, { jid, tgt_type: tgtType, tgt, user, fun, arg, minions, missing, ...(peer ? { id: peer.id } : {}), ...(notConnected?.length ? { not_connected: notConnected } : {}) });
  markVerified(fx);
  const saved = { ...withoutCredentials(load), jid, tgt_type: tgtType, user, arg, ret: load.ret ?? "", ...(peer ? { id: peer.id } : {}) };
  await ctx.jobs.saveLoad(jid, saved, minions);
  if (saltJobFilesOn(ctx.cfg)) {
    try {
      writeSaltJobLoad(ctx.cfg, jid, saved, minions);
    } catch (e) {
      log.warning(`job ${jid}: Salt's job files (cachedir/jobs) could not be written: ${(e as Error).message}`);
    }
  }

  const pub: Record<string, unknown> = { fun, arg, tgt, jid, ret: typeof load.ret === "string" ? load.ret : "", ...(peer ? { id: peer.id } : {}), tgt_type: tgtType, user };
  if (delimiter !== ":") pub.delimiter = delimiter;
  for (const k of KWARGS_FORWARDED) if (kwargs[k] !== undefined) pub[k] = kwargs[k];
  if (typeof load.to === "number") pub.to = load.to;
  // which master the job came from (a syndic sends each return back to it), and, for the syndics of a
  // master of masters, the user's auth list (Salt's _prep_pub and publish with order_masters)
  const masterId = typeof kwargs.master_id === "string" ? kwargs.master_id : ctx.cfg.master_id;
  if (typeof masterId === "string" && masterId !== "") pub.master_id = masterId;
  if (ctx.cfg.order_masters) pub.auth_list = outcome.rights === "full" ? [] : outcome.rights;
  ctx.fire(fx, `salt/job/${jid}/publish`, pub);
  fx.publishes.push(pub);
  ctx.metrics.jobPublished(fun);
  log.info(`User ${user} Published command ${funs.join(",")} with jid ${jid}`);
  return clear({ jid, minions, missing });
}

/** A non-empty `auth_list` a syndic forwards replaces the full rights of the root key that carries it. */
function withSyndicAuthList<T extends { rights: unknown }>(outcome: T, authList: WireValue | undefined): T {
  if (!Array.isArray(authList) || authList.length === 0) return outcome;
  return { ...outcome, rights: authList };
}

/** The load as it may be saved and fired: no `key`, and no token or password in its kwargs. */
function withoutCredentials(load: Record<string, WireValue>): Record<string, WireValue> {
  const { key: _k, ...rest } = load;
  if (isMap(rest.kwargs)) {
    const kw: Record<string, WireValue> = { ...rest.kwargs };
    for (const k of KWARG_CREDENTIALS) delete kw[k];
    rest.kwargs = kw;
  }
  return rest;
}
